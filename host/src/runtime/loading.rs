//! The actors of a host and where each one's component stands: ready
//! (compiled and pre-instantiated), still compiling, or failed to load.
//!
//! A host started with [`Compile::Background`] loads at its start only
//! what the compile cache holds (a fast load) and serves at once; the
//! other components compile afterwards, one at a time, in the order the
//! actors were given, except that an actor an operation waits for goes
//! to the front of the line. They compile on one thread of their own at a
//! lowered OS priority ([`COMPILE_NICE`]): cranelift would otherwise take
//! every core, and the calls of the actors already ready (and other
//! processes on the machine) would wait behind it. An operation on an
//! actor still compiling waits for it, bounded by the actor's
//! `call_timeout` ([`Actors::ready`]); background work is not started for
//! it (the timer reads only ready actors' marks, which stay due).
//!
//! Once ready, an actor stays ready (a deploy replaces its definition
//! with another); a failed one becomes ready only by a deploy.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::watch;
use wasmtime::Engine;
use wasmtime::component::Linker;

use crate::address::ByActor;
use crate::cache::CompileCache;
use crate::definition::{self, ActorDefinition, LoadError};
use crate::error::Error;
use crate::instance::InstanceState;
use crate::manifest::ActorSpec;

/// The niceness of the thread that compiles components in the background
/// (Linux; 0 is the default, 19 the lowest priority). At 10, a thread
/// busy at the default niceness on the same core gets about nine tenths
/// of it, and the compilation still advances on a loaded machine.
pub(crate) const COMPILE_NICE: i32 = 10;

/// When a host's components are compiled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Compile {
    /// Every component is loaded before the host starts: compiled, on
    /// every core, if the cache does not hold it. Any failure refuses the
    /// start.
    Before,
    /// The host starts with what the cache holds; the rest compiles in
    /// the background (see the module docs).
    Background,
}

/// Where an actor's component stands.
#[derive(Clone)]
pub(crate) enum Loading {
    /// Compiled and pre-instantiated: operations run.
    Ready(Arc<ActorDefinition>),
    /// Waiting to be compiled, or compiling.
    Compiling,
    /// It did not load: operations fail with this, until a deploy.
    Failed(Arc<LoadError>),
}

/// One actor of the host.
struct Entry {
    /// The actor as the manifest gave it (name, file, options), or, in a
    /// cluster, with the file of the cluster's last deploy of it.
    spec: Arc<ActorSpec>,
    /// The version of the actor that file is (0: the manifest's).
    version: u64,
    state: Loading,
}

/// The actors of a host (see the module docs).
pub(crate) struct Actors {
    table: RwLock<ByActor<String, Entry>>,
    /// Actors still to compile, the next one first.
    queue: Mutex<VecDeque<Arc<ActorSpec>>>,
    /// Sent whenever an actor's state changes (and when the host stops),
    /// for operations waiting for one.
    changed: watch::Sender<()>,
    stopped: AtomicBool,
}

/// Which actors of a host can run, which are still compiling, and which
/// failed to load: what `GET /readyz` answers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Readiness {
    /// Actors whose component is loaded, sorted.
    pub ready: Vec<String>,
    /// Actors whose component is still to compile or compiling, sorted.
    /// Their operations wait for it, up to the actor's `call_timeout`.
    pub compiling: Vec<String>,
    /// Actors whose component failed to load, sorted. Their operations
    /// fail (`load-failed`, naming the file and the reason) until a
    /// deploy gives them a component.
    pub failed: Vec<String>,
}

impl Readiness {
    /// Every actor is ready.
    pub fn all_ready(&self) -> bool {
        self.compiling.is_empty() && self.failed.is_empty()
    }
}

