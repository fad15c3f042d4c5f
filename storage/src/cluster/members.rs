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
//!
//! A lease is what PostgreSQL cannot see: a host paused, or cut off. A
//! process that died it does see: the dead process's connections close.
//! So each membership also holds a session ([`Session`]): a connection of
//! its own that holds an advisory lock, named in the member's row
//! (`session_lock`), for as long as it is open. A member whose row is
//! unexpired but whose lock nobody holds is gone (its process died, or
//! PostgreSQL closed its session), and any host expires its row at once
//! ([`expire_the_gone`]: at each heartbeat, and when it finds an instance
//! held by that member), so that its instances are taken over within a
//! heartbeat rather than a lease. The host whose session PostgreSQL closed
//! while it lives stops serving the moment its connection ends, and joins
//! again under a new id. A paused host keeps its session (its socket stays
//! open), so a pause still waits for the lease, and writes stay fenced by
//! the membership and the epoch exactly as without sessions. Where
//! PostgreSQL (or a server that speaks its protocol) has no advisory
//! locks, the member has no session and only the lease applies.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use super::{ClusterError, Shared};

/// The first key of every session lock ("brw!" in ASCII); the second is
/// the member's own ([`session_lock`]).
const SESSION_LOCK_CLASS: i32 = 0x6272_7721;

/// This host's membership.
#[derive(Debug, Clone)]
pub struct Member {
    /// The id the host registered under.
    pub id: String,
    /// How many times this process joined (leases taken under an earlier
    /// one are void).
    pub incarnation: u64,
    /// Until when the membership, and every lease held under it, is valid
    /// by this host's clock.
    pub valid_until: Instant,
    /// The membership's session (`None` where PostgreSQL has none to give).
    pub session: Option<Arc<Session>>,
}

impl Member {
    /// Whether this host may serve its instances now: its lease runs and
    /// its session, if it has one, is open.
    pub fn valid(&self) -> bool {
        Instant::now() < self.valid_until && !self.session_ended()
    }

    /// Whether PostgreSQL closed the membership's session: other hosts may
    /// take its instances at once.
    pub fn session_ended(&self) -> bool {
        self.session.as_ref().is_some_and(|s| s.ended())
    }
}

/// A connection to PostgreSQL that holds the member's advisory lock while
/// it is open (see the module docs). Dropping it closes the connection.
pub struct Session {
    _client: tokio_postgres::Client,
    /// The connection ended.
    ended: Arc<AtomicBool>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("ended", &self.ended())
            .finish()
    }
}

impl Session {
    fn ended(&self) -> bool {
        self.ended.load(Ordering::Acquire)
    }
}

/// The second key of the session lock of member `id`, from its id. Two
/// members may share one (one in two billion): a member that died then
/// looks alive while the other lives, and waits for its lease as without
/// sessions; a live member never looks gone.
fn session_lock(id: &str) -> i32 {
    let digest = Sha256::digest(id.as_bytes());
    i32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]) & i32::MAX
}

/// Opens the session of member `id` (the process's `incarnation`th
/// membership) and takes its lock. When the connection ends, the
/// membership stops being valid at once and the heartbeat is woken to
/// join again.
async fn open_session(
    shared: &Arc<Shared>,
    id: &str,
    incarnation: u64,
) -> Result<(Session, i32), ClusterError> {
    let connect = shared.pg.connect(tokio_postgres::NoTls);
    let (client, connection) = tokio::time::timeout(shared.config.lease, connect)
        .await
        .map_err(|_| {
            ClusterError::Unavailable(format!(
                "no connection within {} ms",
                shared.config.lease.as_millis()
            ))
        })??;
    let ended = Arc::new(AtomicBool::new(false));
    let (weak, flag) = (Arc::downgrade(shared), ended.clone());
    tokio::spawn(async move {
        let result = connection.await;
        flag.store(true, Ordering::Release);
        if let Some(shared) = weak.upgrade()
            && !shared.left()
            && shared.member().incarnation == incarnation
        {
            match result {
                Err(e) => {
                    tracing::warn!(error = %e, "this host's session with PostgreSQL ended; it stops serving its instances and joins again")
                }
                Ok(()) => {
                    tracing::warn!(
                        "PostgreSQL closed this host's session; it stops serving its instances and joins again"
                    )
                }
            }
            shared.wake_heartbeat.notify_one();
        }
    });
    let session = Session {
        _client: client,
        ended,
    };
    let lock = session_lock(id);
    let taken: bool = session
        ._client
        .query_one(
            "SELECT pg_try_advisory_lock($1, $2)",
            &[&SESSION_LOCK_CLASS, &lock],
        )
        .await?
        .get(0);
    if !taken {
        return Err(ClusterError::Unavailable(format!(
            "the session lock of {id} is held by another session"
        )));
    }
    Ok((session, lock))
}

