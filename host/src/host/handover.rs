//! Moving instances between the hosts of a cluster, each at a quiet
//! moment, without a failure: a drain moves every instance a host serves
//! to the others, so that it can be stopped with nothing left; and every
//! host hands the idle instances it holds beyond its fair share to the
//! hosts that hold the fewest, so that a host that joins gets its share. See
//! `storage/src/cluster/handover.rs` for what the cluster does.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::address::Address;
use crate::directory::SlotState;
use crate::error::Error;
use crate::runtime::Core;
use crate::storage::{Cluster, ClusterError, Held, Owner};

use super::Host;

/// The longest a drain goes on looking for leases to hand over.
const DRAIN_LIMIT: Duration = Duration::from_secs(600);

/// Leases a host may hold beyond its fair share (the leases of live
/// members over those not draining, rounded up, which all can hold at
/// once, so nothing moves back and forth) before it hands some over.
const SPREAD_SLACK: u64 = 0;

/// Heartbeats between two looks at this host's share.
const SPREAD_EVERY_HEARTBEATS: u32 = 5;

/// Instances handed over at most per look, so that a host that joins
/// takes its share over a few looks rather than at once.
const SPREAD_AT_MOST: usize = 64;

impl Host {
    /// Moves every instance this host serves to the other members of its
    /// cluster: for each, waits until no operation runs on it, puts it to
    /// sleep (its commits shipped) and hands its lease to the member that
    /// holds the fewest, before any operation can start on it here again.
    /// From the start, this host takes no instance it does not hold and
    /// its timer claims no due work; requests that reach it are forwarded.
    /// Returns `{"moved", "ms"}`. Refused on a host alone, and when no
    /// other member could take the instances.
    pub async fn drain(&self) -> Result<Value, Error> {
        let Some(cluster) = self.core.store.cluster() else {
            return Err(Error::NotSupported(
                "this host is not part of a cluster: there is nothing to drain it into".into(),
            ));
        };
        let unavailable = |e: ClusterError| Error::ClusterUnavailable(format!("cannot drain: {e}"));
        let nobody = || {
            Error::ClusterUnavailable(
                "cannot drain: no other live host can take the instances".into(),
            )
        };
        let begun = Instant::now();
        if cluster.least_loaded().await.map_err(unavailable)?.is_none() {
            return Err(nobody());
        }
        cluster.begin_drain().await.map_err(unavailable)?;
        tracing::info!("draining: handing every instance to the other hosts");
        let mut moved = 0u64;
        loop {
            let held = cluster.held();
            if held.is_empty() {
                break;
            }
            if begun.elapsed() > DRAIN_LIMIT {
                return Err(Error::ClusterUnavailable(format!(
                    "cannot drain: {} instances still here after {} s",
                    held.len(),
                    DRAIN_LIMIT.as_secs()
                )));
            }
            for (address, lease) in held {
                let to = cluster
                    .least_loaded()
                    .await
                    .map_err(unavailable)?
                    .ok_or_else(nobody)?;
                if hand_over(&self.core, cluster, &address, lease, &to)
                    .await
                    .map_err(unavailable)?
                {
                    self.core.metrics.handed_over("drain");
                    moved += 1;
                }
            }
        }
        // Leases handed to this host that it never took up.
        for (address, id, epoch) in cluster.unclaimed(i64::MAX).await.map_err(unavailable)? {
            let to = cluster
                .least_loaded()
                .await
                .map_err(unavailable)?
                .ok_or_else(nobody)?;
            if cluster
                .pass_on(&address, id, epoch, &to)
                .await
                .map_err(unavailable)?
            {
                self.core.metrics.handed_over("drain");
                moved += 1;
            }
        }
        let ms = begun.elapsed().as_millis() as u64;
        tracing::info!(
            moved,
            ms,
            "drained: this host serves no instance; stop it when you like"
        );
        Ok(json!({ "moved": moved, "ms": ms }))
    }
}

