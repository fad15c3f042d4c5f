//! What a wasmtime store holds for one instance: its database, the deadline
//! and mode of the current call, limits, the effects of the open
//! transaction, and a WASI context without ambient authority.
//!
//! This layer stands below the capabilities (which implement the imports
//! on [`InstanceState`]) and above storage; what it needs of the layers
//! above (calls to other actors) comes through [`outside::OtherActors`].

pub(crate) mod batch;
pub(crate) mod commit;
mod mode;
pub(crate) mod output;
pub(crate) mod outside;
pub(crate) mod workflow_run;

use std::sync::{Arc, Mutex};

use wasmtime::StoreLimits;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpHooks, WasiHttpView};

use crate::address::Address;
use crate::caller::Caller;
use crate::deadline::Deadline;
use crate::storage::InstanceDb;
use commit::{CommitStage, Committed, Effects};
pub(crate) use mode::{ConflictTrap, Mode, Refusal, commit_trap, is_busy, storage_trap};
use output::{GuestOutput, LogLimit};
use outside::OtherActors;
use workflow_run::RunState;

/// What an instance's queue allows, from its actor's options.
#[derive(Debug, Clone, Copy)]
pub(crate) struct QueueLimits {
    pub(crate) max_pending: u64,
    pub(crate) max_payload: usize,
}

pub(crate) struct InstanceState {
    name: Address,
    db: InstanceDb,
    deadline: Deadline,
    mode: Mode,
    log_limit: LogLimit,
    /// Set when SQLite rolled the call's transaction back by itself (it
    /// does on a full database, for one): the call can no longer commit.
    transaction_lost: Option<String>,
    limits: StoreLimits,
    /// Whether this instance has a queue (its policy is recorded).
    has_queue: bool,
    queue_limits: QueueLimits,
    /// What the open transaction did that its commit acts on.
    effects: Effects,
    /// Where the instance's transactions end.
    commit_stage: CommitStage,
    /// The actor's call timeout: a workflow step gets it anew (or its own
    /// timeout), and so does the orchestration code after each step.
    call_timeout: std::time::Duration,
    /// Whether the instance has a workflow.
    is_workflow: bool,
    /// Set while a workflow run is going on.
    workflow: Option<RunState>,
    /// Calls and sends to other instances (`None` in unit tests).
    outside: Option<Arc<dyn OtherActors>>,
    /// The instances waiting on the current call, outermost first: a call
    /// from one of them to this one is on this chain.
    chain: Vec<Address>,
    /// Who made the running call (an action, the connect hook); `Host`
    /// for everything else.
    caller: Caller,
    /// Its outgoing HTTP requests (`wasi:http`): the hooks every one goes
    /// through (`capability/http`'s, which enforce the actor's list and
    /// limits; none may leave without them).
    http: HttpContext,
    wasi: WasiCtx,
    table: ResourceTable,
}

/// An instance's `wasi:http` state.
pub(crate) struct HttpContext {
    pub(crate) ctx: WasiHttpCtx,
    pub(crate) hooks: Box<dyn WasiHttpHooks>,
    /// Where requests refused at the import are counted.
    pub(crate) metrics: Option<Arc<crate::metrics::ActorMetrics>>,
    /// The requests the open workflow step sent so far, in order: kept
    /// with the step's history entry (see `capability/workflow/step.rs`).
    pub(crate) step_requests: Vec<Arc<Mutex<StepRequest>>>,
    /// The record of the request being sent, handed from the import to
    /// the hooks, which fill it in as the request goes.
    pub(crate) sending: Arc<Mutex<Option<Arc<Mutex<StepRequest>>>>>,
}

/// One outgoing request of a workflow step, as the step's history shows
/// it.
#[derive(Debug, Clone)]
pub(crate) struct StepRequest {
    pub(crate) method: String,
    /// `scheme://host[:port]`, as the guest gave it.
    pub(crate) authority: String,
    /// The answer's status, once its head came.
    pub(crate) status: Option<u16>,
    /// As `burrow_outbound_requests_total` counts it (`answered`,
    /// `denied`, `timeout`, ...), or `in-flight` while it goes.
    pub(crate) outcome: &'static str,
    /// From the request to its answer's head, or to its failure.
    pub(crate) duration_ms: Option<u64>,
}

