//! What a host's syncs of write-ahead logs have cost so far
//! ([`Host::log_syncs`](super::Host::log_syncs), `burrow_log_sync_seconds`
//! in its metrics).

use std::time::Duration;

/// The syncs of a host's logs, and the time they waited for the disk.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogSyncs {
    /// Syncs made.
    pub syncs: u64,
    /// Their durations added up.
    pub waited: Duration,
}

impl LogSyncs {
    /// The mean time of the syncs made after `earlier` was read, if any
    /// were.
    pub fn mean_since(&self, earlier: LogSyncs) -> Option<Duration> {
        let syncs = self.syncs.checked_sub(earlier.syncs)?;
        let waited = self.waited.checked_sub(earlier.waited)?;
        let syncs = u32::try_from(syncs).ok().filter(|n| *n > 0)?;
        Some(waited / syncs)
    }

    /// Reads the totals from a host's metrics in the Prometheus text
    /// format (`GET /metrics`): the `_count` and `_sum` of
    /// `burrow_log_sync_seconds`.
    pub fn from_metrics(text: &str) -> Option<LogSyncs> {
        let value = |name: &str| {
            text.lines()
                .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
                .and_then(|v| v.trim().parse::<f64>().ok())
        };
        let syncs = value("burrow_log_sync_seconds_count")?;
        let waited = value("burrow_log_sync_seconds_sum")?;
        Some(LogSyncs {
            syncs: syncs as u64,
            waited: Duration::try_from_secs_f64(waited).ok()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mean_counts_only_the_syncs_after_the_earlier_reading() {
        let earlier = LogSyncs {
            syncs: 10,
            waited: Duration::from_millis(5),
        };
        let later = LogSyncs {
            syncs: 30,
            waited: Duration::from_millis(7),
        };
        assert_eq!(later.mean_since(earlier), Some(Duration::from_micros(100)));
        assert_eq!(earlier.mean_since(earlier), None, "no sync in between");
        assert_eq!(earlier.mean_since(later), None, "readings swapped");
    }

    #[test]
    fn the_totals_are_read_from_the_metrics_text() {
        let text = "# TYPE burrow_log_sync_seconds histogram\n\
                    burrow_log_sync_seconds_sum 0.25\n\
                    burrow_log_sync_seconds_count 2000\n\
                    burrow_log_sync_seconds_bucket{le=\"0.0001\"} 1500\n";
        assert_eq!(
            LogSyncs::from_metrics(text),
            Some(LogSyncs {
                syncs: 2000,
                waited: Duration::from_millis(250),
            })
        );
        assert_eq!(LogSyncs::from_metrics("burrow_commits_total 3\n"), None);
    }
}
