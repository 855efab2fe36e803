//! Time for the UI, injectable: the system clock in the app, a fixed clock in tests so
//! snapshots do not depend on when or in which timezone they run.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub trait Clock: Send + Sync {
    /// Monotonic now, for countdowns and rates.
    fn now(&self) -> Instant;
    /// Wall-clock now as epoch milliseconds, for ages of stream timestamps.
    fn wall_ms(&self) -> f64;
}

#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn wall_ms(&self) -> f64 {
        chrono::Utc::now().timestamp_micros() as f64 / 1000.0
    }
}

/// A clock that moves only when told to.
#[derive(Debug)]
pub struct FakeClock {
    base: Instant,
    wall0_ms: f64,
    elapsed_ms: AtomicU64,
}

impl FakeClock {
    /// Starts at the wall instant given by an RFC 3339 stamp (UTC midnight 2026-11-22 if
    /// it does not parse).
    pub fn at(rfc3339: &str) -> Self {
        Self {
            base: Instant::now(),
            wall0_ms: crate::model::parse_ms(rfc3339).unwrap_or(1_795_305_600_000.0),
            elapsed_ms: AtomicU64::new(0),
        }
    }

    pub fn advance(&self, by: Duration) {
        self.elapsed_ms
            .fetch_add(by.as_millis() as u64, Ordering::Relaxed);
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Instant {
        self.base + Duration::from_millis(self.elapsed_ms.load(Ordering::Relaxed))
    }

    fn wall_ms(&self) -> f64 {
        self.wall0_ms + self.elapsed_ms.load(Ordering::Relaxed) as f64
    }
}
