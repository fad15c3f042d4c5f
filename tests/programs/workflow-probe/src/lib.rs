//! A workflow actor for the host's tests. What its workflow does comes from
//! the create input.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use burrow_sdk::workflow::{self, Ctx, Loop, StepFailure, StepOptions};
use burrow_sdk::{Error, Json, Result, actors, db, events, queue, schedule, state};
use serde::Deserialize;
use serde_json::json;

#[derive(Default, Deserialize)]
#[serde(default)]
struct Config {
    /// Steps that each add 1 to the counter.
    steps: u32,
    /// How long each of those steps takes.
    step_ms: u64,
    /// A durable sleep after the first half of the steps.
    sleep_ms: Option<u64>,
    /// Step `flaky` fails on attempts before this one.
    fail_until: Option<u32>,
    /// Retries of step `flaky`.
    retries: u32,
    /// Step `fragile` fails with a critical error.
    critical: bool,
    /// Step `spin` never returns (its timeout is 300 ms).
    spin_step: bool,
    /// Step `patient` never returns and asks for this timeout (ms).
    patient_step_ms: Option<u64>,
    /// Step `panics` panics on its first attempt.
    trap_step: bool,
    /// Try every side effect outside a step; the output lists the errors.
    probe_outside: bool,
    /// Take another step name on a later run of the same wasm instance.
    diverge: bool,
    /// Orchestration code that never returns.
    spin_orchestration: bool,
    /// Orchestration code that reads the clock (inside a step is fine).
    clock_in_orchestration: bool,
    /// Orchestration code that reads the monotonic clock around a step
    /// that takes 20 ms.
    monotonic_in_orchestration: bool,
    /// A `try_block` around two steps, the second failing for good.
    try_block: bool,
    /// A loop of this many iterations, each one step.
    loop_iterations: Option<u32>,
    /// The seed's payment loop: batches of up to this many `payment`
    /// events, until a wait of `batch_timeout_ms` finds none.
    payment_batch: Option<u32>,
    batch_timeout_ms: u64,
    /// A race between an `approve` event and a sleep of this many ms.
    race_ms: Option<u64>,
    /// A join of a branch that sleeps this many ms and one that does not.
    join_ms: Option<u64>,
    /// Reserve (with a rollback handler) after a checkpoint, then fail.
    rollback: bool,
    /// How many reservations (1 by default); each undo takes `step_ms`.
    reservations: Option<u32>,
    /// The failure after the reservations is a rollback request inside a
    /// `try_block` (which does not catch it), not a critical error.
    request_rollback: bool,
    /// Record a code version.
    version: Option<u32>,
    /// A step whose output has this many bytes (tried), then a workflow
    /// output as large.
    big_output: Option<usize>,
    /// A step `old` that a later run of the same wasm instance no longer
    /// has (it says `removed` instead), then a version check.
    remove_step: bool,
    /// Step `before-call`, then step `call`, which calls action `nap` of
    /// `workflow-probe/callee` (it sleeps this many ms), then step
    /// `after-call`.
    call_nap_ms: Option<u64>,
}

#[derive(Deserialize)]
struct Payment {
    amount: i64,
}

/// Runs of the workflow in this wasm instance.
static RUNS: AtomicU32 = AtomicU32::new(0);

fn migrate() -> Result<()> {
    db::execute_batch(
        "CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY CHECK (id = 1), value INTEGER NOT NULL);
         INSERT OR IGNORE INTO counter VALUES (1, 0);
         CREATE TABLE IF NOT EXISTS done (step TEXT PRIMARY KEY, attempt INTEGER NOT NULL);",
    )?;
    Ok(())
}

fn add_one(step: &str) -> Result<i64> {
    db::execute("UPDATE counter SET value = value + 1 WHERE id = 1", ())?;
    db::execute(
        "INSERT INTO done (step, attempt) VALUES (?, ?)",
        (step, workflow::attempt() as i64),
    )?;
    count()
}

fn failure_json(f: &StepFailure) -> Json {
    json!({
        "kind": format!("{:?}", f.kind),
        "code": f.code,
        "message": f.message,
        "attempts": f.attempts,
    })
}

fn quick() -> StepOptions {
    StepOptions::default().backoff(Duration::from_millis(20), Duration::from_millis(100))
}

