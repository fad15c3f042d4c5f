//! The public host: the API that the CLI, the HTTP server and embedders
//! call. It starts the runtime core and background work, and is the only
//! layer that holds both.
//!
//! Calls, creation and shutdown are here; deploys, destroy, client
//! connections, the queue's API, the workflow view, export and import,
//! fork and resume each have a file.

mod connect;
mod deploy;
mod destroy;
mod export;
mod fork;
mod guest_link;
mod handover;
mod incoming;
mod log_syncs;
mod queue;
mod route;
mod signature;
mod workflow;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use tracing::Instrument;

use crate::address::Address;
use crate::address::validate_actor_name;
use crate::background::Background;
use crate::cache::CompileCache;
use crate::caller::Caller;
use crate::capability;
use crate::cell::Origin;
use crate::config::{HostConfig, MAX_ARGS_BYTES};
pub use crate::connections::Connection;
use crate::directory::SlotState;
use crate::engine;
use crate::error::Error;
use crate::inspect::{self, Inspection};
use crate::manifest::ActorSpec;
use crate::runtime::{Compile, ConflictRetry, Core, Readiness, load_actors};
use guest_link::GuestLink;
pub use log_syncs::LogSyncs;
pub use queue::{SendOptions, SendOutcome};
use route::Forwarder;
pub use route::{CHAIN_HEADER, FORWARDED_HEADER, Forwarded, Hop, Unreached};
pub(crate) use route::{caller_from_header, caller_header};
pub(crate) use signature::Claim;
pub use signature::{CALLER_HEADER, HTTP_HEADERS_HEADER, MAX_SKEW, SIGNATURE_HEADER};

/// The `Content-Type` of [`Host::metrics`]' text.
pub const METRICS_CONTENT_TYPE: &str = crate::metrics::CONTENT_TYPE;

/// A running Burrow host. Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct Host {
    core: Arc<Core>,
    work: Arc<Background>,
    /// Requests for instances other hosts of the cluster serve (shared:
    /// the HTTP front end clones a `Host` several times a request).
    forwarder: Arc<Forwarder>,
}

impl Host {
    /// Starts a host on `config.data_dir` with the given actors, once every
    /// component is loaded: compiled (on every core) if the compile cache
    /// does not hold it. Fails if another host holds the data directory,
    /// or if any component cannot be loaded (the error names the actor,
    /// the file and the reason). [`Host::launch`] starts at once instead.
    ///
    /// Must be called inside a tokio runtime: the host keeps a task that
    /// puts idle instances to sleep.
    pub async fn start(config: HostConfig, actors: &[ActorSpec]) -> Result<Host> {
        Host::start_compiling(config, actors, Compile::Before).await
    }

    /// Starts a host on `config.data_dir` with the given actors without
    /// waiting for components to compile: those the compile cache holds
    /// are loaded (a fast load), and the others compile afterwards, one at
    /// a time in the order given, on one thread of lowered priority, each
    /// actor ready as soon as its component is ([`Host::readiness`]). An
    /// operation on an actor still compiling waits for it, up to the
    /// actor's `call_timeout` ([`Error::Compiling`]), and moves it to the
    /// front of the line; its background work starts once it is ready. A
    /// component that fails to compile leaves its actor failed
    /// ([`Error::LoadFailed`]) and the others served.
    ///
    /// Fails at once if another host holds the data directory, or if a
    /// component file is missing, too large or no component, or a cached
    /// component does not fit the host's world.
    pub async fn launch(config: HostConfig, actors: &[ActorSpec]) -> Result<Host> {
        Host::start_compiling(config, actors, Compile::Background).await
    }

    async fn start_compiling(
        config: HostConfig,
        actors: &[ActorSpec],
        compile: Compile,
    ) -> Result<Host> {
        let trust = config
            .cluster
            .as_ref()
            .map(|cluster| cluster.trust.clone())
            .unwrap_or_default();
        let core = Core::start(config, actors, compile).await?;
        let work = Background::new(core.clone());
        let wakeups: std::sync::Weak<Background> = Arc::downgrade(&work);
        let forwarder = Arc::new(Forwarder::new(&trust));
        core.connect_above(wakeups, Arc::new(GuestLink::new(&work, forwarder.clone())));
        work.start_timer();
        if core.store.cluster().is_some() {
            tokio::spawn(handover::spread(Arc::downgrade(&core)));
        }
        Ok(Host {
            core,
            work,
            forwarder,
        })
    }

