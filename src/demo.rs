//! The scripted workload behind `spyglass demo`, as data and a driver: sessions arriving
//! over time against a runtime over its real HTTP routes, and the policy and runtime
//! settings it runs with. Starting the runtime and the inspector is `roles::demo`'s.

use crate::protocol::RawJson;
use crate::protocol::rest::{CreateSession, ExecuteRequest, SendRequest};
use crate::runtime::{Policy, PolicyError, RuntimeConfig};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::time::Duration;
use thiserror::Error;

/// The policy the demo's runtime runs with.
pub const POLICY: &str = include_str!("../examples/demo-policy.toml");

/// The eval suite the demo runs now and then.
pub const SUITE: &str = include_str!("../examples/evals/payments.toml");

#[derive(Debug, Error)]
pub enum DemoError {
    #[error("the demo's model script is malformed: {0}")]
    Script(String),
    #[error("runtime at {url} did not answer: {source}")]
    Unreachable { url: String, source: reqwest::Error },
    #[error("{route} answered {status}: {body}")]
    Unexpected {
        route: String,
        status: u16,
        body: String,
    },
}

/// How fast the workload goes; tests run it with no pauses.
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    /// Pause between calls inside a round.
    pub step: Duration,
    /// Pause between rounds.
    pub round: Duration,
    /// Rounds to run; `None` runs until the task is dropped.
    pub rounds: Option<u32>,
    /// Run the eval suite every this many rounds (0: never).
    pub eval_every: u32,
}

impl Default for Pace {
    fn default() -> Self {
        Self {
            step: Duration::from_millis(350),
            round: Duration::from_secs(6),
            rounds: None,
            eval_every: 3,
        }
    }
}

struct Http {
    base: String,
    key: Option<String>,
    client: reqwest::Client,
}

