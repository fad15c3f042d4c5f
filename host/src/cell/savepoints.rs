//! One loop for every batch of guest work in one transaction: the calls
//! waiting for an instance (`batch.rs`) and a run of queue events
//! (`queue.rs`). Each item runs inside its own savepoint, with effects of
//! its own: a failed item is undone alone, and the commit (the caller's)
//! acts on the kept items' effects only.
//!
//! A batch is bounded ([`BatchSize`]: items, bytes, time). It ends early
//! after an item that reached another instance or the world (a rollback
//! here would not undo that, so no later item may cost it its commit), and
//! after a trap (the wasm instance is replaced). When the whole transaction
//! goes (SQLite rolled it back by itself, on a full disk, say), the kept
//! items go with it: none of them reached outside, so the caller may run
//! them again.

use crate::error::Error;
use crate::instance::batch::BatchSize;
use crate::storage::Savepoint;

use super::{Cell, storage_error};

/// How one kind of batch differs from the others.
#[derive(Clone, Copy)]
pub(super) struct Rules {
    /// A failed item ends the batch (queue events keep their order);
    /// otherwise the next item runs.
    pub(super) stop_at_failure: bool,
}

/// One item of a batch: guest work run inside its savepoint.
pub(super) trait Item {
    type Output;
    /// What the item counts against the batch's bytes.
    fn size(&self) -> usize;
    async fn run(&self, cell: &mut Cell) -> Result<Self::Output, Error>;
}

/// How a batch went.
pub(super) struct Batched<J, T> {
    /// The items whose writes stand in the open transaction, with their
    /// results, in order: the caller commits them, unless `lost`.
    pub(super) kept: Vec<(J, T)>,
    /// The items that failed, in order, with their errors. If `lost`, the
    /// last one is the item that lost the transaction.
    pub(super) failed: Vec<(J, Error)>,
    /// The transaction is gone (it could not begin, or it was rolled back
    /// whole): the kept items' writes went with it.
    pub(super) lost: bool,
}

impl Cell {
    /// Runs the items `next` gives in one transaction, each inside its own
    /// savepoint, until the batch is full, `next` has none left, or `rules`
    /// end it. The transaction is left open for the caller to commit if an
    /// item was kept, and rolled back otherwise.
    pub(super) async fn run_batched<J: Item>(
        &mut self,
        rules: Rules,
        mut next: impl FnMut() -> Option<J>,
    ) -> Batched<J, J::Output> {
        let mut size = BatchSize::new();
        let mut batched = Batched {
            kept: Vec::new(),
            failed: Vec::new(),
            lost: false,
        };
        let mut open = false;
        loop {
            let full = !size.is_empty() && size.is_full(self.store.data().effects());
            if self.is_broken() || full {
                break;
            }
            let Some(item) = next() else { break };
            size.add(item.size());
            if !open {
                if let Err(e) = self.begin() {
                    batched.failed.push((item, e));
                    batched.lost = true;
                    return batched;
                }
                open = true;
            }
            let alone = batched.kept.is_empty();
            let result = self
                .in_savepoint(alone, async |cell| item.run(cell).await)
                .await;
            match result {
                Savepointed::Kept(value) => batched.kept.push((item, value)),
                Savepointed::Undone(e) => {
                    batched.failed.push((item, e));
                    // Alone, it was rolled back with the transaction.
                    open &= !alone;
                    if rules.stop_at_failure {
                        break;
                    }
                }
                Savepointed::TransactionLost(e) => {
                    batched.failed.push((item, e));
                    self.store.data_mut().roll_back();
                    batched.lost = true;
                    return batched;
                }
            }
        }
        if batched.kept.is_empty() {
            // Nothing to commit.
            self.store.data_mut().roll_back();
        }
        batched
    }

    /// Runs `op` (guest code) inside a savepoint of the open transaction,
    /// with effects of its own: kept with its writes if it succeeds, undone
    /// with them if it fails. `alone`: nothing is kept in the transaction
    /// yet, so it needs no savepoint of its own, and a failure rolls the
    /// whole transaction back (the caller begins a new one for what
    /// follows): a batch of one costs what a call alone always did.
    async fn in_savepoint<T>(
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
enum Savepointed<T> {
    /// Its writes stand, waiting for the transaction's commit.
    Kept(T),
    /// Rolled back to its savepoint; the rest of the transaction stands.
    Undone(Error),
    /// The whole transaction is gone (SQLite rolled it back, or the
    /// savepoint could not be ended): nothing may commit.
    TransactionLost(Error),
}
