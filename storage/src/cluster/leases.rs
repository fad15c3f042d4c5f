//! Leases: which host owns an instance, at which epoch.
//!
//! An instance is owned by at most one member at a time: its row's
//! `owner`. A host takes a lease ([`acquire`]) when the row has no owner,
//! when it is its own, or when the owner's membership has been expired for
//! longer than the safety margin (by PostgreSQL's clock), which it is at
//! once when the owner's session is gone (`members.rs`); taking it adds
//! one to the row's `epoch`, the fencing token every later write of the
//! new owner carries (`shipper.rs`), so that nothing the old owner still
//! tries to write can land. A lease is valid for as long as its holder's
//! membership is (`members.rs`): a heartbeat renews all of a host's
//! leases at once. Leases are given back when a host leaves cleanly.
//!
//! [`LeaseSlot`] is what this host knows of one instance's lease: the
//! lease it holds (under which membership, at which epoch and replicated
//! version), whether its local copy is that version, the connections open
//! on that copy and the tail of its log.

use std::sync::{Mutex, MutexGuard};

use crate::address::Address;
use crate::pages::{Image, LogTail};

use super::{ClusterError, Shared, members};

/// A lease this host holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    /// The membership it was taken under.
    pub incarnation: u64,
    /// The instance's row.
    pub id: i64,
    pub epoch: i64,
    /// The replicated version (commits shipped), counting those queued.
    pub version: i64,
    /// The epoch of the last shipped commit.
    pub written_epoch: i64,
    /// The database's size in pages at that version.
    pub db_pages: u32,
    /// The local copy is that version.
    pub current: bool,
}

/// What this host knows of one instance's lease.
pub struct LeaseSlot {
    pub address: Address,
    /// Serializes the claims of the instance.
    pub claiming: tokio::sync::Mutex<()>,
    state: Mutex<SlotState>,
    /// Held while a write of the instance is made and queued, so that its
    /// writes reach the shipper in the order they were made.
    order: Mutex<()>,
}

#[derive(Default)]
pub struct SlotState {
    pub held: Option<Held>,
    /// Connections open on the local copy.
    pub open: usize,
    /// The log's tail while connections are open.
    pub tail: Option<LogTail>,
    /// The replicated version (written epoch, version) the local copy is
    /// known to be while no lease is held (`None`: unknown).
    pub known: Option<(i64, i64)>,
}

impl LeaseSlot {
    pub(super) fn new(address: Address) -> LeaseSlot {
        LeaseSlot {
            address,
            claiming: tokio::sync::Mutex::new(()),
            state: Mutex::new(SlotState::default()),
            order: Mutex::new(()),
        }
    }

    pub fn state(&self) -> MutexGuard<'_, SlotState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Orders this instance's writes (see the field).
    pub fn order(&self) -> MutexGuard<'_, ()> {
        self.order.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The lease held under `incarnation`, if any.
    pub fn held_under(&self, incarnation: u64) -> Option<Held> {
        self.state()
            .held
            .filter(|held| held.incarnation == incarnation)
    }
}

/// The replicated state of an instance, as its row says right after this
/// host took its lease.
#[derive(Debug, Clone, Copy)]
pub struct Taken {
    pub id: i64,
    pub epoch: i64,
    pub version: i64,
    pub written_epoch: i64,
    pub page_size: u32,
    pub pages: u32,
    /// When the instance was created (`None`: it does not exist).
    pub created_at: Option<i64>,
    /// The actor's last version deployed in the cluster (0: none), which
    /// this host must run before it serves the instance
    /// ([`Cluster::deployed_version`](super::Cluster::deployed_version)).
    pub deployed: u64,
}

/// Another member's lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub id: String,
    /// Its base URL.
    pub address: String,
    /// Its membership is unexpired (else it is within the safety margin,
    /// and nobody may serve the instance until that has passed).
    pub live: bool,
}

/// The outcome of trying to take a lease.
#[derive(Debug, Clone)]
pub enum Acquired {
    Taken(Taken),
    Elsewhere(Owner),
}

