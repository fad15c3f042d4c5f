//! The SQL text of the grammar's statements, queries, expressions and
//! names (what a guest sends to the `db` import), and the short
//! descriptions of operations in messages.

use std::fmt::Write as _;

use super::grammar::{
    COLUMNS, Expr, FK_ACTIONS, NAMES, Name, Op, Query, ROWS, SHAPES, SIZES, Shape, Stmt,
};

impl Name {
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
            Stmt::Analyze(None) => "ANALYZE".into(),
            Stmt::Analyze(Some(name)) => format!("ANALYZE {}", name.render()),
            Stmt::CreateVirtual { name, rtree } => format!(
                "CREATE VIRTUAL TABLE {} USING {}",
                name.render(),
                if *rtree {
                    "rtree (id, x0, x1)"
                } else {
                    "fts5 (a, b)"
                }
            ),
        }
    }
}

pub(super) fn limit(rows: u8) -> String {
    match ROWS[rows as usize % ROWS.len()] {
        Some(n) => format!(" LIMIT {n}"),
        None => String::new(),
    }
}

pub(super) fn list(exprs: &[Expr]) -> String {
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
}

/// A short description of an operation, for messages.
pub(super) fn describe(op: &Op) -> String {
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

pub(super) fn show(value: Option<&[u8]>) -> String {
    match value {
        None => "nothing".into(),
        Some(v) if v.len() > 64 => format!("{} bytes", v.len()),
        Some(v) => format!("{:?}", String::from_utf8_lossy(v)),
    }
}
