//! What a wasmtime store holds for one instance: its database, the deadline
//! and mode of the current call, limits, and a WASI context without
//! ambient authority.

use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};

use wasmtime::StoreLimits;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::capability::log::{LogLimit, clean};
use crate::config::MAX_LOG_LINE_BYTES;
use crate::connections::PendingEvent;
use crate::deadline::Deadline;
use crate::storage::instance_db::{InstanceDb, now_ms};

/// What guest code is running right now. Imports check it first, so that
/// later modes (workflow orchestration, steps) can refuse side effects at
/// the import boundary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// No call into the guest is running.
    Idle,
    /// A lifecycle hook (`migrate`, `create`, `wake`, `sleep`, `destroy`).
    Hook(&'static str),
    /// An action.
    Action,
    /// Processing one queue event.
    Process,
    /// A custom queue selector: it may read, not write.
    Select,
    /// A workflow's orchestration code: it may only open steps, sleep and
    /// read recorded values.
    Orchestration,
    /// A workflow step: side effects are allowed.
    Step,
}

/// Why an import refused a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The mode forbids it; the text names the call.
    NotAllowed(String),
    /// A workflow's orchestration code made it outside a step.
    NotInStep(String),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::NotAllowed(why) | Refusal::NotInStep(why) => f.write_str(why),
        }
    }
}

/// The trap an import raises when the instance's database is busy with a
/// concurrent call of the same instance: the call is rolled back and run
/// again (see ARCHITECTURE.md, "Concurrent processing").
#[derive(Debug)]
pub(crate) struct ConflictTrap;

impl std::fmt::Display for ConflictTrap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the instance's database is busy with a concurrent call of this instance")
    }
}

impl std::error::Error for ConflictTrap {}

/// Whether SQLite refused because another connection holds the write lock
/// or committed since this transaction began reading.
pub(crate) fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// A storage failure inside an import, as a trap: [`ConflictTrap`] when the
/// database was busy, so that the call is re-run rather than failed.
pub(crate) fn storage_trap(e: rusqlite::Error) -> wasmtime::Error {
    if is_busy(&e) {
        ConflictTrap.into()
    } else {
        e.into()
    }
}

/// What an instance's queue allows, from its actor's options.
#[derive(Debug, Clone, Copy)]
pub(crate) struct QueueLimits {
    pub(crate) max_pending: u64,
    pub(crate) max_payload: usize,
}

/// Identifies an instance in logs and errors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InstanceName {
    pub(crate) actor: Arc<str>,
    pub(crate) key: Arc<str>,
}

impl InstanceName {
    pub(crate) fn address(&self) -> crate::directory::Address {
        crate::directory::Address {
            actor: self.actor.clone(),
            key: self.key.clone(),
        }
    }
}

impl std::fmt::Display for InstanceName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.actor, self.key)
    }
}

pub(crate) struct InstanceState {
    pub(crate) name: InstanceName,
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
    /// Set when the current transaction appended to the queue.
    pub(crate) appended: bool,
    /// The actor's call timeout: a workflow step gets it anew (or its own
    /// timeout), and so does the orchestration code after each step.
    pub(crate) call_timeout: std::time::Duration,
    /// The host's index, to commit a workflow step that appended to the
    /// queue with the queue mark lowered (`None` in unit tests).
    pub(crate) index: Option<Arc<crate::storage::index::Index>>,
    /// Whether the instance has a workflow.
    pub(crate) is_workflow: bool,
    /// Set while a workflow run is going on.
    pub(crate) workflow: Option<crate::workflow::run::RunState>,
    /// The soonest time of the schedules the current transaction added.
    pub(crate) scheduled: Option<i64>,
    /// Events the current transaction broadcast, published once it commits.
    pub(crate) events: Vec<PendingEvent>,
    /// The host, for calls to other actors and for publishing events
    /// (`None` in unit tests).
    pub(crate) host: Option<Weak<crate::host::Inner>>,
    /// The instances waiting on the current call, outermost first: a call
    /// from one of them to this one is on this chain.
    pub(crate) chain: Vec<InstanceName>,
    wasi: WasiCtx,
    table: ResourceTable,
}

