//! The runtime core: the actors' definitions (and the compilation of
//! those the compile cache lacks, `loading.rs`), the data directory and its
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
mod loading;
mod reaper;
mod retry;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use anyhow::Result;
use wasmtime::Engine;
use wasmtime::component::Linker;

use crate::address::{Address, ByActor};
use crate::address::{validate_actor_name, validate_key};
use crate::cache::CompileCache;
use crate::capability;
use crate::capability::http::Outbound;
use crate::cell::Awake;
use crate::config::HostConfig;
use crate::connections::Hub;
use crate::definition::ActorDefinition;
use crate::directory::Directory;
use crate::engine::{self, EpochTicker};
use crate::error::Error;
use crate::instance::InstanceState;
use crate::instance::commit::CommitStage;
use crate::instance::outside::OtherActors;
use crate::manifest::ActorSpec;
use crate::metrics::Metrics;
use crate::presence::Presence;
use crate::storage::{Cluster, DataDir, InstanceStore};

pub use deploy::{Deployed, WorkflowCheck};
pub(crate) use loading::Compile;
pub use loading::Readiness;
use loading::{Actors, Compiler, Loading, load_failed};
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
    cache: CompileCache,
    pub(crate) config: HostConfig,
    /// Instances' databases and the index of marks.
    pub(crate) store: InstanceStore,
    /// Every actor and its component: ready (a deploy replaces its
    /// definition), compiling or failed.
    actors: Arc<Actors>,
    /// The definition each actor ran before its last deploy.
    previous: std::sync::Mutex<ByActor<String, Arc<ActorDefinition>>>,
    /// In a cluster, the last candidate of each actor a deploy's check
    /// replayed instances against here.
    candidates: std::sync::Mutex<ByActor<String, Arc<ActorDefinition>>>,
    /// One deploy at a time.
    deploying: tokio::sync::Mutex<()>,
    pub(crate) directory: Directory,
    awake: Arc<Awake>,
    shutting_down: AtomicBool,
    /// Client connections and their events.
    pub(crate) hub: Arc<Hub>,
    /// Where every instance's transactions end.
    pub(crate) commit_stage: CommitStage,
    /// The background work on each instance, which destroy waits for.
    pub(crate) presence: Presence,
    /// What the host counts, by actor.
    pub(crate) metrics: Arc<Metrics>,
    /// Where actors' outgoing HTTP requests go out.
    pub(crate) outbound: Arc<Outbound>,
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
    /// Opens the data directory, loads the actors (every one, or with
    /// [`Compile::Background`] those the compile cache holds, the others
    /// compiling afterwards) and starts the reaper.
    pub(crate) async fn start(
        config: HostConfig,
        actors: &[ActorSpec],
        compile: Compile,
    ) -> Result<Arc<Core>> {
        // Before the first connection of this process opens.
        crate::storage::install_heap();
        let data = DataDir::open(&config.data_dir, config.synchronous)?;
        let engine = engine::build(config.max_awake, config.pooling)?;
        let linker = capability::linker(&engine)?;
        let cache = CompileCache::new(
            data.cache_dir(config.cache_dir.as_deref())?,
            config.cache_max,
        );
        let cluster = match &config.cluster {
            Some(cluster) => {
                cluster.check().map_err(anyhow::Error::msg)?;
                Some(Arc::new(Cluster::join(cluster.clone()).await?))
            }
            None => None,
        };
        // In a cluster, each actor starts as the cluster's last deploy of
        // it, if it was deployed.
        let loaded = async {
            let (specs, versions, deploys_taken) = match &cluster {
                Some(cluster) => deploy::starting_point(cluster, &config.data_dir, actors).await?,
                None => (actors.to_vec(), HashMap::new(), 0),
            };
            let actors = load_actors(&engine, &linker, &cache, &specs, versions, compile).await?;
            anyhow::Ok((Arc::new(actors), deploys_taken))
        };
        let (actors, deploys_taken) = match loaded.await {
            Ok(loaded) => loaded,
            Err(e) => {
                // Not a member that serves nothing until its lease runs out.
                if let Some(cluster) = &cluster {
                    let _ = cluster.leave().await;
                }
                return Err(e);
            }
        };
        let names = actors.names();
        let store = InstanceStore::open(data, config.synchronous, names.iter(), cluster)?;
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
        let metrics = Arc::new(Metrics::new(names.iter().map(String::as_str)));
        let trust = match &config.outbound_ca {
            Some(file) => burrow_client::Trust::system()
                .with_ca_file(file)
                .map_err(|e| anyhow::anyhow!("outbound_ca: {}", e.message))?,
            None => burrow_client::Trust::system(),
        };
        let outbound = Outbound::new(&trust);
        let commit_stage = CommitStage::new(hub.clone(), &metrics);
        let awake = Awake::new(config.max_awake);
        let core = Arc::new(Core {
            _ticker: EpochTicker::start(&engine),
            engine,
            linker,
            cache,
            config,
            store,
            actors,
            previous: Default::default(),
            candidates: Default::default(),
            deploying: Default::default(),
            directory: Directory::default(),
            awake,
            shutting_down: AtomicBool::new(false),
            hub,
            commit_stage,
            presence: Presence::default(),
            metrics,
            outbound,
            above: OnceLock::new(),
        });
        tokio::spawn(reaper::reap_idle(Arc::downgrade(&core)));
        if let Some(cluster) = core.store.cluster() {
            if deploys_taken > 0
                && let Err(e) = cluster.took_up(deploys_taken).await
            {
                tracing::warn!(error = %e, "cannot say in the cluster which deploys this host runs; it says so at the next deploy");
            }
            tokio::spawn(deploy::follow_deploys(Arc::downgrade(&core), deploys_taken));
        }
        if core.actors.any_queued() {
            let compiler = Compiler {
                engine: core.engine.clone(),
                linker: core.linker.clone(),
                cache: core.cache.try_clone()?,
                actors: Arc::downgrade(&core.actors),
            };
            tokio::spawn(compiler.run());
        }
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
        self.actors.names()
    }

    /// Names of the actors whose component is ready, sorted.
    pub(crate) fn ready_actor_names(&self) -> Vec<String> {
        self.actors.ready_names()
    }

    /// Which actors are ready, still compiling, or failed to load.
    pub(crate) fn readiness(&self) -> Readiness {
        self.actors.readiness()
    }

    /// Instances awake right now.
    pub(crate) fn awake_count(&self) -> usize {
        self.awake.count()
    }

    /// From now on, no new operation (nor compilation) starts.
    pub(crate) fn begin_shutdown(&self) {
        self.shutting_down.store(true, Ordering::Relaxed);
        self.actors.stop();
    }

    pub(crate) fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Relaxed)
    }

    pub(crate) fn max_awake(&self) -> usize {
        self.config.max_awake
    }

    /// The running definition of `actor`, if its component is ready.
    pub(crate) fn definition(&self, actor: &str) -> Option<Arc<ActorDefinition>> {
        self.actors.definition(actor)
    }

    /// `actor` as the manifest gave it (its file and options).
    pub(crate) fn spec(&self, actor: &str) -> Option<Arc<ActorSpec>> {
        self.actors.spec(actor)
    }

    /// The largest `http_max_request` of the actors (0 without actors).
    pub(crate) fn largest_http_max_request(&self) -> u64 {
        let names = self.actors.names();
        names
            .iter()
            .filter_map(|name| self.actors.spec(name))
            .map(|spec| spec.options.http_max_request)
            .max()
            .unwrap_or(0)
    }

    /// `actor` as the manifest gave it (its file and options), if the
    /// address is valid and the host runs, whatever its component's state:
    /// for what reads an instance's files without running its code.
    pub(crate) fn listed(&self, actor: &str, key: &str) -> Result<Arc<ActorSpec>, Error> {
        self.check_address(actor, key)?;
        self.actors
            .spec(actor)
            .ok_or_else(|| Error::UnknownActor(actor.into()))
    }

    /// The definition of `actor`, if the address is valid, the host runs
    /// and the actor's component is ready (else [`Error::Compiling`] or
    /// [`Error::LoadFailed`], without waiting).
    pub(crate) fn resolve(&self, actor: &str, key: &str) -> Result<Arc<ActorDefinition>, Error> {
        self.check_address(actor, key)?;
        self.loaded(actor)
    }

    /// The definition of `actor` if its component is ready, else
    /// [`Error::Compiling`] or [`Error::LoadFailed`] (without waiting).
    pub(crate) fn loaded(&self, actor: &str) -> Result<Arc<ActorDefinition>, Error> {
        match self.actors.state(actor) {
            Some(Loading::Ready(def)) => Ok(def),
            Some(Loading::Compiling) => Err(Error::Compiling {
                actor: actor.into(),
                waited_ms: 0,
            }),
            Some(Loading::Failed(error)) => Err(load_failed(&error)),
            None => Err(Error::UnknownActor(actor.into())),
        }
    }

    /// [`Core::resolve`], waiting for a component still compiling (moved
    /// to the front of the line) up to the actor's `call_timeout`: what
    /// every operation on an instance waits at most before
    /// [`Error::Compiling`].
    pub(crate) async fn resolve_ready(
        &self,
        actor: &str,
        key: &str,
    ) -> Result<Arc<ActorDefinition>, Error> {
        let spec = self.listed(actor, key)?;
        self.actors
            .ready(actor, Some(spec.options.call_timeout))
            .await
    }

    /// Waits, as long as it takes, until `actor`'s component is ready
    /// (its compilation moved to the front of the line).
    pub(crate) async fn wait_ready(&self, actor: &str) -> Result<(), Error> {
        validate_actor_name(actor)?;
        self.actors.ready(actor, None).await.map(|_| ())
    }

    fn check_address(&self, actor: &str, key: &str) -> Result<(), Error> {
        if self.is_shutting_down() {
            return Err(Error::ShuttingDown);
        }
        validate_actor_name(actor)?;
        validate_key(key)?;
        Ok(())
    }

    /// The address of (`actor`, `key`), with the actor's name shared.
    pub(crate) fn address(&self, def: &ActorDefinition, key: &str) -> Address {
        Address {
            actor: def.name.clone(),
            key: key.into(),
        }
    }

    /// The address of (`spec`'s actor, `key`).
    pub(crate) fn address_of(&self, spec: &ActorSpec, key: &str) -> Address {
        Address {
            actor: spec.name.as_str().into(),
            key: key.into(),
        }
    }

    /// The call timeout of `actor` (the default for an unknown actor,
    /// which fails anyway).
    pub(crate) fn call_timeout(&self, actor: &str) -> Duration {
        self.actors
            .spec(actor)
            .map_or(crate::config::DEFAULT_CALL_TIMEOUT, |spec| {
                spec.options.call_timeout
            })
    }
}

/// The actors of `specs`, loaded as `compile` says (see
/// [`Actors::load`]), off the async workers.
pub(crate) async fn load_actors(
    engine: &Engine,
    linker: &Linker<InstanceState>,
    cache: &CompileCache,
    specs: &[ActorSpec],
    versions: HashMap<String, u64>,
    compile: Compile,
) -> Result<Actors> {
    for spec in specs {
        validate_actor_name(&spec.name)?;
    }
    let (engine, linker, cache) = (engine.clone(), linker.clone(), cache.try_clone()?);
    let specs = specs.to_vec();
    // Reading files and compiling block: keep them off the async workers.
    let actors = tokio::task::spawn_blocking(move || {
        Actors::load(&engine, &linker, &cache, &specs, &versions, compile)
    })
    .await??;
    Ok(actors)
}
