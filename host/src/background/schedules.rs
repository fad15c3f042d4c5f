//! Schedule runs: the due schedules of one instance run in a task of
//! their own, a batch per turn of the instance's slot.

use tracing::Instrument;

use crate::address::Address;
use crate::cell::Origin;
use crate::clock::now_ms;
use crate::config::SCHEDULE_RETRY_AFTER_ERROR;
use crate::error::Error;
use crate::presence::Lease;
use crate::storage::Mark;
use crate::text::escaped;

use super::Background;

/// Most due schedules run in one turn of an instance's slot; other callers
/// get their turn between batches.
const SCHEDULE_BATCH: usize = 16;

impl Background {
    /// Runs the due schedules of `address` in a task of their own, unless
    /// that task is running already.
    pub(super) fn run_schedules(&self, address: Address) {
        let Some(lease) = self.core.presence.lease(&address) else {
            return;
        };
        if !self.schedule_runs.lock().unwrap().insert(address.clone()) {
            return;
        }
        let Some(work) = self.this.upgrade() else {
            return;
        };
        tokio::spawn(async move {
            work.run_due_schedules(&address, &lease).await;
            work.schedule_runs.lock().unwrap().remove(&address);
            drop(lease);
        });
    }

    async fn run_due_schedules(&self, address: &Address, lease: &Lease) {
        let (actor, key) = (&*address.actor, &*address.key);
        loop {
            if lease.is_closing() {
                return;
            }
            let ran = self
                .core
                .with_cell(actor, key, Origin::MustExist, async |cell| {
                    cell.run_due_schedules(SCHEDULE_BATCH).await
                })
                .instrument(tracing::debug_span!("schedules", actor, key))
                .await;
            match ran {
                Ok(true) => continue,
                Ok(false) => return,
                Err(Error::NoSuchInstance { .. }) => {
                    // Destroyed meanwhile: its mark goes with it.
                    let clear =
                        self.core
                            .store
                            .marks()
                            .set_mark_from(Mark::Schedule, actor, key, || Ok::<_, ()>(None));
                    if let Err(e) = clear {
                        tracing::warn!(actor, key, error = %escaped(&e), "cannot clear the schedule mark");
                    }
                    return;
                }
                // Met a call of the instance: the timer tries again. Or
                // another host of the cluster serves it, and runs them.
                Err(Error::Conflict { .. } | Error::Moved { .. }) => return,
                // Tried again later, not at every turn of the timer: the
                // instance does not hold the front of the due list.
                Err(e) => {
                    tracing::warn!(actor, key, error = %escaped(&e), "cannot run the due schedules; they are tried again later");
                    let at = now_ms() + SCHEDULE_RETRY_AFTER_ERROR.as_millis() as i64;
                    let later =
                        self.core
                            .store
                            .marks()
                            .set_mark_from(Mark::Schedule, actor, key, || Ok::<_, ()>(Some(at)));
                    if let Err(e) = later {
                        tracing::warn!(actor, key, error = %escaped(&e), "cannot move the schedule mark");
                    }
                    return;
                }
            }
        }
    }
}
