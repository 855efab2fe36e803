//! The inspector: the observer client, the state it folds the stream into (`model`), the
//! ratatui UI over that state, and the user's configuration. It never names the runtime.

pub mod client;
pub mod clipboard;
pub mod config;
pub mod model;
pub mod ui;
pub mod units;
