//! Real OpenTelemetry producers into `POST /v1/traces`, each with its own mock model and
//! installed from its registry under target/: a Pydantic AI agent with the stock Python
//! OTLP/HTTP protobuf exporter (venv target/otel-py-venv), and a Vercel AI SDK agent with
//! the OpenTelemetry JS OTLP/HTTP exporter, JSON and gzip (npm prefix target/otel-npm).
//! Watched by the real inspector client: session, steps, calls, tokens and the failing
//! tool in the model and on the screen. What the exporters sent lands in
//! target/otel-capture/ (tests/fixtures/otel/README.md).
use crate::support::ui::{row, until_app};
use crate::support::venv::tools_python;
use spyglass::model::SessionStatus;
use spyglass::protocol::events::Outcome;
use spyglass::runtime::{RuntimeConfig, ServerHandle, start};
use spyglass::ui::{App, FakeClock, InspectorConfig, Source, Wired, wire};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

const KEY: &str = "csk_test_spyglass_otel";

const PYTHON_PACKAGES: &[&str] = &[
    "pydantic-ai-slim==2.68.0",
    "opentelemetry-sdk==1.45.2",
    "opentelemetry-exporter-otlp-proto-http==1.45.2",
    "opentelemetry-exporter-otlp-proto-grpc==1.45.2",
];

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("target"),
        PathBuf::from,
    )
}

async fn keyed_runtime() -> ServerHandle {
    start(
        RuntimeConfig {
            api_keys: vec![KEY.to_owned()],
            ..RuntimeConfig::default()
        },
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap()
}

/// The inspector as `spyglass inspect` wires it, with the runtime's key.
fn inspector(url: &str) -> Wired {
    let mut config = InspectorConfig::new(url);
    config.api_key = Some(KEY.to_owned());
    wire(
        config,
        Arc::new(FakeClock::at(crate::support::ui::NOW)),
        Source::Live,
    )
    .unwrap()
}

/// Runs a producer with the two variables a user sets, off the async threads.
async fn run_producer(mut cmd: Command, endpoint: String) -> Output {
    cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        .env(
            "OTEL_EXPORTER_OTLP_HEADERS",
            format!("Authorization=Bearer {KEY}"),
        )
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_PROTOCOL")
        .env_remove("OTEL_SDK_DISABLED");
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

fn calls_of<'a>(app: &'a App, sid: &str) -> Vec<&'a spyglass::model::Call> {
    app.model
        .session(sid)
        .map(|s| s.timeline.calls().iter().collect())
        .unwrap_or_default()
}

