//! Conflict retries: a call that met concurrent queue processing of the
//! same instance was rolled back whole, and runs again after a pause,
//! until the actor's call timeout has passed.

use std::time::Duration;

use crate::config::{FIRST_CONFLICT_PAUSE, MAX_CONFLICT_PAUSE};
use crate::error::Error;

/// Runs a call again after a conflict, with growing pauses, until its
/// timeout has passed.
pub(crate) struct ConflictRetry {
    begun: std::time::Instant,
    timeout: Duration,
    pause: Duration,
}

impl ConflictRetry {
    fn new(timeout: Duration) -> ConflictRetry {
        ConflictRetry {
            begun: std::time::Instant::now(),
            timeout,
            pause: FIRST_CONFLICT_PAUSE,
        }
    }

    /// Runs `attempt` until it does not meet a conflict, or the time is up.
    ///
    /// A call that meets concurrent queue processing of the same instance
    /// ([`Error::Conflict`]) was rolled back whole; it is run again, until
    /// the actor's call timeout has passed.
    pub(crate) async fn run<T, F: Future<Output = Result<T, Error>>>(
        timeout: Duration,
        mut attempt: impl FnMut() -> F,
    ) -> Result<T, Error> {
        let mut retry = ConflictRetry::new(timeout);
        loop {
            match attempt().await {
                Err(e @ Error::Conflict { .. }) => retry.pause(e).await?,
                other => return other,
            }
        }
    }

    /// Pauses before the next run, or gives `error` back when the time is up.
    async fn pause(&mut self, error: Error) -> Result<(), Error> {
        if self.begun.elapsed() >= self.timeout {
            return Err(error);
        }
        tokio::time::sleep(self.pause).await;
        self.pause = (self.pause * 2).min(MAX_CONFLICT_PAUSE);
        Ok(())
    }
}
