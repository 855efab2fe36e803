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
