//! The terminal UI (ratatui): `App` (state + input -> `Action`), one module per view, the
//! keymap that both dispatches keys and writes the help, the theme, and the event loop.

pub mod action;
pub mod app;
pub mod clock;
pub mod keymap;
pub mod logfile;
pub mod render;
pub mod requests;
pub mod run;
pub mod terminal;
pub mod theme;
pub mod views;

pub use action::{Action, Tab};
pub use app::{App, Conn};
pub use clock::{Clock, FakeClock, SystemClock};
pub use run::{InspectorConfig, UiError, run};
