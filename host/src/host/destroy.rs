//! Destroy: the instance's destroy hook runs, and its files and index row
//! are deleted, with nothing of the old instance left running.

use crate::cell::Origin;
use crate::directory::SlotState;
use crate::error::Error;
use crate::text::escaped;

use super::Host;

impl Host {
    /// Runs the instance's destroy hook and deletes its data.
    ///
    /// In this order: the address is closed to background work (no queue
    /// pump, workflow driver, schedule run or connection starts for it);
    /// the running ones are stopped and awaited, so that no connection to
    /// the old files is left; then, holding the instance's slot, the hook
    /// runs and the files and the index row are deleted. When this
    /// returns, nothing of the old instance runs, and the next call starts
    /// a new, empty instance.
    pub async fn destroy(&self, actor: &str, key: &str) -> Result<(), Error> {
        let def = self.core.resolve_ready(actor, key).await?;
        let no_such_instance = || Error::no_such_instance(actor, key);
        let address = self.core.address(&def, key);
        // In a cluster: this host's file is the replicated one.
        self.core.claim(&address).await?;
        if !self.core.store.exists(&address) {
            return Err(no_such_instance());
        }
        let closed = self
            .core
            .presence
            .close(&address, async || {
                self.work.stop_pump(&address).await;
                self.core.hub.close(&address);
            })
            .await;
        // Connections whose connect hook ran meanwhile.
        self.core.hub.close(&address);
        loop {
            let slot = self
                .core
                .directory
                .slot(&def.name, key, def.options.sleep_timeout);
            let address = &slot.address;
            let mut state = slot.state.lock().await;
            if matches!(*state, SlotState::Retired) {
                continue;
            }
            // Destroyed by another destroy meanwhile.
            if !self.core.store.exists(address) {
                return Err(no_such_instance());
            }
            let cell = match std::mem::replace(&mut *state, SlotState::Retired) {
                SlotState::Awake(cell) if !cell.is_broken() => Some(cell),
                _ => None,
            };
            let cell = match cell {
                Some(cell) => Some(cell),
                None => match self.core.start_cell(&def, address, Origin::MustExist).await {
                    Ok(cell) => Some(Box::new(cell)),
                    Err(Error::NoSuchInstance { .. }) => None,
                    Err(e) => {
                        tracing::warn!(error = %escaped(&e), "cannot wake the instance for its destroy hook");
                        None
                    }
                },
            };
            if let Some(cell) = cell {
                cell.destroy().await;
            }
            // Delete while the slot is still in the directory and locked:
            // a caller waiting for this instance starts a new one only after
            // the old files are gone.
            let removed = self.core.store.remove(address);
            self.work.waiters.forget_instance(actor, key);
            self.core.metrics.actor(actor).forget_instance(key);
            // Open to background work again before a caller can make a
            // new instance: its first append starts a pump at once.
            drop(closed);
            self.core.directory.remove(&slot);
            return removed.map_err(|e| Error::storage(actor, key, format!("{e:#}")));
        }
    }
}
