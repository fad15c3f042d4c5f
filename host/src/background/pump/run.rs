//! The run loop of a pump: it picks and dispatches while events are due,
//! waits for calls in flight, and ends by leaving the queue mark the timer
//! starts the next pump by (or clearing it when the instance is gone).

use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::watch;

use super::Run;
use super::timing::next_pick_time;
use crate::cell::Origin;
use crate::clock::now_ms;
use crate::config::MAX_PROCESS_CALLS_PER_INSTANCE;
use crate::error::Error;
use crate::storage::{HostTables, Mark, MarkError};
use crate::text::escaped;

/// A pump is kept awake this long when its next event is due soon, rather
/// than ending and being started again by the queue timer.
const STAY_FOR: Duration = Duration::from_secs(1);
/// How long a pump with an empty queue waits for new events before it ends.
const LINGER: Duration = Duration::from_millis(500);

impl Run {
    pub(super) async fn run(mut self, mut stopped: watch::Receiver<bool>) {
        tokio::select! {
            _ = stopped.wait_for(|stop| *stop) => {}
            result = self.drive() => {
                if let Err(Error::Moved { owner, .. }) = &result {
                    // Another host serves the instance now (a drain, or a
                    // host's share handed on): its pump runs there.
                    tracing::debug!(
                        actor = &*self.address.actor, key = &*self.address.key, owner = %owner,
                        "the queue pump ends: another host serves the instance"
                    );
                } else if let Err(e) = result {
                    tracing::warn!(
                        actor = &*self.address.actor, key = &*self.address.key, error = %escaped(&e),
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

    async fn drive(&mut self) -> Result<(), Error> {
        // In a cluster: this host's file is the replicated one (or the
        // instance is another host's, whose timer runs its queue).
        match self.work.core.claim(&self.address).await {
            Ok(()) => {}
            Err(Error::Moved { .. }) => {
                self.work.pump_ended(&self.address, self.id);
                return Ok(());
            }
            Err(e) => return Err(e),
        }
        if !self.work.core.store.exists(&self.address) {
            return self.end_gone();
        }
        // Wake the instance (its migrate and wake hooks, its policy).
        let policy = match self
            .work
            .core
            .with_cell(self.actor(), self.key(), Origin::MustExist, async |cell| {
                let policy = cell.host_transaction(|db| db.conn.queue().policy())?;
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
        self.count_depth(true);
        loop {
            self.count_depth(false);
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
                        tracing::warn!(actor = self.actor(), key = self.key(), error = %escaped(&e), "cannot pick queue events");
                        self.set_error(Some(e.to_string()));
                        Vec::new()
                    }
                }
            };
            for event in picked {
                self.dispatch(event, &policy, now).await;
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

    /// Ends a pump whose instance does not exist (or has no queue).
    fn end_gone(&mut self) -> Result<(), Error> {
        self.metrics.queue_depth(&self.address.key, 0);
        self.work
            .core
            .store
            .marks()
            .set_mark(Mark::Queue, self.actor(), self.key(), None)
            .map_err(|e| self.marks_failed(e))?;
        self.work.pump_ended(&self.address, self.id);
        Ok(())
    }

    /// Tries to end: records the queue mark from the committed queue, then
    /// ends unless kicked meanwhile. Returns whether the pump ended.
    ///
    /// `declined` (the retry wait) when due events were there but not
    /// taken; `None` when the queue was empty.
    fn end(&mut self, declined: Option<Duration>) -> Result<bool, Error> {
        self.count_depth(true);
        let reader = self.reader();
        let marked = self
            .work
            .core
            .store
            .marks()
            .set_mark_from(Mark::Queue, self.actor(), self.key(), || {
                next_pick_time(reader, now_ms(), declined)
            })
            .map_err(|e| self.marks_failed(e))?;
        marked.map_err(|e: rusqlite::Error| self.storage(e))?;
        Ok(self.work.pump_may_end(&self.address, self.id))
    }

    /// Ends after an error, to try again in `after`.
    fn end_for(&mut self, after: Duration) -> Result<(), Error> {
        let at = now_ms() + after.as_millis() as i64;
        let marked = self.work.core.store.marks().set_mark_from(
            Mark::Queue,
            self.actor(),
            self.key(),
            || Ok::<_, rusqlite::Error>(Some(at)),
        );
        match marked {
            // In a cluster, the lease is gone (another host took it, or this
            // host's membership expired): the mark stays as it was, and the
            // host that takes the lease runs the queue.
            Err(MarkError::NotHeld) => {}
            marked => {
                marked
                    .map_err(|e| self.marks_failed(e))?
                    .map_err(|e| self.storage(e))?;
            }
        }
        self.work.pump_ended(&self.address, self.id);
        Ok(())
    }
}
