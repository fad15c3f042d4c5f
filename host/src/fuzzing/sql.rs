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

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use rusqlite::Connection;

use super::ImportSession;
use crate::bindings::db::Host as _;
use crate::bindings::queue::{AppendOptions, Host as _};
use crate::bindings::schedule::Host as _;
use crate::bindings::state::Host as _;
use crate::bindings::workflow::{Host as _, StepOptions, StepOutcome, StepStart};
use crate::instance::{InstanceState, Mode};
use crate::storage::instance_db::now_ms;
use crate::storage::queue as queue_db;
use crate::storage::schedule as schedule_db;

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
/// Operations decoded from one input.
const MAX_OPS: usize = 48;
/// Statements in one batch, a trigger body or a step.
const MAX_STMTS: usize = 6;
/// Items in a list of values or columns.
const MAX_ITEMS: usize = 6;
/// Bytes of one text, blob or raw SQL.
const MAX_BYTES: usize = 4096;
/// Nesting of expressions.
const MAX_DEPTH: u8 = 3;

/// Table, view, index and trigger names: the guest's, then the host's
/// and one internal name the host does not use.
pub const NAMES: &[&str] = &[
    "t",
    "u",
    "x",
    "big",
    "_burrow_state",
    "_burrow_queue",
    "_burrow_schedule",
    "_burrow_instance",
    "_burrow_dead_letter",
    "_burrow_queue_policy",
    "_burrow_workflow",
    "_burrow_workflow_history",
    "_burrow_schedule_due",
    "_burrow_queue_order",
    "_burrow_x",
];

/// Columns expressions may name.
const COLUMNS: &[&str] = &["a", "b", "id", "value", "action", "due_at", "q", "g"];

/// Sizes for `zeroblob` and `randomblob`, the attacks' among them.
const SIZES: &[i64] = &[
    0,
    1,
    1000,
    1 << 20,
    16 << 20,
    100_000_000,
    400_000_000,
    999_999_999,
    2_000_000_000,
];

/// Rows of a recursive CTE (`None`: unbounded, stopped by the deadline
/// only) and of a fill.
const ROWS: &[Option<u64>] = &[
    Some(1),
    Some(10),
    Some(1000),
    Some(100_000),
    Some(10_000_000),
    None,
];

/// Tables shaped like the host's, so that its statements work on them.
const SHAPES: &[(&str, &str)] = &[
    ("state", "id INTEGER PRIMARY KEY, value BLOB NOT NULL"),
    (
        "schedule",
        "id INTEGER PRIMARY KEY AUTOINCREMENT, action TEXT NOT NULL, args TEXT NOT NULL, \
         due_at INTEGER NOT NULL, created_at INTEGER NOT NULL, every_ms INTEGER",
    ),
    (
        "queue",
        "id INTEGER PRIMARY KEY AUTOINCREMENT, type TEXT NOT NULL, payload TEXT NOT NULL, \
         priority INTEGER NOT NULL, grp TEXT NOT NULL, created_at INTEGER NOT NULL, \
         attempts INTEGER NOT NULL DEFAULT 0, not_before INTEGER NOT NULL DEFAULT 0, last_error TEXT",
    ),
    (
        "instance",
        "id INTEGER PRIMARY KEY, actor TEXT NOT NULL, key TEXT NOT NULL, created_at INTEGER NOT NULL",
    ),
    (
        "dead_letter",
        "id INTEGER PRIMARY KEY, type TEXT NOT NULL, payload TEXT NOT NULL, priority INTEGER NOT NULL, \
         grp TEXT NOT NULL, created_at INTEGER NOT NULL, attempts INTEGER NOT NULL, \
         failed_at INTEGER NOT NULL, error TEXT NOT NULL",
    ),
    (
        "history",
        "seq INTEGER PRIMARY KEY, location TEXT NOT NULL UNIQUE, kind TEXT NOT NULL, name TEXT NOT NULL, \
         status TEXT NOT NULL, output TEXT, failure_kind TEXT, error_code TEXT, error TEXT, \
         attempts INTEGER NOT NULL DEFAULT 0, wake_at INTEGER, updated_at INTEGER NOT NULL",
    ),
];

const FK_ACTIONS: &[&str] = &["CASCADE", "RESTRICT", "SET NULL", "NO ACTION"];

/// One operation: guest SQL, a guest import, or something the host does.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// `db.execute-batch` of the statements.
    Batch(Vec<Stmt>),
    /// `db.execute` of one statement (its rows are returned to the guest).
    Query(Stmt),
    /// `state.set`.
    StateSet(Vec<u8>),
    /// `state.get`.
    StateGet,
    /// `queue.append` of an event of type `e<n>`.
    Append(u8),
    /// `schedule.after` (or `schedule.every`, at least 100 ms) of action `a`.
    Schedule {
        /// Delay or interval, in ms.
        delay_ms: u16,
        /// Recurring.
        every: bool,
    },
    /// `schedule.cancel` of the n-th pending schedule.
    Cancel(u8),
    /// `schedule.pending`.
    PendingSchedules,
    /// The host commits the call.
    Commit,
    /// The host rolls the call back.
    Rollback,
    /// The pump commits the processing of the first pending event: it
    /// deletes it in a transaction of its own.
    ProcessEvent,
    /// The first pending event fails its last attempt: the host moves it
    /// to the dead letters in a transaction of its own.
    FailEvent,
    /// The schedule runner runs what is due, each schedule in a
    /// transaction that deletes it (or moves a recurring one).
    RunSchedules,
    /// A workflow step running the statements (and setting the state),
    /// committed by `end-step` with its history row.
    Step {
        /// The step's guest SQL, one batch each.
        stmts: Vec<Stmt>,
        /// A `state.set` inside the step.
        state: Option<Vec<u8>>,
    },
    /// `burrow inspect` of the instance.
    Inspect,
}

/// A table, view, index or trigger name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Name {
    /// Index into [`NAMES`].
    pub base: u8,
    /// 0 unqualified, 1 `main.`, 2 `temp.`.
    pub schema: u8,
    /// Letters in alternating case (`_BuRrOw_StAtE`).
    pub odd_case: bool,
    /// In double quotes.
    pub quoted: bool,
}

