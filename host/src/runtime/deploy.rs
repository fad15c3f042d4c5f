//! Deploys: replacing an actor's component on a running host.
//!
//! A deploy loads the new component (compiled, or taken from the compile
//! cache) with the actor's options, which fails for anything that is not
//! a component of the host's world; with a check, it first replays every unfinished
//! workflow of the actor against it in a dry run (nothing is kept, no
//! other instance is reached) and refuses if one would diverge. Then the
//! actor's definition is swapped at once. Nothing else changes then:
//! operations in flight finish on the cell they run on, and each
//! instance's next operation finds its cell outdated, puts it to sleep
//! and wakes the instance on the new code (`migrate`, then `wake`) in
//! that operation's transaction (`cells.rs`). Queue workers of the old
//! code are dropped at the pump's next event. The manifest's component
//! is what the next start loads: a deploy lives as long as the process.
//!
//! A deploy of an actor whose component is still compiling waits for it
//! (it moves to the front of the line); one whose component failed to
//! load gives it its first running component.
//!
//! In a cluster, a deploy through any host is recorded in PostgreSQL
//! (`storage/src/cluster/deploys.rs`) with the actor's next version in the
//! cluster, before this host swaps; every other member takes it up at its
//! next look ([`follow_deploys`], every [`DEPLOY_LOOK`]) the same way, and
//! the deploy returns once every live member has (or [`TAKE_UP_WAIT`]
//! passed: it names those that had not). A host that starts runs the
//! cluster's last deploy of each actor, not its manifest's component.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::Core;
use crate::address::Address;
use crate::cell::Origin;
use crate::definition::{self, ActorDefinition};
use crate::error::{Divergence, Error};
use crate::manifest::ActorSpec;
use crate::storage::{Cluster, ClusterError, Component, DeployRecord, HostTables};

/// How often a member of a cluster looks for deploys made through other
/// hosts.
pub(crate) const DEPLOY_LOOK: Duration = Duration::from_millis(250);

/// How long a deploy in a cluster waits for every live member to take it
/// up (a member compiles the component first, unless its compile cache
/// holds it).
pub(crate) const TAKE_UP_WAIT: Duration = Duration::from_secs(30);

/// What replaying one instance's workflow against a candidate component
/// found (a deploy's check in a cluster, instance by instance).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(tag = "check", content = "message", rename_all = "kebab-case")]
pub enum WorkflowCheck {
    /// The instance has no unfinished workflow: nothing to replay.
    Nothing,
    /// Its unfinished workflow replays on the candidate.
    Replays,
    /// Its unfinished workflow would diverge, as the message says.
    Diverges(String),
}

/// What a deploy did.
#[derive(Debug, Clone, Serialize)]
pub struct Deployed {
    /// The actor.
    pub actor: String,
    /// Its definition's version on this host now (0: the manifest's).
    pub version: u64,
    /// The SHA-256 of the component it runs now.
    pub digest: String,
    /// The SHA-256 of the component it ran before (empty if it ran none:
    /// its manifest's component failed to load).
    pub previous_digest: String,
    /// Unfinished workflows replayed against it first (0 without a check).
    pub checked: usize,
    /// In a cluster: the members that had not yet taken the deploy up
    /// when it returned (each takes it up at its next look); empty when
    /// every live member runs it, and on a host alone.
    pub lagging: Vec<String>,
}

impl Core {
    /// Replaces the component of `actor` with `bytes` (see the module
    /// docs); with `check`, only if no unfinished workflow would diverge.
    pub(crate) async fn deploy(
        &self,
        actor: &str,
        bytes: Vec<u8>,
        check: bool,
    ) -> Result<Deployed, Error> {
        self.deploy_checked(actor, bytes, check, 0).await
    }

