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

mod awake;
mod batch;
mod calls;
mod import;
mod incoming;
mod pause;
mod queue;
mod savepoints;
mod transaction;
mod workflow;

pub(crate) use awake::{Awake, AwakeToken};
pub(crate) use batch::{CallJob, PendingCalls};
use calls::trap_error;
pub(crate) use incoming::{HttpAnswer, HttpRequest};
pub(crate) use queue::process_during;
pub(crate) use workflow::RunEnd;

use std::sync::Arc;
use std::time::Duration;

use wasmtime::{Engine, Store, StoreLimitsBuilder, UpdateDeadline};

use crate::address::Address;
use crate::bindings::Exports;
use crate::caller::InternalActions;
use crate::capability::http::{Hooks, Outbound};
use crate::clock::now_ms;
use crate::config::{MAX_TABLE_ELEMENTS, MAX_WASM_INSTANCES, MAX_WASM_TABLES};
use crate::deadline::{Deadline, DeadlineExceeded};
use crate::definition::ActorDefinition;
use crate::error::Error;
use crate::instance::commit::{CommitStage, Durable};
use crate::instance::output::failure_text;
use crate::instance::outside::OtherActors;
use crate::instance::{InstanceState, QueueLimits, is_busy};
use crate::metrics::ActorMetrics;
use crate::storage::{ClusterError, InstanceDb, InstanceStore, Marks};

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
    /// Create a new instance from this exported copy of a database (see
    /// `import.rs`), its background work paused with this reason if one
    /// is given (a fork); an existing one is an error.
    Import {
        image: &'a [u8],
        pause: Option<&'a str>,
    },
}

impl Origin<'_> {
    /// Whether it makes a new instance only: an existing one, asleep or
    /// awake, is [`Error::AlreadyExists`].
    pub(crate) fn only_new(&self) -> bool {
        matches!(self, Origin::MustBeNew(_) | Origin::Import { .. })
    }
}

/// Where an instance lives: its address and the store of its database
/// and marks, and what its imports reach beyond it.
pub(crate) struct Home<'a> {
    pub(crate) address: Address,
    pub(crate) store: &'a InstanceStore,
    /// Where its transactions end.
    pub(crate) commit_stage: CommitStage,
    /// Calls and sends to other instances.
    pub(crate) outside: Option<Arc<dyn OtherActors>>,
    /// Nothing the cell does may be kept (a deploy's check): every
    /// commit fails and rolls back.
    pub(crate) dry_run: bool,
    /// Where its outgoing HTTP requests go out (`None`: none may).
    pub(crate) outbound: Option<Arc<Outbound>>,
}