/// A table's columns.
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    /// `a INTEGER PRIMARY KEY, b, c BLOB`.
    Plain,
    /// The columns of a host table (index into the shapes: state,
    /// schedule, queue, instance, dead letter, history).
    Like(u8),
    /// `a INTEGER PRIMARY KEY, g AS (expr)`, virtual or stored.
    Generated {
        /// The column's expression.
        expr: Expr,
        /// `STORED` rather than `VIRTUAL`.
        stored: bool,
    },
    /// `a INTEGER PRIMARY KEY, q INTEGER REFERENCES target(id) ON DELETE ...`.
    References {
        /// The parent table.
        target: Name,
        /// Index into CASCADE, RESTRICT, SET NULL, NO ACTION.
        action: u8,
        /// `DEFERRABLE INITIALLY DEFERRED`.
        deferred: bool,
    },
}

/// A guest statement.
#[derive(Debug, Clone, PartialEq)]
pub enum Stmt {
    /// `CREATE [TEMP] TABLE name (shape)`.
    CreateTable {
        /// `TEMP`.
        temp: bool,
        /// The table.
        name: Name,
        /// Its columns.
        shape: Shape,
    },
    /// `DROP TABLE name`.
    DropTable(Name),
    /// `ALTER TABLE from RENAME TO to`.
    Rename {
        /// The table renamed (qualified as it says).
        from: Name,
        /// The new name (never qualified: SQLite does not allow it).
        to: Name,
    },
    /// `ALTER TABLE table ADD COLUMN g AS (expr)`.
    AddColumn {
        /// The table.
        table: Name,
        /// The generated column's expression.
        expr: Expr,
    },
    /// `CREATE [UNIQUE] INDEX name ON table (column)`.
    CreateIndex {
        /// The index (its qualifier says its schema).
        name: Name,
        /// The table (unqualified).
        table: Name,
        /// Index into the column names.
        column: u8,
        /// `UNIQUE`.
        unique: bool,
    },
    /// `CREATE [TEMP] VIEW name AS query`.
    CreateView {
        /// `TEMP`.
        temp: bool,
        /// The view.
        name: Name,
        /// Its query.
        query: Query,
    },
    /// `CREATE [TEMP] TRIGGER name timing event ON table BEGIN ... END`;
    /// the body first records the firing in the guest's table `fired`.
    CreateTrigger {
        /// `TEMP`.
        temp: bool,
        /// The trigger.
        name: Name,
        /// `AFTER` rather than `BEFORE`.
        after: bool,
        /// 0 `INSERT`, 1 `UPDATE`, 2 `DELETE`.
        event: u8,
        /// The table it is on.
        table: Name,
        /// The rest of its body.
        body: Vec<Stmt>,
    },
    /// `INSERT INTO table VALUES (values)`.
    Insert {
        /// The table.
        table: Name,
        /// The row.
        values: Vec<Expr>,
    },
    /// `INSERT INTO table (a)` the numbers 1 to n.
    Fill {
        /// The table.
        table: Name,
        /// Index into the row counts.
        rows: u8,
    },
    /// `DELETE FROM table`.
    Delete(Name),
    /// `UPDATE table SET column = expr`.
    Update {
        /// The table.
        table: Name,
        /// Index into the column names.
        column: u8,
        /// The new value.
        expr: Expr,
    },
    /// A query.
    Select(Query),
    /// Any text.
    Raw(String),
}

/// A query.
#[derive(Debug, Clone, PartialEq)]
pub enum Query {
    /// `SELECT e1, e2, ...`.
    Values(Vec<Expr>),
    /// `SELECT * FROM table`.
    Table(Name),
    /// `SELECT count(*) FROM table AS j0, table AS j1, ...` (2 to 4 ways).
    CrossJoin {
        /// The table.
        table: Name,
        /// How many times it is joined with itself.
        ways: u8,
    },
    /// `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c
    /// [LIMIT n]) SELECT count(expr) FROM c`.
    Recursive {
        /// Index into the row counts.
        rows: u8,
        /// Evaluated on every row.
        expr: Expr,
    },
}

/// An expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// `NULL`.
    Null,
    /// An integer.
    Int(i64),
    /// A text literal.
    Text(String),
    /// A blob literal.
    Blob(Vec<u8>),
    /// `zeroblob(n)`, with an index into the sizes.
    ZeroBlob(u8),
    /// `randomblob(n)`, with an index into the sizes.
    RandomBlob(u8),
    /// A column, by index into the column names.
    Column(u8),
    /// `length(e)`.
    Length(Box<Expr>),
    /// `(a + b)`.
    Add(Box<Expr>, Box<Expr>),
    /// `(a || b)`.
    Concat(Box<Expr>, Box<Expr>),
}

// ---------------------------------------------------------------------------
// Decoding and encoding.

/// Reads an input; past its end, every read is zero.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((b, rest)) => {
                self.0 = rest;
                *b
            }
            None => 0,
        }
    }

    fn choice(&mut self, n: usize) -> u8 {
        (self.byte() as usize % n) as u8
    }

    fn flag(&mut self) -> bool {
        self.byte() & 1 == 1
    }

    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.byte(), self.byte()])
    }

    fn i64(&mut self) -> i64 {
        let mut b = [0; 8];
        for x in &mut b {
            *x = self.byte();
        }
        i64::from_le_bytes(b)
    }

    fn bytes(&mut self) -> Vec<u8> {
        let n = (self.u16() as usize % (MAX_BYTES + 1)).min(self.0.len());
        let (taken, rest) = self.0.split_at(n);
        self.0 = rest;
        taken.to_vec()
    }

    fn text(&mut self) -> String {
        String::from_utf8_lossy(&self.bytes()).into_owned()
    }

    fn list<T>(&mut self, max: usize, mut item: impl FnMut(&mut Self) -> T) -> Vec<T> {
        let n = self.byte() as usize % (max + 1);
        (0..n).map(|_| item(self)).collect()
    }
}

/// Writes what [`Reader`] reads back.
#[derive(Default)]
struct Writer(Vec<u8>);

impl Writer {
    fn byte(&mut self, b: u8) {
        self.0.push(b);
    }

    fn flag(&mut self, b: bool) {
        self.0.push(b as u8);
    }

    fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    fn i64(&mut self, v: i64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    fn bytes(&mut self, b: &[u8]) {
        assert!(b.len() <= MAX_BYTES, "{} bytes do not fit", b.len());
        self.u16(b.len() as u16);
        self.0.extend_from_slice(b);
    }

    fn list<T>(&mut self, items: &[T], mut item: impl FnMut(&mut Self, &T)) {
        assert!(
            items.len() <= MAX_STMTS.min(MAX_ITEMS),
            "{} items do not fit in one list",
            items.len()
        );
        self.byte(items.len() as u8);
        for i in items {
            item(self, i);
        }
    }
}

/// The operations an input stands for.
pub fn decode(data: &[u8]) -> Vec<Op> {
    let mut r = Reader(data);
    let mut ops = Vec::new();
    while !r.0.is_empty() && ops.len() < MAX_OPS {
        ops.push(Op::decode(&mut r));
    }
    ops
}

/// The input that stands for `ops` (the inverse of [`decode`]).
pub fn encode(ops: &[Op]) -> Vec<u8> {
    let mut w = Writer::default();
    for op in ops {
        op.encode(&mut w);
    }
    w.0
}

impl Op {
    fn decode(r: &mut Reader) -> Op {
        match r.choice(15) {
            0 => Op::Batch(r.list(MAX_STMTS, |r| Stmt::decode(r, 0))),
            1 => Op::Query(Stmt::decode(r, 0)),
            2 => Op::StateSet(r.bytes()),
            3 => Op::StateGet,
            4 => Op::Append(r.byte()),
            5 => Op::Schedule {
                delay_ms: r.u16(),
                every: r.flag(),
            },
            6 => Op::Cancel(r.byte()),
            7 => Op::PendingSchedules,
            8 => Op::Commit,
            9 => Op::Rollback,
            10 => Op::ProcessEvent,
            11 => Op::FailEvent,
            12 => Op::RunSchedules,
            13 => Op::Step {
                stmts: r.list(MAX_STMTS, |r| Stmt::decode(r, 0)),
                state: r.flag().then(|| r.bytes()),
            },
            _ => Op::Inspect,
        }
    }

    fn encode(&self, w: &mut Writer) {
        match self {
            Op::Batch(stmts) => {
                w.byte(0);
                w.list(stmts, |w, s| s.encode(w));
            }
            Op::Query(stmt) => {
                w.byte(1);
                stmt.encode(w);
            }
            Op::StateSet(value) => {
                w.byte(2);
                w.bytes(value);
            }
            Op::StateGet => w.byte(3),
            Op::Append(n) => {
                w.byte(4);
                w.byte(*n);
            }
            Op::Schedule { delay_ms, every } => {
                w.byte(5);
                w.u16(*delay_ms);
                w.flag(*every);
            }
            Op::Cancel(n) => {
                w.byte(6);
                w.byte(*n);
            }
            Op::PendingSchedules => w.byte(7),
            Op::Commit => w.byte(8),
            Op::Rollback => w.byte(9),
            Op::ProcessEvent => w.byte(10),
            Op::FailEvent => w.byte(11),
            Op::RunSchedules => w.byte(12),
            Op::Step { stmts, state } => {
                w.byte(13);
                w.list(stmts, |w, s| s.encode(w));
                w.flag(state.is_some());
                if let Some(state) = state {
                    w.bytes(state);
                }
            }
            Op::Inspect => w.byte(14),
        }
    }
}

impl Name {
    /// An unqualified name in its usual case.
    pub fn plain(base: u8) -> Name {
        Name {
            base,
            schema: 0,
            odd_case: false,
            quoted: false,
        }
    }

    /// The same name qualified with `main.` (1) or `temp.` (2).
    pub fn in_schema(self, schema: u8) -> Name {
        Name { schema, ..self }
    }

    /// The same name in alternating case.
    pub fn odd_case(self) -> Name {
        Name {
            odd_case: true,
            ..self
        }
    }

    /// The index of `name` in [`NAMES`].
    pub fn of(name: &str) -> Name {
        let base = NAMES
            .iter()
            .position(|n| *n == name)
            .unwrap_or_else(|| panic!("`{name}` is not among the names"));
        Name::plain(base as u8)
    }

    fn decode(r: &mut Reader) -> Name {
        let base = r.choice(NAMES.len());
        let flags = r.byte();
        Name {
            base,
            schema: (flags & 3) % 3,
            odd_case: flags & 4 != 0,
            quoted: flags & 8 != 0,
        }
    }

    fn encode(&self, w: &mut Writer) {
        w.byte(self.base);
        w.byte((self.schema % 3) | ((self.odd_case as u8) << 2) | ((self.quoted as u8) << 3));
    }

    /// The name alone, in its case, without quotes.
    fn word(&self) -> String {
        let base = NAMES[self.base as usize % NAMES.len()];
        if !self.odd_case {
            return base.to_owned();
        }
        let mut upper = true;
        base.chars()
            .map(|c| {
                if !c.is_ascii_alphabetic() {
                    return c;
                }
                upper = !upper;
                if upper { c.to_ascii_uppercase() } else { c }
            })
            .collect()
    }

    /// The name unqualified, quoted if it says so.
    fn ident(&self) -> String {
        if self.quoted {
            format!("\"{}\"", self.word())
        } else {
            self.word()
        }
    }

    /// The name with its qualifier.
    fn render(&self) -> String {
        match self.schema % 3 {
            1 => format!("main.{}", self.ident()),
            2 => format!("temp.{}", self.ident()),
            _ => self.ident(),
        }
    }
}

impl Shape {
    fn decode(r: &mut Reader) -> Shape {
        match r.choice(4) {
            0 => Shape::Plain,
            1 => Shape::Like(r.choice(SHAPES.len())),
            2 => Shape::Generated {
                expr: Expr::decode(r, 0),
                stored: r.flag(),
            },
            _ => Shape::References {
                target: Name::decode(r),
                action: r.choice(FK_ACTIONS.len()),
                deferred: r.flag(),
            },
        }
    }

    fn encode(&self, w: &mut Writer) {
        match self {
            Shape::Plain => w.byte(0),
            Shape::Like(i) => {
                w.byte(1);
                w.byte(*i);
            }
            Shape::Generated { expr, stored } => {
                w.byte(2);
                expr.encode(w);
                w.flag(*stored);
            }
            Shape::References {
                target,
                action,
                deferred,
            } => {
                w.byte(3);
                target.encode(w);
                w.byte(*action);
                w.flag(*deferred);
            }
        }
    }

