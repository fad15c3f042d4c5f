//! The host: actor definitions, the directory of live instances, and the
//! public API that the CLI, the HTTP server and embedders call.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use anyhow::{Context, Result};
use wasmtime::Engine;

use crate::address::Address;
use crate::capability;
use crate::cell::{AwakeToken, Cell, Home, Origin};
use crate::config::{
    HostConfig, MAX_ARGS_BYTES, SCHEDULE_RETRY_AFTER_ERROR, max_connected_instances,
};
use crate::connections::{Connection, Hub, Limits};
use crate::definition::{self, ActorDefinition};
use crate::directory::{Directory, QueuePlace, SlotState};
use crate::engine::{self, EpochTicker};
use crate::error::Error;
use crate::inspect::{self, Inspection};
use crate::instance::InstanceState;
use crate::instance::outside::{OtherActors, Pending};
use crate::manifest::ActorSpec;
use crate::presence::{Lease, Presence};
use crate::queue::pump::Pump;
use crate::queue::waiters::Waiters;
use crate::storage::index::Index;
use crate::storage::instance_db::now_ms;
use crate::storage::{DataDir, open_dir_creating, validate_actor_name, validate_key};
use wasmtime::component::Linker;

/// A running Burrow host. Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct Host {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    engine: Engine,
    config: HostConfig,
    data: DataDir,
    pub(crate) index: Arc<Index>,
    actors: HashMap<String, Arc<ActorDefinition>>,
    directory: Directory,
    awake: Arc<AtomicUsize>,
    shutting_down: AtomicBool,
    /// The queue pump of every instance whose queue is being processed.
    pumps: Mutex<HashMap<Address, Pump>>,
    pub(crate) waiters: Waiters,
    /// The workflows being driven.
    pub(crate) drivers: crate::workflow::Drivers,
    /// Instances whose due schedules are being run.
    schedule_runs: Mutex<HashSet<Address>>,
    /// Client connections and their events.
    pub(crate) hub: Arc<Hub>,
    /// The background work on each instance, which destroy waits for.
    pub(crate) presence: Presence,
    /// What guest code reaches through the instance layer.
    outside: Arc<dyn OtherActors>,
    _ticker: EpochTicker,
}

/// The host as guest code sees it: calls and sends to other instances,
/// for as long as the host runs.
struct GuestLink(Weak<Inner>);

impl GuestLink {
    fn host(&self) -> Result<Host, Error> {
        let inner = self.0.upgrade().ok_or(Error::ShuttingDown)?;
        Ok(Host { inner })
    }
}

impl OtherActors for GuestLink {
    fn call<'a>(
        &'a self,
        chain: Vec<Address>,
        actor: &'a str,
        key: &'a str,
        action: &'a str,
        args: &'a str,
    ) -> Pending<'a, String> {
        Box::pin(async move {
            self.host()?
                .call_on_chain(chain, actor, key, action, args)
                .await
        })
    }

    fn send<'a>(
        &'a self,
        actor: &'a str,
        key: &'a str,
        event_type: &'a str,
        payload: &'a str,
        priority: i32,
        group: Option<String>,
    ) -> Pending<'a, i64> {
        Box::pin(async move {
            let options = crate::SendOptions {
                priority,
                group,
                wait: None,
            };
            let outcome = self
                .host()?
                .send(actor, key, event_type, payload, options)
                .await?;
            Ok(outcome.id())
        })
    }
}

