//! REST calls to a runtime through reqwest: the state re-read (sessions, approvals), the
//! approval decisions and eval reruns. Non-2xx answers become `ClientError::Api` with the
//! runtime's `code` and `message`.

use super::ClientError;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use serde::de::DeserializeOwned;
use spyglass_protocol::ApiError;
use spyglass_protocol::events::EvalScope;
use spyglass_protocol::rest::{
    ApprovalList, ApprovalView, DecisionRequest, EvalRunCreated, EvalRunDetail, EvalRunRequest,
    EvalSuiteDocument, EvalSummary, SessionList,
};
use std::time::Duration;

/// What `POST /v1/events` answered.
#[derive(Debug, Clone, Copy, Default, serde::Deserialize)]
pub struct Posted {
    pub accepted: u64,
    /// Eval results the runtime already held (same run, case, attempt), left out.
    #[serde(default)]
    pub duplicates: u64,
}

/// The header a request names its project (tenant) with.
pub const PROJECT_HEADER: &str = "x-codespar-project";

#[derive(Debug, Clone)]
pub struct RestClient {
    base: String,
    http: reqwest::Client,
    /// Acting for every project (`*`): only the stream takes that; REST reads are skipped.
    all_projects: bool,
}

impl RestClient {
    /// Whether it acts for every project (`*`), which only the stream takes.
    pub fn all_projects(&self) -> bool {
        self.all_projects
    }

    pub fn new(base: &str, api_key: Option<&str>) -> Result<Self, ClientError> {
        Self::scoped(base, api_key, None)
    }

    /// Like `new`, every request acting for `project` (`x-codespar-project`).
    pub fn scoped(
        base: &str,
        api_key: Option<&str>,
        project: Option<&str>,
    ) -> Result<Self, ClientError> {
        let mut headers = HeaderMap::new();
        if let Some(project) = project {
            let value = HeaderValue::from_str(project)
                .map_err(|_| ClientError::Project(project.escape_debug().to_string()))?;
            headers.insert(PROJECT_HEADER, value);
        }
        if let Some(key) = api_key {
            let mut value = HeaderValue::from_str(&format!("Bearer {key}"))
                .map_err(|e| ClientError::Key(e.to_string()))?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        let http = reqwest::Client::builder()
            .default_headers(headers)
            .timeout(Duration::from_secs(15))
            .build()?;
        let base = base.trim_end_matches('/');
        // REST always goes over http(s), even when the user gave the ws:// address.
        let base = match base.split_once("://") {
            Some(("ws", rest)) => format!("http://{rest}"),
            Some(("wss", rest)) => format!("https://{rest}"),
            Some(("http" | "https", _)) => base.to_owned(),
            _ => return Err(ClientError::Url(base.to_owned())),
        };
        Ok(Self {
            base,
            http,
            all_projects: project == Some(super::ALL_PROJECTS),
        })
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    async fn read<T: DeserializeOwned>(response: reqwest::Response) -> Result<T, ClientError> {
        let status = response.status();
        if status.is_success() {
            return Ok(response.json::<T>().await?);
        }
        let text = response.text().await.unwrap_or_default();
        let (code, message) = match serde_json::from_str::<ApiError>(&text) {
            Ok(err) => (err.code, err.message),
            Err(_) => ("http_error".to_owned(), text.chars().take(200).collect()),
        };
        Err(ClientError::Api {
            status: status.as_u16(),
            code,
            message,
        })
    }

    /// `GET /v1/sessions`, every page: follows `next_cursor` until the last page (a
    /// runtime that pages nothing answers one page without a cursor). A cursor that does
    /// not move ends the walk rather than looping.
    pub async fn sessions(&self) -> Result<SessionList, ClientError> {
        let mut all = SessionList {
            sessions: Vec::new(),
            next_cursor: None,
        };
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let mut request = self
                .http
                .get(format!("{}/v1/sessions", self.base))
                .query(&[("limit", SESSIONS_PAGE)]);
            if let Some(cursor) = &cursor {
                request = request.query(&[("cursor", cursor)]);
            }
            let page: SessionList = Self::read(request.send().await?).await?;
            all.sessions.extend(page.sessions);
            match page.next_cursor {
                Some(next) if Some(&next) != cursor.as_ref() => cursor = Some(next),
                _ => break,
            }
        }
        Ok(all)
    }

    /// `GET /v1/approvals?status=all`, every page (like `sessions`).
    pub async fn approvals(&self) -> Result<ApprovalList, ClientError> {
        let mut all = ApprovalList {
            approvals: Vec::new(),
            next_cursor: None,
        };
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let mut request = self
                .http
                .get(format!("{}/v1/approvals", self.base))
                .query(&[("status", "all")])
                .query(&[("limit", SESSIONS_PAGE)]);
            if let Some(cursor) = &cursor {
                request = request.query(&[("cursor", cursor)]);
            }
            let page: ApprovalList = Self::read(request.send().await?).await?;
            all.approvals.extend(page.approvals);
            match page.next_cursor {
                Some(next) if Some(&next) != cursor.as_ref() => cursor = Some(next),
                _ => break,
            }
        }
        Ok(all)
    }

    /// `POST /v1/approvals/:id/approve` or `/deny`; the effect arrives on the stream.
    pub async fn decide(
        &self,
        approval_id: &str,
        approve: bool,
        body: &DecisionRequest,
    ) -> Result<ApprovalView, ClientError> {
        let verb = if approve { "approve" } else { "deny" };
        let response = self
            .http
            .post(format!("{}/v1/approvals/{approval_id}/{verb}", self.base))
            .json(body)
            .send()
            .await?;
        Self::read(response).await
    }

