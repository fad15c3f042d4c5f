//! Deploys across the cluster. Every deploy of an actor through any host
//! is a row of `burrow_deploys`: the actor, its version in the cluster
//! (one more per deploy of the actor; 0 is the manifest's component), the
//! component's digest and the digest of the one it replaced, and a
//! sequence number across actors. The component's bytes are a row of
//! `burrow_components`, by digest, written once. Each member takes up the
//! deploys past the last one it took up (`runtime/deploy.rs`) and writes
//! that sequence number in its row (`deploys_taken`), which the deploying
//! host waits for.
//!
//! Deploys of one actor take turns on an advisory lock of the
//! transaction, so that their versions follow each other without a gap.

use std::sync::atomic::Ordering;

use super::{Cluster, ClusterError, Shared};

/// The first key of the advisory lock around the deploys of one actor
/// ("brwd"; the second is the actor's name hashed).
const DEPLOY_LOCK: i32 = 0x6272_7764;

/// One deploy as the cluster recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeployRecord {
    /// Where it stands among all deploys of the cluster.
    pub seq: i64,
    pub actor: String,
    /// The actor's version in the cluster.
    pub version: u64,
    /// The SHA-256 of its component, in hex.
    pub digest: String,
    /// The SHA-256 of the component it replaced.
    pub previous_digest: String,
}

/// A component the cluster is to keep: its digest and, unless the
/// cluster holds it already, its bytes.
pub struct Component<'a> {
    pub digest: &'a str,
    pub bytes: Option<&'a [u8]>,
}

impl Cluster {
    /// Records a deploy of `actor` with `component`, made by this host,
    /// which ran `previous` (the digest, and the bytes unless the cluster
    /// may hold them already). The deploy's version is one more than the
    /// last one recorded for the actor, and the component it replaces is
    /// that one's (`previous` only for the actor's first deploy, which
    /// keeps it). Fails if the cluster does not hold `component` and no
    /// bytes were given.
    pub async fn record_deploy(
        &self,
        actor: &str,
        component: Component<'_>,
        previous: Component<'_>,
    ) -> Result<DeployRecord, ClusterError> {
        let host = self.member().id;
        let actor = actor.to_owned();
        let (digest, bytes) = (
            component.digest.to_owned(),
            component.bytes.map(<[u8]>::to_vec),
        );
        let (previous_digest, previous_bytes) = (
            previous.digest.to_owned(),
            previous.bytes.map(<[u8]>::to_vec),
        );
        self.run(move |shared| async move {
            let mut client = shared.client().await?;
            let tx = client.transaction().await?;
            tx.execute(
                "SELECT pg_advisory_xact_lock($1, hashtext($2))",
                &[&DEPLOY_LOCK, &actor],
            )
            .await?;
            if !keep_component(&tx, &digest, bytes.as_deref()).await? {
                return Err(ClusterError::Unavailable(format!(
                    "the cluster does not hold the component {digest}"
                )));
            }
            let last = tx
                .query_opt(
                    "SELECT version, digest FROM burrow_deploys WHERE actor = $1
                     ORDER BY version DESC LIMIT 1",
                    &[&actor],
                )
                .await?;
            // What the cluster ran before, even if this host lags behind.
            let (version, previous_digest) = match last {
                Some(last) => (last.get::<_, i64>(0) + 1, last.get::<_, String>(1)),
                None => {
                    keep_component(&tx, &previous_digest, previous_bytes.as_deref()).await?;
                    (1, previous_digest)
                }
            };
            let seq: i64 = tx
                .query_one(
                    "INSERT INTO burrow_deploys (actor, version, digest, previous_digest, host)
                     VALUES ($1, $2, $3, $4, $5) RETURNING seq",
                    &[&actor, &version, &digest, &previous_digest, &host],
                )
                .await?
                .get(0);
            tx.commit().await?;
            Ok(DeployRecord {
                seq,
                actor,
                version: version as u64,
                digest,
                previous_digest,
            })
        })
        .await
    }

