//! Handing instances over: a drain moves every instance a host serves to
//! the other members, each at a quiet moment, so that the host can stop
//! with nothing left and no request fails; and a host that holds more
//! than its share ([`Cluster::excess`]) hands the rest to the members that
//! hold the fewest, so that a host that joins gets its share.
//!
//! A draining member takes no lease it does not hold ([`acquire`] points
//! the caller to another member instead, which takes the instance when the
//! request is forwarded to it), and its timer claims no due work. For each
//! lease it holds, the host above puts the instance to sleep (its commits
//! shipped, no operation running, none able to start here) and then hands
//! the lease to the live member that holds the fewest ([`hand_over`]): one
//! statement sets the row's owner to that member and adds one to the
//! epoch, only if this host still holds it at the epoch it took it at, so
//! anything this host might still try to write for it is fenced out. The
//! new owner learns of it at its next use of the instance (a request, or
//! its timer finding the instance's work due), which takes the lease as
//! its own. Requests that reach the draining host afterwards are forwarded
//! to the new owner.

use std::sync::atomic::Ordering;

use crate::address::Address;

use super::{Acquired, Cluster, ClusterError, Held, Owner, Shared, leases, lock};

impl Cluster {
    /// Starts draining this host: from now on it takes no lease it does
    /// not hold, and the other members see it draining.
    pub async fn begin_drain(&self) -> Result<(), ClusterError> {
        self.shared.draining.store(true, Ordering::Release);
        let me = self.member().id;
        self.run(move |shared| async move {
            let client = shared.client().await?;
            client
                .execute(
                    "UPDATE burrow_hosts SET draining = true WHERE id = $1",
                    &[&me],
                )
                .await?;
            Ok(())
        })
        .await
    }

    /// Whether this host is draining.
    pub fn draining(&self) -> bool {
        self.shared.draining()
    }

    /// The instances whose lease this host holds now.
    pub fn held(&self) -> Vec<(Address, Held)> {
        let incarnation = self.member().incarnation;
        lock(&self.shared.leases)
            .values()
            .filter_map(|slot| Some((slot.address.clone(), slot.held_under(incarnation)?)))
            .collect()
    }

    /// The live member, other than this host and not draining, that holds
    /// the fewest leases (`None`: there is none).
    pub async fn least_loaded(&self) -> Result<Option<Owner>, ClusterError> {
        let me = self.member().id;
        self.run(move |shared| async move { least_loaded(&shared, &me).await })
            .await
    }

    /// Leases this host holds in PostgreSQL but has not taken up here
    /// (handed to it, and not used since), at most `limit`: each
    /// instance's address, row and epoch. No connection of this host is
    /// open on them; taking one up raises its epoch.
    pub async fn unclaimed(&self, limit: i64) -> Result<Vec<(Address, i64, i64)>, ClusterError> {
        let me = self.member().id;
        let rows = self
            .run(move |shared| async move {
                let client = shared.client().await?;
                Ok(client
                    .query(
                        "SELECT actor, key, id, epoch FROM burrow_instances
                         WHERE owner = $1 ORDER BY id LIMIT $2",
                        &[&me, &limit],
                    )
                    .await?)
            })
            .await?;
        let held: std::collections::HashSet<Address> = self
            .held()
            .into_iter()
            .map(|(address, _)| address)
            .collect();
        Ok(rows
            .into_iter()
            .map(|row| {
                let address = Address {
                    actor: row.get::<_, String>(0).into(),
                    key: row.get::<_, String>(1).into(),
                };
                (address, row.get(2), row.get(3))
            })
            .filter(|(address, _, _)| !held.contains(address))
            .collect())
    }

    /// Hands the lease of an instance this host has not taken up (see
    /// [`Cluster::unclaimed`]; row `id` at `epoch`) to `to`. Returns
    /// whether it moved (not if this host took it up meanwhile).
    pub async fn pass_on(
        &self,
        address: &Address,
        id: i64,
        epoch: i64,
        to: &Owner,
    ) -> Result<bool, ClusterError> {
        let me = self.member().id;
        let target = to.id.clone();
        let moved = self
            .run(move |shared| async move { give(&shared, id, &me, epoch, &target).await })
            .await?;
        if moved {
            self.note_owner(address, Some(to.clone()));
        }
        Ok(moved)
    }

