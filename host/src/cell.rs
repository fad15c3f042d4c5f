//! An awake instance: a wasmtime store with the instantiated component and
//! the instance's database connection.
//!
//! Every call into the guest runs inside one transaction of the instance's
//! database: the host opens it, the guest's imports write through it, and
//! the host commits only if the guest returned success. An error, a trap or
//! a passed deadline rolls everything back. The caller hears back only
//! after the commit.
//!
//! The first operation after a start joins the start's transaction
//! (`migrate`, `create` for a new instance, `wake`, and the operation commit
//! together): a failed first call leaves no half-created instance behind,
//! and a wake costs one commit, not two.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use wasmtime::{Engine, Store, StoreLimitsBuilder, Trap, UpdateDeadline};

use crate::address::Address;
use crate::bindings::Exports;
use crate::bindings::processor::QueueMode as WitQueueMode;
use crate::bindings::queue::Event as WitEvent;
use crate::bindings::types::{ActionError, Failure};
use crate::bindings::workflow::FailureKind;
use crate::bindings::workflow_runner::RunOutcome;
use crate::config::{MAX_RESULT_BYTES, MAX_TABLE_ELEMENTS, MAX_WASM_INSTANCES, MAX_WASM_TABLES};
use crate::connections::Hub;
use crate::deadline::{Deadline, DeadlineExceeded};
use crate::definition::ActorDefinition;
use crate::error::Error;
use crate::instance::commit::CommitStage;
use crate::instance::output::failure_text;
use crate::instance::outside::OtherActors;
use crate::instance::workflow_run::RunState;
use crate::instance::{ConflictTrap, InstanceState, Mode, QueueLimits, is_busy};
use crate::storage::index::Index;
use crate::storage::instance_db::{InstanceDb, now_ms};
use crate::storage::queue::{self as queue_db, AfterFailure, AppendError};
use crate::storage::queue::{NewEvent, QueueMode, QueuePolicy, QueuedEvent, retry_delay};
use crate::storage::schedule as schedule_db;
use crate::storage::store::InstanceStore;
use crate::storage::workflow::{self as workflow_db, WorkflowStatus};

/// Counts awake instances; one token per cell.
pub(crate) struct AwakeToken(Arc<AtomicUsize>);

impl AwakeToken {
    pub(crate) fn new(counter: &Arc<AtomicUsize>) -> AwakeToken {
        counter.fetch_add(1, Ordering::Relaxed);
        AwakeToken(counter.clone())
    }
}

