//! Durable workflows: replay-safe steps, durable sleeps, recorded time,
//! loops that prune their history, joins and races, queue waits, and
//! rollback handlers.
//!
//! A workflow actor declares `workflow: run` in [`crate::actor!`], where
//! `run` takes a [`Ctx`] and the create input. The host runs it when the
//! instance is created and again after every wait, wake and restart, each
//! time from the start: a step that finished returns its recorded output
//! without running again, so only orchestration code re-runs, and it must
//! be deterministic: take time from [`Ctx::now`], not from the clock (the
//! host traps WASI clock and random calls made outside steps).
//!
//! Side effects (`db`, `state`, `queue::append`) work only inside a step;
//! outside, the host refuses them with a `not-in-step` error. A step's
//! writes and its history entry commit together, so they happen once.
//!
//! ```no_run
//! use burrow_sdk::workflow::{self, Ctx};
//! use burrow_sdk::{Json, db};
//!
//! fn run(ctx: &mut Ctx, order: String) -> workflow::Result<Json> {
//!     let charge = ctx.try_step("charge-card", || Ok(format!("charge-{order}")))?;
//!     ctx.step("store-result", || {
//!         let status = if charge.is_ok() { "paid" } else { "manual-review" };
//!         db::execute("UPDATE orders SET status = ?", [status])?;
//!         Ok(())
//!     })?;
//!     Ok(Json::Null)
//! }
//! burrow_sdk::actor! { workflow: run, actions: [] }
//! ```

use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::Error;
use crate::wit::burrow::actor::types::Failure;
use crate::wit::burrow::actor::workflow as wit;

/// Why the orchestration code cannot go on. Return it from `run` (the `?`
/// operator does): the host knows what to do next.
#[derive(Debug, Clone)]
pub enum Interrupt {
    /// A step failed for good (use [`Ctx::try_step`] or [`Ctx::try_block`]
    /// to get it as data instead).
    Failed(StepFailure),
    /// The run waits (a sleep, a retry's backoff); the host runs it again
    /// when the wait is over.
    Suspend,
    /// The code no longer matches the recorded history.
    Diverged(String),
    /// A workflow call was made where it is not allowed.
    Invalid(String),
    /// Orchestration code failed (not a step): the workflow fails.
    Error(Error),
}

impl From<Error> for Interrupt {
    fn from(e: Error) -> Self {
        Interrupt::Error(e)
    }
}

impl From<StepFailure> for Interrupt {
    fn from(f: StepFailure) -> Self {
        Interrupt::Failed(f)
    }
}

impl From<wit::Interrupt> for Interrupt {
    fn from(i: wit::Interrupt) -> Self {
        match i {
            wit::Interrupt::Suspend => Interrupt::Suspend,
            wit::Interrupt::Diverged(m) => Interrupt::Diverged(m),
            wit::Interrupt::Invalid(m) => Interrupt::Invalid(m),
        }
    }
}

/// `Result` of orchestration code.
pub type Result<T> = std::result::Result<T, Interrupt>;

/// Why a step failed for good.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// The step returned a critical error ([`Error::critical`]).
    Critical,
    /// An attempt ran past the step's timeout.
    Timeout,
    /// Every attempt failed.
    Exhausted,
    /// The step asked for a rollback ([`Error::rollback`]), or a rollback
    /// handler failed for good.
    Rollback,
}

/// A step's terminal failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepFailure {
    /// Why it is terminal.
    pub kind: FailureKind,
    /// The last error's code (`timeout` or `trapped` for those).
    pub code: String,
    /// The last error's message.
    pub message: String,
    /// Attempts made.
    pub attempts: u32,
}

impl From<wit::StepFailure> for StepFailure {
    fn from(f: wit::StepFailure) -> Self {
        StepFailure {
            kind: match f.kind {
                wit::FailureKind::Critical => FailureKind::Critical,
                wit::FailureKind::Timeout => FailureKind::Timeout,
                wit::FailureKind::Exhausted => FailureKind::Exhausted,
                wit::FailureKind::Rollback => FailureKind::Rollback,
            },
            code: f.code,
            message: f.message,
            attempts: f.attempts,
        }
    }
}

impl std::fmt::Display for StepFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:?} after {} attempt(s): {}: {}",
            self.kind, self.attempts, self.code, self.message
        )
    }
}

