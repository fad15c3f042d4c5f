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

use std::sync::Arc;

use serde::Serialize;

use super::Core;
use crate::address::Address;
use crate::cell::Origin;
use crate::definition::{self, ActorDefinition};
use crate::error::{Divergence, Error};
use crate::storage::workflow::{self as workflow_db};

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
        let _one_at_a_time = self.deploying.lock().await;
        let running = self.deployable(actor).await?;
        let (engine, linker) = (self.engine.clone(), self.linker.clone());
        let cache = self
            .cache
            .try_clone()
            .map_err(|e| Error::Overloaded(format!("cannot open the compile cache: {e}")))?;
        let spec = self
            .actors
            .spec(actor)
            .ok_or_else(|| Error::UnknownActor(actor.into()))?;
        let (name, options) = (actor.to_owned(), spec.options.clone());
        // Compiling is CPU-bound: keep it off the async workers.
        let loaded = tokio::task::spawn_blocking(move || {
            definition::from_bytes(&engine, &linker, &cache, &name, &options, &bytes)
        })
        .await
        .map_err(|e| invalid(actor, format!("loading it failed: {e}")))?
        .map_err(|reason| invalid(actor, reason))?;
        self.swap(actor, running, loaded, check).await
    }

    /// Puts back the component `actor` ran before its last deploy.
    pub(crate) async fn roll_back(&self, actor: &str, check: bool) -> Result<Deployed, Error> {
        let _one_at_a_time = self.deploying.lock().await;
        let running = self.deployable(actor).await?;
        let previous = self
            .previous_of(actor)
            .ok_or(Error::NoPrevious(actor.into()))?;
        let previous = ActorDefinition {
            name: previous.name.clone(),
            options: previous.options.clone(),
            pre: previous.pre.clone(),
            version: 0,
            digest: previous.digest.clone(),
        };
        self.swap(actor, running, previous, check).await
    }

    /// The running definition of `actor` (`None` if its component failed
    /// to load), if this host may deploy it: once its component is
    /// compiled, if it is still compiling.
    async fn deployable(&self, actor: &str) -> Result<Option<Arc<ActorDefinition>>, Error> {
        if self.is_shutting_down() {
            return Err(Error::ShuttingDown);
        }
        if self.store.cluster().is_some() {
            return Err(Error::NotSupported(format!(
                "deploying `{actor}` on a host of a cluster is not supported: each host \
                 loads the manifest's component; restart the hosts one by one with the new one"
            )));
        }
        match self.actors.ready(actor, None).await {
            Ok(running) => Ok(Some(running)),
            Err(Error::LoadFailed { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn previous_of(&self, actor: &str) -> Option<Arc<ActorDefinition>> {
        let previous = self.previous.lock().unwrap_or_else(|e| e.into_inner());
        previous.get(actor).cloned()
    }

    /// With `check`, replays the unfinished workflows against `new`
    /// first; then makes it the running definition.
    async fn swap(
        &self,
        actor: &str,
        running: Option<Arc<ActorDefinition>>,
        new: ActorDefinition,
        check: bool,
    ) -> Result<Deployed, Error> {
        let version = running.as_ref().map_or(0, |running| running.version) + 1;
        let new = Arc::new(new.with_version(version));
        let checked = if check {
            let (checked, divergences) = self.check_workflows(&new).await?;
            if !divergences.is_empty() {
                return Err(Error::WouldDiverge {
                    actor: actor.into(),
                    divergences,
                });
            }
            checked
        } else {
            0
        };
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
        Ok(Deployed {
            actor: actor.into(),
            version: new.version,
            digest: new.digest.clone(),
            previous_digest,
            checked,
        })
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
        if !workflow_db::has_schema(&conn).map_err(storage)? {
            return Ok(false);
        }
        let record = workflow_db::record(&conn).map_err(storage)?;
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

fn invalid(actor: &str, reason: String) -> Error {
    Error::InvalidComponent {
        actor: actor.into(),
        reason,
    }
}
