//! The reaper: puts instances idle past their actor's `sleep_timeout` to
//! sleep (running their sleep hook) and forgets their slots, and closes
//! cells that must be replaced (a trap, a caller gone mid-call, a lost
//! lease) without waiting for their next use. An instance with client
//! connections stays awake.

use std::sync::Weak;
use std::time::Duration;

use crate::directory::SlotState;
use crate::metrics::Eviction;

use super::Core;

/// Puts idle instances to sleep and forgets idle asleep slots.
pub(super) async fn reap_idle(core: Weak<Core>) {
    loop {
        let interval = match core.upgrade() {
            Some(core) => reap_interval(&core),
            None => return,
        };
        tokio::time::sleep(interval).await;
        let Some(core) = core.upgrade() else { return };
        if core.is_shutting_down() {
            return;
        }
        // A cell that must be replaced (in a cluster: its lease was lost)
        // closes its files now, not at its next use, so that the lease
        // can be taken again and the file restored.
        for slot in core.directory.all() {
            if let Ok(mut state) = slot.state.try_lock()
                && matches!(&*state, SlotState::Awake(cell) if cell.is_broken())
            {
                *state = SlotState::Asleep;
            }
        }
        for slot in core.directory.idle() {
            let address = &slot.address;
            // An instance with connections stays awake.
            if core.hub.is_connected(address) {
                continue;
            }
            let Ok(mut state) = slot.state.try_lock() else {
                continue;
            };
            if slot.idle_for() < slot.sleep_timeout {
                continue;
            }
            if let SlotState::Awake(cell) = std::mem::replace(&mut *state, SlotState::Retired) {
                tracing::debug!(
                    actor = &*address.actor,
                    key = &*address.key,
                    "instance goes to sleep"
                );
                cell.metrics().evicted(Eviction::Idle);
                cell.sleep().await;
            }
            core.directory.remove(&slot);
        }
    }
}

fn reap_interval(core: &Core) -> Duration {
    let shortest = core
        .actors
        .sleep_timeouts()
        .into_iter()
        .min()
        .unwrap_or(Duration::from_secs(1));
    (shortest / 4).clamp(Duration::from_millis(10), Duration::from_secs(1))
}
