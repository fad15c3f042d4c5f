//! Running an operation in an instance's cell: looking the instance up in
//! the directory, waking or creating it (making room first), running the
//! operation with the slot held, and releasing what its commits asked for.
//!
//! Every operation on an instance, from a caller, a guest or background
//! work, goes through [`Core::with_cell`]: one at a time per instance.
//! Action calls go through [`Core::call_action`], which leaves each call
//! with the slot so that whoever holds it runs the waiting calls in
//! batches, one commit each (`cell/batch.rs`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::address::Address;
use crate::caller::Caller;
use crate::cell::{AwakeToken, CallJob, Cell, Home, Origin};
use crate::definition::ActorDefinition;
use crate::directory::{QueuePlace, Slot, SlotState};
use crate::error::Error;
use crate::metrics::{ActorMetrics, Eviction};
use crate::storage::ClaimError;
use crate::text::escaped;

use super::Core;

impl Core {
    /// Starts a cell for `address`, opening its database (creating it as
    /// `origin` allows); a failed creation leaves no files behind. Queue
    /// workers start their own cells this way, outside the directory.
    pub(crate) async fn start_cell(
        &self,
        def: &ActorDefinition,
        address: &Address,
        origin: Origin<'_>,
    ) -> Result<Cell, Error> {
        self.start_cell_as(def, address, origin, false).await
    }

    /// [`Core::start_cell`], for a cell that may keep nothing when
    /// `dry_run` (it reaches no other instance either).
    pub(super) async fn start_cell_as(
        &self,
        def: &ActorDefinition,
        address: &Address,
        origin: Origin<'_>,
        dry_run: bool,
    ) -> Result<Cell, Error> {
        let metrics = self.metrics.actor(&def.name).clone();
        let token = self
            .take_place(address, &metrics, def.options.call_timeout)
            .await?;
        self.claim(address).await?;
        let existed = self.store.exists(address);
        if !existed {
            // A destroy cut short (a crash between its deletions) can leave
            // the WAL of the old instance: it must not meet the new one.
            let _ = self.store.remove_files(address);
        }
        let home = Home {
            address: address.clone(),
            store: &self.store,
            commit_stage: self.commit_stage.clone(),
            outside: if dry_run { None } else { self.outside() },
            dry_run,
            outbound: (!dry_run).then(|| self.outbound.clone()),
        };
        let result = Cell::start(&self.engine, def, home, origin, token).await;
        if result.is_err() && !existed {
            // Leave nothing behind for an instance that never came to be.
            let _ = self.store.remove_files(address);
        }
        result
    }

    /// Makes the instance at `address` this host's to open (in a cluster:
    /// its lease, and its file the replicated one). Another host's
    /// instance is [`Error::Moved`], for the public host to forward to.
    ///
    /// A cell this host opened under a lease it has lost since (its
    /// membership expired while it was paused or cut off) keeps the file
    /// open until it is replaced, and the file may not be restored
    /// meanwhile: such a cell, awake and not in use, is closed here and
    /// the claim made again. One in use is replaced by the operation that
    /// comes next; the claim is then [`Error::Conflict`], which callers
    /// retry.
    pub(crate) async fn claim(&self, address: &Address) -> Result<(), Error> {
        self.claim_closing_stale(address)
            .await
            .map_err(|e| claim_error(address, e))
    }

    /// [`Core::claim`] for a request about to be served: an instance
    /// whose lease this host has just taken is served here even while a
    /// cell of a lost lease still has its file open, since the operation
    /// replaces that cell (see [`Core::with_cell`]) and claims again.
    pub(crate) async fn claim_to_serve(&self, address: &Address) -> Result<(), Error> {
        match self.claim_closing_stale(address).await {
            Ok(()) | Err(ClaimError::Busy) => Ok(()),
            Err(e) => Err(claim_error(address, e)),
        }
    }

    async fn claim_closing_stale(&self, address: &Address) -> Result<(), ClaimError> {
        let claimed = match self.store.claim(address).await {
            Err(ClaimError::Busy) if self.close_stale_cell(address) => {
                self.store.claim(address).await
            }
            claimed => claimed,
        };
        if claimed.is_ok() {
            self.run_the_last_deploy(&address.actor).await;
        }
        claimed
    }

    /// Closes the awake cell of `address` if it must be replaced (see
    /// `Cell::is_broken`) and no operation holds it. Whether it did.
    fn close_stale_cell(&self, address: &Address) -> bool {
        let Some(slot) = self.directory.get(address) else {
            return false;
        };
        let Ok(mut state) = slot.state.try_lock() else {
            return false;
        };
        if !matches!(&*state, SlotState::Awake(cell) if cell.is_broken()) {
            return false;
        }
        *state = SlotState::Asleep;
        true
    }