/// Expires the rows of members whose session is gone (of `only`, if
/// given): their rows are set expired by a margin, so that their leases
/// are anyone's to take and their writes fenced, as a lease run out.
/// Returns how many.
pub(super) async fn expire_the_gone(
    client: &tokio_postgres::Client,
    margin: Duration,
    only: Option<&str>,
) -> Result<u64, ClusterError> {
    let margin = margin.as_secs_f64();
    Ok(client
        .execute(
            "UPDATE burrow_hosts h SET expires_at = now() - make_interval(secs => $1)
             WHERE h.session_lock IS NOT NULL
               AND h.expires_at > now() - make_interval(secs => $1)
               AND ($2::text IS NULL OR h.id = $2)
               AND NOT EXISTS (
                   SELECT 1 FROM pg_locks l
                   WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
                     AND l.database = (SELECT oid FROM pg_database
                                       WHERE datname = current_database())
                     AND l.classid = $3::int4::oid
                     AND l.objid = h.session_lock::oid)",
            &[&margin, &only, &SESSION_LOCK_CLASS],
        )
        .await?)
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

/// Registers this host under a new id, with a session if PostgreSQL can
/// give one. Returns the membership, valid from the moment the
/// registration was sent.
pub(super) async fn join(shared: &Arc<Shared>, incarnation: u64) -> Result<Member, ClusterError> {
    let config = &shared.config;
    let id = new_id(&config.name);
    let (session, lock) = match open_session(shared, &id, incarnation).await {
        Ok((session, lock)) => (Some(Arc::new(session)), Some(lock)),
        Err(e) => {
            tracing::warn!(error = %e, "this host has no session lock in PostgreSQL: after it dies, its instances are taken over when its lease runs out");
            (None, None)
        }
    };
    let sent = Instant::now();
    let client = shared.client().await?;
    client
        .execute(
            "INSERT INTO burrow_hosts
                 (id, name, address, expires_at, session_lock, draining, deploys_taken)
             VALUES ($1, $2, $3, now() + make_interval(secs => $4), $5, $6, $7)",
            &[
                &id,
                &config.name,
                &config.advertise,
                &config.lease.as_secs_f64(),
                &lock,
                // A host that drains and joins again still drains.
                &shared.draining(),
                &shared.deploys_taken.load(Ordering::Relaxed),
            ],
        )
        .await?;
    Ok(Member {
        id,
        incarnation,
        valid_until: sent + shared.valid_for(),
        session,
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

/// Gives back every lease of `id`, a membership of this host's that
/// expired or lost its session, and deletes its row: other hosts take its
/// instances at once. Nothing it wrote can land any more (every write is
/// fenced by the membership's row, unexpired), and this host has
/// forgotten those leases already.
async fn leave_old(shared: &Shared, id: &str) -> Result<u64, ClusterError> {
    let mut client = shared.client().await?;
    let tx = client.transaction().await?;
    let released = tx
        .execute(
            "UPDATE burrow_instances SET owner = NULL WHERE owner = $1",
            &[&id],
        )
        .await?;
    tx.execute("DELETE FROM burrow_hosts WHERE id = $1", &[&id])
        .await?;
    tx.commit().await?;
    Ok(released)
}

/// Gives back the leases of members whose membership expired more than a
/// margin ago (a host that died, or was paused or cut off and has not come
/// back), after expiring those whose session is gone if this host has a
/// session (`sessions`): their instances are anyone's to take already,
/// and now nothing shows them held.
async fn release_expired(shared: &Shared, sessions: bool) -> Result<u64, ClusterError> {
    let client = shared.client().await?;
    if sessions {
        let gone = expire_the_gone(&client, shared.config.margin, None).await?;
        if gone > 0 {
            tracing::info!(members = gone, "members whose session ended were expired");
        }
    }
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
/// again under a new id when the row has expired or its session ended
/// (which wakes it at once). Runs until the cluster is dropped or leaves.
pub(super) async fn beat(
    shared: std::sync::Weak<Shared>,
    heartbeat: Duration,
    wake: Arc<tokio::sync::Notify>,
) {
    let mut beats: u64 = 0;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(heartbeat) => {}
            _ = wake.notified() => {}
        }
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
        if member.session_ended() {
            join_again(&shared, &member).await;
            continue;
        }
        let sent = Instant::now();
        let timeout = shared.config.lease;
        match tokio::time::timeout(timeout, renew(&shared, &member.id)).await {
            Ok(Ok(true)) => {
                shared.renewed(&member, sent + shared.valid_for());
                if let Err(e) = release_expired(&shared, member.session.is_some()).await {
                    tracing::warn!(error = %e, "cannot give back the leases of expired members");
                }
            }
            Ok(Ok(false)) => {
                tracing::warn!(
                    host = %member.id,
                    "this host's membership expired (it was paused or cut off for longer than its lease); it joins again, and the instances it held are taken anew"
                );
                join_again(&shared, &member).await;
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

/// Joins again under a new id, the membership `old` being void (expired,
/// or its session ended), and gives back what `old` held.
async fn join_again(shared: &Arc<Shared>, old: &Member) {
    match join(shared, old.incarnation + 1).await {
        Ok(joined) => {
            tracing::info!(host = %joined.id, "joined the cluster again");
            shared.rejoined(joined);
            if let Err(e) = leave_old(shared, &old.id).await {
                tracing::warn!(host = %old.id, error = %e, "cannot give back the leases of the old membership; other hosts take them a margin after it expires");
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot join the cluster again; the next heartbeat tries")
        }
    }
}
