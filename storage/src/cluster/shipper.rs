//! The shipper: every write a host makes on behalf of an instance reaches
//! PostgreSQL here, fenced, in the order it was made.
//!
//! A write is a [`Shipment`]: the pages a commit changed with the marks it
//! lowered (and, at a creation, that the instance exists), a mark set by
//! background work, or a destroy. Commit stages and mark writers queue
//! their shipments on one channel and wait for their [`Ack`]; one task
//! takes whatever has queued up meanwhile and writes it in as few
//! statements as it can (group commit), so that shipping costs a round
//! trip per batch, not per commit.
//!
//! Each shipment is fenced: its instance's row is updated only if this
//! host (by its current id, with its membership unexpired by
//! PostgreSQL's clock) still owns it at the epoch the shipment was made
//! under, and, for a commit or a destroy, only if the replicated version
//! is the one the commit was made on. The row update and the pages are
//! one statement, so a fenced shipment writes nothing, and one that
//! passes writes all of its pages. A shipment that fails leaves its
//! instance's local copy ahead of the replicated one: the caller
//! forgets the lease, so that the next use takes it anew and restores the
//! copy from PostgreSQL.
//!
//! Shipments of one instance stay in order: they are queued in the order
//! they were made (the instance's `order` lock, `leases.rs`), and a batch
//! that holds several of one instance writes them in rounds, the first of
//! each instance in the first round, and so on.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;

use super::{ClusterError, Shared};

/// Most shipments written in one batch.
const MAX_BATCH_SHIPMENTS: usize = 1024;
/// A batch takes no further shipment once its pages reach this many bytes.
const MAX_BATCH_BYTES: usize = 32 << 20;

/// A change to one of an instance's marks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MarkWrite {
    /// Left as it is.
    #[default]
    Keep,
    /// Lowered to this time, if it is later or unset.
    Lower(i64),
    /// Set to this (`None`: nothing due).
    Set(Option<i64>),
}

impl MarkWrite {
    fn encode(self) -> (i16, Option<i64>) {
        match self {
            MarkWrite::Keep => (0, None),
            MarkWrite::Lower(at) => (1, Some(at)),
            MarkWrite::Set(at) => (2, at),
        }
    }
}

/// Changes to an instance's three marks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MarkWrites {
    pub queue: MarkWrite,
    pub workflow: MarkWrite,
    pub schedule: MarkWrite,
}

impl MarkWrites {
    pub fn is_empty(&self) -> bool {
        *self == MarkWrites::default()
    }
}

/// What a shipment writes.
#[derive(Debug)]
pub enum Write {
    /// A commit: the pages it changed on replicated version `base`, the
    /// database's size after it, the marks it lowered, and its creation
    /// time if it created the instance.
    Commit {
        base: i64,
        page_size: u32,
        db_pages: u32,
        /// The database shrank: pages past `db_pages` are deleted.
        shrank: bool,
        pages: Vec<(u32, Vec<u8>)>,
        created: Option<i64>,
        marks: MarkWrites,
    },
    /// Marks set by background work.
    Marks(MarkWrites),
    /// The instance is destroyed, on replicated version `base`.
    Destroy { base: i64 },
}

/// One fenced write of one instance.
#[derive(Debug)]
pub struct Shipment {
    /// The instance's row.
    pub id: i64,
    /// The epoch of the lease it was made under.
    pub epoch: i64,
    pub write: Write,
}

impl Shipment {
    fn bytes(&self) -> usize {
        match &self.write {
            Write::Commit { pages, .. } => pages.iter().map(|(_, p)| p.len()).sum(),
            _ => 0,
        }
    }
}

/// The outcome of a shipment, for the one who waits for it.
#[derive(Default)]
pub struct Ack {
    outcome: Mutex<Option<Result<(), ClusterError>>>,
    done: Condvar,
}

impl Ack {
    /// An acknowledgement of a shipment that was never queued.
    pub fn refused(why: &str) -> Arc<Ack> {
        let ack = Arc::new(Ack::default());
        ack.set(Err(ClusterError::Unavailable(why.to_owned())));
        ack
    }

    fn set(&self, outcome: Result<(), ClusterError>) {
        *self.outcome.lock().unwrap_or_else(|e| e.into_inner()) = Some(outcome);
        self.done.notify_all();
    }

    /// Waits (blocking the thread) for the outcome, at most `timeout`.
    pub fn wait(&self, timeout: Duration) -> Result<(), ClusterError> {
        let guard = self.outcome.lock().unwrap_or_else(|e| e.into_inner());
        let (mut guard, waited) = self
            .done
            .wait_timeout_while(guard, timeout, |outcome| outcome.is_none())
            .unwrap_or_else(|e| e.into_inner());
        if waited.timed_out() {
            return Err(ClusterError::Unavailable(format!(
                "PostgreSQL did not confirm the write within {} ms",
                timeout.as_millis()
            )));
        }
        guard.take().expect("set before notified")
    }
}