impl Drop for AwakeToken {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// How a cell's start transaction began.
#[derive(Debug, Clone, Copy)]
enum Start {
    /// A new instance, created at this time (ms since the Unix epoch).
    Created(i64),
    /// An existing instance woke.
    Woken,
}

/// Where a cell's instance comes from.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Origin<'a> {
    /// Wake an existing instance, or create it with this JSON input.
    CreateIfMissing(&'a str),
    /// Wake an existing instance; a missing one is an error.
    MustExist,
    /// Create a new instance with this JSON input; an existing one is an error.
    MustBeNew(&'a str),
}

/// Where an instance lives: its address and the store of its database
/// and marks, and what its imports reach beyond it.
pub(crate) struct Home<'a> {
    pub(crate) address: Address,
    pub(crate) store: &'a InstanceStore,
    /// Where its broadcast events go.
    pub(crate) hub: Arc<Hub>,
    /// Calls and sends to other instances.
    pub(crate) outside: Arc<dyn OtherActors>,
}

pub(crate) struct Cell {
    store: Store<InstanceState>,
    exports: Exports,
    index: Arc<Index>,
    call_timeout: Duration,
    /// Set while guest code runs. Still set when the next caller comes means
    /// the previous call's future was dropped mid-way.
    in_call: bool,
    /// The wasm instance is unusable (it trapped or was cancelled).
    broken: bool,
    /// The start's transaction is still open, waiting for the first operation.
    starting: Option<Start>,
    /// The creation committed; the host has yet to index it.
    created: Option<i64>,
    /// A committed transaction appended to the queue; the host has yet to
    /// start its processing.
    queue_grew: bool,
    /// The creation started a workflow; the host has yet to drive it.
    workflow_started: bool,
    _awake: AwakeToken,
}

impl Cell {
    /// Opens the instance's database, instantiates the component and runs
    /// the start hooks.
    pub(crate) async fn start(
        engine: &Engine,
        def: &ActorDefinition,
        home: Home<'_>,
        origin: Origin<'_>,
        awake: AwakeToken,
    ) -> Result<Cell, Error> {
        let Home {
            address: name,
            store,
            hub,
            outside,
        } = home;
        let storage = |e: rusqlite::Error| storage_error(&name, e);
        let deadline = Deadline::default();
        let db = store
            .open_instance(&name, def.options.db_size_limit, deadline.clone())
            .map_err(storage)?;
        let index = store.marks().clone();
        let created_at = db.created_at().map_err(storage)?;
        match (&origin, created_at) {
            (Origin::MustExist, None) => {
                return Err(Error::NoSuchInstance {
                    actor: name.actor.to_string(),
                    key: name.key.to_string(),
                });
            }
            (Origin::MustBeNew(_), Some(_)) => {
                return Err(Error::AlreadyExists {
                    actor: name.actor.to_string(),
                    key: name.key.to_string(),
                });
            }
            _ => {}
        }
        let limits = store_limits(def.options.memory_limit);
        let mut state = InstanceState::new(name.clone(), db, deadline, limits);
        state.queue_limits = QueueLimits {
            max_pending: def.options.queue_max_pending,
            max_payload: def.options.queue_max_payload,
        };
        state.call_timeout = def.options.call_timeout;
        state.commit_stage = CommitStage::new(index.clone(), hub);
        state.outside = Some(outside);
        let mut store = Store::new(engine, state);
        store.limiter(|s| &mut s.limits);
        store.epoch_deadline_callback(|cx| {
            if cx.data().deadline.passed() {
                Err(DeadlineExceeded.into())
            } else {
                // Let other instances' tasks run while this guest computes.
                Ok(UpdateDeadline::Yield(1))
            }
        });
        store.data().deadline.start(def.options.call_timeout);
        store.set_epoch_deadline(1);
        let instantiated = def.pre.instantiate_async(&mut store).await;
        store.data().deadline.clear();
        let exports = instantiated.map_err(|e| {
            // Every slot of the engine's pool holds an instance (background
            // work's workers count too): the host is full, the guest did
            // nothing wrong.
            if let Some(full) = e.downcast_ref::<wasmtime::PoolConcurrencyLimitError>() {
                return Error::Overloaded(format!(
                    "an instance of `{}` cannot start: {full}; raise --max-awake or try again",
                    name.actor
                ));
            }
            trap_error(&name, "instantiation", def.options.call_timeout, e)
        })?;
        let mut cell = Cell {
            store,
            exports,
            index,
            call_timeout: def.options.call_timeout,
            in_call: false,
            broken: false,
            starting: None,
            created: None,
            queue_grew: false,
            workflow_started: false,
            _awake: awake,
        };
        cell.db().begin().map_err(storage)?;
        let started = match (origin, created_at) {
            (Origin::CreateIfMissing(input) | Origin::MustBeNew(input), None) => {
                let now = now_ms();
                cell.starting = Some(Start::Created(now));
                let hooks = async {
                    cell.db().create_schema().map_err(storage)?;
                    if cell.exports.processor.is_some() {
                        cell.db().ensure_queue_schema().map_err(storage)?;
                    }
                    cell.hook("migrate").await?;
                    cell.create_hook(input).await?;
                    cell.hook("wake").await?;
                    cell.snapshot_policy().await?;
                    cell.start_workflow(input, now).await?;
                    cell.db()
                        .record_creation(&name.actor, &name.key, now)
                        .map_err(storage)
                };
                hooks.await
            }
            _ => {
                cell.starting = Some(Start::Woken);
                let hooks = async {
                    if cell.exports.processor.is_some() {
                        cell.db().ensure_queue_schema().map_err(storage)?;
                    }
                    cell.hook("migrate").await?;
                    cell.hook("wake").await?;
                    cell.snapshot_policy().await?;
                    cell.note_workflow().map_err(storage)
                };
                hooks.await
            }
        };
        match started {
            Ok(()) => Ok(cell),
            Err(e) => {
                cell.db().rollback();
                Err(e)
            }
        }
    }

    fn db(&self) -> &InstanceDb {
        &self.store.data().db
    }

    fn name(&self) -> &Address {
        &self.store.data().name
    }

    fn storage_error(&self, e: rusqlite::Error) -> Error {
        storage_error(self.name(), e)
    }

    /// Records the guest's queue policy unless one is recorded already
    /// (a database created before its actor had a queue gets it at its
    /// next start), and notes whether the instance has a queue.
    async fn snapshot_policy(&mut self) -> Result<(), Error> {
        if self.exports.processor.is_none() {
            self.store.data_mut().has_queue = false;
            return Ok(());
        }
        let recorded = queue_db::policy(&self.db().conn).map_err(|e| self.storage_error(e))?;
        let policy = match recorded {
            Some(policy) => Some(policy),
            None => {
                let offered = self
                    .call(
                        Mode::Hook("policy"),
                        "processor policy",
                        async |exports, store| {
                            let processor = exports.processor.as_ref().expect("checked above");
                            processor.call_policy(store).await
                        },
                    )
                    .await?;
                match offered {
                    None => None,
                    Some(offered) => {
                        let policy = QueuePolicy {
                            mode: match offered.mode {
                                WitQueueMode::Fifo => QueueMode::Fifo,
                                WitQueueMode::Lifo => QueueMode::Lifo,
                                WitQueueMode::Random => QueueMode::Random,
                                WitQueueMode::Custom => QueueMode::Custom,
                            },
                            concurrency: offered.concurrency,
                        };
                        if policy.concurrency == Some(0) {
                            return Err(self.failed(
                                "processor policy",
                                "invalid-policy",
                                "the queue policy's concurrency is 0; it must be at least 1, \
                                 or none for unlimited"
                                    .into(),
                            ));
                        }
                        queue_db::record_policy(&self.db().conn, &policy)
                            .map_err(|e| self.storage_error(e))?;
                        Some(policy)
                    }
                }
            }
        };
        self.store.data_mut().has_queue = policy.is_some();
        Ok(())
    }

