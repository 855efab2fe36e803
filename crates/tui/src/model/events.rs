//! The raw stream as the Events tab shows it: a bounded ring of the frames folded, oldest
//! dropped first and counted. Frames are kept as decoded (no re-encoding, no JSON tree on
//! the fold path); views encode only the rows they draw.

use spyglass_protocol::Frame;
use std::collections::VecDeque;

/// Recent frames by absolute position: positions are never reused, so a view can hold on
/// to one while older frames fall off the front.
#[derive(Debug, Clone, Default)]
pub struct EventLog {
    /// Each frame with its `approx_bytes`, counted once when it arrived.
    frames: VecDeque<(Box<Frame>, usize)>,
    /// Absolute position of `frames[0]`.
    base: u64,
    /// Sum of the retained frames' `Event::approx_bytes`.
    bytes: usize,
    /// Frames that fell off the front, not freed yet.
    retired: Retired,
}

/// Frames off the ring, let go of a batch at a time (`spyglass_protocol::retire`). A frame leaves the
/// ring 20,000 frames after it came, long out of the cache, and was allocated by the
/// observer's thread: freeing each of its blocks is an atomic push onto that thread's free
/// list, a full miss each unless read first.
// Boxed as they came: unboxing would free each box unwarmed.
type Retired = spyglass_protocol::retire::Retired<Box<Frame>>;

impl EventLog {
    pub fn len(&self) -> usize {
        self.frames.len()
    }

    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// `[first_abs, end_abs)` spans the retained frames.
    pub fn first_abs(&self) -> u64 {
        self.base
    }

    pub fn end_abs(&self) -> u64 {
        self.base + self.frames.len() as u64
    }

    /// The frame at absolute position `abs`, if still retained.
    pub fn get(&self, abs: u64) -> Option<&Frame> {
        let i = abs.checked_sub(self.base)?;
        self.frames.get(usize::try_from(i).ok()?).map(|(f, _)| &**f)
    }

    /// What the retained frames hold, roughly (`Event::approx_bytes`).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Appends a frame of `bytes` (its `Event::approx_bytes`, which the caller has counted
    /// already); returns how many old frames were dropped to stay within `max`.
    pub(crate) fn push(&mut self, frame: Box<Frame>, bytes: usize, max: usize) -> u64 {
        self.bytes += bytes;
        self.frames.push_back((frame, bytes));
        let mut dropped = 0;
        while self.frames.len() > max.max(1) {
            self.pop_oldest();
            dropped += 1;
        }
        dropped
    }

    /// Drops the oldest frame; false when none is left.
    pub(crate) fn pop_oldest(&mut self) -> bool {
        match self.frames.pop_front() {
            Some((frame, bytes)) => {
                self.bytes = self.bytes.saturating_sub(bytes);
                self.base += 1;
                self.retired.push_release(frame);
                true
            }
            None => false,
        }
    }
}