/// A shipment queued with its acknowledgement.
pub type Queued = (Shipment, Arc<Ack>);

/// The receiving end, owned by the shipper task.
pub(super) type Receiver = mpsc::UnboundedReceiver<Queued>;

/// Writes batches of queued shipments until the channel closes.
pub(super) async fn run(shared: std::sync::Weak<Shared>, mut queue: Receiver) {
    let mut batch: Vec<Queued> = Vec::new();
    while let Some(first) = queue.recv().await {
        let mut bytes = first.0.bytes();
        batch.push(first);
        while batch.len() < MAX_BATCH_SHIPMENTS && bytes < MAX_BATCH_BYTES {
            match queue.try_recv() {
                Ok(next) => {
                    bytes += next.0.bytes();
                    batch.push(next);
                }
                Err(_) => break,
            }
        }
        let Some(shared) = shared.upgrade() else {
            fail_all(&mut batch, "the host is shutting down");
            return;
        };
        let written = tokio::time::timeout(shared.config.lease, write(&shared, &batch)).await;
        match written {
            Ok(Ok((passed, rounds))) => {
                let stats = &shared.shipped;
                stats
                    .shipments
                    .fetch_add(batch.len() as u64, Ordering::Relaxed);
                stats.batches.fetch_add(1, Ordering::Relaxed);
                stats.statements.fetch_add(rounds, Ordering::Relaxed);
                for (_, ack) in batch.drain(..) {
                    ack.set(if passed.contains(&ack_key(&ack)) {
                        Ok(())
                    } else {
                        Err(ClusterError::Fenced)
                    });
                }
            }
            Ok(Err(e)) => {
                let message = e.to_string();
                for (_, ack) in batch.drain(..) {
                    ack.set(Err(ClusterError::Unavailable(message.clone())));
                }
            }
            Err(_) => fail_all(
                &mut batch,
                &format!(
                    "PostgreSQL did not confirm the write within the lease ({} ms)",
                    shared.config.lease.as_millis()
                ),
            ),
        }
    }
}

fn fail_all(batch: &mut Vec<Queued>, why: &str) {
    for (_, ack) in batch.drain(..) {
        ack.set(Err(ClusterError::Unavailable(why.to_owned())));
    }
}

/// Identifies a queued shipment by its acknowledgement.
fn ack_key(ack: &Arc<Ack>) -> usize {
    Arc::as_ptr(ack) as usize
}

/// One statement per round: the fenced row updates, and the pages and
/// deletions of the rows that passed.
const WRITE_ROUND: &str = "
WITH u AS (
    SELECT * FROM unnest($2::bigint[], $3::bigint[], $4::bigint[], $5::int[], $6::int[],
                         $7::int[], $8::smallint[], $9::bigint[], $10::smallint[], $11::bigint[],
                         $12::smallint[], $13::bigint[], $14::smallint[], $15::bigint[], $16::int[])
        AS u(id, epoch, base, bump, page_size, db_pages, created_kind, created_at,
             q_kind, q, w_kind, w, s_kind, s, slot)
),
passed AS (
    UPDATE burrow_instances AS i SET
        version = i.version + u.bump,
        written_epoch = CASE WHEN u.bump = 1 THEN u.epoch ELSE i.written_epoch END,
        page_size = CASE WHEN u.page_size > 0 THEN u.page_size ELSE i.page_size END,
        pages = CASE WHEN u.db_pages >= 0 THEN u.db_pages ELSE i.pages END,
        created_at = CASE u.created_kind WHEN 1 THEN u.created_at WHEN 2 THEN NULL ELSE i.created_at END,
        queue_due_at = CASE u.q_kind WHEN 1 THEN LEAST(i.queue_due_at, u.q) WHEN 2 THEN u.q ELSE i.queue_due_at END,
        workflow_due_at = CASE u.w_kind WHEN 1 THEN LEAST(i.workflow_due_at, u.w) WHEN 2 THEN u.w ELSE i.workflow_due_at END,
        schedule_due_at = CASE u.s_kind WHEN 1 THEN LEAST(i.schedule_due_at, u.s) WHEN 2 THEN u.s ELSE i.schedule_due_at END
    FROM u
    WHERE i.id = u.id AND i.owner = $1 AND i.epoch = u.epoch
      AND (u.base IS NULL OR i.version = u.base)
      AND EXISTS (SELECT 1 FROM burrow_hosts h WHERE h.id = $1 AND h.expires_at > now())
    RETURNING u.slot, u.id, u.db_pages
),
written AS (
    INSERT INTO burrow_pages (instance, pgno, data)
    SELECT p.instance, p.pgno, p.data
    FROM unnest($17::bigint[], $18::int[], $19::bytea[]) AS p(instance, pgno, data)
    WHERE p.instance IN (SELECT id FROM passed)
    ON CONFLICT (instance, pgno) DO UPDATE SET data = EXCLUDED.data
),
cut AS (
    DELETE FROM burrow_pages AS d
    USING passed, unnest($20::bigint[]) AS t(id)
    WHERE d.instance = passed.id AND passed.id = t.id AND d.pgno > passed.db_pages
)
SELECT slot FROM passed";