    /// A failure of guest code `during`; the guest's `code` and `message`
    /// are kept as [`failure_text`].
    fn failed(&self, during: &str, code: &str, message: String) -> Error {
        Error::Failed {
            actor: self.name().actor.to_string(),
            key: self.name().key.to_string(),
            during: failure_text(during),
            code: failure_text(code),
            message: failure_text(&message),
        }
    }

    /// Whether this instance has a queue.
    pub(crate) fn has_queue(&self) -> bool {
        self.store.data().has_queue
    }

    /// Whether this cell must be replaced before its next use.
    pub(crate) fn is_broken(&self) -> bool {
        self.broken || self.in_call
    }

    /// Whether the creation of this instance was rolled back.
    pub(crate) fn creation_failed(&self) -> bool {
        self.broken && matches!(self.starting, Some(Start::Created(_)))
    }

    /// The creation time, once, after the creation committed.
    pub(crate) fn take_created(&mut self) -> Option<i64> {
        self.created.take()
    }

    /// Whether this instance has a workflow.
    pub(crate) fn is_workflow(&self) -> bool {
        self.store.data().is_workflow
    }

    /// At a wake: notes whether the instance has a workflow (its queue then
    /// feeds the workflow's queue waits).
    fn note_workflow(&mut self) -> rusqlite::Result<()> {
        if self.exports.runner.is_none() || !crate::storage::workflow::has_schema(&self.db().conn)?
        {
            return Ok(());
        }
        let has_queue = queue_db::has_schema(&self.db().conn)?;
        let state = self.store.data_mut();
        state.is_workflow = true;
        state.has_queue |= has_queue;
        Ok(())
    }

    /// Whether the creation started a workflow, once, after it committed.
    pub(crate) fn take_workflow_started(&mut self) -> bool {
        self.starting.is_none() && std::mem::take(&mut self.workflow_started)
    }

    /// Asks the guest whether it has a workflow; if it does, records the
    /// workflow with the create `input` in the creation's transaction, and
    /// sets the workflow mark before that transaction commits (so that a
    /// crash right after the commit still finds the workflow).
    async fn start_workflow(&mut self, input: &str, now: i64) -> Result<(), Error> {
        if self.exports.runner.is_none() {
            return Ok(());
        }
        let has_workflow = self
            .call(
                Mode::Hook("has-workflow"),
                "workflow-runner has-workflow",
                async |exports, store| {
                    let runner = exports.runner.as_ref().expect("checked above");
                    runner.call_has_workflow(store).await
                },
            )
            .await?;
        if !has_workflow {
            return Ok(());
        }
        let name = self.name().clone();
        let storage = |e| storage_error(&name, e);
        self.db().ensure_workflow_schema().map_err(storage)?;
        // The workflow's queue waits read the instance's queue.
        self.db().ensure_queue_schema().map_err(storage)?;
        self.store.data_mut().has_queue = true;
        self.store.data_mut().is_workflow = true;
        workflow_db::start(&self.db().conn, input, now).map_err(storage)?;
        self.index
            .mark_new_workflow(&name.actor, &name.key, now)
            .map_err(storage)?;
        self.workflow_started = true;
        Ok(())
    }

