//! Test actor: records its lifecycle hooks, and offers actions that write
//! and then fail, trap, loop forever, run arbitrary SQL or use state.

use burrow_sdk::db::{self, Value};
use burrow_sdk::{Error, Json, Result, log, schedule, state};
use serde::{Deserialize, Serialize};

fn migrate() -> Result<()> {
    db::execute_batch(
        "CREATE TABLE IF NOT EXISTS hooks (seq INTEGER PRIMARY KEY, hook TEXT NOT NULL, detail TEXT);
         CREATE TABLE IF NOT EXISTS items (name TEXT PRIMARY KEY);",
    )?;
    record("migrate", None)
}

fn record(hook: &str, detail: Option<String>) -> Result<()> {
    db::execute(
        "INSERT INTO hooks (hook, detail) VALUES (?, ?)",
        (hook, detail),
    )?;
    Ok(())
}

#[derive(Deserialize)]
struct CreateInput {
    label: Option<String>,
    fail: Option<bool>,
    spin: Option<bool>,
}

fn create(input: Option<CreateInput>) -> Result<()> {
    if input.as_ref().and_then(|i| i.fail) == Some(true) {
        return Err(Error::new("refused", "the create input asked to fail"));
    }
    if input.as_ref().and_then(|i| i.spin) == Some(true) {
        spin()?;
    }
    record("create", input.and_then(|i| i.label))
}

fn wake() -> Result<()> {
    log::info("probe woke up");
    record("wake", None)
}

fn sleep() -> Result<()> {
    record("sleep", None)
}

/// Names of the hooks that ran, in order.
fn hooks() -> Result<Vec<String>> {
    let rows = db::query("SELECT hook FROM hooks ORDER BY seq", ())?;
    rows.iter().map(|r| r.get(0)).collect()
}

fn create_label() -> Result<Option<String>> {
    db::query_one("SELECT detail FROM hooks WHERE hook = 'create'", ())?.get(0)
}

fn add(name: String) -> Result<u64> {
    db::execute("INSERT INTO items (name) VALUES (?)", [name])?;
    count()
}

fn count() -> Result<u64> {
    let n: i64 = db::query_one("SELECT count(*) FROM items", ())?.get(0)?;
    Ok(n as u64)
}

/// Writes a row and a state value, then returns an error.
fn add_then_fail(name: String) -> Result<()> {
    db::execute("INSERT INTO items (name) VALUES (?)", [name])?;
    state::set(&Counter { value: 999 })?;
    Err(Error::new("deliberate", "failed after writing"))
}

/// Writes a row and a state value, then panics (a trap).
fn add_then_trap(name: String) -> Result<()> {
    db::execute("INSERT INTO items (name) VALUES (?)", [name])?;
    state::set(&Counter { value: 999 })?;
    panic!("deliberate trap after writing");
}

#[derive(Serialize, Deserialize, Default)]
struct Counter {
    value: i64,
}

fn bump() -> Result<i64> {
    state::update(|c: &mut Counter| {
        c.value += 1;
        c.value
    })
}

fn state_value() -> Result<i64> {
    Ok(state::get_or_default::<Counter>()?.value)
}

/// Runs one statement; returns the rows as JSON, or the error's text.
fn sql(text: String, params: Vec<Json>) -> Result<Json> {
    let params: Vec<Value> = params
        .into_iter()
        .map(|p| match p {
            Json::Null => Value::Null,
            Json::Bool(b) => Value::Integer(b as i64),
            Json::Number(n) if n.is_i64() => Value::Integer(n.as_i64().unwrap()),
            Json::Number(n) => Value::Real(n.as_f64().unwrap()),
            Json::String(s) => Value::Text(s),
            other => Value::Text(other.to_string()),
        })
        .collect();
    match db::query(&text, params) {
        Ok(rows) => Ok(serde_json::json!({
            "columns": rows.columns,
            "rows": rows.rows.iter().map(|r| r.iter().map(value_json).collect::<Vec<_>>()).collect::<Vec<_>>(),
            "changes": rows.changes,
        })),
        Err(e) => Ok(serde_json::json!({ "error": format!("{e:?}") })),
    }
}

