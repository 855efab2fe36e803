//! Letting go of values long out of the cache (the oldest events of both logs), a batch at
//! a time: each batch is read with plain loads first, whose misses overlap, then dropped.

/// How many let-go values `Retired` holds before releasing them together.
pub const BATCH: usize = 16;

/// What a value's drop will touch, read ahead of it: a byte of each block it owns (and,
/// for a shared one, its count). The sum only keeps the reads from being optimised away.
pub trait Warm {
    fn warm(&self) -> usize;
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
