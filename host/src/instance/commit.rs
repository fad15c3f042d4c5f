//! The commit stage: every transaction of an instance ends here, whoever
//! opened it (an action, a hook, a queue event, a workflow step, a
//! schedule run, a host operation).
//!
//! The stage decides when a transaction is durable and what it releases
//! once it is: the SQLite commit, with the marks its effects need, goes
//! through the database's backend, which the store chose when it opened
//! the database (`storage/src/backend.rs`: on a host alone the index's marks
//! are lowered first, so that a crash after the commit finds the work to
//! resume; in a cluster the commit's pages and marks are shipped to
//! PostgreSQL before anything of it is released, and a commit that is not
//! shipped fails); then the events it broadcast are published, and
//! [`Committed`] tells the caller which wake-ups to release (the runtime
//! core starts a queue pump or a workflow driver after the operation,
//! with the instance's slot still held). The caller hears back only after
//! this returns.
//!
//! A transaction here may hold several operations (a batch of calls, a
//! run of queue events: `cell/batch.rs`; a batch of workflow steps:
//! `capability/workflow/step.rs`); its effects are theirs together. In
//! `synchronous = full` the stage syncs the log after SQLite's commit
//! (`Wal::log`); while other instances run an operation it waits for the
//! disk off the async workers, so that those instances' commits wait for
//! it at the same time, and a batch of calls may take the sync over
//! ([`CommitStage::commit_syncing_later`]). The log's checkpoint starts
//! after the commit, beside the instance's work (`storage/src/wal.rs`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use crate::address::Address;
use crate::clock::now_ms;
use crate::connections::{Hub, PendingEvent};
use crate::error::Error;
use crate::metrics::{DurationHistogram, Metrics};
use crate::storage::{ClusterError, InstanceDb, LogFile, Release};

/// What the open transaction did that outlives it: collected while the
/// guest runs, acted on by the commit stage, dropped on a rollback.
#[derive(Default)]
pub(crate) struct Effects {
    /// It appended to the queue.
    pub(crate) appended: bool,
    /// The soonest time of the schedules it added.
    pub(crate) scheduled: Option<i64>,
    /// Events it broadcast, published once it commits.
    pub(crate) events: Vec<PendingEvent>,
    /// It called or sent to another instance, which no rollback undoes: a
    /// batch of calls ends with it (see `cell/batch.rs`).
    pub(crate) reached_outside: bool,
    /// It started the instance's workflow, due at this time.
    pub(crate) workflow_started: Option<i64>,
    /// It created the instance, at this time.
    pub(crate) created: Option<i64>,
}

impl Effects {
    /// Adds the effects of a later call of the same transaction.
    pub(crate) fn absorb(&mut self, later: Effects) {
        self.appended |= later.appended;
        self.scheduled = match (self.scheduled, later.scheduled) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.events.extend(later.events);
        self.reached_outside |= later.reached_outside;
        self.workflow_started = self.workflow_started.or(later.workflow_started);
        self.created = self.created.or(later.created);
    }
}

/// Why a commit failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CommitError {
    /// SQLite could not commit: nothing of the transaction was kept.
    #[error("{0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The commit is on the local copy but was not shipped to the cluster
    /// (or, for a read, the lease ran out): nothing of it is released, and
    /// the local copy is restored before the instance is used again.
    #[error("{0}")]
    NotReplicated(#[from] ClusterError),
    /// SQLite committed, but the log could not be synced (`synchronous =
    /// full`): whether the commit survives a power loss is unknown, so it
    /// is not reported as done, and the instance's copy is read anew
    /// before it is used again.
    #[error("syncing the write-ahead log failed: {0}")]
    LogNotSynced(std::io::Error),
}

impl CommitError {
    /// The error of a call whose commit's log could not be synced.
    pub(crate) fn unknown_outcome(&self, actor: &str, key: &str) -> Error {
        Error::storage(
            actor,
            key,
            format!("{self}; the call may or may not have been kept"),
        )
    }
}

/// What a commit released, for the caller to act on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Committed {
    /// The transaction appended to the queue: its pump (or workflow
    /// driver) must run.
    pub(crate) appended: bool,
}

