//! Membership: each host process registers itself under an id of its own
//! (its name and a random suffix, new at every start), with the address
//! other hosts reach it at, and keeps itself a member by a heartbeat.
//!
//! A member's row expires at `expires_at`, which PostgreSQL sets to its own
//! `now()` plus the lease duration at every heartbeat. The host counts its
//! membership (and with it every lease it holds) as valid by its own
//! monotonic clock: until the moment it *sent* the last heartbeat that
//! succeeded, plus the lease, minus the safety margin. PostgreSQL read
//! `now()` after that moment, so the host stops serving at least a margin
//! before its row expires; other hosts take its instances over only after
//! the row has been expired for another margin (`leases.rs`). Between the
//! two, clocks may run at different rates by up to a margin per lease
//! duration and a host may still never serve what another one owns.
//!
//! A heartbeat that finds the row expired (the host was paused, or cut
//! off, for longer than its lease) does not renew it: the host joins again
//! under a new id, and every lease it held under the old one is gone: it
//! forgets them, gives them back in PostgreSQL and deletes the old row, so
//! that other hosts take those instances at once. What it still had in
//! flight under the old id is refused by the fence of the commit it would
//! make (`shipper.rs`). A heartbeat that renews also gives back the leases
//! of members expired for more than the margin, so that no lease stays
//! with a host that is gone.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use super::{ClusterError, Shared};

/// This host's membership.
#[derive(Debug, Clone)]
pub(crate) struct Member {
    /// The id the host registered under.
    pub(crate) id: String,
    /// How many times this process joined (leases taken under an earlier
    /// one are void).
    pub(crate) incarnation: u64,
    /// Until when the membership, and every lease held under it, is valid
    /// by this host's clock.
    pub(crate) valid_until: Instant,
}

impl Member {
    /// Whether this host may serve its instances now.
    pub(crate) fn valid(&self) -> bool {
        Instant::now() < self.valid_until
    }
}

/// A new id for a host named `name`: the name and eight hex digits.
fn new_id(name: &str) -> String {
    let mut hash = Sha256::new();
    hash.update(std::process::id().to_le_bytes());
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    hash.update(now.as_nanos().to_le_bytes());
    hash.update(name.as_bytes());
    let digest = hash.finalize();
    format!("{name}-{}", hex::encode(&digest[..4]))
}

/// Registers this host under a new id. Returns the membership, valid from
/// the moment the registration was sent.
pub(super) async fn join(shared: &Shared, incarnation: u64) -> Result<Member, ClusterError> {
    let config = &shared.config;
    let id = new_id(&config.name);
    let sent = Instant::now();
    let client = shared.client().await?;
    client
        .execute(
            "INSERT INTO burrow_hosts (id, name, address, expires_at)
             VALUES ($1, $2, $3, now() + make_interval(secs => $4))",
            &[
                &id,
                &config.name,
                &config.advertise,
                &config.lease.as_secs_f64(),
            ],
        )
        .await?;
    Ok(Member {
        id,
        incarnation,
        valid_until: sent + shared.valid_for(),
    })
}

/// Renews the membership of `id`, unless it has expired. Returns whether
/// it was renewed.
async fn renew(shared: &Shared, id: &str) -> Result<bool, ClusterError> {
    let client = shared.client().await?;
    let renewed = client
        .execute(
            "UPDATE burrow_hosts SET expires_at = now() + make_interval(secs => $2)
             WHERE id = $1 AND expires_at > now()",
            &[&id, &shared.config.lease.as_secs_f64()],
        )
        .await?;
    Ok(renewed == 1)
}

