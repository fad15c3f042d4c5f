//! Keeping SQLite work from starving the tokio workers.
//!
//! A guest statement runs synchronously inside a host function, on the
//! thread that polls the call. Whenever SQLite's progress handler fires
//! (every few thousand virtual-machine steps, host statements included), a
//! worker of a multi-thread runtime hands its other tasks to another thread
//! (`block_in_place`); the statement runs on this one, which leaves the
//! worker pool when the call next yields. A long statement thus holds a
//! worker that other tasks wait for only until its first progress tick: a
//! few thousand VM steps, and at most one call of a built-in function,
//! which is linear in values of at most `SQLITE_LIMIT_LENGTH` bytes or
//! watches the deadline (`storage/src/functions/`). Short statements, the
//! common case, pay for no hand-off.
//!
//! A commit that syncs is different: its fsync waits for the disk, however
//! short the transaction. [`off_worker`] runs it on a thread that has left
//! the worker pool, so that other instances' calls go on meanwhile and the
//! commits of several instances wait for the disk together. The hand-off
//! costs a thread wake-up (tens of microseconds on a small VM), so the
//! commit stage asks for it only when other instances are running too.
//!
//! A batch of calls that leaves its sync for later hands it to
//! [`on_sync_thread`]: one of a few threads kept for syncs, which take the
//! next one as soon as they are done with one.

use std::panic::AssertUnwindSafe;
use std::sync::OnceLock;

use tokio::runtime::{Handle, RuntimeFlavor};

/// Called from long-running SQLite work: on a worker of a multi-thread
/// runtime, moves the worker's other tasks to another thread. A no-op
/// elsewhere (a blocking thread, a current-thread runtime, no runtime), and
/// nearly free once the thread has handed its tasks off.
pub fn hand_off_worker() {
    if let Ok(handle) = Handle::try_current()
        && handle.runtime_flavor() == RuntimeFlavor::MultiThread
    {
        tokio::task::block_in_place(|| {});
    }
}

/// Whether this thread is in a multi-thread runtime, where a worker may
/// wait for work of a blocking thread with [`off_worker`].
pub fn on_multi_thread_runtime() -> bool {
    Handle::try_current().is_ok_and(|handle| handle.runtime_flavor() == RuntimeFlavor::MultiThread)
}

/// Runs `work`, which waits for the disk, with the worker's other tasks
/// moved to another thread first (on a worker of a multi-thread runtime;
/// elsewhere it just runs).
pub fn off_worker<T>(work: impl FnOnce() -> T) -> T {
    match Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(work)
        }
        _ => work(),
    }
}

/// The threads kept for syncs ([`on_sync_thread`]): four for each core
/// (eight on two), from 4 to 64. More syncs in flight use the disk's
/// parallelism, but each one's thread wake-up costs a core tens of
/// microseconds: on two cores shared with a load generator, W2 over HTTP
/// in `full` ran fastest with 4 to 8 of them (CHANGELOG.md, "Threads kept
/// for syncs"); in-process, where the cores are not all taken, eight
/// and a thread for each sync measured alike within the noise.
fn sync_threads() -> usize {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    (4 * cores).clamp(4, 64)
}

type SyncJob = Box<dyn FnOnce() + Send>;

