//! The runtime's clock: the time approval expiry and the age of closed sessions are read
//! from. Real by default; a manual one (`Clock::manual`) is real time plus what a test advanced.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use thiserror::Error;

/// What cannot be done to a clock.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ClockError {
    #[error(
        "the real clock cannot be advanced; give the runtime `Clock::manual()` in its config to advance it"
    )]
    Real,
}

/// Where a runtime reads the time (`RuntimeConfig::clock`). Clones share one clock, so a
/// test keeps a clone of the one it handed the runtime and advances that.
#[derive(Clone, Default)]
pub struct Clock {
    /// Milliseconds a manual clock is ahead of real time; `None` for the real clock.
    ahead: Option<Arc<AtomicU64>>,
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.ahead {
            None => f.write_str("Clock::real"),
            Some(ahead) => write!(f, "Clock::manual(+{}ms)", ahead.load(Ordering::Relaxed)),
        }
    }
}

impl Clock {
    /// The system's time (the default).
    pub fn real() -> Clock {
        Clock::default()
    }

    /// A clock that runs with real time and jumps ahead when `advance`d.
    pub fn manual() -> Clock {
        Clock {
            ahead: Some(Arc::new(AtomicU64::new(0))),
        }
    }

    /// How far ahead of real time this clock is (zero for the real clock).
    fn ahead(&self) -> Duration {
        self.ahead.as_ref().map_or(Duration::ZERO, |ahead| {
            Duration::from_millis(ahead.load(Ordering::Relaxed))
        })
    }

    /// Wall-clock time: what expiry stamps and compares.
    pub fn now(&self) -> chrono::DateTime<chrono::Utc> {
        let now = chrono::Utc::now();
        chrono::Duration::from_std(self.ahead())
            .ok()
            .and_then(|ahead| now.checked_add_signed(ahead))
            .unwrap_or(now)
    }

    /// Monotonic time: what intervals between sweeps are measured with.
    pub fn instant(&self) -> Instant {
        let now = Instant::now();
        now.checked_add(self.ahead()).unwrap_or(now)
    }

    /// Moves a manual clock `by` ahead, for every clone of it; the real clock refuses.
    pub fn advance(&self, by: Duration) -> Result<(), ClockError> {
        let ahead = self.ahead.as_ref().ok_or(ClockError::Real)?;
        let millis = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
        ahead
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |was| {
                Some(was.saturating_add(millis))
            })
            .map(|_| ())
            .map_err(|_| ClockError::Real)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_jumps_for_every_clone_and_the_real_one_refuses() {
        let clock = Clock::manual();
        let held = clock.clone();
        let before = clock.now();
        held.advance(Duration::from_hours(1)).unwrap();
        assert!(clock.now() - before >= chrono::Duration::seconds(3600));
        assert!(clock.instant() >= Instant::now() + Duration::from_secs(3599));
        let err = Clock::real().advance(Duration::from_secs(1)).unwrap_err();
        assert!(err.to_string().contains("Clock::manual()"), "{err}");
        assert!(Clock::real().now() - chrono::Utc::now() < chrono::Duration::seconds(1));
    }
}
