//! The pump of one instance's queue: picks due events by the instance's
//! policy, runs `process` for each (up to the policy's concurrency per
//! group), records failures, answers waiting senders, and ends when the
//! queue has nothing due, leaving the queue mark for the next time.
//!
//! # Concurrent processing
//!
//! One wasm instance runs one call at a time, so concurrent `process`
//! calls run in separate wasm instances of the same actor instance: the
//! awake instance (the one actions use) takes one event at a time, and
//! *workers* (more wasm instances, each with its own connection to the
//! instance's database, started with `migrate` and `wake`) take the rest.
//!
//! Every call runs in its own SQLite transaction. SQLite (in WAL mode)
//! lets them read and compute at the same time but lets one write at a
//! time, and refuses to let a transaction write once another transaction
//! has committed since it began reading (`SQLITE_BUSY_SNAPSHOT`). Such a
//! call is rolled back whole and run again from the start, against the
//! new data. So concurrent calls of one instance are serializable: no
//! update is lost, and a call either commits all of its effects or none.
//! A guest cannot catch the refusal: the import traps.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::Connection;
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;

use super::Background;
use super::waiters::EventOutcome;
use crate::address::Address;
use crate::cell::{Cell, Origin};
use crate::config::{MAX_PROCESS_CALLS_PER_INSTANCE, MAX_SELECT_EVENTS};
use crate::definition::ActorDefinition;
use crate::error::Error;
use crate::presence::Lease;
use crate::runtime::ConflictRetry;
use crate::storage::index::Mark;
use crate::storage::instance_db::now_ms;
use crate::storage::queue::{self as queue_db, AfterFailure};
use crate::storage::queue::{QueueMode, QueuePolicy, QueuedEvent};

/// A pump is kept awake this long when its next event is due soon, rather
/// than ending and being started again by the queue timer.
const STAY_FOR: Duration = Duration::from_secs(1);
/// How long a pump with an empty queue waits for new events before it ends.
const LINGER: Duration = Duration::from_millis(500);
/// Up to this many groups with pending events, events are picked from the
/// head of each group; past it, by one scan in the mode's order.
const MAX_GROUPS_BY_HEAD: usize = 64;
/// Pause before an event whose processing met a concurrent call is picked again.
const CONFLICT_PAUSE: Duration = Duration::from_millis(5);

static NEXT_PUMP_ID: AtomicU64 = AtomicU64::new(1);

/// The host's handle on a running pump.
pub(crate) struct Pump {
    id: u64,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Default)]
struct Shared {
    kicked: AtomicBool,
    wake: Notify,
    last_error: Mutex<Option<String>>,
}