    fn render(&self) -> String {
        match self {
            Shape::Plain => "a INTEGER PRIMARY KEY, b, c BLOB".into(),
            Shape::Like(i) => SHAPES[*i as usize % SHAPES.len()].1.into(),
            Shape::Generated { expr, stored } => format!(
                "a INTEGER PRIMARY KEY, b, g AS ({}) {}",
                expr.render(),
                if *stored { "STORED" } else { "VIRTUAL" }
            ),
            Shape::References {
                target,
                action,
                deferred,
            } => format!(
                "a INTEGER PRIMARY KEY, q INTEGER REFERENCES {}(id) ON DELETE {}{}",
                target.ident(),
                FK_ACTIONS[*action as usize % FK_ACTIONS.len()],
                if *deferred {
                    " DEFERRABLE INITIALLY DEFERRED"
                } else {
                    ""
                }
            ),
        }
    }
}

impl Stmt {
    fn decode(r: &mut Reader, depth: u8) -> Stmt {
        // Trigger bodies hold DML and queries only.
        let tag = if depth > 0 {
            [8, 10, 11, 12][r.choice(4) as usize]
        } else {
            r.choice(14)
        };
        match tag {
            0 => Stmt::CreateTable {
                temp: r.flag(),
                name: Name::decode(r),
                shape: Shape::decode(r),
            },
            1 => Stmt::DropTable(Name::decode(r)),
            2 => Stmt::Rename {
                from: Name::decode(r),
                to: Name::decode(r),
            },
            3 => Stmt::AddColumn {
                table: Name::decode(r),
                expr: Expr::decode(r, 0),
            },
            4 => Stmt::CreateIndex {
                name: Name::decode(r),
                table: Name::decode(r),
                column: r.choice(COLUMNS.len()),
                unique: r.flag(),
            },
            5 => Stmt::CreateView {
                temp: r.flag(),
                name: Name::decode(r),
                query: Query::decode(r),
            },
            6 => Stmt::CreateTrigger {
                temp: r.flag(),
                name: Name::decode(r),
                after: r.flag(),
                event: r.choice(3),
                table: Name::decode(r),
                body: r.list(MAX_STMTS, |r| Stmt::decode(r, depth + 1)),
            },
            7 => Stmt::Fill {
                table: Name::decode(r),
                rows: r.choice(ROWS.len()),
            },
            8 => Stmt::Insert {
                table: Name::decode(r),
                values: r.list(MAX_ITEMS, |r| Expr::decode(r, 0)),
            },
            10 => Stmt::Delete(Name::decode(r)),
            11 => Stmt::Update {
                table: Name::decode(r),
                column: r.choice(COLUMNS.len()),
                expr: Expr::decode(r, 0),
            },
            12 => Stmt::Select(Query::decode(r)),
            _ => Stmt::Raw(r.text()),
        }
    }

    fn encode(&self, w: &mut Writer) {
        match self {
            Stmt::CreateTable { temp, name, shape } => {
                w.byte(0);
                w.flag(*temp);
                name.encode(w);
                shape.encode(w);
            }
            Stmt::DropTable(name) => {
                w.byte(1);
                name.encode(w);
            }
            Stmt::Rename { from, to } => {
                w.byte(2);
                from.encode(w);
                to.encode(w);
            }
            Stmt::AddColumn { table, expr } => {
                w.byte(3);
                table.encode(w);
                expr.encode(w);
            }
            Stmt::CreateIndex {
                name,
                table,
                column,
                unique,
            } => {
                w.byte(4);
                name.encode(w);
                table.encode(w);
                w.byte(*column);
                w.flag(*unique);
            }
            Stmt::CreateView { temp, name, query } => {
                w.byte(5);
                w.flag(*temp);
                name.encode(w);
                query.encode(w);
            }
            Stmt::CreateTrigger {
                temp,
                name,
                after,
                event,
                table,
                body,
            } => {
                w.byte(6);
                w.flag(*temp);
                name.encode(w);
                w.flag(*after);
                w.byte(*event);
                table.encode(w);
                // Inside a body, the tag is an index into the body's
                // statements: insert, delete, update, select.
                w.list(body, |w, s| {
                    let tag = match s {
                        Stmt::Insert { .. } => 0,
                        Stmt::Delete(_) => 1,
                        Stmt::Update { .. } => 2,
                        Stmt::Select(_) => 3,
                        other => panic!("a trigger body cannot hold {other:?}"),
                    };
                    let mut inner = Writer::default();
                    s.encode(&mut inner);
                    w.byte(tag);
                    w.0.extend_from_slice(&inner.0[1..]);
                });
            }
            Stmt::Fill { table, rows } => {
                w.byte(7);
                table.encode(w);
                w.byte(*rows);
            }
            Stmt::Insert { table, values } => {
                w.byte(8);
                table.encode(w);
                w.list(values, |w, e| e.encode(w));
            }
            Stmt::Delete(table) => {
                w.byte(10);
                table.encode(w);
            }
            Stmt::Update {
                table,
                column,
                expr,
            } => {
                w.byte(11);
                table.encode(w);
                w.byte(*column);
                expr.encode(w);
            }
            Stmt::Select(query) => {
                w.byte(12);
                query.encode(w);
            }
            Stmt::Raw(text) => {
                w.byte(13);
                w.bytes(text.as_bytes());
            }
        }
    }

    /// The statement's SQL text.
    pub fn render(&self) -> String {
        match self {
            Stmt::CreateTable { temp, name, shape } => format!(
                "CREATE {}TABLE {} ({})",
                if *temp { "TEMP " } else { "" },
                name.render(),
                shape.render()
            ),
            Stmt::DropTable(name) => format!("DROP TABLE {}", name.render()),
            Stmt::Rename { from, to } => {
                format!("ALTER TABLE {} RENAME TO {}", from.render(), to.ident())
            }
            Stmt::AddColumn { table, expr } => format!(
                "ALTER TABLE {} ADD COLUMN g AS ({})",
                table.render(),
                expr.render()
            ),
            Stmt::CreateIndex {
                name,
                table,
                column,
                unique,
            } => format!(
                "CREATE {}INDEX {} ON {} ({})",
                if *unique { "UNIQUE " } else { "" },
                name.render(),
                table.ident(),
                COLUMNS[*column as usize % COLUMNS.len()]
            ),
            Stmt::CreateView { temp, name, query } => format!(
                "CREATE {}VIEW {} AS {}",
                if *temp { "TEMP " } else { "" },
                name.render(),
                query.render()
            ),
            Stmt::CreateTrigger {
                temp,
                name,
                after,
                event,
                table,
                body,
            } => {
                let mut sql = format!(
                    "CREATE {}TRIGGER {} {} {} ON {} BEGIN INSERT INTO fired VALUES ('{}'); ",
                    if *temp { "TEMP " } else { "" },
                    name.render(),
                    if *after { "AFTER" } else { "BEFORE" },
                    ["INSERT", "UPDATE", "DELETE"][*event as usize % 3],
                    table.render(),
                    name.word()
                );
                for s in body {
                    let _ = write!(sql, "{}; ", s.render());
                }
                sql.push_str("END");
                sql
            }
            Stmt::Fill { table, rows } => format!(
                "INSERT INTO {} (a) WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c{}) SELECT x FROM c",
                table.render(),
                limit(*rows)
            ),
            Stmt::Insert { table, values } => {
                format!("INSERT INTO {} VALUES ({})", table.render(), list(values))
            }
            Stmt::Delete(table) => format!("DELETE FROM {}", table.render()),
            Stmt::Update {
                table,
                column,
                expr,
            } => format!(
                "UPDATE {} SET {} = {}",
                table.render(),
                COLUMNS[*column as usize % COLUMNS.len()],
                expr.render()
            ),
            Stmt::Select(query) => query.render(),
            Stmt::Raw(text) => text.clone(),
        }
    }
}

fn limit(rows: u8) -> String {
    match ROWS[rows as usize % ROWS.len()] {
        Some(n) => format!(" LIMIT {n}"),
        None => String::new(),
    }
}

fn list(exprs: &[Expr]) -> String {
    if exprs.is_empty() {
        return "NULL".into();
    }
    exprs
        .iter()
        .map(Expr::render)
        .collect::<Vec<_>>()
        .join(", ")
}

impl Query {
    fn decode(r: &mut Reader) -> Query {
        match r.choice(4) {
            0 => Query::Values(r.list(MAX_ITEMS, |r| Expr::decode(r, 0))),
            1 => Query::Table(Name::decode(r)),
            2 => Query::CrossJoin {
                table: Name::decode(r),
                ways: r.byte(),
            },
            _ => Query::Recursive {
                rows: r.choice(ROWS.len()),
                expr: Expr::decode(r, 0),
            },
        }
    }

