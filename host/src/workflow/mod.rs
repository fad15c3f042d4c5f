//! Durable workflows: the host drives each instance's workflow until it
//! completes, replaying it from the start after every wait, wake or
//! restart. The imports are in `capability::workflow`, the tables in
//! `storage::workflow`, one run in `Cell::run_workflow`.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crate::address::Address;
use crate::cell::{Origin, RunEnd};
use crate::error::Error;
use crate::host::{Host, Inner};
use crate::presence::Lease;
use crate::storage::instance_db::now_ms;
pub use crate::inspect::WorkflowView;
pub use crate::storage::workflow::{
    EntryKind, EntryStatus, HistoryEntry, WorkflowRecord, WorkflowStatus,
};

/// A driver stays with a workflow whose wait ends within this time, rather
/// than ending and being started again by the timer.
const STAY_FOR: Duration = Duration::from_secs(1);
/// Pause before a run that met a concurrent call is tried again.
const CONFLICT_PAUSE: Duration = Duration::from_millis(5);
/// Wait before a driver that failed (storage, instance cannot start) tries
/// again.
const RETRY_AFTER_ERROR: Duration = Duration::from_secs(1);

/// The workflows being driven.
#[derive(Default)]
pub(crate) struct Drivers {
    /// Instances whose workflow has a driver now.
    running: Mutex<HashSet<Address>>,
    /// Those of them asked to run again (the queue grew during a run).
    kicked: Mutex<HashSet<Address>>,
}

impl Drivers {
    /// The instances whose workflow has a driver now.
    pub(crate) fn running(&self) -> HashSet<Address> {
        self.running.lock().unwrap().clone()
    }
}

impl Host {
    /// Makes sure the workflow of (`actor`, `key`) is being driven. The
    /// workflow mark is set to now first, so that a crash before the run
    /// ends resumes it.
    pub(crate) fn drive_workflow(&self, address: Address) {
        if self.is_shutting_down() {
            return;
        }
        // None while the instance is destroyed.
        let Some(lease) = self.inner.presence.lease(&address) else {
            return;
        };
        if !self
            .inner
            .drivers
            .running
            .lock()
            .unwrap()
            .insert(address.clone())
        {
            // The driver runs again after its current run (an append
            // during a run is seen by the next one).
            self.inner.drivers.kicked.lock().unwrap().insert(address);
            return;
        }
        if let Err(e) =
            self.inner
                .index
                .set_workflow_mark(&address.actor, &address.key, Some(now_ms()))
        {
            tracing::error!(error = %e, "cannot record the workflow mark");
        }
        // The task holds the host only while a run goes on, so that a host
        // that shuts down is dropped (and its data directory unlocked)
        // without waiting for the driver's next wake-up.
        let inner = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            drive(&inner, &address, &lease).await;
            if let Some(inner) = inner.upgrade() {
                inner.drivers.running.lock().unwrap().remove(&address);
            }
            drop(lease);
        });
    }

    /// The workflow of (`actor`, `key`) and its history, read from a
    /// separate read-only connection (the instance is not woken).
    pub fn workflow(&self, actor: &str, key: &str) -> Result<WorkflowView, Error> {
        self.resolve(actor, key)?;
        crate::inspect::workflow_view(self.data_dir(), actor, key)?
            .ok_or_else(|| Error::NoWorkflow(actor.into()))
    }
}

/// Runs the workflow of `address` until it finishes or waits longer than
/// [`STAY_FOR`], then records its mark.
async fn drive(inner: &Weak<Inner>, address: &Address, lease: &Lease) {
    let (actor, key) = (&*address.actor, &*address.key);
    loop {
        // The instance is being destroyed: its workflow goes with it.
        if lease.is_closing() {
            return;
        }
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let host = Host { inner };
        host.inner.drivers.kicked.lock().unwrap().remove(address);
        let end = host
            .with_cell(actor, key, Origin::MustExist, async |cell| {
                cell.run_workflow().await
            })
            .await;
        let kicked = host.inner.drivers.kicked.lock().unwrap().remove(address);
        let end = match end {
            Ok(RunEnd::Wait(_) | RunEnd::Idle) if kicked => Ok(RunEnd::Again),
            other => other,
        };
        let index = &host.inner.index;
        let marked = match end {
            Ok(RunEnd::Again) => continue,
            Ok(RunEnd::Conflict) => {
                drop(host);
                tokio::select! {
                    _ = tokio::time::sleep(CONFLICT_PAUSE) => {}
                    _ = lease.closing() => return,
                }
                continue;
            }
            Ok(RunEnd::Wait(at)) => {
                let marked = index.set_workflow_mark(actor, key, Some(at));
                let wait = Duration::from_millis((at - now_ms()).max(0) as u64);
                if wait <= STAY_FOR && marked.is_ok() {
                    drop(host);
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = lease.closing() => return,
                    }
                    continue;
                }
                marked
            }
            // An append drives the workflow again.
            Ok(RunEnd::Idle) => index.set_workflow_mark(actor, key, None),
            Ok(RunEnd::Finished) | Err(Error::NoSuchInstance { .. }) => {
                index.set_workflow_mark(actor, key, None)
            }
            Err(Error::ShuttingDown) => return,
            Err(e) => {
                tracing::warn!(actor, key, error = %e, "the workflow cannot run; it tries again later");
                let at = now_ms() + RETRY_AFTER_ERROR.as_millis() as i64;
                index.set_workflow_mark(actor, key, Some(at))
            }
        };
        if let Err(e) = marked {
            tracing::error!(actor, key, error = %e, "cannot record the workflow mark");
        }
        return;
    }
}