/// Where an instance's transactions end (see the module docs).
#[derive(Clone, Default)]
pub(crate) struct CommitStage {
    /// Where broadcast events go (`None` in unit tests).
    hub: Option<Arc<Hub>>,
    /// Transactions committed through this stage and its clones.
    commits: Arc<AtomicU64>,
    /// The syncs of logs in `synchronous = full`, and how long each took.
    log_syncs: DurationHistogram,
    /// Instances running an operation right now.
    operations: Arc<AtomicUsize>,
}

/// One instance running an operation, counted while it lives.
pub(crate) struct Operation(Arc<AtomicUsize>);

impl Drop for Operation {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl CommitStage {
    /// The stage of a host, counting its commits and log syncs in
    /// `metrics`.
    pub(crate) fn new(hub: Arc<Hub>, metrics: &Metrics) -> CommitStage {
        CommitStage {
            hub: Some(hub),
            commits: metrics.commits(),
            log_syncs: metrics.log_syncs(),
            operations: Arc::default(),
        }
    }

    /// Whether operations of other instances run beside the caller's
    /// (which holds an [`Operation`]).
    pub(crate) fn others_run(&self) -> bool {
        self.operations.load(Ordering::Relaxed) > 1
    }

    /// Counts an instance's operation while the result lives: commits of
    /// instances that run at the same time leave the async workers.
    pub(crate) fn operation(&self) -> Operation {
        self.operations.fetch_add(1, Ordering::Relaxed);
        Operation(self.operations.clone())
    }

    /// Transactions committed through this stage and its clones (a batch
    /// of coalesced calls is one).
    pub(crate) fn commits(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
    }

    /// The syncs of logs made through this stage and its clones.
    pub(crate) fn log_syncs(&self) -> &DurationHistogram {
        &self.log_syncs
    }

    /// Commits the open transaction of `db`, the database of `address`,
    /// with its `effects`; in `synchronous = full`, its log is synced
    /// before this returns.
    pub(crate) fn commit(
        &self,
        address: &Address,
        db: &InstanceDb,
        effects: Effects,
    ) -> Result<Committed, CommitError> {
        let (committed, unsynced) = self.commit_then(address, db, effects, SyncWhen::Now)?;
        debug_assert!(unsynced.is_none(), "a commit told to sync now did");
        Ok(committed)
    }

    /// [`CommitStage::commit`], except that in `synchronous = full`, while
    /// other instances run an operation (on a multi-thread runtime), the
    /// log's sync is left to the caller: nothing of the transaction may
    /// leave the instance (an answer above all) before the sync it starts
    /// with [`Unsynced::start`] has ended. Its broadcast events go out
    /// then, from there.
    pub(crate) fn commit_syncing_later(
        &self,
        address: &Address,
        db: &InstanceDb,
        effects: Effects,
    ) -> Result<(Committed, Option<Unsynced>), CommitError> {
        self.commit_then(address, db, effects, SyncWhen::Later)
    }

