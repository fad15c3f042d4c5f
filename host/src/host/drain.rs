//! Draining a host of a cluster: every instance it serves moves to the
//! other members, each at a quiet moment, and the host keeps answering
//! (forwarding) until it is stopped with nothing left. See
//! `storage/cluster/handover.rs` for what the cluster does.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::directory::SlotState;
use crate::error::Error;

use super::Host;

/// The longest a drain goes on looking for leases to hand over.
const DRAIN_LIMIT: Duration = Duration::from_secs(600);

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
        let unavailable = |e: crate::storage::cluster::ClusterError| {
            Error::ClusterUnavailable(format!("cannot drain: {e}"))
        };
        let begun = Instant::now();
        if cluster.least_loaded().await.map_err(unavailable)?.is_none() {
            return Err(Error::ClusterUnavailable(
                "cannot drain: no other live host can take the instances".into(),
            ));
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
                let Some(to) = cluster.least_loaded().await.map_err(unavailable)? else {
                    return Err(Error::ClusterUnavailable(
                        "cannot drain: no other live host can take the instances".into(),
                    ));
                };
                // Held until the lease is handed over: no operation starts
                // on the instance here meanwhile.
                let slot = self.core.directory.get(&address);
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
                let member = cluster.member();
                let Some(lease) = cluster
                    .slot(&address)
                    .held_under(member.incarnation)
                    .filter(|held| held.epoch == lease.epoch)
                else {
                    continue;
                };
                if cluster
                    .hand_over(&address, lease, &to)
                    .await
                    .map_err(unavailable)?
                {
                    moved += 1;
                    tracing::debug!(actor = %address.actor, key = %address.key, to = %to.id, "handed over");
                }
                drop(state);
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
