//! The conformance suite's plain actor in Rust: the counter, argument
//! checks, state, database errors, the queue under every policy, schedules,
//! broadcasts and calls. `tests/conformance/SPEC.md` says what each action
//! does; the Python and JavaScript versions do the same.

use burrow_sdk::db::DbError;
use burrow_sdk::queue::{self, Event, Options, Policy};
use burrow_sdk::{Caller, Error, Json, Result, actors, db, events, http, schedule, state};
use serde::{Deserialize, Serialize};
use serde_json::json;

fn migrate() -> Result<()> {
    db::execute_batch(
        "CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY CHECK (id = 1), value INTEGER NOT NULL);
         INSERT OR IGNORE INTO counter (id, value) VALUES (1, 0);
         CREATE TABLE IF NOT EXISTS config (name TEXT PRIMARY KEY, value TEXT NOT NULL);
         CREATE TABLE IF NOT EXISTS processed (
             seq INTEGER PRIMARY KEY AUTOINCREMENT,
             event INTEGER NOT NULL,
             type TEXT NOT NULL,
             label TEXT NOT NULL,
             priority INTEGER NOT NULL,
             grp TEXT,
             attempt INTEGER NOT NULL
         );
         CREATE TABLE IF NOT EXISTS notes (seq INTEGER PRIMARY KEY AUTOINCREMENT, note TEXT NOT NULL);
         CREATE TABLE IF NOT EXISTS members (connection INTEGER PRIMARY KEY, name TEXT NOT NULL);",
    )?;
    Ok(())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Create {
    policy: String,
}

fn create(input: Option<Create>) -> Result<()> {
    let Some(Create { policy }) = input else {
        return Ok(());
    };
    if !["fifo", "lifo", "random", "custom"].contains(&policy.as_str()) {
        return Err(Error::new(
            "invalid-input",
            format!("unknown policy {policy}"),
        ));
    }
    db::execute(
        "INSERT INTO config (name, value) VALUES ('policy', ?)",
        [policy],
    )?;
    Ok(())
}

fn wake() -> Result<()> {
    db::execute("DELETE FROM members", ())?;
    Ok(())
}

fn connect(connection: u64, params: Json) -> Result<()> {
    let name = params
        .get("name")
        .and_then(Json::as_str)
        .filter(|n| !n.is_empty() && n.len() <= 64)
        .ok_or_else(|| Error::new("name-required", "connect with {\"name\": \"ada\"}"))?;
    db::execute(
        "INSERT INTO members (connection, name) VALUES (?, ?)",
        (connection as i64, name),
    )?;
    events::broadcast("joined", &json!({ "name": name }))
}

fn disconnect(connection: u64) -> Result<()> {
    let rows = db::query(
        "DELETE FROM members WHERE connection = ? RETURNING name",
        [connection as i64],
    )?;
    if let Some(row) = rows.first() {
        let name: String = row.get(0)?;
        events::broadcast("left", &json!({ "name": name }))?;
    }
    Ok(())
}

/// The policy recorded by `create`: the host asks once, after the hooks.
fn conformance_policy() -> Policy {
    let recorded = db::query("SELECT value FROM config WHERE name = 'policy'", ())
        .ok()
        .and_then(|rows| rows.first().and_then(|row| row.get::<String>(0).ok()));
    match recorded.as_deref() {
        Some("lifo") => Policy::lifo(),
        Some("random") => Policy::random(),
        Some("custom") => Policy::custom(),
        _ => Policy::fifo(),
    }
}

#[derive(Deserialize)]
struct Payload {
    label: String,
    #[serde(default)]
    fail: i64,
}

fn process(event: Event) -> Result<Json> {
    let payload: Payload = event.payload()?;
    db::execute(
        "INSERT INTO processed (event, type, label, priority, grp, attempt) VALUES (?, ?, ?, ?, ?, ?)",
        (
            event.id as i64,
            event.event_type.as_str(),
            payload.label.as_str(),
            event.priority,
            event.group.clone(),
            event.attempt,
        ),
    )?;
    if i64::from(event.attempt) <= payload.fail {
        return Err(Error::new(
            "planned-failure",
            format!("event {} failed attempt {}", payload.label, event.attempt),
        ));
    }
    Ok(json!({ "label": payload.label, "attempt": event.attempt }))
}

/// The pending event with the smallest label, ties by id.
fn select(pending: &[Event]) -> Vec<u64> {
    let label = |e: &Event| e.payload::<Payload>().map(|p| p.label).unwrap_or_default();
    pending
        .iter()
        .min_by(|a, b| label(a).cmp(&label(b)).then(a.id.cmp(&b.id)))
        .map(|e| e.id)
        .into_iter()
        .collect()
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

fn add_then_fail(amount: i64) -> Result<i64> {
    increment(amount)?;
    Err(Error::new(
        "planned",
        format!("added {amount}, then failed"),
    ))
}

fn add_then_crash(amount: i64) -> Result<i64> {
    increment(amount)?;
    panic!("added {amount}, then crashed");
}

fn echo(i: i64, f: f64, s: String, b: bool, l: Vec<i64>, o: Json) -> Result<Json> {
    Ok(json!([i, f, s, b, l, o]))
}

fn bump(name: String) -> Result<i64> {
    state::update(|counts: &mut serde_json::Map<String, Json>| {
        let next = counts.get(&name).and_then(Json::as_i64).unwrap_or(0) + 1;
        counts.insert(name, json!(next));
        next
    })
}

fn state() -> Result<Json> {
    Ok(state::get::<Json>()?.unwrap_or(Json::Null))
}

fn rows() -> Result<Json> {
    let rows = db::query(
        "SELECT 1 AS one, 'two' AS two, NULL AS three, 2.5 AS four, x'00ff' AS five",
        (),
    )?;
    let row = rows
        .first()
        .ok_or_else(|| Error::new("no-rows", "no row"))?;
    Ok(json!([
        row.get::<i64>(0)?,
        row.get::<String>("two")?,
        row.get::<Option<i64>>("three")?,
        row.get::<f64>("four")?,
        row.get::<Vec<u8>>("five")?,
        row.get::<i64>("one")?,
    ]))
}

fn db_error(kind: String) -> Result<String> {
    let result = match kind.as_str() {
        "invalid-sql" => db::query("SELEC 1", ()),
        "constraint" => db::query("INSERT INTO counter (id, value) VALUES (1, 0)", ()),
        "denied" => db::query("SELECT * FROM _burrow_state", ()),
        "invalid-parameters" => db::query("SELECT ?", ()),
        other => return Err(Error::new("invalid-kind", format!("no kind {other}"))),
    };
    Ok(match result {
        Err(DbError::InvalidSql(_)) => "invalid-sql".into(),
        Err(DbError::Constraint(_)) => "constraint".into(),
        Err(DbError::Denied(_)) => "denied".into(),
        Err(DbError::InvalidParameters(_)) => "invalid-parameters".into(),
        Err(other) => format!("other: {other:?}"),
        Ok(_) => "other: no error".into(),
    })
}

fn db_uncaught() -> Result<()> {
    db::execute("SELEC 1", ())?;
    Ok(())
}

#[derive(Deserialize)]
struct NewEvent {
    #[serde(rename = "type")]
    event_type: String,
    payload: Json,
    #[serde(default)]
    priority: i32,
    #[serde(default)]
    group: Option<String>,
}

fn enqueue(event_type: String, payload: Json, priority: i32, group: Option<String>) -> Result<u64> {
    queue::append_with(&event_type, &payload, Options { priority, group })
}

fn enqueue_many(events: Vec<NewEvent>) -> Result<Vec<u64>> {
    events
        .into_iter()
        .map(|e| {
            let options = Options {
                priority: e.priority,
                group: e.group,
            };
            queue::append_with(&e.event_type, &e.payload, options)
        })
        .collect()
}

#[derive(Serialize)]
struct Processed {
    label: String,
    attempt: i64,
    priority: i64,
    group: Option<String>,
}

fn processed() -> Result<Vec<Processed>> {
    db::query(
        "SELECT label, attempt, priority, grp FROM processed ORDER BY seq",
        (),
    )?
    .iter()
    .map(|row| {
        Ok(Processed {
            label: row.get(0)?,
            attempt: row.get(1)?,
            priority: row.get(2)?,
            group: row.get(3)?,
        })
    })
    .collect()
}

fn schedule_note(note: String, delay_ms: u64) -> Result<u64> {
    schedule::after(delay_ms, "note", &(note,))
}

fn note(note: String) -> Result<()> {
    db::execute("INSERT INTO notes (note) VALUES (?)", [note])?;
    Ok(())
}

fn notes() -> Result<Vec<String>> {
    db::query("SELECT note FROM notes ORDER BY seq", ())?
        .iter()
        .map(|row| row.get(0))
        .collect()
}

fn schedules() -> Result<Vec<Json>> {
    schedule::list()?
        .into_iter()
        .map(|s| {
            let args: Json = serde_json::from_str(&s.args)?;
            Ok(json!({ "id": s.id, "action": s.action, "args": args }))
        })
        .collect()
}

fn cancel(id: u64) -> Result<bool> {
    schedule::cancel(id)
}

fn say(text: String) -> Result<()> {
    events::broadcast("said", &json!({ "text": text }))
}

fn say_then_fail(text: String) -> Result<()> {
    say(text)?;
    Err(Error::new("planned", "said, then failed"))
}

fn members() -> Result<Vec<String>> {
    db::query("SELECT name FROM members ORDER BY name", ())?
        .iter()
        .map(|row| row.get(0))
        .collect()
}

fn relay(actor: String, key: String, action: String, args: Vec<Json>) -> Result<Json> {
    actors::call(&actor, &key, &action, &args)
}

fn relay_send(actor: String, key: String, event_type: String, payload: Json) -> Result<u64> {
    actors::send(&actor, &key, &event_type, &payload)
}

fn whoami() -> Result<Json> {
    Ok(serde_json::to_value(burrow_sdk::caller())?)
}

fn secret(note: String) -> Result<Json> {
    let caller = burrow_sdk::caller();
    let kind = match &caller {
        Caller::Client(_) => "client",
        Caller::Actor { .. } => "actor",
        Caller::Schedule => "schedule",
        Caller::Host => "host",
    };
    db::execute(
        "INSERT INTO notes (note) VALUES (?)",
        [format!("{note} from {kind}")],
    )?;
    Ok(serde_json::to_value(caller)?)
}

fn schedule_secret(note: String, delay_ms: u64) -> Result<u64> {
    schedule::after(delay_ms, "secret", &(note,))
}

/// A GET of `url`: its status and body, or the kind of the SDK's error
/// (matched by its type) and its text.
fn http_get(url: String) -> Result<Json> {
    use burrow_sdk::http::HttpError;
    Ok(match http::get(&url).send() {
        Ok(answer) => json!({ "status": answer.status, "body": answer.text() }),
        Err(e) => {
            let (kind, message) = match &e {
                HttpError::NotInStep(m) => ("not-in-step", m.clone()),
                HttpError::NotAllowed(m) => ("not-allowed", m.clone()),
                HttpError::Denied(_) => ("denied", e.to_string()),
                HttpError::Invalid(_) => ("invalid", e.to_string()),
                HttpError::Failed(_) => ("failed", e.to_string()),
            };
            json!({ "error": kind, "message": message })
        }
    })
}

burrow_sdk::actor! {
    migrate: migrate,
    create: create,
    wake: wake,
    queue: { policy: conformance_policy(), process: process, select: select },
    connect: connect,
    disconnect: disconnect,
    actions: [
        increment, get, add_then_fail, add_then_crash, echo, bump, state, rows,
        db_error, db_uncaught, enqueue, enqueue_many, processed, schedule_note,
        note, notes, schedules, cancel, say, say_then_fail, members, relay, relay_send,
        whoami, secret, schedule_secret, http_get,
    ],
    internal(from_actors = false): [secret],
}

/// The HTTP handler: counts one, then answers `201` with the count and
/// what came; `/fail` counts, then panics (the count is rolled back).
fn hook(request: http::Incoming) -> http::Reply {
    let count = increment(1).expect("the counter table exists");
    if request.path == "/fail" {
        panic!("counted, then failed");
    }
    http::Reply::json(
        201,
        &json!({
            "count": count,
            "method": request.method,
            "path": request.path,
            "body": request.text(),
            "signature": request.header("x-signature"),
        }),
    )
    .header("x-conformance", "yes")
}

burrow_sdk::http_handler!(hook);