    fn commit_then(
        &self,
        address: &Address,
        db: &InstanceDb,
        effects: Effects,
        sync: SyncWhen,
    ) -> Result<(Committed, Option<Unsynced>), CommitError> {
        let Effects {
            appended,
            scheduled,
            events,
            reached_outside: _,
            workflow_started,
            created,
        } = effects;
        // Nothing of a dry run reaches the marks, the cluster or a client.
        db.refuse_dry_run()?;
        let others_run = self.others_run();
        // In `full` mode the log is synced after SQLite's commit (see
        // `Wal::log`): here, or by the caller while its async worker goes
        // on with other instances' calls, when others run (alone, the
        // hand-off to a blocking thread would cost more than it frees). In
        // a cluster the commit is shipped after the sync, here.
        let log = db.wal.log();
        let later = match log {
            Some(log)
                if sync == SyncWhen::Later
                    && others_run
                    && !db.backend.ships()
                    && crate::blocking::on_multi_thread_runtime() =>
            {
                Some(log.clone())
            }
            _ => None,
        };
        let sync_now = log.filter(|_| later.is_none());
        // A commit that syncs waits for the disk: not on a worker that
        // other instances' operations need, so that their commits wait for
        // the disk together. In `normal` mode too, the commit that begins
        // a log (a new instance's first write, the first since a wake, the
        // first after a checkpoint that copied the log) syncs inside
        // SQLite's commit; a commit that only read does not.
        let syncs = sync_now.is_some() || db.commit_begins_log();
        let off_worker = syncs && others_run;
        let commit_and_sync = || -> Result<(), CommitError> {
            db.commit()?;
            if let Some(log) = sync_now {
                sync_timed(log, &self.log_syncs).map_err(CommitError::LogNotSynced)?;
            }
            Ok(())
        };
        let local_commit = || {
            if off_worker {
                crate::blocking::off_worker(commit_and_sync)
            } else {
                commit_and_sync()
            }
        };
        let release = Release {
            queue: appended.then(now_ms),
            schedule: scheduled,
            workflow: workflow_started,
            created,
        };
        db.commit_releasing(release, local_commit)?;
        self.commits.fetch_add(1, Ordering::Relaxed);
        // Beside the instance's work only while other instances work too
        // (see `storage/src/wal.rs`).
        let beside = self.others_run();
        db.wal.checkpoint_if_due(&db.conn, beside);
        let committed = Committed { appended };
        let hub = self.hub.as_ref().filter(|_| !events.is_empty());
        match later {
            Some(log) => {
                let publish = hub.map(|hub| (hub.clone(), address.clone(), events));
                let unsynced = Unsynced {
                    log,
                    log_syncs: self.log_syncs.clone(),
                    publish,
                };
                Ok((committed, Some(unsynced)))
            }
            None => {
                if let Some(hub) = hub {
                    hub.publish(address, &events);
                }
                Ok((committed, None))
            }
        }
    }
}

/// Syncs `log`, recording in `syncs` how long it waited for the disk.
fn sync_timed(log: &LogFile, syncs: &DurationHistogram) -> std::io::Result<()> {
    let started = Instant::now();
    let synced = log.sync();
    syncs.observe(started.elapsed());
    synced
}

/// When a commit in `synchronous = full` syncs the log.
#[derive(Clone, Copy, PartialEq, Eq)]
enum SyncWhen {
    /// Before the commit stage returns.
    Now,
    /// When the caller starts it ([`Unsynced::start`]), if other
    /// instances run.
    Later,
}

/// A commit whose log is not synced yet: nothing of it may leave the
/// instance before its sync succeeded ([`Unsynced::start`]).
#[must_use = "a commit is durable only once its log is synced"]
pub(crate) struct Unsynced {
    log: LogFile,
    /// Where the sync's time is recorded.
    log_syncs: DurationHistogram,
    /// The events the transaction broadcast, published after the sync.
    publish: Option<(Arc<Hub>, Address, Vec<PendingEvent>)>,
}

impl Unsynced {
    /// Starts the sync on a thread kept for syncs
    /// ([`crate::blocking::on_sync_thread`]), where it runs to its end (and
    /// then publishes the transaction's events) whoever still waits for
    /// it: a caller that goes away mid-wait cannot leave a commit half
    /// released.
    pub(crate) fn start(self) -> Durable {
        let (done, durable) = tokio::sync::watch::channel(None);
        let sync = move || {
            let result = sync_timed(&self.log, &self.log_syncs).map_err(|e| e.to_string());
            if result.is_ok()
                && let Some((hub, address, events)) = self.publish
            {
                hub.publish(&address, &events);
            }
            let _ = done.send(Some(result));
        };
        crate::blocking::on_sync_thread(sync);
        Durable(durable)
    }
}

/// The end of a started sync of a commit's log: what its calls' answers
/// wait for (`cell/batch.rs`).
#[derive(Clone)]
pub(crate) struct Durable(tokio::sync::watch::Receiver<Option<Result<(), String>>>);

impl Durable {
    /// Waits until the log is synced.
    pub(crate) async fn wait(&self) -> Result<(), CommitError> {
        let mut done = self.0.clone();
        let outcome = done
            .wait_for(Option::is_some)
            .await
            .map(|outcome| outcome.clone());
        match outcome {
            Ok(Some(Ok(()))) => Ok(()),
            Ok(Some(Err(message))) => {
                Err(CommitError::LogNotSynced(std::io::Error::other(message)))
            }
            Ok(None) | Err(_) => Err(CommitError::LogNotSynced(std::io::Error::other(
                "the sync ended without an outcome",
            ))),
        }
    }

