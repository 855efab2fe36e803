//! One test binary for the command line as a user runs it: the real `spyglass` binary
//! (`--print-config`, `eval`, `import`, `serve`, `tail`, `record`) and the inspector in a
//! real pty.

#[path = "../support/mod.rs"]
mod support;

mod clean_output;
mod cli_config;
mod eval_baseline;
mod eval_cli;
mod eval_history;
mod eval_html;
mod eval_junit;
mod import_cli;
mod masking;
mod replica_kill;
mod runtime_flags;
mod runtime_serve;
mod store_cli;
mod store_disk;
mod store_kill;
mod store_stop;
mod tail_cli;
mod terminal_pty;
