//! REST requests the user asks for from a view (an eval rerun), each run in its own task so
//! the UI never waits on the network. Their effects arrive on the observer stream; a
//! failure comes back on the client channel as `ClientMsg::RestError` for the status line.

use crate::client::{ClientMsg, RestClient};
use tokio::sync::mpsc;

/// A way to reach the runtime: set by the event loop (and by end-to-end tests); pure UI
/// tests run without one and a request then says so in the status line.
#[derive(Debug, Clone)]
pub struct Requests {
    rest: RestClient,
    tx: mpsc::Sender<ClientMsg>,
}

impl Requests {
    pub fn new(rest: RestClient, tx: mpsc::Sender<ClientMsg>) -> Self {
        Self { rest, tx }
    }

    /// Runs `suite` again as the runtime last ran it, one case of it or all. Must be
    /// called inside a Tokio runtime (the inspector's loop is one).
    pub fn rerun(&self, suite: String, case: Option<String>) {
        let rest = self.rest.clone();
        let tx = self.tx.clone();
        tokio::spawn(async move {
            if let Err(err) = rest.rerun_by_name(&suite, case.as_deref()).await {
                let what = match &case {
                    Some(case) => format!("rerun of {suite} / {case} failed: {err}"),
                    None => format!("rerun of suite {suite} failed: {err}"),
                };
                // The UI may be gone already; then nobody needs the message.
                let _ = tx.send(ClientMsg::RestError(what)).await;
            }
        });
    }
}
