//! The runtime core: the actors' definitions, the data directory and its
//! index, the directory of live instances and the means to run an
//! operation in one of them ([`Core::with_cell`]), making room, putting
//! idle instances to sleep, and retrying calls that met a conflict.
//!
//! The core stands below background work and the public host. What it
//! must ask of them goes through traits they implement: [`Wakeups`] (a
//! commit appended to a queue or started a workflow) and
//! [`OtherActors`] (guest code calls another instance).

mod cells;
mod deploy;
mod reaper;
mod retry;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, RwLock, Weak};
use std::time::Duration;

use anyhow::Result;
use wasmtime::Engine;
use wasmtime::component::Linker;

use crate::address::{Address, ByActor};
use crate::capability;
use crate::config::HostConfig;
use crate::connections::Hub;
use crate::definition::{self, ActorDefinition};
use crate::directory::Directory;
use crate::engine::{self, EpochTicker};
use crate::error::Error;
use crate::instance::InstanceState;
use crate::instance::commit::CommitStage;
use crate::instance::outside::OtherActors;
use crate::manifest::ActorSpec;
use crate::metrics::Metrics;
use crate::presence::Presence;
use crate::storage::cluster::Cluster;
use crate::storage::store::InstanceStore;
use crate::storage::{DataDir, validate_actor_name, validate_key};

pub use deploy::Deployed;
pub(crate) use retry::ConflictRetry;

/// What the core asks of background work after an operation's commits.
pub(crate) trait Wakeups: Send + Sync {
    /// A commit appended to the queue of `address`: its pump must run.
    fn kick_queue(&self, def: &Arc<ActorDefinition>, address: &Address);
    /// The workflow of `address` was started, or its queue grew: its
    /// driver must run.
    fn drive_workflow(&self, address: Address);
}

/// The runtime core of a host (see the module docs).
pub(crate) struct Core {
    pub(crate) engine: Engine,
    /// What deployed components are linked with, and their compile cache.
    linker: Linker<InstanceState>,
    cache_dir: cap_std::fs::Dir,
    pub(crate) config: HostConfig,
    /// Instances' databases and the index of marks.
    pub(crate) store: InstanceStore,
    /// The running definition of each actor; a deploy replaces one.
    actors: RwLock<ByActor<String, Arc<ActorDefinition>>>,
    /// The definition each actor ran before its last deploy.
    previous: std::sync::Mutex<ByActor<String, Arc<ActorDefinition>>>,
    /// One deploy at a time.
    deploying: tokio::sync::Mutex<()>,
    pub(crate) directory: Directory,
    awake: Arc<AtomicUsize>,
    shutting_down: AtomicBool,
    /// Client connections and their events.
    pub(crate) hub: Arc<Hub>,
    /// Where every instance's transactions end.
    pub(crate) commit_stage: CommitStage,
    /// The background work on each instance, which destroy waits for.
    pub(crate) presence: Presence,
    /// What the host counts, by actor.
    pub(crate) metrics: Arc<Metrics>,
    /// Set once, by the layers above, right after the core starts.
    above: OnceLock<Above>,
    _ticker: EpochTicker,
}

/// What the layers above give the core.
struct Above {
    wakeups: Weak<dyn Wakeups>,
    outside: Arc<dyn OtherActors>,
}

