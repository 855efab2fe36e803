//! spyglass: a terminal inspector for AI-agent test sessions, and the test-mode runtime
//! it watches. One crate, two roles; `protocol` is the wire both speak.

pub mod client;
pub mod clipboard;
pub mod config;
pub mod demo;
pub mod eval;
pub mod glob;
pub mod import;
#[cfg(test)]
mod layering;
pub mod mask;
pub mod model;
pub mod otel;
pub mod protocol;
pub mod retire;
pub mod roles;
pub mod runtime;
pub mod sanitize;
pub mod store;
pub mod ui;