impl Actors {
    /// The actors of `specs`, each loaded as `compile` says, as the
    /// version `versions` gives (0 if it gives none). Fails with the
    /// first actor that cannot be loaded now: with [`Compile::Before`], any
    /// failure; with [`Compile::Background`], a file that is missing, too
    /// large or no component, or a cached component that does not fit the
    /// host's world. Blocks: reads every file.
    pub(crate) fn load(
        engine: &Engine,
        linker: &Linker<InstanceState>,
        cache: &CompileCache,
        specs: &[ActorSpec],
        versions: &HashMap<String, u64>,
        compile: Compile,
    ) -> Result<Actors, LoadError> {
        let mut table = ByActor::default();
        let mut queue = VecDeque::new();
        for spec in specs {
            let spec = Arc::new(spec.clone());
            let loaded = match compile {
                Compile::Before => Some(definition::load(engine, linker, cache, &spec)?),
                Compile::Background => definition::load_cached(engine, linker, cache, &spec)?,
            };
            let version = versions.get(&spec.name).copied().unwrap_or(0);
            let state = match loaded {
                Some(def) => Loading::Ready(Arc::new(def.with_version(version))),
                None => {
                    tracing::info!(
                        actor = %spec.name,
                        file = %spec.component.display(),
                        "not in the compile cache: compiling in the background"
                    );
                    queue.push_back(spec.clone());
                    Loading::Compiling
                }
            };
            table.insert(
                spec.name.clone(),
                Entry {
                    spec,
                    version,
                    state,
                },
            );
        }
        Ok(Actors {
            table: RwLock::new(table),
            queue: Mutex::new(queue),
            changed: watch::Sender::new(()),
            stopped: AtomicBool::new(false),
        })
    }

    fn table(&self) -> std::sync::RwLockReadGuard<'_, ByActor<String, Entry>> {
        // A panic never happens with the lock held: nothing is lost by
        // taking it poisoned.
        self.table.read().unwrap_or_else(|e| e.into_inner())
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, VecDeque<Arc<ActorSpec>>> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Names of every actor, sorted.
    pub(crate) fn names(&self) -> Vec<String> {
        let mut names: Vec<_> = self.table().keys().cloned().collect();
        names.sort();
        names
    }

    /// Every actor's `sleep_timeout`.
    pub(crate) fn sleep_timeouts(&self) -> Vec<Duration> {
        self.table()
            .values()
            .map(|entry| entry.spec.options.sleep_timeout)
            .collect()
    }

    /// Names of the ready actors, sorted.
    pub(crate) fn ready_names(&self) -> Vec<String> {
        self.readiness().ready
    }

    /// The actor as the manifest gave it, whatever its component's state.
    pub(crate) fn spec(&self, actor: &str) -> Option<Arc<ActorSpec>> {
        self.table().get(actor).map(|entry| entry.spec.clone())
    }

    /// The version of the actor its spec's file is.
    fn starting_version(&self, actor: &str) -> u64 {
        self.table().get(actor).map_or(0, |entry| entry.version)
    }

    /// Where `actor`'s component stands (`None`: no such actor).
    pub(crate) fn state(&self, actor: &str) -> Option<Loading> {
        self.table().get(actor).map(|entry| entry.state.clone())
    }

    /// The running definition of `actor`, if it is ready.
    pub(crate) fn definition(&self, actor: &str) -> Option<Arc<ActorDefinition>> {
        match &self.table().get(actor)?.state {
            Loading::Ready(def) => Some(def.clone()),
            Loading::Compiling | Loading::Failed(_) => None,
        }
    }

    /// Which actors are ready, compiling and failed.
    pub(crate) fn readiness(&self) -> Readiness {
        let mut readiness = Readiness::default();
        for (name, entry) in self.table().iter() {
            match entry.state {
                Loading::Ready(_) => &mut readiness.ready,
                Loading::Compiling => &mut readiness.compiling,
                Loading::Failed(_) => &mut readiness.failed,
            }
            .push(name.clone());
        }
        readiness.ready.sort();
        readiness.compiling.sort();
        readiness.failed.sort();
        readiness
    }

    /// Makes `def` the running definition of its actor (its compile ended,
    /// or a deploy replaced it).
    pub(crate) fn set_ready(&self, def: Arc<ActorDefinition>) {
        self.set(&def.name.clone(), Loading::Ready(def));
    }

