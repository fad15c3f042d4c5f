//! The HTTP API end to end, against a server in this process.

use burrow::client::Client;
use serde_json::{Value, json};

use crate::support::*;

async fn raw(method: reqwest::Method, url: &str, body: &'static str) -> (u16, Value) {
    let response = crate::support::http()
        .request(method, url)
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn calls_state_inspect_and_destroy_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let actors = [counter(), probe()];
    let server = Server::start(start(dir.path(), &actors).await).await;
    let client = Client::new(&server.url);
    assert!(client.healthy().await);

    assert_eq!(
        client
            .call("counter", "h", "increment", "[5]")
            .await
            .unwrap(),
        "5"
    );
    assert_eq!(
        client
            .call("counter", "h", "increment", "[2]")
            .await
            .unwrap(),
        "7"
    );
    assert_eq!(
        client
            .call("probe", "odd key/../ü", "bump", "[]")
            .await
            .unwrap(),
        "1"
    );
    assert_eq!(
        client.state("probe", "odd key/../ü").await.unwrap(),
        json!({ "value": 1 })
    );
    let inspection = client.inspect("counter", "h").await.unwrap();
    assert_eq!(inspection["tables"][0]["rows"], json!([[1, 7]]));

    let (status, body) = raw(
        reqwest::Method::GET,
        &format!("{}/actors/counter", server.url),
        "",
    )
    .await;
    assert_eq!((status, body), (200, json!({ "keys": ["h"] })));

    client
        .create("probe", "made", r#"{"label": "over http"}"#)
        .await
        .unwrap();
    assert_eq!(
        client
            .call("probe", "made", "create_label", "[]")
            .await
            .unwrap(),
        "\"over http\""
    );
    let err = client.create("probe", "made", "null").await.unwrap_err();
    assert_eq!(
        (err.status, err.code.as_str()),
        (Some(409), "already-exists")
    );

    client.destroy("counter", "h").await.unwrap();
    let err = client.state("counter", "h").await.unwrap_err();
    assert_eq!(
        (err.status, err.code.as_str()),
        (Some(404), "no-such-instance")
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn http_errors_carry_code_message_and_status() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(start(dir.path(), &[counter(), probe()]).await).await;
    let base = &server.url;
    let post = |path: &str, body: &'static str| {
        let url = format!("{base}{path}");
        async move { raw(reqwest::Method::POST, &url, body).await }
    };

    let cases: Vec<(&str, &'static str, u16, &str)> = vec![
        ("/actors/nobody/k/actions/x", "[]", 404, "unknown-actor"),
        ("/actors/counter/k/actions/fly", "[]", 404, "unknown-action"),
        (
            "/actors/counter/k/actions/increment",
            "[1",
            400,
            "invalid-arguments",
        ),
        (
            "/actors/counter/k/actions/increment",
            "{\"amount\": 1}",
            400,
            "invalid-arguments",
        ),
        (
            "/actors/counter/k/actions/increment",
            "[1, 2]",
            400,
            "invalid-arguments",
        ),
        (
            "/actors/counter/k/actions/increment",
            "[\"one\"]",
            400,
            "invalid-arguments",
        ),
        (
            "/actors/Counter/k/actions/increment",
            "[1]",
            400,
            "invalid-address",
        ),
        (
            "/actors/probe/k/actions/add_then_fail",
            "[\"x\"]",
            422,
            "action-failed",
        ),
        (
            "/actors/probe/k/actions/add_then_trap",
            "[\"x\"]",
            500,
            "trapped",
        ),
        ("/nowhere", "", 404, "no-route"),
        // A host alone has no cluster to drain into.
        ("/cluster/drain", "", 409, "not-supported"),
    ];
    for (path, body, status, code) in cases {
        let (got_status, got) = post(path, body).await;
        assert_eq!(got_status, status, "{path} {body}: {got}");
        assert_eq!(got["error"]["code"], json!(code), "{path} {body}: {got}");
        assert!(
            got["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{got}"
        );
    }

    let huge: &'static str = Box::leak(format!("[\"{}\"]", "x".repeat(2 << 20)).into_boxed_str());
    let (status, got) = post("/actors/probe/k/actions/add", huge).await;
    assert_eq!(status, 413, "{got}");
    assert_eq!(got["error"]["code"], json!("body-too-large"));

    let long_key = format!("/actors/counter/{}/actions/get", "k".repeat(1100));
    let (status, got) = raw(reqwest::Method::POST, &format!("{base}{long_key}"), "[]").await;
    assert_eq!(
        (status, got["error"]["code"].clone()),
        (400, json!("invalid-address")),
        "{got}"
    );

    // An empty body means no arguments.
    assert_eq!(
        post("/actors/counter/k/actions/get", "").await,
        (200, json!(0))
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn strange_keys_over_http_are_keys_or_clear_4xx() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(start(dir.path(), &[counter()]).await).await;
    let client = Client::new(&server.url);
    for key in ["../../etc/passwd", "nul\0byte", "ключ 🙂 é", "%2F..%2F"] {
        assert_eq!(
            client
                .call("counter", key, "increment", "[1]")
                .await
                .unwrap(),
            "1",
            "{key:?}"
        );
        assert_eq!(
            client.call("counter", key, "get", "[]").await.unwrap(),
            "1",
            "{key:?}"
        );
    }
    let err = client
        .call("counter", &"k".repeat(10_000), "get", "[]")
        .await
        .unwrap_err();
    assert_eq!(
        (err.status, err.code.as_str()),
        (Some(400), "invalid-address"),
        "{err}"
    );

    // Raw paths a client did not encode: never a 5xx.
    for path in [
        "/actors/counter/../actions/get",
        "/actors/counter/a/b/actions/get",
        "/actors/counter/%ff%fe/actions/get",
        "/actors//k/actions/get",
        "/actors/counter/k/actions/",
    ] {
        let (status, body) = raw(
            reqwest::Method::POST,
            &format!("{}{path}", server.url),
            "[]",
        )
        .await;
        assert!((400..500).contains(&status), "{path}: {status} {body}");
        assert!(body["error"]["code"].is_string(), "{path}: {body}");
    }
    server.stop().await;
}

#[tokio::test]
async fn the_queue_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = queue_probe();
    spec.options.queue_max_attempts = 1;
    let server = Server::start(start(dir.path(), &[spec, counter()]).await).await;
    let client = Client::new(&server.url);
    let queue = format!("{}/actors/queue-probe/k/queue", server.url);

    let (status, body) = raw(
        reqwest::Method::POST,
        &queue,
        r#"{"type": "x", "payload": {"a": 1}}"#,
    )
    .await;
    assert_eq!((status, &body["status"]), (202, &json!("queued")), "{body}");
    let (status, body) = raw(
        reqwest::Method::POST,
        &queue,
        r#"{"type": "x", "wait": true, "timeout_ms": 20000}"#,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "processed");
    assert_eq!(body["result"]["attempt"], 1);

    let wait = burrow::SendOptions {
        wait: Some(std::time::Duration::from_secs(20)),
        ..Default::default()
    };
    let outcome = client
        .send("queue-probe", "k", "fail", "{}", &wait)
        .await
        .unwrap();
    assert_eq!(outcome["status"], "dead-lettered", "{outcome}");
    let id = outcome["id"].as_i64().unwrap();
    let view = client.queue("queue-probe", "k").await.unwrap();
    assert_eq!(view["dead_letters"][0]["id"], id);
    assert_eq!(view["policy"], json!({"mode": "fifo", "concurrency": 1}));
    client.requeue("queue-probe", "k", id).await.unwrap();
    let view = eventually(
        std::time::Duration::from_secs(20),
        "the dead letter again",
        async || {
            let view = client.queue("queue-probe", "k").await.unwrap();
            (view["dead_letters"][0]["id"] == id).then_some(view)
        },
    )
    .await;
    assert_eq!(view["dead_letters"][0]["attempts"], 1);
    client.discard("queue-probe", "k", id).await.unwrap();
    let e = client.discard("queue-probe", "k", id).await.unwrap_err();
    assert_eq!((e.status, e.code.as_str()), (Some(404), "no-such-event"));

    // Bad sends: 4xx with a code that names the problem.
    for (body, status, code) in [
        (r#"{"payload": 1}"#, 400, "invalid-event"),
        (r#"{"type": "x", "colour": 1}"#, 400, "invalid-event"),
        (r#"{"type": "x", "timeout_ms": 5}"#, 400, "invalid-event"),
        (r#"not json"#, 400, "invalid-event"),
        (r#"{"type": ""}"#, 400, "invalid-event"),
    ] {
        let (got, answer) = raw(reqwest::Method::POST, &queue, body).await;
        assert_eq!(
            (got, answer["error"]["code"].as_str()),
            (status, Some(code)),
            "{body}: {answer}"
        );
    }
    let counter_queue = format!("{}/actors/counter/k/queue", server.url);
    let (got, answer) = raw(reqwest::Method::POST, &counter_queue, r#"{"type": "x"}"#).await;
    assert_eq!(
        (got, answer["error"]["code"].as_str()),
        (400, Some("no-queue"))
    );
    let nobody = format!("{}/actors/nobody/k/queue", server.url);
    let (got, _) = raw(reqwest::Method::POST, &nobody, r#"{"type": "x"}"#).await;
    assert_eq!(got, 404);
    let bad_id = format!("{queue}/dead-letters/abc/requeue");
    let (got, _) = raw(reqwest::Method::POST, &bad_id, "").await;
    assert_eq!(got, 400);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_workflow_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[workflow_probe(), counter()]).await;
    let server = Server::start(host).await;
    let client = Client::new(&server.url);
    client
        .create("workflow-probe", "w", &json!({"steps": 3}).to_string())
        .await
        .unwrap();
    let view = eventually(
        std::time::Duration::from_secs(20),
        "completion",
        async || {
            let view = client.workflow("workflow-probe", "w").await.unwrap();
            (view["status"] == "completed").then_some(view)
        },
    )
    .await;
    assert_eq!(view["history_len"], 4);
    let steps: Vec<&str> = view["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(steps, ["add-0", "add-1", "add-2", "total"]);
    assert_eq!(view["history"][0]["attempts"], 1);
    assert_eq!(view["history"][0]["kind"], "step");

    client
        .call("counter", "c", "increment", "[1]")
        .await
        .unwrap();
    let url = format!("{}/actors/counter/c/workflow", server.url);
    let (status, body) = raw(reqwest::Method::GET, &url, "").await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["code"], "no-workflow");
    let url = format!("{}/actors/workflow-probe/nobody/workflow", server.url);
    let (status, body) = raw(reqwest::Method::GET, &url, "").await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("no-such-instance"))
    );
    server.stop().await;
}

/// Stopping the server answers the request it is running, refuses new
/// connections meanwhile, and closes the idle keep-alive connections.
#[tokio::test(flavor = "multi_thread")]
async fn stopping_the_server_answers_the_request_in_flight_refuses_new_ones_and_closes_idle_ones() {
    let dir = tempfile::tempdir().unwrap();
    let mut spinner = probe();
    // Long enough for the checks below to run while the call spins.
    spinner.options.call_timeout = std::time::Duration::from_secs(3);
    let server = Server::start(start(dir.path(), &[spinner, counter()]).await).await;
    // A connection that answered and stays open, idle.
    let idle = crate::support::http();
    let url = format!("{}/actors/counter/c/actions/increment", server.url);
    for expected in ["1", "2"] {
        let answer = idle.post(&url).body("[1]").send().await.unwrap();
        assert_eq!(answer.text().await.unwrap(), expected);
    }
    let spinning = tokio::spawn(
        crate::support::http()
            .post(format!("{}/actors/probe/p/actions/spin", server.url))
            .body("[]")
            .send(),
    );
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let url_of_server = server.url.clone();
    let stopping = tokio::spawn(tokio::time::timeout(
        std::time::Duration::from_secs(20),
        server.stop(),
    ));
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    // While the stop waits for the spinning call, a new connection is
    // refused at once rather than left waiting.
    let refused = tokio::time::timeout(
        std::time::Duration::from_millis(500),
        crate::support::http()
            .get(format!("{url_of_server}/healthz"))
            .send(),
    )
    .await;
    assert!(
        matches!(refused, Ok(Err(_))),
        "a new connection was not refused at once: {refused:?}"
    );
    assert!(
        !stopping.is_finished(),
        "the stop did not wait for the call"
    );
    let stopped = stopping.await.unwrap();
    assert!(stopped.is_ok(), "the server did not stop within 20 s");
    let answer = spinning.await.unwrap().unwrap();
    assert_eq!(answer.status().as_u16(), 503);
    let body: Value = answer.json().await.unwrap();
    assert_eq!(body["error"]["code"], "timeout", "{body}");
    // The idle connection was closed: a new request finds no server.
    assert!(idle.post(&url).body("[1]").send().await.is_err());
}