impl Core {
    /// Opens the data directory, loads every actor and starts the reaper.
    pub(crate) async fn start(config: HostConfig, actors: &[ActorSpec]) -> Result<Arc<Core>> {
        // Before the first connection of this process opens.
        crate::storage::heap::install();
        let data = DataDir::open(&config.data_dir, config.synchronous)?;
        let engine = engine::build(config.max_awake, config.pooling)?;
        let linker = capability::linker(&engine)?;
        let cache_dir = data.cache_dir(config.cache_dir.as_deref())?;
        let definitions = load_definitions(&engine, &linker, &cache_dir, actors).await?;
        let cluster = match &config.cluster {
            Some(cluster) => {
                cluster.check().map_err(anyhow::Error::msg)?;
                Some(Arc::new(Cluster::join(cluster.clone()).await?))
            }
            None => None,
        };
        let store = InstanceStore::open(data, config.synchronous, definitions.keys(), cluster)?;
        let hub = Arc::new(Hub::default());
        if let Some(cluster) = store.cluster() {
            // Clients connected to instances another host now serves hear
            // nothing more here: they are closed, and connect again.
            let connections = Arc::downgrade(&hub);
            cluster.on_lost(move |address| {
                if let Some(hub) = connections.upgrade() {
                    match address {
                        Some(address) => hub.close(address),
                        None => hub.close_all(),
                    }
                }
            });
        }
        let metrics = Arc::new(Metrics::new(definitions.keys().map(String::as_str)));
        let commit_stage = CommitStage::new(store.index().clone(), hub.clone(), &metrics);
        let core = Arc::new(Core {
            _ticker: EpochTicker::start(&engine),
            engine,
            linker,
            cache_dir,
            config,
            store,
            actors: RwLock::new(definitions),
            previous: Default::default(),
            deploying: Default::default(),
            directory: Directory::default(),
            awake: Arc::new(AtomicUsize::new(0)),
            shutting_down: AtomicBool::new(false),
            hub,
            commit_stage,
            presence: Presence::default(),
            metrics,
            above: OnceLock::new(),
        });
        tokio::spawn(reaper::reap_idle(Arc::downgrade(&core)));
        Ok(core)
    }

    /// Connects the layers above: called once, before the first operation.
    pub(crate) fn connect_above(&self, wakeups: Weak<dyn Wakeups>, outside: Arc<dyn OtherActors>) {
        let set = self.above.set(Above { wakeups, outside });
        assert!(set.is_ok(), "the layers above connect once");
    }

    /// Background work, while it is there (not before the layers above
    /// connect, nor after they are gone).
    fn wakeups(&self) -> Option<Arc<dyn Wakeups>> {
        self.above.get()?.wakeups.upgrade()
    }

    /// What guest calls to other instances go through (`None` before the
    /// layers above connect: such a call hears that the host is not
    /// running).
    fn outside(&self) -> Option<Arc<dyn OtherActors>> {
        Some(self.above.get()?.outside.clone())
    }

    /// Names of the defined actors, sorted.
    pub(crate) fn actor_names(&self) -> Vec<String> {
        let mut names: Vec<_> = self.actors().keys().cloned().collect();
        names.sort();
        names
    }

    /// Instances awake right now.
    pub(crate) fn awake_count(&self) -> usize {
        self.awake.load(Ordering::Relaxed)
    }

    /// From now on, no new operation starts.
    pub(crate) fn begin_shutdown(&self) {
        self.shutting_down.store(true, Ordering::Relaxed);
    }

    pub(crate) fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Relaxed)
    }

    pub(crate) fn max_awake(&self) -> usize {
        self.config.max_awake
    }

    /// The running definition of `actor`.
    pub(crate) fn definition(&self, actor: &str) -> Option<Arc<ActorDefinition>> {
        self.actors().get(actor).cloned()
    }

    fn actors(&self) -> std::sync::RwLockReadGuard<'_, ByActor<String, Arc<ActorDefinition>>> {
        // A panic never happens with the lock held: nothing is lost by
        // taking it poisoned.
        self.actors.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The definition of `actor`, if the address is valid and the host runs.
    pub(crate) fn resolve(&self, actor: &str, key: &str) -> Result<Arc<ActorDefinition>, Error> {
        if self.is_shutting_down() {
            return Err(Error::ShuttingDown);
        }
        validate_actor_name(actor)?;
        validate_key(key)?;
        self.definition(actor)
            .ok_or_else(|| Error::UnknownActor(actor.into()))
    }

    /// The address of (`actor`, `key`), with the actor's name shared.
    pub(crate) fn address(&self, def: &ActorDefinition, key: &str) -> Address {
        Address {
            actor: def.name.clone(),
            key: key.into(),
        }
    }

    /// The call timeout of `actor` (the default for an unknown actor,
    /// which fails anyway).
    pub(crate) fn call_timeout(&self, actor: &str) -> Duration {
        self.definition(actor)
            .map_or(crate::config::DEFAULT_CALL_TIMEOUT, |d| {
                d.options.call_timeout
            })
    }
}

pub(crate) async fn load_definitions(
    engine: &Engine,
    linker: &Linker<InstanceState>,
    cache_dir: &cap_std::fs::Dir,
    actors: &[ActorSpec],
) -> Result<ByActor<String, Arc<ActorDefinition>>> {
    let mut definitions = ByActor::default();
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
