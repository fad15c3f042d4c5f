//! Incoming HTTP to an actor: requests to `/actors/{actor}/{key}/http/...`
//! reach the instance's `wasi:http/incoming-handler` (the probe's `hook`)
//! in one transaction; a panic or a response past its limit rolls back;
//! body limits; an actor without a handler; tokens, and a public actor a
//! webhook reaches without one.

use std::time::Duration;

use burrow::http::{Access, Serving};
use burrow::manifest::ActorSpec;
use burrow::tokens::Tokens;
use reqwest::Method;
use serde_json::Value;

use crate::support::*;

const ACTOR: &str = "http-probe";

/// The probe, with body limits small enough to pass.
fn probe() -> ActorSpec {
    let mut spec = ActorSpec::new(ACTOR, programs::HTTP_PROBE);
    spec.options.http_max_request = 1000;
    spec.options.http_max_response = 16 << 10;
    spec.options.call_timeout = Duration::from_secs(4);
    spec
}

/// The probe again, as `webhook`, open to anyone.
fn public_probe() -> ActorSpec {
    let mut spec = probe();
    spec.name = "webhook".into();
    spec.options.public_http = true;
    spec
}

/// An answer: its status, headers and body (JSON when it is).
struct Answer {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: Value,
    bytes: usize,
}

async fn send(
    url: &str,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Answer {
    let mut request = crate::support::http()
        .request(method, format!("{url}{path}"))
        .body(body.to_owned());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().await.unwrap();
    Answer {
        status,
        headers,
        bytes: text.len(),
        body: serde_json::from_str(&text).unwrap_or(Value::String(text)),
    }
}

async fn hits(url: &str, actor: &str, key: &str, token: Option<&str>) -> Value {
    let auth = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = auth
        .as_deref()
        .map(|a| vec![("authorization", a)])
        .unwrap_or_default();
    let answer = send(
        url,
        Method::GET,
        &format!("/actors/{actor}/{key}/http/count"),
        &headers,
        "",
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    answer.body["hits"].clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_reaches_the_handler_and_its_writes_commit_before_the_answer() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[probe(), counter()]).await;
    let server = Server::start(host.clone()).await;

    let answer = send(
        &server.url,
        Method::POST,
        "/actors/http-probe/a/http/hooks/paid%20now?order=7&x",
        &[
            ("x-signature", "t=1,v1=abc"),
            ("content-type", "text/plain"),
        ],
        "paid",
    )
    .await;
    assert_eq!(answer.status, 201, "{}", answer.body);
    assert_eq!(answer.body["hits"], 1);
    assert_eq!(answer.body["method"], "POST");
    assert_eq!(answer.body["path"], "/hooks/paid%20now?order=7&x");
    assert_eq!(answer.body["body"], "paid");
    assert_eq!(answer.body["signature"], "t=1,v1=abc");
    assert_eq!(answer.headers["x-hook"], "counted");
    assert_eq!(answer.headers["content-type"], "application/json");

    // The route's bare form is the handler's `/`; other methods reach it.
    for method in [Method::GET, Method::PUT, Method::DELETE, Method::PATCH] {
        let answer = send(
            &server.url,
            method.clone(),
            "/actors/http-probe/a/http",
            &[],
            "",
        )
        .await;
        assert_eq!(answer.status, 201, "{method}: {}", answer.body);
        assert_eq!(answer.body["path"], "/");
        assert_eq!(answer.body["method"], method.as_str());
    }
    // Committed: the count is the instance's state, read by an action too.
    assert_eq!(hits(&server.url, ACTOR, "a", None).await, 5);
    assert_eq!(call(&host, ACTOR, "a", "bump", "[]").await, 6);
    // Another key is another instance, created by its first request.
    assert_eq!(hits(&server.url, ACTOR, "b", None).await, Value::Null);

    // An actor whose component exports no handler.
    let answer = send(
        &server.url,
        Method::POST,
        "/actors/counter/a/http/x",
        &[],
        "",
    )
    .await;
    assert_eq!(answer.status, 404, "{}", answer.body);
    assert_eq!(answer.body["error"]["code"], "no-http-handler");
    assert!(host.keys("counter").await.unwrap().is_empty());
    let answer = send(
        &server.url,
        Method::POST,
        "/actors/nobody/a/http/x",
        &[],
        "",
    )
    .await;
    assert_eq!(
        answer.body["error"]["code"], "unknown-actor",
        "{}",
        answer.body
    );

    server.stop().await;
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_panic_or_an_answer_past_its_limit_rolls_the_request_back() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[probe()]).await;
    let server = Server::start(host.clone()).await;
    let url = &server.url;
    let post = |path: &'static str, body: String| async move {
        send(
            url,
            Method::POST,
            &format!("/actors/http-probe/a/http{path}"),
            &[],
            &body,
        )
        .await
    };

    assert_eq!(post("/hook", String::new()).await.status, 201);
    // The handler counts, then panics: the count goes with the request.
    let answer = post("/panic", String::new()).await;
    assert_eq!(answer.status, 500, "{}", answer.body);
    assert_eq!(answer.body["error"]["code"], "trapped");
    assert_eq!(hits(url, ACTOR, "a", None).await, 1);

    // A body up to the limit is answered; past it the request fails and
    // its writes are rolled back.
    let answer = post("/big?16384", String::new()).await;
    assert_eq!((answer.status, answer.bytes), (200, 16384));
    assert_eq!(hits(url, ACTOR, "a", None).await, 2);
    let answer = post("/big?16385", String::new()).await;
    assert_eq!(answer.status, 422, "{}", answer.body);
    let message = answer.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("http_max_response"), "{message}");
    assert_eq!(hits(url, ACTOR, "a", None).await, 2);

    // A status no HTTP answer may have.
    let answer = post("/status?42", String::new()).await;
    assert_eq!(answer.status, 500, "{}", answer.body);
    assert!(
        answer.body.as_str().unwrap().contains("status 42"),
        "{}",
        answer.body
    );

    // The request's body: up to `http_max_request`, then refused before
    // any guest code runs.
    let answer = post("/hook", "x".repeat(1000)).await;
    assert_eq!(answer.status, 201, "{}", answer.body);
    let answer = post("/hook", "x".repeat(1001)).await;
    assert_eq!(answer.status, 413, "{}", answer.body);
    assert_eq!(answer.body["error"]["code"], "body-too-large");
    assert!(
        answer.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("http_max_request"),
        "{}",
        answer.body
    );
    assert_eq!(hits(url, ACTOR, "a", None).await, 3);

    // The instance serves on after all of it.
    assert_eq!(call(&host, ACTOR, "a", "bump", "[]").await, 4);
    server.stop().await;
    host.shutdown().await;
}

