//! The terminal UI (ratatui): `App` (state + input -> `Action`), one module per view, the
//! event loop, and the inspector role's start-up (`launch`). Keys and theme come resolved
//! from `config`.

pub mod action;
pub mod app;
pub mod clock;
pub mod launch;
pub mod logfile;
pub mod render;
pub mod run;
pub mod terminal;
pub mod theme;
pub mod views;

pub use action::{Action, KeyMap, Scope, Tab};
pub use app::{App, Conn, Watching};
pub use clock::{Clock, FakeClock, SystemClock};
pub use run::{InspectorConfig, UiError, run};
pub use theme::Theme;
