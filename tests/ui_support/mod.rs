//! What the inspector's screen tests share: the screen as text, keys typed into the App,
//! and a wait that folds client messages until the screen shows what a test expects.
#![allow(dead_code)] // each test binary uses its own part of this

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use spyglass::client::ClientMsg;
use spyglass::ui::App;
use spyglass::ui::render::draw;
use std::time::Duration;
use tokio::sync::mpsc;

/// The app drawn once into a `width`×`height` buffer, one line per row, trailing blanks cut.
pub fn screen(app: &mut App, width: u16, height: u16) -> String {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal.draw(|f| draw(f, app)).unwrap();
    let buf = terminal.backend().buffer();
    let mut out = String::new();
    for y in 0..buf.area.height {
        let mut line = String::new();
        for x in 0..buf.area.width {
            line.push_str(buf[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Feeds client messages into the app, drawing a `width`×`height` screen after each, until
/// `want` holds for it; 15 s without that fails the test with the last screen.
pub async fn until(
    app: &mut App,
    rx: &mut mpsc::Receiver<ClientMsg>,
    size: (u16, u16),
    what: &str,
    want: impl Fn(&str) -> bool,
) -> String {
    until_app(app, rx, size, what, |_, text| want(text)).await
}

/// `until`, with a condition that may also read the app's state.
pub async fn until_app(
    app: &mut App,
    rx: &mut mpsc::Receiver<ClientMsg>,
    (width, height): (u16, u16),
    what: &str,
    want: impl Fn(&App, &str) -> bool,
) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let mut text = screen(app, width, height);
    while !want(app, &text) {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(msg)) => app.on_client(msg),
            Ok(None) => panic!("client channel closed while waiting for {what}; screen:\n{text}"),
            Err(_) => panic!("timed out waiting for {what}; screen:\n{text}"),
        }
        text = screen(app, width, height);
    }
    text
}

/// One key press, as the terminal reports a plain character.
pub fn key(app: &mut App, c: char) {
    app.on_key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE));
}

/// A special key (Enter, Esc, Tab …).
pub fn press(app: &mut App, code: KeyCode) {
    app.on_key(KeyEvent::new(code, KeyModifiers::NONE));
}
