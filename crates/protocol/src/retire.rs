//! Letting go of values long out of the cache (the oldest events of both logs), a batch at
//! a time: each batch is read with plain loads first, whose misses overlap, then dropped.

use crate::events::Event;
use crate::{Frame, RawJson};

/// How many let-go values `Retired` holds before releasing them together.
pub const BATCH: usize = 16;

/// What a value's drop will touch, read ahead of it: a byte of each block it owns (and,
/// for a shared one, its count). The sum only keeps the reads from being optimised away.
pub trait Warm {
    fn warm(&self) -> usize;
}

impl<T: Warm> Warm for Box<T> {
    fn warm(&self) -> usize {
        (**self).warm()
    }
}

impl<T: Warm> Warm for std::sync::Arc<T> {
    /// Its count, and when this is its last holder the fields its drop reads.
    fn warm(&self) -> usize {
        let holders = std::sync::Arc::strong_count(self);
        let fields = if holders == 1 { (**self).warm() } else { 0 };
        holders.wrapping_add(fields)
    }
}

impl Warm for Frame {
    /// A byte of each block the frame owns (the common kinds).
    fn warm(&self) -> usize {
        warm_frame(self)
    }
}

/// Values let go of, released `BATCH` at a time. Each is far out of the cache by then, and
/// dropping one is a locked decrement (a shared value) or a free onto the allocating
/// thread's list (a value another thread made): one at a time that is a full cache miss
/// each, as locked instructions do not overlap.
#[derive(Debug)]
pub struct Retired<T>(Vec<T>);

impl<T> Default for Retired<T> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<T> Clone for Retired<T> {
    /// A copy of its holder has nothing waiting to be let go of.
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl<T: Warm> Retired<T> {
    /// Holds `old`; a full batch comes back, to `release` (outside any lock).
    #[must_use]
    pub fn push(&mut self, old: T) -> Option<Vec<T>> {
        if self.0.capacity() == 0 {
            self.0.reserve_exact(BATCH);
        }
        self.0.push(old);
        (self.0.len() >= BATCH).then(|| std::mem::replace(&mut self.0, Vec::with_capacity(BATCH)))
    }

    /// `push`, the batch released here.
    pub fn push_release(&mut self, old: T) {
        if let Some(batch) = self.push(old) {
            release(batch);
        }
    }
}

/// Lets go of a batch: reads each value first (`Warm`), then drops them.
pub fn release<T: Warm>(batch: Vec<T>) {
    let read = batch
        .iter()
        .fold(0usize, |sum, value| sum.wrapping_add(value.warm()));
    std::hint::black_box(read);
    drop(batch);
}
fn first(s: &str) -> usize {
    s.as_bytes().first().map_or(0, |&b| usize::from(b))
}

fn first_raw(raw: &RawJson) -> usize {
    first(raw.get())
}

/// Reads a byte of each block the frame owns (the common kinds), so the lines are in the
/// cache before the frees write them.
fn warm_frame(frame: &Frame) -> usize {
    let mut sum = first(&frame.ts) + frame.session_id.as_deref().map_or(0, first);
    match &frame.event {
        Event::ToolCalled(c) => {
            sum += first(&c.call_id) + first(&c.tool) + first_raw(&c.input) + first(&c.started_at);
            if let crate::events::Outcome::Result(raw) = &c.outcome {
                sum += first_raw(raw);
            }
        }
        Event::AgentStepCompleted(s) => {
            sum += first(&s.agent_name)
                + first(&s.model)
                + first(&s.provider)
                + first(&s.step.model)
                + first(&s.step.finish_reason);
            for tc in &s.step.tool_calls {
                sum +=
                    first(&tc.id) + first(&tc.name) + first_raw(&tc.args) + first_raw(&tc.result);
            }
        }
        Event::SessionCreated(c) => sum += first(&c.user_id) + first(&c.project),
        _ => {}
    }
    sum
}
