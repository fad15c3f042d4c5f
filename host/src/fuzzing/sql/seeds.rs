//! The seeds of the `sql` target, written as the operations they stand for.

use std::path::Path;

use super::grammar::{Expr, Name, Op, Query, Shape, Stmt};

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
            "drop-cascade-rewrites-counters",
            vec![
                Op::Append(1),
                Op::Schedule {
                    delay_ms: 60_000,
                    every: false,
                },
                Op::Commit,
                batch(cascade_on_drop(Stmt::Update {
                    table: internal("sqlite_sequence"),
                    column: 8,
                    expr: Expr::Int(9_223_372_036_854_775_000),
                })),
                Op::Commit,
                batch(cascade_on_drop(Stmt::Delete(internal("sqlite_sequence")))),
                Op::Commit,
                Op::Append(2),
                Op::Schedule {
                    delay_ms: 60_000,
                    every: false,
                },
                Op::Commit,
                Op::ProcessEvent,
            ],
        ),
        (
            "statistics-of-host-tables",
            vec![
                Op::Append(1),
                Op::Commit,
                batch(vec![
                    Stmt::CreateTable {
                        temp: false,
                        name: t,
                        shape: Shape::Plain,
                    },
                    Stmt::CreateIndex {
                        name: x,
                        table: t,
                        column: 1,
                        unique: false,
                    },
                    Stmt::Fill { table: t, rows: 2 },
                    Stmt::Analyze(Some(t)),
                    Stmt::Insert {
                        table: internal("sqlite_stat1"),
                        values: vec![
                            Expr::Text("_burrow_queue".into()),
                            Expr::Text("_burrow_queue_order".into()),
                            Expr::Text("1000000000 1000000000".into()),
                        ],
                    },
                ]),
                batch(vec![Stmt::Update {
                    table: internal("sqlite_stat1"),
                    column: 10,
                    expr: Expr::Text("_burrow_queue".into()),
                }]),
                batch(vec![Stmt::Analyze(None)]),
                batch(cascade_on_drop(Stmt::Update {
                    table: internal("sqlite_stat1"),
                    column: 11,
                    expr: Expr::Text("_burrow_queue_order".into()),
                })),
                Op::Commit,
                Op::ProcessEvent,
                Op::Query(Stmt::Select(Query::Table(internal("sqlite_stat1")))),
            ],
        ),
        (
            "dbstat-and-shadow-tables",
            vec![
                Op::Append(1),
                Op::Commit,
                Op::Query(Stmt::Select(Query::Table(internal("dbstat")))),
                batch(vec![
                    Stmt::CreateVirtual {
                        name: internal("f"),
                        rtree: false,
                    },
                    Stmt::Insert {
                        table: internal("f"),
                        values: vec![Expr::Text("hello".into()), Expr::Text("world".into())],
                    },
                    Stmt::CreateVirtual {
                        name: internal("r"),
                        rtree: true,
                    },
                    Stmt::Insert {
                        table: internal("r"),
                        values: vec![Expr::Int(1), Expr::Int(0), Expr::Int(1)],
                    },
                ]),
                Op::Commit,
                batch(vec![Stmt::Update {
                    table: internal("f_data"),
                    column: 13,
                    expr: Expr::randomblob(1000),
                }]),
                batch(vec![Stmt::Delete(internal("f_idx"))]),
                batch(vec![Stmt::Update {
                    table: internal("r_node"),
                    column: 14,
                    expr: Expr::randomblob(1000),
                }]),
                Op::Commit,
                Op::Query(Stmt::Select(Query::Table(internal("f")))),
                Op::Query(Stmt::Select(Query::Table(internal("r")))),
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
        (
            "rolled-back-schedule-id-reused",
            vec![
                Op::Schedule {
                    delay_ms: 26624,
                    every: true,
                },
                Op::Rollback,
                Op::Schedule {
                    delay_ms: 0,
                    every: false,
                },
                Op::Commit,
                Op::RunSchedules,
                Op::PendingSchedules,
            ],
        ),
    ]
}

/// A foreign-key cascade whose trigger runs `body` while SQLite prepares
/// a `DROP TABLE`: `y` references `x`, and dropping `x` deletes `y`'s row.
fn cascade_on_drop(body: Stmt) -> Vec<Stmt> {
    let (x, y) = (Name::of("x"), Name::of("u"));
    vec![
        Stmt::CreateTable {
            temp: false,
            name: x,
            shape: Shape::Like(0),
        },
        Stmt::CreateTable {
            temp: false,
            name: y,
            shape: Shape::References {
                target: x,
                action: 0,
                deferred: false,
            },
        },
        Stmt::CreateTrigger {
            temp: false,
            name: Name::of("t"),
            after: true,
            event: 2,
            table: y,
            body: vec![body],
        },
        Stmt::Insert {
            table: x,
            values: vec![Expr::Int(1), Expr::Blob(vec![0])],
        },
        Stmt::Insert {
            table: y,
            values: vec![Expr::Int(1), Expr::Int(1)],
        },
        Stmt::DropTable(x),
    ]
}

/// Where the seeds live.
pub fn corpus_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../fuzz/corpus/sql"))
}