impl Http {
    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<(StatusCode, Value), DemoError> {
        let url = format!("{}{path}", self.base);
        let mut request = self.client.request(method, &url);
        if let Some(key) = &self.key {
            request = request.bearer_auth(key);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request
            .send()
            .await
            .map_err(|source| DemoError::Unreachable {
                url: self.base.clone(),
                source,
            })?;
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        let value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if status.is_server_error() && status != StatusCode::SERVICE_UNAVAILABLE {
            return Err(DemoError::Unexpected {
                route: path.to_owned(),
                status: status.as_u16(),
                body: text,
            });
        }
        Ok((status, value))
    }

    async fn create(&self, body: CreateSession) -> Result<String, DemoError> {
        let body = serde_json::to_value(body).unwrap_or(Value::Null);
        let (status, value) = self
            .call(reqwest::Method::POST, "/v1/sessions", Some(body))
            .await?;
        match value["id"].as_str() {
            Some(id) if status == StatusCode::CREATED => Ok(id.to_owned()),
            _ => Err(DemoError::Unexpected {
                route: "/v1/sessions".into(),
                status: status.as_u16(),
                body: value.to_string(),
            }),
        }
    }

    async fn execute(&self, session: &str, tool: &str, input: Value) -> Result<(), DemoError> {
        let body = ExecuteRequest {
            tool: tool.to_owned(),
            input: RawJson::from_value(&input),
        };
        let path = format!("/v1/sessions/{session}/execute");
        let body = serde_json::to_value(body).unwrap_or(Value::Null);
        self.call(reqwest::Method::POST, &path, Some(body)).await?;
        Ok(())
    }

    async fn send(&self, session: &str, message: &str) -> Result<(), DemoError> {
        let body = SendRequest {
            message: message.to_owned(),
        };
        let path = format!("/v1/sessions/{session}/send");
        let body = serde_json::to_value(body).unwrap_or(Value::Null);
        self.call(reqwest::Method::POST, &path, Some(body)).await?;
        Ok(())
    }
}

fn script(value: Value) -> Result<Option<crate::protocol::rest::ModelScript>, DemoError> {
    serde_json::from_value(value)
        .map(Some)
        .map_err(|e| DemoError::Script(e.to_string()))
}

/// Drives the workload against the runtime at `base_url` until `pace.rounds` is reached
/// (or forever). The first round runs without pauses so that every feature is on screen
/// within moments of the start.
pub async fn drive(base_url: &str, api_key: Option<String>, pace: Pace) -> Result<(), DemoError> {
    let http = Http {
        base: base_url.trim_end_matches('/').to_owned(),
        key: api_key,
        client: reqwest::Client::new(),
    };
    let mut round = 0u32;
    loop {
        let pause = if round == 0 {
            Duration::ZERO
        } else {
            pace.step
        };
        // The checkout session comes first so it is the one selected at start: its mocks
        // and timeline show the most.
        checkout(&http, round, pause).await?;
        if pace.eval_every > 0 && round.is_multiple_of(pace.eval_every) {
            run_suite(&http).await?;
        }
        agent_run(&http, round, pause).await?;
        if round.is_multiple_of(2) {
            external_agent(&http, round).await?;
        }
        round += 1;
        if pace.rounds.is_some_and(|limit| round >= limit) {
            return Ok(());
        }
        tokio::time::sleep(pace.round).await;
    }
}

/// Static and stateful mocks, one exhausted, a misspelled tool, a policy deny, a payment
/// over the threshold waiting for approval, and a mock declared but never called.
async fn checkout(http: &Http, round: u32, pause: Duration) -> Result<(), DemoError> {
    let session = http
        .create(CreateSession {
            servers: vec!["asaas".into(), "nuvem-fiscal".into(), "z-api".into()],
            user_id: format!("shopper_{round:03}"),
            mocks: Some(json!({
                "asaas/create_payment": {"id": format!("pay_{round}"), "status": "PENDING"},
                "asaas/create_customer": {"id": format!("cus_{round}")},
                "nuvem-fiscal/create_nfe": [
                    {"id": "nfe_1", "status": "AUTHORIZED"},
                    {"id": "nfe_2", "status": "AUTHORIZED"}
                ],
                "z-api/send_message": [{"id": "msg_1"}, {"id": "msg_2"}, {"id": "msg_3"}],
                "asaas/refund_payment": {"id": "ref_1"}
            })),
            ..Default::default()
        })
        .await?;
    let calls: [(&str, Value); 8] = [
        (
            "asaas/create_customer",
            json!({"name": "Ana", "cpf": "123.456.789-00"}),
        ),
        (
            "asaas/create_payment",
            json!({"value": 120, "billingType": "PIX"}),
        ),
        (
            "nuvem-fiscal/create_nfe",
            json!({"payment": format!("pay_{round}")}),
        ),
        (
            "z-api/send_message",
            json!({"to": "+55 11 99999-0000", "text": "Pix received"}),
        ),
        ("nuvem-fiscal/create_nfe", json!({"payment": "pay_again"})),
        ("nuvem-fiscal/create_nfe", json!({"payment": "pay_third"})),
        ("asaas/create_paymet", json!({"value": 80})),
        (
            "asaas/create_transfer",
            json!({"value": 900, "to": "acct_9"}),
        ),
    ];
    for (tool, input) in calls {
        http.execute(&session, tool, input).await?;
        tokio::time::sleep(pause).await;
    }
    // Over the threshold: queued for a human in the Approvals tab.
    http.execute(
        &session,
        "asaas/create_payment",
        json!({"value": 5000 + round * 250, "billingType": "BOLETO"}),
    )
    .await?;
    if round == 0 {
        // A second one from the start, so there is one to approve and one to watch expire.
        http.execute(
            &session,
            "asaas/create_payment",
            json!({"value": 1800, "billingType": "PIX"}),
        )
        .await?;
    }
    Ok(())
}

/// An agent run through `send`: several steps, tool calls with a spread of durations.
async fn agent_run(http: &Http, round: u32, pause: Duration) -> Result<(), DemoError> {
    let fail = round % 4 == 3;
    let mut model = json!({
        "sequence": [
            {"tool_calls": [
                {"name": "asaas/create_customer", "arguments": {"name": "Bruno"}, "latency_ms": 40 + (round % 5) * 30},
                {"name": "asaas/create_payment", "arguments": {"value": 49.9}, "latency_ms": 120 + (round % 3) * 90}
            ], "delay_ms": 60},
            {"tool_calls": [
                {"name": "nuvem-fiscal/create_nfe", "arguments": {"payment": "pay_agent"}, "latency_ms": 260}
            ], "delay_ms": 90},
            {"tool_calls": [
                {"name": "z-api/send_message", "arguments": {"text": "NF-e issued"}, "latency_ms": 35}
            ], "delay_ms": 40},
            {"text": "Charged R$49.90, issued the NF-e and told the customer.", "delay_ms": 30}
        ]
    });
    if fail {
        model["fail_on_step"] = json!([{"step": 2, "error": "Rate limited by provider"}]);
    } else if round % 4 == 1 {
        // Call 1 throws and the loop's retry (call 2) goes on with the invoice: the
        // timeline shows the failed attempt on its step (`↻1`).
        model["retries"] = json!(1);
        model["fail_on_step"] = json!([{"step": 1, "error": "Overloaded, retrying"}]);
        if let Some(sequence) = model["sequence"].as_array_mut() {
            sequence.insert(1, json!({"text": "never answered: call 1 throws"}));
        }
    }
    let session = http
        .create(CreateSession {
            servers: vec!["asaas".into(), "nuvem-fiscal".into(), "z-api".into()],
            user_id: format!("agent_{round:03}"),
            mocks: Some(json!({
                "asaas/create_customer": {"id": "cus_agent"},
                "asaas/create_payment": [{"id": "pay_agent", "status": "PENDING"}],
                "nuvem-fiscal/create_nfe": {"id": "nfe_agent", "status": "AUTHORIZED"},
                "z-api/send_message": {"id": "msg_agent"}
            })),
            model: script(model)?,
            ..Default::default()
        })
        .await?;
    tokio::time::sleep(pause).await;
    http.send(&session, "Charge Bruno R$49.90 and send the invoice")
        .await
}

/// Events from another process's agent SDK, forwarded to `POST /v1/events` without a
/// session: the inspector groups them by conversation.
async fn external_agent(http: &Http, round: u32) -> Result<(), DemoError> {
    let conversation = format!("conv_ext_{round}");
    let step = json!({
        "kind": "agent.step.completed", "agentName": "SupportAgent", "model": "gpt-4o-mini",
        "provider": "openai", "iteration": 0, "streaming": false, "conversationId": conversation,
        "tokens": {"prompt": 412, "completion": 37, "total": 449}, "duration": 840,
        "step": {"iteration": 0, "model": "gpt-4o-mini", "finishReason": "tool_calls",
                 "tokens": {"prompt": 412, "completion": 37, "total": 449},
                 "toolCalls": [{"id": format!("ext_{round}"), "name": "lookup_order",
                                "args": {"order": "o_9"}, "result": {"status": "shipped"},
                                "duration": 118, "needsApproval": false}]}
    });
    let done = json!({
        "kind": "agent.completed", "agentName": "SupportAgent", "model": "gpt-4o-mini",
        "provider": "openai", "input": "Where is my order?", "output": "It shipped yesterday.",
        "steps": [], "tokens": {"prompt": 900, "completion": 70, "total": 970}, "duration": 1530,
        "finishReason": "stop", "streaming": false, "conversationId": conversation,
        "failoverAttempts": 0
    });
    http.call(
        reqwest::Method::POST,
        "/v1/events",
        Some(json!([step, done])),
    )
    .await?;
    Ok(())
}

/// Runs the example suite through the runtime's eval runner.
async fn run_suite(http: &Http) -> Result<(), DemoError> {
    // Two attempts per case, so the suite's flaky case both passes and fails in every run.
    let body = json!({"suites": [SUITE], "repeat": 2});
    let (status, value) = http
        .call(reqwest::Method::POST, "/v1/evals/runs", Some(body))
        .await?;
    // A runtime without the eval runner answers 404; the rest of the demo goes on.
    if status.is_client_error() && status != StatusCode::NOT_FOUND {
        return Err(DemoError::Unexpected {
            route: "/v1/evals/runs".into(),
            status: status.as_u16(),
            body: value.to_string(),
        });
    }
    Ok(())
}

/// The demo runtime's settings: test mode, the demo policy, and approvals that expire
/// after two minutes so an unanswered one visibly runs out.
pub fn runtime_config() -> Result<RuntimeConfig, PolicyError> {
    Ok(RuntimeConfig {
        test_mode: true,
        policy: Policy::from_toml(POLICY)?,
        approval_ttl: Duration::from_mins(2),
        ..RuntimeConfig::default()
    })
}