/// Writes `batch` in rounds; returns the acknowledgements of the
/// shipments that passed their fence, and the number of rounds.
async fn write(shared: &Shared, batch: &[Queued]) -> Result<(Vec<usize>, u64), ClusterError> {
    let me = shared.member().id;
    let client = shared.client().await?;
    let statement = client.prepare_cached(WRITE_ROUND).await?;
    let mut passed = Vec::with_capacity(batch.len());
    // Round k holds the k-th shipment of each instance.
    let mut rounds: Vec<Vec<usize>> = Vec::new();
    let mut seen: HashMap<i64, usize> = HashMap::new();
    for (index, (shipment, _)) in batch.iter().enumerate() {
        let round = seen.entry(shipment.id).or_insert(0);
        if rounds.len() <= *round {
            rounds.push(Vec::new());
        }
        rounds[*round].push(index);
        *round += 1;
    }
    let count = rounds.len() as u64;
    for round in rounds {
        let mut c = Columns::default();
        for (slot, &index) in round.iter().enumerate() {
            c.push(slot as i32, &batch[index].0);
        }
        let rows = client
            .query(
                &statement,
                &[
                    &me,
                    &c.id,
                    &c.epoch,
                    &c.base,
                    &c.bump,
                    &c.page_size,
                    &c.db_pages,
                    &c.created_kind,
                    &c.created_at,
                    &c.q_kind,
                    &c.q,
                    &c.w_kind,
                    &c.w,
                    &c.s_kind,
                    &c.s,
                    &c.slot,
                    &c.page_instance,
                    &c.page_number,
                    &c.page_data,
                    &c.cut,
                ],
            )
            .await?;
        for row in rows {
            let slot: i32 = row.get(0);
            let index = round[slot as usize];
            passed.push(ack_key(&batch[index].1));
        }
    }
    Ok((passed, count))
}

/// The columns of one round, one entry per shipment (pages: one per page).
#[derive(Default)]
struct Columns<'a> {
    id: Vec<i64>,
    epoch: Vec<i64>,
    base: Vec<Option<i64>>,
    bump: Vec<i32>,
    page_size: Vec<i32>,
    db_pages: Vec<i32>,
    created_kind: Vec<i16>,
    created_at: Vec<Option<i64>>,
    q_kind: Vec<i16>,
    q: Vec<Option<i64>>,
    w_kind: Vec<i16>,
    w: Vec<Option<i64>>,
    s_kind: Vec<i16>,
    s: Vec<Option<i64>>,
    slot: Vec<i32>,
    page_instance: Vec<i64>,
    page_number: Vec<i32>,
    page_data: Vec<&'a [u8]>,
    cut: Vec<i64>,
}

impl<'a> Columns<'a> {
    fn push(&mut self, slot: i32, shipment: &'a Shipment) {
        self.id.push(shipment.id);
        self.epoch.push(shipment.epoch);
        self.slot.push(slot);
        let (base, bump, page_size, db_pages, created, marks) = match &shipment.write {
            Write::Commit {
                base,
                page_size,
                db_pages,
                shrank,
                pages,
                created,
                marks,
            } => {
                for (number, data) in pages {
                    self.page_instance.push(shipment.id);
                    self.page_number.push(*number as i32);
                    self.page_data.push(data);
                }
                if *shrank {
                    self.cut.push(shipment.id);
                }
                let created = match created {
                    Some(at) => (1, Some(*at)),
                    None => (0, None),
                };
                (
                    Some(*base),
                    1,
                    *page_size as i32,
                    *db_pages as i32,
                    created,
                    *marks,
                )
            }
            Write::Marks(marks) => (None, 0, 0, -1, (0, None), *marks),
            Write::Destroy { base } => {
                self.cut.push(shipment.id);
                let none = MarkWrite::Set(None);
                let marks = MarkWrites {
                    queue: none,
                    workflow: none,
                    schedule: none,
                };
                (Some(*base), 1, 0, 0, (2, None), marks)
            }
        };
        self.base.push(base);
        self.bump.push(bump);
        self.page_size.push(page_size);
        self.db_pages.push(db_pages);
        self.created_kind.push(created.0);
        self.created_at.push(created.1);
        let (kind, at) = marks.queue.encode();
        self.q_kind.push(kind);
        self.q.push(at);
        let (kind, at) = marks.workflow.encode();
        self.w_kind.push(kind);
        self.w.push(at);
        let (kind, at) = marks.schedule.encode();
        self.s_kind.push(kind);
        self.s.push(at);
    }
}
