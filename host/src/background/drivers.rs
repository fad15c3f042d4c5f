//! Workflow drivers: each instance's workflow runs until it completes,
//! replayed from the start after every wait, wake or restart. The imports
//! are in `capability::workflow`, the tables in `storage` (`HostTables`),
//! one run in `Cell::run_workflow`.

use std::collections::HashSet;
use std::sync::{Mutex, Weak};
use std::time::Duration;

use tracing::Instrument;

use crate::address::Address;
use crate::cell::{Origin, RunEnd};
use crate::clock::now_ms;
use crate::config::BACKGROUND_CONFLICT_PAUSE;
use crate::error::Error;
use crate::presence::Lease;
use crate::storage::{HostTables, Mark, MarkError};
use crate::text::escaped;

use super::Background;

/// A driver stays with a workflow whose wait ends within this time, rather
/// than ending and being started again by the timer.
const STAY_FOR: Duration = Duration::from_secs(1);
/// Wait before a driver that failed (storage, instance cannot start) tries
/// again.
const RETRY_AFTER_ERROR: Duration = Duration::from_secs(1);

/// The workflows being driven.
#[derive(Default)]
pub(crate) struct Drivers {
    /// Instances whose workflow has a driver now. Its lock is taken before
    /// `kicked`'s wherever both are held.
    running: Mutex<HashSet<Address>>,
    /// Those of them asked to run again (the queue grew during a run).
    kicked: Mutex<HashSet<Address>>,
}

impl Drivers {
    /// The instances whose workflow has a driver now.
    pub(crate) fn running(&self) -> HashSet<Address> {
        self.running.lock().unwrap().clone()
    }

    /// Whether the caller is to start the driver of `address`: false when
    /// one runs already, which is then asked to run again.
    fn start(&self, address: &Address) -> bool {
        let mut running = self.running.lock().unwrap();
        if running.insert(address.clone()) {
            return true;
        }
        self.kicked.lock().unwrap().insert(address.clone());
        false
    }

    /// Takes the kick left for `address`, if any: whether one was. A run
    /// takes them as it starts (it sees what they were for) and as it
    /// ends (one left meanwhile asks for another run).
    fn take_kick(&self, address: &Address) -> bool {
        self.kicked.lock().unwrap().remove(address)
    }

    /// Ends the driver of `address`, unless it was asked to run again since
    /// its last run looked and `may_run` (then it runs again, and true is
    /// returned). Both under the lock of `running`, so a kick either comes
    /// before and is seen here, or after and starts a driver of its own.
    fn run_again_or_end(&self, address: &Address, may_run: bool) -> bool {
        let mut running = self.running.lock().unwrap();
        if self.kicked.lock().unwrap().remove(address) && may_run {
            return true;
        }
        running.remove(address);
        false
    }
}

impl Background {
    /// Makes sure the workflow of (`actor`, `key`) is being driven. The
    /// workflow mark is set to now first, so that a crash before the run
    /// ends resumes it.
    pub(crate) fn drive_workflow(&self, address: Address) {
        if self.core.is_shutting_down() {
            return;
        }
        // None while the instance is destroyed.
        let Some(lease) = self.core.presence.lease(&address) else {
            return;
        };
        // A driver that runs already runs again after its current run (an
        // append during a run is seen by the next one).
        if !self.drivers.start(&address) {
            return;
        }
        self.mark_driven(&address);
        // The task holds the host only while a run goes on, so that a host
        // that shuts down is dropped (and its data directory unlocked)
        // without waiting for the driver's next wake-up.
        let work = self.this.clone();
        tokio::spawn(async move {
            loop {
                drive(&work, &address, &lease).await;
                let Some(host) = work.upgrade() else {
                    break;
                };
                // Not for an instance being destroyed, nor on a host that
                // shuts down.
                let may_run = !lease.is_closing() && !host.core.is_shutting_down();
                if !host.drivers.run_again_or_end(&address, may_run) {
                    break;
                }
                host.mark_driven(&address);
            }
            drop(lease);
        });
    }

    /// Sets the workflow mark of `address` to now: its driver is about to
    /// run.
    fn mark_driven(&self, address: &Address) {
        match self.core.store.marks().set_mark(
            Mark::Workflow,
            &address.actor,
            &address.key,
            Some(now_ms()),
        ) {
            // In a cluster, an instance whose lease this host is about to
            // take (its timer found its mark due): the mark stands.
            Ok(()) | Err(MarkError::NotHeld) => {}
            Err(e) => tracing::error!(error = %e, "cannot record the workflow mark"),
        }
    }
}