fn run(ctx: &mut Ctx, config: Option<Config>) -> workflow::Result<Json> {
    let config = config.unwrap_or_default();
    let run = RUNS.fetch_add(1, Ordering::Relaxed) + 1;
    let mut output = serde_json::Map::new();
    if config.probe_outside {
        let heard: Vec<String> = vec![
            db::execute("UPDATE counter SET value = 100", ())
                .err()
                .map(|e| e.to_string()),
            db::query("SELECT value FROM counter", ())
                .err()
                .map(|e| e.to_string()),
            db::execute_batch("DELETE FROM done")
                .err()
                .map(|e| e.to_string()),
            state::get::<Json>().err().map(|e| e.to_string()),
            state::set(&1).err().map(|e| e.to_string()),
            queue::append("x", &Json::Null).err().map(|e| e.to_string()),
            schedule::after(10, "count", &())
                .err()
                .map(|e| e.to_string()),
            schedule::list().err().map(|e| e.to_string()),
            schedule::cancel(1).err().map(|e| e.to_string()),
            actors::call::<_, Json>("workflow-probe", "other", "count", &())
                .err()
                .map(|e| e.to_string()),
            actors::send("workflow-probe", "other", "x", &Json::Null)
                .err()
                .map(|e| e.to_string()),
            events::broadcast("x", &Json::Null)
                .err()
                .map(|e| e.to_string()),
        ]
        .into_iter()
        .map(|e| e.unwrap_or_else(|| "allowed".into()))
        .collect();
        output.insert("outside".into(), json!(heard));
        // Inside a step the same calls work.
        ctx.step("inside", || {
            db::query("SELECT value FROM counter", ())?;
            state::set(&json!({"inside": true}))?;
            Ok(())
        })?;
    }
    if config.clock_in_orchestration {
        let inside = ctx.step("clock", || {
            Ok(std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64))
        })?;
        output.insert("clock_in_step".into(), json!(inside > 0));
        let _ = std::hint::black_box(std::time::SystemTime::now());
    }
    if config.monotonic_in_orchestration {
        let before = std::time::Instant::now();
        let inside = ctx.step("timed", || {
            let begun = std::time::Instant::now();
            std::thread::sleep(std::time::Duration::from_millis(20));
            Ok(begun.elapsed().as_millis() as u64)
        })?;
        let outside = before.elapsed().as_millis() as u64;
        output.insert("step_ms".into(), json!(inside));
        output.insert("orchestration_ms".into(), json!(outside));
    }
    if config.spin_orchestration {
        loop {
            std::hint::black_box(0);
        }
    }
    if let Some(n) = config.big_output {
        let big = ctx.try_step("big", || Ok("x".repeat(n)))?;
        let failure = big.map(|s| s.len()).map_err(|f| failure_json(&f));
        return Ok(json!({ "step": format!("{failure:?}"), "output": "x".repeat(n) }));
    }
    if config.remove_step {
        if run == 1 {
            ctx.step("old", || add_one("old"))?;
        } else {
            ctx.removed("old")?;
        }
        ctx.sleep("nap", Duration::from_millis(50))?;
        // Recorded by the second run: the first run stopped before it.
        output.insert("version".into(), json!(ctx.version("after-nap", 7)?));
    }
    if config.diverge {
        let name = if run == 1 { "first" } else { "second" };
        ctx.step(name, || add_one(name))?;
        ctx.sleep("nap", Duration::from_millis(50))?;
    }
    let half = config.steps / 2;
    for i in 0..config.steps {
        if i == half
            && let Some(ms) = config.sleep_ms
        {
            let before = ctx.now()?;
            ctx.sleep("nap", Duration::from_millis(ms))?;
            output.insert("slept_from".into(), json!(before));
        }
        let name = format!("add-{i}");
        ctx.step(&name, || {
            std::thread::sleep(Duration::from_millis(config.step_ms));
            add_one(&name)
        })?;
    }
    if let Some(until) = config.fail_until {
        let options = quick().retries(config.retries);
        let flaky = ctx.try_step_with("flaky", options, || {
            let attempt = workflow::attempt();
            // Written and rolled back on a failed attempt.
            db::execute("UPDATE counter SET value = value + 1000 WHERE id = 1", ())?;
            if attempt < until {
                return Err(Error::new("flaky", format!("attempt {attempt} fails")));
            }
            Ok(attempt)
        })?;
        output.insert(
            "flaky".into(),
            match flaky {
                Ok(attempt) => json!({"ok": attempt}),
                Err(f) => failure_json(&f),
            },
        );
    }
    if config.critical {
        let fragile = ctx.try_step_with("fragile", quick(), || -> Result<()> {
            Err(Error::new("broken", "cannot go on").critical())
        })?;
        output.insert("fragile".into(), failure_json(&fragile.unwrap_err()));
    }
    if config.spin_step {
        let options = quick().timeout(Duration::from_millis(300));
        let spin = ctx.try_step_with("spin", options, || -> Result<()> {
            loop {
                std::hint::black_box(0);
            }
        })?;
        output.insert("spin".into(), failure_json(&spin.unwrap_err()));
    }
    if let Some(ms) = config.patient_step_ms {
        patient_step(ctx, ms)?;
    }
    if config.trap_step {
        let got = ctx.step_with("panics", quick(), || {
            if workflow::attempt() == 1 {
                panic!("the first attempt panics");
            }
            add_one("panics")
        })?;
        output.insert("panics".into(), json!(got));
    }
    if config.try_block {
        let block = ctx.try_block(|ctx| {
            ctx.step("block-a", || add_one("block-a"))?;
            ctx.step_with("block-b", quick().retries(0), || -> Result<()> {
                Err(Error::new("nope", "block-b fails"))
            })?;
            Ok(())
        })?;
        output.insert("block".into(), failure_json(&block.unwrap_err()));
    }
    if let Some(n) = config.loop_iterations {
        let end = ctx.repeat("count-loop", 0u32, |ctx, i| {
            let name = format!("loop-{i}");
            ctx.step("add", || add_one(&name))?;
            Ok(if i + 1 == n {
                Loop::Break(i + 1)
            } else {
                Loop::Continue(i + 1)
            })
        })?;
        output.insert("loop".into(), json!(end));
    }
    if let Some(batch) = config.payment_batch {
        let timeout = Some(Duration::from_millis(config.batch_timeout_ms));
        let applied = ctx.repeat("payment-loop", 0u64, |ctx, applied| {
            let payments = ctx.next_batch("wait-payment", &["payment"], batch, timeout)?;
            if payments.is_empty() {
                return Ok(Loop::Break(applied));
            }
            ctx.rollback_checkpoint("apply-payment-checkpoint");
            let amounts: Vec<i64> = payments
                .iter()
                .map(|p| p.payload::<Payment>().map(|p| p.amount))
                .collect::<Result<_>>()?;
            ctx.step("apply-side-effects", || {
                std::thread::sleep(Duration::from_millis(config.step_ms));
                for (payment, amount) in payments.iter().zip(&amounts) {
                    db::execute(
                        "UPDATE counter SET value = value + ? WHERE id = 1",
                        [*amount],
                    )?;
                    db::execute(
                        "INSERT INTO done (step, attempt) VALUES (?, ?)",
                        (
                            format!("payment-{}", payment.id),
                            workflow::attempt() as i64,
                        ),
                    )?;
                }
                Ok(())
            })?;
            Ok(Loop::Continue(applied + payments.len() as u64))
        })?;
        output.insert("applied".into(), json!(applied));
    }
    if let Some(ms) = config.race_ms {
        let (winner, how) = ctx.race(
            "approval",
            vec![
                Box::new(|ctx: &mut Ctx| {
                    let event = ctx.next_event("approval", &["approve"], None)?;
                    Ok(format!("approved by event {}", event.map_or(0, |e| e.id)))
                }),
                Box::new(move |ctx: &mut Ctx| {
                    ctx.sleep("deadline", Duration::from_millis(ms))?;
                    Ok("timed out".to_owned())
                }),
            ],
        )?;
        output.insert("race".into(), json!([winner, how]));
    }
    if let Some(ms) = config.join_ms {
        let both = ctx.join(
            "both",
            vec![
                Box::new(move |ctx: &mut Ctx| {
                    ctx.step("slow-a", || add_one("slow-a"))?;
                    ctx.sleep("pause", Duration::from_millis(ms))?;
                    ctx.step("slow-b", || add_one("slow-b"))
                }),
                Box::new(|ctx: &mut Ctx| ctx.step("quick", || add_one("quick"))),
            ],
        )?;
        output.insert("join".into(), json!(both));
    }
    if config.rollback {
        ctx.rollback_checkpoint("start");
        let step_ms = config.step_ms;
        for i in 0..config.reservations.unwrap_or(1) {
            let name = if i == 0 {
                "reserve".to_owned()
            } else {
                format!("reserve-{i}")
            };
            let undo_name = format!("undo {name}");
            ctx.step_with_rollback(
                &name,
                || add_one(&name),
                move |_| {
                    std::thread::sleep(Duration::from_millis(step_ms));
                    db::execute("UPDATE counter SET value = value - 1 WHERE id = 1", ())?;
                    db::execute(
                        "INSERT INTO done (step, attempt) VALUES (?, ?)",
                        (undo_name.as_str(), workflow::attempt() as i64),
                    )?;
                    Ok(())
                },
            )?;
        }
        if config.request_rollback {
            // tryStep turns a rollback request into data...
            let asked = ctx.try_step("ask", || -> Result<()> {
                Err(Error::new("asked", "just asking").rollback())
            })?;
            let kind = format!("{:?}", asked.unwrap_err().kind);
            ctx.step("note", || {
                db::execute(
                    "INSERT INTO done (step, attempt) VALUES (?, 0)",
                    [kind.as_str()],
                )?;
                Ok(())
            })?;
            // ...and try_block lets it through.
            ctx.try_block(|ctx| {
                ctx.step("charge", || -> Result<()> {
                    Err(Error::new("fraud", "roll it all back").rollback())
                })
            })??;
        } else {
            ctx.step("charge", || -> Result<()> {
                Err(Error::new("declined", "the card was declined").critical())
            })?;
        }
    }
    if let Some(latest) = config.version {
        output.insert("version".into(), json!(ctx.version("shape", latest)?));
    }
    if let Some(ms) = config.call_nap_ms {
        ctx.step("before-call", || add_one("before-call"))?;
        let napped: u64 = ctx.step("call", || {
            let napped = actors::call("workflow-probe", "callee", "nap", &(ms,))?;
            add_one("call")?;
            Ok(napped)
        })?;
        ctx.step("after-call", || add_one("after-call"))?;
        output.insert("napped".into(), json!(napped));
    }
    let total = ctx.step("total", count)?;
    output.insert("count".into(), json!(total));
    Ok(Json::Object(output))
}

