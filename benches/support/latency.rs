//! `latency`: from `Runtime::emit` to the frame that shows the event drawn, with events
//! emitted at a sustained rate and the inspector's own pieces in between (observer task,
//! channel, `App::on_client`, draw capped by `ui::run::FRAME` as `ui::run` does). The
//! baseline is the bare transport: the same stream read by a plain WebSocket client.

use super::{Figure, quantile};
use anyhow::{Context, bail};
use futures_util::StreamExt;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use spyglass::client::{ClientMsg, ObserverConfig, RestClient, spawn_observer};
use spyglass::model::Limits;
use spyglass::protocol::events::{CallSource, Counter, Outcome, ToolCalled};
use spyglass::protocol::{Event, RawJson, now_rfc3339};
use spyglass::runtime::{Runtime, RuntimeConfig, start};
use spyglass::ui::render::draw;
use spyglass::ui::run::{BATCH, FRAME};
use spyglass::ui::{App, SystemClock};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

/// Events before this are warm-up and not counted.
const WARMUP: Duration = Duration::from_millis(500);

#[derive(Debug, Clone)]
pub struct LatencyResult {
    pub rate: u32,
    pub events: usize,
    pub frames: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub baseline_p50_ms: f64,
    pub baseline_p99_ms: f64,
    /// What the last frame showed as folded (must be every event).
    pub folded: u64,
}

impl LatencyResult {
    pub fn figure(&self) -> Figure {
        Figure {
            name: "latency",
            value: self.p99_ms,
            baseline: self.baseline_p99_ms,
            unit: "ms(p99)",
            paired: Vec::new(),
        }
    }
}

/// When each seq was emitted, nanoseconds after `base` (0: not yet).
struct Stamps {
    base: Instant,
    at: Vec<AtomicU64>,
}

impl Stamps {
    fn new(events: usize) -> Stamps {
        Stamps {
            base: Instant::now(),
            at: (0..=events).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    fn mark(&self, seq: u64) {
        if let Some(slot) = self.at.get(seq as usize) {
            slot.store(self.base.elapsed().as_nanos() as u64 + 1, Ordering::Relaxed);
        }
    }

    /// Milliseconds from emit of `seq` to `now`, unless it was emitted in the warm-up.
    fn since(&self, seq: u64, now: Instant) -> Option<f64> {
        let at = self.at.get(seq as usize)?.load(Ordering::Relaxed);
        let emitted = self.base + Duration::from_nanos(at.checked_sub(1)?);
        (emitted >= self.base + WARMUP)
            .then(|| now.saturating_duration_since(emitted).as_secs_f64() * 1000.0)
    }
}

fn tool_called(i: u64) -> (Option<String>, Event) {
    let sid = format!("ses_lat_{:03}", i % 200);
    let event = Event::ToolCalled(ToolCalled {
        call_id: format!("call_{i:08}").into(),
        tool: "nuvem-fiscal/create_nfe".into(),
        input: RawJson::from_value(&serde_json::json!({"value": 4200, "customer": "cus_1"})),
        outcome: Outcome::Result(RawJson::from_value(
            &serde_json::json!({"id": format!("nfe_{i}"), "status": "authorized"}),
        )),
        started_at: now_rfc3339().into(),
        duration: 3.5,
        counter: Some(Counter {
            consumed: (i % 100) as u32,
            total: Some(100),
            ..Counter::default()
        }),
        source: CallSource::Execute,
        iteration: None,
    });
    (Some(sid), event)
}

/// Emits `events` tool calls at `rate` per second on a thread of its own, stamping each.
fn emitter(
    runtime: Runtime,
    stamps: Arc<Stamps>,
    rate: u32,
    events: usize,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let period = Duration::from_secs_f64(1.0 / f64::from(rate.max(1)));
        let start = Instant::now();
        for i in 0..events as u64 {
            let due = start + period.mul_f64(i as f64);
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
            let (sid, event) = tool_called(i);
            // A fresh runtime with one emitter gives seqs 1, 2, …; the stamp goes in
            // before emit so no reader can see the event before its stamp.
            stamps.mark(i + 1);
            let seq = runtime.emit(sid, event).seq;
            if seq != i + 1 {
                stamps.mark(seq);
            }
        }
    })
}