impl Host {
    /// Starts a host on `config.data_dir` with the given actors. Fails if
    /// another host holds the data directory, or if any component cannot
    /// be loaded (the error names the actor, the file and the reason).
    ///
    /// Must be called inside a tokio runtime: the host keeps a task that
    /// puts idle instances to sleep.
    pub async fn start(config: HostConfig, actors: &[ActorSpec]) -> Result<Host> {
        // Before the first connection of this process opens.
        crate::storage::heap::install();
        let data = DataDir::open(&config.data_dir, config.synchronous)?;
        let engine = engine::build(config.max_awake, config.pooling)?;
        let linker = capability::linker(&engine)?;
        let cache_dir = data.cache_dir(config.cache_dir.as_deref())?;
        let definitions = load_definitions(&engine, &linker, &cache_dir, actors).await?;
        for name in definitions.keys() {
            data.prepare_actor(name)?;
        }
        let index = Index::open_with(&data.root().join("host.sqlite"), config.synchronous)
            .with_context(|| format!("cannot open {}/host.sqlite", data.root().display()))?;
        data.sync_root()?;
        let index = Arc::new(index);
        let inner = Arc::new_cyclic(|inner| Inner {
            outside: Arc::new(GuestLink(inner.clone())),
            _ticker: EpochTicker::start(&engine),
            engine,
            config,
            data,
            index,
            actors: definitions,
            directory: Directory::default(),
            awake: Arc::new(AtomicUsize::new(0)),
            shutting_down: AtomicBool::new(false),
            pumps: Mutex::new(HashMap::new()),
            waiters: Waiters::default(),
            drivers: Default::default(),
            schedule_runs: Mutex::new(HashSet::new()),
            hub: Arc::new(Hub::default()),
            presence: Presence::default(),
        });
        tokio::spawn(reap_idle(Arc::downgrade(&inner)));
        // Also resumes, right away, the queues left pending by the last run.
        tokio::spawn(wake_due_queues(Arc::downgrade(&inner)));
        Ok(Host { inner })
    }

    /// Names of the defined actors, sorted.
    pub fn actors(&self) -> Vec<String> {
        let mut names: Vec<_> = self.inner.actors.keys().cloned().collect();
        names.sort();
        names
    }

    /// The data directory.
    pub fn data_dir(&self) -> &std::path::Path {
        self.inner.data.root()
    }

    /// Instances awake right now.
    pub fn awake_count(&self) -> usize {
        self.inner.awake.load(Ordering::Relaxed)
    }

    /// Calls `action` on the instance (`actor`, `key`) with `args`, a JSON
    /// array, and returns the JSON result. The first call creates the
    /// instance (with a `null` create input).
    pub async fn call(
        &self,
        actor: &str,
        key: &str,
        action: &str,
        args: &str,
    ) -> Result<String, Error> {
        self.call_on_chain(Vec::new(), actor, key, action, args)
            .await
    }

    /// Calls `action` for another instance's guest code: `chain` holds the
    /// instances waiting on this call, outermost first.
    pub(crate) async fn call_on_chain(
        &self,
        chain: Vec<Address>,
        actor: &str,
        key: &str,
        action: &str,
        args: &str,
    ) -> Result<String, Error> {
        if args.len() > MAX_ARGS_BYTES {
            return Err(Error::InvalidArguments {
                actor: actor.into(),
                action: action.into(),
                message: format!(
                    "the arguments are {} bytes; the limit is {MAX_ARGS_BYTES} bytes",
                    args.len()
                ),
            });
        }
        ConflictRetry::run(self.call_timeout(actor), || {
            self.with_cell(actor, key, Origin::CreateIfMissing("null"), async |cell| {
                cell.action(action, args, &chain).await
            })
        })
        .await
    }

    /// Creates the instance (`actor`, `key`) with `input` (JSON) for its
    /// create hook. Fails if it already exists.
    pub async fn create(&self, actor: &str, key: &str, input: &str) -> Result<(), Error> {
        if serde_json::from_str::<serde_json::Value>(input).is_err() {
            return Err(Error::InvalidArguments {
                actor: actor.into(),
                action: "create".into(),
                message: "the create input is not valid JSON".into(),
            });
        }
        ConflictRetry::run(self.call_timeout(actor), || {
            self.with_cell(actor, key, Origin::MustBeNew(input), async |cell| {
                cell.commit_creation()
            })
        })
        .await
    }

