//! The UI's theme is the config's: one `Theme` of semantic roles, loaded from `themes/`
//! and the user's overrides by `config::theme`. Re-exported here so views say `ui::Theme`.

pub use crate::config::theme::{Role, Theme};