/// Gives back every lease of `id`, this host's membership that expired,
/// and forgets it: other hosts take its instances at once. Nothing it
/// wrote can land any more (every write is fenced by the membership being
/// unexpired), and this host has forgotten those leases already.
async fn leave_expired(shared: &Shared, id: &str) -> Result<u64, ClusterError> {
    let mut client = shared.client().await?;
    let tx = client.transaction().await?;
    let released = tx
        .execute(
            "UPDATE burrow_instances SET owner = NULL WHERE owner = $1",
            &[&id],
        )
        .await?;
    tx.execute(
        "DELETE FROM burrow_hosts WHERE id = $1 AND expires_at <= now()",
        &[&id],
    )
    .await?;
    tx.commit().await?;
    Ok(released)
}

/// Gives back the leases of members whose membership expired more than a
/// margin ago (a host that died, or was paused or cut off and has not come
/// back): their instances are anyone's to take already, and now nothing
/// shows them held.
async fn release_expired(shared: &Shared) -> Result<u64, ClusterError> {
    let client = shared.client().await?;
    let margin = shared.config.margin.as_secs_f64();
    Ok(client
        .execute(
            "UPDATE burrow_instances SET owner = NULL
             WHERE owner IN (SELECT id FROM burrow_hosts
                             WHERE expires_at + make_interval(secs => $1) < now())",
            &[&margin],
        )
        .await?)
}

/// Members that expired this many leases ago and hold no lease are
/// forgotten.
const FORGET_AFTER_LEASES: u32 = 60;
/// Every this many heartbeats, a member forgets such members.
const FORGET_EVERY: u64 = 100;

/// Deletes the rows of members long expired that hold no lease.
async fn forget_the_departed(shared: &Shared) -> Result<u64, ClusterError> {
    let client = shared.client().await?;
    let after = (shared.config.lease * FORGET_AFTER_LEASES).as_secs_f64();
    Ok(client
        .execute(
            "DELETE FROM burrow_hosts h
             WHERE h.expires_at < now() - make_interval(secs => $1)
               AND NOT EXISTS (SELECT 1 FROM burrow_instances i WHERE i.owner = h.id)",
            &[&after],
        )
        .await?)
}

/// Keeps this host a member: renews its row every heartbeat, and joins
/// again under a new id when the row has expired. Runs until the cluster
/// is dropped or leaves.
pub(super) async fn beat(shared: std::sync::Weak<Shared>, heartbeat: Duration) {
    let mut beats: u64 = 0;
    loop {
        tokio::time::sleep(heartbeat).await;
        beats += 1;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        if shared.left() {
            return;
        }
        if beats.is_multiple_of(FORGET_EVERY)
            && let Err(e) = forget_the_departed(&shared).await
        {
            tracing::warn!(error = %e, "cannot forget members that left long ago");
        }
        let member = shared.member();
        let sent = Instant::now();
        let timeout = shared.config.lease;
        match tokio::time::timeout(timeout, renew(&shared, &member.id)).await {
            Ok(Ok(true)) => {
                shared.renewed(&member, sent + shared.valid_for());
                if let Err(e) = release_expired(&shared).await {
                    tracing::warn!(error = %e, "cannot give back the leases of expired members");
                }
            }
            Ok(Ok(false)) => {
                tracing::warn!(
                    host = %member.id,
                    "this host's membership expired (it was paused or cut off for longer than its lease); it joins again, and the instances it held are taken anew"
                );
                match join(&shared, member.incarnation + 1).await {
                    Ok(joined) => {
                        tracing::info!(host = %joined.id, "joined the cluster again");
                        shared.rejoined(joined);
                        if let Err(e) = leave_expired(&shared, &member.id).await {
                            tracing::warn!(host = %member.id, error = %e, "cannot give back the leases of the expired membership; other hosts take them a margin after it expired");
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot join the cluster again; the next heartbeat tries")
                    }
                }
            }
            Ok(Err(e)) => {
                tracing::warn!(host = %member.id, error = %e, "the heartbeat failed; this host stops serving its instances when its lease runs out")
            }
            Err(_) => {
                tracing::warn!(host = %member.id, "the heartbeat took longer than the lease; this host stops serving its instances when its lease runs out")
            }
        }
    }
}