const TOKENS: &str = r#"
    [tokens.hooks]
    role = "client"
    secret = "hooks-secret-0123456789"
    actors = ["http-probe"]

    [tokens.other]
    role = "client"
    secret = "other-secret-0123456789"
    actors = ["counter"]
"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_token_guards_the_handler_unless_the_actor_is_public() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[probe(), public_probe(), counter()]).await;
    let serving = Serving {
        access: Access::with_tokens(Tokens::parse(TOKENS).unwrap()),
        ..Serving::default()
    };
    let server = Server::start_with(host.clone(), serving).await;
    let url = &server.url;
    let hook = |actor: &'static str, authorization: Option<&'static str>| async move {
        let headers: Vec<(&str, &str)> = authorization
            .map(|a| vec![("authorization", a), ("x-signature", "sig")])
            .unwrap_or_else(|| vec![("x-signature", "sig")]);
        send(
            url,
            Method::POST,
            &format!("/actors/{actor}/k/http/hook"),
            &headers,
            "{}",
        )
        .await
    };

    // Guarded: no token, a token for another actor, a token not known.
    let answer = hook(ACTOR, None).await;
    assert_eq!(answer.status, 401, "{}", answer.body);
    let answer = hook(ACTOR, Some("Bearer other-secret-0123456789")).await;
    assert_eq!(answer.status, 403, "{}", answer.body);
    let answer = hook(ACTOR, Some("Bearer wrong-secret-0123456789")).await;
    assert_eq!(answer.status, 401, "{}", answer.body);
    // The right token: the handler runs and never sees the token.
    let answer = hook(ACTOR, Some("Bearer hooks-secret-0123456789")).await;
    assert_eq!(answer.status, 201, "{}", answer.body);
    assert_eq!(answer.body["authorization"], Value::Null);
    assert_eq!(answer.body["signature"], "sig");
    assert_eq!(
        hits(url, ACTOR, "k", Some("hooks-secret-0123456789")).await,
        1
    );

    // Public: anyone's request reaches it, with its own Authorization.
    let answer = hook("webhook", None).await;
    assert_eq!(answer.status, 201, "{}", answer.body);
    let answer = hook("webhook", Some("Basic c2VuZGVyOnB3")).await;
    assert_eq!(answer.status, 201, "{}", answer.body);
    assert_eq!(answer.body["authorization"], "Basic c2VuZGVyOnB3");
    // One of this server's tokens is never shown to the handler.
    let answer = hook("webhook", Some("Bearer hooks-secret-0123456789")).await;
    assert_eq!(answer.status, 201, "{}", answer.body);
    assert_eq!(answer.body["authorization"], Value::Null);
    let answer = hook("webhook", Some("Bearer not-a-token-of-ours")).await;
    assert_eq!(answer.body["authorization"], "Bearer not-a-token-of-ours");
    assert_eq!(hits(url, "webhook", "k", None).await, 4);
    // Its other routes stay guarded.
    let answer = send(url, Method::POST, "/actors/webhook/k/actions/bump", &[], "").await;
    assert_eq!(answer.status, 401, "{}", answer.body);
    let answer = send(url, Method::GET, "/actors/webhook/k", &[], "").await;
    assert_eq!(answer.status, 401, "{}", answer.body);

    server.stop().await;
    host.shutdown().await;
}
