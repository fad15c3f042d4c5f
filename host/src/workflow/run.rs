//! What the host tracks while one run of a workflow is going on.

use std::time::Duration;

use crate::bindings::workflow::StepOptions;

/// The state of one run, kept in the store while the guest runs.
#[derive(Default)]
pub(crate) struct RunState {
    /// The position the next workflow call takes.
    pub(crate) next_position: i64,
    /// The step whose body is running, with its transaction open.
    pub(crate) open: Option<OpenStep>,
    /// The earliest time the run waits for, and what for.
    pub(crate) wait: Option<(i64, String)>,
    /// Set when the history diverged: the run must stop.
    pub(crate) diverged: Option<String>,
    /// A committed step appended to the queue.
    pub(crate) committed_appends: bool,
}

/// A step whose body is running.
pub(crate) struct OpenStep {
    pub(crate) position: i64,
    pub(crate) name: String,
    pub(crate) attempt: u32,
    pub(crate) options: StepOptions,
    /// How long this attempt may run.
    pub(crate) timeout: Duration,
}
