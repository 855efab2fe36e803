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

/// `[history] max_mib` sets the inspector's byte budget: shown by `--print-config` with
/// its source, defaulting to 256, and out of range or of the wrong kind refused by name.
#[test]
fn history_max_mib_is_printed_with_its_source_and_checked() {
    let home = tempfile::tempdir().unwrap();
    let max_mib_line = |out: &Output| {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find(|l| l.trim_start().starts_with("history.max_mib "))
            .unwrap_or_else(|| panic!("no history.max_mib line: {out:?}"))
            .to_string()
    };
    let out = spyglass(home.path(), &["--print-config"]);
    assert!(out.status.success(), "{out:?}");
    let line = max_mib_line(&out);
    assert!(
        line.contains(" 256 ") && line.contains("(default)"),
        "{line}"
    );

    write_config(home.path(), "[history]\nmax_mib = 64\n");
    let out = spyglass(home.path(), &["--print-config"]);
    assert!(out.status.success(), "{out:?}");
    let line = max_mib_line(&out);
    assert!(
        line.contains(" 64 ") && line.contains("(config file)"),
        "{line}"
    );

    for (value, shown) in [
        ("0", "= 0"),
        ("65537", "65537"),
        ("\"256MiB\"", "\"256MiB\""),
    ] {
        write_config(home.path(), &format!("[history]\nmax_mib = {value}\n"));
        let out = spyglass(home.path(), &["--print-config"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{value} accepted");
        assert!(
            stderr.contains("`history.max_mib`")
                && stderr.contains(shown)
                && stderr.contains("expected a whole number from 1 to 65536"),
            "{value}: {stderr}"
        );
    }
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

/// `--help` and `--print-config` name the log file through one XDG resolver: a relative
/// `XDG_STATE_HOME` is invalid (XDG spec) and both ignore it for `$HOME/.local/state`.
#[test]
fn help_and_print_config_ignore_a_relative_state_home_alike() {
    let home = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_spyglass"))
            .args(args)
            .env_clear()
            .env("HOME", home.path())
            .env("XDG_CONFIG_HOME", home.path().join("cfg"))
            .env("XDG_STATE_HOME", "relative/state")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let expected = home
        .path()
        .join(".local/state/spyglass/spyglass.log")
        .display()
        .to_string();
    let help = run(&["--help"]);
    assert!(
        help.contains(&format!("Logs are written to {expected}")),
        "{help}"
    );
    let config = run(&["--print-config"]);
    let line = config.lines().find(|l| l.contains("log file")).unwrap();
    assert!(line.ends_with(&expected), "{line}");
    assert!(!help.contains("relative/state") && !config.contains("relative/state"));
}

/// The exit-code table (src/roles): bad input is 2 in every role, and the message names
/// the role it came from.
#[test]
fn a_malformed_url_exits_two_in_every_role_that_follows_a_runtime() {
    let home = tempfile::tempdir().unwrap();
    let output = home.path().join("out.jsonl");
    let output = output.to_str().unwrap();
    for (args, prefix) in [
        (vec!["--url", "not a url"], "spyglass: "),
        (vec!["tail", "--url", "not a url"], "spyglass tail: "),
        (
            vec!["record", "-o", output, "--url", "not a url"],
            "spyglass record: ",
        ),
    ] {
        let out = spyglass(home.path(), &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.starts_with(prefix) && stderr.contains("bad runtime URL `not a url`"),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn a_broken_config_file_exits_two_before_any_role_starts() {
    let home = tempfile::tempdir().unwrap();
    write_config(home.path(), "[history]\nevents = \"lots\"\n");
    for args in [
        vec!["--print-config"],
        vec![],
        vec!["demo"],
        vec!["tail", "--url", "http://127.0.0.1:9"],
        vec!["replay", "missing.jsonl"],
    ] {
        let out = spyglass(home.path(), &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("`history.events`"), "{args:?}: {stderr}");
    }
}

#[test]
fn a_key_bound_over_another_action_is_refused_naming_both() {
    let home = tempfile::tempdir().unwrap();
    write_config(home.path(), "[keys]\napprove = \"y\"\n");
    let out = spyglass(home.path(), &["--print-config"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("binds `y` to both `copy` and `approve`")
            && stderr.contains("on the Approvals tab")
            && stderr.contains("config.toml"),
        "{stderr}"
    );
    // The same key on two tabs, or in the modal prompt, is fine.
    write_config(home.path(), "[keys]\nrerun_case = \"f\"\nnote = \"a\"\n");
    assert!(spyglass(home.path(), &["--print-config"]).status.success());
}

#[test]
fn serve_help_lists_only_what_serve_reads() {
    let home = tempfile::tempdir().unwrap();
    let out = spyglass(home.path(), &["serve", "--help"]);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for used in ["--addr", "--policy", "--api-key", "--store", "--test-mode"] {
        assert!(help.contains(used), "{used} missing:\n{help}");
    }
    for unused in ["--url", "--theme", "--no-mouse", "--print-config"] {
        assert!(!help.contains(unused), "{unused} listed:\n{help}");
    }
    let out = spyglass(
        home.path(),
        &["serve", "--theme", "light", "--addr", "127.0.0.1:0"],
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("unexpected argument '--theme'"), "{stderr}");
    // The roles that follow a runtime take its flags.
    let tail = spyglass(home.path(), &["tail", "--help"]);
    assert!(String::from_utf8_lossy(&tail.stdout).contains("--url"));
}

/// `--project` over `SPYGLASS_PROJECT` over the file's `project`, printed with its source;
/// a value that cannot travel as a header is refused, exit 2, wherever it came from.
#[test]
fn project_comes_from_flag_env_or_file_and_a_bad_one_is_refused() {
    let home = tempfile::tempdir().unwrap();
    write_config(home.path(), "project = \"prj_fromfile\"\n");
    let project_line = |out: &Output| {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find(|l| l.trim_start().starts_with("project "))
            .unwrap_or_default()
            .to_owned()
    };
    let out = spyglass(home.path(), &["--print-config"]);
    assert!(
        project_line(&out).contains("prj_fromfile") && project_line(&out).contains("(config file)")
    );
    let out = spyglass(home.path(), &["--print-config", "--project", "prj_flag"]);
    assert!(
        project_line(&out).contains("prj_flag") && project_line(&out).contains("(flag --project)")
    );
    let out = Command::new(env!("CARGO_BIN_EXE_spyglass"))
        .args(["--print-config"])
        .env_clear()
        .env("HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path().join("cfg"))
        .env("SPYGLASS_PROJECT", "prj_env")
        .output()
        .unwrap();
    assert!(
        project_line(&out).contains("prj_env")
            && project_line(&out).contains("(env SPYGLASS_PROJECT)")
    );

    let out = spyglass(home.path(), &["--print-config", "--project", "two words"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("flag --project") && stderr.contains("visible ASCII"),
        "{stderr}"
    );
    write_config(home.path(), "project = \"\\u001b[31mred\"\n");
    let out = spyglass(home.path(), &["--print-config"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("`project`") && !stderr.contains('\u{1b}'),
        "{stderr}"
    );
}

/// The inspector's display flags mean nothing to the roles that print lines: refused by
/// clap, exit 2, naming the flag, and absent from their `--help`.
#[test]
fn display_flags_are_refused_by_the_line_printing_roles() {
    let home = tempfile::tempdir().unwrap();
    for (args, role, flag) in [
        (
            vec!["eval", "suite.toml", "--theme", "light"],
            "eval",
            "--theme",
        ),
        (vec!["tail", "--no-mouse"], "tail", "--no-mouse"),
        (
            vec!["record", "-o", "x.jsonl", "--theme", "dark"],
            "record",
            "--theme",
        ),
        (
            vec!["import", "results.xml", "--no-mouse"],
            "import",
            "--no-mouse",
        ),
    ] {
        let out = spyglass(home.path(), &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(&format!("unexpected argument '{flag}'")),
            "{args:?}: {stderr}"
        );
        let help = spyglass(home.path(), &[role, "--help"]);
        let help = String::from_utf8_lossy(&help.stdout);
        assert!(
            !help.contains("--theme") && !help.contains("--no-mouse"),
            "{help}"
        );
    }
    assert!(!home.path().join("x.jsonl").exists());
}

/// A role's flags go after it: one given before the subcommand is refused, exit 2, and
/// nothing runs.
#[test]
fn a_flag_before_the_subcommand_is_refused() {
    let home = tempfile::tempdir().unwrap();
    for args in [
        vec!["--url", "http://127.0.0.1:9", "tail"],
        vec!["--theme", "dark", "record", "-o", "x.jsonl"],
    ] {
        let out = spyglass(home.path(), &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(args[0]), "{args:?}: {stderr}");
    }
    assert!(!home.path().join("x.jsonl").exists());
}

/// `--url` over `SPYGLASS_URL` over `CODESPAR_BASE_URL` over the file, `--api-key` over
/// `CODESPAR_API_KEY`, each printed with its source; an empty variable counts as unset.
#[test]
fn url_and_key_come_from_flag_then_each_variable_in_turn() {
    let home = tempfile::tempdir().unwrap();
    write_config(home.path(), "url = \"http://file:1\"\n");
    let print = |args: &[&str], vars: &[(&str, &str)]| {
        let out = Command::new(env!("CARGO_BIN_EXE_spyglass"))
            .arg("--print-config")
            .args(args)
            .env_clear()
            .env("HOME", home.path())
            .env("XDG_CONFIG_HOME", home.path().join("cfg"))
            .envs(vars.iter().copied())
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let line = |text: &str, name: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_default()
            .to_owned()
    };
    let base = ("CODESPAR_BASE_URL", "http://codespar:2");
    let text = print(&[], &[base, ("CODESPAR_API_KEY", "csk_test_fromenv")]);
    assert!(
        line(&text, "url ").contains("http://codespar:2")
            && line(&text, "url ").contains("(env CODESPAR_BASE_URL)"),
        "{text}"
    );
    assert!(
        line(&text, "api_key ").contains("(env CODESPAR_API_KEY)") && !text.contains("fromenv"),
        "{text}"
    );
    let text = print(&[], &[base, ("SPYGLASS_URL", "http://spyglass:3")]);
    assert!(line(&text, "url ").contains("(env SPYGLASS_URL)"), "{text}");
    let text = print(&[], &[base, ("SPYGLASS_URL", "")]);
    assert!(
        line(&text, "url ").contains("(env CODESPAR_BASE_URL)"),
        "{text}"
    );
    let text = print(
        &["--url", "http://flag:4", "--api-key", "csk_live_flag"],
        &[
            base,
            ("SPYGLASS_URL", "http://spyglass:3"),
            ("CODESPAR_API_KEY", "k"),
        ],
    );
    assert!(
        line(&text, "url ").contains("http://flag:4")
            && line(&text, "url ").contains("(flag --url)"),
        "{text}"
    );
    assert!(
        line(&text, "api_key ").contains("(flag --api-key)"),
        "{text}"
    );
    let text = print(&[], &[("SPYGLASS_URL", "")]);
    assert!(line(&text, "url ").contains("(config file)"), "{text}");
}

/// clap's refusals read like every other error, `spyglass <role>: <message>` on the first
/// line, and keep clap's tip and usage line; exit 2.
#[test]
fn usage_errors_name_the_role_like_every_other_error() {
    let home = tempfile::tempdir().unwrap();
    for (args, first, usage) in [
        (
            vec!["tail", "--bogus"],
            "spyglass tail: unexpected argument '--bogus'",
            "Usage: spyglass tail",
        ),
        (
            vec!["store", "migrate", "--nope"],
            "spyglass store migrate: unexpected argument '--nope'",
            "Usage: spyglass store migrate",
        ),
        (
            vec!["replay"],
            "spyglass replay: the following required arguments were not provided",
            "Usage: spyglass replay",
        ),
        (
            vec!["eval", "compare", "--bogus"],
            "spyglass eval: unexpected argument '--bogus'",
            "Usage: spyglass eval compare",
        ),
        (
            vec!["--bogus"],
            "spyglass: unexpected argument '--bogus'",
            "Usage: spyglass",
        ),
        (
            vec!["tial"],
            "spyglass: unrecognized subcommand 'tial'",
            "Usage: spyglass",
        ),
    ] {
        let out = spyglass(home.path(), &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        let line = stderr.lines().next().unwrap_or_default();
        assert!(line.starts_with(first), "{args:?}: {stderr}");
        assert!(!stderr.contains("error:"), "{args:?}: {stderr}");
        assert!(stderr.contains(usage), "{args:?}: {stderr}");
        assert!(stderr.contains("--help"), "{args:?}: {stderr}");
    }
    // Help is still help: stdout, exit 0.
    let help = spyglass(home.path(), &["tail", "--help"]);
    assert!(help.status.success(), "{help:?}");
}
