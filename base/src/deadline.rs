//! The wall-clock deadline of the call an instance is running.
//!
//! Both the engine's epoch callback (guest code) and SQLite's progress
//! handler (host code running guest SQL) read it, so a call cannot outrun
//! its deadline in either place.

use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const NONE: u64 = u64::MAX;

fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

fn now_micros() -> u64 {
    origin().elapsed().as_micros() as u64
}

/// A deadline shared between an instance's store and its database.
#[derive(Clone, Debug)]
pub struct Deadline(Arc<AtomicU64>);

impl Default for Deadline {
    fn default() -> Self {
        Deadline(Arc::new(AtomicU64::new(NONE)))
    }
}

impl Deadline {
    /// Starts a call that must end within `timeout`.
    pub fn start(&self, timeout: Duration) {
        let at = now_micros().saturating_add(timeout.as_micros() as u64);
        self.0.store(at, Ordering::Relaxed);
    }

    /// Ends the call: no deadline until the next one starts.
    pub fn clear(&self) {
        self.0.store(NONE, Ordering::Relaxed);
    }

    /// Returns once the deadline has been passed for `grace` (a deadline
    /// moved meanwhile, as a workflow step moves it, is followed).
    pub async fn overdue(&self, grace: Duration) {
        loop {
            let at = self.0.load(Ordering::Relaxed);
            let wait = if at == NONE {
                Duration::from_millis(50)
            } else {
                let due = at.saturating_add(grace.as_micros() as u64);
                let now = now_micros();
                if now >= due {
                    return;
                }
                Duration::from_micros(due - now)
            };
            tokio::time::sleep(wait).await;
        }
    }

    /// The time left before the deadline, or `None` when no call runs.
    pub fn remaining(&self) -> Option<Duration> {
        let at = self.0.load(Ordering::Relaxed);
        (at != NONE).then(|| Duration::from_micros(at.saturating_sub(now_micros())))
    }

    /// Whether the current call has run past its deadline.
    pub fn passed(&self) -> bool {
        let at = self.0.load(Ordering::Relaxed);
        at != NONE && now_micros() >= at
    }
}

/// The trap raised when a call runs past its deadline.
#[derive(Debug, thiserror::Error)]
#[error("the call ran past its deadline")]
pub struct DeadlineExceeded;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_passes_only_while_set() {
        let d = Deadline::default();
        assert!(!d.passed());
        d.start(Duration::ZERO);
        assert!(d.passed());
        d.clear();
        assert!(!d.passed());
        d.start(Duration::from_secs(60));
        assert!(!d.passed());
    }
}
