//! The real `CodeSpar` Python SDK in a venv under target/sdk-venv (codespar==0.14.0 from
//! `PyPI`), built on first use and reused after; shared by the tests that drive it.
//! Missing python3/venv/pip fail with what to install, never a silent skip.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const SDK: &str = "codespar==0.14.0";

fn venv_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("target"),
        PathBuf::from,
    );
    target.join("sdk-venv")
}

fn run(cmd: &mut Command, what: &str, hint: &str) -> Output {
    let output = cmd
        .output()
        .unwrap_or_else(|err| panic!("{what}: cannot run ({err}). {hint}"));
    assert!(
        output.status.success(),
        "{what} failed ({}). {hint}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// The venv's python with the SDK importable, creating the venv on first use.
pub fn sdk_python() -> PathBuf {
    tool_python("sdk-venv", SDK, "codespar")
}

/// Runs `script` with the venv's `python` against the runtime at `url` with the API key
/// `key` (no project id), off the async runtime's threads; what it printed and its exit.
pub async fn run_script(
    python: PathBuf,
    script: PathBuf,
    url: String,
    key: &'static str,
) -> Output {
    tokio::task::spawn_blocking(move || {
        Command::new(python)
            .arg(script)
            .env("CODESPAR_BASE_URL", url)
            .env("CODESPAR_API_KEY", key)
            .env_remove("CODESPAR_PROJECT_ID")
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

/// Held while a venv is checked or built: two tests of one binary building it at once
/// would `--clear` each other's half-made venv.
static BUILDING_TOOL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A venv of its own under target/`name` with `requirement` (e.g. `pytest==9.2.0`) from
/// `PyPI`, built on first use and reused while `module` imports; its python.
pub fn tool_python(name: &str, requirement: &str, module: &str) -> PathBuf {
    tools_python(name, &[requirement], module)
}

/// As `tool_python`, with several requirements installed together; the first names the
/// distribution whose version says the venv is ready.
pub fn tools_python(name: &str, requirements: &[&str], module: &str) -> PathBuf {
    let requirement = requirements[0];
    // A test that panicked while building leaves the lock poisoned; the next one rebuilds.
    let _building = BUILDING_TOOL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let venv = venv_dir().with_file_name(name);
    let python = if cfg!(windows) {
        venv.join("Scripts").join("python.exe")
    } else {
        venv.join("bin").join("python")
    };
    let wanted = requirement.split_once("==").map_or("", |(_, v)| v);
    let check = format!(
        "import importlib.metadata as m, sys; sys.exit(m.version('{module}') != '{wanted}')"
    );
    let ready = python.exists()
        && Command::new(&python)
            .args(["-c", &check])
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
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .args(requirements),
        &format!("pip install {}", requirements.join(" ")),
        "pip needs to reach PyPI (or a mirror set in PIP_INDEX_URL)",
    );
    python
}