    /// Runs the instance's workflow once, from the start (replaying its
    /// history), until it completes, fails, diverges or must wait. Each
    /// step commits on its own; the run itself holds no transaction.
    pub(crate) async fn run_workflow(&mut self) -> Result<RunEnd, Error> {
        // Commit the start's transaction (migrate, wake) first, if the
        // instance just woke; the run itself holds no transaction.
        if self.starting.is_some() {
            self.begin()?;
            self.finish(Ok(()))?;
        }
        if self.exports.runner.is_none() {
            return Ok(RunEnd::Finished);
        }
        let record = workflow_db::record(&self.db().conn).map_err(|e| self.storage_error(e))?;
        let Some(record) = record else {
            return Ok(RunEnd::Finished);
        };
        if record.status.is_final() {
            return Ok(RunEnd::Finished);
        }
        self.store.data_mut().workflow = Some(RunState::default());
        let input = record.input;
        let result = self
            .call(
                Mode::Orchestration,
                "workflow run",
                async |exports, store| {
                    let runner = exports.runner.as_ref().expect("checked above");
                    runner.call_run(store, &input).await
                },
            )
            .await;
        let state = self.store.data_mut();
        let run = state.workflow.take().unwrap_or_default();
        // A step still open (a trap, or a guest that returned without
        // ending it) is rolled back.
        state.db.rollback();
        state.discard_effects();
        state.transaction_lost = None;
        state.mode = Mode::Idle;
        self.queue_grew |= run.committed_appends;
        let now = now_ms();
        let (status, output, error, wait) = match result {
            Err(Error::Conflict { .. }) => return Ok(RunEnd::Conflict),
            Err(e) => match &run.open {
                Some(open) => {
                    // The attempt of the open step failed: record it, and
                    // let the next run see a retry or a terminal failure.
                    let (kind, code, message) = match &e {
                        Error::Timeout { .. } => (
                            Some(FailureKind::Timeout),
                            "timeout",
                            format!(
                                "step `{}` ran past its timeout of {} ms",
                                open.name,
                                open.timeout.as_millis()
                            ),
                        ),
                        other => (None, "trapped", failure_text(&other.to_string())),
                    };
                    let recorded = self
                        .store
                        .data_mut()
                        .record_step_failure(open, kind, code, &message);
                    recorded.map_err(|e| Error::Storage {
                        actor: self.name().actor.to_string(),
                        key: self.name().key.to_string(),
                        message: e.to_string(),
                    })?;
                    return Ok(RunEnd::Again);
                }
                None => (
                    WorkflowStatus::Failed,
                    None,
                    Some(failure_text(&e.to_string())),
                    None,
                ),
            },
            Ok(_) if run.diverged.is_some() => (
                WorkflowStatus::Diverged,
                None,
                run.diverged.as_deref().map(failure_text),
                None,
            ),
            Ok(RunOutcome::Completed(output)) if output.len() > MAX_RESULT_BYTES => (
                WorkflowStatus::Failed,
                None,
                Some(format!(
                    "limit-exceeded: the workflow's output is {} bytes; the limit is {MAX_RESULT_BYTES} bytes",
                    output.len()
                )),
                None,
            ),
            Ok(RunOutcome::Completed(output)) => {
                (WorkflowStatus::Completed, Some(output), None, None)
            }
            Ok(RunOutcome::Failed(Failure { code, message })) => (
                WorkflowStatus::Failed,
                None,
                Some(failure_text(&format!("{code}: {message}"))),
                None,
            ),
            Ok(RunOutcome::Interrupted) => match (&run.wait, &run.waits_for_queue) {
                (Some((at, what)), _) => (
                    WorkflowStatus::Waiting,
                    None,
                    None,
                    Some((Some(*at), what.as_str())),
                ),
                (None, Some(what)) => (
                    WorkflowStatus::Waiting,
                    None,
                    None,
                    Some((None, what.as_str())),
                ),
                (None, None) => (
                    WorkflowStatus::Failed,
                    None,
                    Some("the run stopped at an interrupt that was not a wait".into()),
                    None,
                ),
            },
        };
        self.host_transaction(|db| {
            workflow_db::set_status(
                &db.conn,
                status,
                output.as_deref(),
                error.as_deref(),
                wait,
                now,
            )
        })?;
        Ok(match wait {
            Some((Some(at), _)) => RunEnd::Wait(at),
            Some((None, _)) => RunEnd::Idle,
            None => RunEnd::Finished,
        })
    }

    /// Whether a transaction committed since the last ask appended to the
    /// queue.
    pub(crate) fn take_queue_grew(&mut self) -> bool {
        std::mem::take(&mut self.queue_grew)
    }

    /// Runs the action `name` with JSON `args` in one transaction; `chain`
    /// holds the instances waiting on this call (empty for a call from
    /// outside).
    pub(crate) async fn action(
        &mut self,
        name: &str,
        args: &str,
        chain: &[Address],
    ) -> Result<String, Error> {
        self.begin()?;
        self.store.data_mut().chain = chain.to_vec();
        let result = self.run_action(name, args).await;
        self.store.data_mut().chain.clear();
        self.finish(result)
    }