pub(crate) struct Cell {
    store: Store<InstanceState>,
    exports: Exports,
    marks: Arc<Marks>,
    call_timeout: Duration,
    /// Set while guest code runs. Still set when the next caller comes means
    /// the previous call's future was dropped mid-way.
    in_call: bool,
    /// The wasm instance is unusable (it trapped or was cancelled).
    broken: bool,
    /// The sync of the last commit's log, while the batch that waits for
    /// it runs (`synchronous = full`; see [`Cell::wait_until_durable`]).
    syncing: Option<Durable>,
    /// The start's transaction is still open, waiting for the first operation.
    starting: Option<Start>,
    /// The creation committed; the host has yet to index it.
    created: Option<i64>,
    /// A committed transaction appended to the queue; the host has yet to
    /// start its processing.
    queue_grew: bool,
    /// The creation started a workflow; the host has yet to drive it.
    workflow_started: bool,
    /// The version of the actor's definition it runs.
    version: u64,
    /// The actions clients may not call, once read from the component
    /// (see `calls.rs`).
    internal: Option<InternalActions>,
    awake: AwakeToken,
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
            commit_stage,
            outside,
            dry_run,
            outbound,
        } = home;
        let storage = |e: rusqlite::Error| storage_error(&name, e);
        let deadline = Deadline::default();
        let mut db = store
            .open_instance(&name, def.options.db_size_limit, deadline.clone())
            .map_err(storage)?;
        db.dry_run = dry_run;
        let marks = store.marks().clone();
        let created_at = db.created_at().map_err(storage)?;
        match (&origin, created_at) {
            (Origin::MustExist, None) => {
                return Err(Error::no_such_instance(&name.actor, &name.key));
            }
            (origin, Some(_)) if origin.only_new() => {
                return Err(Error::already_exists(&name.actor, &name.key));
            }
            _ => {}
        }
        let limits = store_limits(def.options.memory_limit);
        let mut state = InstanceState::new(name.clone(), db, deadline, limits);
        state.set_queue_limits(QueueLimits {
            max_pending: def.options.queue_max_pending,
            max_payload: def.options.queue_max_payload,
        });
        state.set_call_timeout(def.options.call_timeout);
        state.connect(commit_stage, outside);
        if let Some(outbound) = outbound {
            let hooks = Hooks::new(
                name.actor.clone(),
                &def.options,
                state.deadline().clone(),
                outbound,
                awake.metrics().clone(),
                state.http_context().sending.clone(),
            );
            state.allow_outgoing_http(Box::new(hooks), awake.metrics().clone());
        }
        let mut store = Store::new(engine, state);
        store.limiter(|s| s.limiter());
        store.epoch_deadline_callback(|cx| {
            if cx.data().deadline().passed() {
                Err(DeadlineExceeded.into())
            } else {
                // Let other instances' tasks run while this guest computes.
                Ok(UpdateDeadline::Yield(1))
            }
        });
        store.data().deadline().start(def.options.call_timeout);
        store.set_epoch_deadline(1);
        let instantiated = def.pre.instantiate_async(&mut store).await;
        store.data().deadline().clear();
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
            marks,
            call_timeout: def.options.call_timeout,
            in_call: false,
            syncing: None,
            broken: false,
            starting: None,
            created: None,
            queue_grew: false,
            workflow_started: false,
            version: def.version,
            internal: None,
            awake,
        };
        cell.db().begin().map_err(storage)?;
        let started = match (origin, created_at) {
            (Origin::CreateIfMissing(input) | Origin::MustBeNew(input), None) => {
                let now = now_ms();
                cell.starting = Some(Start::Created(now));
                let hooks = async {
                    cell.db().create_schema().map_err(storage)?;
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
            (Origin::Import { image, pause }, None) => {
                let now = now_ms();
                cell.starting = Some(Start::Created(now));
                let hooks = async {
                    cell.db().create_schema().map_err(storage)?;
                    cell.import(image, pause, now)?;
                    cell.hook("migrate").await?;
                    cell.hook("wake").await?;
                    cell.snapshot_policy().await?;
                    cell.note_workflow().map_err(storage)?;
                    cell.db()
                        .record_creation(&name.actor, &name.key, now)
                        .map_err(storage)
                };
                hooks.await
            }
            _ => {
                cell.starting = Some(Start::Woken);
                let hooks = async {
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
        self.store.data().db()
    }

    /// The metrics of the cell's actor.
    pub(crate) fn metrics(&self) -> &Arc<ActorMetrics> {
        self.awake.metrics()
    }

    fn name(&self) -> &Address {
        self.store.data().name()
    }

    fn storage_error(&self, e: rusqlite::Error) -> Error {
        storage_error(self.name(), e)
    }

    /// A commit the cluster did not take.
    fn not_replicated(&self, e: ClusterError) -> Error {
        Error::NotReplicated {
            actor: self.name().actor.to_string(),
            key: self.name().key.to_string(),
            message: match e {
                ClusterError::Fenced | ClusterError::NotMember => {
                    format!("{e}; nothing of the call was kept")
                }
                ClusterError::Unavailable(_) => {
                    format!("{e}; the call may or may not have been kept")
                }
            },
        }
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
        self.store.data().has_queue()
    }

    /// Whether this cell must be replaced before its next use (in a
    /// cluster, also when the lease it was opened under is gone).
    pub(crate) fn is_broken(&self) -> bool {
        self.broken || self.in_call || self.db().backend.is_stale()
    }

    /// Whether the creation of this instance was rolled back.
    pub(crate) fn creation_failed(&self) -> bool {
        self.broken && matches!(self.starting, Some(Start::Created(_)))
    }

    /// The creation time, once, after the creation committed.
    pub(crate) fn take_created(&mut self) -> Option<i64> {
        self.created.take()
    }

    /// Whether this cell runs an older definition than `def`, the
    /// actor's running one (a deploy came since it started).
    pub(crate) fn is_outdated(&self, def: &ActorDefinition) -> bool {
        self.version != def.version
    }

    /// Whether this instance has a workflow.
    pub(crate) fn is_workflow(&self) -> bool {
        self.store.data().is_workflow()
    }

    /// Whether a transaction committed since the last ask appended to the
    /// queue.
    pub(crate) fn take_queue_grew(&mut self) -> bool {
        std::mem::take(&mut self.queue_grew)
    }
}

impl Drop for Cell {
    fn drop(&mut self) {
        // A cell dropped mid-call (its caller went away) or mid-creation
        // must not leave a transaction open on the connection.
        self.store.data().db().rollback();
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

fn storage_error(name: &Address, e: rusqlite::Error) -> Error {
    if is_busy(&e) {
        return Error::conflict(&name.actor, &name.key);
    }
    Error::storage(&name.actor, &name.key, e.to_string())
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