    /// Names of the defined actors, sorted.
    pub fn actors(&self) -> Vec<String> {
        self.core.actor_names()
    }

    /// Which actors are ready, which are still compiling, and which failed
    /// to load (see [`Host::launch`]).
    pub fn readiness(&self) -> Readiness {
        self.core.readiness()
    }

    /// Waits, as long as it takes, until `actor`'s component is compiled
    /// (its compilation goes first): for an embedder that would rather
    /// wait than meet [`Error::Compiling`]. Fails with
    /// [`Error::LoadFailed`] if it does not load, and at once if the actor
    /// is not defined.
    pub async fn wait_ready(&self, actor: &str) -> Result<(), Error> {
        self.core.wait_ready(actor).await
    }

    /// The data directory.
    pub fn data_dir(&self) -> &std::path::Path {
        self.core.store.root()
    }

    /// Records in the data directory that this host serves its API at
    /// `url`, for commands that read the directory while it runs (they
    /// ask it instead, see `storage/src/host_lock.rs`).
    pub fn announce(&self, url: &str) -> anyhow::Result<()> {
        self.core.store.announce(url)
    }

    /// Instances awake right now.
    pub fn awake_count(&self) -> usize {
        self.core.awake_count()
    }

    /// Transactions of instances committed since the host started: calls
    /// coalesced into one batch count once.
    pub fn commits(&self) -> u64 {
        self.core.commit_stage.commits()
    }

    /// The syncs of instances' write-ahead logs since the host started
    /// (one a commit in `synchronous = full`), and how long they waited
    /// for the disk.
    pub fn log_syncs(&self) -> LogSyncs {
        let syncs = self.core.commit_stage.log_syncs();
        LogSyncs {
            syncs: syncs.count(),
            waited: syncs.sum(),
        }
    }