impl Default for HttpContext {
    /// No request leaves: the state of an instance that may not reach the
    /// world (a deploy's dry run, a unit test).
    fn default() -> Self {
        HttpContext {
            ctx: WasiHttpCtx::new(),
            hooks: Box::new(NoOutgoingRequests),
            metrics: None,
            step_requests: Vec::new(),
            sending: Arc::default(),
        }
    }
}

/// Hooks that refuse every outgoing request.
struct NoOutgoingRequests;

impl WasiHttpHooks for NoOutgoingRequests {
    fn send_request(
        &mut self,
        _request: http::Request<wasmtime_wasi_http::WasiBody>,
        _options: Option<wasmtime_wasi_http::RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send>,
    ) -> Box<
        dyn Future<
                Output = Result<
                    (
                        http::Response<wasmtime_wasi_http::WasiBody>,
                        Box<dyn Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send>,
                    ),
                    wasmtime_wasi_http::Error,
                >,
            > + Send,
    > {
        Box::new(async {
            Err(wasmtime_wasi_http::Error::InternalError(Some(
                "denied: this instance may send no HTTP request here".into(),
            )))
        })
    }
}

impl InstanceState {
    pub(crate) fn new(
        name: Address,
        db: InstanceDb,
        deadline: Deadline,
        limits: StoreLimits,
    ) -> Self {
        // No preopened directories, no environment, no arguments, no
        // network, no stdin: the builder grants none of them unless asked.
        let log_limit = LogLimit::default();
        let wasi = WasiCtx::builder()
            .stdout(GuestOutput::new(name.clone(), "stdout", log_limit.clone()))
            .stderr(GuestOutput::new(name.clone(), "stderr", log_limit.clone()))
            .allow_ip_name_lookup(false)
            .allow_tcp(false)
            .allow_udp(false)
            .build();
        InstanceState {
            name,
            db,
            deadline,
            mode: Mode::Idle,
            log_limit,
            transaction_lost: None,
            limits,
            has_queue: false,
            queue_limits: QueueLimits {
                max_pending: crate::config::DEFAULT_QUEUE_MAX_PENDING,
                max_payload: crate::config::DEFAULT_QUEUE_MAX_PAYLOAD,
            },
            effects: Effects::default(),
            commit_stage: CommitStage::default(),
            call_timeout: crate::config::DEFAULT_CALL_TIMEOUT,
            is_workflow: false,
            workflow: None,
            outside: None,
            chain: Vec::new(),
            caller: Caller::Host,
            http: HttpContext::default(),
            wasi,
            table: ResourceTable::new(),
        }
    }

    /// Refuses `call`, a side effect (reading the database or the state
    /// counts: orchestration code must not depend on it), unless guest code
    /// that may make it is running.
    pub(crate) fn check_mode(&self, call: &str) -> Result<(), Refusal> {
        match self.mode {
            Mode::Idle => Err(Refusal::NotAllowed(format!(
                "{call} was called while no call into the guest is running"
            ))),
            Mode::Orchestration => Err(Refusal::NotInStep(format!(
                "{call} was called by workflow code outside a step; side effects \
                 (db, state, queue, schedules, calls to actors, events, HTTP requests) \
                 are allowed only inside a step"
            ))),
            Mode::Hook(_) | Mode::Action | Mode::Process | Mode::Select | Mode::Step => Ok(()),
        }
    }

    /// Refuses `call`, which writes, unless guest code that may write is
    /// running.
    pub(crate) fn check_write(&self, call: &str) -> Result<(), Refusal> {
        match self.mode {
            Mode::Select => Err(Refusal::NotAllowed(format!(
                "{call} writes, and the queue selector may only read"
            ))),
            _ => self.check_mode(call),
        }
    }
}

/// What every layer above reads of the state. The state's fields are
/// written only here, through the methods below, which say what changes.
impl InstanceState {
    pub(crate) fn name(&self) -> &Address {
        &self.name
    }

    pub(crate) fn db(&self) -> &InstanceDb {
        &self.db
    }

    /// The deadline of the running call (or step).
    pub(crate) fn deadline(&self) -> &Deadline {
        &self.deadline
    }

    pub(crate) fn mode(&self) -> Mode {
        self.mode
    }

    pub(crate) fn caller(&self) -> &Caller {
        &self.caller
    }

    pub(crate) fn chain(&self) -> &[Address] {
        &self.chain
    }

    pub(crate) fn log_limit(&self) -> &LogLimit {
        &self.log_limit
    }

    pub(crate) fn has_queue(&self) -> bool {
        self.has_queue
    }

    pub(crate) fn queue_limits(&self) -> QueueLimits {
        self.queue_limits
    }