    /// Runs the instance's destroy hook and deletes its data.
    ///
    /// In this order: the address is closed to background work (no queue
    /// pump, workflow driver, schedule run or connection starts for it);
    /// the running ones are stopped and awaited, so that no connection to
    /// the old files is left; then, holding the instance's slot, the hook
    /// runs and the files and the index row are deleted. When this
    /// returns, nothing of the old instance runs, and the next call starts
    /// a new, empty instance.
    pub async fn destroy(&self, actor: &str, key: &str) -> Result<(), Error> {
        let def = self.resolve(actor, key)?;
        let no_such_instance = || Error::NoSuchInstance {
            actor: actor.into(),
            key: key.into(),
        };
        if !self.inner.data.instance_exists(actor, key) {
            return Err(no_such_instance());
        }
        let address = Address {
            actor: def.name.clone(),
            key: key.into(),
        };
        let closed = self
            .inner
            .presence
            .close(&address, async || {
                self.stop_pump(&address).await;
                self.inner.hub.close(&address);
            })
            .await;
        // Connections whose connect hook ran meanwhile.
        self.inner.hub.close(&address);
        loop {
            let slot = self
                .inner
                .directory
                .slot(&def.name, key, def.options.sleep_timeout);
            let address = &slot.address;
            let mut state = slot.state.lock().await;
            if matches!(*state, SlotState::Retired) {
                continue;
            }
            // Destroyed by another destroy meanwhile.
            if !self.inner.data.instance_exists(actor, key) {
                return Err(no_such_instance());
            }
            let cell = match std::mem::replace(&mut *state, SlotState::Retired) {
                SlotState::Awake(cell) if !cell.is_broken() => Some(cell),
                _ => None,
            };
            let cell = match cell {
                Some(cell) => Some(cell),
                None => match self.start_cell(&def, address, Origin::MustExist).await {
                    Ok(cell) => Some(Box::new(cell)),
                    Err(Error::NoSuchInstance { .. }) => None,
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot wake the instance for its destroy hook");
                        None
                    }
                },
            };
            if let Some(cell) = cell {
                cell.destroy().await;
            }
            // Delete while the slot is still in the directory and locked:
            // a caller waiting for this instance starts a new one only after
            // the old files are gone.
            let removed = self
                .inner
                .data
                .remove_instance(actor, key)
                .and_then(|()| Ok(self.inner.index.remove(actor, key)?));
            self.inner.waiters.forget_instance(actor, key);
            // Open to background work again before a caller can make a
            // new instance: its first append starts a pump at once.
            drop(closed);
            self.inner.directory.remove(&slot);
            return removed.map_err(|e| Error::Storage {
                actor: actor.into(),
                key: key.into(),
                message: format!("{e:#}"),
            });
        }
    }

    /// State and tables of the instance, read from a separate read-only
    /// connection (the instance is not woken). The actor's tables are read
    /// under the bounds of guest SQL, within the actor's `call_timeout`.
    /// Blocks: async code calls it on a blocking thread (the HTTP API does).
    pub fn inspect(&self, actor: &str, key: &str) -> Result<Inspection, Error> {
        let def = self.resolve(actor, key)?;
        inspect::inspect(self.inner.data.root(), actor, key, def.options.call_timeout)
    }

    /// The instance's state value as JSON (`null` if never set), read from a
    /// separate read-only connection. Blocks, like [`Host::inspect`].
    pub fn state(&self, actor: &str, key: &str) -> Result<serde_json::Value, Error> {
        self.resolve(actor, key)?;
        inspect::state(self.inner.data.root(), actor, key)
    }

    /// Keys of `actor`'s instances.
    pub fn keys(&self, actor: &str) -> Result<Vec<String>, Error> {
        validate_actor_name(actor)?;
        if !self.inner.actors.contains_key(actor) {
            return Err(Error::UnknownActor(actor.into()));
        }
        self.inner.index.keys(actor).map_err(|e| Error::Storage {
            actor: actor.into(),
            key: String::new(),
            message: e.to_string(),
        })
    }

    /// Puts every awake instance to sleep (running its sleep hook) and
    /// refuses new calls. In-flight calls finish first.
    pub async fn shutdown(&self) {
        self.inner.shutting_down.store(true, Ordering::Relaxed);
        self.inner.hub.close_all();
        let pumps: Vec<Pump> = self
            .inner
            .pumps
            .lock()
            .unwrap()
            .drain()
            .map(|(_, p)| p)
            .collect();
        for pump in pumps {
            pump.stop().await;
        }
        for slot in self.inner.directory.all() {
            let mut state = slot.state.lock().await;
            if let SlotState::Awake(cell) = std::mem::replace(&mut *state, SlotState::Retired) {
                cell.sleep().await;
            }
            self.inner.directory.remove(&slot);
        }
    }

    pub(crate) fn resolve(&self, actor: &str, key: &str) -> Result<Arc<ActorDefinition>, Error> {
        if self.inner.shutting_down.load(Ordering::Relaxed) {
            return Err(Error::ShuttingDown);
        }
        validate_actor_name(actor)?;
        validate_key(key)?;
        let def = self
            .inner
            .actors
            .get(actor)
            .ok_or_else(|| Error::UnknownActor(actor.into()))?
            .clone();
        Ok(def)
    }

    pub(crate) async fn start_cell(
        &self,
        def: &ActorDefinition,
        address: &Address,
        origin: Origin<'_>,
    ) -> Result<Cell, Error> {
        let name = Address {
            actor: address.actor.clone(),
            key: address.key.clone(),
        };
        let path = self.inner.data.instance_path(&address.actor, &address.key);
        let existed = path.exists();
        if !existed {
            // A destroy cut short (a crash between its deletions) can leave
            // the WAL of the old instance: it must not meet the new one.
            let _ = self
                .inner
                .data
                .remove_instance(&address.actor, &address.key);
        }
        let token = AwakeToken::new(&self.inner.awake);
        let home = Home {
            name,
            path: &path,
            synchronous: self.inner.config.synchronous,
            index: self.inner.index.clone(),
            hub: self.inner.hub.clone(),
            outside: self.inner.outside.clone(),
        };
        let result = Cell::start(&self.inner.engine, def, home, origin, token).await;
        if result.is_err() && !existed {
            // Leave nothing behind for an instance that never came to be.
            let _ = self
                .inner
                .data
                .remove_instance(&address.actor, &address.key);
        }
        result
    }

    /// Runs `op` on the awake cell of (`actor`, `key`), waking or creating
    /// the instance first as `origin` allows.
    pub(crate) async fn with_cell<T>(
        &self,
        actor: &str,
        key: &str,
        origin: Origin<'_>,
        op: impl AsyncFnOnce(&mut Cell) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let def = self.resolve(actor, key)?;
        loop {
            let slot = self
                .inner
                .directory
                .slot(&def.name, key, def.options.sleep_timeout);
            let address = &slot.address;
            let _place = QueuePlace::enter(&slot)?;
            let mut state = slot.state.lock().await;
            match &*state {
                // Retired by shutdown: no new cell may start after it.
                SlotState::Retired if self.inner.shutting_down.load(Ordering::Relaxed) => {
                    return Err(Error::ShuttingDown);
                }
                SlotState::Retired => continue,
                SlotState::Awake(cell) if cell.is_broken() => *state = SlotState::Asleep,
                _ => {}
            }
            if let SlotState::Asleep = *state {
                self.make_room(address).await?;
                let cell = self.start_cell(&def, address, origin).await?;
                *state = SlotState::Awake(Box::new(cell));
            } else if let Origin::MustBeNew(_) = origin {
                return Err(Error::AlreadyExists {
                    actor: actor.into(),
                    key: key.into(),
                });
            }
            let SlotState::Awake(cell) = &mut *state else {
                unreachable!("the slot was just woken")
            };
            let result = op(cell).await;
            if let Some(created_at) = cell.take_created() {
                if let Err(e) = self.inner.data.sync_created(actor) {
                    tracing::warn!(actor, key, error = %format!("{e:#}"), "cannot sync the new instance's directory");
                }
                if let Err(e) = self.inner.index.insert(actor, key, created_at) {
                    tracing::warn!(actor, key, error = %e, "cannot index the new instance");
                }
            }
            if cell.take_queue_grew() {
                if cell.is_workflow() {
                    self.drive_workflow(address.clone());
                } else {
                    self.kick(&def, address);
                }
            }
            if cell.take_workflow_started() {
                self.drive_workflow(address.clone());
            }
            if cell.is_broken() {
                let failed_creation = cell.creation_failed();
                *state = SlotState::Asleep;
                if failed_creation {
                    let _ = self.inner.data.remove_instance(actor, key);
                }
            }
            slot.touch();
            return result;
        }
    }

    /// Puts the least recently used idle instance to sleep if the host is
    /// at its limit of awake instances.
    async fn make_room(&self, except: &Address) -> Result<(), Error> {
        let max = self.inner.config.max_awake;
        if self.awake_count() < max {
            return Ok(());
        }
        for slot in self.inner.directory.eviction_candidates(except) {
            // An instance with connections stays awake.
            if self.inner.hub.is_connected(&slot.address) {
                continue;
            }
            let Ok(mut state) = slot.state.try_lock() else {
                continue;
            };
            match std::mem::replace(&mut *state, SlotState::Asleep) {
                SlotState::Awake(cell) => {
                    cell.sleep().await;
                    if self.awake_count() < max {
                        return Ok(());
                    }
                }
                other => *state = other,
            }
        }
        Err(Error::Overloaded(format!(
            "all {max} awake instances are busy; raise --max-awake or try again"
        )))
    }
}