/// How a step retries and how long an attempt may run.
#[derive(Debug, Clone, Copy)]
pub struct StepOptions {
    /// Attempts after the first (3 by default).
    pub max_retries: u32,
    /// Wait before the first retry (1 s by default); it doubles per retry.
    pub backoff_base: Duration,
    /// Longest wait between attempts (1 min by default).
    pub backoff_cap: Duration,
    /// How long one attempt may run; `None` (the default) is the actor's
    /// call timeout.
    pub timeout: Option<Duration>,
}

impl Default for StepOptions {
    fn default() -> Self {
        StepOptions {
            max_retries: 3,
            backoff_base: Duration::from_secs(1),
            backoff_cap: Duration::from_secs(60),
            timeout: None,
        }
    }
}

impl StepOptions {
    /// Sets the number of retries.
    pub fn retries(mut self, n: u32) -> Self {
        self.max_retries = n;
        self
    }

    /// Sets the first retry wait and the longest.
    pub fn backoff(mut self, base: Duration, cap: Duration) -> Self {
        self.backoff_base = base;
        self.backoff_cap = cap;
        self
    }

    /// Sets how long one attempt may run.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    fn to_wit(self) -> wit::StepOptions {
        wit::StepOptions {
            max_retries: self.max_retries,
            backoff_base_ms: self.backoff_base.as_millis() as u64,
            backoff_cap_ms: self.backoff_cap.as_millis() as u64,
            timeout_ms: self.timeout.map(|t| t.as_millis() as u64),
        }
    }
}

