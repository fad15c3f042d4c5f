//! One instance driven by the `sql` target: guest statements and the host's
//! operations run on a fresh instance database, with a model of what the
//! host acknowledged; around each operation, its time, SQLite's memory and
//! whether a guest trigger fired inside the host's statements are measured.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Instant;

use rusqlite::Connection;

use crate::bindings::db::Host as _;
use crate::bindings::queue::{AppendOptions, Host as _};
use crate::bindings::schedule::Host as _;
use crate::bindings::state::Host as _;
use crate::bindings::workflow::{Host as _, StepOptions, StepOutcome, StepStart};
use crate::clock::now_ms;
use crate::fuzzing::ImportSession;
use crate::instance::{InstanceState, Mode};
use crate::storage::{AfterFailure, HostTables};

use super::acknowledged::{Model, read_main};
use super::grammar::{Op, Stmt};
use super::render::{describe, show};
use super::watchdog::Watchdog;
use super::{DEADLINE, HARNESS_STOP, MARGIN, MEMORY_BOUND, Violation};

/// An instance over a fresh database, driven by [`Op`]s, with a model of
/// what the host acknowledged.
pub struct SqlSession {
    pub(super) session: ImportSession,
    pub(super) model: Model,
    watchdog: Watchdog,
    steps: u32,
}

impl Default for SqlSession {
    fn default() -> Self {
        SqlSession::new()
    }
}

impl SqlSession {
    /// A new instance (with a queue and a workflow), in the middle of an
    /// action's transaction, with the guest's table `fired` where the
    /// grammar's triggers record that they fired.
    pub fn new() -> SqlSession {
        // The memory bound is checked against SQLite's own statistics.
        crate::storage::keep_heap_statistics();
        let mut session = ImportSession::new();
        assert!(
            crate::storage::heap_statistics_kept(),
            "SQLite keeps no memory statistics in this process: the memory bound cannot be checked"
        );
        let s = &mut session.state;
        s.deadline().clear();
        s.set_call_timeout(DEADLINE);
        s.execute_batch("CREATE TABLE fired (what TEXT)".into())
            .expect("no trap")
            .expect("the guest's table");
        s.commit_transaction().expect("commit");
        s.db().begin().expect("begin");
        let watchdog = Watchdog::new(s.db().conn.get_interrupt_handle());
        SqlSession {
            session,
            model: Model::default(),
            watchdog,
            steps: 0,
        }
    }

    fn state(&mut self) -> &mut InstanceState {
        &mut self.session.state
    }

    fn root(&self) -> PathBuf {
        self.session._dir.path().to_path_buf()
    }

    /// Runs operation `op` (the `index`-th) and checks the invariants.
    pub fn apply(&mut self, index: usize, op: Op) -> Result<(), Violation> {
        let what = describe(&op);
        let host_op = !matches!(op, Op::Batch(_) | Op::Query(_) | Op::Step { .. });
        let fired = fired(&self.session.state.db().conn);
        let mut problems = Vec::new();
        memory_highwater(true);
        let start = Instant::now();
        self.watchdog.arm(start + DEADLINE + MARGIN + HARNESS_STOP);
        self.run(op, &mut problems);
        self.watchdog.disarm();
        let elapsed = start.elapsed();
        let memory = memory_highwater(false);
        self.state().deadline().clear();
        if elapsed > DEADLINE + MARGIN {
            problems.push(format!(
                "it ran for {} ms; its deadline was {} ms (plus {} ms of margin){}",
                elapsed.as_millis(),
                DEADLINE.as_millis(),
                MARGIN.as_millis(),
                if elapsed > DEADLINE + MARGIN + HARNESS_STOP {
                    ", and the harness interrupted it"
                } else {
                    ""
                }
            ));
        }
        if memory > MEMORY_BOUND {
            problems.push(format!(
                "SQLite held {} MiB during it; the bound is {} MiB",
                memory >> 20,
                MEMORY_BOUND >> 20
            ));
        }
        // A rollback takes the call's own rows of `fired` with it; a
        // trigger firing in the host's statements adds one.
        if host_op && self::fired(&self.session.state.db().conn) > fired {
            problems.push("a guest trigger fired inside the host's own statements".into());
        }
        self.check(&mut problems);
        if problems.is_empty() {
            Ok(())
        } else {
            Err(Violation {
                op: index,
                what,
                problems,
            })
        }
    }

