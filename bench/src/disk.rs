//! The disk's limits, measured on the bench's data directory in the same
//! run as the workloads: how long one 4 KiB `pwrite` followed by
//! `fdatasync` takes (what one durable commit in `synchronous = full`
//! cannot go below), and how many such fsyncs per second 16 threads reach,
//! each on its own file (what instances committing in parallel could
//! reach), with the machine's CPU time per sync while they do (on a VM a
//! sync costs CPU, notifications and interrupts, that calls committing
//! in parallel cannot use). From them, the limits of the workloads in
//! `full` mode.
//!
//! The writes overwrite blocks of a file allocated and synced beforehand,
//! so `fdatasync` flushes data only, never the file's size: the best case
//! of a commit, as when SQLite reuses its write-ahead log.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::{Value, json};

use super::Latencies;
use super::cpu::{self, MachineCpu};

/// Rounds of the fsync latency.
pub const SYNC_ROUNDS: usize = 2_000;
/// Threads of the parallel fsync rate, each on its own file.
pub const PARALLEL_THREADS: usize = 16;
/// How long the parallel fsync rate is measured.
pub const PARALLEL_DURATION: Duration = Duration::from_secs(1);
/// Bytes of one write.
const BLOCK: usize = 4096;
/// Blocks of each file the writes cycle over (1 MiB).
const FILE_BLOCKS: u64 = 256;

/// The disk's figures.
#[derive(Debug, Clone)]
pub struct DiskLimits {
    /// One 4 KiB `pwrite` and `fdatasync`, in sequence.
    pub sync: Latencies,
    /// `fdatasync`s per second of [`PARALLEL_THREADS`] threads together.
    pub parallel_syncs_per_sec: f64,
    /// The machine's CPU time (all cores) per sync of those threads.
    pub cpu_per_parallel_sync: Option<Duration>,
}

impl DiskLimits {
    /// Mean time of one fsync.
    pub fn sync_mean(&self) -> Duration {
        self.sync.mean()
    }

    /// Commits per second of one caller in sequence when each commit is one
    /// fsync and nothing else: 1 / fsync latency.
    pub fn sequential_limit(&self) -> f64 {
        per_second(self.sync_mean())
    }

    /// The figures as JSON, with the sequential limit.
    pub fn to_json(&self) -> Value {
        json!({
            "fsync": self.sync.to_json(),
            "fsync_bound_sequential_ops_per_sec": self.sequential_limit().round(),
            "parallel_threads": PARALLEL_THREADS,
            "parallel_fsyncs_per_sec": self.parallel_syncs_per_sec.round(),
            "cpu_per_parallel_fsync_us": self.cpu_per_parallel_sync.map(super::micros),
        })
    }
}

/// Operations per second when each takes `each` (none if it takes no time).
pub fn per_second(each: Duration) -> f64 {
    if each.is_zero() {
        return 0.0;
    }
    1.0 / each.as_secs_f64()
}

/// Commits per second of one caller in sequence when each commit costs
/// `call` (its time without an fsync, as in `normal` mode) plus one fsync
/// of `fsync`: the limit of a sequential workload in `full` mode once the
/// call's own work is counted.
pub fn sequential_limit_with_call(fsync: Duration, call: Duration) -> f64 {
    per_second(fsync + call)
}

/// A file of [`FILE_BLOCKS`] blocks, written and synced, to overwrite.
fn allocated_file(path: &Path) -> Result<File> {
    let file = File::options()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    let zeros = vec![0u8; BLOCK];
    for block in 0..FILE_BLOCKS {
        file.write_all_at(&zeros, block * BLOCK as u64)?;
    }
    file.sync_all()?;
    Ok(file)
}

/// Overwrites block `round` (modulo the file's size) and waits for it to
/// be on the disk.
fn write_and_sync(file: &File, block: &[u8], round: u64) -> std::io::Result<()> {
    file.write_all_at(block, (round % FILE_BLOCKS) * BLOCK as u64)?;
    file.sync_data()
}

/// The latency of `rounds` writes of 4 KiB, each followed by `fdatasync`.
pub fn fsync_latency(dir: &Path, rounds: usize) -> Result<Latencies> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join("fsync-latency");
    let file = allocated_file(&path)?;
    let block = vec![0x5au8; BLOCK];
    let mut samples = Vec::with_capacity(rounds);
    let begun = Instant::now();
    for round in 0..rounds as u64 {
        let t = Instant::now();
        write_and_sync(&file, &block, round)?;
        samples.push(t.elapsed());
    }
    let total = begun.elapsed();
    drop(file);
    std::fs::remove_file(&path)?;
    Ok(Latencies::new(samples, total))
}