    /// Runs `op` on the awake cell of (`actor`, `key`), waking or creating
    /// the instance first as `origin` allows.
    pub(crate) async fn with_cell<T>(
        &self,
        actor: &str,
        key: &str,
        origin: Origin<'_>,
        op: impl AsyncFnOnce(&mut Cell) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let op = async |cell: &mut Cell, _: &Slot| op(cell).await;
        self.with_cell_unless(actor, key, origin, |_| {}, || None, op)
            .await
    }

    /// Runs the action `action` with `args` for `caller` on (`actor`, `key`), creating
    /// the instance with a `null` input if needed, coalesced with the
    /// other calls waiting for the instance (see `cell/batch.rs`): whoever
    /// takes the slot runs the waiting calls in batches until its own call
    /// has its answer.
    pub(crate) async fn call_action(
        &self,
        actor: &str,
        key: &str,
        action: &str,
        args: &str,
        chain: Vec<Address>,
        caller: Caller,
    ) -> Result<String, Error> {
        let job = CallJob::new(action, args, chain, caller);
        let mut queued = false;
        loop {
            self.with_cell_unless(
                actor,
                key,
                Origin::CreateIfMissing("null"),
                |slot| {
                    if !std::mem::replace(&mut queued, true) {
                        slot.pending_calls.push(&job);
                    }
                },
                || job.is_answered().then_some(()),
                async |cell, slot| {
                    cell.run_calls(&slot.pending_calls, &job).await;
                    Ok(())
                },
            )
            .await?;
            // No answer yet: the wasm instance broke before this call's
            // turn; it runs on the next one.
            if let Some((answer, durable)) = job.take_answer() {
                if let Some(durable) = durable
                    && let Err(e) = durable.wait().await
                {
                    return Err(e.unknown_outcome(actor, key));
                }
                return answer;
            }
        }
    }

    /// [`Core::with_cell`], where the operation is told its slot, and
    /// `arrive` is told the slot before the operation waits for it. Once
    /// the slot is taken, `done` may say the operation has nothing left to
    /// do (another holder of the slot did it) and give its result.
    async fn with_cell_unless<T>(
        &self,
        actor: &str,
        key: &str,
        origin: Origin<'_>,
        mut arrive: impl FnMut(&Slot),
        done: impl Fn() -> Option<T>,
        op: impl AsyncFnOnce(&mut Cell, &Slot) -> Result<T, Error>,
    ) -> Result<T, Error> {
        // An actor still compiling: wait for it, up to its call timeout.
        let mut def = self.resolve_ready(actor, key).await?;
        loop {
            let slot = self
                .directory
                .slot(&def.name, key, def.options.sleep_timeout);
            let address = &slot.address;
            let _place = QueuePlace::enter(&slot)?;
            arrive(&slot);
            let mut state = slot.state.lock().await;
            if let Some(result) = done() {
                return Ok(result);
            }
            let _operation = self.commit_stage.operation();
            // A deploy may have come while this operation waited.
            def = self.resolve(actor, key)?;
            match &*state {
                // Retired by shutdown: no new cell may start after it.
                SlotState::Retired if self.is_shutting_down() => {
                    return Err(Error::ShuttingDown);
                }
                SlotState::Retired => continue,
                SlotState::Awake(cell) if cell.is_broken() => *state = SlotState::Asleep,
                _ => {}
            }
            let outdated = matches!(&*state, SlotState::Awake(cell) if cell.is_outdated(&def));
            if outdated
                && let SlotState::Awake(cell) = std::mem::replace(&mut *state, SlotState::Asleep)
            {
                // It ran the code of before a deploy: it goes to sleep
                // (that code's `sleep` hook), and the instance wakes on the
                // new code, after its `migrate`.
                cell.sleep().await;
            }
            if let SlotState::Asleep = *state {
                let cell = self.start_cell(&def, address, origin).await?;
                *state = SlotState::Awake(Box::new(cell));
            } else if origin.only_new() {
                return Err(Error::already_exists(actor, key));
            }
            let SlotState::Awake(cell) = &mut *state else {
                unreachable!("the slot was just woken")
            };
            let result = op(cell, &slot).await;
            // The new instance's directory is synced: while other
            // instances' operations run, off this worker, so that they go
            // on and the syncs of creations wait for the disk together.
            if let Some(created_at) = cell.take_created()
                && let Err(e) = if self.commit_stage.others_run() {
                    crate::blocking::off_worker(|| self.store.created(address, created_at))
                } else {
                    self.store.created(address, created_at)
                }
            {
                tracing::warn!(actor, key, error = %escaped(format!("{e:#}")), "the new instance is not recorded");
            }
            let queue_grew = cell.take_queue_grew();
            let workflow_started = cell.take_workflow_started();
            if workflow_started {
                cell.metrics().workflow_started(key);
            }
            if (queue_grew || workflow_started)
                && let Some(wakeups) = self.wakeups()
            {
                // A workflow's queue feeds its queue waits: its driver runs.
                if queue_grew && !cell.is_workflow() {
                    wakeups.kick_queue(&def, address);
                }
                if workflow_started || (queue_grew && cell.is_workflow()) {
                    wakeups.drive_workflow(address.clone());
                }
            }
            if cell.is_broken() {
                let failed_creation = cell.creation_failed();
                *state = SlotState::Asleep;
                if failed_creation {
                    let _ = self.store.remove_files(address);
                }
            }
            slot.touch();
            return result;
        }
    }

