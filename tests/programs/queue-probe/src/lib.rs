//! A queue actor for the host's tests. Its policy comes from the create
//! input; what `process` does depends on the event's type.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use burrow_sdk::queue::{self, Event, Options, Policy};
use burrow_sdk::{Error, Json, Result, actors, db, state};
use serde::{Deserialize, Serialize};

#[derive(Default, Serialize, Deserialize)]
struct Config {
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    concurrency: Option<u32>,
    #[serde(default)]
    unlimited: bool,
    /// For the custom selector: the event type it prefers.
    #[serde(default)]
    prefer: Option<String>,
    /// For the custom selector: return an id that is not pending.
    #[serde(default)]
    bogus_select: bool,
    /// For the custom selector: try every write first (each must be
    /// refused; `select_errors` tells what the guest heard).
    #[serde(default)]
    select_writes: bool,
    /// How long the sleep hook takes (a worker runs it when its pump ends).
    #[serde(default)]
    sleep_hook_ms: Option<u64>,
    /// The key of a flag instance: the wake hook takes the flag and fails
    /// if it was armed, so that every arming fails one wake.
    #[serde(default)]
    fail_wake_once: Option<String>,
}

thread_local! {
    static SELECT_ERRORS: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn try_writes_from_the_selector() {
    fn heard<T, E: std::fmt::Display>(r: std::result::Result<T, E>) -> String {
        match r {
            Ok(_) => "allowed".to_owned(),
            Err(e) => e.to_string(),
        }
    }
    let mut heard = vec![
        heard(db::execute("INSERT INTO healed VALUES (1)", ())),
        heard(db::execute_batch("DELETE FROM log")),
        heard(state::set(&Config::default())),
        heard(queue::append("from-selector", &Json::Null)),
    ];
    SELECT_ERRORS.with(|errors| errors.borrow_mut().append(&mut heard));
}

/// What the selector heard when it tried to write.
fn select_errors() -> Result<Vec<String>> {
    Ok(SELECT_ERRORS.with(|errors| errors.borrow().clone()))
}

fn config() -> Config {
    state::get_or_default().unwrap_or_default()
}

fn policy() -> Policy {
    let config = config();
    let policy = match config.mode.as_deref() {
        Some("lifo") => Policy::lifo(),
        Some("random") => Policy::random(),
        Some("custom") => Policy::custom(),
        _ => Policy::fifo(),
    };
    if config.unlimited {
        policy.unlimited()
    } else {
        policy.concurrency(config.concurrency.unwrap_or(1))
    }
}

fn migrate() -> Result<()> {
    db::execute_batch(
        "CREATE TABLE IF NOT EXISTS log (
             seq INTEGER PRIMARY KEY AUTOINCREMENT,
             event_id INTEGER NOT NULL,
             type TEXT NOT NULL,
             priority INTEGER NOT NULL,
             grp TEXT,
             attempt INTEGER NOT NULL,
             started_ms INTEGER,
             ended_ms INTEGER
         );
         CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY CHECK (id = 1), value INTEGER NOT NULL);
         INSERT OR IGNORE INTO counter VALUES (1, 0);
         CREATE TABLE IF NOT EXISTS healed (id INTEGER PRIMARY KEY CHECK (id = 1));
         CREATE TABLE IF NOT EXISTS armed (id INTEGER PRIMARY KEY CHECK (id = 1));",
    )?;
    Ok(())
}

fn create(config: Option<Config>) -> Result<()> {
    state::set(&config.unwrap_or_default())
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[derive(Deserialize, Default)]
struct Payload {
    #[serde(default)]
    until: Option<u32>,
    #[serde(default)]
    ms: Option<u64>,
    #[serde(default)]
    events: Vec<NewEvent>,
    /// Fail until the `heal` action ran.
    #[serde(default)]
    until_healed: bool,
    /// The instance a `take` event calls.
    #[serde(default)]
    flag: Option<String>,
}

fn record(event: &Event, started_ms: Option<i64>) -> Result<()> {
    db::execute(
        "INSERT INTO log (event_id, type, priority, grp, attempt, started_ms, ended_ms)
         VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            event.id as i64,
            event.event_type.as_str(),
            event.priority as i64,
            event.group.clone(),
            event.attempt as i64,
            started_ms,
            started_ms.map(|_| now_ms()),
        ),
    )?;
    Ok(())
}

fn process(event: Event) -> Result<Json> {
    let payload: Payload = event.payload().unwrap_or_default();
    let failing = if payload.until_healed {
        db::query("SELECT 1 FROM healed", ())?.rows.is_empty()
    } else {
        payload.until.is_none_or(|until| event.attempt < until)
    };
    match event.event_type.as_str() {
        "fail_loudly" => return fail_loudly(&event),
        "fail" if failing => {
            return Err(Error::new(
                "planned",
                format!("attempt {} fails", event.attempt),
            ));
        }
        "trap" if failing => panic!("attempt {} traps", event.attempt),
        "spin" => loop {
            std::hint::black_box(0);
        },
        "slow" => {
            let started = now_ms();
            std::thread::sleep(Duration::from_millis(payload.ms.unwrap_or(200)));
            record(&event, Some(started))?;
            return Ok(Json::from(event.id));
        }
        "incr" => {
            // Read, wait, write: concurrent calls would lose updates if the
            // host let a stale read commit.
            let value: i64 = db::query_one("SELECT value FROM counter WHERE id = 1", ())?.get(0)?;
            std::thread::sleep(Duration::from_millis(payload.ms.unwrap_or(20)));
            db::execute("UPDATE counter SET value = ? WHERE id = 1", [value + 1])?;
        }
        "append" => {
            enqueue(payload.events)?;
        }
        "take" => {
            let flag = payload.flag.unwrap_or_default();
            let _: bool = actors::call("queue-probe", &flag, "take", &())?;
        }
        // Attacks: each must fail this attempt only, leaving committed data
        // and other instances alone.
        "bomb" => {
            let mut hoard: Vec<Vec<u8>> = Vec::new();
            loop {
                hoard.push(vec![1u8; 1 << 20]);
                std::hint::black_box(&hoard);
            }
        }
        "recurse" => {
            fn down(n: u64) -> u64 {
                if n == 0 {
                    0
                } else {
                    1 + std::hint::black_box(down(n - 1))
                }
            }
            return Ok(Json::from(down(u64::MAX)));
        }
        "big" => {
            let bytes = payload.ms.unwrap_or(1 << 20) as usize;
            return Ok(Json::from("x".repeat(bytes)));
        }
        "write_then_panic" => {
            record(&event, None)?;
            db::execute("UPDATE counter SET value = value + 1000 WHERE id = 1", ())?;
            panic!("after writing");
        }
        "write_then_spin" => {
            record(&event, None)?;
            loop {
                std::hint::black_box(0);
            }
        }
        _ => {}
    }
    record(&event, None)?;
    Ok(serde_json::json!({ "processed": event.id, "attempt": event.attempt }))
}

