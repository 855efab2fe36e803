//! One test binary for the inspector's screens: golden `TestBackend` screens (insta, stored
//! under ui/snapshots/) and key, mouse and copy behaviour, driven with scripted frames.

#[path = "../support/mod.rs"]
mod support;

mod approvals_view;
mod cassette_step;
mod clean_output_tui;
mod contrast;
mod evals_view;
mod events_view;
mod find;
mod panes;
mod scrolling;
mod sessions_view;
mod small_terminals;
mod timeline_order;
mod units_and_words;