/// Takes the lease of `address` for member `me`, unless another member
/// holds it (a draining member asks `handover` first).
pub(super) async fn acquire(
    shared: &Shared,
    me: &str,
    address: &Address,
) -> Result<Acquired, ClusterError> {
    let client = shared.client().await?;
    let margin = shared.config.margin.as_secs_f64();
    let sessions = shared.member().session.is_some();
    let mut expired_owner = false;
    // The lease may change hands between the statements (given back, or
    // its owner expired by another host): a few rounds, then give up.
    for round in 1..=ACQUIRE_ROUNDS {
        let taken = client
            .query_opt(
                "INSERT INTO burrow_instances AS i (actor, key, owner, epoch)
                 SELECT $1, $2, $3, 1
                 WHERE EXISTS (SELECT 1 FROM burrow_hosts WHERE id = $3 AND expires_at > now())
                 ON CONFLICT (actor, key) DO UPDATE SET owner = EXCLUDED.owner, epoch = i.epoch + 1
                 WHERE (i.owner IS NULL OR i.owner = EXCLUDED.owner OR NOT EXISTS (
                           SELECT 1 FROM burrow_hosts h
                           WHERE h.id = i.owner AND h.expires_at + make_interval(secs => $4) > now()))
                   AND EXISTS (SELECT 1 FROM burrow_hosts WHERE id = $3 AND expires_at > now())
                 RETURNING id, epoch, version, written_epoch, page_size, pages, created_at,
                           (SELECT coalesce(max(version), 0) FROM burrow_deploys
                            WHERE actor = $1)",
                &[&&*address.actor, &&*address.key, &me, &margin],
            )
            .await?;
        if let Some(row) = taken {
            let deployed = row.get::<_, i64>(7) as u64;
            shared.saw_deployed(&address.actor, deployed);
            return Ok(Acquired::Taken(Taken {
                id: row.get(0),
                epoch: row.get(1),
                version: row.get(2),
                written_epoch: row.get(3),
                page_size: row.get::<_, i32>(4) as u32,
                pages: row.get::<_, i32>(5) as u32,
                created_at: row.get(6),
                deployed,
            }));
        }
        match owner_of(&client, address).await? {
            // Given back since: take it.
            None if round < ACQUIRE_ROUNDS => continue,
            // This host's own membership is not live (any more).
            None => return Err(ClusterError::NotMember),
            Some(owner) if owner.id == me => return Err(ClusterError::NotMember),
            // If that member's session is gone (its process died), its
            // row is expired now and the lease taken at the next round.
            Some(owner) if owner.live && sessions && !expired_owner => {
                expired_owner = true;
                if members::expire_the_gone(&client, shared.config.margin, Some(&owner.id)).await?
                    > 0
                {
                    tracing::info!(host = %owner.id, "the owner's session ended: its instances are taken over");
                }
                // Expired by this host or another: look again.
                continue;
            }
            Some(owner) => return Ok(Acquired::Elsewhere(owner)),
        }
    }
    Err(ClusterError::Unavailable(format!(
        "the lease of {address} changed hands {ACQUIRE_ROUNDS} times while this host tried to take it"
    )))
}

/// Rounds of [`acquire`] before it gives up.
const ACQUIRE_ROUNDS: usize = 4;

/// The member that holds the lease of `address`, if any.
pub(super) async fn owner_of(
    client: &tokio_postgres::Client,
    address: &Address,
) -> Result<Option<Owner>, ClusterError> {
    let row = client
        .query_opt(
            "SELECT i.owner, h.address, h.expires_at > now()
             FROM burrow_instances i JOIN burrow_hosts h ON h.id = i.owner
             WHERE i.actor = $1 AND i.key = $2",
            &[&&*address.actor, &&*address.key],
        )
        .await?;
    Ok(row.map(|row| Owner {
        id: row.get(0),
        address: row.get(1),
        live: row.get(2),
    }))
}

/// Writes the replicated database of instance `id` into `image`, page by
/// page as they come, so that a large database is never whole in memory.
pub(super) async fn restore(
    shared: &Shared,
    id: i64,
    mut image: Image,
) -> Result<(), ClusterError> {
    use futures_util::TryStreamExt;
    let client = shared.client().await?;
    let rows = client
        .query_raw(
            "SELECT pgno, data FROM burrow_pages WHERE instance = $1 ORDER BY pgno",
            [&id],
        )
        .await?;
    let mut rows = std::pin::pin!(rows);
    let written =
        |e: std::io::Error| ClusterError::Unavailable(format!("cannot write the database: {e}"));
    while let Some(row) = rows.try_next().await? {
        let number: i32 = row.get(0);
        let page: &[u8] = row.get(1);
        image.push(number as u32, page).map_err(written)?;
    }
    tokio::task::block_in_place(|| image.finish()).map_err(written)
}
