//! The table `burrow bench` prints for the durability modes: one row per
//! workload, its figures with `synchronous = normal` and with `full` side
//! by side, and the limit the machine sets; under it, the disk figures
//! the limits come from. Markdown, so it can be pasted as it is.

use std::fmt::Write;
use std::time::Duration;

/// Throughput and latency of one workload in one mode.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Figures {
    /// Operations per second, all callers together.
    pub ops_per_sec: f64,
    /// Median latency of one operation.
    pub p50: Duration,
    /// 99th percentile latency of one operation.
    pub p99: Duration,
    /// Operations that failed (left out of the rest).
    pub failed: u64,
}

/// One workload's row.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// What the workload does.
    pub workload: String,
    /// Its figures with `synchronous = normal`.
    pub normal: Option<Figures>,
    /// Its figures with `synchronous = full`.
    pub full: Option<Figures>,
    /// What bounds the workload on this machine.
    pub limit: String,
}

/// Disk figures shown under the table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DiskLine {
    /// Median time of a 4 KiB `pwrite` and `fdatasync`.
    pub fsync_p50: Duration,
    /// Mean time of the same.
    pub fsync_mean: Duration,
    /// Rounds the two are taken over.
    pub rounds: usize,
    /// Threads of the parallel fsync rate.
    pub parallel_threads: usize,
    /// `fdatasync`s per second of those threads together.
    pub parallel_fsyncs_per_sec: f64,
    /// The machine's CPU time per sync of those threads.
    pub cpu_per_parallel_sync: Option<Duration>,
}

/// A whole number with thousands separators: `36,410`.
pub fn thousands(value: f64) -> String {
    let rounded = value.round();
    let digits = format!("{}", rounded.abs() as u64);
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if rounded < 0.0 {
        out.push('-');
    }
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A latency in the unit that keeps it short: `14.7 µs`, `308 µs`,
/// `6.5 ms`, `1.20 s`.
pub fn latency(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 100.0 {
        format!("{us:.1} µs")
    } else if us < 1_000.0 {
        format!("{us:.0} µs")
    } else if us < 100_000.0 {
        format!("{:.1} ms", us / 1e3)
    } else if us < 1_000_000.0 {
        format!("{:.0} ms", us / 1e3)
    } else {
        format!("{:.2} s", us / 1e6)
    }
}

fn cells(figures: Option<Figures>) -> [String; 3] {
    match figures {
        Some(f) if f.failed > 0 => [
            format!(
                "{} ({} failed)",
                thousands(f.ops_per_sec),
                thousands(f.failed as f64)
            ),
            latency(f.p50),
            latency(f.p99),
        ],
        Some(f) => [thousands(f.ops_per_sec), latency(f.p50), latency(f.p99)],
        None => ["".into(), "".into(), "".into()],
    }
}

/// The table, then the disk's figures, each under its label (which runs
/// they were measured before).
pub fn render(rows: &[Row], disks: &[(&str, DiskLine)]) -> String {
    let mut out = String::new();
    out.push_str(
        "| workload | normal ops/s | p50 | p99 | full ops/s | p50 | p99 | the limit on this machine (full) |\n",
    );
    out.push_str("| --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for row in rows {
        let [n_ops, n_p50, n_p99] = cells(row.normal);
        let [f_ops, f_p50, f_p99] = cells(row.full);
        let _ = writeln!(
            out,
            "| {} | {n_ops} | {n_p50} | {n_p99} | {f_ops} | {f_p50} | {f_p99} | {} |",
            row.workload, row.limit
        );
    }
    for (label, disk) in disks {
        let cpu = disk
            .cpu_per_parallel_sync
            .map(|cpu| format!(", each sync costing the machine {} of CPU", latency(cpu)))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "\nfsync, measured before the {label} full runs: a 4 KiB pwrite + fdatasync takes {} (p50), {} (mean of {}), so at most {} commits/s in sequence; {} threads fsyncing their own files reach {} fsyncs/s{cpu}.",
            latency(disk.fsync_p50),
            latency(disk.fsync_mean),
            thousands(disk.rounds as f64),
            thousands(super::disk::per_second(disk.fsync_mean)),
            disk.parallel_threads,
            thousands(disk.parallel_fsyncs_per_sec),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_grouped_by_thousands() {
        assert_eq!(thousands(0.0), "0");
        assert_eq!(thousands(999.4), "999");
        assert_eq!(thousands(1_000.0), "1,000");
        assert_eq!(thousands(36_410.2), "36,410");
        assert_eq!(thousands(1_234_567.0), "1,234,567");
        assert_eq!(thousands(-4_049.0), "-4,049");
    }

    #[test]
    fn latencies_keep_three_digits() {
        assert_eq!(latency(Duration::from_nanos(14_700)), "14.7 µs");
        assert_eq!(latency(Duration::from_micros(308)), "308 µs");
        assert_eq!(latency(Duration::from_micros(6_500)), "6.5 ms");
        assert_eq!(latency(Duration::from_millis(146)), "146 ms");
        assert_eq!(latency(Duration::from_millis(1_200)), "1.20 s");
    }

    #[test]
    fn the_table_puts_the_modes_side_by_side() {
        let figures = |ops: f64, p50: u64, p99: u64| Figures {
            ops_per_sec: ops,
            p50: Duration::from_micros(p50),
            p99: Duration::from_micros(p99),
            failed: 0,
        };
        let rows = [
            Row {
                workload: "W1".into(),
                normal: Some(figures(6_764.0, 139, 250)),
                full: Some(Figures {
                    failed: 2,
                    ..figures(3_119.0, 308, 900)
                }),
                limit: "3,700".into(),
            },
            Row {
                workload: "GET /healthz".into(),
                normal: Some(figures(93_138.0, 600, 2_000)),
                full: None,
                limit: "(the HTTP layer)".into(),
            },
        ];
        let disk = DiskLine {
            fsync_p50: Duration::from_micros(118),
            fsync_mean: Duration::from_micros(125),
            rounds: 2_000,
            parallel_threads: 16,
            parallel_fsyncs_per_sec: 36_410.0,
            cpu_per_parallel_sync: None,
        };
        let with_cpu = DiskLine {
            cpu_per_parallel_sync: Some(Duration::from_micros(62)),
            ..disk
        };
        let table = render(&rows, &[("in-process", disk), ("HTTP", with_cpu)]);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(
            lines[2],
            "| W1 | 6,764 | 139 µs | 250 µs | 3,119 (2 failed) | 308 µs | 900 µs | 3,700 |"
        );
        assert_eq!(
            lines[3],
            "| GET /healthz | 93,138 | 600 µs | 2.0 ms |  |  |  | (the HTTP layer) |"
        );
        assert!(lines[1].starts_with("| --- |"));
        assert_eq!(lines[0].matches('|').count(), lines[2].matches('|').count());
        assert_eq!(
            lines[5],
            "fsync, measured before the in-process full runs: a 4 KiB pwrite + fdatasync takes 118 µs (p50), 125 µs (mean of 2,000), so at most 8,000 commits/s in sequence; 16 threads fsyncing their own files reach 36,410 fsyncs/s."
        );
        assert!(
            lines[7]
                .ends_with("reach 36,410 fsyncs/s, each sync costing the machine 62.0 µs of CPU."),
            "{}",
            lines[7]
        );
    }
}