    fn run(&mut self, op: Op, problems: &mut Vec<String>) {
        match op {
            Op::Batch(stmts) => {
                let sql = stmts
                    .iter()
                    .map(Stmt::render)
                    .collect::<Vec<_>>()
                    .join(";\n");
                self.guest_sql(sql, true);
            }
            Op::Query(stmt) => self.guest_sql(stmt.render(), false),
            Op::StateSet(value) => {
                self.start_call();
                match self.state().set(value.clone()) {
                    Ok(Ok(())) => self.model.current.state = Some(value),
                    Ok(Err(_)) => {}
                    Err(_) => self.abort_call(),
                }
            }
            Op::StateGet => {
                self.start_call();
                match self.state().get() {
                    Ok(Ok(value)) if value != self.model.current.state => problems.push(format!(
                        "state.get returned {}; the host acknowledged {}",
                        show(value.as_deref()),
                        show(self.model.current.state.as_deref())
                    )),
                    Ok(_) => {}
                    Err(_) => self.abort_call(),
                }
            }
            Op::Append(n) => {
                self.start_call();
                let options = AppendOptions {
                    priority: 0,
                    group: None,
                };
                match self.state().append(format!("e{n}"), "{}".into(), options) {
                    Ok(Ok(id)) => {
                        self.model.current.events.insert(id as i64);
                        self.model.current.counted("_burrow_queue", id as i64);
                    }
                    Ok(Err(_)) => {}
                    Err(_) => self.abort_call(),
                }
            }
            Op::Schedule { delay_ms, every } => {
                self.start_call();
                let s = self.state();
                let result = if every {
                    s.every(u64::from(delay_ms.max(100)), "a".into(), "[]".into())
                } else {
                    s.after(u64::from(delay_ms), "a".into(), "[]".into())
                };
                match result {
                    Ok(Ok(id)) => {
                        self.model.current.schedules.insert(id as i64);
                        self.model.current.counted("_burrow_schedule", id as i64);
                        // An id rolled back is made again: it is what
                        // it is made as now.
                        if every {
                            self.model.recurring.insert(id as i64);
                        } else {
                            self.model.recurring.remove(&(id as i64));
                        }
                    }
                    Ok(Err(_)) => {}
                    Err(_) => self.abort_call(),
                }
            }
            Op::Cancel(n) => {
                let pending = &self.model.current.schedules;
                let id = match pending.len() {
                    0 => i64::from(n),
                    len => *pending.iter().nth(n as usize % len).expect("in range"),
                };
                let had = pending.contains(&id);
                self.start_call();
                match self.state().cancel(id as u64) {
                    Ok(Ok(found)) => {
                        if found != had {
                            problems.push(format!(
                                "schedule.cancel({id}) answered {found}; the host's schedules {} it",
                                if had { "hold" } else { "do not hold" }
                            ));
                        }
                        self.model.current.schedules.remove(&id);
                    }
                    Ok(Err(_)) => {}
                    Err(_) => self.abort_call(),
                }
            }
            Op::PendingSchedules => {
                self.start_call();
                match self.state().pending() {
                    Ok(Ok(list)) => {
                        let ids: BTreeSet<i64> = list.iter().map(|s| s.id as i64).collect();
                        if ids != self.model.current.schedules {
                            problems.push(format!(
                                "schedule.pending listed {ids:?}; the host made {:?}",
                                self.model.current.schedules
                            ));
                        }
                    }
                    Ok(Err(_)) => {}
                    Err(_) => self.abort_call(),
                }
            }
            Op::Commit => self.end_call(),
            Op::Rollback => self.abort_call(),
            Op::ProcessEvent => self.process_event(false, problems),
            Op::FailEvent => self.process_event(true, problems),
            Op::RunSchedules => self.run_schedules(problems),
            Op::Step { stmts, state } => self.step(stmts, state, problems),
            Op::Inspect => self.inspect(problems),
        }
    }