/// A step that never returns, asking for a timeout of `ms`.
fn patient_step(ctx: &mut Ctx, ms: u64) -> workflow::Result<()> {
    let options = quick().timeout(Duration::from_millis(ms));
    ctx.step_with("patient", options, || -> Result<()> {
        loop {
            std::hint::black_box(0);
        }
    })
}

fn count() -> Result<i64> {
    db::query_one("SELECT value FROM counter WHERE id = 1", ())?.get(0)
}

/// The steps whose writes committed, with the attempt that did.
fn done() -> Result<Vec<(String, i64)>> {
    db::query("SELECT step, attempt FROM done ORDER BY rowid", ())?
        .iter()
        .map(|r| Ok((r.get(0)?, r.get(1)?)))
        .collect()
}

/// Appends `n` payments of 1, 2, .. n to the queue, in one transaction.
fn pay(n: i64) -> Result<()> {
    for amount in 1..=n {
        queue::append("payment", &json!({ "amount": amount }))?;
    }
    Ok(())
}

/// Sleeps `ms` and counts the naps this instance took.
fn nap(ms: u64) -> Result<u64> {
    std::thread::sleep(Duration::from_millis(ms));
    let naps = state::get::<u64>()?.unwrap_or(0) + 1;
    state::set(&naps)?;
    Ok(naps)
}

/// Calls a workflow import from an action: the host refuses it.
fn workflow_call_in_action() -> Result<String> {
    match burrow_sdk::wit::burrow::actor::workflow::now() {
        Ok(_) => Ok("allowed".into()),
        Err(e) => Ok(format!("{e:?}")),
    }
}

burrow_sdk::actor! {
    migrate: migrate,
    workflow: run,
    actions: [count, done, pay, nap, workflow_call_in_action],
}
