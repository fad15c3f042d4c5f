//! The instance's own SQLite database.
//!
//! Every statement runs inside the transaction of the current call, so an
//! action's writes commit together or not at all.

use crate::wit::burrow::actor::db as wit;
use crate::{Error, Result};

pub use wit::Value;

/// Why a statement failed, as reported by the host.
pub type DbError = wit::DbError;

/// The rows a statement returned.
#[derive(Debug, Clone)]
pub struct Rows {
    /// Column names, in order.
    pub columns: Vec<String>,
    /// The rows.
    pub rows: Vec<Vec<Value>>,
    /// Rows changed by an INSERT, UPDATE or DELETE.
    pub changes: u64,
    /// The rowid of the last INSERT.
    pub last_insert_rowid: i64,
}

/// One row, with access by column index or name.
#[derive(Debug, Clone, Copy)]
pub struct Row<'a> {
    columns: &'a [String],
    values: &'a [Value],
}

impl Rows {
    /// The rows, one [`Row`] each.
    pub fn iter(&self) -> impl Iterator<Item = Row<'_>> {
        self.rows.iter().map(|values| Row {
            columns: &self.columns,
            values,
        })
    }

    /// The first row, if any.
    pub fn first(&self) -> Option<Row<'_>> {
        self.iter().next()
    }
}

impl<'a> Row<'a> {
    /// The value of column `index` (a position or a column name) as `T`.
    pub fn get<T: FromValue>(&self, index: impl ColumnIndex) -> Result<T> {
        let position = index.position(self.columns)?;
        T::from_value(&self.values[position])
    }

    /// The raw values of the row.
    pub fn values(&self) -> &'a [Value] {
        self.values
    }
}

/// Runs one statement with parameters and returns its rows.
pub fn query(sql: &str, params: impl Params) -> Result<Rows, DbError> {
    let result = wit::execute(sql, &params.into_values())?;
    Ok(Rows {
        columns: result.columns,
        rows: result.rows,
        changes: result.changes,
        last_insert_rowid: result.last_insert_rowid,
    })
}

/// Runs one statement and returns its first row, or an error if it returned none.
pub fn query_one(sql: &str, params: impl Params) -> Result<OwnedRow> {
    let rows = query(sql, params)?;
    let Some(values) = rows.rows.into_iter().next() else {
        return Err(Error::new(
            "no-rows",
            format!("the statement returned no rows: {sql}"),
        ));
    };
    Ok(OwnedRow {
        columns: rows.columns,
        values,
    })
}

/// Runs one statement and returns the number of changed rows.
pub fn execute(sql: &str, params: impl Params) -> Result<u64, DbError> {
    Ok(query(sql, params)?.changes)
}

/// Runs several statements separated by `;`, without parameters.
pub fn execute_batch(sql: &str) -> Result<(), DbError> {
    wit::execute_batch(sql)
}

/// A row that owns its values, as returned by [`query_one`].
#[derive(Debug, Clone)]
pub struct OwnedRow {
    columns: Vec<String>,
    values: Vec<Value>,
}

impl OwnedRow {
    /// The value of column `index` (a position or a column name) as `T`.
    pub fn get<T: FromValue>(&self, index: impl ColumnIndex) -> Result<T> {
        Row {
            columns: &self.columns,
            values: &self.values,
        }
        .get(index)
    }
}

/// A column position or name.
pub trait ColumnIndex {
    /// The column's position among `columns`.
    fn position(&self, columns: &[String]) -> Result<usize>;
}

impl ColumnIndex for usize {
    fn position(&self, columns: &[String]) -> Result<usize> {
        if *self < columns.len() {
            Ok(*self)
        } else {
            Err(Error::new(
                "no-such-column",
                format!("column {self} out of range ({} columns)", columns.len()),
            ))
        }
    }
}

impl ColumnIndex for &str {
    fn position(&self, columns: &[String]) -> Result<usize> {
        columns
            .iter()
            .position(|c| c == self)
            .ok_or_else(|| Error::new("no-such-column", format!("no column named {self}")))
    }
}

