//! The observer stream task: connect to `/v1/observe?since=N`, decode frames, resume from
//! the last seq after any drop (exponential backoff with jitter), treat 45 s of silence as
//! a drop, and re-read state over REST when the runtime reports a `stream.gap` or a
//! `stream.reset` (the runtime restarted without the history resumed from).

use super::{ClientError, ClientMsg, RestClient, jittered, observe_url, reconnects};
use futures_util::{FutureExt, SinkExt, StreamExt};
use spyglass_protocol::{Event, Frame, decode};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::error::{Error as WsError, UrlError};
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

#[derive(Debug, Clone)]
pub struct ObserverConfig {
    pub base_url: String,
    pub api_key: Option<String>,
    /// The project the stream is for (`x-codespar-project`); None: the default one.
    pub project: Option<String>,
    /// Resume point: only frames with a larger seq are asked for.
    pub since: u64,
    /// The stream `since` belongs to (`stream.hello`); empty when not known yet. Sent on
    /// every connection so a runtime that restarted answers `stream.reset`.
    pub epoch: String,
    /// Silence after which the connection is presumed dead (the runtime pings every 15 s).
    pub heartbeat: Duration,
    /// First reconnect delay, doubled per failed attempt up to 10 s (`backoff`). Tests and
    /// local tools that cut the line on purpose shorten it.
    pub backoff_base: Duration,
}

impl ObserverConfig {
    pub fn new(base_url: &str, api_key: Option<&str>) -> Self {
        Self {
            base_url: base_url.to_owned(),
            api_key: api_key.map(str::to_owned),
            project: None,
            since: 0,
            epoch: String::new(),
            heartbeat: Duration::from_secs(45),
            backoff_base: super::BACKOFF_BASE,
        }
    }
}

/// Starts the observer task; it ends when the receiving side of `tx` is dropped.
pub fn spawn_observer(
    config: ObserverConfig,
    rest: RestClient,
    tx: mpsc::Sender<ClientMsg>,
) -> JoinHandle<()> {
    tokio::spawn(run(config, rest, tx))
}

async fn run(config: ObserverConfig, rest: RestClient, tx: mpsc::Sender<ClientMsg>) {
    let mut last_seq = config.since;
    let mut epoch = config.epoch.clone();
    let mut attempt: u32 = 0;
    let mut delays = reconnects(config.backoff_base);
    // A gap whose REST re-read has not succeeded yet: retried on the next connection
    // before any frame, since resuming past the gap will not announce it again.
    let mut reread_due = false;
    loop {
        if tx.send(ClientMsg::Connecting { attempt }).await.is_err() {
            return;
        }
        let reason = match connect(&config, last_seq, &epoch).await {
            Ok(ws) => {
                attempt = 0;
                delays = reconnects(config.backoff_base);
                if tx.send(ClientMsg::Connected).await.is_err() {
                    return;
                }
                let mut stream = Position {
                    last_seq: &mut last_seq,
                    epoch: &mut epoch,
                };
                match read(ws, &config, &rest, &tx, &mut stream, &mut reread_due).await {
                    Some(reason) => reason,
                    None => return,
                }
            }
            Err(ClientError::Rejected { status }) => {
                tracing::warn!(status, "runtime refused the stream; not retrying");
                let _ = tx.send(ClientMsg::Rejected { status }).await;
                return;
            }
            Err(ClientError::WebSocket(cause)) => cause,
            Err(err) => err.to_string(),
        };
        attempt = attempt.saturating_add(1);
        // The schedule never ends; its cap is what it would say.
        let ceiling = delays.next().unwrap_or(super::BACKOFF_CAP);
        let retry_in = jittered(ceiling, fastrand::f64());
        tracing::info!(attempt, ?retry_in, %reason, "observer disconnected");
        let msg = ClientMsg::Disconnected {
            attempt,
            retry_in,
            reason,
        };
        if tx.send(msg).await.is_err() {
            return;
        }
        tokio::time::sleep(retry_in).await;
    }
}

/// The largest message the observer accepts. The runtime's biggest frames (an event
/// carrying a 1 MiB request body) are far below it; a bigger one is a broken or hostile
/// peer, and the connection is dropped rather than the message buffered.
pub const MAX_FRAME_BYTES: usize = 8 * 1024 * 1024;

/// The most frames handed to the UI in one message.
const BATCH: usize = 256;

/// Where the client is in which stream: what a resume sends.
struct Position<'a> {
    last_seq: &'a mut u64,
    epoch: &'a mut String,
}

/// An epoch as a query value: the runtime's own are `ep_` and hex; anything else a peer
/// sent is not repeated into a URL.
fn epoch_param(epoch: &str) -> &str {
    if epoch
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        epoch
    } else {
        ""
    }
}

