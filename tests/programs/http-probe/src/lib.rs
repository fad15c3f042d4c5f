//! An actor for the host's tests of outgoing and incoming HTTP. Its
//! action `fetch` sends the request it is given; its workflow (from the
//! create input) sends requests from a step, and from orchestration code
//! when asked; its HTTP handler (`hook`) counts what reaches it.

use std::time::Duration;

use burrow_sdk::workflow::{self, Ctx, StepOptions};
use burrow_sdk::{Json, Result, http, state};
use serde::Deserialize;
use serde_json::json;

/// A request, as a test describes it.
#[derive(Default, Deserialize)]
#[serde(default)]
struct Send {
    method: Option<String>,
    url: String,
    body: String,
    headers: Vec<(String, String)>,
    timeout_ms: Option<u64>,
}

/// What the request gave: its answer, or its error.
fn send(request: &Send) -> Json {
    let mut built = http::Request::method(request.method.as_deref().unwrap_or("GET"), &request.url)
        .body(request.body.clone());
    for (name, value) in &request.headers {
        built = built.header(name, value);
    }
    if let Some(ms) = request.timeout_ms {
        built = built.timeout_ms(ms);
    }
    match built.send() {
        Ok(answer) => json!({
            "status": answer.status,
            "body": answer.text(),
            "location": answer.header("location"),
        }),
        Err(e) => json!({ "error": e.to_string(), "kind": kind(&e) }),
    }
}

fn kind(e: &http::HttpError) -> &'static str {
    match e {
        http::HttpError::NotInStep(_) => "not-in-step",
        http::HttpError::NotAllowed(_) => "not-allowed",
        http::HttpError::Denied(_) => "denied",
        http::HttpError::Invalid(_) => "invalid",
        http::HttpError::Failed(_) => "failed",
    }
}

fn fetch(request: Json) -> Result<Json> {
    let request: Send = serde_json::from_value(request)?;
    Ok(send(&request))
}

/// Adds one to the state: a call that never reaches outside.
fn bump() -> Result<i64> {
    let n = state::get::<i64>()?.unwrap_or(0) + 1;
    state::set(&n)?;
    Ok(n)
}

/// What the workflow does, from the create input.
#[derive(Default, Deserialize)]
#[serde(default)]
struct Flow {
    /// Step `charge` POSTs here with its idempotency key; it fails (and is
    /// retried) while the answer is not 2xx, up to `retries` times.
    charge: Option<String>,
    retries: u32,
    /// A durable sleep after the step, so that the run is replayed.
    sleep_ms: u64,
    /// Orchestration code sends a GET here (outside any step).
    from_orchestration: Option<String>,
}

fn run(ctx: &mut Ctx, flow: Flow) -> workflow::Result<Json> {
    let mut output = json!({});
    if let Some(url) = &flow.from_orchestration {
        let answer = send(&Send {
            url: url.clone(),
            ..Send::default()
        });
        output["orchestration"] = answer;
        output["key_outside"] = json!(workflow::step_key());
    }
    if let Some(url) = &flow.charge {
        let options = StepOptions {
            max_retries: flow.retries,
            backoff_base: Duration::from_millis(50),
            backoff_cap: Duration::from_millis(50),
            ..StepOptions::default()
        };
        let url = url.clone();
        let charged: Json = ctx.step_with("charge", options, move || {
            let key = workflow::step_key().unwrap_or_default();
            let answer = send(&Send {
                method: Some("POST".into()),
                url: url.clone(),
                body: json!({"amount": 1200}).to_string(),
                headers: vec![("idempotency-key".into(), key.clone())],
                ..Send::default()
            });
            match answer["status"].as_u64() {
                Some(status) if (200..300).contains(&status) => {
                    Ok(json!({"key": key, "answer": answer}))
                }
                _ => Err(burrow_sdk::Error::new("charge", answer.to_string())),
            }
        })?;
        output["charge"] = charged;
    }
    if flow.sleep_ms > 0 {
        ctx.sleep("pause", Duration::from_millis(flow.sleep_ms))?;
    }
    Ok(output)
}

/// The HTTP handler, by path:
///
/// - `/count`: the count of hooks so far (the state);
/// - `/panic`: counts, then panics (the count is rolled back);
/// - `/big?<n>`: counts, and answers a body of `n` bytes;
/// - `/status?<n>`: status `n`, whatever it is;
/// - anything else: counts one hook, and answers `201` with the count,
///   the method, path, body and the headers a test looks for.
fn hook(request: http::Incoming) -> http::Reply {
    let (path, query) = match request.path.split_once('?') {
        Some((path, query)) => (path, query),
        None => (request.path.as_str(), ""),
    };
    match path {
        "/count" => http::Reply::json(200, &json!({"hits": state::get::<i64>().ok().flatten()})),
        "/panic" => {
            let _ = bump();
            panic!("the hook panics after counting");
        }
        "/big" => {
            let _ = bump();
            http::Reply::new(200).body(vec![b'x'; query.parse().unwrap_or(0)])
        }
        "/status" => http::Reply::new(query.parse().unwrap_or(0)),
        _ => match bump() {
            Ok(hits) => http::Reply::json(
                201,
                &json!({
                    "hits": hits,
                    "method": request.method,
                    "path": request.path,
                    "body": request.text(),
                    "signature": request.header("x-signature"),
                    "authorization": request.header("authorization"),
                    "host": request.header("host"),
                }),
            )
            .header("x-hook", "counted"),
            Err(e) => http::Reply::text(500, e.to_string()),
        },
    }
}

burrow_sdk::actor! {
    workflow: run,
    actions: [fetch, bump],
}

burrow_sdk::http_handler!(hook);