    /// [`Core::deploy`], after the host above checked `checked`
    /// workflows across the cluster.
    pub(crate) async fn deploy_checked(
        &self,
        actor: &str,
        bytes: Vec<u8>,
        check: bool,
        checked: usize,
    ) -> Result<Deployed, Error> {
        let one_at_a_time = self.deploying.lock().await;
        let running = self.deployable(actor).await?;
        let loaded = self.compile(actor, &bytes).await?;
        let checked = self.check(&loaded, check).await? + checked;
        let (version, recorded) = match self.store.cluster() {
            None => (next_version(&running), None),
            Some(cluster) => {
                let previous = self.previous_component(actor, &running);
                let component = Component {
                    digest: &loaded.digest,
                    bytes: Some(&bytes),
                };
                let previous = Component {
                    digest: &previous.0,
                    bytes: previous.1.as_deref(),
                };
                let record = cluster
                    .record_deploy(actor, component, previous)
                    .await
                    .map_err(|e| unrecorded(actor, e))?;
                (record.version, Some(record))
            }
        };
        let mut deployed = self.swap(actor, running, loaded, version, checked);
        drop(one_at_a_time);
        let recorded = recorded.map(|record| {
            deployed.previous_digest = record.previous_digest;
            record.seq
        });
        self.taken_up_everywhere(deployed, recorded).await
    }

    /// Puts back the component `actor` ran before its last deploy (in a
    /// cluster, before the cluster's last deploy of it).
    pub(crate) async fn roll_back(&self, actor: &str, check: bool) -> Result<Deployed, Error> {
        self.roll_back_checked(actor, check, 0).await
    }

    /// [`Core::roll_back`], after the host above checked `checked`
    /// workflows across the cluster.
    pub(crate) async fn roll_back_checked(
        &self,
        actor: &str,
        check: bool,
        checked: usize,
    ) -> Result<Deployed, Error> {
        let one_at_a_time = self.deploying.lock().await;
        let running = self.deployable(actor).await?;
        let Some(cluster) = self.store.cluster() else {
            let previous = self
                .previous_of(actor)
                .ok_or(Error::NoPrevious(actor.into()))?;
            let previous = copy(&previous);
            let checked = self.check(&previous, check).await? + checked;
            let version = next_version(&running);
            return Ok(self.swap(actor, running, previous, version, checked));
        };
        let last = last_with_previous(cluster, actor).await?;
        let previous = match self.previous_of(actor) {
            Some(previous) if previous.digest == last.previous_digest => copy(&previous),
            _ => {
                let bytes = cluster
                    .component(&last.previous_digest)
                    .await
                    .map_err(|e| unrecorded(actor, e))?
                    .ok_or_else(|| {
                        Error::NotSupported(format!(
                            "the component `{actor}` ran before its last deploy ({}) is not in the \
                             cluster: deploy it again by its file",
                            last.previous_digest
                        ))
                    })?;
                self.compile(actor, &bytes).await?
            }
        };
        let checked = self.check(&previous, check).await? + checked;
        let record = cluster
            .record_deploy(
                actor,
                Component {
                    digest: &previous.digest,
                    bytes: None,
                },
                Component {
                    digest: &last.digest,
                    bytes: None,
                },
            )
            .await
            .map_err(|e| unrecorded(actor, e))?;
        let mut deployed = self.swap(actor, running, previous, record.version, checked);
        deployed.previous_digest = record.previous_digest;
        drop(one_at_a_time);
        self.taken_up_everywhere(deployed, Some(record.seq)).await
    }

    /// In a cluster, before a deploy's check: compiles `bytes` as `actor`'s
    /// candidate component and makes sure the cluster holds it, so that
    /// every member can replay its instances against it
    /// ([`Core::check_instance`]). Returns its digest.
    pub(crate) async fn candidate(&self, actor: &str, bytes: &[u8]) -> Result<String, Error> {
        let def = self.compile(actor, bytes).await?;
        let digest = def.digest.clone();
        if let Some(cluster) = self.store.cluster() {
            cluster
                .keep_component(&digest, bytes)
                .await
                .map_err(|e| unrecorded(actor, e))?;
        }
        self.keep_candidate(Arc::new(def));
        Ok(digest)
    }

