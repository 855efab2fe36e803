//! A throwaway Postgres cluster for the tests and benches: `initdb` into a temp dir, run
//! as an unprivileged user on a free loopback port, stopped and removed when it is dropped
//! or (the shared one) when the test process exits; `fresh_database` gives a test its own.
//!
//! No test macros here: benches include this file too (`#[path = …]`, with
//! `#[allow(dead_code)]` for the parts they do not use). Postgres's
//! binaries are found on PATH or in `/usr/lib/postgresql/*/bin` (the highest version);
//! without them every caller fails, saying what to install: a missing database is never a
//! silent skip. As root (CI), the cluster runs as `postgres` (else `nobody`) through
//! `setpriv`, since `initdb` and `postgres` refuse to run as root.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// The superuser `initdb` creates, with trust authentication on loopback.
pub const USER: &str = "spyglass";

const INSTALL: &str = "install PostgreSQL (Debian: apt-get install postgresql)";

/// A cluster in a temp dir. `start` runs it; dropping it stops it (`-m immediate`) and
/// removes the dir.
pub struct Cluster {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
    run_as: Option<(u32, u32)>,
    started: bool,
    /// How long `initdb` took.
    pub init_took: Duration,
    /// How long the last `start` took (`pg_ctl -w` until it accepts connections).
    pub start_took: Duration,
}

