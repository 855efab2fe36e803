//! The integration tests' one shared kit, included by every test binary: an in-process
//! runtime and JSON requests (`runtime`), the App and its screen (`ui`), frames built as
//! JSON values (`frames`), and the Python SDK's venv (`venv`).
#![allow(dead_code)] // each binary uses its own part of the kit

pub mod cli;
pub mod fake_llm;
pub mod frames;
pub mod postgres;
pub mod runtime;
pub mod ui;
pub mod venv;
