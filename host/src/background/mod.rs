//! Background work: what runs on instances without a caller. Queue pumps,
//! workflow drivers and schedule runs, the senders waiting for an event's
//! outcome, and the timer that starts what has come due.
//!
//! Everything here runs its operations through the runtime core, and
//! holds a lease on its instance (see `presence`) for as long as it runs,
//! so that destroy can close an instance to background work and wait for
//! what runs.

mod drivers;
pub(crate) mod pump;
mod schedules;
mod timer;
pub(crate) mod waiters;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, Weak};

use crate::address::Address;
use crate::definition::ActorDefinition;
use crate::runtime::{Core, Wakeups};
use drivers::Drivers;
use pump::Pump;
use waiters::Waiters;

/// The registry of a host's background work.
pub(crate) struct Background {
    pub(crate) core: Arc<Core>,
    /// Itself, for the tasks it starts.
    this: Weak<Background>,
    /// The queue pump of every instance whose queue is being processed.
    pumps: Mutex<HashMap<Address, Pump>>,
    /// Senders waiting for the outcome of their event.
    pub(crate) waiters: Waiters,
    /// The workflows being driven.
    drivers: Drivers,
    /// Instances whose due schedules are being run.
    schedule_runs: Mutex<HashSet<Address>>,
}

impl Background {
    /// The background work of `core`; nothing runs before [`Self::start_timer`].
    pub(crate) fn new(core: Arc<Core>) -> Arc<Background> {
        Arc::new_cyclic(|this| Background {
            core,
            this: this.clone(),
            pumps: Mutex::new(HashMap::new()),
            waiters: Waiters::default(),
            drivers: Drivers::default(),
            schedule_runs: Mutex::new(HashSet::new()),
        })
    }

    /// Starts the timer: the queues, workflows and schedules left due by
    /// the last run resume at once.
    pub(crate) fn start_timer(self: &Arc<Self>) {
        tokio::spawn(timer::wake_due(Arc::downgrade(self)));
    }

    /// Makes sure the queue of `address` is being processed: wakes its
    /// pump, or starts one.
    pub(crate) fn kick(&self, def: &Arc<ActorDefinition>, address: &Address) {
        let Some(this) = self.this.upgrade() else {
            return;
        };
        if self.core.is_shutting_down() {
            return;
        }
        let mut pumps = self.pumps.lock().unwrap();
        if let Some(pump) = pumps.get(address) {
            pump.kick();
            return;
        }
        // None while the instance is destroyed: its queue goes with it.
        let Some(lease) = self.core.presence.lease(address) else {
            return;
        };
        let pump = Pump::start(this, def.clone(), address.clone(), lease);
        pumps.insert(address.clone(), pump);
    }

    /// Called by a pump that found nothing more to do: it may end unless
    /// it was kicked since it last looked. Returns whether it may end.
    pub(crate) fn pump_may_end(&self, address: &Address, pump_id: u64) -> bool {
        let mut pumps = self.pumps.lock().unwrap();
        match pumps.get(address) {
            Some(pump) if pump.id() == pump_id => {
                if pump.take_kick() {
                    return false;
                }
                pumps.remove(address);
                true
            }
            // Stopped (destroy, shutdown): end.
            _ => true,
        }
    }

    /// Called by a pump that ends whatever happened since it last looked
    /// (its instance is gone, or it failed and left a mark to retry by).
    pub(crate) fn pump_ended(&self, address: &Address, pump_id: u64) {
        let mut pumps = self.pumps.lock().unwrap();
        if pumps.get(address).is_some_and(|p| p.id() == pump_id) {
            pumps.remove(address);
        }
    }

    pub(crate) async fn stop_pump(&self, address: &Address) {
        let pump = self.pumps.lock().unwrap().remove(address);
        if let Some(pump) = pump {
            pump.stop().await;
        }
    }

    pub(crate) fn pump_error(&self, address: &Address) -> Option<String> {
        self.pumps
            .lock()
            .unwrap()
            .get(address)
            .and_then(Pump::last_error)
    }

    /// Stops every pump (the host shuts down).
    pub(crate) async fn stop_all_pumps(&self) {
        let pumps: Vec<Pump> = self.pumps.lock().unwrap().drain().map(|(_, p)| p).collect();
        for pump in pumps {
            pump.stop().await;
        }
    }
}

impl Wakeups for Background {
    fn kick_queue(&self, def: &Arc<ActorDefinition>, address: &Address) {
        self.kick(def, address);
    }

    fn drive_workflow(&self, address: Address) {
        Background::drive_workflow(self, address);
    }
}
