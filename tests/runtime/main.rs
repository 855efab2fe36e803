//! One test binary for the library below the screen: the wire protocol, the runtime over
//! real HTTP and WebSocket, the observer client, eval suites and the eval runner.

#[path = "../support/mod.rs"]
mod support;

mod approval_condition;
mod bounded_tables;
mod budgets;
mod eval_calls;
mod eval_compose;
mod eval_decisions;
mod eval_fake;
mod eval_runner;
mod eval_suite;
mod evals_truth;
mod execute_paths;
mod fake_model;
mod fuzz_regressions;
mod glob_limits;
#[cfg(feature = "otlp-grpc")]
mod grpc_guard;
mod guard;
mod hardening;
mod limits;
mod mock_rules;
mod model_anthropic;
mod model_cassette;
mod model_cost;
mod model_judge;
mod model_openai;
mod model_stream_break;
mod observer_client;
mod pg_store;
mod protocol;
mod races;
mod refusals;
mod replicas;
mod runtime_approvals;
mod runtime_auth;
mod runtime_schema;
mod runtime_send;
mod runtime_sessions;
mod runtime_stream;
mod security;
mod store_state;
mod wire_spec;