/// Reads the stream with a bare WebSocket client and notes when each seq arrived.
async fn bare_transport(rate: u32, events: usize) -> anyhow::Result<Vec<f64>> {
    let handle = start(RuntimeConfig::default(), "127.0.0.1:0".parse()?).await?;
    let (mut ws, _) = tokio_tungstenite::connect_async(handle.observe_url()).await?;
    let stamps = Arc::new(Stamps::new(events));
    let thread = emitter(handle.runtime(), stamps.clone(), rate, events);
    let mut lat = Vec::with_capacity(events);
    let read = async {
        while let Some(msg) = ws.next().await {
            let Message::Text(text) = msg? else { continue };
            let now = Instant::now();
            let seq = seq_of(&text).context("frame without seq")?;
            lat.extend(stamps.since(seq, now));
            if seq as usize >= events {
                return Ok(());
            }
        }
        bail!("stream ended early")
    };
    tokio::time::timeout(Duration::from_mins(2), read)
        .await
        .context("bare transport timed out")??;
    thread.join().ok().context("emitter panicked")?;
    handle.shutdown().await;
    Ok(lat)
}

fn seq_of(text: &str) -> Option<u64> {
    let at = text.find("\"seq\":")? + 6;
    let digits: String = text[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// The inspector's path, folded and drawn as `ui::run` does. Returns latencies and the app.
async fn inspector(rate: u32, events: usize) -> anyhow::Result<(Vec<f64>, u64, App)> {
    let handle = start(RuntimeConfig::default(), "127.0.0.1:0".parse()?).await?;
    let url = handle.url();
    let (tx, mut rx) = mpsc::channel(BATCH);
    let observer = spawn_observer(
        ObserverConfig::new(&url, None),
        RestClient::new(&url, None)?,
        tx,
    );
    let mut app = App::new(&url, Limits::default(), Arc::new(SystemClock));
    let mut terminal = Terminal::new(TestBackend::new(200, 50))?;
    // Emit only once the stream is live, so no event waits in a replay.
    loop {
        let msg = rx.recv().await.context("observer ended")?;
        let connected = matches!(msg, ClientMsg::Connected);
        app.on_client(msg);
        if connected {
            break;
        }
    }
    let stamps = Arc::new(Stamps::new(events));
    let thread = emitter(handle.runtime(), stamps.clone(), rate, events);
    let mut lat = Vec::with_capacity(events);
    let mut frames = 0u64;
    let mut drawn_to = 0u64;
    let mut last_draw: Option<Instant> = None;
    let deadline = tokio::time::sleep(Duration::from_mins(2));
    tokio::pin!(deadline);
    loop {
        if app.is_dirty() && last_draw.is_none_or(|t| t.elapsed() >= FRAME) {
            terminal.draw(|f| draw(f, &mut app))?;
            app.mark_drawn();
            let now = Instant::now();
            last_draw = Some(now);
            frames += 1;
            let folded = app.model.counters.last_seq;
            lat.extend((drawn_to + 1..=folded).filter_map(|seq| stamps.since(seq, now)));
            drawn_to = folded;
            if drawn_to as usize >= events {
                break;
            }
        }
        let next_frame = last_draw.map_or_else(Instant::now, |t| t + FRAME);
        tokio::select! {
            msg = rx.recv() => {
                let msg = msg.context("observer ended")?;
                app.on_client(msg);
                for _ in 0..BATCH {
                    match rx.try_recv() {
                        Ok(msg) => app.on_client(msg),
                        Err(_) => break,
                    }
                }
            }
            () = tokio::time::sleep_until(next_frame.into()), if app.is_dirty() => {}
            () = &mut deadline => bail!("inspector saw {drawn_to} of {events} events in 120 s"),
        }
    }
    thread.join().ok().context("emitter panicked")?;
    observer.abort();
    handle.shutdown().await;
    Ok((lat, frames, app))
}

pub fn run(rate: u32, secs: f64) -> anyhow::Result<LatencyResult> {
    let events = (f64::from(rate) * secs) as usize;
    let rt = super::tokio_rt(2)?;
    let mut bare = rt.block_on(bare_transport(rate, events))?;
    let (mut lat, frames, app) = rt.block_on(inspector(rate, events))?;
    Ok(LatencyResult {
        rate,
        events,
        frames,
        p50_ms: quantile(&mut lat, 0.5),
        p99_ms: quantile(&mut lat, 0.99),
        max_ms: quantile(&mut lat, 1.0),
        baseline_p50_ms: quantile(&mut bare, 0.5),
        baseline_p99_ms: quantile(&mut bare, 0.99),
        folded: app.model.counters.applied,
    })
}
