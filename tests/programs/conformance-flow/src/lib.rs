//! The conformance suite's workflow actor in Rust: one scenario per create
//! input. `tests/conformance/SPEC.md` says what each scenario does; the
//! Python and JavaScript versions do the same.

use std::time::{Duration, Instant};

use burrow_sdk::db::DbError;
use burrow_sdk::http::{self, HttpError};
use burrow_sdk::workflow::{self, Branch, Ctx, Loop, StepFailure, StepOptions};
use burrow_sdk::{Error, Json, Result, actors, db, events, queue, schedule, state};
use serde::{Deserialize, Serialize};
use serde_json::json;

const ME: &str = "conformance-flow-rust";

fn migrate() -> Result<()> {
    db::execute_batch(
        "CREATE TABLE IF NOT EXISTS applied (seq INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL);
         CREATE TABLE IF NOT EXISTS undone (seq INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL);",
    )?;
    Ok(())
}

fn apply(name: &str) -> Result<()> {
    db::execute("INSERT INTO applied (name) VALUES (?)", [name])?;
    Ok(())
}

fn names(table: &str) -> Result<Vec<String>> {
    db::query(&format!("SELECT name FROM {table} ORDER BY seq"), ())?
        .iter()
        .map(|row| row.get(0))
        .collect()
}

fn applied() -> Result<Vec<String>> {
    names("applied")
}

fn undone() -> Result<Vec<String>> {
    names("undone")
}

fn state() -> Result<Json> {
    Ok(state::get::<Json>()?.unwrap_or(Json::Null))
}

#[derive(Deserialize)]
#[serde(tag = "scenario", rename_all = "kebab-case")]
enum Scenario {
    Steps {
        count: u32,
        step_ms: Option<u64>,
        pause_ms: Option<u64>,
    },
    Outside,
    TryStep,
    Rollback,
    Loop {
        iterations: u32,
    },
    Sleep {
        ms: u64,
    },
    JoinRace,
    Events,
    Http {
        url: String,
    },
}

fn run(ctx: &mut Ctx, scenario: Option<Scenario>) -> workflow::Result<Json> {
    match scenario {
        None => Ok(Json::Null),
        Some(Scenario::Steps {
            count,
            step_ms,
            pause_ms,
        }) => steps(ctx, count, step_ms, pause_ms),
        Some(Scenario::Outside) => outside(ctx),
        Some(Scenario::TryStep) => try_step(ctx),
        Some(Scenario::Rollback) => rollback(ctx),
        Some(Scenario::Loop { iterations }) => repeat(ctx, iterations),
        Some(Scenario::Sleep { ms }) => sleep(ctx, ms),
        Some(Scenario::JoinRace) => join_race(ctx),
        Some(Scenario::Events) => queue_waits(ctx),
        Some(Scenario::Http { url }) => outgoing(ctx, &url),
    }
}

fn steps(
    ctx: &mut Ctx,
    count: u32,
    step_ms: Option<u64>,
    pause_ms: Option<u64>,
) -> workflow::Result<Json> {
    let version = ctx.version("v", 2)?;
    for i in 0..count {
        if i == count / 2
            && let Some(ms) = pause_ms
        {
            ctx.sleep("pause", Duration::from_millis(ms))?;
        }
        let name = format!("step-{i}");
        ctx.step(&name, || {
            apply(&name)?;
            if let Some(ms) = step_ms {
                let begun = Instant::now();
                while begun.elapsed() < Duration::from_millis(ms) {
                    std::hint::spin_loop();
                }
            }
            Ok(i)
        })?;
    }
    Ok(json!({ "count": count, "version": version }))
}

/// What one side effect outside a step raised.
fn attempt<T>(call: &str, result: Result<T>) -> Json {
    let (error, message) = match result {
        Ok(_) => ("allowed".to_owned(), String::new()),
        Err(e) if e.code == "not-in-step" => (e.code, e.message),
        Err(e) => (format!("{}: {}", e.code, e.message), e.message),
    };
    json!({ "call": call, "error": error, "message": message })
}

fn db_attempt<T>(call: &str, result: std::result::Result<T, DbError>) -> Json {
    match result {
        Err(DbError::NotInStep(message)) => {
            json!({ "call": call, "error": "not-in-step", "message": message })
        }
        other => attempt(call, other.map_err(Error::from)),
    }
}