/// What a decoded frame does to the client's place in the stream; false for a frame that
/// is not handed on (`stream.hello` only names the stream).
fn advance(stream: &mut Position<'_>, frame: &Frame) -> bool {
    match &frame.event {
        Event::StreamHello(hello) => {
            epoch_param(&hello.epoch).clone_into(stream.epoch);
            false
        }
        Event::StreamReset(reset) => {
            // Another history starts at 0: the old seqs mean nothing in it.
            *stream.last_seq = frame.seq;
            epoch_param(&reset.epoch).clone_into(stream.epoch);
            true
        }
        _ => {
            *stream.last_seq = (*stream.last_seq).max(frame.seq);
            true
        }
    }
}

/// The observer's connection: tungstenite's stream over the socket (no TLS in this build).
type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

async fn connect(config: &ObserverConfig, since: u64, epoch: &str) -> Result<Ws, ClientError> {
    let url = format!(
        "{}&epoch={}",
        observe_url(&config.base_url, since)?,
        epoch_param(epoch)
    );
    let mut request = url
        .into_client_request()
        .map_err(|e| ClientError::WebSocket(e.to_string()))?;
    if let Some(key) = &config.api_key {
        let mut value = HeaderValue::from_str(&format!("Bearer {key}"))
            .map_err(|e| ClientError::Key(e.to_string()))?;
        value.set_sensitive(true);
        request.headers_mut().insert("authorization", value);
    }
    if let Some(project) = &config.project {
        let value = HeaderValue::from_str(project)
            .map_err(|_| ClientError::Project(project.escape_debug().to_string()))?;
        request
            .headers_mut()
            .insert(super::rest::PROJECT_HEADER, value);
    }
    let caps = WebSocketConfig::default()
        .max_message_size(Some(MAX_FRAME_BYTES))
        .max_frame_size(Some(MAX_FRAME_BYTES));
    // Nagle off: a pong goes out at once.
    let dial = tokio_tungstenite::connect_async_with_config(request, Some(caps), true);
    match tokio::time::timeout(Duration::from_secs(10), dial).await {
        Ok(Ok((ws, _))) => Ok(ws),
        Ok(Err(e)) => Err(dial_error(&e, &config.base_url)),
        Err(_) => Err(ClientError::WebSocket(
            "no answer within 10 s (timed out)".into(),
        )),
    }
}

/// A failed dial in the words the status bar and `tail` show: the cause first (refused,
/// DNS, TLS, the runtime's answer), since "IO error: os error 111" tells a user nothing.
fn dial_error(e: &WsError, base_url: &str) -> ClientError {
    let host = base_url
        .split_once("://")
        .map_or(base_url, |(_, rest)| rest)
        .split('/')
        .next()
        .unwrap_or_default();
    let cause = match e {
        WsError::Http(response) => {
            let status = response.status().as_u16();
            if matches!(status, 401 | 403) {
                return ClientError::Rejected { status };
            }
            format!("the runtime answered {status} to the stream request")
        }
        WsError::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => {
            format!("connection refused by {host}")
        }
        WsError::Io(io) if io.to_string().contains("lookup address") => {
            format!("DNS: cannot resolve {host}")
        }
        WsError::Io(io) => format!("cannot reach {host}: {io}"),
        WsError::Tls(tls) => format!("TLS: {tls}"),
        WsError::Url(UrlError::TlsFeatureNotEnabled) => {
            "TLS: this build dials the stream over ws:// only; use an http:// URL".to_owned()
        }
        other => other.to_string(),
    };
    ClientError::WebSocket(cause)
}