impl Pump {
    /// Starts the pump of `address`; it holds `lease` until it ends.
    pub(crate) fn start(
        work: Arc<Background>,
        def: Arc<ActorDefinition>,
        address: Address,
        lease: Lease,
    ) -> Pump {
        let id = NEXT_PUMP_ID.fetch_add(1, Ordering::Relaxed);
        let shared = Arc::new(Shared::default());
        let (stop, stopped) = watch::channel(false);
        let run = Run {
            id,
            work,
            def,
            address,
            shared: shared.clone(),
            tasks: JoinSet::new(),
            in_flight: HashMap::new(),
            main_busy: false,
            workers: Vec::new(),
            reader: None,
            _lease: lease,
        };
        let task = tokio::spawn(run.run(stopped));
        Pump {
            id,
            shared,
            stop,
            task,
        }
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// New work may have come: look again.
    pub(crate) fn kick(&self) {
        self.shared.kicked.store(true, Ordering::SeqCst);
        self.shared.wake.notify_one();
    }

    pub(crate) fn take_kick(&self) -> bool {
        self.shared.kicked.swap(false, Ordering::SeqCst)
    }

    /// The last error that kept the pump from picking events (a custom
    /// selector that failed, say).
    pub(crate) fn last_error(&self) -> Option<String> {
        self.shared.last_error.lock().unwrap().clone()
    }

    /// Stops the pump: calls in flight are dropped (rolled back; their
    /// events stay pending), workers are dropped, and this returns once
    /// every connection of the pump is closed.
    pub(crate) async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

/// Who runs a `process` call.
enum Runner {
    /// The instance's awake wasm instance, through its slot.
    Main,
    /// A worker of this pump.
    Worker(Box<Cell>),
}

/// How one event's processing ended.
enum Finished {
    Processed(String),
    Failed(String, AfterFailure),
    /// Met a concurrent call; not an attempt. The event is picked again.
    Conflict,
    /// The instance is gone (destroyed), cannot start, or the host failed
    /// (overloaded, storage): not an attempt. The pump ends and tries
    /// again after the retry wait.
    Stuck(Error),
}

struct Done {
    id: i64,
    runner: Runner,
    finished: Finished,
}

struct Run {
    id: u64,
    work: Arc<Background>,
    def: Arc<ActorDefinition>,
    address: Address,
    shared: Arc<Shared>,
    tasks: JoinSet<Done>,
    /// Events being processed, with their group ("" for the default).
    in_flight: HashMap<i64, String>,
    main_busy: bool,
    /// Idle workers.
    workers: Vec<Cell>,
    /// A read-only connection that sees what is committed.
    reader: Option<Connection>,
    /// Returned when the pump and every connection of it are gone.
    _lease: Lease,
}

impl Run {
    async fn run(mut self, mut stopped: watch::Receiver<bool>) {
        tokio::select! {
            _ = stopped.wait_for(|stop| *stop) => {}
            result = self.drive() => {
                if let Err(e) = result {
                    tracing::warn!(
                        actor = %self.address.actor, key = %self.address.key, error = %e,
                        "the queue pump stopped; it tries again after the retry wait"
                    );
                    self.set_error(Some(e.to_string()));
                    let retry = self.def.options.queue_retry_base;
                    if let Err(e) = self.end_for(retry) {
                        tracing::error!(error = %e, "cannot record the queue mark");
                    }
                }
            }
        }
        // Dropping a call in flight rolls it back; its event stays pending.
        self.tasks.shutdown().await;
        for worker in self.workers.drain(..) {
            worker.sleep().await;
        }
    }

    fn actor(&self) -> &str {
        &self.address.actor
    }

    fn key(&self) -> &str {
        &self.address.key
    }

    async fn drive(&mut self) -> Result<(), Error> {
        if !self.work.core.store.exists(&self.address) {
            return self.end_gone();
        }
        // Wake the instance (its migrate and wake hooks, its policy).
        let policy = match self
            .work
            .core
            .with_cell(self.actor(), self.key(), Origin::MustExist, async |cell| {
                let policy = cell.host_transaction(|db| queue_db::policy(&db.conn))?;
                Ok((policy, cell.is_workflow()))
            })
            .await
        {
            // A workflow's queue feeds its queue waits, not `process`: the
            // workflow's driver takes over (it sets its own mark first).
            Ok((_, true)) => {
                self.work.drive_workflow(self.address.clone());
                return self.end_gone();
            }
            Ok((Some(policy), false)) => policy,
            Ok((None, false)) | Err(Error::NoSuchInstance { .. }) => return self.end_gone(),
            Err(e) => return Err(e),
        };
        self.reader = Some(
            self.work
                .core
                .store
                .open_reader(&self.address)
                .map_err(|e| self.storage(e))?,
        );
        loop {
            self.shared.kicked.store(false, Ordering::SeqCst);
            let now = now_ms();
            let free = MAX_PROCESS_CALLS_PER_INSTANCE.saturating_sub(self.in_flight.len());
            let picked = if free == 0 {
                Vec::new()
            } else {
                match self.pick(&policy, now, free).await {
                    Ok(picked) => {
                        self.set_error(None);
                        picked
                    }
                    Err(e) => {
                        tracing::warn!(actor = self.actor(), key = self.key(), error = %e, "cannot pick queue events");
                        self.set_error(Some(e.to_string()));
                        Vec::new()
                    }
                }
            };
            for event in picked {
                self.dispatch(event).await;
            }
            let mut wait = None;
            if self.tasks.is_empty() {
                // Nothing in flight and nothing started: when could there be?
                let next = self.next_pick_time(now)?;
                match next {
                    None => {
                        // Linger a little: a sender that waits for each event
                        // would otherwise start a new pump every time.
                        let linger = tokio::time::sleep(LINGER);
                        tokio::select! {
                            _ = self.shared.wake.notified() => continue,
                            _ = linger => {}
                        }
                        if self.end(None)? {
                            return Ok(());
                        }
                        continue;
                    }
                    Some(at) if at - now > STAY_FOR.as_millis() as i64 => {
                        if self.end(Some(self.def.options.queue_retry_base))? {
                            return Ok(());
                        }
                        continue;
                    }
                    Some(at) => wait = Some(Duration::from_millis((at - now).max(1) as u64)),
                }
            }
            let timer = tokio::time::sleep(wait.unwrap_or(Duration::from_secs(3600)));
            tokio::select! {
                Some(done) = self.tasks.join_next() => {
                    match done {
                        Ok(done) => self.finished(done)?,
                        Err(e) => tracing::error!(error = %e, "a queue task failed"),
                    }
                }
                _ = self.shared.wake.notified() => {}
                _ = timer, if wait.is_some() => {}
            }
        }
    }

    fn reader(&self) -> &Connection {
        self.reader.as_ref().expect("opened before the loop")
    }

    fn storage(&self, e: rusqlite::Error) -> Error {
        Error::storage(self.actor(), self.key(), e.to_string())
    }

    fn set_error(&self, error: Option<String>) {
        *self.shared.last_error.lock().unwrap() = error;
    }

    /// When an event could next be picked, with nothing in flight and
    /// nothing started: `None` when the queue is empty; else the earliest
    /// retry (a group whose event waits for its retry holds its other
    /// events back), or a retry wait from now when due events were there
    /// but not taken (a custom selector declined them, picking failed).
    fn next_pick_time(&self, now: i64) -> Result<Option<i64>, Error> {
        let retry_base = self.def.options.queue_retry_base;
        next_pick_time(self.reader(), now, Some(retry_base)).map_err(|e| self.storage(e))
    }

    /// Ends a pump whose instance does not exist (or has no queue).
    fn end_gone(&mut self) -> Result<(), Error> {
        self.work
            .core
            .store
            .marks()
            .set_mark(Mark::Queue, self.actor(), self.key(), None)
            .map_err(|e| self.storage(e))?;
        self.work.pump_ended(&self.address, self.id);
        Ok(())
    }

    /// Tries to end: records the queue mark from the committed queue, then
    /// ends unless kicked meanwhile. Returns whether the pump ended.
    ///
    /// `declined` (the retry wait) when due events were there but not
    /// taken; `None` when the queue was empty.
    fn end(&mut self, declined: Option<Duration>) -> Result<bool, Error> {
        let reader = self.reader();
        let marked = self
            .work
            .core
            .store
            .marks()
            .set_mark_from(Mark::Queue, self.actor(), self.key(), || {
                next_pick_time(reader, now_ms(), declined)
            })
            .map_err(|e| self.storage(e))?;
        marked.map_err(|e: rusqlite::Error| self.storage(e))?;
        Ok(self.work.pump_may_end(&self.address, self.id))
    }

    /// Ends after an error, to try again in `after`.
    fn end_for(&mut self, after: Duration) -> Result<(), Error> {
        let at = now_ms() + after.as_millis() as i64;
        self.work
            .core
            .store
            .marks()
            .set_mark_from(Mark::Queue, self.actor(), self.key(), || {
                Ok::<_, rusqlite::Error>(Some(at))
            })
            .map_err(|e| self.storage(e))?
            .map_err(|e| self.storage(e))?;
        self.work.pump_ended(&self.address, self.id);
        Ok(())
    }

    /// Picks up to `free` due events that the policy allows now.
    async fn pick(
        &mut self,
        policy: &QueuePolicy,
        now: i64,
        free: usize,
    ) -> Result<Vec<QueuedEvent>, Error> {
        let per_group = policy.per_group();
        let mut busy =
            queue_db::waiting_for_retry(self.reader(), now).map_err(|e| self.storage(e))?;
        for group in self.in_flight.values() {
            *busy.entry(group.clone()).or_default() += 1;
        }
        let mut skip_ids: Vec<i64> = self.in_flight.keys().copied().collect();
        let mut full: Vec<String> = busy
            .iter()
            .filter(|(_, n)| **n >= per_group)
            .map(|(g, _)| g.clone())
            .collect();
        if policy.mode == QueueMode::Custom {
            return self
                .pick_custom(now, free, per_group, busy, skip_ids, full)
                .await;
        }
        let groups =
            queue_db::groups(self.reader(), MAX_GROUPS_BY_HEAD + 1).map_err(|e| self.storage(e))?;
        if groups.len() <= MAX_GROUPS_BY_HEAD {
            return self.pick_by_group(policy, now, free, &busy, &skip_ids, &groups);
        }
        let mut picked = Vec::new();
        while picked.len() < free {
            let groups: Vec<&str> = full.iter().map(String::as_str).collect();
            let batch = queue_db::due_events(
                self.reader(),
                policy.mode,
                now,
                &skip_ids,
                &groups,
                free - picked.len(),
            )
            .map_err(|e| self.storage(e))?;
            if batch.is_empty() {
                break;
            }
            for event in batch {
                let group = event.group.clone().unwrap_or_default();
                let count = busy.entry(group.clone()).or_default();
                *count += 1;
                skip_ids.push(event.id);
                picked.push(event);
                if *count >= per_group {
                    // Later events of this batch may be of this group:
                    // ask again without it.
                    full.push(group);
                    break;
                }
            }
        }
        Ok(picked)
    }

    /// Picks from the head of each group that has room, then merges the
    /// heads in the mode's order. Costs one index lookup per group, however
    /// long the queue.
    fn pick_by_group(
        &self,
        policy: &QueuePolicy,
        now: i64,
        free: usize,
        busy: &HashMap<String, usize>,
        skip_ids: &[i64],
        groups: &[String],
    ) -> Result<Vec<QueuedEvent>, Error> {
        let per_group = policy.per_group();
        let mut heads = Vec::new();
        for group in groups {
            let room = per_group.saturating_sub(busy.get(group).copied().unwrap_or(0));
            if room == 0 {
                continue;
            }
            let head = queue_db::group_head(
                self.reader(),
                policy.mode,
                group,
                now,
                skip_ids,
                room.min(free),
            )
            .map_err(|e| self.storage(e))?;
            heads.extend(head);
        }
        match policy.mode {
            QueueMode::Lifo => heads.sort_by_key(|(e, _)| {
                (
                    e.priority,
                    std::cmp::Reverse(e.created_at),
                    std::cmp::Reverse(e.id),
                )
            }),
            QueueMode::Random => heads.sort_by_key(|(e, random)| (e.priority, *random)),
            QueueMode::Fifo | QueueMode::Custom => {
                heads.sort_by_key(|(e, _)| (e.priority, e.created_at, e.id))
            }
        }
        Ok(heads.into_iter().take(free).map(|(e, _)| e).collect())
    }

    #[allow(clippy::too_many_arguments)]
    async fn pick_custom(
        &mut self,
        now: i64,
        free: usize,
        per_group: usize,
        mut busy: HashMap<String, usize>,
        skip_ids: Vec<i64>,
        full: Vec<String>,
    ) -> Result<Vec<QueuedEvent>, Error> {
        let groups: Vec<&str> = full.iter().map(String::as_str).collect();
        let offered = queue_db::due_events(
            self.reader(),
            QueueMode::Custom,
            now,
            &skip_ids,
            &groups,
            MAX_SELECT_EVENTS,
        )
        .map_err(|e| self.storage(e))?;
        if offered.is_empty() {
            return Ok(Vec::new());
        }
        let chosen = self
            .work
            .core
            .with_cell(self.actor(), self.key(), Origin::MustExist, async |cell| {
                cell.select(&offered).await
            })
            .await?;
        let mut by_id: HashMap<i64, QueuedEvent> = offered.into_iter().map(|e| (e.id, e)).collect();
        if let Some(bad) = chosen.iter().find(|id| !by_id.contains_key(id)) {
            return Err(Error::Failed {
                actor: self.actor().into(),
                key: self.key().into(),
                during: "queue selector".into(),
                code: "unknown-event".into(),
                message: format!(
                    "the selector returned id {bad}, which is not one of the pending events \
                     it was given; nothing was claimed"
                ),
            });
        }
        let mut picked = Vec::new();
        for id in chosen {
            if picked.len() == free {
                break;
            }
            let Some(event) = by_id.remove(&id) else {
                continue; // named twice
            };
            let count = busy
                .entry(event.group.clone().unwrap_or_default())
                .or_default();
            if *count < per_group {
                *count += 1;
                picked.push(event);
            }
        }
        Ok(picked)
    }

    /// Starts processing `event` on the awake instance if it is free, or
    /// on a worker.
    async fn dispatch(&mut self, event: QueuedEvent) {
        let runner = if !self.main_busy {
            self.main_busy = true;
            Runner::Main
        } else if let Some(worker) = self.workers.pop() {
            Runner::Worker(Box::new(worker))
        } else {
            match self.start_worker().await {
                Ok(worker) => Runner::Worker(Box::new(worker)),
                Err(e) => {
                    tracing::warn!(actor = self.actor(), key = self.key(), error = %e, "cannot start a queue worker");
                    return;
                }
            }
        };
        self.in_flight
            .insert(event.id, event.group.clone().unwrap_or_default());
        let work = self.work.clone();
        let def = self.def.clone();
        let address = self.address.clone();
        self.tasks
            .spawn(async move { process(work, def, address, runner, event).await });
    }

    /// Starts a worker; a start that meets concurrent writes is tried
    /// again until the actor's call timeout has passed.
    async fn start_worker(&mut self) -> Result<Cell, Error> {
        let (work, def, address) = (&self.work, &self.def, &self.address);
        ConflictRetry::run(def.options.call_timeout, || async {
            let mut cell = work
                .core
                .start_cell(def, address, Origin::MustExist)
                .await?;
            cell.commit_creation()?;
            Ok(cell)
        })
        .await
    }

    fn finished(&mut self, done: Done) -> Result<(), Error> {
        self.in_flight.remove(&done.id);
        match done.runner {
            Runner::Main => self.main_busy = false,
            // A worker that trapped is dropped; another starts when needed.
            Runner::Worker(worker) if !worker.is_broken() => self.workers.push(*worker),
            Runner::Worker(_) => {}
        }
        let waiters = &self.work.waiters;
        let (actor, key) = (&self.address.actor, &self.address.key);
        match done.finished {
            Finished::Processed(result) => {
                waiters.answer(actor, key, done.id, EventOutcome::Processed(result));
            }
            Finished::Failed(error, AfterFailure::DeadLettered) => {
                tracing::warn!(actor = &**actor, key = &**key, event = done.id, %error, "event dead-lettered");
                waiters.answer(actor, key, done.id, EventOutcome::DeadLettered(error));
            }
            Finished::Failed(error, _) => {
                tracing::info!(actor = &**actor, key = &**key, event = done.id, %error, "event failed; it will be retried");
            }
            Finished::Conflict => {}
            Finished::Stuck(e) => return Err(e),
        }
        Ok(())
    }
}

/// Processes one event on `runner`, then records a failure with the same
/// runner. A conflict is retried here, after a pause.
async fn process(
    work: Arc<Background>,
    def: Arc<ActorDefinition>,
    address: Address,
    runner: Runner,
    event: QueuedEvent,
) -> Done {
    let id = event.id;
    let (actor, key) = (&*address.actor, &*address.key);
    match runner {
        Runner::Main => {
            let processed = work
                .core
                .with_cell(actor, key, Origin::MustExist, async |cell| {
                    cell.process(&event).await
                })
                .await;
            let finished = match processed {
                Ok(result) => Finished::Processed(result),
                Err(Error::Conflict { .. }) => {
                    tokio::time::sleep(CONFLICT_PAUSE).await;
                    Finished::Conflict
                }
                Err(e) if !is_attempt(&e, id) => Finished::Stuck(e),
                Err(e) => {
                    let error = e.to_string();
                    match work
                        .core
                        .with_cell(actor, key, Origin::MustExist, async |cell| {
                            cell.record_failure(id, &error, &def.options)
                        })
                        .await
                    {
                        Ok(after) => Finished::Failed(error, after),
                        Err(e) => Finished::Stuck(e),
                    }
                }
            };
            Done {
                id,
                runner: Runner::Main,
                finished,
            }
        }
        Runner::Worker(mut cell) => {
            let finished = match cell.process(&event).await {
                Ok(result) => Finished::Processed(result),
                Err(Error::Conflict { .. }) => {
                    tokio::time::sleep(CONFLICT_PAUSE).await;
                    Finished::Conflict
                }
                Err(e) if !is_attempt(&e, id) => Finished::Stuck(e),
                Err(e) => {
                    let error = e.to_string();
                    let mut recorded = cell.record_failure(id, &error, &def.options);
                    while let Err(Error::Conflict { .. }) = recorded {
                        tokio::time::sleep(CONFLICT_PAUSE).await;
                        recorded = cell.record_failure(id, &error, &def.options);
                    }
                    match recorded {
                        Ok(after) => Finished::Failed(error, after),
                        Err(e) => Finished::Stuck(e),
                    }
                }
            };
            Done {
                id,
                runner: Runner::Worker(cell),
                finished,
            }
        }
    }
}

/// Whether `e`, the failure of processing event `id`, is a failed attempt
/// of the event: a failure of the guest's own `process` (an error, a trap,
/// its deadline). The host's own failures (overloaded, the instance cannot
/// start, storage, a conflict) are not: the event never ran.
fn is_attempt(e: &Error, id: i64) -> bool {
    match e {
        Error::Failed { during, .. }
        | Error::Trapped { during, .. }
        | Error::Timeout { during, .. } => *during == crate::cell::process_during(id),
        _ => false,
    }
}

/// When an event of the queue read through `reader` could next be picked,
/// with nothing in flight: `None` for an empty queue; the earliest event's
/// due time if it is in the future; else `now`, or, when due events were
/// not taken (`declined`, with the retry wait), the earliest retry or
/// `now + retry wait`, whichever comes first.
fn next_pick_time(
    reader: &Connection,
    now: i64,
    declined: Option<Duration>,
) -> rusqlite::Result<Option<i64>> {
    let Some(due) = queue_db::next_due(reader)? else {
        return Ok(None);
    };
    if due > now {
        return Ok(Some(due));
    }
    let Some(retry_base) = declined else {
        return Ok(Some(now));
    };
    let later = now + retry_base.as_millis() as i64;
    let retry = retry_time_after(reader, now)?;
    Ok(Some(retry.map_or(later, |r| r.min(later))))
}

/// The earliest retry time after `now`, if any event waits for one.
fn retry_time_after(reader: &Connection, now: i64) -> rusqlite::Result<Option<i64>> {
    reader
        .prepare_cached("SELECT min(not_before) FROM main._burrow_queue WHERE not_before > ?")?
        .query_row([now], |r| r.get(0))
}

/// A read-only connection for picking events: it sees what is committed.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_failures_of_the_events_own_process_are_attempts() {
        let (actor, key) = (String::from("a"), String::from("k"));
        let failed = |during: String| Error::Failed {
            actor: actor.clone(),
            key: key.clone(),
            during,
            code: "planned".into(),
            message: String::new(),
        };
        assert!(is_attempt(&failed(crate::cell::process_during(7)), 7));
        let timeout = Error::Timeout {
            actor: actor.clone(),
            key: key.clone(),
            during: crate::cell::process_during(7),
            timeout_ms: 10,
        };
        assert!(is_attempt(&timeout, 7));
        // The instance's start failed: `process` never ran.
        assert!(!is_attempt(&failed("hook wake".into()), 7));
        assert!(!is_attempt(&failed(crate::cell::process_during(8)), 7));
        let host_own = [
            Error::Overloaded("all 1 awake instances are busy".into()),
            Error::Conflict {
                actor: actor.clone(),
                key: key.clone(),
            },
            Error::Storage {
                actor: actor.clone(),
                key: key.clone(),
                message: "disk I/O error".into(),
            },
            Error::Trapped {
                actor: actor.clone(),
                key: key.clone(),
                during: "instantiation".into(),
                message: "maximum concurrent limit reached".into(),
            },
        ];
        for e in host_own {
            assert!(!is_attempt(&e, 7), "{e}");
        }
    }
}