fn outside(ctx: &mut Ctx) -> workflow::Result<Json> {
    let attempts = vec![
        db_attempt(
            "db.execute",
            db::execute("INSERT INTO applied (name) VALUES ('outside')", ()),
        ),
        db_attempt("db.execute-batch", db::execute_batch("DELETE FROM applied")),
        attempt("state.get", state::get::<Json>()),
        attempt("state.set", state::set(&json!({ "outside": true }))),
        attempt("queue.append", queue::append("x", &Json::Null)),
        attempt("schedule.after", schedule::after(10, "applied", &())),
        attempt("schedule.at", schedule::at(0, "applied", &())),
        attempt("schedule.every", schedule::every(1000, "applied", &())),
        attempt("schedule.pending", schedule::list()),
        attempt("schedule.cancel", schedule::cancel(1)),
        attempt(
            "actors.call",
            actors::call::<_, Json>(ME, "other", "applied", &()),
        ),
        attempt("actors.send", actors::send(ME, "other", "x", &Json::Null)),
        attempt("events.broadcast", events::broadcast("x", &Json::Null)),
    ];
    ctx.step("inside", || {
        state::set(&json!({ "inside": true }))?;
        apply("inside")
    })?;
    Ok(json!({ "outside": attempts }))
}

/// A GET from orchestration code (refused), then a POST from a step with
/// the step's key as `Idempotency-Key`.
fn outgoing(ctx: &mut Ctx, url: &str) -> workflow::Result<Json> {
    let outside = match http::get(url).send() {
        Ok(answer) => json!({ "error": "allowed", "message": "", "status": answer.status }),
        Err(HttpError::NotInStep(message)) => json!({ "error": "not-in-step", "message": message }),
        Err(e) => json!({ "error": e.to_string(), "message": e.to_string() }),
    };
    let key_outside = workflow::step_key();
    let charge: Json = ctx.step("charge", || {
        let key = workflow::step_key().unwrap_or_default();
        let answer = http::post(url)
            .idempotency_key(&key)
            .json(&json!({ "amount": 1200 }))?
            .send()?;
        if !answer.is_success() {
            return Err(Error::new("charge", format!("status {}", answer.status)));
        }
        Ok(json!({ "key": key, "status": answer.status, "body": answer.text() }))
    })?;
    Ok(json!({ "outside": outside, "key_outside": key_outside, "charge": charge }))
}

fn failure_json(f: &StepFailure) -> Json {
    let kind = format!("{:?}", f.kind).to_lowercase();
    json!({ "kind": kind, "code": f.code, "message": f.message, "attempts": f.attempts })
}

fn outcome<T: Serialize>(result: std::result::Result<T, StepFailure>) -> Json {
    match result {
        Ok(value) => json!({ "ok": value }),
        Err(failure) => json!({ "failed": failure_json(&failure) }),
    }
}

fn try_step(ctx: &mut Ctx) -> workflow::Result<Json> {
    let retries = StepOptions::default()
        .retries(2)
        .backoff(Duration::from_millis(10), Duration::from_millis(50));
    let declined = ctx.try_step_with("declined", retries, || -> Result<()> {
        apply("declined")?;
        Err(Error::new("declined", "card declined"))
    })?;
    let critical = ctx.try_step("critical", || -> Result<()> {
        Err(Error::new("fatal", "no retry").critical())
    })?;
    let slow = StepOptions::default()
        .retries(0)
        .timeout(Duration::from_millis(200));
    let timeout = ctx.try_step_with("slow", slow, || -> Result<()> {
        loop {
            std::hint::spin_loop();
        }
    })?;
    let fine = ctx.try_step("fine", || Ok("fine".to_owned()))?;
    let block = ctx.try_block(|ctx| {
        let a = ctx.step("block-a", || {
            apply("block-a")?;
            Ok(1)
        })?;
        ctx.step_with(
            "block-b",
            StepOptions::default().retries(0),
            || -> Result<()> { Err(Error::new("nope", "block failed")) },
        )?;
        ctx.step("block-c", || apply("block-c"))?;
        Ok(a)
    })?;
    ctx.step("after", || apply("after"))?;
    Ok(json!({
        "declined": outcome(declined),
        "critical": outcome(critical),
        "timeout": outcome(timeout),
        "fine": outcome(fine),
        "block": outcome(block),
    }))
}

