//! Coalesced calls: the action calls waiting for one instance run back to
//! back in one transaction, each inside its own savepoint, and commit
//! once.
//!
//! A call that fails or traps rolls back to its savepoint and fails alone;
//! its neighbours' writes stay. Only the commit releases the replies of
//! the calls that succeeded, with their broadcast events, queue wake-ups
//! and schedule marks (the commit stage acts on the batch's effects, which
//! hold the succeeded calls' effects only). A failed call is answered at
//! once: nothing of it is kept, so nothing of it waits for a commit.
//!
//! A batch is bounded ([`MAX_BATCH_CALLS`], [`MAX_BATCH_BYTES`],
//! [`MAX_BATCH_TIME`]) and takes only calls already waiting: a call that
//! finds the instance idle runs alone, as a batch of one. It ends early
//! after a call that reached another instance (that call's effects
//! elsewhere are not undone by a rollback here, so no later call may
//! lose it its commit), and after a trap (the wasm instance is replaced;
//! the calls not yet run wait for the new one). When SQLite rolls the
//! whole transaction back by itself (a full disk, say), the call that
//! caused it fails and the earlier calls of the batch, none of which
//! reached outside, run again in the next batch.
//!
//! The first operation after a start runs alone, in the start's
//! transaction: a failed first call still rolls its instance's creation
//! back.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use crate::address::Address;
use crate::caller::Caller;
use crate::config::{MAX_BATCH_BYTES, MAX_BATCH_CALLS, MAX_BATCH_TIME};
use crate::error::Error;
use crate::instance::commit::{Durable, Unsynced};
use crate::storage::Savepoint;

use super::{Cell, storage_error};

/// One action call waiting for its instance, and its answer once it has
/// one.
pub(crate) struct CallJob {
    action: String,
    args: String,
    /// The instances waiting on this call (empty for a call from outside).
    chain: Vec<Address>,
    /// Who makes the call.
    caller: Caller,
    answer: Mutex<Option<Result<String, Error>>>,
    /// The sync of the log its answer waits for (`synchronous = full`),
    /// set before the answer.
    durable: Mutex<Option<Durable>>,
    /// Taken into a batch; with no answer and no batch running, that batch
    /// was dropped mid-way and the call must be queued again.
    taken: AtomicBool,
}

impl CallJob {
    pub(crate) fn new(
        action: &str,
        args: &str,
        chain: Vec<Address>,
        caller: Caller,
    ) -> Arc<CallJob> {
        Arc::new(CallJob {
            action: action.into(),
            args: args.into(),
            chain,
            caller,
            answer: Mutex::new(None),
            durable: Mutex::new(None),
            taken: AtomicBool::new(false),
        })
    }

    pub(crate) fn is_answered(&self) -> bool {
        self.answer.lock().expect("not poisoned").is_some()
    }

    /// The answer, and the sync of the log it may be passed on only after.
    pub(crate) fn take_answer(&self) -> Option<(Result<String, Error>, Option<Durable>)> {
        let answer = self.answer.lock().expect("not poisoned").take()?;
        Some((answer, self.durable.lock().expect("not poisoned").take()))
    }

    fn answer(&self, answer: Result<String, Error>) {
        *self.answer.lock().expect("not poisoned") = Some(answer);
    }

    /// Answers the call, to be passed on once `durable` has ended well.
    fn answer_once_durable(&self, answer: Result<String, Error>, durable: Option<Durable>) {
        *self.durable.lock().expect("not poisoned") = durable;
        self.answer(answer);
    }
}

/// The calls waiting for one instance, oldest first. A call whose caller
/// went away (its [`CallJob`] dropped) is skipped.
#[derive(Default)]
pub(crate) struct PendingCalls(Mutex<VecDeque<Weak<CallJob>>>);

impl PendingCalls {
    /// Queues `job`, behind the calls waiting already; a job is queued
    /// once (a batch that cannot find it queues it again itself).
    pub(crate) fn push(&self, job: &Arc<CallJob>) {
        self.0
            .lock()
            .expect("not poisoned")
            .push_back(Arc::downgrade(job));
    }

    /// Queues `jobs` again, in their order, ahead of the calls waiting.
    fn push_front(&self, jobs: Vec<Arc<CallJob>>) {
        let mut queue = self.0.lock().expect("not poisoned");
        for job in jobs.into_iter().rev() {
            job.taken.store(false, Ordering::Relaxed);
            queue.push_front(Arc::downgrade(&job));
        }
    }

    /// The oldest waiting call whose caller is still there. A call is
    /// never run twice: one taken or answered already is passed over.
    fn take(&self) -> Option<Arc<CallJob>> {
        let mut queue = self.0.lock().expect("not poisoned");
        while let Some(weak) = queue.pop_front() {
            if let Some(job) = weak.upgrade()
                && !job.taken.swap(true, Ordering::Relaxed)
                && !job.is_answered()
            {
                return Some(job);
            }
        }
        None
    }
}

impl Cell {
    /// Runs batches of the calls in `pending` until `mine` has its answer
    /// or the wasm instance broke (the caller then replaces it and comes
    /// back). The caller holds the instance's slot.
    pub(crate) async fn run_calls(&mut self, pending: &PendingCalls, mine: &Arc<CallJob>) {
        if mine.taken.load(Ordering::Relaxed) && !mine.is_answered() {
            // Taken by a batch whose caller went away mid-way (its
            // transaction was rolled back): queue it again.
            pending.push_front(vec![mine.clone()]);
        }
        while !mine.is_answered() && !self.is_broken() {
            let ran = if self.starting.is_some() {
                self.run_first_call(pending).await
            } else {
                self.run_batch(pending).await
            };
            if !ran && !mine.is_answered() {
                // Not in the queue, not answered: nothing else can answer it.
                pending.push_front(vec![mine.clone()]);
            }
        }
    }