/// Puts idle instances to sleep and forgets idle asleep slots.
async fn reap_idle(inner: Weak<Inner>) {
    loop {
        let interval = match inner.upgrade() {
            Some(inner) => reap_interval(&inner),
            None => return,
        };
        tokio::time::sleep(interval).await;
        let Some(inner) = inner.upgrade() else { return };
        if inner.shutting_down.load(Ordering::Relaxed) {
            return;
        }
        for slot in inner.directory.idle() {
            let address = &slot.address;
            // An instance with connections stays awake.
            if inner.hub.is_connected(address) {
                continue;
            }
            let Ok(mut state) = slot.state.try_lock() else {
                continue;
            };
            if slot.idle_for() < slot.sleep_timeout {
                continue;
            }
            if let SlotState::Awake(cell) = std::mem::replace(&mut *state, SlotState::Retired) {
                tracing::debug!(actor = %address.actor, key = %address.key, "instance goes to sleep");
                cell.sleep().await;
            }
            inner.directory.remove(&slot);
        }
    }
}

/// First pause before a call that met concurrent processing runs again.
const CONFLICT_PAUSE: Duration = Duration::from_millis(1);
/// Longest pause between two runs of a call that keeps meeting concurrent
/// processing.
const MAX_CONFLICT_PAUSE: Duration = Duration::from_millis(50);
/// Runs a call again after a conflict, with growing pauses, until its
/// timeout has passed.
pub(crate) struct ConflictRetry {
    begun: std::time::Instant,
    timeout: Duration,
    pause: Duration,
}

