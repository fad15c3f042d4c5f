//! What the host tracks while one run of a workflow is going on.

use std::time::Duration;

use super::batch::BatchSize;
use super::commit::Effects;
use crate::bindings::workflow::StepOptions;

/// The state of one run, kept in the store while the guest runs.
pub(crate) struct RunState {
    /// The scopes the run is in, the run itself first.
    pub(crate) scopes: Vec<Scope>,
    /// The step whose body is running, with its transaction open.
    pub(crate) open: Option<OpenStep>,
    /// The earliest time the run waits for, and what for.
    pub(crate) wait: Option<(i64, String)>,
    /// A queue wait with no event yet: the run also waits for an append.
    pub(crate) waits_for_queue: Option<String>,
    /// Set when the history diverged: the run must stop.
    pub(crate) diverged: Option<String>,
    /// A committed step appended to the queue.
    pub(crate) committed_appends: bool,
    /// The steps that ended well and wait in the open transaction for
    /// their commit (see `capability/workflow/step.rs`).
    pub(crate) batch: Option<StepBatch>,
    /// Every step commits on its own, and before it begins: set for the
    /// runs after one whose step reached another instance in a batch.
    pub(crate) steps_alone: bool,
    /// A step of a batch reached for another instance: the run stops, the
    /// steps before it commit, and the run starts again with its steps
    /// alone.
    pub(crate) restart_alone: bool,
    /// A replay that only checks the code against the history (a deploy's
    /// check): it stops where history ends or a step would run, and
    /// nothing it does is kept.
    pub(crate) checking: bool,
}

/// Steps of a run that ended well, in one open transaction, each kept from
/// its savepoint; they commit together, with their effects.
pub(crate) struct StepBatch {
    pub(crate) size: BatchSize,
    pub(crate) effects: Effects,
}

impl StepBatch {
    /// An empty batch, begun now.
    pub(crate) fn new() -> StepBatch {
        StepBatch {
            size: BatchSize::new(),
            effects: Effects::default(),
        }
    }
}

impl Default for RunState {
    fn default() -> Self {
        RunState {
            scopes: vec![Scope {
                prefix: String::new(),
                next: 0,
                kind: ScopeKind::Run,
            }],
            open: None,
            wait: None,
            waits_for_queue: None,
            diverged: None,
            committed_appends: false,
            batch: None,
            steps_alone: false,
            restart_alone: false,
            checking: false,
        }
    }
}

impl RunState {
    /// A run whose steps commit one by one (see [`RunState::steps_alone`]).
    pub(crate) fn alone(steps_alone: bool) -> RunState {
        RunState {
            steps_alone,
            ..RunState::default()
        }
    }
}

impl RunState {
    /// A replay that checks the code against the history (see
    /// [`RunState::checking`]). Its host statements go to savepoints of
    /// one batch that is never committed.
    pub(crate) fn checking() -> RunState {
        RunState {
            checking: true,
            batch: Some(StepBatch::new()),
            ..RunState::default()
        }
    }

    /// The location the next workflow call takes.
    pub(crate) fn take_location(&mut self) -> String {
        let scope = self
            .scopes
            .last_mut()
            .expect("the run's scope is never left");
        let location = format!("{}{}", scope.prefix, scope.next);
        scope.next += 1;
        location
    }

    /// The location the next workflow call would take, without taking it.
    pub(crate) fn peek_location(&self) -> String {
        let scope = self.scopes.last().expect("the run's scope is never left");
        format!("{}{}", scope.prefix, scope.next)
    }

    /// Waits until `at` at the latest.
    pub(crate) fn wait_until(&mut self, at: i64, what: String) {
        if self
            .wait
            .as_ref()
            .is_none_or(|(earliest, _)| at < *earliest)
        {
            self.wait = Some((at, what));
        }
    }
}

/// Where entries of the run go: the run itself, a loop's iteration, a
/// join's branch.
pub(crate) struct Scope {
    /// Prepended to the scope's positions.
    pub(crate) prefix: String,
    /// The next position in the scope.
    pub(crate) next: i64,
    pub(crate) kind: ScopeKind,
}

pub(crate) enum ScopeKind {
    Run,
    Loop {
        location: String,
        iteration: i64,
    },
    Join {
        location: String,
        race: bool,
        /// The run's waits before the join: a race's losers' waits are
        /// dropped by going back to them.
        saved_wait: Option<(i64, String)>,
        saved_queue: Option<String>,
    },
}

/// A step whose body is running.
pub(crate) struct OpenStep {
    pub(crate) location: String,
    pub(crate) name: String,
    pub(crate) attempt: u32,
    pub(crate) options: StepOptions,
    /// How long this attempt may run.
    pub(crate) timeout: Duration,
    /// The step began in a transaction that held other steps or entries
    /// of the run, not yet committed: it may not reach another instance.
    pub(crate) batched: bool,
}
