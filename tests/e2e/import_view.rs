//! `spyglass view`: other tools' results files (tests/fixtures/imports) played into the App
//! offline as `replay` plays a recording; the Evals tab lists their suites with the counts
//! the tools reported, and a hostile name reaches the screen escaped.

use crate::support::ui::{key, until};
use spyglass::client::ClientMsg;
use spyglass::client::replay::spawn_replay;
use spyglass::model::Limits;
use spyglass::roles::import::{ImportArgs, read_all, replay_text};
use spyglass::ui::{App, FakeClock, Watching};
use std::path::Path;
use std::sync::Arc;
use tokio::sync::mpsc;

const SIZE: (u16, u16) = (150, 30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imported_files_show_in_the_evals_tab_offline() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/imports");
    let temp = tempfile::tempdir().unwrap();
    let evil = temp.path().join("evil.xml");
    std::fs::write(
        &evil,
        "<testsuite name=\"evil\x1b[2J\" tests=\"1\"><testcase name=\"clear\x1b[31m\"/></testsuite>",
    )
    .unwrap();
    let files = vec![
        dir.join("pytest.xml"),
        dir.join("promptfoo.json"),
        dir.join("inspect.eval"),
        evil,
    ];
    let imported = read_all(&ImportArgs { files, suite: None }).unwrap();
    let text = replay_text(&imported);

    let clock = Arc::new(FakeClock::at("2026-11-23T21:00:00.000Z"));
    let mut app = App::new("imports", Limits::default(), clock);
    app.watching = Watching::Replay {
        file: "pytest.xml, promptfoo.json, inspect.eval".to_owned(),
    };
    let (tx, mut rx) = mpsc::channel::<ClientMsg>(1024);
    spawn_replay(text, 0.0, tx);
    key(&mut app, '3');
    let shown = until(&mut app, &mut rx, SIZE, "the imported suites", |s| {
        s.contains("Suites 4") && s.contains("arithmetic") && s.contains("seq 18")
    })
    .await;
    assert!(!shown.contains('\x1b'), "{shown:?}");
    assert!(shown.contains("evil\\e[2J"), "{shown}");
    // pytest: 2 of 5 judged passed (the skip is not judged); promptfoo 2 of 5; Inspect 4 of 6.
    // The suite's row in the list, the left pane only.
    let row = |name: &str| {
        shown
            .lines()
            .map(|l| l.chars().take(60).collect::<String>())
            .find(|l| l.contains(name) && l.contains('%'))
            .unwrap_or_default()
    };
    assert!(row("pytest").contains("40%"), "{shown}");
    assert!(row("greeting checks").contains("40%"), "{shown}");
    assert!(row("arithmetic").contains("67%"), "{shown}");
}
