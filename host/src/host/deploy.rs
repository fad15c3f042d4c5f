//! Deploys through the public host. On a host alone, the core deploys
//! and checks (`runtime/deploy.rs`). In a cluster, the instances whose
//! workflows a check replays live on every host, so the check runs here,
//! instance by instance, where each lives: the core compiles the
//! candidate and makes sure the cluster holds it, and each instance of
//! the actor is checked against it by [`Host::check_instance`] on the host
//! that serves it (this one, which takes a free lease as any request
//! does, or the owner, through [`route::WORKFLOW_CHECK`]). Then the core
//! deploys, unchecked, and the deploy reaches every host.

use burrow_client::route;
use reqwest::Method;

use super::{Forwarded, Hop, Host};
use crate::address::validate_actor_name;
use crate::caller::Caller;
use crate::error::{Divergence, Error};
use crate::runtime::{Deployed, WorkflowCheck};

impl Host {
    /// Replaces the component of `actor` with the component `bytes` (in
    /// a cluster, on every host): calls in flight finish on the old code,
    /// and each instance's next operation runs the new one after its
    /// `migrate`. With `check`, every unfinished workflow of the actor
    /// (in a cluster, on whichever host serves it) is replayed against the
    /// new component first (nothing kept), and the deploy is refused
    /// ([`Error::WouldDiverge`]) if one would diverge. A component that
    /// does not load is refused ([`Error::InvalidComponent`]). Nothing
    /// changes on a refusal.
    pub async fn deploy(
        &self,
        actor: &str,
        bytes: Vec<u8>,
        check: bool,
    ) -> Result<Deployed, Error> {
        validate_actor_name(actor)?;
        if !check || self.core.store.cluster().is_none() {
            return self.core.deploy(actor, bytes, check).await;
        }
        let digest = self.core.candidate(actor, &bytes).await?;
        let checked = self.check_everywhere(actor, &digest).await?;
        self.core.deploy_checked(actor, bytes, false, checked).await
    }

    /// Puts back the component `actor` ran before its last deploy (in a
    /// cluster, before the cluster's last deploy of it), as a deploy of
    /// it (with `check`, checked first).
    pub async fn deploy_previous(&self, actor: &str, check: bool) -> Result<Deployed, Error> {
        validate_actor_name(actor)?;
        if !check || self.core.store.cluster().is_none() {
            return self.core.roll_back(actor, check).await;
        }
        let digest = self.core.previous_candidate(actor).await?;
        let checked = self.check_everywhere(actor, &digest).await?;
        self.core.roll_back_checked(actor, false, checked).await
    }

    /// Replays the unfinished workflow of (`actor`, `key`) against the
    /// component `digest`, which the cluster holds, in a dry run, on the
    /// host that serves the instance (this one, taking its lease if it is
    /// free, or its owner's).
    pub async fn check_instance(
        &self,
        hop: Hop,
        actor: &str,
        key: &str,
        digest: &str,
    ) -> Result<WorkflowCheck, Error> {
        let core = &self.core;
        let path = format!(
            "{}?digest={digest}",
            route::path(route::WORKFLOW_CHECK, &[actor, key])
        );
        self.route(
            hop,
            actor,
            key,
            || core.check_instance(actor, key, digest),
            |base| {
                let path = path.clone();
                async move {
                    let answer = self
                        .forward(
                            &base,
                            Method::POST,
                            &path,
                            None,
                            None,
                            None,
                            &Caller::Host,
                            bytes::Bytes::new(),
                            self.forward_timeout(actor, std::time::Duration::ZERO),
                        )
                        .await?;
                    Ok(checked_there(actor, key, &answer))
                }
            },
        )
        .await
    }

    /// Checks every instance of `actor` against the component `digest`
    /// where it lives: how many unfinished workflows replay, or the
    /// refusal naming those that would diverge.
    async fn check_everywhere(&self, actor: &str, digest: &str) -> Result<usize, Error> {
        if !self.core.candidate_runs_workflows(actor, digest).await? {
            return Ok(0);
        }
        let mut checked = 0;
        let mut divergences = Vec::new();
        for key in self.keys(actor).await? {
            match self.check_instance(Hop::Origin, actor, &key, digest).await {
                Ok(WorkflowCheck::Nothing) => {}
                Ok(WorkflowCheck::Replays) => checked += 1,
                Ok(WorkflowCheck::Diverges(message)) => {
                    checked += 1;
                    divergences.push(Divergence { key, message });
                }
                // Destroyed meanwhile: nothing to replay.
                Err(Error::NoSuchInstance { .. }) => {}
                Err(e) => {
                    return Err(Error::ClusterUnavailable(format!(
                        "the deploy of `{actor}` was not checked (nothing changed): \
                         instance `{key}` could not be checked: {e}"
                    )));
                }
            }
        }
        if divergences.is_empty() {
            Ok(checked)
        } else {
            Err(Error::WouldDiverge {
                actor: actor.into(),
                divergences,
            })
        }
    }
}

/// What the host that serves an instance answered to its check.
fn checked_there(actor: &str, key: &str, answer: &Forwarded) -> Result<WorkflowCheck, Error> {
    if (200..300).contains(&answer.status) {
        return serde_json::from_slice(&answer.body).map_err(|e| {
            Error::ClusterUnavailable(format!("another host answered a check with {e}"))
        });
    }
    Err(super::route::remote_error(actor, key, answer))
}
