//! spyglass: a terminal inspector for AI-agent test sessions, and the test-mode runtime
//! it watches. This crate is the binary's start-up (`roles`), the importers and the demo;
//! the layers are crates of their own, re-exported here under their module names.

pub mod demo;
pub mod import;
pub mod roles;

pub use spyglass_eval as eval;
pub use spyglass_protocol as protocol;
pub use spyglass_protocol::{glob, mask, retire, sanitize};
pub use spyglass_runtime as runtime;
pub use spyglass_runtime::otel;

/// The runtime's stores under their old path: the engines (`spyglass_runtime::store`) and
/// opening a runtime on one (`spyglass_runtime::open`).
pub mod store {
    pub use spyglass_runtime::open::{open_runtime, runtime_on};
    pub use spyglass_runtime::store::*;
}
pub use spyglass_tui::{client, clipboard, config, model, ui};