fn batch(text: String) -> Result<Json> {
    match db::execute_batch(&text) {
        Ok(()) => Ok(Json::Null),
        Err(e) => Ok(serde_json::json!({ "error": format!("{e:?}") })),
    }
}

fn value_json(v: &Value) -> Json {
    match v {
        Value::Null => Json::Null,
        Value::Integer(i) => (*i).into(),
        Value::Real(r) => (*r).into(),
        Value::Text(t) => t.clone().into(),
        Value::Blob(b) => b.clone().into(),
    }
}

/// Never returns: the call deadline must stop it.
fn spin() -> Result<()> {
    let mut x: u64 = 0;
    loop {
        x = std::hint::black_box(x.wrapping_add(1));
    }
}

/// Recurses `depth` frames deep.
fn recurse(depth: u64) -> Result<u64> {
    fn down(n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            1 + std::hint::black_box(down(n - 1))
        }
    }
    Ok(down(depth))
}

/// Allocates `mib` MiB and touches it.
fn allocate(mib: usize) -> Result<usize> {
    let v = vec![1u8; mib << 20];
    Ok(std::hint::black_box(v).iter().map(|b| *b as usize).sum())
}

/// Echoes its arguments: for arity and type checks.
fn echo(a: i64, b: String) -> Result<(i64, String)> {
    Ok((a, b))
}

/// Writes `text` to stdout and stderr, and through the log import.
fn shout(text: String) -> Result<()> {
    println!("stdout: {text}");
    eprintln!("stderr: {text}");
    log::warn(format!("log: {text}"));
    Ok(())
}

/// Writes `n` numbered lines through the log import and stdout.
fn chatter(n: u32) -> Result<()> {
    for i in 0..n {
        log::info(format!("chatter {i}"));
        println!("chatter {i}");
    }
    Ok(())
}

/// Tries what a sandboxed guest must not be able to do; reports what it got.
fn ambient() -> Result<Json> {
    let files = std::fs::read_dir("/")
        .map(|d| d.count())
        .map_err(|e| e.to_string());
    let cwd = std::fs::read_dir(".")
        .map(|d| d.count())
        .map_err(|e| e.to_string());
    let env: Vec<String> = std::env::vars().map(|(k, _)| k).collect();
    let args: Vec<String> = std::env::args().collect();
    let net = std::net::TcpStream::connect("127.0.0.1:7878")
        .map(drop)
        .map_err(|e| e.to_string());
    let mut line = String::new();
    let stdin = std::io::stdin()
        .read_line(&mut line)
        .map_err(|e| e.to_string());
    Ok(serde_json::json!({
        "read_root": files.is_ok(),
        "read_cwd": cwd.is_ok(),
        "env": env,
        "args": args,
        "connect": net.is_ok(),
        "stdin_bytes": stdin.unwrap_or(0),
    }))
}

/// Sets the state to `n` bytes.
fn big_state(n: usize) -> Result<()> {
    state::set(&"s".repeat(n))
}

/// Returns a string of `n` bytes.
fn big_result(n: usize) -> Result<String> {
    Ok("x".repeat(n))
}

/// Fails with the guest's own `code` and `message` (for the failure text
/// limits: long text, newlines, control characters).
fn fail_with(code: String, message: String) -> Result<()> {
    Err(Error::new(code, message))
}

/// Schedules `action` with `args` (a JSON array) in `delay_ms`: lets SQL
/// attacks meet the host's schedule runner.
fn later(delay_ms: u64, action: String, args: Json) -> Result<u64> {
    schedule::after(delay_ms, &action, &args)
}

burrow_sdk::actor! {
    migrate: migrate,
    create: create,
    wake: wake,
    sleep: sleep,
    actions: [
        hooks, create_label, add, count, add_then_fail, add_then_trap, bump, state_value,
        sql, batch, spin, allocate, echo, big_result, shout, recurse, chatter, ambient, big_state,
        fail_with, later,
    ],
}
