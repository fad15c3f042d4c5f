//! Keeping long SQLite work from starving the tokio workers.
//!
//! A guest statement runs synchronously inside a host function, on the
//! worker thread that polls the call. Once a statement has run for a while
//! (SQLite's progress handler fires every few thousand virtual-machine
//! steps), the worker hands its other tasks to a fresh thread
//! (`block_in_place`) and the statement finishes on this one, which leaves
//! the worker pool when the call next yields. Short statements pay nothing.

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
