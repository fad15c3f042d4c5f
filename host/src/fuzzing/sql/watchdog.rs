//! The harness's own stop: an operation far past its deadline is
//! interrupted, so that a run of the `sql` target ends.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

/// Interrupts the session's connection when an operation runs far past
/// its deadline, so that a run of the target ends (the operation has
/// broken its invariant by then).
pub(super) struct Watchdog {
    shared: Arc<(Mutex<WatchState>, Condvar)>,
    thread: Option<std::thread::JoinHandle<()>>,
}

#[derive(Default)]
pub(super) struct WatchState {
    until: Option<Instant>,
    stop: bool,
}

impl Watchdog {
    pub(super) fn new(handle: rusqlite::InterruptHandle) -> Watchdog {
        let shared = Arc::new((Mutex::new(WatchState::default()), Condvar::new()));
        let watched = shared.clone();
        let thread = std::thread::spawn(move || {
            let (lock, wake) = &*watched;
            let mut state = lock.lock().unwrap();
            loop {
                if state.stop {
                    return;
                }
                state = match state.until {
                    None => wake.wait(state).unwrap(),
                    Some(until) => {
                        let now = Instant::now();
                        if now >= until {
                            handle.interrupt();
                            state.until = None;
                            state
                        } else {
                            wake.wait_timeout(state, until - now).unwrap().0
                        }
                    }
                };
            }
        });
        Watchdog {
            shared,
            thread: Some(thread),
        }
    }

    fn set(&self, f: impl FnOnce(&mut WatchState)) {
        let (lock, wake) = &*self.shared;
        f(&mut lock.lock().unwrap());
        wake.notify_one();
    }

    pub(super) fn arm(&self, until: Instant) {
        self.set(|s| s.until = Some(until));
    }

    pub(super) fn disarm(&self) {
        self.set(|s| s.until = None);
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.set(|s| s.stop = true);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
