//! Coalesced calls: the action calls waiting for one instance run back to
//! back in one transaction, each inside its own savepoint, and commit
//! once (the loop is `savepoints.rs`'s, with its bounds and early ends).
//!
//! A call that fails or traps rolls back to its savepoint and fails alone;
//! its neighbours' writes stay. Only the commit releases the replies of
//! the calls that succeeded, with their broadcast events, queue wake-ups
//! and schedule marks (the commit stage acts on the batch's effects, which
//! hold the succeeded calls' effects only). A failed call is answered at
//! once: nothing of it is kept, so nothing of it waits for a commit.
//!
//! A batch takes only calls already waiting: a call that finds the
//! instance idle runs alone, as a batch of one. After a trap, the calls
//! not yet run wait for the new wasm instance. When SQLite rolls the
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

use crate::address::Address;
use crate::caller::Caller;
use crate::error::Error;
use crate::instance::commit::{Durable, Unsynced};

use super::Cell;
use super::savepoints::{Item, Rules};

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
        let rules = Rules {
            stop_at_failure: false,
        };
        let batched = self.run_batched(rules, || pending.take()).await;
        if batched.kept.is_empty() && batched.failed.is_empty() {
            return false;
        }
        // A failed call is answered at once: nothing of it waits for the
        // commit.
        for (job, e) in batched.failed {
            job.answer(Err(e));
        }
        if batched.lost {
            // Gone with the transaction, and none reached outside: they run
            // again in the next batch.
            pending.push_front(batched.kept.into_iter().map(|(job, _)| job).collect());
            return true;
        }
        if batched.kept.is_empty() {
            return true;
        }
        match self.finish_syncing_later(Ok(())) {
            Ok(((), unsynced)) => {
                // The answers are given at once, each caller waiting for
                // the sync before it passes its answer on: a holder that
                // goes away from here on leaves no call of the batch to be
                // run again.
                let durable = unsynced.map(Unsynced::start);
                for (job, result) in batched.kept {
                    job.answer_once_durable(Ok(result), durable.clone());
                }
                if let Some(durable) = durable {
                    self.wait_until_durable(durable).await;
                }
            }
            Err(e) => {
                for (job, _) in batched.kept {
                    job.answer(Err(e.clone()));
                }
            }
        }
        true
    }
}

impl Item for Arc<CallJob> {
    type Output = String;

    fn size(&self) -> usize {
        self.args.len()
    }

    async fn run(&self, cell: &mut Cell) -> Result<String, Error> {
        cell.store.data_mut().set_chain(&self.chain);
        let result = cell
            .run_action(&self.action, &self.args, &self.caller)
            .await;
        cell.store.data_mut().clear_chain();
        result
    }
}