    /// Runs the oldest waiting call alone, in the start's transaction.
    async fn run_first_call(&mut self, pending: &PendingCalls) -> bool {
        let Some(job) = pending.take() else {
            return false;
        };
        let answer = self
            .action(&job.action, &job.args, &job.chain, &job.caller)
            .await;
        job.answer(answer);
        true
    }

    /// Runs one batch of waiting calls in one transaction; returns whether
    /// there was a call to run.
    async fn run_batch(&mut self, pending: &PendingCalls) -> bool {
        let Some(first) = pending.take() else {
            return false;
        };
        let begun = Instant::now();
        let mut bytes = 0;
        let mut count = 0;
        // Calls that succeeded, waiting for the commit.
        let mut succeeded: Vec<(Arc<CallJob>, String)> = Vec::new();
        let mut open = false;
        let mut next = Some(first);
        while let Some(job) = next.take() {
            if !open {
                if let Err(e) = self.begin() {
                    job.answer(Err(e));
                    return true;
                }
                open = true;
            }
            count += 1;
            bytes += job.args.len();
            let alone = succeeded.is_empty();
            match self.batched_call(&job, alone).await {
                Savepointed::Kept(result) => succeeded.push((job, result)),
                Savepointed::Undone(e) => {
                    job.answer(Err(e));
                    // Alone, it was rolled back with the transaction.
                    open &= !alone;
                }
                Savepointed::TransactionLost(e) => {
                    // Everything before it is gone with the transaction.
                    job.answer(Err(e));
                    self.db().rollback();
                    self.store.data_mut().discard_effects();
                    pending.push_front(succeeded.into_iter().map(|(job, _)| job).collect());
                    return true;
                }
            }
            let full = count >= MAX_BATCH_CALLS
                || bytes >= MAX_BATCH_BYTES
                || begun.elapsed() >= MAX_BATCH_TIME;
            if full || self.is_broken() || self.store.data().effects().reached_outside {
                break;
            }
            next = pending.take();
        }
        if succeeded.is_empty() {
            // Every call failed: nothing to commit.
            self.db().rollback();
            self.store.data_mut().discard_effects();
            return true;
        }
        match self.finish_syncing_later(Ok(())) {
            Ok(((), unsynced)) => {
                // The answers are given at once, each caller waiting for
                // the sync before it passes its answer on: a holder that
                // goes away from here on leaves no call of the batch to be
                // run again.
                let durable = unsynced.map(Unsynced::start);
                for (job, result) in succeeded {
                    job.answer_once_durable(Ok(result), durable.clone());
                }
                if let Some(durable) = durable {
                    self.wait_until_durable(durable).await;
                }
            }
            Err(e) => {
                for (job, _) in succeeded {
                    job.answer(Err(e.clone()));
                }
            }
        }
        true
    }

    /// Runs one call of a batch inside its own savepoint (`alone`: first
    /// in its transaction, see [`Cell::in_savepoint`]).
    async fn batched_call(&mut self, job: &CallJob, alone: bool) -> Savepointed<String> {
        self.store.data_mut().set_chain(&job.chain);
        let result = self
            .in_savepoint(alone, async |cell| {
                cell.run_action(&job.action, &job.args, &job.caller).await
            })
            .await;
        self.store.data_mut().clear_chain();
        result
    }

    /// Runs `op` (guest code) inside a savepoint of the open transaction,
    /// with effects of its own: kept with its writes if it succeeds, undone
    /// with them if it fails. `alone`: nothing is kept in the transaction
    /// yet, so it needs no savepoint of its own, and a failure rolls the
    /// whole transaction back (the caller begins a new one for what
    /// follows): a batch of one costs what a call alone always did.
    pub(super) async fn in_savepoint<T>(
        &mut self,
        alone: bool,
        op: impl AsyncFnOnce(&mut Cell) -> Result<T, Error>,
    ) -> Savepointed<T> {
        let name = self.name().clone();
        if !alone && let Err(e) = self.db().enter(Savepoint::Call) {
            return Savepointed::Undone(storage_error(&name, e));
        }
        let before = self.store.data_mut().take_effects();
        let result = op(self).await;
        let state = self.store.data_mut();
        let own = state.restore_effects(before);
        if let Some(cause) = state.take_lost_transaction() {
            let error = match result {
                Err(e) => e,
                Ok(_) => Error::transaction_rolled_back(&name.actor, &name.key, &cause),
            };
            return Savepointed::TransactionLost(error);
        }
        let kept = match &result {
            Ok(_) if alone => Ok(()),
            Ok(_) => self.db().keep(Savepoint::Call),
            Err(_) if alone => {
                self.db().rollback();
                Ok(())
            }
            Err(_) => self.db().undo(Savepoint::Call),
        };
        match (result, kept) {
            (Ok(value), Ok(())) => {
                self.store.data_mut().absorb_effects(own);
                Savepointed::Kept(value)
            }
            (Ok(_), Err(e)) => Savepointed::TransactionLost(storage_error(&name, e)),
            (Err(e), Ok(())) => Savepointed::Undone(e),
            (Err(e), Err(_)) => Savepointed::TransactionLost(e),
        }
    }
}

/// How guest code run inside a savepoint ended.
pub(super) enum Savepointed<T> {
    /// Its writes stand, waiting for the transaction's commit.
    Kept(T),
    /// Rolled back to its savepoint; the rest of the transaction stands.
    Undone(Error),
    /// The whole transaction is gone (SQLite rolled it back, or the
    /// savepoint could not be ended): nothing may commit.
    TransactionLost(Error),
}
