//! SQL semantics at the guest boundary: sequences of guest DDL and DML
//! from a grammar (renames to guest and to `_burrow_*` names in any case,
//! `temp.` and `main.` names, temp objects, triggers with costly bodies,
//! views, indexes with internal names, foreign keys into internal tables,
//! generated columns, huge blobs, cross joins and recursive CTEs,
//! foreign-key cascades whose triggers run inside a drop, `ANALYZE` and
//! writes to the planner's statistics and to `sqlite_sequence`, `dbstat`,
//! FTS5 and R*Tree tables and their shadow tables), interleaved with the
//! host's own work (state, queue appends, processed and failed events,
//! schedules and their runner, workflow steps, inspect). The input is
//! decoded by `burrow::fuzzing::sql::decode`; after every operation the
//! session checks that the host's tables are the host's and hold what it
//! acknowledged, that its `AUTOINCREMENT` counters are the last ids it
//! handed out, that no row of the planner's statistics names a host
//! object, that no guest trigger fired inside the host's statements, that
//! the operation ended by its deadline and that SQLite's memory stayed
//! under its bound.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    burrow::fuzzing::sql::run(data);
});
