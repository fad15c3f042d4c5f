//! How full a batch of work in one transaction is. A batch of calls, a run
//! of queue events (`cell/savepoints.rs`) and a workflow run's batch of
//! steps (`capability/workflow/step.rs`) end by the same bounds.

use std::time::Instant;

use super::commit::Effects;
use crate::config::{MAX_BATCH_BYTES, MAX_BATCH_CALLS, MAX_BATCH_TIME};

/// What a batch holds so far.
#[derive(Debug)]
pub(crate) struct BatchSize {
    begun: Instant,
    items: usize,
    bytes: usize,
}

impl BatchSize {
    /// An empty batch, begun now.
    pub(crate) fn new() -> BatchSize {
        BatchSize {
            begun: Instant::now(),
            items: 0,
            bytes: 0,
        }
    }

    /// Counts one more item, of `bytes` (arguments, a payload).
    pub(crate) fn add(&mut self, bytes: usize) {
        self.items += 1;
        self.bytes += bytes;
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.items == 0
    }

    /// Whether the batch began [`MAX_BATCH_TIME`] ago or longer.
    pub(crate) fn is_old(&self) -> bool {
        self.begun.elapsed() >= MAX_BATCH_TIME
    }

    /// Whether the batch takes no more items: it holds
    /// [`MAX_BATCH_CALLS`] of them or [`MAX_BATCH_BYTES`], it is old, or
    /// its `effects` reached another instance or the world (a rollback here
    /// would not undo that, so no later item may cost it its commit).
    pub(crate) fn is_full(&self, effects: &Effects) -> bool {
        self.items >= MAX_BATCH_CALLS
            || self.bytes >= MAX_BATCH_BYTES
            || self.is_old()
            || effects.reached_outside
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_is_full_at_any_bound_or_once_it_reached_outside() {
        let effects = Effects::default();
        let mut size = BatchSize::new();
        assert!(size.is_empty() && !size.is_full(&effects));
        size.add(10);
        assert!(!size.is_empty() && !size.is_full(&effects));
        let reached = Effects {
            reached_outside: true,
            ..Effects::default()
        };
        assert!(size.is_full(&reached));
        for _ in 1..MAX_BATCH_CALLS {
            size.add(0);
        }
        assert!(size.is_full(&effects));
        let mut big = BatchSize::new();
        big.add(MAX_BATCH_BYTES);
        assert!(big.is_full(&effects));
        let old = BatchSize {
            begun: Instant::now() - MAX_BATCH_TIME,
            ..BatchSize::new()
        };
        assert!(old.is_old() && old.is_full(&effects));
    }
}
