//! The inspector in a real pseudo-terminal: a panic forced after the terminal is set up
//! (`SPYGLASS_DEBUG_PANIC=1`, debug builds only) must leave the alternate screen and hand
//! the terminal back in cooked mode (canonical input, echo), so the user's shell works.
//!
//! The PTY is driven by python3's `pty` module (no crate, no unsafe here). It plays the
//! terminal: it answers the cursor-position queries the inspector sends while starting.

use crate::support::cli::{PTY_DRIVER, python3};
use std::process::Command;

#[test]
fn a_panic_restores_the_terminal() {
    let state = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_spyglass");
    // The shell runs the inspector (no --url: it starts its own runtime on 127.0.0.1),
    // then reads the terminal's modes with stty in the same PTY once the inspector is gone.
    let shell = format!("'{bin}'; echo \"EXIT=$?\"; stty -a");
    let out = Command::new(python3())
        .args(["-c", PTY_DRIVER, "-", "sh", "-c", &shell])
        .env("SPYGLASS_DEBUG_PANIC", "1")
        .env("XDG_STATE_HOME", state.path())
        .env("XDG_DATA_HOME", state.path())
        .env("TERM", "xterm-256color")
        .env_remove("SPYGLASS_URL")
        .env_remove("CODESPAR_BASE_URL")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "pty driver failed: {out:?}\n{text}");

    let entered = text
        .find("\x1b[?1049h")
        .unwrap_or_else(|| panic!("never entered the alternate screen:\n{text:?}"));
    let left = text[entered..].find("\x1b[?1049l").map_or_else(
        || panic!("did not leave the alternate screen after the panic:\n{text:?}"),
        |at| at + entered,
    );
    let panic_at = text
        .find("SPYGLASS_DEBUG_PANIC=1: forced panic")
        .unwrap_or_else(|| panic!("the forced panic did not happen:\n{text:?}"));
    assert!(
        panic_at > left,
        "the panic message must be printed on the normal screen, after the restore:\n{text:?}"
    );
    assert!(text.contains("EXIT=101"), "a panic exits 101:\n{text:?}");

    // stty -a lists each mode as `name` (on) or `-name` (off).
    let modes: Vec<&str> = text
        .split_once("EXIT=101")
        .map(|(_, after)| after)
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    for mode in ["icanon", "echo", "isig", "icrnl", "opost"] {
        assert!(
            modes.contains(&mode),
            "terminal left without `{mode}` (still in raw mode?): {modes:?}"
        );
    }
    // The hook also wrote the panic to the log file, not only to the screen.
    let log = std::fs::read_to_string(state.path().join("spyglass/spyglass.log")).unwrap();
    assert!(log.contains("SPYGLASS_DEBUG_PANIC=1"), "{log}");
}