    /// Runs up to `limit` due schedules, each in one transaction with the
    /// deletion of its schedule (or, for a recurring one, the move to its
    /// next time), then sets the instance's schedule mark from what is
    /// left. A schedule whose action fails is deleted (or moved) too, and
    /// its error logged: it ran once. Returns whether more may be due.
    pub(crate) async fn run_due_schedules(&mut self, limit: usize) -> Result<bool, Error> {
        // Commit the start's transaction (migrate, wake) first, if the
        // instance just woke.
        if self.starting.is_some() {
            self.begin()?;
            self.finish(Ok(()))?;
        }
        let mut ran = 0;
        while ran < limit && !self.is_broken() {
            let due = schedule_db::next_due(&self.db().conn, now_ms())
                .map_err(|e| self.storage_error(e))?;
            let Some(schedule) = due else { break };
            ran += 1;
            self.begin()?;
            let mut result = self
                .run_action(&schedule.action, &schedule.args)
                .await
                .map(drop);
            if result.is_ok() {
                result = schedule_db::done(&self.db().conn, &schedule, now_ms())
                    .map_err(|e| self.storage_error(e));
            }
            match self.finish(result) {
                Ok(()) => {}
                Err(e @ Error::Conflict { .. }) => return Err(e),
                Err(e) => {
                    tracing::warn!(
                        actor = %self.name().actor,
                        key = %self.name().key,
                        schedule = schedule.id,
                        action = %failure_text(&schedule.action),
                        error = %e,
                        "a scheduled action failed; it is not run again (a recurring one runs at its next time)"
                    );
                    let now = now_ms();
                    self.host_transaction(|db| schedule_db::done(&db.conn, &schedule, now))?;
                }
            }
        }
        let name = self.name().clone();
        let conn = &self.store.data().db.conn;
        let mark = self
            .index
            .set_schedule_mark_from(&name.actor, &name.key, || schedule_db::earliest(conn))
            .and_then(|r| r)
            .map_err(|e| storage_error(&name, e))?;
        Ok(ran == limit && mark.is_some_and(|at| at <= now_ms()))
    }

    /// Runs the connect hook for connection `id` with `params` (JSON) in
    /// one transaction. An actor without the hook accepts every connection.
    pub(crate) async fn connect(&mut self, id: u64, params: &str) -> Result<(), Error> {
        self.begin()?;
        let result = self.connection_hook("connect", id, params).await;
        self.finish(result)
    }

    /// Runs the disconnect hook for connection `id` in one transaction.
    pub(crate) async fn disconnect(&mut self, id: u64) -> Result<(), Error> {
        self.begin()?;
        let result = self.connection_hook("disconnect", id, "").await;
        self.finish(result)
    }

    async fn connection_hook(
        &mut self,
        hook: &'static str,
        id: u64,
        params: &str,
    ) -> Result<(), Error> {
        if self.exports.connections.is_none() {
            return Ok(());
        }
        let outcome = self
            .call(
                Mode::Hook(hook),
                &format!("hook {hook}"),
                async |exports, store| {
                    let connections = exports.connections.as_ref().expect("checked above");
                    match hook {
                        "connect" => connections.call_on_connect(store, id, params).await,
                        _ => connections.call_on_disconnect(store, id).await,
                    }
                },
            )
            .await?;
        match (hook, outcome) {
            (_, Ok(())) => Ok(()),
            ("connect", Err(Failure { code, message })) => Err(Error::ConnectionRefused {
                actor: self.name().actor.to_string(),
                key: self.name().key.to_string(),
                code: failure_text(&code),
                message: failure_text(&message),
            }),
            (_, Err(failure)) => self.hook_outcome(hook, Err(failure)),
        }
    }

    /// Completes the creation transaction (for an explicit create).
    pub(crate) fn commit_creation(&mut self) -> Result<(), Error> {
        self.begin()?;
        self.finish(Ok(()))
    }

    /// Runs the `sleep` hook; the cell is dropped afterwards either way.
    pub(crate) async fn sleep(mut self) {
        if self.is_broken() {
            return;
        }
        if let Err(e) = self.hook_transaction("sleep").await {
            tracing::warn!(error = %e, "the sleep hook failed");
        }
    }

    /// Runs the `destroy` hook before the instance's data is deleted.
    pub(crate) async fn destroy(mut self) {
        if let Err(e) = self.hook_transaction("destroy").await {
            tracing::warn!(error = %e, "the destroy hook failed; destroying anyway");
        }
    }

    async fn hook_transaction(&mut self, hook: &'static str) -> Result<(), Error> {
        self.begin()?;
        let result = self.hook(hook).await;
        self.finish(result)
    }

    fn begin(&mut self) -> Result<(), Error> {
        if self.starting.is_some() {
            return Ok(());
        }
        self.store.data_mut().discard_effects();
        self.db().begin().map_err(|e| self.storage_error(e))
    }

