//! The real `spyglass` binary as the CLI tests run it: a clean environment (no runtime URL
//! or key leaking in from the developer's shell), Ctrl-C, and bounded waits for its exit
//! and for the lines a recorder writes.

use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A data directory for the binaries the tests start, so a runtime on its default store
/// never writes to the user's `$XDG_DATA_HOME`. One per test process, left in the temp dir.
pub fn test_data_home() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("spyglass-test-data-{}", std::process::id()))
}

/// The binary with `args`, stdin closed and stderr captured.
pub fn spyglass(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_spyglass"));
    cmd.args(args)
        .env("XDG_DATA_HOME", test_data_home())
        .env_remove("SPYGLASS_URL")
        .env_remove("CODESPAR_BASE_URL")
        .env_remove("CODESPAR_API_KEY")
        .stdin(Stdio::null())
        .stderr(Stdio::piped());
    cmd
}

/// Its exit status, or a panic (after killing it) when it is still running after `within`.
pub fn wait_exit(child: &mut Child, within: Duration) -> ExitStatus {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("spyglass did not exit within {within:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Ctrl-C, as a terminal sends it.
pub fn interrupt(child: &Child) {
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("the `kill` command (procps) is needed to send Ctrl-C");
    assert!(status.success());
}

/// Waits (up to 10 s) until the file at `path` holds at least `lines` lines.
pub async fn wait_for_lines(path: &Path, lines: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.lines().count() >= lines {
            break;
        }
    }
}

/// Runs argv (after the first argument) in a new PTY of 30x100, relays everything it prints
/// to stdout, answers each `ESC[6n` with a cursor position, and exits with the child's
/// status; the first argument is a file whose appearance types `q`, or `-` for none.
/// Gives up after 60 s. Run as `python3 -c PTY_DRIVER STOP ARGV…`.
pub const PTY_DRIVER: &str = r#"
import fcntl, os, pty, select, struct, sys, termios, time
stop = sys.argv[1]
pid, fd = pty.fork()
if pid == 0:
    fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    os.execvp(sys.argv[2], sys.argv[2:])
out = bytearray()
answered = 0
quit_sent = False
deadline = time.time() + 60
while time.time() < deadline:
    if stop != "-" and not quit_sent and os.path.exists(stop):
        os.write(fd, b"q")
        quit_sent = True
    ready, _, _ = select.select([fd], [], [], 0.1)
    if not ready:
        continue
    try:
        chunk = os.read(fd, 65536)
    except OSError:
        break
    if not chunk:
        break
    out += chunk
    while out.count(b"\x1b[6n") > answered:
        os.write(fd, b"\x1b[1;1R")
        answered += 1
sys.stdout.buffer.write(bytes(out))
sys.stdout.flush()
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"#;

/// `python3`, which drives the pseudo-terminal; a clear failure when it is missing.
pub fn python3() -> &'static str {
    let found = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    assert!(
        found,
        "this test drives a pseudo-terminal with python3's pty module: install python3 (apt-get install python3)"
    );
    "python3"
}

/// A `spyglass serve` the test started, killed when the test ends, pass or fail.
pub struct Served(pub Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `command` (a `serve` on `127.0.0.1:0`) and reads its stderr until the line that
/// announces its URL; the rest of stderr is drained so it never blocks on a full pipe.
/// The child, the URL and that line.
pub async fn start_serve(mut command: Command) -> (Served, String, String) {
    let mut child = Served(command.stdout(Stdio::null()).spawn().unwrap());
    let stderr = child.0.stderr.take().unwrap();
    let (url, line) = tokio::task::spawn_blocking(move || {
        use std::io::BufRead;
        let mut lines = std::io::BufReader::new(stderr).lines();
        let found = lines
            .find_map(|line| {
                let line = line.ok()?;
                let at = line.find("http://")?;
                let url = line[at..].split_whitespace().next()?.to_owned();
                Some((url, line))
            })
            .unwrap_or_default();
        std::thread::spawn(move || for _ in lines {});
        found
    })
    .await
    .unwrap();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    (child, url, line)
}

/// `workers` clients calling `tool` on `session` at `url` until it stops answering 200
/// (exhausted, or the runtime gone); each answer's `data.n` is pushed to `served` as it
/// arrives.
pub async fn consume_entries(
    url: &str,
    session: &str,
    tool: &str,
    workers: usize,
    served: &std::sync::Arc<std::sync::Mutex<Vec<u64>>>,
) {
    let client = reqwest::Client::new();
    let mut tasks = Vec::new();
    for _ in 0..workers {
        let (client, served) = (client.clone(), served.clone());
        let endpoint = format!("{url}/v1/sessions/{session}/execute");
        let body = serde_json::json!({"tool": tool, "input": {}});
        tasks.push(tokio::spawn(async move {
            loop {
                let Ok(response) = client.post(&endpoint).json(&body).send().await else {
                    return;
                };
                if response.status().as_u16() != 200 {
                    return;
                }
                let Ok(answer) = response.json::<serde_json::Value>().await else {
                    return;
                };
                served
                    .lock()
                    .unwrap()
                    .push(answer["data"]["n"].as_u64().unwrap());
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
}

/// The kill scenario both kill tests share: a session on `url` whose `tool` is a stateful
/// mock of `entries` entries (`{"n": 0}`, `{"n": 1}`, …), `workers` clients consuming it,
/// and `server` killed with SIGKILL (no shutdown, no flush) once a third is answered.
/// The session and the entries answered 200 before the kill, in answer order.
pub async fn kill_mid_consumption(
    server: &mut Served,
    url: &str,
    tool: &str,
    entries: usize,
    workers: usize,
) -> (String, Vec<u64>) {
    use std::sync::{Arc, Mutex};
    let mocks: Vec<serde_json::Value> = (0..entries)
        .map(|n| serde_json::json!({ "n": n }))
        .collect();
    let session = super::runtime::Api::at(url)
        .session(serde_json::json!({ tool: mocks }))
        .await;
    let before = Arc::new(Mutex::new(Vec::new()));
    let consumer = {
        let (url, session, tool, before) = (
            url.to_owned(),
            session.clone(),
            tool.to_owned(),
            before.clone(),
        );
        tokio::spawn(async move { consume_entries(&url, &session, &tool, workers, &before).await })
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while before.lock().unwrap().len() < entries / 3 {
        assert!(Instant::now() < deadline, "the calls did not get going");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    server.0.kill().unwrap();
    server.0.wait().unwrap();
    consumer.await.unwrap();
    let answered = before.lock().unwrap().clone();
    assert!(answered.len() < entries, "killed in the middle");
    (session, answered)
}