impl ConflictRetry {
    fn new(timeout: Duration) -> ConflictRetry {
        ConflictRetry {
            begun: std::time::Instant::now(),
            timeout,
            pause: CONFLICT_PAUSE,
        }
    }

    /// Runs `attempt` until it does not meet a conflict, or the time is up.
    ///
    /// A call that meets concurrent queue processing of the same instance
    /// ([`Error::Conflict`]) was rolled back whole; it is run again, until
    /// the actor's call timeout has passed.
    pub(crate) async fn run<T, F: Future<Output = Result<T, Error>>>(
        timeout: Duration,
        mut attempt: impl FnMut() -> F,
    ) -> Result<T, Error> {
        let mut retry = ConflictRetry::new(timeout);
        loop {
            match attempt().await {
                Err(e @ Error::Conflict { .. }) => retry.pause(e).await?,
                other => return other,
            }
        }
    }

    /// Pauses before the next run, or gives `error` back when the time is up.
    async fn pause(&mut self, error: Error) -> Result<(), Error> {
        if self.begun.elapsed() >= self.timeout {
            return Err(error);
        }
        tokio::time::sleep(self.pause).await;
        self.pause = (self.pause * 2).min(MAX_CONFLICT_PAUSE);
        Ok(())
    }
}

/// How often the host looks for queues whose next event has come due.
const QUEUE_TIMER_INTERVAL: Duration = Duration::from_millis(100);

/// How many instances of each kind (queues, workflows, schedules) the
/// timer starts at one turn: half of `max_awake`, and at least one, so
/// that background work makes progress at any `max_awake` while callers
/// keep room to wake instances.
pub(crate) fn timer_budget(max_awake: usize) -> usize {
    (max_awake / 2).max(1)
}