impl Cluster {
    /// `initdb` into a fresh temp dir, not started; its port is picked now (free at the
    /// time), so a test can try to reach it before it runs.
    pub fn init() -> Cluster {
        let bin = bin_dir().unwrap_or_else(|| panic!("no PostgreSQL binaries found: {INSTALL}"));
        let dir = std::env::temp_dir().join(format!(
            "spyglass-pg-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
        let run_as = run_as();
        if let Some((uid, gid)) = run_as {
            std::os::unix::fs::chown(&dir, Some(uid), Some(gid))
                .unwrap_or_else(|e| panic!("chown {}: {e}", dir.display()));
        }
        let mut cluster = Cluster {
            bin,
            dir,
            port: free_port(),
            run_as,
            started: false,
            init_took: Duration::ZERO,
            start_took: Duration::ZERO,
        };
        // From here on, however this process ends, nothing of the cluster outlives it.
        guard(&cluster);
        let began = Instant::now();
        let data = cluster.data();
        cluster.run(
            "initdb",
            &[
                "-D",
                path_str(&data),
                "-A",
                "trust",
                "-U",
                USER,
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ],
        );
        cluster.init_took = began.elapsed();
        cluster
    }

    /// `init`, then `start`.
    pub fn start_new() -> Cluster {
        let mut cluster = Cluster::init();
        cluster.start();
        cluster
    }

    /// Starts it on 127.0.0.1 and its port, its unix socket in its dir; returns once it
    /// accepts connections (`pg_ctl -w`).
    pub fn start(&mut self) {
        let began = Instant::now();
        let data = self.data();
        let log = self.dir.join("postgres.log");
        let options = format!(
            "-c listen_addresses=127.0.0.1 -p {} -k {} -c fsync=off -c max_connections=400",
            self.port,
            self.dir.display()
        );
        self.run(
            "pg_ctl",
            &[
                "-D",
                path_str(&data),
                "-l",
                path_str(&log),
                "-o",
                &options,
                "-w",
                "-t",
                "60",
                "start",
            ],
        );
        self.started = true;
        self.start_took = began.elapsed();
    }

    /// Stops it at once (`-m immediate`, as a crash would), leaving its files.
    pub fn stop(&mut self) {
        if self.started {
            let data = self.data();
            self.run(
                "pg_ctl",
                &["-D", path_str(&data), "-m", "immediate", "-w", "stop"],
            );
            self.started = false;
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// A URL for `database` (which need not exist).
    pub fn url(&self, database: &str) -> String {
        format!("postgres://{USER}@127.0.0.1:{}/{database}", self.port)
    }

    /// A new empty database named after `name` (made unique), and its URL.
    pub fn fresh_database(&self, name: &str) -> String {
        let clean: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '_'
                }
            })
            .take(40)
            .collect();
        let database = format!("{clean}_{}", NEXT.fetch_add(1, Ordering::Relaxed));
        let admin = self.url("postgres");
        let sql = format!("CREATE DATABASE \"{database}\"");
        // Its own thread and runtime: callable from a sync test, an async one, or a bench.
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a tokio runtime for CREATE DATABASE");
            rt.block_on(async {
                let (client, conn) = tokio_postgres::connect(&admin, tokio_postgres::NoTls)
                    .await
                    .unwrap_or_else(|e| panic!("connect to {admin}: {e}"));
                let driver = tokio::spawn(conn);
                client
                    .batch_execute(&sql)
                    .await
                    .unwrap_or_else(|e| panic!("{sql}: {e:?}"));
                drop(client);
                let _ = driver.await;
            });
        })
        .join()
        .expect("CREATE DATABASE panicked");
        self.url(&database)
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// Runs one of Postgres's programs as the cluster's user; panics with its output
    /// when it fails.
    fn run(&self, program: &str, args: &[&str]) {
        let exe = self.bin.join(program);
        let out = self
            .command(program)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("run {}: {e} ({INSTALL})", exe.display()));
        if !out.status.success() {
            let log = std::fs::read_to_string(self.dir.join("postgres.log")).unwrap_or_default();
            panic!(
                "{program} {args:?} failed ({}):\n{}\n{}\nserver log:\n{log}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }

    /// One of Postgres's programs, as the cluster's user, in its dir.
    fn command(&self, program: &str) -> Command {
        let exe = self.bin.join(program);
        let mut cmd = match self.run_as {
            Some((uid, gid)) => {
                let mut cmd = Command::new("setpriv");
                cmd.arg(format!("--reuid={uid}"))
                    .arg(format!("--regid={gid}"))
                    .arg("--clear-groups")
                    .arg("--")
                    .arg(&exe);
                cmd
            }
            None => Command::new(&exe),
        };
        cmd.current_dir(&self.dir)
            .env("LC_ALL", "C")
            .stdin(Stdio::null());
        cmd
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if self.started {
            let data = self.data();
            let _ = self
                .command("pg_ctl")
                .args(["-D", path_str(&data), "-m", "immediate", "-w", "stop"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            // Whatever pg_ctl managed, no postmaster outlives its dir.
            kill_postmaster(&data);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

static SHARED: OnceLock<Cluster> = OnceLock::new();
static NEXT: AtomicU32 = AtomicU32::new(0);

/// The test process's one cluster, started on first use. Its guard process stops it and
/// removes its dir when this process exits (a static is never dropped).
pub fn cluster() -> &'static Cluster {
    SHARED.get_or_init(|| {
        let cluster = Cluster::start_new();
        eprintln!(
            "postgres test cluster on port {}: initdb {} ms, start {} ms",
            cluster.port,
            cluster.init_took.as_millis(),
            cluster.start_took.as_millis()
        );
        cluster
    })
}

/// A new empty database on the shared cluster, and its URL.
pub fn fresh_database(name: &str) -> String {
    cluster().fresh_database(name)
}

/// A detached shell that waits for this process to end, then stops the cluster
/// (SIGQUIT: immediate shutdown) and removes its dir: every cluster has one, so even a
/// test process that aborts or is killed leaves no postgres running. (A cluster dropped
/// before that is already gone; its guard then finds nothing to do.)
// Never waited for: it outlives this process by design (its parent's exit is its cue).
#[allow(clippy::zombie_processes)]
fn guard(cluster: &Cluster) {
    let script = r#"
while kill -0 "$1" 2>/dev/null; do sleep 0.2; done
pid=$(head -n 1 "$2/data/postmaster.pid" 2>/dev/null)
[ -n "$pid" ] && kill -QUIT "$pid" 2>/dev/null
for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
rm -rf "$2"
"#;
    Command::new("sh")
        .args(["-c", script, "spyglass-pg-guard"])
        .arg(std::process::id().to_string())
        .arg(&cluster.dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the cluster's guard (sh)");
}

/// SIGQUIT to the postmaster named in `data/postmaster.pid`, and a moment for it to go.
fn kill_postmaster(data: &Path) {
    let Some(pid) = std::fs::read_to_string(data.join("postmaster.pid"))
        .ok()
        .and_then(|text| text.lines().next().map(str::to_owned))
    else {
        return;
    };
    let _ = Command::new("kill").args(["-QUIT", &pid]).status();
    for _ in 0..50 {
        let alive = Command::new("kill")
            .args(["-0", &pid])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !alive {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = Command::new("kill").args(["-KILL", &pid]).status();
}

/// The directory holding `initdb`, `pg_ctl` and `postgres`: PATH first, else the highest
/// `/usr/lib/postgresql/N/bin`.
pub fn bin_dir() -> Option<PathBuf> {
    let has_all = |dir: &Path| {
        ["initdb", "pg_ctl", "postgres"]
            .iter()
            .all(|p| dir.join(p).is_file())
    };
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            if has_all(&dir) {
                // A symlinked pg_ctl (Debian's /usr/local/bin links) finds its siblings
                // through its real path.
                return Some(
                    std::fs::canonicalize(dir.join("pg_ctl"))
                        .ok()
                        .and_then(|p| p.parent().map(Path::to_path_buf))
                        .filter(|d| has_all(d))
                        .unwrap_or(dir),
                );
            }
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            Some((version, entry.path().join("bin")))
        })
        .filter(|(_, dir)| has_all(dir))
        .collect();
    versions.sort();
    versions.pop().map(|(_, dir)| dir)
}

/// As root, the uid and gid to run the cluster as: `postgres`, else `nobody`.
fn run_as() -> Option<(u32, u32)> {
    let id = |flag: &str, user: Option<&str>| -> Option<u32> {
        let out = Command::new("id").arg(flag).args(user).output().ok()?;
        if !out.status.success() {
            return None;
        }
        String::from_utf8_lossy(&out.stdout).trim().parse().ok()
    };
    if id("-u", None)? != 0 {
        return None;
    }
    ["postgres", "nobody"]
        .iter()
        .find_map(|user| Some((id("-u", Some(user))?, id("-g", Some(user))?)))
}

/// A port free on 127.0.0.1 now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 temp dir path")
}