/// Runs `sync`, which waits for the disk, on one of the threads kept for
/// the syncs of commits ([`sync_threads`]), in the order they came. A
/// blocking thread for each sync put all of W2's 64 in flight at once,
/// each on a thread woken for it alone; with a few threads the syncs still
/// overlap, a thread goes from one sync to the next without sleeping, and
/// the disk's queue stays short. Without those threads (none could
/// start), `sync` runs on a blocking thread of the runtime, or here
/// outside one.
pub fn on_sync_thread(sync: impl FnOnce() + Send + 'static) {
    static THREADS: OnceLock<Option<crossbeam_channel::Sender<SyncJob>>> = OnceLock::new();
    let threads = THREADS.get_or_init(|| {
        let (send, receive) = crossbeam_channel::unbounded::<SyncJob>();
        let mut started = 0;
        for n in 0..sync_threads() {
            let receive = receive.clone();
            let thread = std::thread::Builder::new()
                .name(format!("burrow-sync-{n}"))
                .spawn(move || {
                    for sync in receive {
                        // A panic ends that sync (its waiters hear that it
                        // ended without an outcome), not the thread.
                        let _ = std::panic::catch_unwind(AssertUnwindSafe(sync));
                    }
                });
            match thread {
                Ok(_) => started += 1,
                Err(e) => tracing::warn!(error = %e, "a thread for syncs could not start"),
            }
        }
        (started > 0).then_some(send)
    });
    let unsent = match threads {
        Some(send) => send
            .send(Box::new(sync))
            .err()
            .map(|crossbeam_channel::SendError(sync)| sync),
        None => Some(Box::new(sync) as SyncJob),
    };
    if let Some(sync) = unsent {
        match Handle::try_current() {
            Ok(handle) => drop(handle.spawn_blocking(sync)),
            Err(_) => sync(),
        }
    }
}

/// Runs `work`, which waits for the disk, on one of the threads kept for
/// syncs ([`on_sync_thread`]), and waits for it to end without holding the
/// async worker. Unlike [`off_worker`], no worker thread is handed over:
/// the threads that took the workers' place each allocated from a malloc
/// arena of their own, and a host creating instances at its awake limit
/// (1,000) held 710 MiB instead of 395. If `work` panics, the panic ends
/// `work` alone.
pub async fn wait_on_sync_thread(work: impl FnOnce() + Send + 'static) {
    let (done, ended) = tokio::sync::oneshot::channel::<()>();
    on_sync_thread(move || {
        work();
        let _ = done.send(());
    });
    // Sent, or dropped if `work` panicked: ended either way.
    let _ = ended.await;
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Barrier, mpsc};
    use std::time::Duration;

    use super::*;

    #[test]
    fn syncs_run_side_by_side_on_the_threads_kept_for_them() {
        // Each waits for all the others: they end only if all run at once.
        let threads = sync_threads();
        let together = Arc::new(Barrier::new(threads));
        let (done, ended) = mpsc::channel();
        for _ in 0..threads {
            let (together, done) = (together.clone(), done.clone());
            on_sync_thread(move || {
                together.wait();
                let name = std::thread::current().name().map(str::to_owned);
                done.send(name).unwrap();
            });
        }
        for _ in 0..threads {
            let name = ended.recv_timeout(Duration::from_secs(60)).unwrap();
            assert!(name.unwrap().starts_with("burrow-sync-"));
        }
    }

    #[test]
    fn a_sync_that_panics_leaves_the_threads_at_work() {
        for _ in 0..2 * sync_threads() {
            on_sync_thread(|| panic!("a sync failed"));
        }
        let (done, ended) = mpsc::channel();
        on_sync_thread(move || {
            let name = std::thread::current().name().map(str::to_owned);
            done.send(name).unwrap();
        });
        let name = ended.recv_timeout(Duration::from_secs(60)).unwrap();
        assert!(name.unwrap().starts_with("burrow-sync-"));
    }

    /// The waiter goes on once the work has ended there, a panic included.
    #[tokio::test(flavor = "current_thread")]
    async fn a_task_waits_for_its_work_on_a_sync_thread() {
        let ran = Arc::new(std::sync::Mutex::new(None));
        let seen = ran.clone();
        wait_on_sync_thread(move || {
            std::thread::sleep(Duration::from_millis(20));
            *seen.lock().unwrap() = std::thread::current().name().map(str::to_owned);
        })
        .await;
        let name = ran
            .lock()
            .unwrap()
            .take()
            .expect("the work ended before the wait");
        assert!(name.starts_with("burrow-sync-"), "{name}");
        wait_on_sync_thread(|| panic!("closing failed")).await;
    }
}