    fn finish<T>(&mut self, result: Result<T, Error>) -> Result<T, Error> {
        let result = match self.store.data_mut().transaction_lost.take() {
            Some(cause) if result.is_ok() => Err(Error::Failed {
                actor: self.name().actor.to_string(),
                key: self.name().key.to_string(),
                during: "the call".into(),
                code: "transaction-rolled-back".into(),
                message: format!(
                    "SQLite rolled the call's transaction back after {cause}; nothing of the call was kept"
                ),
            }),
            _ => result,
        };
        match result {
            Ok(value) => match self.store.data_mut().commit_transaction() {
                Ok(committed) => {
                    self.queue_grew |= committed.appended;
                    if let Some(Start::Created(at)) = self.starting.take() {
                        self.created = Some(at);
                    }
                    Ok(value)
                }
                Err(e) => {
                    let error = self.storage_error(e);
                    self.db().rollback();
                    self.broken |= self.starting.is_some();
                    Err(error)
                }
            },
            Err(e) => {
                self.db().rollback();
                self.store.data_mut().discard_effects();
                // A start rolled back leaves a guest whose hooks ran for
                // nothing: replace it.
                self.broken |= self.starting.is_some();
                Err(e)
            }
        }
    }

    /// Appends `event` in its own transaction; `before_commit` learns its
    /// id before the transaction commits.
    pub(crate) fn append(
        &mut self,
        event: &NewEvent,
        before_commit: impl FnOnce(i64),
    ) -> Result<i64, Error> {
        self.begin()?;
        let result = self.append_event(event);
        if let Ok(id) = result {
            before_commit(id);
        }
        self.finish(result)
    }

    fn append_event(&mut self, event: &NewEvent) -> Result<i64, Error> {
        if !self.has_queue() {
            return Err(Error::NoQueue(self.name().actor.to_string()));
        }
        let limit = self.store.data().queue_limits.max_pending;
        match queue_db::append(&self.db().conn, event, now_ms(), limit) {
            Ok(id) => {
                self.store.data_mut().effects.appended = true;
                Ok(id)
            }
            Err(AppendError::Full(limit)) => Err(Error::QueueFull {
                actor: self.name().actor.to_string(),
                key: self.name().key.to_string(),
                limit,
            }),
            Err(AppendError::Sqlite(e)) => Err(self.storage_error(e)),
        }
    }

    /// Runs a transaction of the host's own statements.
    pub(crate) fn host_transaction<T>(
        &mut self,
        f: impl FnOnce(&InstanceDb) -> rusqlite::Result<T>,
    ) -> Result<T, Error> {
        self.begin()?;
        let result = f(self.db()).map_err(|e| self.storage_error(e));
        self.finish(result)
    }

    /// Moves dead letter `id` back into the queue.
    pub(crate) fn requeue(&mut self, id: i64) -> Result<bool, Error> {
        self.begin()?;
        let result = queue_db::requeue(&self.db().conn, id).map_err(|e| self.storage_error(e));
        if let Ok(true) = result {
            self.store.data_mut().effects.appended = true;
        }
        self.finish(result)
    }

    /// Processes `event` in one transaction that also deletes it; returns
    /// `process`'s result (JSON text).
    pub(crate) async fn process(&mut self, event: &QueuedEvent) -> Result<String, Error> {
        self.begin()?;
        let result = self.run_process(event).await;
        self.finish(result)
    }

    async fn run_process(&mut self, event: &QueuedEvent) -> Result<String, Error> {
        let during = process_during(event.id);
        let wit_event = wit_event(event);
        let outcome = self
            .call(Mode::Process, &during, async |exports, store| {
                let Some(processor) = exports.processor.as_ref() else {
                    wasmtime::bail!("the component does not export burrow:actor/processor");
                };
                processor.call_process(store, &wit_event).await
            })
            .await?;
        let result = match outcome {
            Ok(result) if result.len() > MAX_RESULT_BYTES => {
                return Err(self.failed(
                    &during,
                    "limit-exceeded",
                    format!(
                        "the result is {} bytes; the limit is {MAX_RESULT_BYTES} bytes",
                        result.len()
                    ),
                ));
            }
            Ok(result) => result,
            Err(Failure { code, message }) => return Err(self.failed(&during, &code, message)),
        };
        let deleted =
            queue_db::delete(&self.db().conn, event.id).map_err(|e| self.storage_error(e))?;
        if !deleted {
            // Processed (or destroyed) meanwhile by another runner: this
            // processing is rolled back whole.
            tracing::warn!(
                actor = %self.name().actor,
                key = %self.name().key,
                event = event.id,
                "the event was no longer pending when its processing ended; rolled back"
            );
            return Err(Error::Conflict {
                actor: self.name().actor.to_string(),
                key: self.name().key.to_string(),
            });
        }
        Ok(result)
    }

    /// Asks the guest's selector which of `pending` to process now.
    pub(crate) async fn select(&mut self, pending: &[QueuedEvent]) -> Result<Vec<i64>, Error> {
        self.begin()?;
        let events: Vec<WitEvent> = pending.iter().map(wit_event).collect();
        let result = self
            .call(Mode::Select, "queue selector", async |exports, store| {
                let Some(processor) = exports.processor.as_ref() else {
                    wasmtime::bail!("the component does not export burrow:actor/processor");
                };
                processor.call_select(store, &events).await
            })
            .await
            .map(|ids| ids.into_iter().map(|id| id as i64).collect());
        self.finish(result)
    }