/// Reads until the stream drops (returns why) or the UI is gone (returns `None`).
async fn read(
    mut ws: Ws,
    config: &ObserverConfig,
    rest: &RestClient,
    tx: &mpsc::Sender<ClientMsg>,
    stream: &mut Position<'_>,
    reread_due: &mut bool,
) -> Option<String> {
    if *reread_due {
        match reread(rest, tx).await? {
            Ok(()) => *reread_due = false,
            Err(reason) => return Some(reason),
        }
    }
    // One heartbeat timer for the connection, moved only when it fires: a timeout per
    // read registered and cancelled a timer for every frame, on the stream's hot path.
    let mut last_heard = tokio::time::Instant::now();
    let heartbeat = tokio::time::sleep(config.heartbeat);
    tokio::pin!(heartbeat);
    // Frames decoded and not yet handed to the UI: every message already read when the
    // first arrived, up to `BATCH`, goes as one message.
    let mut batch = Vec::new();
    loop {
        let mut next = tokio::select! {
            biased;
            next = ws.next() => next,
            () = &mut heartbeat => {
                let due = last_heard + config.heartbeat;
                if due > tokio::time::Instant::now() {
                    heartbeat.as_mut().reset(due);
                    continue;
                }
                return Some(format!(
                    "no frame or ping for {} s",
                    config.heartbeat.as_secs()
                ));
            }
        };
        last_heard = tokio::time::Instant::now();
        let mut pinged = false;
        // This message, then every one tungstenite has ready without waiting.
        loop {
            let text = match next {
                Some(Ok(Message::Text(text))) => decoded(&text),
                Some(Ok(Message::Binary(bytes))) => {
                    if let Ok(text) = std::str::from_utf8(&bytes) {
                        decoded(text)
                    } else {
                        Err("binary frame is not UTF-8".into())
                    }
                }
                Some(Ok(Message::Close(_))) => {
                    send(tx, &mut batch).await?;
                    return Some("runtime closed the stream".into());
                }
                // tungstenite queued the pong; it is written below, before waiting again.
                Some(Ok(Message::Ping(_))) => {
                    pinged = true;
                    Ok(None)
                }
                // Pongs only prove the line is alive; the heartbeat starts over.
                Some(Ok(Message::Pong(_) | Message::Frame(_))) => Ok(None),
                // What `tokio_tungstenite` ends its stream with, rather than an error.
                None | Some(Err(WsError::ConnectionClosed | WsError::AlreadyClosed)) => {
                    send(tx, &mut batch).await?;
                    return Some("stream closed".into());
                }
                Some(Err(e)) => {
                    send(tx, &mut batch).await?;
                    return Some(e.to_string());
                }
            };
            let mut gap = false;
            match text {
                Ok(Some(frame)) => {
                    if advance(stream, &frame) {
                        gap = matches!(frame.event, Event::StreamGap(_) | Event::StreamReset(_));
                        batch.push(frame);
                    }
                }
                Ok(None) => {}
                Err(err) => {
                    // Reported in its place in the stream: what came before goes first.
                    send(tx, &mut batch).await?;
                    tx.send(ClientMsg::ParseError(err)).await.ok()?;
                }
            }
            if gap || batch.len() >= BATCH {
                send(tx, &mut batch).await?;
            }
            if gap {
                // Read before going on, so the re-read lands before the frames that follow
                // it. A failed one drops the stream: going on would leave the state short
                // of what the gap lost, and the next connection retries the re-read first.
                if let Err(reason) = reread(rest, tx).await? {
                    *reread_due = true;
                    return Some(reason);
                }
            }
            match ws.next().now_or_never() {
                Some(item) => next = item,
                None => break,
            }
        }
        send(tx, &mut batch).await?;
        if pinged {
            // The pong owed for a ping read above. A runtime that takes no bytes for a
            // whole heartbeat is as good as gone (tungstenite keeps one unsent pong and
            // reads on; the socket's send buffer holds thousands of pongs first).
            match tokio::time::timeout(config.heartbeat, ws.flush()).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Some(e.to_string()),
                Err(_) => {
                    return Some(format!(
                        "the runtime took no pong for {} s",
                        config.heartbeat.as_secs()
                    ));
                }
            }
        }
    }
}

/// A text message as the UI gets it: a frame, or why it is not one.
fn decoded(text: &str) -> Result<Option<Frame>, String> {
    decode(text).map(Some).map_err(|err| {
        tracing::warn!(%err, "undecodable frame");
        err.to_string()
    })
}

/// Hands the UI the frames batched so far, if any; `None` when the UI is gone. The next
/// batch starts with the room this one took, so a burst does not grow it step by step;
/// a batch far smaller than its room is shrunk first, so what waits in the channel holds
/// at most twice its frames' room (not a burst's room for a single frame).
async fn send(tx: &mpsc::Sender<ClientMsg>, batch: &mut Vec<Frame>) -> Option<()> {
    if !batch.is_empty() {
        let room = batch.len();
        if batch.capacity() > 2 * room {
            batch.shrink_to_fit();
        }
        let full = std::mem::replace(batch, Vec::with_capacity(room));
        tx.send(ClientMsg::Frames(full)).await.ok()?;
    }
    Some(())
}

/// The REST re-read after a gap or a reset, sent as `Hydrated` (or `RestError` and the reason it
/// failed). `None` when the UI is gone.
async fn reread(rest: &RestClient, tx: &mpsc::Sender<ClientMsg>) -> Option<Result<(), String>> {
    // No REST route reads every project: the all-projects stream replays what the runtime
    // retains after a reset instead (and never sends a gap).
    if rest.all_projects() {
        return Some(Ok(()));
    }
    match tokio::try_join!(rest.sessions(), rest.approvals()) {
        Ok((sessions, approvals)) => {
            let msg = ClientMsg::Hydrated {
                sessions,
                approvals,
            };
            tx.send(msg).await.ok()?;
            Some(Ok(()))
        }
        Err(err) => {
            let reason = format!("re-read after stream gap or reset: {err}");
            tx.send(ClientMsg::RestError(reason.clone())).await.ok()?;
            Some(Err(reason))
        }
    }
}
