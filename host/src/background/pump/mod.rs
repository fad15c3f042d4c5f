//! The pump of one instance's queue: picks due events by the instance's
//! policy, runs `process` for each (up to the policy's concurrency per
//! group), records failures, answers waiting senders, and ends when the
//! queue has nothing due, leaving the queue mark for the next time.
//!
//! # Concurrent processing
//!
//! One wasm instance runs one call at a time, so concurrent `process`
//! calls run in separate wasm instances of the same actor instance: the
//! awake instance (the one actions use) takes one event at a time, and
//! *workers* (more wasm instances, each with its own connection to the
//! instance's database, started with `migrate` and `wake`) take the rest.
//!
//! Every call runs in its own SQLite transaction. SQLite (in WAL mode)
//! lets them read and compute at the same time but lets one write at a
//! time, and refuses to let a transaction write once another transaction
//! has committed since it began reading (`SQLITE_BUSY_SNAPSHOT`). Such a
//! call is rolled back whole and run again from the start, against the
//! new data. So concurrent calls of one instance are serializable: no
//! update is lost, and a call either commits all of its effects or none.
//! A guest cannot catch the refusal: the import traps.

mod pick;
mod process;
mod run;
mod timing;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rusqlite::Connection;
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;

use super::Background;
use crate::address::Address;
use crate::cell::Cell;
use crate::definition::ActorDefinition;
use crate::error::Error;
use crate::metrics::ActorMetrics;
use crate::presence::Lease;
use crate::storage::HostTables;
use crate::text::escaped;
use process::Done;

static NEXT_PUMP_ID: AtomicU64 = AtomicU64::new(1);

/// The host's handle on a running pump.
pub(crate) struct Pump {
    id: u64,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Default)]
struct Shared {
    kicked: AtomicBool,
    wake: Notify,
    last_error: Mutex<Option<String>>,
}

impl Pump {
    /// Starts the pump of `address`; it holds `lease` until it ends.
    pub(crate) fn start(
        work: Arc<Background>,
        def: Arc<ActorDefinition>,
        address: Address,
        lease: Lease,
    ) -> Pump {
        let id = NEXT_PUMP_ID.fetch_add(1, Ordering::Relaxed);
        let shared = Arc::new(Shared::default());
        let (stop, stopped) = watch::channel(false);
        let metrics = work.core.metrics.actor(&def.name).clone();
        let run = Run {
            id,
            metrics,
            depth_counted: None,
            work,
            def,
            address,
            shared: shared.clone(),
            tasks: JoinSet::new(),
            in_flight: HashMap::new(),
            main_busy: false,
            workers: Vec::new(),
            reader: None,
            _lease: lease,
        };
        let task = tokio::spawn(run.run(stopped));
        Pump {
            id,
            shared,
            stop,
            task,
        }
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// New work may have come: look again.
    pub(crate) fn kick(&self) {
        self.shared.kicked.store(true, Ordering::SeqCst);
        self.shared.wake.notify_one();
    }

    pub(crate) fn take_kick(&self) -> bool {
        self.shared.kicked.swap(false, Ordering::SeqCst)
    }

    /// The last error that kept the pump from picking events (a custom
    /// selector that failed, say).
    pub(crate) fn last_error(&self) -> Option<String> {
        self.shared.last_error.lock().unwrap().clone()
    }

    /// Stops the pump: calls in flight are dropped (rolled back; their
    /// events stay pending), workers are dropped, and this returns once
    /// every connection of the pump is closed.
    pub(crate) async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

struct Run {
    id: u64,
    /// The actor's metrics.
    metrics: Arc<ActorMetrics>,
    /// When the pump last counted the queue's pending events.
    depth_counted: Option<Instant>,
    work: Arc<Background>,
    def: Arc<ActorDefinition>,
    address: Address,
    shared: Arc<Shared>,
    tasks: JoinSet<Done>,
    /// Events being processed, with their group ("" for the default).
    in_flight: HashMap<i64, String>,
    main_busy: bool,
    /// Idle workers.
    workers: Vec<Cell>,
    /// A read-only connection that sees what is committed.
    reader: Option<Connection>,
    /// Returned when the pump and every connection of it are gone.
    _lease: Lease,
}

impl Run {
    fn actor(&self) -> &str {
        &self.address.actor
    }

    fn key(&self) -> &str {
        &self.address.key
    }

    fn reader(&self) -> &Connection {
        self.reader.as_ref().expect("opened before the loop")
    }

    fn storage(&self, e: rusqlite::Error) -> Error {
        Error::storage(self.actor(), self.key(), e.to_string())
    }

    fn marks_failed(&self, e: crate::storage::MarkError) -> Error {
        Error::storage(
            self.actor(),
            self.key(),
            format!("cannot record the queue mark: {e}"),
        )
    }

    fn set_error(&self, error: Option<String>) {
        *self.shared.last_error.lock().unwrap() = error;
    }

    /// Counts the pending events for the actor's queue depth, at most once
    /// per [`DEPTH_EVERY`] unless `now` (the pump starts or ends). A count
    /// reads every pending row, so a busy queue is not counted at every
    /// pick.
    fn count_depth(&mut self, now: bool) {
        let due = self
            .depth_counted
            .is_none_or(|at| at.elapsed() >= DEPTH_EVERY);
        let Some(reader) = &self.reader else { return };
        if !(now || due) {
            return;
        }
        match reader.queue().pending_count() {
            Ok(pending) => self.metrics.queue_depth(&self.address.key, pending),
            Err(e) => {
                tracing::debug!(actor = self.actor(), key = self.key(), error = %escaped(&e), "cannot count the queue");
            }
        }
        self.depth_counted = Some(Instant::now());
    }
}

/// How often a running pump counts its queue's pending events.
const DEPTH_EVERY: Duration = Duration::from_secs(1);
