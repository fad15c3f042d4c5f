//! A chat room: connection hooks and events.
//!
//! A client connects with a name (`burrow watch chat-room lobby --params
//! '{"name": "ada"}'`); the `connect` hook refuses a connection without
//! one, records the member and broadcasts `joined`, and the `disconnect`
//! hook removes the member and broadcasts `left`. `post` stores a message
//! and broadcasts it to every connected client; the event goes out only
//! once the message has committed, so no client sees a message that was
//! rolled back. `history` and `members` read the room back.

use std::time::{SystemTime, UNIX_EPOCH};

use burrow_sdk::{Error, Result, db, events};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// The longest name, in bytes.
const MAX_NAME: usize = 64;
/// The longest message, in bytes.
const MAX_TEXT: usize = 4000;
/// The most messages `history` returns.
const MAX_HISTORY: u32 = 100;

/// The connection parameters: `{"name": "ada"}`.
#[derive(Deserialize)]
struct Params {
    name: String,
}

/// A stored message, as `history` returns it and as the `message` event
/// carries it.
#[derive(Serialize)]
struct Message {
    id: i64,
    author: String,
    text: String,
    /// When it was posted, in milliseconds since the Unix epoch.
    at: i64,
}

fn migrate() -> Result<()> {
    db::execute_batch(
        "CREATE TABLE IF NOT EXISTS messages (
             id INTEGER PRIMARY KEY,
             author TEXT NOT NULL,
             text TEXT NOT NULL,
             at INTEGER NOT NULL
         );
         CREATE TABLE IF NOT EXISTS members (
             connection INTEGER PRIMARY KEY,
             name TEXT NOT NULL
         );",
    )?;
    Ok(())
}

/// An instance with live connections stays awake, so one that wakes has
/// none: members left over from a crash are gone.
fn wake() -> Result<()> {
    db::execute("DELETE FROM members", ())?;
    Ok(())
}

/// Admits a client that connects with a name, and tells the room.
fn join(connection: u64, params: Option<Params>) -> Result<()> {
    let Some(Params { name }) = params.filter(|p| valid_name(&p.name)) else {
        return Err(Error::new(
            "name-required",
            format!("connect with a name of 1 to {MAX_NAME} bytes: {{\"name\": \"ada\"}}"),
        ));
    };
    db::execute(
        "INSERT INTO members (connection, name) VALUES (?, ?)",
        (connection as i64, name.as_str()),
    )?;
    events::broadcast("joined", &json!({ "name": name }))
}

/// Forgets a client that went away, and tells the room.
fn leave(connection: u64) -> Result<()> {
    let rows = db::query(
        "DELETE FROM members WHERE connection = ? RETURNING name",
        [connection as i64],
    )?;
    let Some(row) = rows.first() else {
        return Ok(());
    };
    let name: String = row.get(0)?;
    events::broadcast("left", &json!({ "name": name }))
}

/// Posts a message and sends it to every connected client; returns its id.
fn post(author: String, text: String) -> Result<i64> {
    if !valid_name(&author) {
        return Err(Error::new(
            "name-required",
            format!("the author needs a name of 1 to {MAX_NAME} bytes"),
        ));
    }
    if text.trim().is_empty() {
        return Err(Error::new("empty-message", "the message is empty"));
    }
    if text.len() > MAX_TEXT {
        return Err(Error::new(
            "message-too-long",
            format!("the message has {} bytes, more than {MAX_TEXT}", text.len()),
        ));
    }
    let at = now_ms()?;
    let id = db::query_one(
        "INSERT INTO messages (author, text, at) VALUES (?, ?, ?) RETURNING id",
        (author.as_str(), text.as_str(), at),
    )?
    .get(0)?;
    events::broadcast(
        "message",
        &Message {
            id,
            author,
            text,
            at,
        },
    )?;
    Ok(id)
}

/// The newest `limit` messages (at most 100), oldest first.
fn history(limit: u32) -> Result<Vec<Message>> {
    db::query(
        "SELECT id, author, text, at FROM (
             SELECT id, author, text, at FROM messages ORDER BY id DESC LIMIT ?
         ) ORDER BY id",
        [limit.min(MAX_HISTORY)],
    )?
    .iter()
    .map(|row| {
        Ok(Message {
            id: row.get(0)?,
            author: row.get(1)?,
            text: row.get(2)?,
            at: row.get(3)?,
        })
    })
    .collect()
}

/// The names of the connected members, sorted, one per connection.
fn members() -> Result<Vec<String>> {
    db::query("SELECT name FROM members ORDER BY name", ())?
        .iter()
        .map(|row| row.get(0))
        .collect()
}

/// A name is 1 to 64 bytes, not all blanks.
fn valid_name(name: &str) -> bool {
    !name.trim().is_empty() && name.len() <= MAX_NAME
}

fn now_ms() -> Result<i64> {
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_err(|e| Error::new("clock", format!("the clock is before 1970: {e}")))?;
    i64::try_from(since_epoch.as_millis())
        .map_err(|_| Error::new("clock", "the clock is out of range"))
}

burrow_sdk::actor! {
    migrate: migrate,
    wake: wake,
    connect: join,
    disconnect: leave,
    actions: [post, history, members],
}
