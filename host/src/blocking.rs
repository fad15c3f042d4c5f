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
//! watches the deadline (`storage/functions/`). Short statements, the
//! common case, pay for no hand-off.
//!
//! A commit that syncs is different: its fsync waits for the disk, however
//! short the transaction. [`off_worker`] runs it on a thread that has left
//! the worker pool, so that other instances' calls go on meanwhile and the
//! commits of several instances wait for the disk together. The hand-off
//! costs a thread wake-up (tens of microseconds on a small VM), so the
//! commit stage asks for it only when other instances are running too.

use tokio::runtime::{Handle, RuntimeFlavor};

/// Called from long-running SQLite work: on a worker of a multi-thread
/// runtime, moves the worker's other tasks to another thread. A no-op
/// elsewhere (a blocking thread, a current-thread runtime, no runtime), and
/// nearly free once the thread has handed its tasks off.
pub(crate) fn hand_off_worker() {
    if let Ok(handle) = Handle::try_current()
        && handle.runtime_flavor() == RuntimeFlavor::MultiThread
    {
        tokio::task::block_in_place(|| {});
    }
}

/// Whether this thread is in a multi-thread runtime, where a worker may
/// wait for work of a blocking thread with [`off_worker`].
pub(crate) fn on_multi_thread_runtime() -> bool {
    Handle::try_current().is_ok_and(|handle| handle.runtime_flavor() == RuntimeFlavor::MultiThread)
}

/// Runs `work`, which waits for the disk, with the worker's other tasks
/// moved to another thread first (on a worker of a multi-thread runtime;
/// elsewhere it just runs).
pub(crate) fn off_worker<T>(work: impl FnOnce() -> T) -> T {
    match Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(work)
        }
        _ => work(),
    }
}