    /// Records a failed attempt of event `id`: a retry later, or the dead
    /// letter after the actor's `queue_max_attempts`.
    pub(crate) fn record_failure(
        &mut self,
        id: i64,
        error: &str,
        options: &crate::config::ActorOptions,
    ) -> Result<AfterFailure, Error> {
        let now = now_ms();
        let (base, cap) = (options.queue_retry_base, options.queue_retry_cap);
        let max_attempts = options.queue_max_attempts;
        let error = failure_text(error);
        self.host_transaction(|db| {
            queue_db::record_failure(&db.conn, id, &error, now, max_attempts, |failed| {
                now + retry_delay(base, cap, failed).as_millis() as i64
            })
        })
    }

    async fn run_action(&mut self, name: &str, args: &str) -> Result<String, Error> {
        // A scheduled action's name is guest text.
        let during = failure_text(&format!("action {name}"));
        let outcome = self
            .call(Mode::Action, &during, async |exports, store| {
                exports.guest.call_action(store, name, args).await
            })
            .await?;
        let fail = |code: &str, message: String| self.failed(&during, code, message);
        match outcome {
            Ok(result) if result.len() > MAX_RESULT_BYTES => Err(fail(
                "limit-exceeded",
                format!(
                    "the result is {} bytes; the limit is {MAX_RESULT_BYTES} bytes",
                    result.len()
                ),
            )),
            Ok(result) => Ok(result),
            Err(ActionError::UnknownAction(action)) => Err(Error::UnknownAction {
                actor: self.name().actor.to_string(),
                action: failure_text(&action),
            }),
            Err(ActionError::InvalidArguments(message)) => Err(Error::InvalidArguments {
                actor: self.name().actor.to_string(),
                action: failure_text(name),
                message: failure_text(&message),
            }),
            Err(ActionError::Failed(Failure { code, message })) => Err(fail(&code, message)),
        }
    }

    async fn hook(&mut self, hook: &'static str) -> Result<(), Error> {
        let outcome = self
            .call(
                Mode::Hook(hook),
                &format!("hook {hook}"),
                async |exports, store| {
                    let guest = &exports.guest;
                    match hook {
                        "migrate" => guest.call_migrate(store).await,
                        "wake" => guest.call_wake(store).await,
                        "sleep" => guest.call_sleep(store).await,
                        "destroy" => guest.call_destroy(store).await,
                        other => unreachable!("no hook named {other}"),
                    }
                },
            )
            .await?;
        self.hook_outcome(hook, outcome)
    }

    async fn create_hook(&mut self, input: &str) -> Result<(), Error> {
        let outcome = self
            .call(
                Mode::Hook("create"),
                "hook create",
                async |exports, store| exports.guest.call_create(store, input).await,
            )
            .await?;
        self.hook_outcome("create", outcome)
    }

    fn hook_outcome(&self, hook: &str, outcome: Result<(), Failure>) -> Result<(), Error> {
        outcome.map_err(|Failure { code, message }| {
            self.failed(&format!("hook {hook}"), &code, message)
        })
    }

    /// Calls into the guest under the call deadline, in `mode`.
    async fn call<R>(
        &mut self,
        mode: Mode,
        during: &str,
        f: impl AsyncFnOnce(&Exports, &mut Store<InstanceState>) -> wasmtime::Result<R>,
    ) -> Result<R, Error> {
        self.store.data_mut().mode = mode;
        self.store.data().deadline.start(self.call_timeout);
        self.store.set_epoch_deadline(1);
        self.in_call = true;
        // The epoch deadline stops guest code; this also stops a guest that
        // waits in a host call (a WASI sleep, say) past its deadline.
        let deadline = self.store.data().deadline.clone();
        let result = tokio::select! {
            result = f(&self.exports, &mut self.store) => result,
            _ = deadline.overdue(GRACE_AFTER_DEADLINE) => Err(DeadlineExceeded.into()),
        };
        self.in_call = false;
        self.store.data().deadline.clear();
        self.store.data_mut().mode = Mode::Idle;
        result.map_err(|e| {
            self.broken = true;
            trap_error(self.name(), during, self.call_timeout, e)
        })
    }
}

impl Drop for Cell {
    fn drop(&mut self) {
        // A cell dropped mid-call (its caller went away) or mid-creation
        // must not leave a transaction open on the connection.
        self.store.data().db.rollback();
    }
}

/// What one instance's store may hold: its linear memory, and the core
/// instances, tables and table elements of its component.
fn store_limits(memory_limit: usize) -> wasmtime::StoreLimits {
    StoreLimitsBuilder::new()
        .memory_size(memory_limit)
        .instances(MAX_WASM_INSTANCES)
        .tables(MAX_WASM_TABLES)
        .table_elements(MAX_TABLE_ELEMENTS)
        .build()
}

/// How one run of a workflow ended, for its driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RunEnd {
    /// Nothing more to run: completed, failed, diverged, or no workflow.
    Finished,
    /// Run again at this time (ms since the Unix epoch), or sooner when
    /// the queue grows.
    Wait(i64),
    /// Run again when the queue grows (a queue wait without a timeout).
    Idle,
    /// Run again now (a step's attempt failed by a trap and was recorded).
    Again,
    /// A step met a concurrent call of the instance; run again shortly.
    Conflict,
}

