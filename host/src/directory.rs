//! The live instances of a host, by address.
//!
//! Each address has a slot; a slot's async mutex serializes the calls to
//! that instance (one call at a time per instance, many instances in
//! parallel). A slot is `Asleep` (no wasm instance, database closed),
//! `Awake` (a [`Cell`]) or `Retired` (removed from the map; a caller that
//! still holds it looks the address up again).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::Mutex as AsyncMutex;

use crate::cell::Cell;
use crate::config::MAX_QUEUED_CALLS_PER_INSTANCE;
use crate::error::Error;

/// The address of an instance: actor name and key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Address {
    pub(crate) actor: Arc<str>,
    pub(crate) key: Arc<str>,
}

pub(crate) enum SlotState {
    Asleep,
    Awake(Box<Cell>),
    Retired,
}

pub(crate) struct Slot {
    pub(crate) state: AsyncMutex<SlotState>,
    last_used_ms: AtomicU64,
    waiting: AtomicUsize,
    pub(crate) sleep_timeout: Duration,
}

fn clock_ms() -> u64 {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    ORIGIN.get_or_init(Instant::now).elapsed().as_millis() as u64
}

impl Slot {
    pub(crate) fn touch(&self) {
        self.last_used_ms.store(clock_ms(), Ordering::Relaxed);
    }

    pub(crate) fn idle_for(&self) -> Duration {
        Duration::from_millis(clock_ms().saturating_sub(self.last_used_ms.load(Ordering::Relaxed)))
    }

    fn last_used(&self) -> u64 {
        self.last_used_ms.load(Ordering::Relaxed)
    }
}

/// A place in a slot's queue of callers; refused past
/// [`MAX_QUEUED_CALLS_PER_INSTANCE`].
pub(crate) struct QueuePlace<'a>(&'a Slot);

impl<'a> QueuePlace<'a> {
    pub(crate) fn enter(slot: &'a Slot, address: &Address) -> Result<QueuePlace<'a>, Error> {
        let before = slot.waiting.fetch_add(1, Ordering::Relaxed);
        let place = QueuePlace(slot);
        if before >= MAX_QUEUED_CALLS_PER_INSTANCE {
            return Err(Error::Overloaded(format!(
                "{} calls are already waiting for `{}/{}`",
                before, address.actor, address.key
            )));
        }
        Ok(place)
    }
}

impl Drop for QueuePlace<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::Relaxed);
    }
}

#[derive(Default)]
pub(crate) struct Directory {
    slots: Mutex<HashMap<Address, Arc<Slot>>>,
}

impl Directory {
    /// The slot of `address`, made if missing.
    pub(crate) fn slot(&self, address: &Address, sleep_timeout: Duration) -> Arc<Slot> {
        let mut slots = self.slots.lock().unwrap();
        slots
            .entry(address.clone())
            .or_insert_with(|| {
                Arc::new(Slot {
                    state: AsyncMutex::new(SlotState::Asleep),
                    last_used_ms: AtomicU64::new(clock_ms()),
                    waiting: AtomicUsize::new(0),
                    sleep_timeout,
                })
            })
            .clone()
    }

    /// A snapshot of every slot.
    pub(crate) fn all(&self) -> Vec<(Address, Arc<Slot>)> {
        let slots = self.slots.lock().unwrap();
        slots.iter().map(|(a, s)| (a.clone(), s.clone())).collect()
    }

    /// Removes `slot` from the map if it is still the slot of `address`.
    /// The caller holds the slot's lock and has set it `Retired`.
    pub(crate) fn remove(&self, address: &Address, slot: &Arc<Slot>) {
        let mut slots = self.slots.lock().unwrap();
        if slots.get(address).is_some_and(|s| Arc::ptr_eq(s, slot)) {
            slots.remove(address);
        }
    }

    /// Slots whose idle time has passed their sleep timeout.
    pub(crate) fn idle(&self) -> Vec<(Address, Arc<Slot>)> {
        let slots = self.slots.lock().unwrap();
        slots
            .iter()
            .filter(|(_, s)| {
                s.idle_for() >= s.sleep_timeout && s.waiting.load(Ordering::Relaxed) == 0
            })
            .map(|(a, s)| (a.clone(), s.clone()))
            .collect()
    }

    /// Awake, unlocked slots other than `except`, least recently used first.
    pub(crate) fn eviction_candidates(&self, except: &Address) -> Vec<(Address, Arc<Slot>)> {
        let mut candidates: Vec<_> = {
            let slots = self.slots.lock().unwrap();
            slots
                .iter()
                .filter(|(a, _)| *a != except)
                .map(|(a, s)| (a.clone(), s.clone()))
                .collect()
        };
        candidates.sort_by_key(|(_, s)| s.last_used());
        candidates
    }
}
