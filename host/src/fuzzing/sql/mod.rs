//! The `sql` fuzz target's way in: SQL semantics at the guest boundary.
//!
//! An input is decoded from bytes into a sequence of [`Op`]s: guest DDL
//! and DML drawn from a grammar ([`Stmt`]: tables shaped like the host's,
//! renames to guest names and to `_burrow_*` names in odd case, `temp.`
//! and `main.` qualified names, temp objects, triggers with bodies that
//! touch other tables or cost a lot, views, indexes with internal names,
//! foreign keys into internal tables, generated columns, large blobs,
//! cross joins and recursive CTEs, and raw SQL text), interleaved with
//! what the host does (state get and set, queue appends, processed and
//! failed events, schedules and the schedule runner, workflow steps,
//! inspect). [`SqlSession`] runs them on a fresh instance database and
//! checks after every operation:
//!
//! - the `_burrow_*` objects of `main` are exactly the host's, with the
//!   host's schema; `temp` has nothing of that name; no guest table has a
//!   foreign key into a host table;
//! - the host's tables hold what the host wrote: the instance record, the
//!   state it acknowledged (read back by `state.get`, in `main`, and in
//!   `inspect` once committed), the queue's events and the schedules;
//! - no guest trigger fired inside a host operation, and the host's own
//!   statements succeeded;
//! - the operation ended by its deadline ([`DEADLINE`] plus [`MARGIN`]);
//! - SQLite's memory high-water mark during the operation stayed under
//!   [`MEMORY_BOUND`].
//!
//! [`encode`] is the inverse of [`decode`], so seeds are written as the
//! operations they stand for (see the tests).

mod acknowledged;
mod codec;
mod grammar;
mod invariants;
mod render;
mod seeds;
mod session;
mod watchdog;

use std::time::Duration;

/// The deadline of every operation (a guest call's `call_timeout`).
pub const DEADLINE: Duration = Duration::from_millis(200);
/// How long past [`DEADLINE`] an operation may take before it counts as
/// not bounded by it.
pub const MARGIN: Duration = Duration::from_millis(800);
/// The most memory SQLite may hold during one operation (its memory
/// high-water mark, over every connection of the process).
pub const MEMORY_BOUND: i64 = 256 << 20;
/// How long past `DEADLINE + MARGIN` the harness lets an operation run
/// before it interrupts the connection itself, so that a run ends.
const HARNESS_STOP: Duration = Duration::from_secs(1);

pub use codec::{decode, encode};
pub use grammar::{Expr, NAMES, Name, Op, Query, Shape, Stmt};
pub use seeds::{corpus_dir, seeds};
pub use session::SqlSession;

/// An invariant the host broke, at the operation with this index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The operation's index in the input.
    pub op: usize,
    /// The operation.
    pub what: String,
    /// What was wrong after (or during) it.
    pub problems: Vec<String>,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "after operation {} ({}): ", self.op, self.what)?;
        f.write_str(&self.problems.join("; "))
    }
}

/// Runs `data` as the `sql` target does: panics at the first broken
/// invariant.
pub fn run(data: &[u8]) {
    if let Err(violation) = check(data) {
        panic!("{violation}");
    }
}

/// Runs `data` and returns the first broken invariant.
pub fn check(data: &[u8]) -> Result<(), Violation> {
    let mut session = SqlSession::new();
    for (i, op) in decode(data).into_iter().enumerate() {
        session.apply(i, op)?;
    }
    Ok(())
}