    /// In a cluster, before the check of a rollback: the digest of the
    /// component the actor ran before the cluster's last deploy of it,
    /// which the cluster holds.
    pub(crate) async fn previous_candidate(&self, actor: &str) -> Result<String, Error> {
        let Some(cluster) = self.store.cluster() else {
            return Err(Error::NoPrevious(actor.into()));
        };
        let last = last_with_previous(cluster, actor).await?;
        Ok(last.previous_digest)
    }

    fn keep_candidate(&self, def: Arc<ActorDefinition>) {
        let mut candidates = self.candidates.lock().unwrap_or_else(|e| e.into_inner());
        candidates.insert(def.name.to_string(), def);
    }

    /// The candidate definition of `actor` with `digest`: the last one
    /// made here if it is that one, else compiled from the cluster's copy.
    async fn candidate_with(
        &self,
        actor: &str,
        digest: &str,
    ) -> Result<Arc<ActorDefinition>, Error> {
        let kept = {
            let candidates = self.candidates.lock().unwrap_or_else(|e| e.into_inner());
            candidates
                .get(actor)
                .filter(|def| def.digest == digest)
                .cloned()
        };
        if let Some(def) = kept {
            return Ok(def);
        }
        let running = self
            .actors
            .definition(actor)
            .filter(|def| def.digest == digest);
        if let Some(def) =
            running.or_else(|| self.previous_of(actor).filter(|def| def.digest == digest))
        {
            return Ok(Arc::new(copy(&def)));
        }
        let unknown = || {
            invalid(
                actor,
                format!("the cluster holds no component {digest} to check against"),
            )
        };
        let cluster = self.store.cluster().ok_or_else(unknown)?;
        let bytes = cluster
            .component(digest)
            .await
            .map_err(|e| Error::ClusterUnavailable(e.to_string()))?
            .ok_or_else(unknown)?;
        let def = Arc::new(self.compile(actor, &bytes).await?);
        self.keep_candidate(def.clone());
        Ok(def)
    }

    /// Whether the candidate component `digest` of `actor` runs
    /// workflows (if not, a check has nothing to replay).
    pub(crate) async fn candidate_runs_workflows(
        &self,
        actor: &str,
        digest: &str,
    ) -> Result<bool, Error> {
        Ok(self.candidate_with(actor, digest).await?.pre.has_runner())
    }

    /// Replays the unfinished workflow of (`actor`, `key`), an instance
    /// this host serves (it claims it), against the candidate component
    /// `digest`, in a dry run (see [`Core::check_workflows`]).
    pub(crate) async fn check_instance(
        &self,
        actor: &str,
        key: &str,
        digest: &str,
    ) -> Result<WorkflowCheck, Error> {
        let def = self.candidate_with(actor, digest).await?;
        if !def.pre.has_runner() {
            return Ok(WorkflowCheck::Nothing);
        }
        let address = self.address(&def, key);
        self.claim(&address).await?;
        if !self.store.exists(&address) {
            return Err(Error::no_such_instance(actor, key));
        }
        if !self.has_unfinished_workflow(&address)? {
            return Ok(WorkflowCheck::Nothing);
        }
        Ok(match self.check_workflow(&def, key).await? {
            Some(message) => WorkflowCheck::Diverges(message),
            None => WorkflowCheck::Replays,
        })
    }

