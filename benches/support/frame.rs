//! `frame`: time to draw each view (`ui::render::draw` into a 200x50 `TestBackend`) with
//! 10 k sessions and a small vs a large number of retained events. Both models give the
//! selected session the same full timeline, so the ratio isolates the retained volume.

use super::workload::Workload;
use super::{Figure, median};
use anyhow::Context;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use spyglass::model::Limits;
use spyglass::protocol::decode;
use spyglass::ui::render::draw;
use spyglass::ui::views::sessions::Focus;
use spyglass::ui::{Action, App, FakeClock, Tab};
use std::sync::Arc;
use std::time::Instant;

pub const WIDTH: u16 = 200;
pub const HEIGHT: u16 = 50;

/// Payload frames each busy session gets (three calls to one step).
const PER_SESSION: usize = 100;

/// Every view the inspector can show, by name, and how to reach it.
pub fn views() -> Vec<&'static str> {
    let mut views = vec!["sessions", "timeline", "detail", "filter", "help"];
    for tab in Tab::ALL.iter().skip(1) {
        views.push(match tab {
            Tab::Approvals => "approvals",
            Tab::Evals => "evals",
            Tab::Events => "events",
            Tab::Sessions => "sessions",
        });
    }
    views
}

/// An app that has folded 10 k-style sessions and `payload` frames into the newest ones.
pub fn app_with(sessions: usize, payload: usize) -> anyhow::Result<App> {
    let busy = (payload / PER_SESSION).clamp(1, sessions);
    let workload = Workload {
        session_base: 0,
        sessions,
        busy,
        payload,
        seq_base: 0,
        wave: 0,
    };
    let limits = Limits {
        sessions: sessions.max(Limits::default().sessions),
        ..Limits::default()
    };
    let mut app = App::new(
        "http://127.0.0.1:8000",
        limits,
        Arc::new(FakeClock::at("2026-11-22T21:44:00Z")),
    );
    for i in 0..workload.len() {
        app.model.apply(&decode(&workload.text(i))?);
    }
    app.after_model_change();
    Ok(app)
}

fn reset(app: &mut App) {
    app.show_help = false;
    app.tab = Tab::Sessions;
    app.sessions.detail = None;
    app.sessions.focus = Focus::List;
    app.sessions.editing_filter = false;
    app.sessions.filter.clear();
    // Back on the newest session, so every view shows the same busy one at both sizes.
    app.sessions.list.selected = None;
    app.sessions.after_model_change(&app.model);
}

/// Puts the app on `view` as a user would get there: by actions and keys.
pub fn show(app: &mut App, view: &str) {
    reset(app);
    match view {
        "timeline" => app.dispatch(Action::FocusRight),
        "detail" => {
            app.dispatch(Action::FocusRight);
            // The first rows may be steps; open the first call.
            for _ in 0..8 {
                app.dispatch(Action::Open);
                if app.sessions.detail.is_some() {
                    break;
                }
                app.dispatch(Action::Down);
            }
        }
        "filter" => {
            app.dispatch(Action::Filter);
            // Matches the newest hundred sessions, the busy ones at both sizes.
            for c in "ses_0099".chars() {
                app.on_key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE));
            }
            app.dispatch(Action::Open);
        }
        "help" => app.dispatch(Action::Help),
        "approvals" => app.dispatch(Action::TabApprovals),
        "evals" => app.dispatch(Action::TabEvals),
        "events" => app.dispatch(Action::TabEvents),
        _ => {}
    }
}

/// Draws `view` `iterations` times; the median, in milliseconds, and the last screen.
pub fn time_view(app: &mut App, view: &str, iterations: usize) -> anyhow::Result<(f64, String)> {
    let mut terminal = Terminal::new(TestBackend::new(WIDTH, HEIGHT))?;
    show(app, view);
    terminal.draw(|f| draw(f, app))?;
    let mut times = Vec::with_capacity(iterations);
    for _ in 0..iterations.max(1) {
        let start = Instant::now();
        terminal.draw(|f| draw(f, app))?;
        times.push(start.elapsed().as_secs_f64() * 1000.0);
    }
    let screen = screen_text(terminal.backend().buffer());
    Ok((median(&mut times), screen))
}

pub fn screen_text(buffer: &ratatui::buffer::Buffer) -> String {
    let mut out = String::new();
    for y in 0..buffer.area.height {
        for x in 0..buffer.area.width {
            out.push_str(buffer[(x, y)].symbol());
        }
        out.push('\n');
    }
    out
}

#[derive(Debug, Clone)]
pub struct ViewTiming {
    pub view: &'static str,
    pub small_ms: f64,
    pub large_ms: f64,
    pub screen_large: String,
}

impl ViewTiming {
    pub fn ratio(&self) -> f64 {
        self.large_ms / self.small_ms.max(1e-9)
    }
}

#[derive(Debug, Clone)]
pub struct FrameResult {
    pub sessions: usize,
    pub small: usize,
    pub large: usize,
    pub views: Vec<ViewTiming>,
}

impl FrameResult {
    /// The slowest view at the large size, against itself at the small size.
    pub fn worst(&self) -> Option<&ViewTiming> {
        self.views
            .iter()
            .max_by(|a, b| a.large_ms.total_cmp(&b.large_ms))
    }

    pub fn figure(&self) -> anyhow::Result<Figure> {
        let worst = self.worst().context("no view timed")?;
        Ok(Figure {
            name: "frame",
            value: worst.large_ms,
            baseline: worst.small_ms,
            unit: "ms",
            paired: Vec::new(),
        })
    }
}

pub fn run(
    sessions: usize,
    small: usize,
    large: usize,
    iterations: usize,
) -> anyhow::Result<FrameResult> {
    let mut timings = vec![];
    let mut small_app = app_with(sessions, small)?;
    for view in views() {
        let (ms, _) = time_view(&mut small_app, view, iterations)?;
        timings.push((view, ms));
    }
    drop(small_app);
    let mut large_app = app_with(sessions, large)?;
    let mut out = vec![];
    for (view, small_ms) in timings {
        let (large_ms, screen_large) = time_view(&mut large_app, view, iterations)?;
        out.push(ViewTiming {
            view,
            small_ms,
            large_ms,
            screen_large,
        });
    }
    Ok(FrameResult {
        sessions,
        small,
        large,
        views: out,
    })
}
