//! The machine's CPU time, from `/proc/stat`: what a workload costs all
//! the cores together (its own threads, the kernel's work for it, and a
//! client such as `wrk` on the same machine), so that a limit can count
//! the CPU a sync takes from the calls around it. `None` where the file
//! is not there (not Linux).

use std::time::Duration;

/// The machine's busy time since it started, read at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MachineCpu {
    busy: Duration,
}

impl MachineCpu {
    /// The busy time now.
    pub fn now() -> Option<MachineCpu> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let busy = busy_time(stat.lines().next()?, TICKS_PER_SECOND)?;
        Some(MachineCpu { busy })
    }

    /// The busy time of all cores from `self` until now.
    pub fn busy_since(self) -> Option<Duration> {
        Some(MachineCpu::now()?.busy.saturating_sub(self.busy))
    }
}

/// CPU time per operation: `busy` over `ops` (none without operations).
pub fn per_op(busy: Duration, ops: u64) -> Option<Duration> {
    (ops > 0).then(|| busy / u32::try_from(ops).unwrap_or(u32::MAX))
}

/// The cores the machine's busy time is spread over.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The clock ticks per second `/proc/stat` counts in: Linux's `USER_HZ`,
/// which is 100 on every architecture Burrow builds for (the kernel's
/// own tick rate does not change it).
const TICKS_PER_SECOND: u64 = 100;

/// The busy time in the first line of `/proc/stat` (`cpu  user nice
/// system idle iowait irq softirq steal ...`): user, nice, system, irq and
/// softirq; idle, waiting for I/O and time the hypervisor took are not.
fn busy_time(line: &str, ticks_per_second: u64) -> Option<Duration> {
    let mut fields = line.split_whitespace();
    if fields.next()? != "cpu" {
        return None;
    }
    let ticks: Vec<u64> = fields.map(|f| f.parse().ok()).collect::<Option<_>>()?;
    let [user, nice, system, _idle, _iowait, irq, softirq, ..] = ticks[..] else {
        return None;
    };
    let busy = user + nice + system + irq + softirq;
    Some(Duration::from_secs_f64(
        busy as f64 / ticks_per_second as f64,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_time_counts_the_work_and_not_the_waits() {
        let line = "cpu  1000 50 300 90000 700 20 30 400 0 0";
        assert_eq!(busy_time(line, 100), Some(Duration::from_secs(14)));
        assert_eq!(busy_time("cpu0 1 2 3 4 5 6 7 8", 100), None);
        assert_eq!(busy_time("cpu  1 2 3", 100), None);
        assert_eq!(busy_time("cpu  1 2 x 4 5 6 7 8", 100), None);
    }

    #[test]
    fn cpu_per_op_divides_and_is_none_without_ops() {
        assert_eq!(
            per_op(Duration::from_millis(10), 1_000),
            Some(Duration::from_micros(10))
        );
        assert_eq!(per_op(Duration::from_millis(10), 0), None);
    }

    #[test]
    fn the_machine_is_busy_for_no_less_than_nothing() {
        if let Some(start) = MachineCpu::now() {
            assert!(start.busy > Duration::ZERO);
            assert!(start.busy_since().is_some());
        }
    }
}