    fn encode(&self, w: &mut Writer) {
        match self {
            Query::Values(exprs) => {
                w.byte(0);
                w.list(exprs, |w, e| e.encode(w));
            }
            Query::Table(name) => {
                w.byte(1);
                name.encode(w);
            }
            Query::CrossJoin { table, ways } => {
                w.byte(2);
                table.encode(w);
                w.byte(*ways);
            }
            Query::Recursive { rows, expr } => {
                w.byte(3);
                w.byte(*rows);
                expr.encode(w);
            }
        }
    }

    fn render(&self) -> String {
        match self {
            Query::Values(exprs) => format!("SELECT {}", list(exprs)),
            Query::Table(name) => format!("SELECT * FROM {}", name.render()),
            Query::CrossJoin { table, ways } => {
                let ways = 2 + *ways as usize % 3;
                let from = (0..ways)
                    .map(|i| format!("{} AS j{i}", table.render()))
                    .collect::<Vec<_>>()
                    .join(", ");
                format!("SELECT count(*) FROM {from}")
            }
            Query::Recursive { rows, expr } => format!(
                "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c{}) SELECT count({}) FROM c",
                limit(*rows),
                expr.render()
            ),
        }
    }
}

impl Expr {
    fn decode(r: &mut Reader, depth: u8) -> Expr {
        let leaves = 7;
        let tag = if depth >= MAX_DEPTH {
            r.choice(leaves)
        } else {
            r.choice(leaves + 3)
        };
        let sub = |r: &mut Reader| Box::new(Expr::decode(r, depth + 1));
        match tag {
            0 => Expr::Null,
            1 => Expr::Int(r.i64()),
            2 => Expr::Text(r.text()),
            3 => Expr::Blob(r.bytes()),
            4 => Expr::ZeroBlob(r.choice(SIZES.len())),
            5 => Expr::RandomBlob(r.choice(SIZES.len())),
            6 => Expr::Column(r.choice(COLUMNS.len())),
            7 => Expr::Length(sub(r)),
            8 => Expr::Add(sub(r), sub(r)),
            _ => Expr::Concat(sub(r), sub(r)),
        }
    }

    fn encode(&self, w: &mut Writer) {
        match self {
            Expr::Null => w.byte(0),
            Expr::Int(i) => {
                w.byte(1);
                w.i64(*i);
            }
            Expr::Text(t) => {
                w.byte(2);
                w.bytes(t.as_bytes());
            }
            Expr::Blob(b) => {
                w.byte(3);
                w.bytes(b);
            }
            Expr::ZeroBlob(i) => {
                w.byte(4);
                w.byte(*i);
            }
            Expr::RandomBlob(i) => {
                w.byte(5);
                w.byte(*i);
            }
            Expr::Column(i) => {
                w.byte(6);
                w.byte(*i);
            }
            Expr::Length(e) => {
                w.byte(7);
                e.encode(w);
            }
            Expr::Add(a, b) => {
                w.byte(8);
                a.encode(w);
                b.encode(w);
            }
            Expr::Concat(a, b) => {
                w.byte(9);
                a.encode(w);
                b.encode(w);
            }
        }
    }

    /// The expression's SQL text.
    pub fn render(&self) -> String {
        match self {
            Expr::Null => "NULL".into(),
            Expr::Int(i) => i.to_string(),
            Expr::Text(t) => format!("'{}'", t.replace('\'', "''")),
            Expr::Blob(b) => format!("X'{}'", hex::encode(b)),
            Expr::ZeroBlob(i) => format!("zeroblob({})", SIZES[*i as usize % SIZES.len()]),
            Expr::RandomBlob(i) => format!("randomblob({})", SIZES[*i as usize % SIZES.len()]),
            Expr::Column(i) => COLUMNS[*i as usize % COLUMNS.len()].into(),
            Expr::Length(e) => format!("length({})", e.render()),
            Expr::Add(a, b) => format!("({} + {})", a.render(), b.render()),
            Expr::Concat(a, b) => format!("({} || {})", a.render(), b.render()),
        }
    }

    /// `zeroblob(size)`, `size` one of the sizes.
    pub fn zeroblob(size: i64) -> Expr {
        Expr::ZeroBlob(size_index(size))
    }

    /// `randomblob(size)`, `size` one of the sizes.
    pub fn randomblob(size: i64) -> Expr {
        Expr::RandomBlob(size_index(size))
    }
}

fn size_index(size: i64) -> u8 {
    SIZES
        .iter()
        .position(|s| *s == size)
        .unwrap_or_else(|| panic!("{size} is not among the sizes")) as u8
}

// ---------------------------------------------------------------------------
// Running and checking.

/// What the host acknowledged, as of one point of a transaction.
#[derive(Debug, Clone, Default, PartialEq)]
struct Snapshot {
    state: Option<Vec<u8>>,
    events: BTreeSet<i64>,
    schedules: BTreeSet<i64>,
}

/// What the host acknowledged: committed, and in the open transaction.
#[derive(Debug, Default)]
struct Model {
    committed: Snapshot,
    current: Snapshot,
    recurring: BTreeSet<i64>,
}

impl Model {
    fn commit(&mut self) {
        self.committed = self.current.clone();
    }