    /// How many leases this host holds beyond its fair share (the leases
    /// of live members spread evenly over those not draining) plus
    /// `slack`; 0 when it holds no more than that.
    pub async fn excess(&self, slack: u64) -> Result<u64, ClusterError> {
        let me = self.member().id;
        self.run(move |shared| async move {
            let client = shared.client().await?;
            let row = client
                .query_one(
                    "SELECT count(*) FILTER (WHERE i.owner = $1),
                            count(*),
                            (SELECT count(*) FROM burrow_hosts
                             WHERE expires_at > now() AND NOT draining)
                     FROM burrow_instances i JOIN burrow_hosts h ON h.id = i.owner
                     WHERE h.expires_at > now()",
                    &[&me],
                )
                .await?;
            let (mine, total, members): (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
            let fair = (total as u64).div_ceil(members.max(1) as u64);
            Ok((mine as u64).saturating_sub(fair + slack))
        })
        .await
    }

    /// Hands the lease of `address`, held as `held`, to `to`: the caller
    /// has put the instance to sleep and keeps any operation from starting
    /// on it here until this returns. Returns whether the lease was still
    /// this host's to give (if not, another host has it already).
    pub async fn hand_over(
        &self,
        address: &Address,
        held: Held,
        to: &Owner,
    ) -> Result<bool, ClusterError> {
        let me = self.member().id;
        let target = to.id.clone();
        let handed = self
            .run(
                move |shared| async move { give(&shared, held.id, &me, held.epoch, &target).await },
            )
            .await?;
        let slot = self.slot(address);
        slot.forget_lease();
        if handed {
            self.note_owner(address, Some(to.clone()));
        }
        // Its clients connect again, and reach the new owner.
        self.shared.lost(Some(address));
        Ok(handed)
    }
}

impl Shared {
    pub(super) fn draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }
}

/// Gives the lease of row `id`, held by `me` at `epoch`, to the live
/// member `to`, raising the epoch; whether it was still `me`'s to give.
async fn give(
    shared: &Shared,
    id: i64,
    me: &str,
    epoch: i64,
    to: &str,
) -> Result<bool, ClusterError> {
    let client = shared.client().await?;
    let rows = client
        .execute(
            "UPDATE burrow_instances SET owner = $2, epoch = epoch + 1
             WHERE id = $1 AND owner = $3 AND epoch = $4
               AND EXISTS (SELECT 1 FROM burrow_hosts WHERE id = $2 AND expires_at > now())",
            &[&id, &to, &me, &epoch],
        )
        .await?;
    Ok(rows == 1)
}

/// The live member other than `me`, not draining, with the fewest leases.
async fn least_loaded(shared: &Shared, me: &str) -> Result<Option<Owner>, ClusterError> {
    let client = shared.client().await?;
    let row = client
        .query_opt(
            "SELECT h.id, h.address FROM burrow_hosts h
             WHERE h.id <> $1 AND h.expires_at > now() AND NOT h.draining
             ORDER BY (SELECT count(*) FROM burrow_instances i WHERE i.owner = h.id), h.id
             LIMIT 1",
            &[&me],
        )
        .await?;
    Ok(row.map(|row| Owner {
        id: row.get(0),
        address: row.get(1),
        live: true,
    }))
}

/// For a draining host (`me`): the member a request for `address` should
/// go to, unless this host still holds its lease (`None`: take it as
/// usual). Another live member that holds it, or else the least loaded
/// member, which takes it when the request reaches it.
pub(super) async fn elsewhere_while_draining(
    shared: &Shared,
    me: &str,
    address: &Address,
) -> Result<Option<Acquired>, ClusterError> {
    let client = shared.client().await?;
    if let Some(owner) = leases::owner_of(&client, address).await? {
        if owner.id == me {
            return Ok(None);
        }
        if owner.live {
            return Ok(Some(Acquired::Elsewhere(owner)));
        }
    }
    // Free, or its owner is gone: the least loaded member takes it (with
    // nobody else, this host takes it as usual).
    Ok(least_loaded(shared, me).await?.map(Acquired::Elsewhere))
}