    /// Guest SQL in the current call, under the deadline.
    fn guest_sql(&mut self, sql: String, batch: bool) {
        // A savepoint rolled back may undo the host's writes of this call
        // too, with the guest's own consent: the model follows.
        let rolls_back = sql.to_ascii_lowercase().contains("rollback");
        self.start_call();
        let s = self.state();
        let trapped = if batch {
            s.execute_batch(sql).is_err()
        } else {
            s.execute(sql, Vec::new()).is_err()
        };
        if trapped {
            self.abort_call();
        } else if self.session.state.lost_transaction().is_some() {
            // SQLite rolled the transaction back by itself: the call fails
            // when it ends.
            self.model.rollback();
        } else if rolls_back {
            self.model.current = read_main(&self.session.state.db().conn).unwrap_or_default();
        }
    }

    /// Starts the deadline of a guest call's import.
    fn start_call(&mut self) {
        let s = self.state();
        s.set_mode(Mode::Action);
        s.deadline().start(DEADLINE);
    }

    /// The host commits the call (or rolls it back if it cannot commit)
    /// and opens the next.
    fn end_call(&mut self) {
        let s = &mut self.session.state;
        s.deadline().clear();
        let committed = s.take_lost_transaction().is_none() && s.commit_transaction().is_ok();
        s.roll_back();
        s.begin_transaction().expect("begin");
        if committed {
            self.model.commit();
        } else {
            self.model.rollback();
        }
    }

    /// The call traps or is rolled back: nothing of it stays.
    fn abort_call(&mut self) {
        let s = &mut self.session.state;
        s.deadline().clear();
        s.take_lost_transaction();
        s.roll_back();
        s.begin_transaction().expect("begin");
        self.model.rollback();
    }

    /// A transaction of the host's own (the call before it commits): `f`
    /// runs the host's statements, then the host commits. A failure is a
    /// broken invariant: nothing of the guest's may stop the host.
    fn host_transaction(
        &mut self,
        what: &str,
        problems: &mut Vec<String>,
        f: impl FnOnce(&Connection) -> Result<(), String>,
    ) -> bool {
        self.end_call();
        let s = &mut self.session.state;
        let result = f(&s.db().conn).and_then(|()| {
            s.db()
                .commit()
                .map_err(|e| format!("its commit failed: {e}"))
        });
        s.db().rollback();
        s.db().begin().expect("begin");
        match result {
            Ok(()) => true,
            Err(e) => {
                problems.push(format!("the host's {what} failed: {e}"));
                false
            }
        }
    }

    fn process_event(&mut self, fail: bool, problems: &mut Vec<String>) {
        self.end_call();
        let Some(&id) = self.model.committed.events.first() else {
            return;
        };
        let what = if fail {
            format!("move of event {id} to the dead letters")
        } else {
            format!("deletion of processed event {id}")
        };
        let done = self.host_transaction(&what, problems, |conn| {
            if fail {
                let now = now_ms();
                match conn.queue().record_failure(id, "fuzz", now, 1, |_| now) {
                    Ok(AfterFailure::DeadLettered) => Ok(()),
                    Ok(other) => Err(format!("the event was not dead-lettered: {other:?}")),
                    Err(e) => Err(e.to_string()),
                }
            } else {
                conn.queue().delete(id).map_err(|e| e.to_string())?;
                match conn.changes() {
                    1 => Ok(()),
                    n => Err(format!("it deleted {n} rows")),
                }
            }
        });
        if done {
            self.model.committed.events.remove(&id);
            self.model.rollback();
        }
    }

    fn run_schedules(&mut self, problems: &mut Vec<String>) {
        self.end_call();
        for _ in 0..16 {
            let now = now_ms();
            let due = self.session.state.db().conn.schedules().next_due(now);
            let schedule = match due {
                Ok(Some(schedule)) => schedule,
                Ok(None) => break,
                Err(e) => {
                    problems.push(format!("the schedule runner could not read: {e}"));
                    break;
                }
            };
            if !self.model.committed.schedules.contains(&schedule.id) {
                problems.push(format!(
                    "the schedule runner found schedule {}, which the host did not make",
                    schedule.id
                ));
                break;
            }
            let what = format!("end of schedule {}", schedule.id);
            let done = self.host_transaction(&what, problems, |conn| {
                conn.schedules()
                    .done(&schedule, now)
                    .map_err(|e| e.to_string())
            });
            if !done {
                break;
            }
            if !self.model.recurring.contains(&schedule.id) {
                self.model.committed.schedules.remove(&schedule.id);
                self.model.rollback();
            }
        }
    }