    fn rollback(&mut self) {
        self.current = self.committed.clone();
    }
}

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

/// An instance over a fresh database, driven by [`Op`]s, with a model of
/// what the host acknowledged.
pub struct SqlSession {
    session: ImportSession,
    model: Model,
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
        let mut session = ImportSession::new();
        let s = &mut session.state;
        s.deadline.clear();
        s.call_timeout = DEADLINE;
        s.execute_batch("CREATE TABLE fired (what TEXT)".into())
            .expect("no trap")
            .expect("the guest's table");
        s.commit_transaction().expect("commit");
        s.db.begin().expect("begin");
        let watchdog = Watchdog::new(s.db.conn.get_interrupt_handle());
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
        let fired = fired(&self.session.state.db.conn);
        let mut problems = Vec::new();
        memory_highwater(true);
        let start = Instant::now();
        self.watchdog.arm(start + DEADLINE + MARGIN + HARNESS_STOP);
        self.run(op, &mut problems);
        self.watchdog.disarm();
        let elapsed = start.elapsed();
        let memory = memory_highwater(false);
        self.state().deadline.clear();
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
        if host_op && fired != self::fired(&self.session.state.db.conn) {
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
                        if every {
                            self.model.recurring.insert(id as i64);
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
        } else if self.session.state.transaction_lost.is_some() {
            // SQLite rolled the transaction back by itself: the call fails
            // when it ends.
            self.model.rollback();
        } else if rolls_back {
            self.model.current = read_main(&self.session.state.db.conn).unwrap_or_default();
        }
    }

    /// Starts the deadline of a guest call's import.
    fn start_call(&mut self) {
        let s = self.state();
        s.mode = Mode::Action;
        s.deadline.start(DEADLINE);
    }

    /// The host commits the call (or rolls it back if it cannot commit)
    /// and opens the next.
    fn end_call(&mut self) {
        let s = &mut self.session.state;
        s.deadline.clear();
        let committed = s.transaction_lost.take().is_none() && s.commit_transaction().is_ok();
        s.db.rollback();
        s.discard_effects();
        s.db.begin().expect("begin");
        if committed {
            self.model.commit();
        } else {
            self.model.rollback();
        }
    }

    /// The call traps or is rolled back: nothing of it stays.
    fn abort_call(&mut self) {
        let s = &mut self.session.state;
        s.deadline.clear();
        s.transaction_lost = None;
        s.db.rollback();
        s.discard_effects();
        s.db.begin().expect("begin");
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
        let result = f(&s.db.conn)
            .and_then(|()| s.db.commit().map_err(|e| format!("its commit failed: {e}")));
        s.db.rollback();
        s.db.begin().expect("begin");
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
                match queue_db::record_failure(conn, id, "fuzz", now, 1, |_| now) {
                    Ok(queue_db::AfterFailure::DeadLettered) => Ok(()),
                    Ok(other) => Err(format!("the event was not dead-lettered: {other:?}")),
                    Err(e) => Err(e.to_string()),
                }
            } else {
                queue_db::delete(conn, id).map_err(|e| e.to_string())?;
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
            let due = schedule_db::next_due(&self.session.state.db.conn, now);
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
                schedule_db::done(conn, &schedule, now).map_err(|e| e.to_string())
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
        s.db.rollback();
        s.mode = Mode::Orchestration;
        s.deadline.start(DEADLINE);
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
            let fired = fired(&s.db.conn);
            let ended = s.end_step(outcome);
            if fired != self::fired(&s.db.conn) {
                problems.push(
                    "a guest trigger fired inside the host's own statements of end-step".into(),
                );
            }
            if !trapped && matches!(ended, Ok(Ok(None))) {
                self.model.commit();
            }
        }
        self.model.rollback();
        let s = &mut self.session.state;
        s.db.rollback();
        s.deadline.clear();
        s.mode = Mode::Action;
        s.db.begin().expect("begin");
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

    /// The invariants after every operation.
    fn check(&self, problems: &mut Vec<String>) {
        let conn = &self.session.state.db.conn;
        match internal_objects(conn, "main") {
            Ok(main) => {
                let host = host_objects();
                let without_schedules: Vec<_> = host
                    .iter()
                    .filter(|o| o.2 != "_burrow_schedule")
                    .cloned()
                    .collect();
                if main != *host && main != without_schedules {
                    let foreign: Vec<_> = main.iter().filter(|o| !host.contains(o)).collect();
                    let missing: Vec<_> = without_schedules
                        .iter()
                        .filter(|o| !main.contains(o))
                        .collect();
                    problems.push(format!(
                        "the `_burrow_*` objects of main are not the host's: not the host's {foreign:?}, missing {missing:?}"
                    ));
                }
            }
            Err(e) => problems.push(format!("main's schema is unreadable: {e}")),
        }
        match internal_objects(conn, "temp") {
            Ok(temp) if temp.is_empty() => {}
            Ok(temp) => problems.push(format!("temp has `_burrow_*` objects: {temp:?}")),
            Err(e) => problems.push(format!("temp's schema is unreadable: {e}")),
        }
        match foreign_keys_into_host_tables(conn) {
            Ok(keys) if keys.is_empty() => {}
            Ok(keys) => problems.push(format!(
                "guest tables have foreign keys into host tables: {keys:?}"
            )),
            Err(e) => problems.push(format!("foreign keys are unreadable: {e}")),
        }
        let record = conn.query_row(
            "SELECT actor, key, created_at FROM main._burrow_instance WHERE id = 1",
            [],
            |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get(2)?)),
        );
        match record {
            Ok(record) if record == ("fuzz".into(), "key".into(), 1i64) => {}
            other => problems.push(format!("the instance record changed: {other:?}")),
        }
        match read_main(conn) {
            Ok(main) => {
                if main.state != self.model.current.state {
                    problems.push(format!(
                        "main._burrow_state holds {}; the host acknowledged {}",
                        show(main.state.as_deref()),
                        show(self.model.current.state.as_deref())
                    ));
                }
                if main.events != self.model.current.events {
                    problems.push(format!(
                        "main._burrow_queue holds events {:?}; the host's are {:?}",
                        main.events, self.model.current.events
                    ));
                }
                if main.schedules != self.model.current.schedules {
                    problems.push(format!(
                        "main._burrow_schedule holds schedules {:?}; the host's are {:?}",
                        main.schedules, self.model.current.schedules
                    ));
                }
            }
            Err(e) => problems.push(format!("the host's tables are unreadable: {e}")),
        }
    }
}