/// What a failure of the `process` call of event `id` names as its
/// `during`.
pub(crate) fn process_during(id: i64) -> String {
    format!("process of event {id}")
}

/// How long past its deadline a call may wait in a host call before it is
/// abandoned.
const GRACE_AFTER_DEADLINE: Duration = Duration::from_millis(100);

fn wit_event(event: &QueuedEvent) -> WitEvent {
    WitEvent {
        id: event.id as u64,
        event_type: event.event_type.clone(),
        payload: event.payload.clone(),
        priority: event.priority,
        group: event.group.clone(),
        created_at: event.created_at,
        attempt: event.attempts.saturating_add(1),
    }
}

fn storage_error(name: &Address, e: rusqlite::Error) -> Error {
    if is_busy(&e) {
        return Error::Conflict {
            actor: name.actor.to_string(),
            key: name.key.to_string(),
        };
    }
    Error::Storage {
        actor: name.actor.to_string(),
        key: name.key.to_string(),
        message: e.to_string(),
    }
}

fn trap_error(name: &Address, during: &str, timeout: Duration, e: wasmtime::Error) -> Error {
    if e.downcast_ref::<ConflictTrap>().is_some() {
        return Error::Conflict {
            actor: name.actor.to_string(),
            key: name.key.to_string(),
        };
    }
    let timed_out = e.downcast_ref::<DeadlineExceeded>().is_some()
        || matches!(e.downcast_ref::<Trap>(), Some(Trap::Interrupt));
    if timed_out {
        Error::Timeout {
            actor: name.actor.to_string(),
            key: name.key.to_string(),
            during: during.to_owned(),
            timeout_ms: timeout.as_millis(),
        }
    } else {
        // The trap's text holds guest names (its backtrace's functions).
        Error::Trapped {
            actor: name.actor.to_string(),
            key: name.key.to_string(),
            during: failure_text(during),
            message: failure_text(&format!("{e:?}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fresh_store(engine: &Engine) -> Store<wasmtime::StoreLimits> {
        let mut store = Store::new(engine, store_limits(4 << 20));
        store.limiter(|limits| limits);
        store.set_epoch_deadline(u64::MAX / 2);
        store
    }

    /// Guest code that declares more than a store allows: each limit
    /// refuses the instantiation and names what was refused.
    #[tokio::test]
    async fn store_limits_refuse_what_a_guest_asks_past_them() {
        let engine = crate::engine::build(1, false).unwrap();
        let mut store = fresh_store(&engine);
        let module =
            |text: String| wasmtime::Module::new(&engine, wat::parse_str(text).unwrap()).unwrap();
        let linker = wasmtime::Linker::new(&engine);
        let refusal = async |store: &mut Store<wasmtime::StoreLimits>, text: String| {
            let e = linker
                .instantiate_async(&mut *store, &module(text))
                .await
                .unwrap_err();
            format!("{e:?}")
        };

        let e = refusal(&mut store, "(module (memory 65))".into()).await;
        assert!(e.contains("memory"), "{e}");
        let e = refusal(
            &mut store,
            format!("(module (table {} funcref))", MAX_TABLE_ELEMENTS + 1),
        )
        .await;
        assert!(e.contains("table"), "{e}");
        // A module has at most 100 tables: the store's limit counts the
        // tables of all its instances.
        let hundred = format!("(module {})", "(table 0 funcref)".repeat(100));
        let tables = module(hundred.clone());
        let mut store = fresh_store(&engine);
        for _ in 0..MAX_WASM_TABLES / 100 {
            linker.instantiate_async(&mut store, &tables).await.unwrap();
        }
        let e = refusal(&mut store, hundred).await;
        assert!(e.contains("table"), "{e}");

        let mut store = fresh_store(&engine);
        let empty = module("(module)".into());
        for _ in 0..MAX_WASM_INSTANCES {
            linker.instantiate_async(&mut store, &empty).await.unwrap();
        }
        let e = refusal(&mut store, "(module)".into()).await;
        assert!(e.contains("instance"), "{e}");
    }
}
