//! Durable workflows: replay-safe steps, durable sleeps and recorded time.
//!
//! A workflow actor declares `workflow: run` in [`crate::actor!`], where
//! `run` takes a [`Ctx`] and the create input. The host runs it when the
//! instance is created and again after every wait, wake and restart, each
//! time from the start: a step that finished returns its recorded output
//! without running again, so only orchestration code re-runs, and it must
//! be deterministic (take time from [`Ctx::now`], not from the clock).
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

/// The orchestration context of one run.
pub struct Ctx {
    _private: (),
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

    /// Runs `block`; a terminal step failure inside it comes back as data
    /// (waits, divergence and orchestration errors still interrupt).
    pub fn try_block<T>(
        &mut self,
        block: impl FnOnce(&mut Ctx) -> Result<T>,
    ) -> Result<std::result::Result<T, StepFailure>> {
        match block(self) {
            Ok(value) => Ok(Ok(value)),
            Err(Interrupt::Failed(failure)) => Ok(Err(failure)),
            Err(other) => Err(other),
        }
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
    let mut ctx = Ctx { _private: () };
    match f(&mut ctx, input) {
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