/// A short description of an operation, for messages.
fn describe(op: &Op) -> String {
    let sql = |s: String| {
        if s.len() > 300 {
            format!("{}...", &s[..s.floor_char_boundary(300)])
        } else {
            s
        }
    };
    match op {
        Op::Batch(stmts) => sql(format!(
            "db.execute-batch `{}`",
            stmts
                .iter()
                .map(Stmt::render)
                .collect::<Vec<_>>()
                .join("; ")
        )),
        Op::Query(stmt) => sql(format!("db.execute `{}`", stmt.render())),
        Op::StateSet(value) => format!("state.set({})", show(Some(value))),
        Op::Step { stmts, .. } => sql(format!(
            "a workflow step running `{}`",
            stmts
                .iter()
                .map(Stmt::render)
                .collect::<Vec<_>>()
                .join("; ")
        )),
        other => format!("{other:?}"),
    }
}

fn show(value: Option<&[u8]>) -> String {
    match value {
        None => "nothing".into(),
        Some(v) if v.len() > 64 => format!("{} bytes", v.len()),
        Some(v) => format!("{:?}", String::from_utf8_lossy(v)),
    }
}

/// The host's tables as they are in `main`.
fn read_main(conn: &Connection) -> rusqlite::Result<Snapshot> {
    let state = conn
        .prepare("SELECT value FROM main._burrow_state WHERE id = 1")?
        .query_map([], |r| r.get(0))?
        .next()
        .transpose()?;
    let ids = |sql: &str| -> rusqlite::Result<BTreeSet<i64>> {
        conn.prepare(sql)?.query_map([], |r| r.get(0))?.collect()
    };
    let events = ids("SELECT id FROM main._burrow_queue")?;
    let has_schedules = conn
        .prepare(
            "SELECT 1 FROM main.sqlite_schema WHERE type = 'table' AND name = '_burrow_schedule'",
        )?
        .exists([])?;
    let schedules = if has_schedules {
        ids("SELECT id FROM main._burrow_schedule")?
    } else {
        BTreeSet::new()
    };
    Ok(Snapshot {
        state,
        events,
        schedules,
    })
}

/// (type, name, table, SQL) of a schema's objects with an internal name or
/// on a table with one.
type SchemaObject = (String, String, String, Option<String>);

fn internal_objects(conn: &Connection, schema: &str) -> rusqlite::Result<Vec<SchemaObject>> {
    let sql = format!(
        "SELECT type, name, tbl_name, sql FROM {schema}.sqlite_schema
         WHERE name LIKE '\\_burrow\\_%' ESCAPE '\\' OR tbl_name LIKE '\\_burrow\\_%' ESCAPE '\\'
         ORDER BY type, name"
    );
    conn.prepare(&sql)?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
        .collect()
}

/// The internal objects of an instance database with every host table
/// (the schedules' included), as the host makes them.
fn host_objects() -> &'static Vec<SchemaObject> {
    static OBJECTS: OnceLock<Vec<SchemaObject>> = OnceLock::new();
    OBJECTS.get_or_init(|| {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let db = crate::storage::instance_db::InstanceDb::open(
            &dir.path().join("host.sqlite"),
            crate::config::Synchronous::Off,
            8 << 20,
            crate::deadline::Deadline::default(),
        )
        .expect("open the database");
        db.create_schema().expect("internal tables");
        db.ensure_queue_schema().expect("queue tables");
        db.ensure_workflow_schema().expect("workflow tables");
        db.conn
            .execute_batch(schedule_db::SCHEMA)
            .expect("schedule tables");
        internal_objects(&db.conn, "main").expect("the host's objects")
    })
}

/// (table, parent) of every foreign key of a guest table, in main or temp,
/// into a table with an internal name.
fn foreign_keys_into_host_tables(conn: &Connection) -> rusqlite::Result<Vec<(String, String)>> {
    let mut keys = Vec::new();
    for schema in ["main", "temp"] {
        let sql = format!(
            "SELECT m.name, f.\"table\" FROM {schema}.sqlite_schema AS m,
                 pragma_foreign_key_list(m.name, '{schema}') AS f
             WHERE m.type = 'table' AND m.name NOT LIKE '\\_burrow\\_%' ESCAPE '\\'
                 AND f.\"table\" LIKE '\\_burrow\\_%' ESCAPE '\\'"
        );
        let found: Vec<(String, String)> = conn
            .prepare(&sql)?
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?;
        keys.extend(found);
    }
    Ok(keys)
}

/// How many times the grammar's triggers fired (`None` if the guest
/// dropped their table).
fn fired(conn: &Connection) -> Option<i64> {
    conn.query_row("SELECT count(*) FROM main.fired", [], |r| r.get(0))
        .ok()
}

/// SQLite's memory high-water mark (of every connection of the process),
/// reset to the memory in use when `reset`.
fn memory_highwater(reset: bool) -> i64 {
    // SAFETY: sqlite3_memory_highwater only reads (and resets) SQLite's
    // global memory statistics, which are thread-safe.
    unsafe { rusqlite::ffi::sqlite3_memory_highwater(i32::from(reset)) }
}

/// Interrupts the session's connection when an operation runs far past
/// its deadline, so that a run of the target ends (the operation has
/// broken its invariant by then).
struct Watchdog {
    shared: Arc<(Mutex<WatchState>, Condvar)>,
    thread: Option<std::thread::JoinHandle<()>>,
}

#[derive(Default)]
struct WatchState {
    until: Option<Instant>,
    stop: bool,
}

