//! `host.sqlite`: the index of every instance on this data directory.
//!
//! Instance databases are the source of truth; the index lets the host list
//! instances without opening every database. A row is written after an
//! instance's creation commits and removed when it is destroyed.

use std::path::Path;
use std::sync::Mutex;

use rusqlite::Connection;

pub(crate) struct Index {
    conn: Mutex<Connection>,
}

impl Index {
    pub(crate) fn open(path: &Path) -> rusqlite::Result<Index> {
        let conn = Connection::open(path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS instances (
                 actor TEXT NOT NULL,
                 key TEXT NOT NULL,
                 created_at INTEGER NOT NULL,
                 PRIMARY KEY (actor, key)
             ) WITHOUT ROWID;",
        )?;
        Ok(Index {
            conn: Mutex::new(conn),
        })
    }

    pub(crate) fn insert(&self, actor: &str, key: &str, created_at: i64) -> rusqlite::Result<()> {
        let conn = self.conn.lock().unwrap();
        conn.prepare_cached(
            "INSERT OR REPLACE INTO instances (actor, key, created_at) VALUES (?, ?, ?)",
        )?
        .execute(rusqlite::params![actor, key, created_at])?;
        Ok(())
    }

    pub(crate) fn remove(&self, actor: &str, key: &str) -> rusqlite::Result<()> {
        let conn = self.conn.lock().unwrap();
        conn.prepare_cached("DELETE FROM instances WHERE actor = ? AND key = ?")?
            .execute([actor, key])?;
        Ok(())
    }

    /// Keys of `actor`'s instances, in key order.
    pub(crate) fn keys(&self, actor: &str) -> rusqlite::Result<Vec<String>> {
        let conn = self.conn.lock().unwrap();
        let mut stmt =
            conn.prepare_cached("SELECT key FROM instances WHERE actor = ? ORDER BY key")?;
        stmt.query_map([actor], |r| r.get(0))?.collect()
    }
}
