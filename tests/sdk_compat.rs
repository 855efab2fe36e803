//! Compatibility with the real CodeSpar Python SDK: builds (or reuses) a venv under
//! target/sdk-venv with codespar==0.14.0 from PyPI, starts the runtime in-process and runs
//! tests/sdk/compat.py against it. Missing python3/venv/pip fail with what to install.

use spyglass::runtime::{Policy, RuntimeConfig, start};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const SDK: &str = "codespar==0.14.0";
const KEY: &str = "csk_test_spyglass_compat";

fn venv_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"));
    target.join("sdk-venv")
}

fn run(cmd: &mut Command, what: &str, hint: &str) -> Output {
    let output = cmd
        .output()
        .unwrap_or_else(|err| panic!("{what}: cannot run ({err}). {hint}"));
    if !output.status.success() {
        panic!(
            "{what} failed ({}). {hint}\nstdout:\n{}\nstderr:\n{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    output
}

/// The venv's python with the SDK importable, creating the venv on first use.
fn sdk_python() -> PathBuf {
    let venv = venv_dir();
    let python = if cfg!(windows) {
        venv.join("Scripts").join("python.exe")
    } else {
        venv.join("bin").join("python")
    };
    let ready = python.exists()
        && Command::new(&python)
            .args([
                "-c",
                "import codespar, sys; sys.exit(codespar.__version__ != '0.14.0')",
            ])
            .status()
            .is_ok_and(|s| s.success());
    if ready {
        return python;
    }
    let install = "Install Python 3.10+ with the venv module and pip \
                   (Debian/Ubuntu: apt-get install python3 python3-venv python3-pip)";
    run(Command::new("python3").arg("--version"), "python3", install);
    run(
        Command::new("python3")
            .args(["-m", "venv", "--clear"])
            .arg(&venv),
        "python3 -m venv",
        install,
    );
    run(
        Command::new(&python).args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            SDK,
        ]),
        "pip install codespar==0.14.0",
        "pip needs to reach PyPI (or a mirror set in PIP_INDEX_URL)",
    );
    python
}

fn policy() -> Policy {
    Policy::from_toml(
        r#"
        [[rule]]
        id = "no_refunds"
        tool = "*/refund_*"
        action = "deny"

        [[rule]]
        id = "payments_require_approval"
        tool = "*/create_payment"
        action = "approval"
        when = "input.value > 1000"
        "#,
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_drives_every_path() {
    let python = tokio::task::spawn_blocking(sdk_python).await.unwrap();
    let handle = start(
        RuntimeConfig {
            test_mode: true,
            policy: policy(),
            api_keys: vec![KEY.to_owned()],
            ..RuntimeConfig::default()
        },
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/compat.py");
    let url = handle.url();
    let output = tokio::task::spawn_blocking(move || {
        Command::new(python)
            .arg(script)
            .env("CODESPAR_BASE_URL", url)
            .env("CODESPAR_API_KEY", KEY)
            .env_remove("CODESPAR_PROJECT_ID")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "tests/sdk/compat.py failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    assert!(stdout.contains("checks passed"), "{stdout}\n{stderr}");

    // What the SDK did is on the observer stream too.
    let frames = handle.runtime().events_since(0, 10_000);
    let count = |kind: &str| frames.iter().filter(|f| f.event.kind() == kind).count();
    assert!(count("session.created") >= 5);
    assert!(count("agent.completed") >= 2);
    assert_eq!(count("approval.replayed"), 1);
    handle.shutdown().await;
}
