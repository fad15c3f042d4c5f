//! The watchdog: interrupts a guest statement whose call deadline passed.
//!
//! SQLite's progress handler runs only every so many virtual-machine steps,
//! and a row of a few expensive expressions takes few steps. One host
//! thread therefore looks, every [`WATCHDOG_TICK`], at every connection that
//! runs a guest statement and calls `sqlite3_interrupt` on those whose
//! deadline has passed; SQLite stops the statement at its next jump, with
//! `SQLITE_INTERRUPT`.
//!
//! A connection registers once, when it opens ([`Watch::new`]); a statement
//! only flips a flag under an uncontended lock ([`Watch::running`]), so the
//! watchdog can never interrupt a host statement that follows a guest one.

use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use rusqlite::{Connection, InterruptHandle};

use crate::deadline::Deadline;

/// How often the watchdog looks for statements past their deadline.
pub const WATCHDOG_TICK: Duration = Duration::from_millis(10);

struct Watched {
    deadline: Deadline,
    interrupt: InterruptHandle,
    /// Whether a guest statement runs on the connection now.
    running: Mutex<bool>,
}

/// A connection under the watchdog, until dropped.
pub struct Watch(Arc<Watched>);

/// Marks a guest statement as running until dropped.
pub struct Running<'a>(&'a Watched);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        *self.0.running.lock().unwrap_or_else(|e| e.into_inner()) = false;
    }
}

fn registry() -> &'static Mutex<Vec<Weak<Watched>>> {
    static REGISTRY: OnceLock<Mutex<Vec<Weak<Watched>>>> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        std::thread::Builder::new()
            .name("burrow-watchdog".into())
            .spawn(watch_forever)
            .expect("spawn the watchdog thread");
        Mutex::new(Vec::new())
    })
}

fn watch_forever() {
    loop {
        std::thread::sleep(WATCHDOG_TICK);
        let mut watched = registry().lock().unwrap_or_else(|e| e.into_inner());
        watched.retain(|weak| match weak.upgrade() {
            None => false,
            Some(w) => {
                let running = w.running.lock().unwrap_or_else(|e| e.into_inner());
                if *running && w.deadline.passed() {
                    w.interrupt.interrupt();
                }
                true
            }
        });
    }
}

impl Watch {
    /// Puts `conn` under the watchdog, with the deadline of its calls.
    pub fn new(conn: &Connection, deadline: Deadline) -> Watch {
        let watched = Arc::new(Watched {
            deadline,
            interrupt: conn.get_interrupt_handle(),
            running: Mutex::new(false),
        });
        registry()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Arc::downgrade(&watched));
        Watch(watched)
    }

    /// Marks a guest statement as running: past the deadline, the watchdog
    /// interrupts the connection until the returned guard is dropped. Drop
    /// it only once the statement is reset.
    pub fn running(&self) -> Running<'_> {
        *self.0.running.lock().unwrap_or_else(|e| e.into_inner()) = true;
        Running(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_statement_past_its_deadline_is_interrupted_between_progress_checks() {
        let conn = Connection::open_in_memory().unwrap();
        let deadline = Deadline::default();
        let watch = Watch::new(&conn, deadline.clone());
        deadline.start(Duration::from_millis(100));
        let begun = std::time::Instant::now();
        let running = watch.running();
        let forever = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n";
        let e = conn
            .query_row(forever, [], |r| r.get::<_, i64>(0))
            .unwrap_err();
        drop(running);
        assert_eq!(
            e.sqlite_error_code(),
            Some(rusqlite::ErrorCode::OperationInterrupted)
        );
        assert!(
            begun.elapsed() < Duration::from_secs(2),
            "{:?}",
            begun.elapsed()
        );
        // A statement that is not marked as running is left alone.
        let n: i64 = conn.query_row("SELECT 1", [], |r| r.get(0)).unwrap();
        assert_eq!(n, 1);
    }
}