fn undo(name: &'static str) -> impl FnOnce(String) -> Result<()> {
    move |output| {
        db::execute(
            "INSERT INTO undone (name) VALUES (?)",
            [format!("{name}:{output}")],
        )?;
        Ok(())
    }
}

fn rollback(ctx: &mut Ctx) -> workflow::Result<Json> {
    ctx.step_with_rollback("reserve", applying("reserve", "r1"), undo("reserve"))?;
    ctx.rollback_checkpoint("reserved");
    ctx.step_with_rollback("charge", applying("charge", "c1"), undo("charge"))?;
    ctx.step_with_rollback("ship", applying("ship", "s1"), undo("ship"))?;
    ctx.step("confirm", || -> Result<()> {
        Err(Error::new("out-of-stock", "nothing left").rollback())
    })?;
    Ok(Json::Null)
}

#[derive(Serialize, Deserialize)]
struct Count {
    i: u32,
    sum: u64,
}

fn repeat(ctx: &mut Ctx, iterations: u32) -> workflow::Result<Json> {
    let sum = ctx.repeat("count", Count { i: 0, sum: 0 }, |ctx, s| {
        if s.i == iterations {
            return Ok(Loop::Break(s.sum));
        }
        let value = ctx.step("add", || {
            apply(&format!("add-{}", s.i))?;
            Ok(s.i)
        })?;
        Ok(Loop::Continue(Count {
            i: s.i + 1,
            sum: s.sum + u64::from(value),
        }))
    })?;
    Ok(json!({ "sum": sum }))
}

fn sleep(ctx: &mut Ctx, ms: u64) -> workflow::Result<Json> {
    ctx.step("before", || apply("before"))?;
    let from = ctx.now()?;
    ctx.sleep("nap", Duration::from_millis(ms))?;
    let to = ctx.now()?;
    ctx.step("after", || apply("after"))?;
    Ok(json!({ "from": from, "to": to }))
}

fn applying(name: &'static str, output: &'static str) -> impl FnOnce() -> Result<String> {
    move || {
        apply(name)?;
        Ok(output.to_owned())
    }
}

fn join_race(ctx: &mut Ctx) -> workflow::Result<Json> {
    let both: Vec<Branch<'_, String>> = vec![
        Box::new(|ctx: &mut Ctx| {
            ctx.step("a1", applying("a1", "a"))?;
            ctx.sleep("a-nap", Duration::from_millis(100))?;
            ctx.step("a2", applying("a2", "a"))?;
            Ok("a".to_owned())
        }),
        Box::new(|ctx: &mut Ctx| {
            ctx.step("b1", applying("b1", "b"))?;
            Ok("b".to_owned())
        }),
    ];
    let joined = ctx.join("both", both)?;
    let first: Vec<Branch<'_, String>> = vec![
        Box::new(|ctx: &mut Ctx| {
            ctx.sleep("slow-nap", Duration::from_secs(60))?;
            ctx.step("slow", applying("slow", "slow"))
        }),
        Box::new(|ctx: &mut Ctx| ctx.step("fast", applying("fast", "fast"))),
    ];
    let (winner, value) = ctx.race("first", first)?;
    Ok(json!({ "join": joined, "race": { "winner": winner, "value": value } }))
}

fn payload(event: &queue::Event) -> workflow::Result<Json> {
    Ok(event.payload::<Json>()?)
}

fn queue_waits(ctx: &mut Ctx) -> workflow::Result<Json> {
    let go = match ctx.next_event("go", &["go"], None)? {
        Some(event) => payload(&event)?,
        None => Json::Null,
    };
    let pings = ctx
        .next_batch("pings", &["ping"], 10, None)?
        .iter()
        .map(payload)
        .collect::<workflow::Result<Vec<Json>>>()?;
    let none = match ctx.next_event("none", &["never"], Some(Duration::from_millis(50)))? {
        Some(event) => payload(&event)?,
        None => Json::Null,
    };
    Ok(json!({ "go": go, "pings": pings, "none": none }))
}

burrow_sdk::actor! {
    migrate: migrate,
    workflow: run,
    actions: [applied, undone, state],
}