    /// In a cluster, before this host serves an instance of `actor` (its
    /// lease held): if a lease it took said the cluster deployed a later
    /// version of the actor than this host runs, takes that deploy up
    /// now rather than at the next look, so that an instance that moved
    /// here never runs earlier code than it ran elsewhere.
    pub(crate) async fn run_the_last_deploy(&self, actor: &str) {
        let Some(cluster) = self.store.cluster() else {
            return;
        };
        let deployed = cluster.deployed_version(actor);
        let Some(running) = self.actors.definition(actor) else {
            // Still compiling (what the host started with) or failed.
            return;
        };
        if running.version >= deployed {
            return;
        }
        let taken = match cluster.last_deploy(actor).await {
            Ok(Some(record)) => self.take_up(cluster, &record).await,
            Ok(None) => Ok(()),
            Err(e) => Err(Error::ClusterUnavailable(e.to_string())),
        };
        if let Err(e) = taken {
            tracing::warn!(
                actor,
                version = deployed,
                error = %e,
                "cannot take up the actor's last deploy before serving it; it runs version {}",
                running.version
            );
        }
    }

    /// Takes up `record`, a deploy made through another host of the
    /// cluster: compiles its component (unless this host runs a newer
    /// version of the actor, or has no such actor) and swaps it in as
    /// that version, unchecked (its deploy checked).
    async fn take_up(&self, cluster: &Cluster, record: &DeployRecord) -> Result<(), Error> {
        let actor = record.actor.as_str();
        let _one_at_a_time = self.deploying.lock().await;
        let running = match self.deployable(actor).await {
            Ok(running) => running,
            Err(Error::UnknownActor(_)) => return Ok(()),
            Err(e) => return Err(e),
        };
        if running
            .as_ref()
            .is_some_and(|running| running.version >= record.version)
        {
            return Ok(());
        }
        let bytes = cluster
            .component(&record.digest)
            .await
            .map_err(|e| Error::ClusterUnavailable(e.to_string()))?
            .ok_or_else(|| {
                invalid(
                    actor,
                    format!("the cluster does not hold its component {}", record.digest),
                )
            })?;
        let loaded = self.compile(actor, &bytes).await?;
        self.swap(actor, running, loaded, record.version, 0);
        Ok(())
    }

