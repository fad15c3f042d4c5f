//! Test actor: schedules its own actions, calls other actors, broadcasts
//! events and records its connections. `guarded` is internal (other
//! actors may call it).

use burrow_sdk::{Caller, Error, Json, Result, actors, db, events, schedule};

fn migrate() -> Result<()> {
    db::execute_batch(
        "CREATE TABLE IF NOT EXISTS notes (seq INTEGER PRIMARY KEY, text TEXT NOT NULL);
         CREATE TABLE IF NOT EXISTS connections (seq INTEGER PRIMARY KEY, id INTEGER NOT NULL, what TEXT NOT NULL);
         CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY CHECK (id = 1), value INTEGER NOT NULL);
         INSERT OR IGNORE INTO counter (id, value) VALUES (1, 0);",
    )?;
    Ok(())
}

/// Schedules `action` with `args` (a JSON array) in `delay_ms`.
fn later(delay_ms: u64, action: String, args: Json) -> Result<u64> {
    schedule::after(delay_ms, &action, &args)
}

/// Schedules `action` with `args` every `interval_ms`.
fn every(interval_ms: u64, action: String, args: Json) -> Result<u64> {
    schedule::every(interval_ms, &action, &args)
}

/// Schedules `action` with `args` at `at_ms`.
fn later_at(at_ms: i64, action: String, args: Json) -> Result<u64> {
    schedule::at(at_ms, &action, &args)
}

/// Schedules `count` notes `{prefix}0`, `{prefix}1`, ... in `delay_ms`,
/// each taking `work_ms` to write.
fn later_many(delay_ms: u64, count: u32, prefix: String, work_ms: u64) -> Result<()> {
    for n in 0..count {
        schedule::after(delay_ms, "note_slowly", &(format!("{prefix}{n}"), work_ms))?;
    }
    Ok(())
}

/// Records a note after computing for `work_ms`.
fn note_slowly(text: String, work_ms: u64) -> Result<i64> {
    let begun = std::time::Instant::now();
    while begun.elapsed() < std::time::Duration::from_millis(work_ms) {
        std::hint::spin_loop();
    }
    note(text)
}

/// Schedules a note, then fails: the schedule is rolled back with the call.
fn later_then_fail(delay_ms: u64) -> Result<()> {
    schedule::after(delay_ms, "note", &("never",))?;
    Err(Error::new("planned", "failed after scheduling"))
}

/// A pending schedule as `pending` returns it: (id, action, args, at,
/// every_ms).
type Pending = (u64, String, String, i64, Option<u64>);

/// The pending schedules.
fn pending() -> Result<Vec<Pending>> {
    Ok(schedule::list()?
        .into_iter()
        .map(|s| (s.id, s.action, s.args, s.at, s.every_ms))
        .collect())
}

fn cancel(id: u64) -> Result<bool> {
    schedule::cancel(id)
}

/// Records a note; returns how many there are.
fn note(text: String) -> Result<i64> {
    db::execute("INSERT INTO notes (text) VALUES (?)", (text,))?;
    db::query_one("SELECT count(*) FROM notes", ())?.get(0)
}

/// Records a note, then fails: nothing is kept.
fn note_then_fail(text: String) -> Result<()> {
    note(text)?;
    Err(Error::new("planned", "failed after writing a note"))
}

/// Records a note, then panics (a trap): nothing is kept.
fn note_then_trap(text: String) -> Result<()> {
    note(text)?;
    panic!("planned trap after writing a note");
}

fn notes() -> Result<Vec<String>> {
    db::query("SELECT text FROM notes ORDER BY seq", ())?
        .iter()
        .map(|row| row.get(0))
        .collect()
}

fn bump() -> Result<i64> {
    db::query_one(
        "UPDATE counter SET value = value + 1 WHERE id = 1 RETURNING value",
        (),
    )?
    .get(0)
}

/// Calls `action` on another instance and returns its result.
fn call(actor: String, key: String, action: String, args: Json) -> Result<Json> {
    actors::call(&actor, &key, &action, &args)
}

/// Bumps this instance's counter, then calls another instance; the bump
/// stays only if the whole call succeeds.
fn bump_then_call(actor: String, key: String, action: String, args: Json) -> Result<Json> {
    bump()?;
    actors::call(&actor, &key, &action, &args)
}