    pub(crate) fn call_timeout(&self) -> std::time::Duration {
        self.call_timeout
    }

    pub(crate) fn is_workflow(&self) -> bool {
        self.is_workflow
    }

    pub(crate) fn outside(&self) -> Option<&Arc<dyn OtherActors>> {
        self.outside.as_ref()
    }

    /// What the open transaction did so far that its commit acts on.
    pub(crate) fn effects(&self) -> &Effects {
        &self.effects
    }

    /// Why SQLite rolled the call's transaction back, if it did.
    pub(crate) fn lost_transaction(&self) -> Option<&str> {
        self.transaction_lost.as_deref()
    }

    /// The state of the workflow run going on, if one is.
    pub(crate) fn workflow_run(&self) -> Option<&RunState> {
        self.workflow.as_ref()
    }

    pub(crate) fn workflow_run_mut(&mut self) -> Option<&mut RunState> {
        self.workflow.as_mut()
    }

    /// The `wasi:http` context: the capability's own state.
    pub(crate) fn http_context(&mut self) -> &mut HttpContext {
        &mut self.http
    }

    /// What the store's memory limiter counts against.
    pub(crate) fn limiter(&mut self) -> &mut StoreLimits {
        &mut self.limits
    }
}

/// What the cell sets once, from the actor's options and the host, before
/// the first call.
impl InstanceState {
    pub(crate) fn set_queue_limits(&mut self, limits: QueueLimits) {
        self.queue_limits = limits;
    }

    pub(crate) fn set_call_timeout(&mut self, timeout: std::time::Duration) {
        self.call_timeout = timeout;
    }

    /// Where the instance's transactions end, and how it reaches other
    /// instances (`None`: it may not, as in a deploy's dry run).
    pub(crate) fn connect(
        &mut self,
        commit_stage: CommitStage,
        outside: Option<Arc<dyn OtherActors>>,
    ) {
        self.commit_stage = commit_stage;
        self.outside = outside;
    }

    /// Lets outgoing requests through `hooks` (by default none leaves),
    /// counting refusals at the import in `metrics`.
    pub(crate) fn allow_outgoing_http(
        &mut self,
        hooks: Box<dyn WasiHttpHooks>,
        metrics: Arc<crate::metrics::ActorMetrics>,
    ) {
        self.http.hooks = hooks;
        self.http.metrics = Some(metrics);
    }

    /// Notes whether the instance has a queue (its policy is recorded).
    pub(crate) fn set_has_queue(&mut self, has_queue: bool) {
        self.has_queue = has_queue;
    }

    /// Notes that the instance has a workflow, and a queue if `has_queue`
    /// (a workflow's queue waits read it).
    pub(crate) fn note_workflow(&mut self, has_queue: bool) {
        self.is_workflow = true;
        self.has_queue |= has_queue;
    }
}

/// The frame of the running call: its mode, who made it, who waits on it.
impl InstanceState {
    /// Enters `mode`: guest code of another kind starts or ends running.
    pub(crate) fn set_mode(&mut self, mode: Mode) {
        self.mode = mode;
    }

    /// Sets who makes the calls into the guest that follow (the host's own
    /// once it is set back to [`Caller::Host`]).
    pub(crate) fn set_caller(&mut self, caller: Caller) {
        self.caller = caller;
    }

    /// Sets the instances waiting on the running call, outermost first.
    pub(crate) fn set_chain(&mut self, chain: &[Address]) {
        self.chain.clear();
        self.chain.extend_from_slice(chain);
    }

    pub(crate) fn clear_chain(&mut self) {
        self.chain.clear();
    }

    /// Starts a workflow run with `run`'s state.
    pub(crate) fn begin_run(&mut self, run: RunState) {
        self.workflow = Some(run);
    }

    /// Ends the workflow run, returning its state.
    pub(crate) fn end_run(&mut self) -> Option<RunState> {
        self.workflow.take()
    }
}

/// The open transaction's effects, and whether SQLite took it away.
impl InstanceState {
    /// Takes why SQLite rolled the call's transaction back, if it did: the
    /// caller fails the call (or step) with it.
    pub(crate) fn take_lost_transaction(&mut self) -> Option<String> {
        self.transaction_lost.take()
    }

    /// The transaction reached another instance or the world: it commits
    /// before anything else runs.
    pub(crate) fn note_reached_outside(&mut self) {
        self.effects.reached_outside = true;
    }

