//! Inputs as operations: [`decode`] reads any bytes as a bounded sequence
//! of [`Op`]s, and [`encode`] is its inverse, so seeds are written as the
//! operations they stand for.

use super::grammar::{
    COLUMNS, Expr, FK_ACTIONS, NAMES, Name, Op, Query, ROWS, SHAPES, SIZES, Shape, Stmt,
};

/// Operations decoded from one input.
pub(super) const MAX_OPS: usize = 48;
/// Statements in one batch, a trigger body or a step.
pub(super) const MAX_STMTS: usize = 6;
/// Items in a list of values or columns.
pub(super) const MAX_ITEMS: usize = 6;
/// Bytes of one text, blob or raw SQL.
pub(super) const MAX_BYTES: usize = 4096;
/// Nesting of expressions.
pub(super) const MAX_DEPTH: u8 = 3;

/// Reads an input; past its end, every read is zero.
pub(super) struct Reader<'a>(&'a [u8]);

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
pub(super) struct Writer(Vec<u8>);

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
}

impl Stmt {
    fn decode(r: &mut Reader, depth: u8) -> Stmt {
        // Trigger bodies hold DML and queries only.
        let tag = if depth > 0 {
            [8, 10, 11, 12][r.choice(4) as usize]
        } else {
            r.choice(16)
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
            14 => Stmt::Analyze(r.flag().then(|| Name::decode(r))),
            15 => Stmt::CreateVirtual {
                name: Name::decode(r),
                rtree: r.flag(),
            },
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
            Stmt::Analyze(name) => {
                w.byte(14);
                w.flag(name.is_some());
                if let Some(name) = name {
                    name.encode(w);
                }
            }
            Stmt::CreateVirtual { name, rtree } => {
                w.byte(15);
                name.encode(w);
                w.flag(*rtree);
            }
        }
    }
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
}
