//! The terminal UI (ratatui): `App` (state + input -> `Action`), one module per view, and
//! the inspector's wiring and event loop (`run`). Keys and theme come resolved from
//! `config`; which runtime it watches is the role's choice (`src/roles/`).

pub mod action;
pub mod app;
pub mod clock;
pub mod jump;
pub mod logfile;
pub mod render;
pub mod run;
pub mod safe;
pub mod terminal;
pub mod theme;
pub mod views;

pub use action::{Action, KeyMap, Scope, Tab};
pub use app::{App, Conn, Watching};
pub use clock::{Clock, FakeClock, SystemClock};
pub use run::{InspectorConfig, Source, UiError, Wired, inspector_config, run, run_source, wire};
pub use theme::Theme;