impl InstanceState {
    pub(crate) fn new(
        name: InstanceName,
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
            appended: false,
            call_timeout: crate::config::DEFAULT_CALL_TIMEOUT,
            index: None,
            is_workflow: false,
            workflow: None,
            scheduled: None,
            events: Vec::new(),
            host: None,
            chain: Vec::new(),
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
                 (db, state, queue, schedules, calls to actors, events) are allowed \
                 only inside a step"
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
    /// Commits the open transaction, first lowering the index's marks that
    /// its effects need (an append, schedules) under the index's lock, and
    /// then publishes the events it broadcast. Returns whether it appended
    /// to the queue.
    pub(crate) fn commit_transaction(&mut self) -> rusqlite::Result<bool> {
        let appended = std::mem::take(&mut self.appended);
        let scheduled = self.scheduled.take();
        let events = std::mem::take(&mut self.events);
        match &self.index {
            Some(index) if appended || scheduled.is_some() => {
                let now = now_ms();
                let name = &self.name;
                let db = &self.db;
                index.lower_marks_around(
                    &name.actor,
                    &name.key,
                    appended.then_some(now),
                    scheduled,
                    || db.commit(),
                )??
            }
            _ => self.db.commit()?,
        }
        if !events.is_empty()
            && let Some(host) = self.host.as_ref().and_then(Weak::upgrade)
        {
            host.hub.publish(&self.name.address(), &events);
        }
        Ok(appended)
    }

    /// Forgets the effects of a transaction that is rolled back.
    pub(crate) fn discard_effects(&mut self) {
        self.appended = false;
        self.scheduled = None;
        self.events.clear();
    }

    /// The host, while it runs.
    pub(crate) fn host(&self) -> Option<crate::host::Host> {
        let inner = self.host.as_ref()?.upgrade()?;
        Some(crate::host::Host { inner })
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

/// Guest stdout or stderr: each line goes to the host log, tagged with the
/// instance, cut at [`MAX_LOG_LINE_BYTES`] and with control characters
/// escaped.
#[derive(Clone)]
struct GuestOutput {
    name: InstanceName,
    stream: &'static str,
    limit: LogLimit,
}

impl GuestOutput {
    fn new(name: InstanceName, stream: &'static str, limit: LogLimit) -> Self {
        GuestOutput {
            name,
            stream,
            limit,
        }
    }
}

impl IsTerminal for GuestOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestOutput {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(LineWriter {
            out: self.clone(),
            line: Vec::new(),
        })
    }
}

struct LineWriter {
    out: GuestOutput,
    line: Vec<u8>,
}

impl LineWriter {
    fn emit(&mut self) {
        if self.line.is_empty() {
            return;
        }
        if !self.out.limit.admit(&self.out.name) {
            self.line.clear();
            return;
        }
        let text = String::from_utf8_lossy(&self.line);
        let text = clean(text.trim_end(), MAX_LOG_LINE_BYTES);
        tracing::info!(
            target: "burrow::guest",
            actor = %self.out.name.actor,
            key = %self.out.name.key,
            stream = self.out.stream,
            "{text}"
        );
        self.line.clear();
    }
}

impl tokio::io::AsyncWrite for LineWriter {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        for &byte in buf {
            if byte == b'\n' {
                self.emit();
            } else if self.line.len() < MAX_LOG_LINE_BYTES {
                self.line.push(byte);
            }
        }
        Poll::Ready(Ok(buf.len()))
    }

    // Guests flush after every write (Rust's unbuffered stderr writes a
    // line in pieces), so a flush keeps the partial line; it goes out at
    // its newline, or when the stream closes.
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.emit();
        Poll::Ready(Ok(()))
    }
}

impl Drop for LineWriter {
    fn drop(&mut self) {
        self.emit();
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
        let name = InstanceName {
            actor: "actor".into(),
            key: "key".into(),
        };
        let mut state = InstanceState::new(name, db, deadline, StoreLimits::default());
        state.mode = Mode::Action;
        (state, dir)
    }
}