impl Host {
    /// Makes sure the queue of `address` is being processed: wakes its
    /// pump, or starts one.
    pub(crate) fn kick(&self, def: &Arc<ActorDefinition>, address: &Address) {
        if self.inner.shutting_down.load(Ordering::Relaxed) {
            return;
        }
        let mut pumps = self.inner.pumps.lock().unwrap();
        if let Some(pump) = pumps.get(address) {
            pump.kick();
            return;
        }
        // None while the instance is destroyed: its queue goes with it.
        let Some(lease) = self.inner.presence.lease(address) else {
            return;
        };
        let pump = Pump::start(self.clone(), def.clone(), address.clone(), lease);
        pumps.insert(address.clone(), pump);
    }

    /// Called by a pump that found nothing more to do: it may end unless
    /// it was kicked since it last looked. Returns whether it may end.
    pub(crate) fn pump_may_end(&self, address: &Address, pump_id: u64) -> bool {
        let mut pumps = self.inner.pumps.lock().unwrap();
        match pumps.get(address) {
            Some(pump) if pump.id() == pump_id => {
                if pump.take_kick() {
                    return false;
                }
                pumps.remove(address);
                true
            }
            // Stopped (destroy, shutdown): end.
            _ => true,
        }
    }

    /// Called by a pump that ends whatever happened since it last looked
    /// (its instance is gone, or it failed and left a mark to retry by).
    pub(crate) fn pump_ended(&self, address: &Address, pump_id: u64) {
        let mut pumps = self.inner.pumps.lock().unwrap();
        if pumps.get(address).is_some_and(|p| p.id() == pump_id) {
            pumps.remove(address);
        }
    }

    async fn stop_pump(&self, address: &Address) {
        let pump = self.inner.pumps.lock().unwrap().remove(address);
        if let Some(pump) = pump {
            pump.stop().await;
        }
    }

    pub(crate) fn instance_path(&self, address: &Address) -> std::path::PathBuf {
        self.inner.data.instance_path(&address.actor, &address.key)
    }

    pub(crate) fn pump_error(&self, address: &Address) -> Option<String> {
        self.inner
            .pumps
            .lock()
            .unwrap()
            .get(address)
            .and_then(Pump::last_error)
    }

    /// The call timeout of `actor` (the default for an unknown actor,
    /// which fails anyway).
    pub(crate) fn call_timeout(&self, actor: &str) -> Duration {
        self.inner
            .actors
            .get(actor)
            .map_or(crate::config::DEFAULT_CALL_TIMEOUT, |d| {
                d.options.call_timeout
            })
    }

    pub(crate) fn is_shutting_down(&self) -> bool {
        self.inner.shutting_down.load(Ordering::Relaxed)
    }

    pub(crate) fn max_awake(&self) -> usize {
        self.inner.config.max_awake
    }

    pub(crate) fn definition(&self, actor: &str) -> Option<Arc<ActorDefinition>> {
        self.inner.actors.get(actor).cloned()
    }
}

/// Starts the pumps of queues whose next event has come due, the drivers
/// of workflows whose wait is over, and the runs of due schedules: at
/// start (what a previous run left), and after retry backoffs and sleeps.
///
/// At every turn it starts, of each kind, up to [`timer_budget`] of the
/// instances due longest, leaving out those whose work of that kind is
/// running already and those of actors not in the manifest (their marks
/// wait for the actor to come back). Whatever else runs, each due
/// instance thus gets its turn in order of its due time; a run that
/// cannot start or fails moves its mark later, so it holds nobody back.
async fn wake_due_queues(inner: Weak<Inner>) {
    loop {
        let Some(strong) = inner.upgrade() else {
            return;
        };
        if strong.shutting_down.load(Ordering::Relaxed) {
            return;
        }
        let host = Host { inner: strong };
        let budget = timer_budget(host.max_awake());
        let actors = host.actors();
        let now = now_ms();
        let index = &host.inner.index;
        let running: HashSet<Address> = host.inner.pumps.lock().unwrap().keys().cloned().collect();
        let due = index.due(now, &actors, budget + running.len());
        for address in host.due_addresses(due, &running, budget, "queue") {
            let def = host
                .definition(&address.actor)
                .expect("defined actors only");
            host.kick(&def, &address);
        }
        let running = host.inner.drivers.running();
        let due = index.due_workflows(now, &actors, budget + running.len());
        for address in host.due_addresses(due, &running, budget, "workflow") {
            host.drive_workflow(address);
        }
        let running = host.inner.schedule_runs.lock().unwrap().clone();
        let due = index.due_schedules(now, &actors, budget + running.len());
        for address in host.due_addresses(due, &running, budget, "schedule") {
            host.run_schedules(address);
        }
        drop(host);
        tokio::time::sleep(QUEUE_TIMER_INTERVAL).await;
    }
}