    fn step(&mut self, stmts: Vec<Stmt>, state: Option<Vec<u8>>, problems: &mut Vec<String>) {
        // Orchestration code runs with no transaction open.
        self.end_call();
        self.steps += 1;
        let name = format!("s{}", self.steps);
        let s = &mut self.session.state;
        s.db().rollback();
        s.set_mode(Mode::Orchestration);
        s.deadline().start(DEADLINE);
        let options = StepOptions {
            max_retries: 0,
            backoff_base_ms: 0,
            backoff_cap_ms: 0,
            timeout_ms: Some(DEADLINE.as_millis() as u64),
        };
        let started = matches!(s.begin_step(name, options), Ok(Ok(StepStart::Run(_))));
        let mut trapped = false;
        if started {
            for stmt in &stmts {
                let s = &mut self.session.state;
                if s.execute_batch(stmt.render()).is_err() {
                    trapped = true;
                    break;
                }
            }
            if let (false, Some(value)) = (trapped, state) {
                match self.session.state.set(value.clone()) {
                    Ok(Ok(())) => self.model.current.state = Some(value),
                    Ok(Err(_)) => {}
                    Err(_) => trapped = true,
                }
            }
            let s = &mut self.session.state;
            let outcome = if trapped {
                StepOutcome::Error(crate::bindings::types::Failure {
                    code: "trap".into(),
                    message: "the step trapped".into(),
                })
            } else {
                StepOutcome::Ok("null".into())
            };
            let fired = fired(&s.db().conn);
            let ended = s.end_step(outcome);
            // The run ends here: its batch of steps commits.
            let committed = s.commit_steps();
            if fired != self::fired(&s.db().conn) {
                problems.push(
                    "a guest trigger fired inside the host's own statements of end-step".into(),
                );
            }
            if !trapped && matches!(ended, Ok(Ok(None))) && committed.is_ok() {
                self.model.commit();
            }
        }
        self.model.rollback();
        let s = &mut self.session.state;
        s.db().rollback();
        s.deadline().clear();
        s.set_mode(Mode::Action);
        s.db().begin().expect("begin");
    }

    fn inspect(&mut self, problems: &mut Vec<String>) {
        let root = self.root();
        match crate::inspect::inspect(&root, "fuzz", "key", DEADLINE) {
            // The guest's tables may be too large or too costly to show:
            // inspect is bounded like guest SQL, and says so.
            Err(crate::Error::LimitExceeded { .. } | crate::Error::Timeout { .. }) => {}
            Err(e) => problems.push(format!("inspect failed: {e}")),
            Ok(inspection) => {
                let expected = crate::inspect::state_to_json(self.model.committed.state.clone());
                if inspection.state != expected {
                    problems.push(format!(
                        "inspect shows the state {}; the host's committed state is {expected}",
                        inspection.state
                    ));
                }
                let pending = inspection.queue.map(|q| q.pending_count);
                if pending != Some(self.model.committed.events.len() as u64) {
                    problems.push(format!(
                        "inspect shows {pending:?} pending events; the host committed {}",
                        self.model.committed.events.len()
                    ));
                }
            }
        }
    }
}

/// How many times the grammar's triggers fired (`None` if the guest
/// dropped their table).
pub(super) fn fired(conn: &Connection) -> Option<i64> {
    conn.query_row("SELECT count(*) FROM main.fired", [], |r| r.get(0))
        .ok()
}

/// SQLite's memory high-water mark (of every connection of the process),
/// reset to the memory in use when `reset`.
pub(super) fn memory_highwater(reset: bool) -> i64 {
    // SAFETY: sqlite3_memory_highwater only reads (and resets) SQLite's
    // global memory statistics, which are thread-safe.
    unsafe { rusqlite::ffi::sqlite3_memory_highwater(i32::from(reset)) }
}
