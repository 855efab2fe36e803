//! `spyglass eval --html` as a user runs it: the real binary writes one self-contained
//! page, checked as text (escaping, no address outside the page) and in a real headless
//! Chromium (the DOM it builds has no element the agent's text tried to inject, and a
//! screenshot of the page is taken and is not empty).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const CHROMIUM: &str = "/usr/bin/chromium";

fn spyglass(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_spyglass"))
        .args(args)
        .env_remove("SPYGLASS_URL")
        .env_remove("CODESPAR_BASE_URL")
        .env_remove("CODESPAR_API_KEY")
        .output()
        .unwrap()
}

/// The agent answers with markup meant to run in whoever opens the report.
const SUITE: &str = r#"
suite = "hostile <suite>"

[defaults]
servers = ["asaas"]
mocks = { "asaas/create_payment" = { id = "pay_1" } }

[[case]]
id = "injects"
input = "Charge"
model = { sequence = [
  { tool_calls = [ { name = "asaas/create_payment", arguments = { value = 5 } } ] },
  { tool_calls = [ { name = "asaas/refund", arguments = { id = "pay_1" } } ] },
  { text = "</pre></td><script>document.title='pwned'</script><img src=\"https://evil.example/x.png\" onerror=\"alert(1)\">" },
] }
[case.assert]
equals = "Charged pay_1"

[[case]]
id = "fine"
input = "Hi"
model = { default_text = "hello" }
[case.assert]
contains = "hello"
"#;

fn report(dir: &Path) -> (PathBuf, String) {
    let suite = dir.join("hostile.toml");
    std::fs::write(&suite, SUITE).unwrap();
    let html = dir.join("report.html");
    let out = spyglass(&[
        "eval",
        suite.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "one case fails: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = std::fs::read_to_string(&html).unwrap();
    (html, page)
}

/// Runs Chromium headless with the flags this machine needs (no background networking:
/// its connections are refused here), killed after 90 s.
fn chromium(dir: &Path, args: &[&str]) -> Output {
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} not found: the HTML report is checked in a real browser; install it with `apt-get install chromium`"
    );
    let profile = tempfile::tempdir_in(dir).unwrap();
    let child = Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let id = child.id();
    let waiter = std::thread::spawn(move || child.wait_with_output().unwrap());
    while !waiter.is_finished() {
        if started.elapsed() > Duration::from_secs(90) {
            let _ = Command::new("kill").arg(id.to_string()).status();
            panic!("chromium did not finish within 90 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    waiter.join().unwrap()
}

#[test]
fn the_report_escapes_the_agents_text_and_names_no_outside_address() {
    let dir = tempfile::tempdir().unwrap();
    let (_, page) = report(dir.path());
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(!page.contains("<script"), "{page}");
    assert!(!page.contains("<img"), "{page}");
    assert!(page.contains("&lt;script&gt;document.title=&apos;pwned&apos;&lt;/script&gt;"));
    assert!(page.contains("hostile &lt;suite&gt;"));
    for banned in [
        "src=\"", "href=\"", "src='", "href='", "url(", "@import", "<link",
    ] {
        assert!(!page.contains(banned), "{banned} in the page");
    }
    // Suite table, the failed assertion's diff, the failing case's timeline with the
    // call that had no mock, the trend.
    assert!(page.contains("<table id=\"suites\">"));
    assert!(
        page.contains("<span class=\"del\">- Charged pay_1</span>"),
        "{page}"
    );
    assert_eq!(
        page.matches("<table class=\"timeline\">").count(),
        1,
        "{page}"
    );
    assert!(page.contains("<code>asaas/create_payment</code>"));
    assert!(page.contains("tool_not_mocked"));
    assert!(
        page.contains("<polyline") || page.contains("<circle"),
        "{page}"
    );
}

#[test]
fn chromium_renders_the_report_without_running_or_loading_anything() {
    let dir = tempfile::tempdir().unwrap();
    let (html, _) = report(dir.path());
    let url = format!("file://{}", html.display());
    // The DOM the browser built: the agent's markup is text, not elements.
    let out = chromium(dir.path(), &["--dump-dom", &url]);
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(
        dom.contains("<table id=\"suites\">"),
        "chromium did not load the page: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!dom.contains("<script"), "{dom}");
    assert!(!dom.contains("<img"), "{dom}");
    assert!(!dom.contains("pwned</title>"), "{dom}");
    assert!(
        dom.contains("&lt;script&gt;document.title='pwned'&lt;/script&gt;"),
        "{dom}"
    );
    // A screenshot of the rendered page.
    let png = dir.path().join("report.png");
    let out = chromium(
        dir.path(),
        &[
            &format!("--screenshot={}", png.display()),
            "--window-size=1280,1600",
            &url,
        ],
    );
    let bytes = std::fs::read(&png).unwrap_or_else(|err| {
        panic!(
            "no screenshot ({err}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    assert!(
        bytes.len() > 10_000,
        "a near-empty screenshot: {} bytes",
        bytes.len()
    );
}