    /// `POST /v1/evals/runs`: starts a run; its results arrive on the stream and at
    /// `eval_run`.
    pub async fn start_eval_run(
        &self,
        request: &EvalRunRequest,
    ) -> Result<EvalRunCreated, ClientError> {
        let response = self
            .http
            .post(format!("{}/v1/evals/runs", self.base))
            .json(request)
            .send()
            .await?;
        Self::read(response).await
    }

    /// `GET /v1/evals/runs/:id`: the run so far (`status` running or completed).
    pub async fn eval_run(&self, run_id: &str) -> Result<EvalRunDetail, ClientError> {
        let response = self
            .http
            .get(format!("{}/v1/evals/runs/{run_id}", self.base))
            .send()
            .await?;
        Self::read(response).await
    }

    /// `GET /v1/sessions/:id`'s calls (the ones the runtime retains).
    pub async fn session_calls(
        &self,
        id: &str,
    ) -> Result<Vec<spyglass_protocol::rest::CallView>, ClientError> {
        let response = self
            .http
            .get(format!("{}/v1/sessions/{id}", self.base))
            .send()
            .await?;
        let detail: spyglass_protocol::rest::SessionDetail = Self::read(response).await?;
        Ok(detail.calls)
    }

    /// `POST /v1/events` with `body`, a JSON array of events already encoded; answers how
    /// many the runtime took (all or none of the batch) and how many eval results it left
    /// out because its history already held them.
    pub async fn post_events(&self, body: String) -> Result<Posted, ClientError> {
        let response = self
            .http
            .post(format!("{}/v1/events", self.base))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .await?;
        Self::read::<Posted>(response).await
    }

    /// The newest seq of the project's stream (0 when it is empty), found by asking
    /// `GET /v1/events?since=S&limit=1` whether S is past it (the page then carries
    /// `reset`): doubling S, then halving the interval, so a long history costs about
    /// 2·log2(newest) one-event pages and is never read whole.
    pub async fn newest_seq(&self) -> Result<u64, ClientError> {
        // Invariant: `low` is at most the newest seq, `high` (once found) beyond it.
        let mut low = 0u64;
        let mut high = None::<u64>;
        let mut probe = 1024u64;
        loop {
            if high.is_some_and(|high| high - low <= 1) {
                return Ok(low);
            }
            if self.beyond_newest(probe).await? {
                high = Some(probe);
            } else {
                low = probe;
            }
            probe = match high {
                Some(high) => low + (high - low) / 2,
                None if low >= u64::MAX / 2 => return Ok(low),
                None => low.saturating_mul(2),
            };
        }
    }

    /// Whether `since` is past the newest seq: the events page answers with `reset`.
    async fn beyond_newest(&self, since: u64) -> Result<bool, ClientError> {
        #[derive(serde::Deserialize)]
        struct Page {
            #[serde(default)]
            reset: Option<serde::de::IgnoredAny>,
        }
        let request = self
            .http
            .get(format!("{}/v1/events", self.base))
            .query(&[("since", since), ("limit", 1)]);
        let page: Page = Self::read(request.send().await?).await?;
        Ok(page.reset.is_some())
    }

    /// `GET /v1/evals/summary[?window=N]`.
    pub async fn eval_summary(&self, window: Option<u32>) -> Result<EvalSummary, ClientError> {
        let query = window.map(|n| format!("?window={n}")).unwrap_or_default();
        let response = self
            .http
            .get(format!("{}/v1/evals/summary{query}", self.base))
            .send()
            .await?;
        Self::read(response).await
    }

    /// `POST /v1/evals/runs` with `{suites, case?}` (suite documents or file text); the
    /// results arrive on the stream. With a case it is a case run (`scope: "case"`): that
    /// case's newest result, no run of its suite.
    pub async fn rerun(
        &self,
        suites: Vec<serde_json::Value>,
        case: Option<&str>,
    ) -> Result<EvalRunCreated, ClientError> {
        let request = EvalRunRequest {
            suites,
            repeat: None,
            case: case.map(str::to_owned),
            scope: if case.is_some() {
                EvalScope::Case
            } else {
                EvalScope::Suite
            },
        };
        self.start_eval_run(&request).await
    }

    /// `GET /v1/evals/suites/:name`: the suite as the runtime last ran it.
    pub async fn suite_document(&self, suite: &str) -> Result<EvalSuiteDocument, ClientError> {
        let response = self
            .http
            .get(format!(
                "{}/v1/evals/suites/{}",
                self.base,
                encode_segment(suite)
            ))
            .send()
            .await?;
        Self::read(response).await
    }

    /// Runs a suite again as the runtime last ran it, all of it or one case (`case` is the
    /// case id; the runner reads it as a glob, and an id matches itself).
    pub async fn rerun_by_name(
        &self,
        suite: &str,
        case: Option<&str>,
    ) -> Result<EvalRunCreated, ClientError> {
        let document = self.suite_document(suite).await?.document;
        self.rerun(vec![document], case).await
    }
}

/// Percent-encodes one URL path segment (suite names hold spaces and slashes).
/// Rows asked for per page of `GET /v1/sessions` and `GET /v1/approvals` (the runtime's
/// most).
const SESSIONS_PAGE: usize = 1000;
/// Pages followed at most in one re-read.
const MAX_PAGES: usize = 10_000;

fn encode_segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn path_segments_are_percent_encoded() {
        assert_eq!(super::encode_segment("pay ments/β"), "pay%20ments%2F%CE%B2");
        assert_eq!(super::encode_segment("a-b_c.d~"), "a-b_c.d~");
    }
}