    /// In a cluster, once this host runs the deploy `recorded`, says so
    /// and waits for every other live member to say so (at most
    /// [`TAKE_UP_WAIT`]); those that had not are `deployed.lagging`.
    async fn taken_up_everywhere(
        &self,
        mut deployed: Deployed,
        recorded: Option<i64>,
    ) -> Result<Deployed, Error> {
        let (Some(cluster), Some(seq)) = (self.store.cluster(), recorded) else {
            return Ok(deployed);
        };
        // The deploy is recorded and runs here: from now on, what fails
        // is only the wait.
        if let Err(e) = cluster.took_up(seq).await {
            tracing::warn!(error = %e, "cannot say in the cluster that this host took its deploy up");
        }
        let until = Instant::now() + TAKE_UP_WAIT;
        loop {
            match cluster.not_taken_up(seq).await {
                Ok(lagging) => deployed.lagging = lagging,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot see which hosts took the deploy up");
                    return Ok(deployed);
                }
            }
            if deployed.lagging.is_empty() || Instant::now() >= until {
                if !deployed.lagging.is_empty() {
                    tracing::warn!(
                        actor = %deployed.actor,
                        version = deployed.version,
                        hosts = ?deployed.lagging,
                        "deployed, but these hosts have not taken it up yet"
                    );
                }
                return Ok(deployed);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The running definition of `actor` (`None` if its component failed
    /// to load), if this host may deploy it: once its component is
    /// compiled, if it is still compiling.
    async fn deployable(&self, actor: &str) -> Result<Option<Arc<ActorDefinition>>, Error> {
        if self.is_shutting_down() {
            return Err(Error::ShuttingDown);
        }
        match self.actors.ready(actor, None).await {
            Ok(running) => Ok(Some(running)),
            Err(Error::LoadFailed { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// A definition of `bytes` as `actor`'s component, compiled (or taken
    /// from the compile cache) off the async workers.
    async fn compile(&self, actor: &str, bytes: &[u8]) -> Result<ActorDefinition, Error> {
        let (engine, linker) = (self.engine.clone(), self.linker.clone());
        let cache = self
            .cache
            .try_clone()
            .map_err(|e| Error::Overloaded(format!("cannot open the compile cache: {e}")))?;
        let spec = self
            .actors
            .spec(actor)
            .ok_or_else(|| Error::UnknownActor(actor.into()))?;
        let (name, options, bytes) = (actor.to_owned(), spec.options.clone(), bytes.to_vec());
        // Compiling is CPU-bound: keep it off the async workers.
        tokio::task::spawn_blocking(move || {
            definition::from_bytes(&engine, &linker, &cache, &name, &options, &bytes)
        })
        .await
        .map_err(|e| invalid(actor, format!("loading it failed: {e}")))?
        .map_err(|reason| invalid(actor, reason))
    }

    /// The digest of the component `actor` runs, and its bytes when the
    /// cluster may not hold them: those of the manifest's file, if it
    /// still has that digest.
    fn previous_component(
        &self,
        actor: &str,
        running: &Option<Arc<ActorDefinition>>,
    ) -> (String, Option<Vec<u8>>) {
        let Some(running) = running else {
            return (String::new(), None);
        };
        if running.version > 0 {
            return (running.digest.clone(), None);
        }
        let bytes = self
            .actors
            .spec(actor)
            .and_then(|spec| std::fs::read(&spec.component).ok())
            .filter(|bytes| definition::digest(bytes) == running.digest);
        (running.digest.clone(), bytes)
    }

    fn previous_of(&self, actor: &str) -> Option<Arc<ActorDefinition>> {
        let previous = self.previous.lock().unwrap_or_else(|e| e.into_inner());
        previous.get(actor).cloned()
    }

    /// With `check`, replays the unfinished workflows against `new`:
    /// how many, or the refusal if one would diverge.
    async fn check(&self, new: &ActorDefinition, check: bool) -> Result<usize, Error> {
        if !check {
            return Ok(0);
        }
        if self.store.cluster().is_some() {
            // The instances live on every host: the host above checks
            // each where it lives (`check_instance`), then deploys.
            return Err(Error::NotSupported(format!(
                "the check of a deploy of `{}` in a cluster goes through the host",
                new.name
            )));
        }
        let new = Arc::new(copy(new));
        let (checked, divergences) = self.check_workflows(&new).await?;
        if !divergences.is_empty() {
            return Err(Error::WouldDiverge {
                actor: new.name.to_string(),
                divergences,
            });
        }
        Ok(checked)
    }

    /// Makes `new` the running definition of `actor`, as `version`.
    fn swap(
        &self,
        actor: &str,
        running: Option<Arc<ActorDefinition>>,
        new: ActorDefinition,
        version: u64,
        checked: usize,
    ) -> Deployed {
        let new = Arc::new(new.with_version(version));
        self.actors.set_ready(new.clone());
        let previous_digest = running
            .as_ref()
            .map(|running| running.digest.clone())
            .unwrap_or_default();
        if let Some(running) = running {
            self.previous
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(actor.to_owned(), running);
        }
        tracing::info!(
            actor,
            version = new.version,
            digest = %new.digest,
            previous = %previous_digest,
            checked,
            "deployed"
        );
        Deployed {
            actor: actor.into(),
            version: new.version,
            digest: new.digest.clone(),
            previous_digest,
            checked,
            lagging: Vec::new(),
        }
    }

    /// Replays every unfinished workflow of `def`'s actor against it, in
    /// a dry run each, with the instance's slot held (no operation of the
    /// instance runs meanwhile). Returns how many were replayed and those
    /// that diverge.
    async fn check_workflows(
        &self,
        def: &Arc<ActorDefinition>,
    ) -> Result<(usize, Vec<Divergence>), Error> {
        let actor = def.name.to_string();
        if !def.pre.has_runner() {
            return Ok((0, Vec::new()));
        }
        let mut checked = 0;
        let mut divergences = Vec::new();
        let keys = self
            .store
            .keys(&actor, "", None, None)
            .await
            .map_err(|e| Error::storage(&actor, "", format!("{e:#}")))?;
        for key in keys {
            if !self.has_unfinished_workflow(&self.address(def, &key))? {
                continue;
            }
            checked += 1;
            if let Some(message) = self.check_workflow(def, &key).await? {
                divergences.push(Divergence { key, message });
            }
        }
        Ok((checked, divergences))
    }

    fn has_unfinished_workflow(&self, address: &Address) -> Result<bool, Error> {
        let storage =
            |e: rusqlite::Error| Error::storage(&address.actor, &address.key, e.to_string());
        let conn = self.store.open_reader(address).map_err(storage)?;
        if !conn.workflow().has_schema().map_err(storage)? {
            return Ok(false);
        }
        let record = conn.workflow().record().map_err(storage)?;
        Ok(record.is_some_and(|r| !r.status.is_final()))
    }

    /// Replays the workflow of (`def`'s actor, `key`) against `def` in a
    /// dry run: `Some(message)` if it diverges.
    async fn check_workflow(
        &self,
        def: &Arc<ActorDefinition>,
        key: &str,
    ) -> Result<Option<String>, Error> {
        let slot = self
            .directory
            .slot(&def.name, key, def.options.sleep_timeout);
        let _state = slot.state.lock().await;
        let address = slot.address.clone();
        let mut cell = self
            .start_cell_as(def, &address, Origin::MustExist, true)
            .await
            .map_err(|e| {
                invalid(
                    &def.name,
                    format!("instance `{key}` does not start on it (nothing was kept): {e}"),
                )
            })?;
        cell.check_workflow().await
    }
}

/// Takes up, every [`DEPLOY_LOOK`], the deploys recorded in the cluster
/// after the deploy `taken` (see the module docs), while the core is
/// there and not shutting down.
pub(crate) async fn follow_deploys(core: Weak<Core>, mut taken: i64) {
    loop {
        tokio::time::sleep(DEPLOY_LOOK).await;
        let Some(core) = core.upgrade() else {
            return;
        };
        let Some(cluster) = core.store.cluster().cloned() else {
            return;
        };
        if core.is_shutting_down() || cluster.has_left() {
            return;
        }
        let records = match cluster.deploys_after(taken).await {
            Ok(records) => records,
            Err(e) => {
                tracing::warn!(error = %e, "cannot look for deploys made through other hosts");
                continue;
            }
        };
        let mut all_taken = true;
        for record in &records {
            if let Err(e) = core.take_up(&cluster, record).await {
                all_taken = false;
                tracing::error!(
                    actor = %record.actor,
                    version = record.version,
                    digest = %record.digest,
                    error = %e,
                    "a deploy made through another host cannot run here; this host runs the actor's earlier version"
                );
            }
            taken = taken.max(record.seq);
        }
        if !records.is_empty()
            && all_taken
            && let Err(e) = cluster.took_up(taken).await
        {
            tracing::warn!(error = %e, "cannot say in the cluster which deploys this host took up");
        }
    }
}

/// Where a host of `cluster` starts: `specs` with the file of each
/// actor the cluster deployed replaced by its last deploy's component
/// (written under `data_dir/deployed/`, by digest), the versions those
/// are, and the last deploy recorded (the first one [`follow_deploys`]
/// need not take up).
pub(crate) async fn starting_point(
    cluster: &Cluster,
    data_dir: &Path,
    specs: &[ActorSpec],
) -> anyhow::Result<(Vec<ActorSpec>, HashMap<String, u64>, i64)> {
    let unavailable = |e: ClusterError| anyhow::anyhow!("cannot read the cluster's deploys: {e}");
    let records = cluster.deploys_after(0).await.map_err(unavailable)?;
    let dir = data_dir.join(DEPLOYED_DIR);
    let mut specs = specs.to_vec();
    let mut versions = HashMap::new();
    let mut kept = Vec::new();
    for record in &records {
        let Some(spec) = specs.iter_mut().find(|spec| spec.name == record.actor) else {
            continue;
        };
        let path = dir.join(format!("{}.wasm", record.digest));
        if !path.exists() {
            let bytes = cluster
                .component(&record.digest)
                .await
                .map_err(unavailable)?
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "the cluster's last deploy of `{}` (version {}) has no component {}",
                        record.actor,
                        record.version,
                        record.digest
                    )
                })?;
            write_component(&dir, &path, &bytes)?;
        }
        let manifest = std::fs::read(&spec.component).map(|bytes| definition::digest(&bytes));
        if manifest
            .as_ref()
            .is_ok_and(|digest| *digest == record.digest)
        {
            tracing::info!(
                actor = %record.actor,
                version = record.version,
                "runs the cluster's last deploy, which is the manifest's component"
            );
        } else {
            tracing::warn!(
                actor = %record.actor,
                version = record.version,
                digest = %record.digest,
                manifest = %spec.component.display(),
                "the manifest names another component than the cluster's last deploy of the actor; \
                 this host runs the cluster's (deploy the manifest's with `burrow deploy` to change it)"
            );
        }
        spec.component = path.clone();
        versions.insert(record.actor.clone(), record.version);
        kept.push(path);
    }
    // Components of deploys since replaced are of no use any more.
    if let Ok(entries) = std::fs::read_dir(&dir) {
        for entry in entries.flatten() {
            if !kept.contains(&entry.path()) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    let last = records.iter().map(|record| record.seq).max().unwrap_or(0);
    Ok((specs, versions, last))
}

/// Where a host of a cluster keeps the components of the deploys it runs,
/// under its data directory.
const DEPLOYED_DIR: &str = "deployed";

/// Writes `bytes` at `path` in `dir` whole: beside it first, synced, then
/// renamed over it.
fn write_component(dir: &Path, path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    let context = || format!("cannot write {}", path.display());
    std::fs::create_dir_all(dir).map_err(|e| anyhow::anyhow!("{}: {e}", context()))?;
    let partial = path.with_extension("partial");
    let mut file =
        std::fs::File::create(&partial).map_err(|e| anyhow::anyhow!("{}: {e}", context()))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .and_then(|()| std::fs::rename(&partial, path))
        .map_err(|e| anyhow::anyhow!("{}: {e}", context()))
}

/// The next version of an actor on a host alone.
fn next_version(running: &Option<Arc<ActorDefinition>>) -> u64 {
    running.as_ref().map_or(0, |running| running.version) + 1
}

/// A copy of `def` (its compiled component shared), as version 0.
fn copy(def: &ActorDefinition) -> ActorDefinition {
    ActorDefinition {
        name: def.name.clone(),
        options: def.options.clone(),
        pre: def.pre.clone(),
        version: 0,
        digest: def.digest.clone(),
    }
}

/// The cluster's last deploy of `actor`, if there is one with a
/// component before it (what `--previous` puts back).
async fn last_with_previous(cluster: &Cluster, actor: &str) -> Result<DeployRecord, Error> {
    cluster
        .last_deploy(actor)
        .await
        .map_err(|e| unrecorded(actor, e))?
        .filter(|last| !last.previous_digest.is_empty())
        .ok_or(Error::NoPrevious(actor.into()))
}

/// A deploy the cluster could not record: nothing changed.
fn unrecorded(actor: &str, e: ClusterError) -> Error {
    Error::ClusterUnavailable(format!(
        "the deploy of `{actor}` was not recorded in the cluster (nothing changed): {e}"
    ))
}

fn invalid(actor: &str, reason: String) -> Error {
    Error::InvalidComponent {
        actor: actor.into(),
        reason,
    }
}
