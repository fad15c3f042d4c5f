//! What a wasmtime store holds for one instance: its database, the deadline
//! and mode of the current call, limits, the effects of the open
//! transaction, and a WASI context without ambient authority.
//!
//! This layer stands below the capabilities (which implement the imports
//! on [`InstanceState`]) and above storage; what it needs of the layers
//! above (calls to other actors) comes through [`outside::OtherActors`].

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
    pub(crate) name: Address,
    pub(crate) db: InstanceDb,
    pub(crate) deadline: Deadline,
    pub(crate) mode: Mode,
    pub(crate) log_limit: LogLimit,
    /// Set when SQLite rolled the call's transaction back by itself (it
    /// does on a full database, for one): the call can no longer commit.
    pub(crate) transaction_lost: Option<String>,
    pub(crate) limits: StoreLimits,
    /// Whether this instance has a queue (its policy is recorded).
    pub(crate) has_queue: bool,
    pub(crate) queue_limits: QueueLimits,
    /// What the open transaction did that its commit acts on.
    pub(crate) effects: Effects,
    /// Where the instance's transactions end.
    pub(crate) commit_stage: CommitStage,
    /// The actor's call timeout: a workflow step gets it anew (or its own
    /// timeout), and so does the orchestration code after each step.
    pub(crate) call_timeout: std::time::Duration,
    /// Whether the instance has a workflow.
    pub(crate) is_workflow: bool,
    /// Set while a workflow run is going on.
    pub(crate) workflow: Option<RunState>,
    /// Calls and sends to other instances (`None` in unit tests).
    pub(crate) outside: Option<Arc<dyn OtherActors>>,
    /// The instances waiting on the current call, outermost first: a call
    /// from one of them to this one is on this chain.
    pub(crate) chain: Vec<Address>,
    /// Who made the running call (an action, the connect hook); `Host`
    /// for everything else.
    pub(crate) caller: Caller,
    /// Its outgoing HTTP requests (`wasi:http`): the hooks every one goes
    /// through (`capability/http`'s, which enforce the actor's list and
    /// limits; none may leave without them).
    pub(crate) http: HttpContext,
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

impl InstanceState {
    /// Commits the open transaction through the commit stage.
    pub(crate) fn commit_transaction(&mut self) -> Result<Committed, commit::CommitError> {
        let effects = std::mem::take(&mut self.effects);
        self.commit_stage.commit(&self.name, &self.db, effects)
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