/// What `threads` threads, each writing and syncing its own file for a
/// while, reach.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ParallelSyncs {
    /// `fdatasync`s per second, all threads together.
    pub per_sec: f64,
    /// The machine's CPU time per sync (none without `/proc/stat`).
    pub cpu_per_sync: Option<Duration>,
}

/// `fdatasync`s per second of `threads` threads, each writing and syncing
/// its own file for `duration`, and the machine's CPU time per sync.
pub fn parallel_fsync_rate(
    dir: &Path,
    threads: usize,
    duration: Duration,
) -> Result<ParallelSyncs> {
    std::fs::create_dir_all(dir)?;
    let paths: Vec<_> = (0..threads)
        .map(|i| dir.join(format!("fsync-parallel-{i}")))
        .collect();
    let files = paths
        .iter()
        .map(|p| allocated_file(p))
        .collect::<Result<Vec<_>>>()?;
    let syncs = AtomicU64::new(0);
    let machine = MachineCpu::now();
    let begun = Instant::now();
    let deadline = begun + duration;
    std::thread::scope(|scope| {
        let workers: Vec<_> = files
            .iter()
            .map(|file| {
                let syncs = &syncs;
                scope.spawn(move || -> std::io::Result<()> {
                    let block = vec![0xa5u8; BLOCK];
                    let mut round = 0;
                    while Instant::now() < deadline {
                        write_and_sync(file, &block, round)?;
                        round += 1;
                        syncs.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(())
                })
            })
            .collect();
        for worker in workers {
            worker.join().expect("an fsync thread panicked")?;
        }
        Ok::<_, std::io::Error>(())
    })?;
    let elapsed = begun.elapsed();
    let busy = machine.and_then(MachineCpu::busy_since);
    drop(files);
    for path in &paths {
        std::fs::remove_file(path)?;
    }
    let syncs = syncs.load(Ordering::Relaxed);
    Ok(ParallelSyncs {
        per_sec: syncs as f64 / elapsed.as_secs_f64(),
        cpu_per_sync: busy.and_then(|busy| cpu::per_op(busy, syncs)),
    })
}

/// Measures the disk under `dir`, off the async executor.
pub async fn measure(dir: &Path) -> Result<DiskLimits> {
    let dir = dir.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let sync = fsync_latency(&dir, SYNC_ROUNDS)?;
        let parallel = parallel_fsync_rate(&dir, PARALLEL_THREADS, PARALLEL_DURATION)?;
        Ok(DiskLimits {
            sync,
            parallel_syncs_per_sec: parallel.per_sec,
            cpu_per_parallel_sync: parallel.cpu_per_sync,
        })
    })
    .await?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limits_are_the_inverse_of_the_times() {
        assert_eq!(per_second(Duration::from_micros(125)), 8_000.0);
        assert_eq!(per_second(Duration::ZERO), 0.0);
        let limit =
            sequential_limit_with_call(Duration::from_micros(120), Duration::from_micros(130));
        assert!((limit - 4_000.0).abs() < 1e-6, "{limit}");
        let disk = DiskLimits {
            sync: Latencies::new(
                vec![Duration::from_micros(100); 4],
                Duration::from_micros(400),
            ),
            parallel_syncs_per_sec: 30_000.0,
            cpu_per_parallel_sync: Some(Duration::from_micros(60)),
        };
        assert!((disk.sequential_limit() - 10_000.0).abs() < 1e-6);
        assert_eq!(
            disk.to_json()["fsync_bound_sequential_ops_per_sec"],
            10_000.0
        );
        assert_eq!(disk.to_json()["cpu_per_parallel_fsync_us"], 60.0);
    }

    #[test]
    fn the_disk_is_measured_and_its_files_removed() {
        let dir = tempfile::tempdir().unwrap();
        let sync = fsync_latency(dir.path(), 20).unwrap();
        assert_eq!(sync.samples.len(), 20);
        assert!(sync.mean() > Duration::ZERO);
        let parallel = parallel_fsync_rate(dir.path(), 2, Duration::from_millis(50)).unwrap();
        assert!(parallel.per_sec > 0.0, "{parallel:?}");
        if std::path::Path::new("/proc/stat").exists() {
            assert!(parallel.cpu_per_sync.is_some(), "{parallel:?}");
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
