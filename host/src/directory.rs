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

use crate::address::{Address, ByActor};
use crate::cell::{Cell, PendingCalls};
use crate::config::MAX_QUEUED_CALLS_PER_INSTANCE;
use crate::error::Error;

pub(crate) enum SlotState {
    Asleep,
    Awake(Box<Cell>),
    Retired,
}

pub(crate) struct Slot {
    pub(crate) address: Address,
    pub(crate) state: AsyncMutex<SlotState>,
    /// Action calls waiting for the slot: whoever holds it runs them in
    /// batches (see `cell/batch.rs`).
    pub(crate) pending_calls: PendingCalls,
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
    pub(crate) fn enter(slot: &'a Slot) -> Result<QueuePlace<'a>, Error> {
        let address = &slot.address;
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

/// Slots by actor, then by key: a call looks its slot up by `&str`
/// without allocating.
#[derive(Default)]
pub(crate) struct Directory {
    slots: Mutex<ByActor<Arc<str>, SlotsByKey>>,
}

type SlotsByKey = HashMap<Arc<str>, Arc<Slot>>;

impl Directory {
    /// The slot of (`actor`, `key`), made if missing.
    pub(crate) fn slot(&self, actor: &Arc<str>, key: &str, sleep_timeout: Duration) -> Arc<Slot> {
        let mut slots = self.slots.lock().unwrap();
        let keys = match slots.get_mut(&**actor) {
            Some(keys) => keys,
            None => slots.entry(actor.clone()).or_default(),
        };
        if let Some(slot) = keys.get(key) {
            return slot.clone();
        }
        let address = Address {
            actor: actor.clone(),
            key: key.into(),
        };
        let slot = Arc::new(Slot {
            address: address.clone(),
            state: AsyncMutex::new(SlotState::Asleep),
            last_used_ms: AtomicU64::new(clock_ms()),
            waiting: AtomicUsize::new(0),
            pending_calls: PendingCalls::default(),
            sleep_timeout,
        });
        keys.insert(address.key, slot.clone());
        slot
    }

    /// The slot of `address`, if it has one.
    pub(crate) fn get(&self, address: &Address) -> Option<Arc<Slot>> {
        let slots = self.slots.lock().unwrap();
        slots.get(&*address.actor)?.get(&*address.key).cloned()
    }

    fn collect(&self, keep: impl Fn(&Slot) -> bool) -> Vec<Arc<Slot>> {
        let slots = self.slots.lock().unwrap();
        slots
            .values()
            .flat_map(HashMap::values)
            .filter(|s| keep(s))
            .cloned()
            .collect()
    }

    /// A snapshot of every slot.
    pub(crate) fn all(&self) -> Vec<Arc<Slot>> {
        self.collect(|_| true)
    }

    /// Instances with an awake cell, by actor: a slot locked by an
    /// operation counts as awake (it is, or is waking).
    pub(crate) fn awake_by_actor(&self) -> HashMap<Arc<str>, u64> {
        let mut awake: HashMap<Arc<str>, u64> = HashMap::new();
        for slot in self.all() {
            let is_awake = match slot.state.try_lock() {
                Ok(state) => matches!(*state, SlotState::Awake(_)),
                Err(_) => true,
            };
            if is_awake {
                *awake.entry(slot.address.actor.clone()).or_default() += 1;
            }
        }
        awake
    }

    /// Removes `slot` from the map if it is still the slot of its address.
    /// The caller holds the slot's lock and has set it `Retired`.
    pub(crate) fn remove(&self, slot: &Arc<Slot>) {
        let mut slots = self.slots.lock().unwrap();
        let Address { actor, key } = &slot.address;
        if let Some(keys) = slots.get_mut(&**actor)
            && keys.get(&**key).is_some_and(|s| Arc::ptr_eq(s, slot))
        {
            keys.remove(&**key);
        }
    }

    /// Slots whose idle time has passed their sleep timeout.
    pub(crate) fn idle(&self) -> Vec<Arc<Slot>> {
        self.collect(|s| s.idle_for() >= s.sleep_timeout && s.waiting.load(Ordering::Relaxed) == 0)
    }

    /// The `n` least recently used slots other than `except` (all of them
    /// if fewer), least recently used first. Each slot's last use is read
    /// once: calls that end meanwhile touch their slots, and a sort that
    /// saw a key change would be inconsistent. Only the slots returned are
    /// cloned: a host at its awake limit looks for one to put to sleep at
    /// every creation, among a thousand.
    pub(crate) fn eviction_candidates(&self, except: &Address, n: usize) -> Vec<Arc<Slot>> {
        let slots = self.slots.lock().unwrap();
        let mut candidates: Vec<(u64, &Arc<Slot>)> = slots
            .values()
            .flat_map(HashMap::values)
            .filter(|s| s.address != *except)
            .map(|s| (s.last_used(), s))
            .collect();
        if n < candidates.len() {
            candidates.select_nth_unstable_by_key(n, |(last_used, _)| *last_used);
            candidates.truncate(n);
        }
        candidates.sort_by_key(|(last_used, _)| *last_used);
        candidates.into_iter().map(|(_, s)| s.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Slots are touched while the candidates are sorted (other instances'
    /// calls end meanwhile): the sort must see one value per slot, or the
    /// standard library's sort may panic on the inconsistent order.
    #[test]
    fn candidates_sort_while_slots_are_touched() {
        let directory = Arc::new(Directory::default());
        let actor: Arc<str> = "a".into();
        let slots: Vec<_> = (0..40)
            .map(|n| directory.slot(&actor, &n.to_string(), Duration::from_secs(1)))
            .collect();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let toucher = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    // Values that go up and down, as the clock's do between
                    // slots touched at different times.
                    let slot = &slots[n % slots.len()];
                    slot.last_used_ms
                        .store((n * 7919 % 1000) as u64, Ordering::Relaxed);
                    n += 1;
                }
            })
        };
        let except = Address {
            actor: actor.clone(),
            key: "none".into(),
        };
        for _ in 0..20_000 {
            assert_eq!(directory.eviction_candidates(&except, usize::MAX).len(), 40);
            assert_eq!(directory.eviction_candidates(&except, 8).len(), 8);
        }
        stop.store(true, Ordering::Relaxed);
        toucher.join().unwrap();
    }

    #[test]
    fn the_least_recently_used_come_first() {
        let directory = Directory::default();
        let actor: Arc<str> = "a".into();
        let slots: Vec<_> = (0..50)
            .map(|n| directory.slot(&actor, &n.to_string(), Duration::from_secs(1)))
            .collect();
        // Last used in an order unlike that of the keys.
        for (n, slot) in slots.iter().enumerate() {
            slot.last_used_ms
                .store((n * 37 % 50) as u64, Ordering::Relaxed);
        }
        let except = slots[0].address.clone();
        let used =
            |found: Vec<Arc<Slot>>| -> Vec<u64> { found.iter().map(|s| s.last_used()).collect() };
        assert_eq!(used(directory.eviction_candidates(&except, 3)), [1, 2, 3]);
        let all = used(directory.eviction_candidates(&except, usize::MAX));
        assert_eq!(all, (1..50).collect::<Vec<u64>>());
        assert!(directory.eviction_candidates(&except, 0).is_empty());
    }
}