impl Host {
    /// The first `budget` of `due` (as the index gave them, earliest
    /// first) that are not `running`.
    fn due_addresses(
        &self,
        due: rusqlite::Result<Vec<(String, String)>>,
        running: &HashSet<Address>,
        budget: usize,
        kind: &str,
    ) -> Vec<Address> {
        let due = match due {
            Ok(due) => due,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the {kind} marks");
                return Vec::new();
            }
        };
        due.into_iter()
            .filter_map(|(actor, key)| {
                let def = self.definition(&actor)?;
                Some(Address {
                    actor: def.name.clone(),
                    key: key.into(),
                })
            })
            .filter(|address| !running.contains(address))
            .take(budget)
            .collect()
    }
}

/// Compiles every actor's component into the compile cache of `config` and
/// checks it against the WIT world, without starting a host: no lock is
/// taken, so a server may be running on the same data directory.
pub async fn check_actors(config: &HostConfig, actors: &[ActorSpec]) -> Result<()> {
    let engine = engine::build(config.max_awake, config.pooling)?;
    let linker = capability::linker(&engine)?;
    let cache = config
        .cache_dir
        .clone()
        .unwrap_or_else(|| config.data_dir.join("cache"));
    let cache_dir = open_dir_creating(&cache)?;
    load_definitions(&engine, &linker, &cache_dir, actors).await?;
    Ok(())
}

async fn load_definitions(
    engine: &Engine,
    linker: &Linker<InstanceState>,
    cache_dir: &cap_std::fs::Dir,
    actors: &[ActorSpec],
) -> Result<HashMap<String, Arc<ActorDefinition>>> {
    let mut definitions = HashMap::new();
    for spec in actors {
        validate_actor_name(&spec.name)?;
        let engine = engine.clone();
        let linker = linker.clone();
        let cache_dir = cache_dir.try_clone()?;
        let spec = spec.clone();
        // Compiling is CPU-bound: keep it off the async workers.
        let def = tokio::task::spawn_blocking(move || {
            definition::load(&engine, &linker, &cache_dir, &spec)
        })
        .await??;
        definitions.insert(def.name.to_string(), Arc::new(def));
    }
    Ok(definitions)
}

fn reap_interval(inner: &Inner) -> Duration {
    let shortest = inner
        .actors
        .values()
        .map(|d| d.options.sleep_timeout)
        .min()
        .unwrap_or(Duration::from_secs(1));
    (shortest / 4).clamp(Duration::from_millis(10), Duration::from_secs(1))
}

/// Most due schedules run in one turn of an instance's slot; other callers
/// get their turn between batches.
const SCHEDULE_BATCH: usize = 16;

impl Host {
    /// Runs the due schedules of `address` in a task of their own, unless
    /// that task is running already.
    fn run_schedules(&self, address: Address) {
        let Some(lease) = self.inner.presence.lease(&address) else {
            return;
        };
        if !self
            .inner
            .schedule_runs
            .lock()
            .unwrap()
            .insert(address.clone())
        {
            return;
        }
        let host = self.clone();
        tokio::spawn(async move {
            host.run_due_schedules(&address, &lease).await;
            host.inner.schedule_runs.lock().unwrap().remove(&address);
            drop(lease);
        });
    }

