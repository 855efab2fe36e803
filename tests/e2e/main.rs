//! One test binary for end-to-end runs: the in-process runtime, the real observer client
//! and the App together, a recorded replay, the demo, and the Python SDK and examples.

#[path = "../support/mod.rs"]
mod support;

mod approvals_e2e;
mod demo_headless;
mod empty_states;
mod evals_view_e2e;
mod examples;
mod find_e2e;
mod import_view;
mod inspector_e2e;
mod otel_producers;
mod projects;
mod replay_view;
mod restart;
mod sdk_compat;
mod sdk_models;