/// The session the producer's spans made: the one `session.created` on the stream.
fn otel_session(handle: &ServerHandle) -> String {
    let frames = handle.runtime().events_since(0, 10_000);
    let created: Vec<_> = frames
        .iter()
        .filter(|f| f.event.kind() == "session.created")
        .collect();
    assert_eq!(created.len(), 1, "one session: {frames:?}");
    created[0].session_id.clone().unwrap().into()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pydantic_ai_agent_over_otlp_http_shows_its_steps_calls_and_failure() {
    let python = tokio::task::spawn_blocking(|| {
        tools_python("otel-py-venv", PYTHON_PACKAGES, "pydantic-ai-slim")
    })
    .await
    .unwrap();
    let handle = keyed_runtime().await;
    let Wired {
        mut app,
        mut rx,
        feed,
    } = inspector(&handle.url());

    let capture = target_dir().join("otel-capture/pydantic");
    let _ = std::fs::remove_dir_all(&capture);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/otel/pydantic_agent.py");
    let mut cmd = Command::new(python);
    cmd.arg(script).env("SPYGLASS_OTLP_CAPTURE", &capture);
    let output = run_producer(cmd, handle.url()).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("RUN_FAILED: the explode tool failed: test"),
        "{stdout}\n{stderr}"
    );
    assert!(
        !stderr.contains("Failed to export"),
        "the exporter was refused:\n{stderr}"
    );
    let sid = otel_session(&handle);

    let text = until_app(&mut app, &mut rx, (160, 40), "the failed run", |app, _| {
        app.model
            .session(&sid)
            .is_some_and(|s| s.status == SessionStatus::Failed)
    })
    .await;

    let session = app.model.session(&sid).unwrap();
    let summary = session.summary.as_deref().unwrap();
    assert!(
        summary
            .metadata
            .contains(&("source".to_owned(), "opentelemetry".to_owned())),
        "{:?}",
        summary.metadata
    );
    assert!(
        summary
            .metadata
            .contains(&("service".to_owned(), "pydantic-weather".to_owned()))
    );
    let run = summary.run.as_ref().unwrap();
    assert_eq!(run.agent, "weather_agent");
    assert_eq!(run.model, "weather-fn");
    assert!(run.failed);
    assert!(run.output.contains("the explode tool failed"), "{run:?}");
    // 11 and 12 prompt tokens over the two model calls, 7 completion tokens each.
    assert_eq!((run.tokens.prompt, run.tokens.completion), (23, 14));

    let steps: Vec<_> = session.timeline.steps.iter().collect();
    assert_eq!(
        steps.len(),
        2,
        "two model calls before the failure: {steps:?}"
    );
    assert_eq!(steps[0].iteration, 1);
    assert_eq!(steps[0].model, "weather-fn");
    assert_eq!(steps[0].tokens_total, 18);
    assert_eq!(steps[1].tokens_total, 19);

    let calls = calls_of(&app, &sid);
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(calls[0].id, "call_weather");
    assert_eq!(calls[0].tool, "get_weather");
    assert_eq!(
        calls[0].input.to_value(),
        serde_json::json!({"city": "Oslo"})
    );
    assert_eq!(
        calls[0].outcome,
        Outcome::Result(serde_json::json!({"city": "Oslo", "temp_c": 21}).into())
    );
    assert_eq!(calls[0].iteration, Some(1));
    assert!(calls[0].duration_ms > 0.0 && calls[0].duration_ms < 5_000.0);
    assert_eq!(calls[1].tool, "explode");
    assert_eq!(calls[1].iteration, Some(2));
    assert_eq!(calls[1].envelope_code(), Some("RuntimeError"));
    assert!(
        calls[1]
            .outcome
            .envelope()
            .unwrap()
            .message()
            .contains("the explode tool failed: test")
    );
    assert!(calls[1].duration_ms > 0.0);

    // On screen: the run's summary, and each step with its call under it.
    assert!(row(&text, &sid[..20]).contains("failed"), "{text}");
    assert!(
        row(&text, "failed: ").contains("the explode tool failed"),
        "{text}"
    );
    assert!(
        row(&text, "prompt: ").contains("What is the weather in Oslo?"),
        "{text}"
    );
    assert!(
        row(&text, "model weather-fn").contains("2 steps · 37 tokens (23 in, 14 out)"),
        "{text}"
    );
    assert!(text.contains("source=opentelemetry"), "{text}");
    assert!(row(&text, "step 1").contains("18 tokens"), "{text}");
    let timeline = &text[text.find("STEP / CALL").unwrap()..];
    assert!(row(timeline, "get_weather").contains("ok"), "{text}");
    assert!(row(timeline, "step 2").contains("19 tokens"), "{text}");
    assert!(row(timeline, "explode").contains("RuntimeError"), "{text}");
    let lines: Vec<_> = timeline.lines().collect();
    let at = |needle: &str| lines.iter().position(|l| l.contains(needle)).unwrap();
    assert!(at("step 1") < at("get_weather") && at("get_weather") < at("step 2"));
    assert!(at("step 2") < at("explode"), "{text}");

    // The exporter's requests were kept, for the unit tests' fixtures.
    let captured = std::fs::read_dir(&capture).map_or(0, Iterator::count);
    assert!(captured >= 2, "children and root came in separate requests");
    feed.abort();
    handle.shutdown().await;
}

const NPM_PACKAGES: &[&str] = &[
    "ai@5.0.277",
    "zod@4.6.7",
    "@opentelemetry/api@1.10.0",
    "@opentelemetry/context-async-hooks@3.1.1",
    "@opentelemetry/sdk-trace@3.1.0",
    "@opentelemetry/resources@3.1.1",
    "@opentelemetry/exporter-trace-otlp-http@0.301.0",
    "@opentelemetry/otlp-transformer@0.301.0",
];