    async fn run_due_schedules(&self, address: &Address, lease: &Lease) {
        let (actor, key) = (&*address.actor, &*address.key);
        loop {
            if lease.is_closing() {
                return;
            }
            let ran = self
                .with_cell(actor, key, Origin::MustExist, async |cell| {
                    cell.run_due_schedules(SCHEDULE_BATCH).await
                })
                .await;
            match ran {
                Ok(true) => continue,
                Ok(false) => return,
                Err(Error::NoSuchInstance { .. }) => {
                    // Destroyed meanwhile: its mark goes with it.
                    let clear = self
                        .inner
                        .index
                        .set_schedule_mark_from(actor, key, || Ok::<_, ()>(None));
                    if let Err(e) = clear {
                        tracing::warn!(actor, key, error = %e, "cannot clear the schedule mark");
                    }
                    return;
                }
                // Met a call of the instance: the timer tries again.
                Err(Error::Conflict { .. }) => return,
                // Tried again later, not at every turn of the timer: the
                // instance does not hold the front of the due list.
                Err(e) => {
                    tracing::warn!(actor, key, error = %e, "cannot run the due schedules; they are tried again later");
                    let at = now_ms() + SCHEDULE_RETRY_AFTER_ERROR.as_millis() as i64;
                    let later = self
                        .inner
                        .index
                        .set_schedule_mark_from(actor, key, || Ok::<_, ()>(Some(at)));
                    if let Err(e) = later {
                        tracing::warn!(actor, key, error = %e, "cannot move the schedule mark");
                    }
                    return;
                }
            }
        }
    }

    /// Opens a connection to (`actor`, `key`) with `params` (JSON text):
    /// wakes or creates the instance and runs its connect hook, which may
    /// refuse. The connection receives the instance's events until it is
    /// dropped; then call [`Host::disconnect`].
    pub(crate) async fn connect(
        &self,
        actor: &str,
        key: &str,
        params: &str,
    ) -> Result<Connection, Error> {
        let def = self.resolve(actor, key)?;
        if params.len() > MAX_ARGS_BYTES
            || serde_json::from_str::<serde::de::IgnoredAny>(params).is_err()
        {
            return Err(Error::InvalidArguments {
                actor: actor.into(),
                action: "connect".into(),
                message: format!(
                    "the connection parameters must be JSON of at most {MAX_ARGS_BYTES} bytes"
                ),
            });
        }
        let address = Address {
            actor: def.name.clone(),
            key: key.into(),
        };
        // Registered first: the instance stays awake from here, and the
        // connect hook's own events reach the new connection.
        let limits = Limits {
            per_instance: def.options.max_connections,
            per_host: self.inner.config.max_connections,
            instances: max_connected_instances(self.inner.config.max_awake),
        };
        let connection = self.inner.hub.connect(&address, limits)?;
        let id = connection.id;
        ConflictRetry::run(def.options.call_timeout, || async {
            // While the instance is destroyed, wait: the connection is to
            // the instance that comes after.
            let Some(_lease) = self.inner.presence.lease(&address) else {
                return Err(Error::Conflict {
                    actor: actor.into(),
                    key: key.into(),
                });
            };
            self.with_cell(actor, key, Origin::CreateIfMissing("null"), async |cell| {
                cell.connect(id, params).await
            })
            .await
        })
        .await?;
        Ok(connection)
    }

    /// Unregisters `connection` and runs its disconnect hook, unless the
    /// instance it was made to is gone: being destroyed, or destroyed and
    /// followed by a new instance at the same address, whose hook must not
    /// hear of connections it never accepted.
    pub(crate) async fn disconnect(
        &self,
        actor: &str,
        key: &str,
        connection: Connection,
    ) -> Result<(), Error> {
        let id = connection.id;
        let def = self.resolve(actor, key)?;
        let address = Address {
            actor: def.name.clone(),
            key: key.into(),
        };
        // The instance is being destroyed: the hook goes with it.
        let Some(_lease) = self.inner.presence.lease(&address) else {
            return Ok(());
        };
        // Checked under the lease, so no destroy can come in between.
        let current = connection.is_current();
        drop(connection);
        if !current {
            return Ok(());
        }
        ConflictRetry::run(self.call_timeout(actor), || {
            self.with_cell(actor, key, Origin::MustExist, async |cell| {
                cell.disconnect(id).await
            })
        })
        .await
    }

    /// Connections open right now.
    pub fn connections(&self) -> usize {
        self.inner.hub.count()
    }

    /// Closes every client connection (the server is shutting down).
    pub(crate) fn close_connections(&self) {
        self.inner.hub.close_all();
    }
}