thread_local! {
    static ATTEMPT: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Inside a step's body: which attempt this is (1 for the first). Outside a
/// step: 0.
pub fn attempt() -> u32 {
    ATTEMPT.with(|a| a.get())
}

/// What a loop's body says: go on with this state, or stop with this
/// output.
#[derive(Debug, Clone)]
pub enum Loop<S, R> {
    /// Run the next iteration with this state.
    Continue(S),
    /// End the loop with this output.
    Break(R),
}

/// A branch of a join or a race.
pub type Branch<'a, T> = Box<dyn FnOnce(&mut Ctx) -> Result<T> + 'a>;

/// A pending rollback handler: the step's name and what undoes it.
type Undo = (String, Box<dyn FnOnce() -> crate::Result<()>>);

/// The orchestration context of one run.
pub struct Ctx {
    /// Rollback handlers of the steps completed since the last checkpoint.
    undo: Vec<Undo>,
}

fn to_json<T: Serialize>(value: &T) -> Result<String> {
    serde_json::to_string(value).map_err(|e| Error::new("json", e.to_string()).into())
}

fn from_json<T: DeserializeOwned>(json: &str, what: &str) -> Result<T> {
    serde_json::from_str(json)
        .map_err(|e| Error::new("json", format!("the recorded {what} does not decode: {e}")).into())
}

impl Ctx {
    /// Runs `body` as the step `name` (default options) and returns its
    /// output; on replay, returns the recorded output without running it.
    /// A terminal failure interrupts the run with [`Interrupt::Failed`].
    pub fn step<T: Serialize + DeserializeOwned>(
        &mut self,
        name: &str,
        body: impl FnOnce() -> crate::Result<T>,
    ) -> Result<T> {
        self.step_with(name, StepOptions::default(), body)
    }

    /// [`Ctx::step`] with options.
    pub fn step_with<T: Serialize + DeserializeOwned>(
        &mut self,
        name: &str,
        options: StepOptions,
        body: impl FnOnce() -> crate::Result<T>,
    ) -> Result<T> {
        self.try_step_with(name, options, body)?
            .map_err(Interrupt::Failed)
    }

    /// Like [`Ctx::step`], but a terminal failure comes back as data.
    /// What a failed attempt wrote is rolled back; what earlier steps
    /// wrote stays.
    pub fn try_step<T: Serialize + DeserializeOwned>(
        &mut self,
        name: &str,
        body: impl FnOnce() -> crate::Result<T>,
    ) -> Result<std::result::Result<T, StepFailure>> {
        self.try_step_with(name, StepOptions::default(), body)
    }

    /// [`Ctx::try_step`] with options.
    pub fn try_step_with<T: Serialize + DeserializeOwned>(
        &mut self,
        name: &str,
        options: StepOptions,
        body: impl FnOnce() -> crate::Result<T>,
    ) -> Result<std::result::Result<T, StepFailure>> {
        match wit::begin_step(name, options.to_wit())? {
            wit::StepStart::Done(json) => {
                let value = serde_json::from_str(&json).map_err(|e| {
                    Error::new(
                        "json",
                        format!("the recorded output of step `{name}` does not decode: {e}"),
                    )
                })?;
                Ok(Ok(value))
            }
            wit::StepStart::Failed(failure) => Ok(Err(failure.into())),
            wit::StepStart::Run(attempt) => {
                ATTEMPT.with(|a| a.set(attempt));
                let result = body();
                ATTEMPT.with(|a| a.set(0));
                let (value, outcome) = match result {
                    Ok(value) => match serde_json::to_string(&value) {
                        Ok(json) => (Some(value), wit::StepOutcome::Ok(json)),
                        Err(e) => (
                            None,
                            wit::StepOutcome::Critical(Failure {
                                code: "json".into(),
                                message: format!("the output could not be encoded as JSON: {e}"),
                            }),
                        ),
                    },
                    Err(e) if e.rollback => (None, wit::StepOutcome::Rollback(e.into())),
                    Err(e) if e.critical => (None, wit::StepOutcome::Critical(e.into())),
                    Err(e) => (None, wit::StepOutcome::Error(e.into())),
                };
                match (wit::end_step(&outcome)?, value) {
                    (None, Some(value)) => Ok(Ok(value)),
                    (Some(failure), _) => Ok(Err(failure.into())),
                    (None, None) => Err(Interrupt::Invalid(
                        "the host committed a step that failed".into(),
                    )),
                }
            }
        }
    }

    /// Runs `block`; a terminal failure of a step, join or race inside it
    /// comes back as data, except a rollback (waits, divergence and
    /// orchestration errors still interrupt). What the block's steps wrote
    /// before the failure stays: catching a failure does not undo it.
    pub fn try_block<T>(
        &mut self,
        block: impl FnOnce(&mut Ctx) -> Result<T>,
    ) -> Result<std::result::Result<T, StepFailure>> {
        self.try_block_catching(false, block)
    }

    /// [`Ctx::try_block`] that also catches rollbacks when
    /// `catch_rollback` is set.
    pub fn try_block_catching<T>(
        &mut self,
        catch_rollback: bool,
        block: impl FnOnce(&mut Ctx) -> Result<T>,
    ) -> Result<std::result::Result<T, StepFailure>> {
        match block(self) {
            Ok(value) => Ok(Ok(value)),
            Err(Interrupt::Failed(failure))
                if catch_rollback || failure.kind != FailureKind::Rollback =>
            {
                Ok(Err(failure))
            }
            Err(other) => Err(other),
        }
    }

    /// Like [`Ctx::step`], and registers `undo` for the step's output: if
    /// the workflow later fails for good, the handlers of the steps
    /// completed since the last [`Ctx::rollback_checkpoint`] run in reverse
    /// order, each as a step of its own (durably: a crash during the
    /// rollback resumes it).
    pub fn step_with_rollback<T>(
        &mut self,
        name: &str,
        body: impl FnOnce() -> crate::Result<T>,
        undo: impl FnOnce(T) -> crate::Result<()> + 'static,
    ) -> Result<T>
    where
        T: Serialize + DeserializeOwned + Clone + 'static,
    {
        let value = self.step(name, body)?;
        let kept = value.clone();
        self.undo
            .push((name.to_owned(), Box::new(move || undo(kept))));
        Ok(value)
    }

    /// Marks where a rollback stops: handlers of steps before it are not
    /// run.
    pub fn rollback_checkpoint(&mut self, _name: &str) {
        self.undo.clear();
    }

    /// Runs the pending rollback handlers in reverse order, each as the
    /// step `rollback <name>`.
    fn roll_back(&mut self) -> Result<()> {
        while let Some((name, undo)) = self.undo.pop() {
            let step = format!("rollback {name}");
            match self.try_step(&step, undo)? {
                Ok(()) => {}
                Err(mut failure) => {
                    failure.kind = FailureKind::Rollback;
                    failure.message = format!("{step}: {}", failure.message);
                    return Err(Interrupt::Failed(failure));
                }
            }
        }
        Ok(())
    }

    /// Runs a loop named `name`: `body` gets the iteration's state and says
    /// whether to go on. Each iteration's positions are its own, and its
    /// history is pruned when it ends, so a long loop keeps a short
    /// history; a replay starts at the current iteration with the state
    /// carried into it.
    pub fn repeat<S, R>(
        &mut self,
        name: &str,
        state: S,
        mut body: impl FnMut(&mut Ctx, S) -> Result<Loop<S, R>>,
    ) -> Result<R>
    where
        S: Serialize + DeserializeOwned,
        R: Serialize + DeserializeOwned,
    {
        let mut state = match wit::loop_enter(name, &to_json(&state)?)? {
            wit::LoopStart::Done(output) => return from_json(&output, "loop output"),
            wit::LoopStart::Run(iteration) => from_json(&iteration.state, "loop state")?,
        };
        loop {
            match body(self, state) {
                Ok(Loop::Continue(next)) => {
                    wit::loop_continue(&to_json(&next)?)?;
                    state = next;
                }
                Ok(Loop::Break(output)) => {
                    wit::loop_break(&to_json(&output)?)?;
                    return Ok(output);
                }
                Err(interrupt) => {
                    if matches!(interrupt, Interrupt::Failed(_) | Interrupt::Error(_)) {
                        wit::loop_leave()?;
                    }
                    return Err(interrupt);
                }
            }
        }
    }

    /// Runs every branch and returns their outputs in order. A branch that
    /// waits (a sleep, a queue wait, a retry) does not hold the others
    /// back: the run waits for the earliest, and later runs replay the
    /// branches that finished.
    pub fn join<T>(&mut self, name: &str, branches: Vec<Branch<'_, T>>) -> Result<Vec<T>> {
        wit::join_enter(name, false)?;
        let mut outcomes = Vec::with_capacity(branches.len());
        for (index, branch) in branches.into_iter().enumerate() {
            wit::branch(index as u32)?;
            outcomes.push(branch(self));
        }
        wit::join_exit(None)?;
        let mut values = Vec::with_capacity(outcomes.len());
        let mut waiting = false;
        for outcome in outcomes {
            match outcome {
                Ok(value) => values.push(value),
                Err(Interrupt::Suspend) => waiting = true,
                Err(other) => return Err(other),
            }
        }
        if waiting {
            return Err(Interrupt::Suspend);
        }
        Ok(values)
    }

    /// Runs the branches until one finishes; returns its index and output.
    /// The others are cancelled: their pending waits are dropped and they
    /// do not run again. The winner is recorded, so replay takes the same
    /// path.
    pub fn race<T>(&mut self, name: &str, branches: Vec<Branch<'_, T>>) -> Result<(u32, T)> {
        let recorded = wit::join_enter(name, true)?;
        let mut branches: Vec<Option<Branch<'_, T>>> = branches.into_iter().map(Some).collect();
        let order: Vec<u32> = match recorded {
            Some(winner) => vec![winner],
            None => (0..branches.len() as u32).collect(),
        };
        for index in order {
            let Some(branch) = branches.get_mut(index as usize).and_then(Option::take) else {
                wit::join_exit(None)?;
                return Err(Interrupt::Diverged(format!(
                    "race `{name}` recorded branch {index} as its winner, and the code has no such branch"
                )));
            };
            wit::branch(index)?;
            match branch(self) {
                Err(Interrupt::Suspend) => continue,
                Err(interrupt @ (Interrupt::Diverged(_) | Interrupt::Invalid(_))) => {
                    wit::join_exit(None)?;
                    return Err(interrupt);
                }
                finished => {
                    wit::join_exit(Some(index))?;
                    return finished.map(|value| (index, value));
                }
            }
        }
        wit::join_exit(None)?;
        Err(Interrupt::Suspend)
    }

    /// Takes the next event of the instance's queue whose type is one of
    /// `types` (any when empty). The event leaves the queue in the
    /// transaction that records it here, so a crash loses nothing and
    /// replay gets the same event. Without an event the run waits; after
    /// `timeout` it gets `None`.
    pub fn next_event(
        &mut self,
        name: &str,
        types: &[&str],
        timeout: Option<Duration>,
    ) -> Result<Option<crate::queue::Event>> {
        Ok(self.next_batch(name, types, 1, timeout)?.into_iter().next())
    }

    /// Like [`Ctx::next_event`], taking up to `count` events at once
    /// (those pending when the run gets here; at least one unless the
    /// timeout passed).
    pub fn next_batch(
        &mut self,
        name: &str,
        types: &[&str],
        count: u32,
        timeout: Option<Duration>,
    ) -> Result<Vec<crate::queue::Event>> {
        let types: Vec<String> = types.iter().map(|t| (*t).to_owned()).collect();
        let timeout = timeout.map(|t| t.as_millis() as u64);
        let events = wit::queue_next(name, &types, count, timeout)?;
        Ok(events.into_iter().map(crate::queue::Event::from).collect())
    }

    /// For evolving code: the version of the code path at this position.
    /// A run that gets here first records `latest`; a run whose history
    /// predates the version gets 0. Branch on it to keep old runs on the
    /// old path.
    pub fn version(&mut self, name: &str, latest: u32) -> Result<u32> {
        Ok(wit::version(name, latest)?)
    }

    /// For evolving code: stands in for a step `name` that the code no
    /// longer has, so that runs which recorded it do not diverge.
    pub fn removed(&mut self, name: &str) -> Result<()> {
        Ok(wit::removed(name)?)
    }

    /// Sleeps durably: the wake-up time is recorded the first time the run
    /// gets here; the instance may sleep, be evicted or restart meanwhile.
    pub fn sleep(&mut self, name: &str, duration: Duration) -> Result<()> {
        Ok(wit::sleep(name, duration.as_millis() as u64)?)
    }

    /// Sleeps durably until `at_ms`, milliseconds since the Unix epoch.
    pub fn sleep_until(&mut self, name: &str, at_ms: i64) -> Result<()> {
        Ok(wit::sleep_until(name, at_ms)?)
    }

    /// The time (ms since the Unix epoch), recorded the first time the run
    /// gets here and the same on every replay.
    pub fn now(&mut self) -> Result<i64> {
        Ok(wit::now()?)
    }
}

#[doc(hidden)]
pub fn __run<I: DeserializeOwned, R: Serialize>(
    f: impl Fn(&mut Ctx, I) -> Result<R>,
    input: &str,
) -> crate::wit::exports::burrow::actor::workflow_runner::RunOutcome {
    use crate::wit::exports::burrow::actor::workflow_runner::RunOutcome;
    let input: I = match serde_json::from_str(input) {
        Ok(input) => input,
        Err(e) => {
            return RunOutcome::Failed(Failure {
                code: "invalid-input".into(),
                message: format!("the workflow's input does not decode: {e}"),
            });
        }
    };
    let mut ctx = Ctx { undo: Vec::new() };
    let result = match f(&mut ctx, input) {
        Err(failure @ (Interrupt::Failed(_) | Interrupt::Error(_))) => {
            ctx.roll_back().and(Err(failure))
        }
        other => other,
    };
    match result {
        Ok(output) => match serde_json::to_string(&output) {
            Ok(json) => RunOutcome::Completed(json),
            Err(e) => RunOutcome::Failed(Failure {
                code: "json".into(),
                message: format!("the output could not be encoded as JSON: {e}"),
            }),
        },
        Err(Interrupt::Failed(failure)) => RunOutcome::Failed(Failure {
            code: failure.code.clone(),
            message: format!("step failed for good: {failure}"),
        }),
        Err(Interrupt::Error(e)) => RunOutcome::Failed(e.into()),
        Err(Interrupt::Invalid(m)) => RunOutcome::Failed(Failure {
            code: "invalid".into(),
            message: m,
        }),
        Err(Interrupt::Suspend | Interrupt::Diverged(_)) => RunOutcome::Interrupted,
    }
}

/// The open step's idempotency key: the same in every attempt of the
/// step, in every run and after every restart, different for every other
/// step (and for another instance, or one created anew under the same
/// key). Send it with the step's requests as their `Idempotency-Key`
/// header (the `http` module's `Request::idempotency_key` adds it) so
/// that a server that honours it applies a retried attempt once. `None`
/// outside a step.
pub fn step_key() -> Option<String> {
    wit::step_key()
}