/// Hands the instance at `address`, whose lease this host holds as
/// `lease`, to `to`: waits until no operation runs on it, puts it to
/// sleep, and hands the lease over before any operation can start on it
/// here again. Returns whether it moved (not if its lease changed
/// meanwhile).
async fn hand_over(
    core: &Core,
    cluster: &Cluster,
    address: &Address,
    lease: Held,
    to: &Owner,
) -> Result<bool, ClusterError> {
    // Held until the lease is handed over.
    let slot = core.directory.get(address);
    let mut state = match &slot {
        Some(slot) => Some(slot.state.lock().await),
        None => None,
    };
    if let Some(state) = state.as_deref_mut()
        && let SlotState::Awake(cell) = std::mem::replace(state, SlotState::Asleep)
    {
        cell.sleep().await;
    }
    // The lease may have changed while the instance was busy.
    let incarnation = cluster.member().incarnation;
    let Some(lease) = cluster
        .slot(address)
        .held_under(incarnation)
        .filter(|held| held.epoch == lease.epoch)
    else {
        return Ok(false);
    };
    let moved = cluster.hand_over(address, lease, to).await?;
    if moved {
        tracing::debug!(actor = %address.actor, key = %address.key, to = %to.id, "handed over");
    }
    drop(state);
    Ok(moved)
}

/// Every few heartbeats, hands what this host holds beyond its fair share
/// to the hosts that hold the fewest (not while it drains). Runs until the
/// core is dropped or shuts down.
pub(super) async fn spread(core: Weak<Core>) {
    loop {
        let every = match core.upgrade().as_ref().and_then(|c| c.store.cluster()) {
            Some(cluster) => cluster.config().heartbeat * SPREAD_EVERY_HEARTBEATS,
            None => return,
        };
        tokio::time::sleep(every).await;
        let Some(core) = core.upgrade() else { return };
        if core.is_shutting_down() {
            return;
        }
        let Some(cluster) = core.store.cluster().cloned() else {
            return;
        };
        if cluster.draining() || cluster.has_left() || !cluster.member().valid() {
            continue;
        }
        match spread_once(&core, &cluster).await {
            Ok(0) => {}
            Ok(moved) => tracing::info!(
                moved,
                "handed instances beyond this host's share to the others"
            ),
            Err(e) => {
                tracing::warn!(error = %e, "cannot spread this host's instances; the next look tries again")
            }
        }
    }
}

/// One look at this host's share; returns how many instances moved.
async fn spread_once(core: &Arc<Core>, cluster: &Cluster) -> Result<usize, ClusterError> {
    let excess = cluster.excess(SPREAD_SLACK).await? as usize;
    if excess == 0 {
        return Ok(0);
    }
    let mut moved = 0;
    // First the leases handed to this host that it never took up: nothing
    // of them is here.
    let limit = excess.min(SPREAD_AT_MOST);
    for (address, id, epoch) in cluster.unclaimed(limit as i64).await? {
        let Some(to) = cluster.least_loaded().await? else {
            return Ok(moved);
        };
        if cluster.pass_on(&address, id, epoch, &to).await? {
            core.metrics.handed_over("spread");
            moved += 1;
        }
    }
    // Only instances idle since the last look, the quietest first: asleep
    // here, then the longest idle. One in use stays where it is (its
    // callers would pay for the move).
    let quiet = cluster.config().heartbeat * SPREAD_EVERY_HEARTBEATS;
    let mut held: Vec<(Duration, Address, Held)> = cluster
        .held()
        .into_iter()
        .map(|(address, lease)| {
            let idle = core
                .directory
                .get(&address)
                .map_or(Duration::MAX, |slot| slot.idle_for());
            (idle, address, lease)
        })
        .filter(|(idle, _, _)| *idle >= quiet)
        .collect();
    held.sort_by_key(|(idle, _, _)| std::cmp::Reverse(*idle));
    for (_, address, lease) in held.into_iter().take(limit.saturating_sub(moved)) {
        let Some(to) = cluster.least_loaded().await? else {
            break;
        };
        if hand_over(core, cluster, &address, lease, &to).await? {
            core.metrics.handed_over("spread");
            moved += 1;
        }
    }
    Ok(moved)
}