    /// The transaction appended to the instance's queue.
    pub(crate) fn note_appended(&mut self) {
        self.effects.appended = true;
    }

    /// The transaction broadcasts `event` to the instance's connections
    /// when it commits.
    pub(crate) fn note_event(&mut self, event: crate::connections::PendingEvent) {
        self.effects.events.push(event);
    }

    /// The transaction added a schedule due at `at`.
    pub(crate) fn note_scheduled(&mut self, at: i64) {
        self.effects.scheduled = Some(self.effects.scheduled.map_or(at, |due| due.min(at)));
    }

    /// The transaction creates the instance, at `at`.
    pub(crate) fn note_created(&mut self, at: i64) {
        self.effects.created = Some(at);
    }

    /// The transaction starts the instance's workflow, at `at`.
    pub(crate) fn note_workflow_started(&mut self, at: i64) {
        self.effects.workflow_started = Some(at);
    }

    /// Takes the effects so far, leaving none: what runs next (a
    /// savepoint's guest code, a step) gathers its own.
    pub(crate) fn take_effects(&mut self) -> Effects {
        std::mem::take(&mut self.effects)
    }

    /// Puts `before` back as the transaction's effects, returning those
    /// gathered since [`InstanceState::take_effects`].
    pub(crate) fn restore_effects(&mut self, before: Effects) -> Effects {
        std::mem::replace(&mut self.effects, before)
    }

    /// Adds `effects` (a kept savepoint's) to the transaction's.
    pub(crate) fn absorb_effects(&mut self, effects: Effects) {
        self.effects.absorb(effects);
    }

    /// Commits the open transaction with `effects` (a batch's, gathered
    /// apart) rather than its own.
    pub(crate) fn commit_with(&self, effects: Effects) -> Result<Committed, commit::CommitError> {
        self.commit_stage.commit(&self.name, &self.db, effects)
    }
}

impl InstanceState {
    /// Commits the open transaction through the commit stage.
    pub(crate) fn commit_transaction(&mut self) -> Result<Committed, commit::CommitError> {
        let effects = self.take_effects();
        self.commit_with(effects)
    }

    /// Commits the open transaction, leaving the log's sync to the caller
    /// (see [`CommitStage::commit_syncing_later`]).
    pub(crate) fn commit_transaction_syncing_later(
        &mut self,
    ) -> Result<(Committed, Option<commit::Unsynced>), commit::CommitError> {
        let effects = std::mem::take(&mut self.effects);
        self.commit_stage
            .commit_syncing_later(&self.name, &self.db, effects)
    }

    /// Begins a transaction, with no effects yet.
    pub(crate) fn begin_transaction(&mut self) -> rusqlite::Result<()> {
        self.effects = Effects::default();
        self.db.begin()
    }

    /// Rolls the open transaction back, with its effects.
    pub(crate) fn roll_back(&mut self) {
        self.db.rollback();
        self.effects = Effects::default();
    }

    /// Forgets the effects of a transaction that is rolled back.
    pub(crate) fn discard_effects(&mut self) {
        self.effects = Effects::default();
    }

    /// After a failed statement: if SQLite rolled the whole transaction
    /// back, opens a new one (so that the rest of the call cannot commit
    /// piecemeal) and remembers that this call must fail.
    pub(crate) fn check_transaction(&mut self, after: &str) -> rusqlite::Result<()> {
        if self.mode != Mode::Idle && self.db.conn.is_autocommit() {
            self.db.begin()?;
            self.transaction_lost
                .get_or_insert_with(|| after.to_owned());
        }
        Ok(())
    }
}

impl WasiView for InstanceState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for InstanceState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http.ctx,
            table: &mut self.table,
            hooks: &mut *self.http.hooks,
        }
    }
}

#[cfg(test)]
pub(crate) mod testing {
    use super::*;
    use crate::config::Synchronous;

    /// A store state over a fresh database, as during an action.
    pub(crate) fn instance() -> (InstanceState, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let deadline = Deadline::default();
        let db = InstanceDb::open(
            &dir.path().join("i.sqlite"),
            Synchronous::Normal,
            4 << 20,
            deadline.clone(),
        )
        .unwrap();
        db.create_schema().unwrap();
        db.ensure_queue_schema().unwrap();
        let name = Address {
            actor: "actor".into(),
            key: "key".into(),
        };
        let mut state = InstanceState::new(name, db, deadline, StoreLimits::default());
        state.mode = Mode::Action;
        (state, dir)
    }
}
