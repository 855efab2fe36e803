//! End to end: the inspector pointed where nothing listens, or at a runtime that refuses
//! its key, says why in the Sessions pane (not only in a status bar a small terminal cuts)
//! and what to do, over the real observer WebSocket client.

use crate::support::runtime::{rebindable_addr, test_config};
use crate::support::ui::{Live, NOW, screen, until};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use spyglass::runtime::{RuntimeConfig, start};
use spyglass::ui::{FakeClock, InspectorConfig, Source, Wired, wire};
use std::sync::Arc;

/// The Sessions pane's text (the left box of the screen), its wrapped lines joined.
fn sessions_pane(screen: &str) -> String {
    let words: Vec<&str> = screen
        .lines()
        .skip(2)
        .filter_map(|l| l.strip_prefix('│'))
        .filter_map(|l| l.split('│').next())
        .flat_map(str::split_whitespace)
        .collect();
    words.join(" ")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_listening_is_said_in_the_pane_with_what_to_do() {
    // A port bound a moment ago and let go: nothing listens there now.
    let url = format!("http://{}", rebindable_addr());
    let Live {
        mut app,
        mut rx,
        observer,
    } = Live::watching(&url);
    let want = format!(
        "No sessions. Cannot reach {url}: connection refused — is `spyglass serve` running?"
    );
    for size in [(80, 24), (100, 30), (200, 50)] {
        let text = until(&mut app, &mut rx, size, "connection refused", |s| {
            sessions_pane(s).contains(&want)
        })
        .await;
        assert!(!text.contains("Waiting for"), "{text}");
    }
    // Approvals and Events say it too, not that they wait.
    for (tab, empty) in [
        ('2', "No approvals. Cannot reach"),
        ('4', "No events. Cannot reach"),
    ] {
        app.on_key(KeyEvent::new(KeyCode::Char(tab), KeyModifiers::NONE));
        let text = screen(&mut app, 100, 30);
        let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(words.contains(empty), "{text}");
    }
    observer.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_key_is_said_in_the_pane_with_how_to_pass_one() {
    let handle = start(
        RuntimeConfig {
            api_keys: vec!["csk_test_right".to_owned()],
            ..test_config()
        },
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let url = handle.url();
    let config = InspectorConfig {
        api_key: Some("csk_test_wrong".to_owned()),
        ..InspectorConfig::new(&url)
    };
    let Wired {
        mut app,
        mut rx,
        feed,
    } = wire(config, Arc::new(FakeClock::at(NOW)), Source::Live).unwrap();
    for size in [(80, 24), (100, 30), (200, 50)] {
        let text = until(&mut app, &mut rx, size, "401", |s| {
            sessions_pane(s).contains("401: ")
        })
        .await;
        let pane = sessions_pane(&text);
        assert!(
            pane.contains(&format!(
                "No sessions. 401: {url} refused the API key — pass --api-key KEY or set \
                 CODESPAR_API_KEY"
            )),
            "{pane}\n{text}"
        );
        // The status bar still keeps the way to help.
        assert!(text.lines().last().unwrap().contains("? help"), "{text}");
    }
    feed.abort();
}