    /// Makes sure the cluster holds the component `digest` (of `bytes`).
    pub async fn keep_component(&self, digest: &str, bytes: &[u8]) -> Result<(), ClusterError> {
        let (digest, bytes) = (digest.to_owned(), bytes.to_vec());
        self.run(move |shared| async move {
            let mut client = shared.client().await?;
            let tx = client.transaction().await?;
            keep_component(&tx, &digest, Some(&bytes)).await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    /// The last version of `actor` deployed in the cluster, as the last
    /// lease this host took of one of its instances said (0: none seen).
    /// A host that runs an earlier version takes that deploy up before it
    /// serves the instance, so that an instance never goes back to
    /// earlier code when it moves between hosts.
    pub fn deployed_version(&self, actor: &str) -> u64 {
        super::lock(&self.shared.deployed)
            .get(actor)
            .copied()
            .unwrap_or(0)
    }

    /// The last deploy of each actor recorded after the deploy `seq` (0:
    /// every actor's last deploy), in the order of their sequence.
    pub async fn deploys_after(&self, seq: i64) -> Result<Vec<DeployRecord>, ClusterError> {
        self.run(move |shared| async move {
            let client = shared.client().await?;
            let rows = client
                .query(
                    "SELECT seq, actor, version, digest, previous_digest FROM (
                         SELECT DISTINCT ON (actor) seq, actor, version, digest, previous_digest
                         FROM burrow_deploys WHERE seq > $1
                         ORDER BY actor, version DESC) last
                     ORDER BY seq",
                    &[&seq],
                )
                .await?;
            Ok(rows
                .iter()
                .map(|row| DeployRecord {
                    seq: row.get(0),
                    actor: row.get(1),
                    version: row.get::<_, i64>(2) as u64,
                    digest: row.get(3),
                    previous_digest: row.get(4),
                })
                .collect())
        })
        .await
    }

    /// The last deploy recorded of `actor`, if any.
    pub async fn last_deploy(&self, actor: &str) -> Result<Option<DeployRecord>, ClusterError> {
        let actor = actor.to_owned();
        self.run(move |shared| async move {
            let client = shared.client().await?;
            let row = client
                .query_opt(
                    "SELECT seq, version, digest, previous_digest FROM burrow_deploys
                     WHERE actor = $1 ORDER BY version DESC LIMIT 1",
                    &[&actor],
                )
                .await?;
            Ok(row.map(|row| DeployRecord {
                seq: row.get(0),
                actor,
                version: row.get::<_, i64>(1) as u64,
                digest: row.get(2),
                previous_digest: row.get(3),
            }))
        })
        .await
    }

    /// The bytes of the component with `digest`, if the cluster holds it.
    pub async fn component(&self, digest: &str) -> Result<Option<Vec<u8>>, ClusterError> {
        let digest = digest.to_owned();
        self.run(move |shared| async move {
            let client = shared.client().await?;
            let row = client
                .query_opt(
                    "SELECT bytes FROM burrow_components WHERE digest = $1",
                    &[&digest],
                )
                .await?;
            Ok(row.map(|row| row.get(0)))
        })
        .await
    }

    /// Says, in this member's row, that it took up every deploy up to
    /// `seq` (and says so again in the row of a later membership).
    pub async fn took_up(&self, seq: i64) -> Result<(), ClusterError> {
        self.shared.deploys_taken.fetch_max(seq, Ordering::Relaxed);
        let me = self.member().id;
        self.run(move |shared| async move {
            let client = shared.client().await?;
            client
                .execute(
                    "UPDATE burrow_hosts SET deploys_taken = greatest(deploys_taken, $2)
                     WHERE id = $1",
                    &[&me, &seq],
                )
                .await?;
            Ok(())
        })
        .await
    }

    /// The live members that have not yet taken up the deploy `seq`, by id.
    pub async fn not_taken_up(&self, seq: i64) -> Result<Vec<String>, ClusterError> {
        self.run(move |shared| async move { not_taken_up(&shared, seq).await })
            .await
    }
}

impl Shared {
    /// A lease this host took said that `version` is the last deploy of
    /// `actor` in the cluster.
    pub(super) fn saw_deployed(&self, actor: &str, version: u64) {
        let mut deployed = super::lock(&self.deployed);
        let seen = deployed.entry(actor.to_owned()).or_default();
        *seen = (*seen).max(version);
    }
}

async fn not_taken_up(shared: &Shared, seq: i64) -> Result<Vec<String>, ClusterError> {
    let client = shared.client().await?;
    let rows = client
        .query(
            "SELECT id FROM burrow_hosts
             WHERE expires_at > now() AND deploys_taken < $1 ORDER BY id",
            &[&seq],
        )
        .await?;
    Ok(rows.iter().map(|row| row.get(0)).collect())
}

/// Makes sure the cluster holds the component `digest`, writing `bytes`
/// if it does not and they are given. Returns whether it holds it now.
async fn keep_component(
    tx: &deadpool_postgres::Transaction<'_>,
    digest: &str,
    bytes: Option<&[u8]>,
) -> Result<bool, ClusterError> {
    if digest.is_empty() {
        return Ok(false);
    }
    let held: bool = tx
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM burrow_components WHERE digest = $1)",
            &[&digest],
        )
        .await?
        .get(0);
    if held {
        return Ok(true);
    }
    let Some(bytes) = bytes else {
        return Ok(false);
    };
    tx.execute(
        "INSERT INTO burrow_components (digest, bytes) VALUES ($1, $2)
         ON CONFLICT (digest) DO NOTHING",
        &[&digest, &bytes],
    )
    .await?;
    Ok(true)
}
