//! What the cluster's members read of it: due marks (claimed with the
//! lease of their instance), the keys of an actor, and the members with
//! their leases.
//!
//! The marks keep the invariants of `host.sqlite`'s (`storage/src/index.rs`):
//! a commit lowers them in the same statement that ships its pages, and
//! background work sets them from what it read of the committed data,
//! through the same ordered, fenced queue (`shipper.rs`). Each member's
//! timer claims due instances whose lease is its own or free (no owner, or
//! an owner expired for longer than the margin), taking the free ones'
//! leases in the same statement; `FOR UPDATE SKIP LOCKED` keeps two timers
//! from claiming one instance, and the lease keeps anyone else from
//! serving it.

use crate::index::Mark;

use super::{Cluster, ClusterError, Taken};

/// One member of the cluster, as `burrow cluster status` shows it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct HostStatus {
    pub id: String,
    pub name: String,
    pub address: String,
    /// Its membership is unexpired.
    pub live: bool,
    /// When it joined (RFC 3339).
    pub started_at: String,
    /// Milliseconds until its membership expires (negative: expired).
    pub expires_in_ms: i64,
    /// Instances whose lease it holds.
    pub leases: i64,
    /// It is draining: handing its instances to the others.
    pub draining: bool,
    /// Whether this is the host that answered.
    pub this: bool,
}

fn claim_sql(mark: Mark) -> String {
    let column = match mark {
        Mark::Queue => "queue_due_at",
        Mark::Workflow => "workflow_due_at",
        Mark::Schedule => "schedule_due_at",
    };
    format!(
        "WITH due AS (
             SELECT i.id FROM burrow_instances i
             WHERE i.{column} <= $1 AND i.actor = ANY($2) AND i.created_at IS NOT NULL
               AND (i.owner = $3 OR i.owner IS NULL OR NOT EXISTS (
                      SELECT 1 FROM burrow_hosts h
                      WHERE h.id = i.owner AND h.expires_at + make_interval(secs => $5) > now()))
             ORDER BY i.{column}
             LIMIT $4
             FOR UPDATE OF i SKIP LOCKED
         )
         UPDATE burrow_instances i
         SET owner = $3, epoch = CASE WHEN i.owner = $3 THEN i.epoch ELSE i.epoch + 1 END
         FROM due
         WHERE i.id = due.id
           AND EXISTS (SELECT 1 FROM burrow_hosts WHERE id = $3 AND expires_at > now())
         RETURNING i.actor, i.key, i.id, i.epoch, i.version, i.written_epoch, i.page_size,
                   i.pages, i.created_at, i.{column},
                   (SELECT coalesce(max(d.version), 0) FROM burrow_deploys d
                    WHERE d.actor = i.actor)"
    )
}

impl Cluster {
    /// Claims instances of `actors` whose `mark` is at or before `now`,
    /// earliest first, at most `limit`, for member `me`: their leases are
    /// this host's afterwards.
    pub async fn claim_due(
        &self,
        me: &str,
        mark: Mark,
        now: i64,
        actors: &[String],
        limit: usize,
    ) -> Result<Vec<(String, String, Taken)>, ClusterError> {
        if self.draining() {
            // Its instances go to other members, which run their work.
            return Ok(Vec::new());
        }
        let (me, actors) = (me.to_owned(), actors.to_vec());
        let margin = self.config().margin.as_secs_f64();
        self.run(move |shared| async move {
            let client = shared.client().await?;
            let statement = client.prepare_cached(&claim_sql(mark)).await?;
            let mut rows = client
                .query(&statement, &[&now, &actors, &me, &(limit as i64), &margin])
                .await?;
            // The update returns its rows in no particular order.
            rows.sort_by_key(|row| row.get::<_, Option<i64>>(9));
            Ok(rows
                .into_iter()
                .map(|row| {
                    let taken = Taken {
                        id: row.get(2),
                        epoch: row.get(3),
                        version: row.get(4),
                        written_epoch: row.get(5),
                        page_size: row.get::<_, i32>(6) as u32,
                        pages: row.get::<_, i32>(7) as u32,
                        created_at: row.get(8),
                        deployed: row.get::<_, i64>(10) as u64,
                    };
                    shared.saw_deployed(&row.get::<_, String>(0), taken.deployed);
                    (row.get(0), row.get(1), taken)
                })
                .collect())
        })
        .await
    }

    /// Keys of `actor`'s instances in byte order (as on a host alone):
    /// those from `from` on, after `after` and before `before` (each if
    /// given), at most `limit`.
    pub async fn keys(
        &self,
        actor: &str,
        from: &str,
        after: Option<&str>,
        before: Option<&str>,
        limit: Option<usize>,
    ) -> Result<Vec<String>, ClusterError> {
        let (actor, from) = (actor.to_owned(), from.to_owned());
        let (after, before) = (after.map(str::to_owned), before.map(str::to_owned));
        let limit = limit.map(|n| i64::try_from(n).unwrap_or(i64::MAX));
        self.run(move |shared| async move {
            let client = shared.client().await?;
            let rows = client
                .query(
                    "SELECT key FROM burrow_instances
                     WHERE actor = $1 AND created_at IS NOT NULL
                           AND key COLLATE \"C\" >= $2
                           AND ($3::text IS NULL OR key COLLATE \"C\" > $3)
                           AND ($4::text IS NULL OR key COLLATE \"C\" < $4)
                     ORDER BY key COLLATE \"C\" LIMIT $5",
                    &[&actor, &from, &after, &before, &limit],
                )
                .await?;
            Ok(rows.into_iter().map(|row| row.get(0)).collect())
        })
        .await
    }

    /// Every member, with the leases it holds.
    pub async fn status(&self) -> Result<Vec<HostStatus>, ClusterError> {
        let me = self.member().id;
        self.run(move |shared| async move {
            let client = shared.client().await?;
            let rows = client
                .query(
                    "SELECT h.id, h.name, h.address, h.expires_at > now(),
                            to_char(h.started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),
                            (extract(epoch FROM h.expires_at - now()) * 1000)::bigint,
                            (SELECT count(*) FROM burrow_instances i WHERE i.owner = h.id),
                            h.draining
                     FROM burrow_hosts h ORDER BY h.name, h.started_at",
                    &[],
                )
                .await?;
            Ok(rows
                .into_iter()
                .map(|row| {
                    let id: String = row.get(0);
                    HostStatus {
                        this: id == me,
                        id,
                        name: row.get(1),
                        address: row.get(2),
                        live: row.get(3),
                        started_at: row.get(4),
                        expires_in_ms: row.get(5),
                        leases: row.get(6),
                        draining: row.get(7),
                    }
                })
                .collect())
        })
        .await
    }
}
