//! The grammar of the `sql` target: the operations an input stands for,
//! and the names, shapes, statements and expressions they are made of.

/// Table, view, index and trigger names: the guest's, then the host's
/// and one internal name the host does not use, then the tables SQLite
/// keeps by itself (the counters, the planner's statistics, `dbstat`) and
/// the grammar's virtual tables (`f` of FTS5, `r` of R*Tree) with their
/// shadow tables.
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
    "sqlite_sequence",
    "sqlite_stat1",
    "sqlite_stat4",
    "dbstat",
    "f",
    "f_data",
    "f_idx",
    "f_content",
    "r",
    "r_node",
    "r_rowid",
    // Last, so that the committed seeds keep the names they were made with.
    "_burrow_pause",
];

/// Columns expressions may name.
pub(super) const COLUMNS: &[&str] = &[
    "a", "b", "id", "value", "action", "due_at", "q", "g", "seq", "name", "tbl", "idx", "stat",
    "block", "data",
];

/// Sizes for `zeroblob` and `randomblob`, the attacks' among them.
pub(super) const SIZES: &[i64] = &[
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
pub(super) const ROWS: &[Option<u64>] = &[
    Some(1),
    Some(10),
    Some(1000),
    Some(100_000),
    Some(10_000_000),
    None,
];

/// Tables shaped like the host's, so that its statements work on them.
pub(super) const SHAPES: &[(&str, &str)] = &[
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

pub(super) const FK_ACTIONS: &[&str] = &["CASCADE", "RESTRICT", "SET NULL", "NO ACTION"];

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
    /// `ANALYZE`, of one table or index if named.
    Analyze(Option<Name>),
    /// `CREATE VIRTUAL TABLE name USING fts5 (a, b)`, or `rtree (id, x0,
    /// x1)`.
    CreateVirtual {
        /// The table (its shadow tables are named after it).
        name: Name,
        /// R*Tree rather than FTS5.
        rtree: bool,
    },
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
}

impl Expr {
    /// `zeroblob(size)`, `size` one of the sizes.
    pub fn zeroblob(size: i64) -> Expr {
        Expr::ZeroBlob(size_index(size))
    }

    /// `randomblob(size)`, `size` one of the sizes.
    pub fn randomblob(size: i64) -> Expr {
        Expr::RandomBlob(size_index(size))
    }
}

pub(super) fn size_index(size: i64) -> u8 {
    SIZES
        .iter()
        .position(|s| *s == size)
        .unwrap_or_else(|| panic!("{size} is not among the sizes")) as u8
}