    /// The host's metrics in the Prometheus text format (version 0.0.4,
    /// [`METRICS_CONTENT_TYPE`]). Counts instances in the index, so it
    /// blocks briefly: async code calls it on a blocking thread (the HTTP
    /// API does).
    pub fn metrics(&self) -> String {
        let core = &self.core;
        let connections = core.hub.count_by_actor();
        // On a host alone, every instance is in the index; in a cluster the
        // index does not list them, and asleep instances are not reported.
        let known = match core.store.cluster() {
            Some(_) => None,
            None => match core.store.index().count_by_actor() {
                Ok(counts) => Some(counts.into_iter().collect::<HashMap<_, _>>()),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot count the instances for the metrics");
                    None
                }
            },
        };
        if let Some(cluster) = core.store.cluster() {
            core.metrics.set_cluster_leases(cluster.held().len() as u64);
        }
        let awake = core.directory.awake_by_actor();
        for actor in core.metrics.actors() {
            let name = actor.name();
            let open = connections.get(name).copied().unwrap_or(0);
            actor.set_connections(open as u64);
            if let Some(known) = &known {
                let known = known.get(name).copied().unwrap_or(0);
                let awake = awake.get(name).copied().unwrap_or(0);
                actor.set_asleep(known.saturating_sub(awake));
            }
        }
        core.metrics.encode()
    }

    /// Calls `action` on the instance (`actor`, `key`) with `args`, a JSON
    /// array, and returns the JSON result. The first call creates the
    /// instance (with a `null` create input). The caller is a client
    /// without an identity ([`Host::call_as`]).
    pub async fn call(
        &self,
        actor: &str,
        key: &str,
        action: &str,
        args: &str,
    ) -> Result<String, Error> {
        self.call_as(Caller::Client(None), actor, key, action, args)
            .await
    }

    /// [`Host::call`] for `caller`, which the action can read
    /// (`burrow:actor/caller`). An internal action of the actor is refused
    /// to a client, and to another actor unless the actor allows it, with
    /// [`Error::UnknownAction`], as for an action it does not have.
    pub async fn call_as(
        &self,
        caller: Caller,
        actor: &str,
        key: &str,
        action: &str,
        args: &str,
    ) -> Result<String, Error> {
        self.call_from_as(Hop::Origin, caller, Vec::new(), actor, key, action, args)
            .await
    }

    /// Calls `action` for another instance's guest code: `chain` holds the
    /// instances waiting on this call, outermost first (the last is the
    /// caller).
    pub(crate) async fn call_on_chain(
        &self,
        chain: Vec<Address>,
        actor: &str,
        key: &str,
        action: &str,
        args: &str,
    ) -> Result<String, Error> {
        // The chain's last instance is the caller.
        self.call_from_as(Hop::Origin, Caller::Host, chain, actor, key, action, args)
            .await
    }

    /// Calls `action` for a request that came `hop`, with the chain of
    /// instances waiting on it: here, or at the host that serves the
    /// instance. A call with a chain comes from guest code, and its caller
    /// is the chain's last instance whatever `caller` says (so a call
    /// between actors forwarded from another host of a cluster keeps its
    /// caller); `caller` is for a call from outside.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn call_from_as(
        &self,
        hop: Hop,
        caller: Caller,
        chain: Vec<Address>,
        actor: &str,
        key: &str,
        action: &str,
        args: &str,
    ) -> Result<String, Error> {
        let caller = chain.last().map(Caller::actor).unwrap_or(caller);
        if args.len() > MAX_ARGS_BYTES {
            let refused = Err(Error::InvalidArguments {
                actor: actor.into(),
                action: action.into(),
                message: format!(
                    "the arguments are {} bytes; the limit is {MAX_ARGS_BYTES} bytes",
                    args.len()
                ),
            });
            self.core
                .metrics
                .actor(actor)
                .call_ended(Instant::now(), &refused);
            return refused;
        }
        let chain = &chain;
        let caller = &caller;
        // Counted by the host that runs the call, not by one that forwards it.
        let here = move || {
            let span = tracing::debug_span!("call", actor, key, action);
            async move {
                let began = Instant::now();
                let result = ConflictRetry::run(self.core.call_timeout(actor), || {
                    self.core
                        .call_action(actor, key, action, args, chain.clone(), caller.clone())
                })
                .await;
                // A call another host took over meanwhile is counted there.
                if !matches!(result, Err(Error::Moved { .. })) {
                    self.core.metrics.actor(actor).call_ended(began, &result);
                }
                result
            }
            .instrument(span)
        };
        let there = move |base: String| async move {
            self.forward_call(&base, caller, chain, actor, key, action, args)
                .await
        };
        self.route(hop, actor, key, here, there).await
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
        ConflictRetry::run(self.core.call_timeout(actor), || {
            self.core
                .with_cell(actor, key, Origin::MustBeNew(input), async |cell| {
                    cell.commit_creation()
                })
        })
        .await
    }

    /// State and tables of the instance, read from a separate read-only
    /// connection (the instance is not woken). The actor's tables are read
    /// under the bounds of guest SQL, within the actor's `call_timeout`.
    /// Blocks: async code calls it on a blocking thread (the HTTP API does).
    pub fn inspect(&self, actor: &str, key: &str) -> Result<Inspection, Error> {
        let spec = self.core.listed(actor, key)?;
        inspect::inspect(
            self.core.store.root(),
            actor,
            key,
            spec.options.call_timeout,
        )
    }

    /// The actor's own tables in the instance, with their columns and row
    /// counts, read like [`Host::inspect`]. Blocks.
    pub fn tables(&self, actor: &str, key: &str) -> Result<Vec<inspect::TableSummary>, Error> {
        let spec = self.core.listed(actor, key)?;
        inspect::tables(
            self.core.store.root(),
            actor,
            key,
            spec.options.call_timeout,
        )
    }

    /// Up to `limit` rows of the actor's table `table` in the instance from
    /// row `offset` on, read like [`Host::inspect`]. Blocks.
    pub fn table_page(
        &self,
        actor: &str,
        key: &str,
        table: &str,
        offset: u64,
        limit: usize,
    ) -> Result<inspect::TablePage, Error> {
        let spec = self.core.listed(actor, key)?;
        let root = self.core.store.root();
        inspect::table_page(
            root,
            actor,
            key,
            table,
            offset,
            limit,
            spec.options.call_timeout,
        )
    }

    /// The instance's pending schedules, soonest first, read from a
    /// separate read-only connection. Blocks.
    pub fn schedules(&self, actor: &str, key: &str) -> Result<inspect::ScheduleView, Error> {
        self.core.listed(actor, key)?;
        inspect::schedules(self.core.store.root(), actor, key)
    }

    /// The instance's state value as JSON (`null` if never set), read from a
    /// separate read-only connection. Blocks, like [`Host::inspect`].
    pub fn state(&self, actor: &str, key: &str) -> Result<serde_json::Value, Error> {
        self.core.listed(actor, key)?;
        inspect::state(self.core.store.root(), actor, key)
    }

    /// The version (0: the manifest's; each deploy adds one) and the
    /// SHA-256 of the component `actor` runs on this host
    /// ([`Error::Compiling`] while it compiles, without waiting).
    pub fn component(&self, actor: &str) -> Result<(u64, String), Error> {
        validate_actor_name(actor)?;
        let def = self.core.loaded(actor)?;
        Ok((def.version, def.digest.clone()))
    }

    /// Keys of `actor`'s instances (in a cluster, of every host's), in
    /// byte order.
    pub async fn keys(&self, actor: &str) -> Result<Vec<String>, Error> {
        self.keys_page(actor, "", None, None).await
    }

    /// Keys of `actor`'s instances that begin with `prefix`, after `after`
    /// if given, at most `limit` of them, in byte order: a page of
    /// [`Host::keys`], which the next page continues after its last key.
    pub async fn keys_page(
        &self,
        actor: &str,
        prefix: &str,
        after: Option<&str>,
        limit: Option<usize>,
    ) -> Result<Vec<String>, Error> {
        validate_actor_name(actor)?;
        if self.core.spec(actor).is_none() {
            return Err(Error::UnknownActor(actor.into()));
        }
        self.core
            .store
            .keys(actor, prefix, after, limit)
            .await
            .map_err(|e| Error::Storage {
                actor: actor.into(),
                key: String::new(),
                message: format!("{e:#}"),
            })
    }

    /// Makes the instance's files this host's to read, for the views that
    /// read them (`inspect`, `state`, `queue`, `workflow`): in a cluster,
    /// takes its lease if it is free and restores its file; an instance
    /// another host serves is [`Error::Moved`]. Nothing to do on a host
    /// alone.
    pub async fn claim(&self, actor: &str, key: &str) -> Result<(), Error> {
        if self.core.store.cluster().is_none() {
            return Ok(());
        }
        let spec = self.core.listed(actor, key)?;
        self.core.claim(&self.core.address_of(&spec, key)).await
    }

    /// The members of this host's cluster with the leases each holds
    /// (`None` on a host alone).
    pub async fn cluster_status(&self) -> Result<Option<serde_json::Value>, Error> {
        let Some(cluster) = self.core.store.cluster() else {
            return Ok(None);
        };
        let hosts = cluster
            .status()
            .await
            .map_err(|e| Error::ClusterUnavailable(e.to_string()))?;
        let (shipments, batches, statements) = cluster.shipped();
        Ok(Some(serde_json::json!({
            "this": cluster.member().id,
            "shipped": {
                "shipments": shipments,
                "batches": batches,
                "statements": statements,
            },
            "lease_ms": cluster.config().lease.as_millis() as u64,
            "heartbeat_ms": cluster.config().heartbeat.as_millis() as u64,
            "margin_ms": cluster.config().margin.as_millis() as u64,
            "hosts": hosts,
        })))
    }

    /// Puts every awake instance to sleep (running its sleep hook) and
    /// refuses new calls. In-flight calls finish first. In a cluster, the
    /// host then gives its leases back and leaves, so that other hosts
    /// take its instances at once.
    pub async fn shutdown(&self) {
        self.core.begin_shutdown();
        self.core.hub.close_all();
        self.work.stop_all_pumps().await;
        for slot in self.core.directory.all() {
            let mut state = slot.state.lock().await;
            if let SlotState::Awake(cell) = std::mem::replace(&mut *state, SlotState::Retired) {
                cell.sleep().await;
            }
            self.core.directory.remove(&slot);
        }
        if let Some(cluster) = self.core.store.cluster()
            && !cluster.has_left()
        {
            match cluster.leave().await {
                Ok(released) => {
                    tracing::info!(
                        released,
                        "left the cluster; its instances are free for the other hosts"
                    )
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot leave the cluster cleanly; other hosts take its instances when its lease expires")
                }
            }
        }
    }
}

/// Compiles every actor's component into the compile cache of `config` and
/// checks it against the WIT world, without starting a host: no lock is
/// taken, so a server may be running on the same data directory. Returns
/// how many components were compiled (the others were in the cache).
pub async fn check_actors(config: &HostConfig, actors: &[ActorSpec]) -> Result<usize> {
    let engine = engine::build(config.max_awake, config.pooling)?;
    let linker = capability::linker(&engine)?;
    let path = config
        .cache_dir
        .clone()
        .unwrap_or_else(|| config.data_dir.join("cache"));
    let cache = CompileCache::open(&path, config.cache_max)?;
    load_actors(
        &engine,
        &linker,
        &cache,
        actors,
        Default::default(),
        Compile::Before,
    )
    .await?;
    Ok(cache.compiled())
}