/// Runs `data` to its end and returns every broken invariant (later ones
/// may follow from earlier ones).
pub fn violations(data: &[u8]) -> Vec<Violation> {
    let mut session = SqlSession::new();
    decode(data)
        .into_iter()
        .enumerate()
        .filter_map(|(i, op)| session.apply(i, op).err())
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::codec::MAX_OPS;
    use super::render::describe;
    use super::*;

    /// Seeds that allocate gigabytes run one at a time.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

    fn replay(name: &str) {
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let bytes = std::fs::read(corpus_dir().join(name)).expect("the seed is committed");
        if let Err(violation) = check(&bytes) {
            panic!("seed `{name}`: {violation}");
        }
    }

    #[test]
    fn seeds_decode_to_what_they_were_made_from() {
        for (name, ops) in seeds() {
            let bytes = encode(&ops);
            assert_eq!(decode(&bytes), ops, "{name}");
            let committed = std::fs::read(corpus_dir().join(name))
                .unwrap_or_else(|e| panic!("seed `{name}` is not committed: {e}"));
            assert_eq!(
                committed, bytes,
                "seed `{name}` is out of date: run the ignored test write_seeds"
            );
        }
    }

    #[test]
    fn any_bytes_decode() {
        for data in [
            &b""[..],
            b"\xff",
            b"\x00\xff\xff\xff",
            &[13; 300],
            &[6; 300],
        ] {
            let ops = decode(data);
            assert!(ops.len() <= MAX_OPS);
            for op in ops {
                describe(&op);
            }
        }
    }

    /// Writes the seeds into `fuzz/corpus/sql/`.
    #[test]
    #[ignore = "writes the seed files"]
    fn write_seeds() {
        std::fs::create_dir_all(corpus_dir()).unwrap();
        for (name, ops) in seeds() {
            std::fs::write(corpus_dir().join(name), encode(&ops)).unwrap();
        }
    }

    /// Prints every broken invariant of every seed.
    #[test]
    #[ignore = "a report, not a test"]
    fn report_seeds() {
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        for (name, ops) in seeds() {
            println!("== {name}");
            for op in &ops {
                if let Op::Batch(stmts) = op {
                    for s in stmts {
                        println!("   {}", s.render());
                    }
                }
            }
            for v in violations(&encode(&ops)) {
                println!("-- {v}");
            }
        }
    }

    /// Renames between guest names, temp objects, generated columns, triggers
    /// on guest tables, steps, the runner and inspect keep working.
    #[test]
    fn guest_sql_that_works_keeps_the_invariants() {
        replay("guest-sql-that-works");
    }

    /// Internal names in temp, temp triggers on host tables, odd case.
    #[test]
    fn what_the_sandbox_refused_already_stays_refused() {
        replay("refused-already");
    }

    /// `ALTER TABLE temp.x RENAME TO _burrow_state`, then the state is set
    /// and read: the host reads and writes its own table.
    #[test]
    fn a_temp_table_renamed_to_the_state_does_not_take_its_place() {
        replay("rename-temp-to-state");
    }

    /// A guest table shaped like `_burrow_schedule` with a costly `AFTER
    /// DELETE` trigger, renamed to it before the first schedule.
    #[test]
    fn a_trigger_renamed_into_the_schedules_never_runs_in_the_runner() {
        replay("schedule-trigger");
    }

    /// `SELECT zeroblob(400000000), zeroblob(400000000), zeroblob(400000000)`.
    #[test]
    fn a_row_of_zeroblobs_is_bounded_in_memory_and_time() {
        replay("zeroblob-row");
    }

    /// `SELECT length(randomblob(999999999)) + length(randomblob(999999999))`.
    #[test]
    fn a_sum_of_randomblobs_is_bounded_in_time() {
        replay("randomblob-sum");
    }

    /// A guest table with `REFERENCES _burrow_queue(id) ON DELETE CASCADE`
    /// and a trigger on it, then an event is processed.
    #[test]
    fn a_foreign_key_into_the_queue_is_refused() {
        replay("foreign-key-into-queue");
    }

    /// `CREATE INDEX _bUrRoW_x ON t (a)`.
    #[test]
    fn an_index_with_an_internal_name_is_refused() {
        replay("index-with-internal-name");
    }

    /// `ALTER TABLE main.t RENAME TO _bUrRoW_sChEdUlE`, then a schedule.
    #[test]
    fn a_rename_to_an_internal_name_in_odd_case_is_refused() {
        replay("rename-to-odd-case");
    }

    /// A trigger that a `DROP TABLE`'s foreign-key cascade fires rewrites
    /// `sqlite_sequence`, then empties it; the host's next ids follow its
    /// last ones.
    #[test]
    fn a_drop_cannot_touch_the_hosts_counters() {
        replay("drop-cascade-rewrites-counters");
    }

    /// `ANALYZE t`, then rows of `sqlite_stat1` naming the host's tables by
    /// insert, update, a whole `ANALYZE` and a cascade's trigger.
    #[test]
    fn the_planners_statistics_of_host_tables_stay_the_hosts() {
        replay("statistics-of-host-tables");
    }

    /// `dbstat`, and writes to the shadow tables of FTS5 and R*Tree.
    #[test]
    fn dbstat_and_shadow_tables_are_out_of_reach() {
        replay("dbstat-and-shadow-tables");
    }

    /// A guest trigger fires in a call (its row in `fired` is the call's),
    /// then the host rolls the call back: the row goes with the call, and
    /// that is no trigger firing inside the host's statements (found by
    /// the fuzzer; kept as it found it).
    #[test]
    fn a_rolled_back_call_takes_its_trigger_rows_with_it() {
        replay("trigger-then-rollback");
    }

    /// A guest table whose foreign key names `f_data` before the FTS5 table
    /// `f` exists, then `f`, then writes: FTS5's flush checked the key in a
    /// statement savepoint that flushed again, until the stack overflowed
    /// (found by the fuzzer; kept as it found it).
    #[test]
    fn a_foreign_key_into_a_shadow_table_cannot_recurse_the_host() {
        replay("foreign-key-into-shadow-table");
    }

    /// A guest R*Tree table named `dbstat` (a built-in table guest SQL may
    /// not read), then the instance is inspected: the inspection read the
    /// guest's tables and met the refusal of `dbstat` (found by the
    /// fuzzer; kept as it found it).
    #[test]
    fn a_guest_table_named_dbstat_cannot_break_inspect() {
        replay("guest-table-named-dbstat");
    }

    /// A recurring schedule made in a call that rolls back, then a one-shot
    /// schedule that takes the same id (the rolled-back id was never
    /// committed), then the runner: the one-shot schedule runs once and is
    /// gone (found by the fuzzer, whose model took the id as still
    /// recurring).
    #[test]
    fn a_schedule_id_reused_after_a_rollback_is_what_it_was_made_as() {
        replay("rolled-back-schedule-id-reused");
    }
}
