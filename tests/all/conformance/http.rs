//! Outgoing HTTP in every language, against a real server on 127.0.0.1
//! that the test starts (the actors' manifest lists it): a workflow's
//! orchestration code is refused with not-in-step and nothing reaches the
//! server; a step's POST arrives once, with the step's key as
//! `Idempotency-Key`; an action's GET reaches the listed server and is
//! `denied` elsewhere, naming the actor.

use burrow::Host;
use serde_json::{Value, json};

use super::*;
use crate::provider::Provider;

async fn setup(
    case: &'static str,
    provider: &Provider,
) -> (tempfile::TempDir, Host, Vec<&'static str>, Report) {
    let dir = tempfile::tempdir().unwrap();
    let (specs, present, missing) = super::actors_reaching(&[provider.authority()]);
    let host = start(dir.path(), &specs).await;
    (dir, host, present, Report::new(case, &missing))
}

#[tokio::test(flavor = "multi_thread")]
async fn orchestration_code_is_refused_and_a_step_posts_once_with_its_key() {
    // One server per language, so that each counts only its own requests.
    let providers: Vec<(&str, Provider)> = languages()
        .into_iter()
        .map(|language| (language, Provider::start()))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let authorities: Vec<String> = providers.iter().map(|(_, p)| p.authority()).collect();
    let (specs, present, missing) = super::actors_reaching(&authorities);
    let host = start(dir.path(), &specs).await;
    let mut report = Report::new("outgoing http in a workflow", &missing);
    report
        .run(&present, |language| {
            let host = host.clone();
            let provider = &providers.iter().find(|(l, _)| *l == language).unwrap().1;
            async move {
                let actor = flow(language);
                let url = provider.url("/charge");
                let input = json!({"scenario": "http", "url": url});
                host.create(&actor, "k", &input.to_string()).await.unwrap();
                let out = output(&finished(&host, &actor, "k").await);

                let outside = &out["outside"];
                assert_eq!(outside["error"], "not-in-step", "{out}");
                let message = outside["message"].as_str().unwrap();
                assert!(
                    message.contains("wasi:http/outgoing-handler.handle")
                        && message.contains("outside a step"),
                    "{out}"
                );
                assert_eq!(out["key_outside"], Value::Null, "{out}");

                let charge = &out["charge"];
                assert_eq!(charge["status"], 200, "{out}");
                assert_eq!(charge["body"], r#"{"paid": true}"#, "{out}");
                let key = charge["key"].as_str().unwrap();
                assert_eq!(key.len(), 32, "{out}");

                // The orchestration's GET never arrived; the step's POST
                // did, once, with its key.
                let seen = provider.seen();
                assert_eq!(seen.len(), 1, "{seen:?}");
                assert_eq!(seen[0].method, "POST");
                assert_eq!(seen[0].path, "/charge");
                assert_eq!(seen[0].headers["idempotency-key"], key);
                assert_eq!(
                    serde_json::from_str::<Value>(&seen[0].body).unwrap(),
                    json!({"amount": 1200}),
                    "{seen:?}"
                );

                // A replay of the finished run sends nothing more.
                assert_eq!(
                    output(&host.workflow(&actor, "k").unwrap()),
                    out,
                    "the output changed"
                );
                assert_eq!(provider.seen().len(), 1);
            }
        })
        .await;
    report.finish();
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_action_reaches_what_its_manifest_lists_and_is_denied_the_rest() {
    let provider = Provider::start();
    let elsewhere = Provider::start();
    let (_dir, host, present, mut report) = setup("outgoing http from an action", &provider).await;
    report
        .run(&present, |language| {
            let host = host.clone();
            let (listed, unlisted) = (provider.url("/ok"), elsewhere.url("/ok"));
            async move {
                let actor = basic(language);
                let got = call(&host, &actor, "a", "http_get", json!([listed])).await;
                assert_eq!(got, json!({"status": 200, "body": "GET "}), "{got}");

                let got = call(&host, &actor, "a", "http_get", json!([unlisted])).await;
                assert_eq!(got["error"], "denied", "{got}");
                let message = got["message"].as_str().unwrap();
                assert!(message.contains(&format!("actor `{actor}`")), "{got}");
                assert!(message.contains("not in the actor's `http` list"), "{got}");
            }
        })
        .await;
    report.finish();
    // Each language's listed GET arrived; nothing reached the other server.
    assert_eq!(provider.seen_at("/ok").len(), present.len());
    assert!(elsewhere.seen().is_empty(), "{:?}", elsewhere.seen());
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_reaches_the_actors_handler_and_a_failure_rolls_it_back() {
    let dir = tempfile::tempdir().unwrap();
    let (specs, present, missing) = super::actors();
    let host = start(dir.path(), &specs).await;
    let server = crate::support::Server::start(host.clone()).await;
    let mut report = Report::new("incoming http", &missing);
    let http = reqwest::Client::new();
    report
        .run(&present, |language| {
            let (host, http, url) = (host.clone(), http.clone(), server.url.clone());
            async move {
                let actor = basic(language);
                let before = call(&host, &actor, "h", "get", json!([])).await;
                let answer = http
                    .post(format!("{url}/actors/{actor}/h/http/hooks/paid?order=7"))
                    .header("x-signature", "sig-1")
                    .body("paid")
                    .send()
                    .await
                    .unwrap();
                assert_eq!(answer.status().as_u16(), 201);
                assert_eq!(answer.headers()["x-conformance"], "yes");
                let got: Value = answer.json().await.unwrap();
                assert_eq!(
                    got,
                    json!({
                        "count": before.as_i64().unwrap() + 1,
                        "method": "POST",
                        "path": "/hooks/paid?order=7",
                        "body": "paid",
                        "signature": "sig-1",
                    }),
                    "{got}"
                );
                // Committed before the answer: an action sees it.
                let after = call(&host, &actor, "h", "get", json!([])).await;
                assert_eq!(after, got["count"]);

                // The handler counts, then fails: nothing of it stays.
                let answer = http
                    .get(format!("{url}/actors/{actor}/h/http/fail"))
                    .send()
                    .await
                    .unwrap();
                let status = answer.status().as_u16();
                let text = answer.text().await.unwrap();
                assert!(status >= 400, "{status} {text}");
                assert_eq!(call(&host, &actor, "h", "get", json!([])).await, after);
            }
        })
        .await;
    report.finish();
    server.stop().await;
    host.shutdown().await;
}