/// The npm prefix under target/otel-npm with `NPM_PACKAGES`, installed on first use and
/// reused while every package is there at its version.
fn npm_prefix() -> PathBuf {
    let prefix = target_dir().join("otel-npm");
    let installed = |spec: &str| {
        let (name, version) = spec.rsplit_once('@').unwrap();
        let manifest = prefix.join("node_modules").join(name).join("package.json");
        std::fs::read_to_string(manifest).is_ok_and(|text| {
            serde_json::from_str::<serde_json::Value>(&text).is_ok_and(|v| v["version"] == version)
        })
    };
    if !NPM_PACKAGES.iter().all(|spec| installed(spec)) {
        std::fs::create_dir_all(&prefix).unwrap();
        let out = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--loglevel=error", "--prefix"])
            .arg(&prefix)
            .args(NPM_PACKAGES)
            .output()
            .unwrap_or_else(|err| {
                panic!("npm: cannot run ({err}); install Node.js 20+ with npm (apt-get install nodejs npm)")
            });
        assert!(
            out.status.success(),
            "npm install {}: {}",
            NPM_PACKAGES.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    prefix
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vercel_ai_sdk_agent_over_otlp_json_gzip_shows_its_steps_calls_and_failed_tool() {
    let prefix = tokio::task::spawn_blocking(npm_prefix).await.unwrap();
    // ESM resolves packages from the script's own directory: it runs from the prefix.
    let script = prefix.join("vercel_agent.mjs");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/otel/vercel_agent.mjs"),
        &script,
    )
    .unwrap();
    let handle = keyed_runtime().await;
    let Wired {
        mut app,
        mut rx,
        feed,
    } = inspector(&handle.url());

    let capture = target_dir().join("otel-capture/vercel");
    let _ = std::fs::remove_dir_all(&capture);
    let mut cmd = Command::new("node");
    cmd.arg(&script).env("SPYGLASS_OTLP_CAPTURE", &capture);
    let output = run_producer(cmd, handle.url()).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("RUN_OK: It is 21 C in Oslo."),
        "{stdout}\n{stderr}"
    );
    assert!(
        stderr.trim().is_empty(),
        "the exporter complained:\n{stderr}"
    );
    let sid = otel_session(&handle);

    let text = until_app(
        &mut app,
        &mut rx,
        (160, 40),
        "the completed run",
        |app, _| {
            app.model
                .session(&sid)
                .is_some_and(|s| s.status == SessionStatus::Completed)
        },
    )
    .await;

    let session = app.model.session(&sid).unwrap();
    let summary = session.summary.as_deref().unwrap();
    assert!(
        summary
            .metadata
            .contains(&("service".to_owned(), "vercel-weather".to_owned())),
        "{:?}",
        summary.metadata
    );
    let run = summary.run.as_ref().unwrap();
    assert_eq!(run.agent, "weather-agent");
    assert_eq!(run.model, "mock-weather");
    assert_eq!(run.provider, "mock-provider");
    assert!(!run.failed);
    assert_eq!(run.output, "It is 21 C in Oslo.");
    // Summed over the three model calls (the root span reports the last one's only).
    assert_eq!((run.tokens.prompt, run.tokens.completion), (60, 18));

    let steps: Vec<_> = session.timeline.steps.iter().collect();
    assert_eq!(steps.len(), 3, "{steps:?}");
    assert_eq!(
        steps.iter().map(|s| s.tokens_total).collect::<Vec<_>>(),
        [15, 26, 37]
    );
    assert_eq!(steps[0].finish_reason, "tool-calls");
    assert_eq!(steps[2].finish_reason, "stop");

    let calls = calls_of(&app, &sid);
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(
        (calls[0].id.as_str(), calls[0].tool.as_str()),
        ("call-weather", "weather")
    );
    assert_eq!(
        calls[0].input.to_value(),
        serde_json::json!({"city": "Oslo"})
    );
    assert_eq!(
        calls[0].outcome,
        Outcome::Result(serde_json::json!({"city": "Oslo", "tempC": 21}).into())
    );
    assert_eq!(calls[0].iteration, Some(1));
    assert!(calls[0].duration_ms >= 0.0 && calls[0].duration_ms < 5_000.0);
    assert_eq!(calls[1].tool, "explode");
    assert_eq!(calls[1].iteration, Some(2));
    assert_eq!(
        calls[1].envelope_code(),
        Some("Error"),
        "the exception's type"
    );
    assert_eq!(
        calls[1].outcome.envelope().unwrap().message(),
        "the explode tool failed: test"
    );

    assert!(row(&text, &sid[..20]).contains("completed"), "{text}");
    assert!(
        row(&text, "prompt: ").contains("What is the weather in Oslo?"),
        "{text}"
    );
    assert!(
        row(&text, "model mock-weather").contains("3 steps · 78 tokens (60 in, 18 out)"),
        "{text}"
    );
    let timeline = &text[text.find("STEP / CALL").unwrap()..];
    assert!(row(timeline, "step 1").contains("15 tokens"), "{text}");
    assert!(row(timeline, "weather").contains("ok"), "{text}");
    assert!(row(timeline, "explode").contains("Error"), "{text}");
    assert!(row(timeline, "step 3").contains("37 tokens"), "{text}");

    let captured = std::fs::read_dir(&capture).map_or(0, Iterator::count);
    assert!(captured >= 2, "children and root came in separate requests");
    feed.abort();
    handle.shutdown().await;
}

#[cfg(not(feature = "otlp-grpc"))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_otlp_grpc_feature_the_grpc_port_is_refused_with_why() {
    let handle = keyed_runtime().await;
    let Err(err) = handle
        .runtime()
        .serve_otlp_grpc("127.0.0.1:0".parse().unwrap())
        .await
    else {
        panic!("a gRPC server in a build without it");
    };
    assert_eq!(err.kind(), std::io::ErrorKind::Unsupported);
    assert!(err.to_string().contains("otlp-grpc"), "{err}");
    assert!(err.to_string().contains("POST /v1/traces"), "{err}");
    handle.shutdown().await;
}