/// Runs the workflow of `address` until it finishes or waits longer than
/// [`STAY_FOR`], then records its mark.
async fn drive(work: &Weak<Background>, address: &Address, lease: &Lease) {
    let (actor, key) = (&*address.actor, &*address.key);
    // Once a step of a batch reached for another instance, this driver's
    // runs commit every step alone.
    let mut steps_alone = false;
    loop {
        // The instance is being destroyed: its workflow goes with it.
        if lease.is_closing() {
            return;
        }
        let Some(host) = work.upgrade() else {
            return;
        };
        host.drivers.take_kick(address);
        let end = host
            .core
            .with_cell(actor, key, Origin::MustExist, async |cell| {
                cell.run_workflow(steps_alone).await
            })
            .instrument(tracing::debug_span!("workflow run", actor, key))
            .await;
        let kicked = host.drivers.take_kick(address);
        let end = match end {
            Ok(RunEnd::Wait(_) | RunEnd::Idle) if kicked => Ok(RunEnd::Again),
            other => other,
        };
        let index = &host.core.store.marks();
        let marked = match end {
            Ok(RunEnd::Again) => continue,
            Ok(RunEnd::AgainAlone) => {
                steps_alone = true;
                continue;
            }
            Ok(RunEnd::Conflict) => {
                drop(host);
                tokio::select! {
                    _ = tokio::time::sleep(BACKGROUND_CONFLICT_PAUSE) => {}
                    _ = lease.closing() => return,
                }
                continue;
            }
            Ok(RunEnd::Wait(at)) => {
                let marked = index.set_mark(Mark::Workflow, actor, key, Some(at));
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
            Ok(RunEnd::Idle) => index.set_mark(Mark::Workflow, actor, key, None),
            // A resume drives it again. One that committed since the run
            // (its kick taken already) is seen here: the mark is set from
            // the pause as committed, in the marks' order, so that the
            // resume's own mark comes after it or the resume is read.
            Ok(RunEnd::Paused) => {
                let store = &host.core.store;
                let marked = index.set_mark_from(Mark::Workflow, actor, key, || {
                    let reader = store.open_reader(address)?;
                    let paused = reader.pause().is_paused()?;
                    Ok::<_, rusqlite::Error>((!paused).then(now_ms))
                });
                match marked {
                    Ok(Ok(Some(_))) => continue,
                    Ok(Ok(None)) => Ok(()),
                    Ok(Err(e)) => {
                        tracing::warn!(actor, key, error = %escaped(&e), "cannot read the workflow's pause; it tries again later");
                        let at = now_ms() + RETRY_AFTER_ERROR.as_millis() as i64;
                        index.set_mark(Mark::Workflow, actor, key, Some(at))
                    }
                    Err(e) => Err(e),
                }
            }
            Ok(RunEnd::Finished) | Err(Error::NoSuchInstance { .. }) => {
                index.set_mark(Mark::Workflow, actor, key, None)
            }
            // Another host of the cluster serves it: its timer drives it.
            Err(Error::ShuttingDown | Error::Moved { .. }) => return,
            Err(e) => {
                tracing::warn!(actor, key, error = %escaped(&e), "the workflow cannot run; it tries again later");
                let at = now_ms() + RETRY_AFTER_ERROR.as_millis() as i64;
                index.set_mark(Mark::Workflow, actor, key, Some(at))
            }
        };
        match marked {
            // In a cluster, the lease is gone (another host took it, or this
            // host's membership expired): the mark stays as it was, and the
            // host that takes the lease drives the workflow.
            Ok(()) | Err(MarkError::NotHeld) => {}
            Err(e) => {
                tracing::error!(actor, key, error = %escaped(&e), "cannot record the workflow mark")
            }
        }
        return;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address() -> Address {
        Address {
            actor: "flow".into(),
            key: "k".into(),
        }
    }

    #[test]
    fn a_kick_after_the_last_look_runs_the_driver_again() {
        let drivers = Drivers::default();
        assert!(drivers.start(&address()));
        // An append while the driver runs, after its run took the kicks.
        assert!(!drivers.start(&address()));
        assert!(drivers.run_again_or_end(&address(), true));
        assert!(drivers.running().contains(&address()));
        // No kick since: the driver ends, and the next append starts one.
        assert!(!drivers.run_again_or_end(&address(), true));
        assert!(drivers.running().is_empty());
        assert!(drivers.start(&address()));
    }

    #[test]
    fn a_kick_taken_by_a_run_does_not_run_the_driver_again() {
        let drivers = Drivers::default();
        assert!(drivers.start(&address()));
        assert!(!drivers.start(&address()));
        assert!(drivers.take_kick(&address()));
        assert!(!drivers.run_again_or_end(&address(), true));
        assert!(drivers.running().is_empty());
    }

    #[test]
    fn a_driver_that_may_not_run_ends_despite_a_kick() {
        let drivers = Drivers::default();
        assert!(drivers.start(&address()));
        assert!(!drivers.start(&address()));
        assert!(!drivers.run_again_or_end(&address(), false));
        assert!(drivers.running().is_empty());
        // The kick went with it: a new driver starts afresh.
        assert!(drivers.start(&address()));
        assert!(!drivers.take_kick(&address()));
    }
}