/// Calls `action` on (`actor`, `key`) `n` times; returns the last result.
fn call_many(actor: String, key: String, action: String, n: u32) -> Result<Json> {
    let mut last = Json::Null;
    for _ in 0..n {
        last = actors::call(&actor, &key, &action, &())?;
    }
    Ok(last)
}

/// Appends an event to another instance's queue.
fn send(actor: String, key: String, event_type: String, payload: Json) -> Result<u64> {
    actors::send(&actor, &key, &event_type, &payload)
}

fn broadcast(name: String, payload: Json) -> Result<()> {
    events::broadcast(&name, &payload)
}

/// Broadcasts `n` events `tick` with payloads 0..n.
fn broadcast_many(n: u32) -> Result<()> {
    for i in 0..n {
        events::broadcast("tick", &i)?;
    }
    Ok(())
}

/// Broadcasts, then fails: nothing is sent.
fn broadcast_then_fail(name: String) -> Result<()> {
    events::broadcast(&name, &Json::Null)?;
    Err(Error::new("planned", "failed after broadcasting"))
}

/// What the connection hooks saw: (connection id, "connect <params>" or
/// "disconnect").
fn connections() -> Result<Vec<(u64, String)>> {
    db::query("SELECT id, what FROM connections ORDER BY seq", ())?
        .iter()
        .map(|row| Ok((row.get::<i64>(0)? as u64, row.get(1)?)))
        .collect()
}

fn on_connect(id: u64, params: Json) -> Result<()> {
    linger(&params);
    if params.get("refuse").is_some() {
        return Err(Error::new("refused", "the parameters asked to be refused"));
    }
    // With `{"only": name}`, admits only a client with that identity.
    if let Some(only) = params.get("only").and_then(Json::as_str) {
        match burrow_sdk::caller() {
            Caller::Client(Some(identity)) if identity.name == only => {}
            other => {
                return Err(Error::new(
                    "not-you",
                    format!(
                        "only {only} may connect, not {}",
                        serde_json::to_string(&other)?
                    ),
                ));
            }
        }
    }
    db::execute(
        "INSERT INTO connections (id, what) VALUES (?, ?)",
        (id as i64, format!("connect {params}")),
    )?;
    events::broadcast("hello", &id)
}

fn on_disconnect(id: u64) -> Result<()> {
    db::execute(
        "INSERT INTO connections (id, what) VALUES (?, 'disconnect')",
        (id as i64,),
    )?;
    events::broadcast("bye", &id)
}

/// Broadcasts `n` events `tick` with payloads `{"i": 0..n, "pad": ...}`
/// of about `pad` bytes each: enough of them fill a client's socket.
fn broadcast_many_padded(n: u32, pad: usize) -> Result<()> {
    let pad = "p".repeat(pad);
    for i in 0..n {
        events::broadcast("tick", &serde_json::json!({ "i": i, "pad": pad }))?;
    }
    Ok(())
}

/// Fails with the guest's own `code` and `message`.
fn fail_with(code: String, message: String) -> Result<()> {
    Err(Error::new(code, message))
}

/// With `{"linger_ms": n}`, the connect hook computes for n ms first (a
/// client can give up meanwhile).
fn linger(params: &Json) {
    let Some(ms) = params.get("linger_ms").and_then(Json::as_u64) else {
        return;
    };
    let begun = std::time::Instant::now();
    while begun.elapsed() < std::time::Duration::from_millis(ms) {
        std::hint::spin_loop();
    }
}

/// Who called, as JSON.
fn whoami() -> Result<Json> {
    Ok(serde_json::to_value(burrow_sdk::caller())?)
}

/// The internal action: notes `{text} by {caller}` and returns the caller.
fn guarded(text: String) -> Result<Json> {
    let caller = whoami()?;
    note(format!("{text} by {caller}"))?;
    Ok(caller)
}

burrow_sdk::actor! {
    migrate: migrate,
    connect: on_connect,
    disconnect: on_disconnect,
    actions: [
        later, later_at, every, later_many, later_then_fail, pending, cancel, note, note_slowly, note_then_fail,
        note_then_trap, notes, bump, call, bump_then_call, call_many, send, broadcast, broadcast_many,
        broadcast_then_fail, connections, fail_with, broadcast_many_padded, whoami, guarded,
    ],
    internal: [guarded],
}