    /// A place for the instance at `address` to wake in: taken while the
    /// host is under its limit of awake instances, made by putting the
    /// least recently used idle instance to sleep when it is at its limit,
    /// and waited for, up to `wait`, while every awake instance is busy.
    async fn take_place(
        &self,
        address: &Address,
        metrics: &Arc<ActorMetrics>,
        wait: Duration,
    ) -> Result<AwakeToken, Error> {
        let deadline = Instant::now() + wait;
        loop {
            let given_back = self.awake.given_back();
            tokio::pin!(given_back);
            given_back.as_mut().enable();
            if let Some(token) = self.awake.try_take(metrics) {
                return Ok(token);
            }
            // Another start may take the place given back first: then
            // another instance sleeps.
            if self.put_one_to_sleep(address).await {
                continue;
            }
            let now = Instant::now();
            if now >= deadline {
                let max = self.config.max_awake;
                return Err(Error::Overloaded(format!(
                    "all {max} awake instances are busy (waited {} ms); raise --max-awake or try again",
                    wait.as_millis()
                )));
            }
            // A place given back, or a busy instance turned idle (looked
            // for again at the next round).
            let _ = tokio::time::timeout((deadline - now).min(LOOK_AGAIN), given_back).await;
        }
    }

    /// Puts the least recently used idle instance (other than `except`'s)
    /// to sleep, and forgets its slot as the reaper does, so that the
    /// directory holds about the awake instances however many come and go.
    /// Whether there was one.
    ///
    /// The few least recently used are looked at first; all of them only if
    /// none of those could sleep (each was busy or had connections).
    async fn put_one_to_sleep(&self, except: &Address) -> bool {
        for few in [FIRST_CANDIDATES, usize::MAX] {
            for slot in self.directory.eviction_candidates(except, few) {
                // An instance with connections stays awake.
                if self.hub.is_connected(&slot.address) {
                    continue;
                }
                let Ok(mut state) = slot.state.try_lock() else {
                    continue;
                };
                if !matches!(*state, SlotState::Awake(_)) {
                    continue;
                }
                // Callers waiting for the slot find it retired and look
                // the address up again.
                if let SlotState::Awake(cell) = std::mem::replace(&mut *state, SlotState::Retired) {
                    cell.metrics().evicted(Eviction::Room);
                    // Its place is given back as the cell is dropped here.
                    cell.sleep().await;
                }
                self.directory.remove(&slot);
                return true;
            }
        }
        false
    }
}

/// How many of the least recently used instances a start at the awake
/// limit looks at first for one to put to sleep.
const FIRST_CANDIDATES: usize = 16;

/// How often a start waiting for a place looks again for an instance that
/// turned idle (a place given back wakes it at once).
const LOOK_AGAIN: Duration = Duration::from_millis(10);

/// What a failed claim of `address` means to the caller.
fn claim_error(address: &Address, e: ClaimError) -> Error {
    let (actor, key) = (address.actor.to_string(), address.key.to_string());
    match e {
        ClaimError::Elsewhere(owner) => Error::Moved {
            actor,
            key,
            owner: owner.id,
            address: owner.address,
            live: owner.live,
        },
        ClaimError::Busy => Error::Conflict { actor, key },
        e @ (ClaimError::Cluster(_) | ClaimError::Restore(_)) => {
            Error::ClusterUnavailable(format!("cannot take `{address}`: {e}"))
        }
    }
}
