//! `spyglass --print-config` as a user runs it: the real binary, a config directory of
//! its own, and what comes out on stdout/stderr with the exit code.

use std::path::Path;
use std::process::{Command, Output};

fn spyglass(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_spyglass"))
        .args(args)
        .env_clear()
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join("cfg"))
        .env("XDG_STATE_HOME", home.join("state"))
        .output()
        .unwrap()
}

fn write_config(home: &Path, text: &str) {
    let dir = home.join("cfg/spyglass");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), text).unwrap();
}

#[test]
fn print_config_shows_values_sources_and_paths_and_exits_zero() {
    let home = tempfile::tempdir().unwrap();
    write_config(
        home.path(),
        "url = \"http://127.0.0.1:8123\"\napi_key = \"csk_test_hush\"\n[keys]\napprove = \"A\"\n",
    );
    let out = spyglass(
        home.path(),
        &["--print-config", "--theme", "light", "--no-mouse"],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    let line = |name: &str| {
        stdout
            .lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("no {name} line in:\n{stdout}"))
            .to_string()
    };
    assert!(
        line("url ").contains("http://127.0.0.1:8123") && line("url ").contains("(config file)")
    );
    assert!(line("theme ").contains("light") && line("theme ").contains("(flag --theme)"));
    assert!(line("mouse ").contains("false") && line("mouse ").contains("(flag --no-mouse)"));
    assert!(
        line("keys.approve ").contains(" A "),
        "{}",
        line("keys.approve ")
    );
    assert!(line("api_key ").contains("csk_test_****"));
    assert!(!stdout.contains("hush"), "API key leaked:\n{stdout}");
    let root = home.path().display().to_string();
    assert!(line("config file").contains(&format!("{root}/cfg/spyglass/config.toml (found)")));
    assert!(line("theme dir").contains(&format!("{root}/cfg/spyglass/themes")));
    assert!(line("log file").contains(&format!("{root}/state/spyglass/spyglass.log")));
}

#[test]
fn a_broken_config_file_is_reported_with_its_path_and_a_nonzero_exit() {
    let home = tempfile::tempdir().unwrap();
    write_config(home.path(), "[history]\nevents = \"lots\"\n");
    let out = spyglass(home.path(), &["--print-config"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("config.toml"), "{stderr}");
    assert!(
        stderr.contains("`history.events`") && stderr.contains("\"lots\""),
        "{stderr}"
    );
}

#[test]
fn an_unknown_theme_flag_is_an_error() {
    let home = tempfile::tempdir().unwrap();
    let out = spyglass(home.path(), &["--print-config", "--theme", "neon"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("neon") && stderr.contains("high-contrast"),
        "{stderr}"
    );
}