/// Fails with the event's payload (a JSON string) as the message, every
/// attempt.
fn fail_loudly(event: &Event) -> Result<Json> {
    let message: String = event.payload()?;
    Err(Error::new("loud", message))
}

fn select(pending: &[Event]) -> Vec<u64> {
    let config = config();
    if config.bogus_select {
        return vec![999_999];
    }
    if config.select_writes {
        try_writes_from_the_selector();
    }
    let preferred = config
        .prefer
        .as_deref()
        .and_then(|t| pending.iter().find(|e| e.event_type == t));
    preferred
        .or(pending.first())
        .map(|e| e.id)
        .into_iter()
        .collect()
}

#[derive(Serialize, Deserialize)]
struct NewEvent {
    #[serde(rename = "type")]
    event_type: String,
    #[serde(default)]
    payload: Json,
    #[serde(default)]
    priority: i32,
    #[serde(default)]
    group: Option<String>,
}

/// Appends every event in one transaction; returns their ids.
fn enqueue(events: Vec<NewEvent>) -> Result<Vec<u64>> {
    events
        .into_iter()
        .map(|e| {
            queue::append_with(
                &e.event_type,
                &e.payload,
                Options {
                    priority: e.priority,
                    group: e.group,
                },
            )
        })
        .collect()
}

/// Appends one event, then fails: the append must roll back.
fn enqueue_then_fail(event_type: String) -> Result<()> {
    queue::append(&event_type, &Json::Null)?;
    Err(Error::new("planned", "after the append"))
}

#[derive(Serialize)]
struct Entry {
    event_id: i64,
    #[serde(rename = "type")]
    event_type: String,
    priority: i64,
    group: Option<String>,
    attempt: i64,
    started_ms: Option<i64>,
    ended_ms: Option<i64>,
}

/// What `process` recorded, in order.
fn log() -> Result<Vec<Entry>> {
    db::query(
        "SELECT event_id, type, priority, grp, attempt, started_ms, ended_ms FROM log ORDER BY seq",
        (),
    )?
    .iter()
    .map(|r| {
        Ok(Entry {
            event_id: r.get(0)?,
            event_type: r.get(1)?,
            priority: r.get(2)?,
            group: r.get(3)?,
            attempt: r.get(4)?,
            started_ms: r.get(5)?,
            ended_ms: r.get(6)?,
        })
    })
    .collect()
}

/// Lets events with `until_healed` succeed from now on.
fn heal() -> Result<()> {
    db::execute("INSERT OR IGNORE INTO healed VALUES (1)", ())?;
    Ok(())
}

fn counter() -> Result<i64> {
    db::query_one("SELECT value FROM counter WHERE id = 1", ())?.get(0)
}

/// Runs guest SQL in an action; returns `null`, or the error's text: lets
/// SQL attacks meet the host's queue statements.
fn batch(text: String) -> Result<Json> {
    match db::execute_batch(&text) {
        Ok(()) => Ok(Json::Null),
        Err(e) => Ok(Json::String(format!("{e:?}"))),
    }
}

/// Counts the rows of a guest table.
fn rows(table: String) -> Result<i64> {
    db::query_one(&format!("SELECT count(*) FROM \"{table}\""), ())?.get(0)
}

/// The wake hook: fails once for every arming of the `fail_wake_once`
/// flag.
fn wake() -> Result<()> {
    if let Some(flag) = config().fail_wake_once {
        let armed: bool = actors::call("queue-probe", &flag, "take", &())?;
        if armed {
            return Err(Error::new("planned", "the wake hook fails once"));
        }
    }
    Ok(())
}

/// Arms this instance as a flag.
fn arm() -> Result<()> {
    db::execute("INSERT OR IGNORE INTO armed VALUES (1)", ())?;
    Ok(())
}

/// Whether this flag was armed; disarms it.
fn take() -> Result<bool> {
    Ok(db::execute("DELETE FROM armed", ())? > 0)
}

/// The sleep hook: takes `sleep_hook_ms` if configured.
fn slow_sleep() -> Result<()> {
    if let Some(ms) = config().sleep_hook_ms {
        std::thread::sleep(Duration::from_millis(ms));
    }
    Ok(())
}

burrow_sdk::actor! {
    migrate: migrate,
    create: create,
    wake: wake,
    sleep: slow_sleep,
    queue: { policy: policy(), process: process, select: select },
    actions: [enqueue, enqueue_then_fail, arm, take, log, counter, heal, select_errors, batch, rows],
}
