//! The counter actor: a table created in a migration, `increment(amount)` as
//! one `UPDATE ... RETURNING`, and `get()`.

use burrow_sdk::{Result, db};

fn migrate() -> Result<()> {
    db::execute_batch(
        "CREATE TABLE IF NOT EXISTS counter (
             id INTEGER PRIMARY KEY CHECK (id = 1),
             value INTEGER NOT NULL
         );
         INSERT OR IGNORE INTO counter (id, value) VALUES (1, 0);",
    )?;
    Ok(())
}

fn increment(amount: i64) -> Result<i64> {
    db::query_one(
        "UPDATE counter SET value = value + ? WHERE id = 1 RETURNING value",
        [amount],
    )?
    .get(0)
}

fn get() -> Result<i64> {
    db::query_one("SELECT value FROM counter WHERE id = 1", ())?.get(0)
}

burrow_sdk::actor! {
    migrate: migrate,
    actions: [increment, get],
}