/// Conversion from a database value.
pub trait FromValue: Sized {
    /// Converts `value`, or says why it does not fit.
    fn from_value(value: &Value) -> Result<Self>;
}

fn mismatch(expected: &str, value: &Value) -> Error {
    Error::new(
        "type-mismatch",
        format!("expected {expected}, found {value:?}"),
    )
}

impl FromValue for i64 {
    fn from_value(value: &Value) -> Result<Self> {
        match value {
            Value::Integer(i) => Ok(*i),
            other => Err(mismatch("an integer", other)),
        }
    }
}

impl FromValue for f64 {
    fn from_value(value: &Value) -> Result<Self> {
        match value {
            Value::Real(r) => Ok(*r),
            Value::Integer(i) => Ok(*i as f64),
            other => Err(mismatch("a real", other)),
        }
    }
}

impl FromValue for bool {
    fn from_value(value: &Value) -> Result<Self> {
        i64::from_value(value).map(|i| i != 0)
    }
}

impl FromValue for String {
    fn from_value(value: &Value) -> Result<Self> {
        match value {
            Value::Text(s) => Ok(s.clone()),
            other => Err(mismatch("text", other)),
        }
    }
}

impl FromValue for Vec<u8> {
    fn from_value(value: &Value) -> Result<Self> {
        match value {
            Value::Blob(b) => Ok(b.clone()),
            other => Err(mismatch("a blob", other)),
        }
    }
}

impl FromValue for Value {
    fn from_value(value: &Value) -> Result<Self> {
        Ok(value.clone())
    }
}

impl<T: FromValue> FromValue for Option<T> {
    fn from_value(value: &Value) -> Result<Self> {
        match value {
            Value::Null => Ok(None),
            other => T::from_value(other).map(Some),
        }
    }
}

macro_rules! into_value {
    ($($t:ty => $variant:ident $(as $cast:ty)?),* $(,)?) => {
        $(impl From<$t> for Value {
            fn from(v: $t) -> Value {
                Value::$variant(v $(as $cast)?)
            }
        })*
    };
}

into_value! {
    i64 => Integer,
    i32 => Integer as i64,
    u32 => Integer as i64,
    f64 => Real,
    String => Text,
    Vec<u8> => Blob,
}

impl From<bool> for Value {
    fn from(v: bool) -> Value {
        Value::Integer(v as i64)
    }
}

impl From<&str> for Value {
    fn from(v: &str) -> Value {
        Value::Text(v.to_owned())
    }
}

impl From<&[u8]> for Value {
    fn from(v: &[u8]) -> Value {
        Value::Blob(v.to_vec())
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Value {
        v.map_or(Value::Null, Into::into)
    }
}

/// Statement parameters: `()`, an array, a `Vec`, or a tuple of values.
pub trait Params {
    /// The parameters as database values.
    fn into_values(self) -> Vec<Value>;
}

impl Params for () {
    fn into_values(self) -> Vec<Value> {
        Vec::new()
    }
}

impl<T: Into<Value>, const N: usize> Params for [T; N] {
    fn into_values(self) -> Vec<Value> {
        self.into_iter().map(Into::into).collect()
    }
}

impl<T: Into<Value>> Params for Vec<T> {
    fn into_values(self) -> Vec<Value> {
        self.into_iter().map(Into::into).collect()
    }
}

macro_rules! tuple_params {
    ($($t:ident),+) => {
        impl<$($t: Into<Value>),+> Params for ($($t,)+) {
            #[allow(non_snake_case)]
            fn into_values(self) -> Vec<Value> {
                let ($($t,)+) = self;
                vec![$($t.into()),+]
            }
        }
    };
}

tuple_params!(A);
tuple_params!(A, B);
tuple_params!(A, B, C);
tuple_params!(A, B, C, D);
tuple_params!(A, B, C, D, E);
tuple_params!(A, B, C, D, E, F);
tuple_params!(A, B, C, D, E, F, G);
tuple_params!(A, B, C, D, E, F, G, H);