impl Watchdog {
    fn new(handle: rusqlite::InterruptHandle) -> Watchdog {
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

    fn arm(&self, until: Instant) {
        self.set(|s| s.until = Some(until));
    }

    fn disarm(&self) {
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

/// The seeds of the `sql` target (in `fuzz/corpus/sql/<name>`): the
/// attacks on the SQL sandbox and variants of them, and SQL that must keep
/// working.
pub fn seeds() -> Vec<(&'static str, Vec<Op>)> {
    let t = Name::of("t");
    let x = Name::of("x");
    let big = Name::of("big");
    let internal = |name: &str| Name::of(name);
    let batch = |stmts: Vec<Stmt>| Op::Batch(stmts);
    let expensive = Stmt::Select(Query::CrossJoin {
        table: big,
        ways: 1,
    });
    let fill_big = vec![
        Stmt::CreateTable {
            temp: false,
            name: big,
            shape: Shape::Plain,
        },
        Stmt::Fill {
            table: big,
            rows: 2,
        },
    ];
    vec![
        (
            "rename-temp-to-state",
            vec![
                batch(vec![
                    Stmt::CreateTable {
                        temp: true,
                        name: x,
                        shape: Shape::Like(0),
                    },
                    Stmt::Insert {
                        table: x,
                        values: vec![Expr::Int(1), Expr::Blob(b"{\"v\":1000}".to_vec())],
                    },
                    Stmt::Rename {
                        from: x.in_schema(2),
                        to: internal("_burrow_state"),
                    },
                ]),
                Op::StateSet(b"{\"v\":2}".to_vec()),
                Op::StateGet,
                Op::Commit,
                Op::Inspect,
            ],
        ),
        (
            "schedule-trigger",
            vec![
                batch(fill_big.clone()),
                batch(vec![
                    Stmt::CreateTable {
                        temp: false,
                        name: t,
                        shape: Shape::Like(1),
                    },
                    Stmt::CreateTrigger {
                        temp: false,
                        name: Name::of("u"),
                        after: true,
                        event: 2,
                        table: t,
                        body: vec![expensive.clone()],
                    },
                    Stmt::Rename {
                        from: t,
                        to: internal("_burrow_schedule"),
                    },
                ]),
                Op::Commit,
                Op::Schedule {
                    delay_ms: 0,
                    every: false,
                },
                Op::Commit,
                Op::RunSchedules,
            ],
        ),
        (
            "zeroblob-row",
            vec![Op::Query(Stmt::Select(Query::Values(vec![
                Expr::zeroblob(400_000_000),
                Expr::zeroblob(400_000_000),
                Expr::zeroblob(400_000_000),
            ])))],
        ),
        (
            "randomblob-sum",
            vec![Op::Query(Stmt::Select(Query::Values(vec![Expr::Add(
                Box::new(Expr::Length(Box::new(Expr::randomblob(999_999_999)))),
                Box::new(Expr::Length(Box::new(Expr::randomblob(999_999_999)))),
            )])))],
        ),
        (
            "foreign-key-into-queue",
            vec![
                Op::Append(1),
                Op::Commit,
                batch(vec![
                    Stmt::CreateTable {
                        temp: false,
                        name: t,
                        shape: Shape::References {
                            target: internal("_burrow_queue"),
                            action: 0,
                            deferred: false,
                        },
                    },
                    Stmt::CreateTrigger {
                        temp: false,
                        name: Name::of("u"),
                        after: true,
                        event: 2,
                        table: t,
                        body: vec![],
                    },
                    Stmt::Insert {
                        table: t,
                        values: vec![Expr::Int(1), Expr::Int(1)],
                    },
                ]),
                Op::Commit,
                Op::ProcessEvent,
            ],
        ),
        (
            "index-with-internal-name",
            vec![
                batch(vec![
                    Stmt::CreateTable {
                        temp: false,
                        name: t,
                        shape: Shape::Plain,
                    },
                    Stmt::CreateIndex {
                        name: internal("_burrow_x").odd_case(),
                        table: t,
                        column: 0,
                        unique: false,
                    },
                ]),
                Op::Commit,
            ],
        ),
        (
            "rename-to-odd-case",
            vec![
                batch(vec![
                    Stmt::CreateTable {
                        temp: false,
                        name: t,
                        shape: Shape::Like(1),
                    },
                    Stmt::Rename {
                        from: t.in_schema(1),
                        to: internal("_burrow_schedule").odd_case(),
                    },
                ]),
                Op::Schedule {
                    delay_ms: 0,
                    every: false,
                },
                Op::Commit,
                Op::RunSchedules,
            ],
        ),
        (
            "refused-already",
            vec![
                batch(vec![Stmt::CreateTable {
                    temp: true,
                    name: internal("_burrow_state"),
                    shape: Shape::Like(0),
                }]),
                batch(vec![Stmt::CreateTrigger {
                    temp: true,
                    name: t,
                    after: true,
                    event: 0,
                    table: internal("_burrow_queue").in_schema(1),
                    body: vec![expensive.clone()],
                }]),
                batch(vec![Stmt::CreateView {
                    temp: true,
                    name: internal("_burrow_queue"),
                    query: Query::Values(vec![Expr::Int(1)]),
                }]),
                batch(vec![Stmt::Delete(internal("_burrow_state").odd_case())]),
                Op::StateSet(b"1".to_vec()),
                Op::Append(0),
                Op::Commit,
                Op::Inspect,
            ],
        ),
        (
            "guest-sql-that-works",
            vec![
                batch(fill_big),
                batch(vec![
                    Stmt::CreateTable {
                        temp: false,
                        name: t,
                        shape: Shape::Generated {
                            expr: Expr::Length(Box::new(Expr::Column(1))),
                            stored: false,
                        },
                    },
                    Stmt::CreateTable {
                        temp: true,
                        name: x,
                        shape: Shape::References {
                            target: t,
                            action: 0,
                            deferred: false,
                        },
                    },
                    Stmt::CreateTrigger {
                        temp: false,
                        name: Name::of("u"),
                        after: true,
                        event: 0,
                        table: t,
                        body: vec![Stmt::Select(Query::Values(vec![Expr::randomblob(1000)]))],
                    },
                    Stmt::Insert {
                        table: t,
                        values: vec![Expr::Int(1), Expr::zeroblob(1 << 20)],
                    },
                    Stmt::Rename {
                        from: t,
                        to: Name::of("u"),
                    },
                ]),
                batch(vec![
                    Stmt::CreateIndex {
                        name: Name::of("u").in_schema(2),
                        table: x,
                        column: 6,
                        unique: false,
                    },
                    Stmt::CreateView {
                        temp: true,
                        name: t,
                        query: Query::Table(Name::of("u")),
                    },
                ]),
                Op::StateSet(b"{\"v\":1}".to_vec()),
                Op::Append(0),
                Op::Schedule {
                    delay_ms: 0,
                    every: false,
                },
                Op::Commit,
                Op::Query(Stmt::Select(Query::Values(vec![Expr::zeroblob(1 << 20)]))),
                Op::StateGet,
                Op::Step {
                    stmts: vec![Stmt::Insert {
                        table: Name::of("u"),
                        values: vec![Expr::Int(2), Expr::Text("two".into())],
                    }],
                    state: Some(b"{\"v\":3}".to_vec()),
                },
                Op::RunSchedules,
                Op::ProcessEvent,
                Op::Append(1),
                Op::Commit,
                Op::FailEvent,
                Op::Query(Stmt::Select(Query::Recursive {
                    rows: 5,
                    expr: Expr::Null,
                })),
                Op::StateGet,
                Op::Inspect,
            ],
        ),
    ]
}

/// Where the seeds live.
pub fn corpus_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../fuzz/corpus/sql"))
}

#[cfg(test)]
mod tests {
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
}
