//! End to end: the in-process runtime runs a suite, the real observer client streams the
//! results into the App, and the Evals tab reruns one case (`r`) and then the suite (`R`)
//! through REST; the results stream back in and only what was rerun moves. Also `t` to the
//! case's session, `GET /v1/evals/suites/:name` with good and bad names, and a rerun the
//! runtime refuses showing its error in the status line.

use crossterm::event::KeyCode;
use serde_json::{Value, json};
use spyglass::client::RestClient;
use spyglass::ui::{App, Tab};

use crate::support::ui;

use crate::support::runtime::test_server;
use crate::support::ui::{Live, press, row, until_app};

const SIZE: (u16, u16) = (140, 24);

fn screen(app: &mut App) -> String {
    ui::screen(app, SIZE.0, SIZE.1)
}

const SUITE: &str = "payments e2e";

fn suite() -> Value {
    let model = json!({"sequence": [
        {"tool_calls": [{"name": "asaas/create_payment", "arguments": {"value": 5}}]},
        {"text": "Charged pay_1"}
    ]});
    json!({
        "suite": SUITE,
        "defaults": {"mocks": {"asaas/create_payment": {"id": "pay_1", "status": "PENDING"}}},
        "cases": [
            {"id": "charge", "input": "Charge R$5", "model": model,
             "assert": {"contains": "pay_1"}},
            {"id": "confirm", "input": "Charge R$5", "model": model,
             "assert": {"equals": "Charged pay_9"}},
        ]
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rerun_one_case_then_the_suite_from_the_evals_tab() {
    let handle = test_server().await;
    let url = handle.url();
    let http = reqwest::Client::new();

    let Live {
        mut app,
        mut rx,
        observer,
    } = Live::acting(&url);
    press(&mut app, KeyCode::Char('3'));
    until_app(&mut app, &mut rx, SIZE, "connected", |_, s| {
        s.contains("● connected")
    })
    .await;

    // Before any run the runtime knows no suite by name: a rerun needs one that ran.
    let missing = http
        .get(format!("{url}/v1/evals/suites/nope"))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status().as_u16(), 404);
    let body: Value = missing.json().await.unwrap();
    assert_eq!(body["code"], "not_found");
    assert!(
        body["message"].as_str().unwrap().contains("\"nope\""),
        "{body}"
    );

    let created = http
        .post(format!("{url}/v1/evals/runs"))
        .json(&json!({"suites": [suite()]}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status().as_u16(), 202);
    let text = until_app(&mut app, &mut rx, SIZE, "the first run", |app, _| {
        app.model
            .evals
            .runs
            .back()
            .is_some_and(|r| r.completed.is_some())
    })
    .await;
    assert!(row(&text, "charge").contains("100% 1/1"), "{text}");
    assert!(row(&text, "confirm").contains("0% 0/1"), "{text}");

    // The suite as it ran, under its name (a space in it: the client encodes the path).
    let document = RestClient::new(&url, None)
        .unwrap()
        .suite_document(SUITE)
        .await
        .unwrap();
    assert_eq!(document.suite, SUITE);
    assert_eq!(document.document, suite());

    // `r` on `confirm`: only that case runs again, as a case run. Its result streams in
    // as the case's newest, and it is no run of the suite: no rate, trend or RUNS change.
    press(&mut app, KeyCode::Enter);
    press(&mut app, KeyCode::Down);
    assert_eq!(app.evals.cases.selected.as_deref(), Some("confirm"));
    let first_run = app.model.evals.runs.back().unwrap().run_id.clone();
    press(&mut app, KeyCode::Char('r'));
    assert_eq!(
        app.notice.as_deref(),
        Some("rerunning payments e2e / confirm; results stream in")
    );
    until_app(
        &mut app,
        &mut rx,
        SIZE,
        "confirm's rerun result",
        |app, _| {
            app.model
                .evals
                .case(SUITE, "confirm")
                .is_some_and(|c| c.last_rerun && c.last_run_id.as_deref() != Some(&first_run))
        },
    )
    .await;
    let text = screen(&mut app);
    assert!(row(&text, "confirm").contains("0% 0/1"), "{text}");
    assert!(
        row(&text, "charge").contains("100% 1/1"),
        "charge was not rerun:\n{text}"
    );
    assert_eq!(
        app.model.evals.runs.len(),
        1,
        "a case run is not listed under RUNS"
    );
    assert_eq!(app.model.evals.suite(SUITE).unwrap().trend.len(), 1);
    press(&mut app, KeyCode::Enter);
    let text = screen(&mut app);
    assert!(text.contains("failed (rerun of this case) ·"), "{text}");
    press(&mut app, KeyCode::Esc);

    // `R`: the whole suite again, a second run.
    press(&mut app, KeyCode::Char('R'));
    let text = until_app(&mut app, &mut rx, SIZE, "the suite rerun", |_, s| {
        row(s, "charge").contains("100% 2/2") && row(s, "confirm").contains("0% 0/2")
    })
    .await;
    assert!(text.contains(" 2 runs"), "{text}");

    // The failing case's detail: the equals assertion as a line diff.
    press(&mut app, KeyCode::Enter);
    let text = screen(&mut app);
    assert!(text.contains("- Charged pay_9"), "{text}");
    assert!(text.contains("+ Charged pay_1"), "{text}");

    // `t`: the case's latest session, with the tool call it made.
    let sid = app
        .model
        .evals
        .case(SUITE, "confirm")
        .and_then(|c| c.last_session_id.clone())
        .unwrap();
    press(&mut app, KeyCode::Char('t'));
    assert_eq!(app.tab, Tab::Sessions);
    assert_eq!(app.sessions.list.selected.as_deref(), Some(sid.as_str()));
    let text = until_app(&mut app, &mut rx, SIZE, "the session's call", |_, s| {
        s.contains("asaas/create_payment")
    })
    .await;
    assert!(text.contains("Timeline"), "{text}");

    // Results another runner posted name a suite the runtime never ran: `R` on it shows
    // the runtime's refusal in the status line, and nothing else changes.
    let ingested = http
        .post(format!("{url}/v1/events"))
        .json(
            &json!([{"kind": "agent.eval.completed", "suite": "external",
                       "case": "greets", "status": "passed", "pass": true, "duration": 3}]),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(ingested.status().as_u16(), 200);
    press(&mut app, KeyCode::Char('3'));
    press(&mut app, KeyCode::Esc);
    press(&mut app, KeyCode::Esc);
    until_app(&mut app, &mut rx, SIZE, "the external suite", |app, _| {
        app.model.evals.suite("external").is_some()
    })
    .await;
    press(&mut app, KeyCode::Home);
    assert_eq!(app.evals.suites.selected.as_deref(), Some("external"));
    press(&mut app, KeyCode::Char('R'));
    until_app(&mut app, &mut rx, SIZE, "the rerun error", |app, _| {
        app.notice
            .as_deref()
            .is_some_and(|n| n.starts_with("rerun of suite external failed"))
    })
    .await;
    let notice = app.notice.clone().unwrap();
    assert!(
        notice.contains("404 not_found") && notice.contains("no suite named \"external\""),
        "{notice}"
    );
    assert_eq!(app.model.evals.runs.len(), 2, "no run was started");

    observer.abort();
    handle.shutdown().await;
}
