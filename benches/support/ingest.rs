//! `ingest`: frames folded into the inspector per second when they come over a loopback
//! WebSocket through the real observer task and `App::on_client`, against parsing the same
//! frames alone with `protocol::decode` on one thread.

use super::workload::Workload;
use super::{Figure, median};
use anyhow::{Context, bail};
use futures_util::{SinkExt, StreamExt};
use spyglass::client::{ClientMsg, ObserverConfig, RestClient, spawn_observer};
use spyglass::model::Limits;
use spyglass::protocol::decode;
use spyglass::ui::{App, SystemClock};
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};

/// The inspector's channel depth and fold batch (`ui::run`).
const BATCH: usize = 4096;

#[derive(Debug, Clone)]
pub struct IngestResult {
    pub frames: usize,
    /// Frames the app had folded when the last one arrived (must equal `frames`).
    pub folded: u64,
    pub parse_errors: u64,
    pub sessions: usize,
    pub rate: f64,
    pub baseline: f64,
    /// Fold rate over decode rate, per round.
    pub paired: Vec<f64>,
    /// Share of the run the folding loop was busy (near 1: folding is the bottleneck).
    pub fold_busy: f64,
    /// Decode and fold on one thread, no socket.
    pub in_process: f64,
}

impl IngestResult {
    pub fn figure(&self) -> Figure {
        Figure {
            name: "ingest",
            value: self.rate,
            baseline: self.baseline,
            unit: "events/s",
            paired: self.paired.clone(),
        }
    }
}

/// The frames used: 1 % `session.created`, then three `tool.called` to one step.
pub fn workload(frames: usize) -> Workload {
    let sessions = (frames / 100).max(1);
    Workload::even(sessions, frames / sessions - 1)
}

pub fn run(frames: usize, rounds: usize) -> anyhow::Result<IngestResult> {
    let texts = workload(frames).texts();
    let msgs = messages(&texts);
    let rt = super::tokio_rt(2)?;
    let (mut rates, mut bases, mut paired) = (vec![], vec![], vec![]);
    let mut last = None;
    for round in 0..rounds.max(1) {
        // Which side goes first alternates, so neither always gets the warmer machine.
        let ((rate, busy, app), base) = if round % 2 == 0 {
            let base = parse_only(&texts)?;
            (rt.block_on(over_websocket(&msgs))?, base)
        } else {
            let folded = rt.block_on(over_websocket(&msgs))?;
            (folded, parse_only(&texts)?)
        };
        bases.push(base);
        rates.push(rate);
        if base > 0.0 {
            paired.push(rate / base);
        }
        last = Some((busy, app));
    }
    let (fold_busy, app) = last.context("no round ran")?;
    let start = Instant::now();
    decode_and_fold(&texts)?;
    let in_process = texts.len() as f64 / start.elapsed().as_secs_f64();
    Ok(IngestResult {
        frames: texts.len(),
        folded: app.model.counters.applied,
        parse_errors: app.model.counters.parse_errors,
        sessions: app.model.sessions_len(),
        rate: median(&mut rates),
        baseline: median(&mut bases),
        paired,
        fold_busy,
        in_process,
    })
}

/// The baseline: typed decode of every frame, nothing else.
pub fn parse_only(texts: &[String]) -> anyhow::Result<f64> {
    let start = Instant::now();
    for text in texts {
        black_box(decode(black_box(text))?);
    }
    Ok(texts.len() as f64 / start.elapsed().as_secs_f64())
}

/// Decode and fold in-process, without the socket (criterion's second line).
pub fn decode_and_fold(texts: &[String]) -> anyhow::Result<u64> {
    let mut model = spyglass::model::Model::new(Limits::default());
    for text in texts {
        model.apply(&decode(text)?);
    }
    Ok(model.counters.applied)
}

/// The frames as the sending side holds them: cloning one shares its text, so a round's
/// setup neither copies the frames nor hands the fold memory the sender just freed.
pub fn messages(texts: &[String]) -> Vec<Utf8Bytes> {
    texts.iter().map(|t| Utf8Bytes::from(t.clone())).collect()
}

/// Serves `msgs` as fast as the socket takes them to the real observer task; the app
/// folds as the inspector's loop does. Rate is from the first frame folded to the last.
///
/// The sending side stands for the runtime, which is another process: it runs on a thread
/// of its own, not as a task on the inspector's workers, where it would take turns with
/// the observer on one worker whenever the scheduler put them together.
pub async fn over_websocket(msgs: &[Utf8Bytes]) -> anyhow::Result<(f64, f64, App)> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let url = format!("http://{}", listener.local_addr()?);
    let want = msgs.len() as u64;
    let msgs = msgs.to_vec();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = std::thread::Builder::new().name("runtime".into()).spawn(
        move || -> anyhow::Result<()> {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(async move {
                listener.set_nonblocking(true)?;
                let listener = TcpListener::from_std(listener)?;
                let (tcp, _) = listener.accept().await?;
                tcp.set_nodelay(true)?;
                let mut ws = tokio_tungstenite::accept_async(tcp).await?;
                for msg in msgs {
                    ws.feed(Message::Text(msg)).await?;
                }
                ws.flush().await?;
                // Hold the line open until the bench is done, as a runtime would.
                tokio::select! {
                    _ = stop_rx => {}
                    () = async { while let Some(Ok(_)) = ws.next().await {} } => {}
                }
                Ok(())
            })
        },
    )?;
    let (tx, mut rx) = mpsc::channel(BATCH);
    let observer = spawn_observer(
        ObserverConfig::new(&url, None),
        RestClient::new(&url, None)?,
        tx,
    );
    let mut app = App::new(&url, Limits::default(), Arc::new(SystemClock));
    let fold = async {
        let mut first: Option<Instant> = None;
        let mut busy = Duration::ZERO;
        while app.model.counters.applied + app.model.counters.parse_errors < want {
            let Some(msg) = rx.recv().await else {
                bail!("observer ended after {} frames", app.model.counters.applied);
            };
            if first.is_none() && matches!(msg, ClientMsg::Frames(_)) {
                first = Some(Instant::now());
            }
            let t = Instant::now();
            app.on_client(msg);
            for _ in 0..BATCH {
                match rx.try_recv() {
                    Ok(msg) => app.on_client(msg),
                    Err(_) => break,
                }
            }
            busy += t.elapsed();
        }
        let elapsed = first.map_or(0.0, |t| t.elapsed().as_secs_f64()).max(1e-9);
        Ok((
            want.saturating_sub(1) as f64 / elapsed,
            busy.as_secs_f64() / elapsed,
        ))
    };
    let (rate, busy) = tokio::time::timeout(Duration::from_mins(2), fold)
        .await
        .context("ingest did not finish in 120 s")??;
    observer.abort();
    stop_tx.send(()).ok();
    server
        .join()
        .map_err(|_| anyhow::anyhow!("the sending thread panicked"))??;
    Ok((rate, busy, app))
}