#[cfg(feature = "otlp-grpc")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_agent_over_otlp_grpc_on_its_own_port() {
    let python = tokio::task::spawn_blocking(|| {
        tools_python("otel-py-venv", PYTHON_PACKAGES, "pydantic-ai-slim")
    })
    .await
    .unwrap();
    let handle = keyed_runtime().await;
    let grpc = handle
        .runtime()
        .serve_otlp_grpc("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let Wired {
        mut app,
        mut rx,
        feed,
    } = inspector(&handle.url());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/otel/pydantic_agent.py");
    let mut cmd = Command::new(python);
    cmd.arg(script).env("OTLP_PROTOCOL", "grpc");
    let output = run_producer(cmd, grpc.url()).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(
        !stderr.contains("Failed to export"),
        "the exporter was refused:\n{stderr}"
    );
    let sid = otel_session(&handle);
    let text = until_app(&mut app, &mut rx, (160, 40), "the failed run", |app, _| {
        app.model
            .session(&sid)
            .is_some_and(|s| s.status == SessionStatus::Failed)
    })
    .await;
    let session = app.model.session(&sid).unwrap();
    let run = session.summary.as_deref().unwrap().run.as_ref().unwrap();
    assert_eq!((run.tokens.prompt, run.tokens.completion), (23, 14));
    assert_eq!(session.timeline.steps.len(), 2);
    let calls = calls_of(&app, &sid);
    let names: Vec<_> = calls.iter().map(|c| c.tool.as_str()).collect();
    assert_eq!(names, ["get_weather", "explode"]);
    assert_eq!(calls[1].envelope_code(), Some("RuntimeError"));
    let timeline = &text[text.find("STEP / CALL").unwrap()..];
    assert!(row(timeline, "explode").contains("RuntimeError"), "{text}");

    // Without the key the exporter is refused and nothing more is shown.
    let before = handle.runtime().events_since(0, 10_000).len();
    let mut cmd = Command::new(
        tokio::task::spawn_blocking(|| {
            tools_python("otel-py-venv", PYTHON_PACKAGES, "pydantic-ai-slim")
        })
        .await
        .unwrap(),
    );
    cmd.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/otel/pydantic_agent.py"))
        .env("OTLP_PROTOCOL", "grpc");
    let mut unkeyed = cmd;
    unkeyed
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", grpc.url())
        .env("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer wrong");
    let output = tokio::task::spawn_blocking(move || unkeyed.output().unwrap())
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("UNAUTHENTICATED"), "{stderr}");
    assert_eq!(handle.runtime().events_since(0, 10_000).len(), before);
    feed.abort();
    grpc.shutdown().await;
    handle.shutdown().await;
}

/// A span no convention matches, posted as OTLP JSON the way exporters write it (hex ids,
/// int64 as strings, no `parentSpanId` on the root): listed on the Events tab with its
/// attributes, and counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unmatched_span_is_shown_on_the_events_tab_and_counted() {
    let handle = keyed_runtime().await;
    let Wired {
        mut app,
        mut rx,
        feed,
    } = inspector(&handle.url());
    let body = serde_json::json!({"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "cron"}}]},
        "scopeSpans": [{"spans": [{
            "traceId": "4bf92f3577b34da6a3ce929d0e0e4736",
            "spanId": "00f067aa0ba902b7",
            "name": "nightly-cleanup",
            "kind": 1,
            "startTimeUnixNano": "1700000000000000000",
            "endTimeUnixNano": "1700000000250000000",
            "attributes": [{"key": "rows.deleted", "value": {"intValue": "42"}}],
        }]}],
    }]});
    let response = reqwest::Client::new()
        .post(format!("{}/v1/traces", handle.url()))
        .bearer_auth(KEY)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().await.unwrap(), "{}");
    // Without the key: refused like every route, nothing emitted.
    let refused = reqwest::Client::new()
        .post(format!("{}/v1/traces", handle.url()))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);

    until_app(
        &mut app,
        &mut rx,
        (140, 30),
        "the span's event",
        |app, _| app.model.counters.unknown_kinds == 1,
    )
    .await;
    crate::support::ui::key(&mut app, '4');
    let text = crate::support::ui::screen(&mut app, 140, 30);
    let line = row(&text, "otel.span");
    assert!(line.contains("nightly-cleanup"), "{text}");
    assert_eq!(
        handle.runtime().events_since(0, 100).len(),
        2,
        "session and span"
    );
    feed.abort();
    handle.shutdown().await;
}