    /// Whether the sync has ended.
    #[cfg(test)]
    pub(crate) fn has_ended(&self) -> bool {
        self.0.borrow().is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Synchronous;
    use crate::deadline::Deadline;

    fn opened(dir: &tempfile::TempDir, synchronous: Synchronous) -> InstanceDb {
        let path = dir.path().join(format!("{}.sqlite", synchronous.pragma()));
        let db = InstanceDb::open(&path, synchronous, 1 << 30, Deadline::default()).unwrap();
        db.conn.execute_batch("CREATE TABLE t (x)").unwrap();
        db
    }

    fn write(db: &InstanceDb, x: i64) {
        db.begin().unwrap();
        db.conn.execute("INSERT INTO t VALUES (?1)", [x]).unwrap();
    }

    fn address() -> Address {
        Address {
            actor: "a".into(),
            key: "k".into(),
        }
    }

    fn count(db: &InstanceDb) -> i64 {
        db.conn
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap()
    }

    /// In `full` mode every commit syncs the log once before it returns,
    /// alone or beside other instances' operations; in `normal` mode the
    /// stage syncs nothing.
    #[test]
    fn a_commit_in_full_mode_syncs_the_log_before_it_returns() {
        let dir = tempfile::tempdir().unwrap();
        let address = address();
        let stage = CommitStage::default();
        let db = opened(&dir, Synchronous::Full);
        let log = db.wal.log().expect("full mode syncs the log").clone();
        write(&db, 1);
        stage.commit(&address, &db, Effects::default()).unwrap();
        assert_eq!(log.syncs(), 1);
        let _mine = stage.operation();
        let _other = stage.operation();
        write(&db, 2);
        stage.commit(&address, &db, Effects::default()).unwrap();
        assert_eq!((log.syncs(), count(&db)), (2, 2));
        assert_eq!(stage.log_syncs().count(), 2, "each sync is in the metrics");
        assert!(stage.log_syncs().sum() > std::time::Duration::ZERO);

        let normal = opened(&dir, Synchronous::Normal);
        assert!(normal.wal.log().is_none());
        write(&normal, 1);
        stage.commit(&address, &normal, Effects::default()).unwrap();
        assert_eq!(count(&normal), 1);
        assert_eq!(stage.log_syncs().count(), 2, "normal mode syncs nothing");
    }

    /// Beside other instances' operations, a commit that may sync later
    /// leaves the sync to its caller; alone (the hand-off would cost more
    /// than it frees) or in `normal` mode, there is nothing left to do.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_commit_syncing_later_leaves_the_sync_to_its_caller_while_others_run() {
        let dir = tempfile::tempdir().unwrap();
        let address = address();
        let stage = CommitStage::default();
        let db = opened(&dir, Synchronous::Full);
        let log = db.wal.log().unwrap().clone();
        let _mine = stage.operation();
        write(&db, 1);
        let (_, unsynced) = stage
            .commit_syncing_later(&address, &db, Effects::default())
            .unwrap();
        assert!(unsynced.is_none(), "alone, the commit syncs at once");
        assert_eq!(log.syncs(), 1);

        let _other = stage.operation();
        write(&db, 2);
        let (_, unsynced) = stage
            .commit_syncing_later(&address, &db, Effects::default())
            .unwrap();
        let unsynced = unsynced.expect("beside another operation, the caller syncs");
        assert_eq!(log.syncs(), 1);
        let durable = unsynced.start();
        durable.wait().await.unwrap();
        assert!(durable.has_ended());
        assert_eq!((log.syncs(), count(&db)), (2, 2));
        assert_eq!(
            stage.log_syncs().count(),
            2,
            "a sync started later counts too"
        );

        let normal = opened(&dir, Synchronous::Normal);
        write(&normal, 1);
        let (_, unsynced) = stage
            .commit_syncing_later(&address, &normal, Effects::default())
            .unwrap();
        assert!(unsynced.is_none());
    }
}