    fn set(&self, actor: &str, state: Loading) {
        {
            let mut table = self.table.write().unwrap_or_else(|e| e.into_inner());
            if let Some(entry) = table.get_mut(actor) {
                entry.state = state;
            }
        }
        self.changed.send_replace(());
    }

    /// The definition of `actor` once it is ready: at once if it is,
    /// else after its compilation, which moves to the front of the line,
    /// waiting at most `bound` (`None`: as long as it takes).
    pub(crate) async fn ready(
        &self,
        actor: &str,
        bound: Option<Duration>,
    ) -> Result<Arc<ActorDefinition>, Error> {
        let began = Instant::now();
        // A bound too far to count is none.
        let deadline = bound.and_then(|bound| began.checked_add(bound));
        // Subscribed before looking: no change after the look is missed.
        let mut changes = self.changed.subscribe();
        let mut promoted = false;
        loop {
            match self.state(actor) {
                None => return Err(Error::UnknownActor(actor.into())),
                Some(Loading::Ready(def)) => return Ok(def),
                Some(Loading::Failed(error)) => return Err(load_failed(&error)),
                Some(Loading::Compiling) => {}
            }
            if self.stopped.load(Ordering::Relaxed) {
                return Err(Error::ShuttingDown);
            }
            if !std::mem::replace(&mut promoted, true) {
                self.promote(actor);
            }
            let changed = changes.changed();
            let changed = match deadline {
                Some(deadline) => tokio::time::timeout_at(deadline.into(), changed).await,
                None => Ok(changed.await),
            };
            if changed.is_err() {
                return Err(Error::Compiling {
                    actor: actor.into(),
                    waited_ms: began.elapsed().as_millis(),
                });
            }
        }
    }

    /// Moves `actor` to the front of the actors still to compile.
    fn promote(&self, actor: &str) {
        let mut queue = self.queue();
        if let Some(at) = queue.iter().position(|spec| spec.name == actor) {
            let spec = queue.remove(at).expect("found in the queue");
            queue.push_front(spec);
        }
    }

    /// Whether any actor waits to be compiled.
    pub(crate) fn any_queued(&self) -> bool {
        !self.queue().is_empty()
    }

    /// The next actor to compile, taken off the line.
    fn next_queued(&self) -> Option<Arc<ActorSpec>> {
        self.queue().pop_front()
    }

    /// No more compilation starts; operations waiting for one end
    /// (`shutting-down`).
    pub(crate) fn stop(&self) {
        self.stopped.store(true, Ordering::Relaxed);
        self.changed.send_replace(());
    }

    fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Relaxed)
    }
}

/// What an operation on an actor whose component failed to load meets.
pub(crate) fn load_failed(error: &LoadError) -> Error {
    Error::LoadFailed {
        actor: error.actor.clone(),
        path: error.path.display().to_string(),
        reason: error.reason.clone(),
    }
}

/// What compiling a component needs, shared with the host that asked.
pub(crate) struct Compiler {
    pub(crate) engine: Engine,
    pub(crate) linker: Linker<InstanceState>,
    pub(crate) cache: CompileCache,
    /// The host's actors, while the host is there.
    pub(crate) actors: Weak<Actors>,
}

impl Compiler {
    /// Compiles the actors waiting for it one at a time, the next in line
    /// first, on a thread of lowered priority, until none is left or the
    /// host stops (or is dropped); each is ready (or failed) as soon as it
    /// is done. Holds nothing of the host but what compiling needs, so a
    /// host dropped meanwhile lets go of its data directory at once.
    pub(crate) async fn run(self) {
        let pool = match compile_pool() {
            Ok(pool) => pool,
            Err(e) => {
                let Some(actors) = self.actors.upgrade() else {
                    return;
                };
                while let Some(spec) = actors.next_queued() {
                    let reason = format!("cannot start a compiling thread: {e}");
                    finish(&actors, &spec, Err(failure(&spec, reason)), Duration::ZERO);
                }
                return;
            }
        };
        loop {
            let spec = match self.actors.upgrade() {
                Some(actors) if !actors.is_stopped() => actors.next_queued(),
                _ => None,
            };
            let Some(spec) = spec else {
                return;
            };
            let cache = match self.cache.try_clone() {
                Ok(dir) => dir,
                Err(e) => {
                    if let Some(actors) = self.actors.upgrade() {
                        let reason = format!("cannot open the compile cache: {e}");
                        finish(&actors, &spec, Err(failure(&spec, reason)), Duration::ZERO);
                    }
                    continue;
                }
            };
            let (engine, linker) = (self.engine.clone(), self.linker.clone());
            let (done, result) = tokio::sync::oneshot::channel();
            let job = spec.clone();
            tracing::info!(actor = %spec.name, "compiling");
            pool.spawn(move || {
                let began = Instant::now();
                let loaded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    definition::load(&engine, &linker, &cache, &job)
                }))
                .unwrap_or_else(|_| Err(failure(&job, "compiling it panicked".into())));
                let _ = done.send((loaded, began.elapsed()));
            });
            // Not a tokio blocking task: a process that exits meanwhile
            // (a `--local` command) does not wait for it.
            let Ok((loaded, took)) = result.await else {
                return;
            };
            let Some(actors) = self.actors.upgrade() else {
                return;
            };
            finish(&actors, &spec, loaded, took);
        }
    }
}

/// Records how `spec`'s compilation ended.
fn finish(
    actors: &Actors,
    spec: &ActorSpec,
    loaded: Result<ActorDefinition, LoadError>,
    took: Duration,
) {
    let seconds = took.as_secs_f64();
    match loaded {
        Ok(def) => {
            tracing::info!(actor = %spec.name, seconds, "compiled: ready");
            let version = actors.starting_version(&spec.name);
            actors.set_ready(Arc::new(def.with_version(version)));
        }
        Err(error) => {
            tracing::error!(
                actor = %spec.name,
                error = %error,
                "the component did not load: the actor's operations fail until a deploy or a restart"
            );
            actors.set(&spec.name, Loading::Failed(Arc::new(error)));
        }
    }
}

fn failure(spec: &ActorSpec, reason: String) -> LoadError {
    LoadError {
        actor: spec.name.clone(),
        path: spec.component.clone(),
        reason,
    }
}

/// One thread at [`COMPILE_NICE`]: wasmtime compiles a component's
/// functions in parallel on the rayon pool it runs in, so run in this
/// one, it takes one core at most, at a lower priority.
fn compile_pool() -> Result<rayon::ThreadPool, rayon::ThreadPoolBuildError> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .thread_name(|_| "burrow-compile".into())
        .start_handler(|_| lower_priority(COMPILE_NICE))
        .build()
}

/// Lowers the calling thread's priority to `nice`, unless it is lower
/// already (Linux, where a thread has a niceness of its own; elsewhere
/// nothing changes).
fn lower_priority(nice: i32) {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: these calls only read and set the calling thread's
        // niceness; they touch no memory of the process.
        unsafe {
            let thread = libc::gettid() as libc::id_t;
            if libc::getpriority(libc::PRIO_PROCESS, thread) < nice
                && libc::setpriority(libc::PRIO_PROCESS, thread, nice) != 0
            {
                tracing::warn!(
                    error = %std::io::Error::last_os_error(),
                    "cannot lower the priority of the compiling thread"
                );
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = nice;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_os = "linux")]
    fn own_niceness() -> i32 {
        // SAFETY: reads the calling thread's niceness.
        unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_compiling_thread_runs_at_a_lowered_priority() {
        let pool = compile_pool().unwrap();
        let niceness = pool.install(own_niceness);
        assert!(
            niceness >= COMPILE_NICE,
            "the compiling thread's niceness is {niceness}"
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_thread_already_lower_stays_as_low() {
        let (lower, niceness) = std::thread::spawn(|| {
            let lower = (own_niceness().max(COMPILE_NICE) + 5).min(19);
            lower_priority(lower);
            lower_priority(COMPILE_NICE);
            (lower, own_niceness())
        })
        .join()
        .unwrap();
        assert_eq!(niceness, lower);
    }
}
