//! Outgoing HTTP from actors, against a real server on 127.0.0.1 that
//! this file starts: the manifest's list of authorities, redirects left
//! to the guest, HTTPS to a server of a private CA (`outbound_ca`),
//! timeouts and body limits, the host serving others
//! meanwhile, and workflow steps (not-in-step outside them, one request
//! per attempt, the same idempotency key after a kill -9, none on replay).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use burrow::Host;
use burrow::manifest::ActorSpec;
use serde_json::{Value, json};

use crate::cli::{Serve, burrow, stdout};
use crate::provider::Provider;
use crate::support::{call, eventually, programs, restart, start};

const ACTOR: &str = "http-probe";

/// The probe, allowed `allowed`, with limits small enough to pass.
fn probe(allowed: &[String]) -> ActorSpec {
    let mut spec = ActorSpec::new(ACTOR, programs::HTTP_PROBE);
    spec.options.http = burrow::outbound::Allowed::parse(allowed).unwrap();
    spec.options.http_max_request = 1000;
    spec.options.http_max_response = 16 << 10;
    spec.options.call_timeout = Duration::from_secs(4);
    spec
}

async fn fetch(host: &Host, key: &str, request: Value) -> Value {
    call(host, ACTOR, key, "fetch", &json!([request]).to_string()).await
}

#[tokio::test(flavor = "multi_thread")]
async fn an_action_reaches_a_listed_server_and_reads_its_answer() {
    let provider = Provider::start();
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[probe(&[provider.authority()])]).await;

    let got = fetch(&host, "a", json!({"url": provider.url("/ok")})).await;
    assert_eq!(got["status"], 200, "{got}");
    assert_eq!(got["body"], "GET ");
    let got = fetch(
        &host,
        "a",
        json!({"method": "POST", "url": provider.url("/ok"), "body": "hello",
               "headers": [["x-trace", "t1"]]}),
    )
    .await;
    assert_eq!(got["status"], 200, "{got}");
    assert_eq!(got["body"], "POST hello");
    let seen = provider.seen_at("/ok");
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[1].headers["x-trace"], "t1");
    assert_eq!(seen[1].headers["content-length"], "5");
    assert_eq!(
        seen[1].headers["host"],
        format!("127.0.0.1:{}", provider.port)
    );

    // A redirect is the guest's answer: the host does not follow it.
    let got = fetch(&host, "a", json!({"url": provider.url("/redirect")})).await;
    assert_eq!(got["status"], 302, "{got}");
    assert_eq!(got["location"], "/ok");
    assert_eq!(provider.seen_at("/ok").len(), 2);
    host.shutdown().await;
}

/// An actor's requests to one server go on one connection, kept open
/// between them (for every instance of the actor); another actor's get
/// their own; a connection its server closed is not used again.
#[tokio::test(flavor = "multi_thread")]
async fn the_requests_of_an_actor_to_one_server_share_a_kept_connection() {
    let provider = Provider::start();
    let dir = tempfile::tempdir().unwrap();
    let mut other = probe(&[provider.authority()]);
    other.name = "http-probe-other".into();
    let host = start(dir.path(), &[probe(&[provider.authority()]), other]).await;
    let ok = json!({"url": provider.url("/ok")});

    for key in ["a", "a", "a", "b", "a"] {
        let got = fetch(&host, key, ok.clone()).await;
        assert_eq!(got["status"], 200, "{got}");
    }
    assert_eq!(
        provider.connections(),
        1,
        "one connection for five requests"
    );
    let got = call(
        &host,
        "http-probe-other",
        "a",
        "fetch",
        &json!([ok]).to_string(),
    )
    .await;
    assert_eq!(got["status"], 200, "{got}");
    assert_eq!(provider.connections(), 2, "another actor connects anew");

    let got = fetch(&host, "a", json!({"url": provider.url("/close")})).await;
    assert_eq!(got["body"], "closing", "{got}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let got = fetch(&host, "a", ok.clone()).await;
    assert_eq!(got["status"], 200, "{got}");
    assert_eq!(provider.connections(), 3, "the closed connection was left");
    assert_eq!(provider.seen_at("/ok").len(), 7);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn what_the_manifest_does_not_list_is_refused_before_any_connection() {
    let provider = Provider::start();
    let other = Provider::start();
    let dir = tempfile::tempdir().unwrap();
    let mut silent = probe(&[]);
    silent.name = "silent".into();
    let host = start(dir.path(), &[probe(&[provider.authority()]), silent]).await;

    for (url, why) in [
        // Another port of the same address.
        (other.url("/ok"), "not in the actor's `http` list"),
        // The same port, by a name that is not listed.
        (
            format!("http://localhost:{}/ok", other.port),
            "not in the actor's `http` list",
        ),
        // Another scheme.
        (
            format!("https://127.0.0.1:{}/ok", provider.port),
            "not in the actor's `http` list",
        ),
        // The cloud's metadata service.
        (
            "http://169.254.169.254/latest/meta-data/".into(),
            "not in the actor's `http` list",
        ),
    ] {
        let got = fetch(&host, "a", json!({"url": url})).await;
        assert_eq!(got["kind"], "denied", "{url}: {got}");
        let error = got["error"].as_str().unwrap();
        assert!(error.contains("actor `http-probe`"), "{error}");
        assert!(error.contains(why), "{error}");
    }
    // An actor with no list reaches nothing, not even what another lists.
    let got = call(
        &host,
        "silent",
        "a",
        "fetch",
        &json!([{"url": provider.url("/ok")}]).to_string(),
    )
    .await;
    assert_eq!(got["kind"], "denied", "{got}");
    assert!(got["error"].as_str().unwrap().contains("actor `silent`"));
    let authority = format!("`http://127.0.0.1:{}`", provider.port);
    assert!(got["error"].as_str().unwrap().contains(&authority), "{got}");

    // A URL that is not one is the guest's own mistake.
    let got = fetch(&host, "a", json!({"url": "ftp://127.0.0.1/x"})).await;
    assert_eq!(got["kind"], "invalid", "{got}");

    assert!(provider.seen().is_empty(), "{:?}", provider.seen());
    assert!(other.seen().is_empty(), "{:?}", other.seen());
    let metrics = host.metrics();
    for line in [
        r#"burrow_outbound_requests_total{actor="http-probe",outcome="denied"} 4"#,
        r#"burrow_outbound_requests_total{actor="silent",outcome="denied"} 1"#,
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "no {line} in\n{metrics}"
        );
    }
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_stalls_or_sends_too_much_fails_in_time_while_others_are_served() {
    let provider = Provider::start();
    let dir = tempfile::tempdir().unwrap();
    let host = Arc::new(start(dir.path(), &[probe(&[provider.authority()])]).await);

    // Another instance is answered while these wait.
    let busy = host.clone();
    let others = tokio::spawn(async move {
        let began = Instant::now();
        let mut slowest = Duration::ZERO;
        while began.elapsed() < Duration::from_secs(3) {
            let at = Instant::now();
            call(&busy, ACTOR, "other", "bump", "[]").await;
            slowest = slowest.max(at.elapsed());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        slowest
    });

    let cases = [
        // No answer: the guest's own first-byte timeout.
        (
            json!({"url": provider.url("/never"), "timeout_ms": 500}),
            "timeout",
            Duration::from_millis(500),
        ),
        // No answer, no timeout asked: the call's deadline (4 s).
        (
            json!({"url": provider.url("/never")}),
            "timeout",
            Duration::from_secs(4),
        ),
        // A byte every 200 ms: each within the between-bytes timeout, the
        // whole past the call's deadline.
        (
            json!({"url": provider.url("/trickle")}),
            "timeout",
            Duration::from_secs(4),
        ),
        // Over the response limit (16 KiB), declared or not.
        (json!({"url": provider.url("/big")}), "size", Duration::ZERO),
        (
            json!({"url": provider.url("/big-chunked")}),
            "size",
            Duration::ZERO,
        ),
        // Over the request limit (1000 bytes): not sent.
        (
            json!({"method": "POST", "url": provider.url("/ok"), "body": "x".repeat(1001)}),
            "size",
            Duration::ZERO,
        ),
    ];
    let keys = ["never", "never-2", "trickle", "big", "chunked", "request"];
    let waits: Vec<_> = cases
        .into_iter()
        .zip(keys)
        .map(|((request, error, least), key)| {
            let host = host.clone();
            tokio::spawn(async move {
                let began = Instant::now();
                let got = host
                    .call(ACTOR, key, "fetch", &json!([request]).to_string())
                    .await;
                (key, request, error, least, began.elapsed(), got)
            })
        })
        .collect();
    for wait in waits {
        let (key, request, error, least, took, got) = wait.await.unwrap();
        // The call's deadline cuts the request; the call itself may then
        // end with its own timeout, never later than a second after it.
        assert!(took >= least, "{key}: {took:?}");
        assert!(took < least + Duration::from_secs(2), "{key}: {took:?}");
        match got {
            Ok(answer) => {
                let answer: Value = serde_json::from_str(&answer).unwrap();
                assert_eq!(answer["kind"], "failed", "{key} {request}: {answer}");
                let text = answer["error"].as_str().unwrap().to_lowercase();
                let timed_out = text.contains("timeout") || text.contains("timed out");
                assert!(
                    text.contains(error) || (error == "timeout" && timed_out),
                    "{key}: {answer}"
                );
                eprintln!("{key}: {text} after {took:?}");
            }
            Err(e) => assert!(
                least == Duration::from_secs(4) && e.to_string().contains("call timeout"),
                "{key}: {e}"
            ),
        }
    }
    let slowest = others.await.unwrap();
    // Had a call waited for the stalled requests, it would have taken 4 s.
    assert!(slowest < Duration::from_millis(2500), "{slowest:?}");
    assert!(provider.seen_at("/ok").is_empty(), "{:?}", provider.seen());
    Arc::into_inner(host).unwrap().shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sixty_four_instances_waiting_on_a_slow_server_leave_others_quick() {
    let provider = Provider::start();
    let dir = tempfile::tempdir().unwrap();
    let config = burrow::HostConfig {
        max_awake: 128,
        ..crate::support::config(dir.path())
    };
    let host = Host::start(config, &[probe(&[provider.authority()])])
        .await
        .unwrap();
    let host = Arc::new(host);
    let waits: Vec<_> = (0..64)
        .map(|i| {
            let host = host.clone();
            let url = provider.url("/slow");
            tokio::spawn(
                async move { fetch(&host, &format!("slow-{i}"), json!({"url": url})).await },
            )
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let began = Instant::now();
    for _ in 0..20 {
        call(&host, ACTOR, "quick", "bump", "[]").await;
    }
    let twenty = began.elapsed();
    for wait in waits {
        let got = wait.await.unwrap();
        assert_eq!(got["status"], 200, "{got}");
    }
    assert_eq!(call(&host, ACTOR, "quick", "bump", "[]").await, 21);
    // 20 calls, one after another, begun while 64 requests wait 2 s: had
    // any waited for them, they would have taken 1.7 s at least.
    assert!(twenty < Duration::from_millis(1500), "{twenty:?}");
    assert_eq!(provider.seen_at("/slow").len(), 64);
    Arc::into_inner(host).unwrap().shutdown().await;
}

async fn create(host: &Host, key: &str, flow: Value) {
    host.create(ACTOR, key, &flow.to_string()).await.unwrap();
}

async fn finished(host: &Host, key: &str) -> Value {
    let view = eventually(
        Duration::from_secs(30),
        &format!("the workflow of {key} to finish"),
        async || {
            let view = host.workflow(ACTOR, key).unwrap();
            view.record.status.is_final().then_some(view)
        },
    )
    .await;
    assert_eq!(
        view.record.status,
        burrow::workflow::WorkflowStatus::Completed,
        "{:?}",
        view.record
    );
    serde_json::from_str(view.record.output.as_deref().unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn orchestration_code_gets_not_in_step_and_a_step_sends_once_per_attempt() {
    let provider = Provider::start();
    let dir = tempfile::tempdir().unwrap();
    let spec = || probe(&[provider.authority()]);
    let host = start(dir.path(), &[spec()]).await;

    // Outside a step: refused at the import, nothing sent.
    create(
        &host,
        "outside",
        json!({"from_orchestration": provider.url("/ok")}),
    )
    .await;
    let output = finished(&host, "outside").await;
    assert_eq!(output["orchestration"]["kind"], "not-in-step", "{output}");
    let error = output["orchestration"]["error"].as_str().unwrap();
    assert!(
        error.contains("wasi:http/outgoing-handler.handle"),
        "{error}"
    );
    assert_eq!(output["key_outside"], Value::Null);
    assert!(provider.seen().is_empty());

    // Two failed attempts, then a paid one: three requests, one key.
    *provider.fail_first.lock().unwrap() = 2;
    create(
        &host,
        "paid",
        json!({"charge": provider.url("/charge"), "retries": 3, "sleep_ms": 200}),
    )
    .await;
    let output = finished(&host, "paid").await;
    let key = output["charge"]["key"].as_str().unwrap().to_owned();
    assert_eq!(key.len(), 32, "{key}");
    assert_eq!(output["charge"]["answer"]["status"], 200);
    let charges = provider.seen_at("/charge");
    assert_eq!(charges.len(), 3, "{charges:?}");
    for charge in &charges {
        assert_eq!(charge.method, "POST");
        assert_eq!(charge.headers["idempotency-key"], key);
        assert_eq!(charge.body, r#"{"amount":1200}"#);
    }

    // The workflow view shows the step's requests, attempt by attempt.
    let view = host.workflow(ACTOR, "paid").unwrap();
    let location = &view
        .history
        .iter()
        .find(|e| e.name == "charge")
        .unwrap()
        .location;
    let requests = &view.requests[location];
    let seen: Vec<(i64, &str, &str, Option<i64>, &str)> = requests
        .iter()
        .map(|r| {
            (
                r.attempt,
                r.method.as_str(),
                r.authority.as_str(),
                r.status,
                r.outcome.as_str(),
            )
        })
        .collect();
    let authority = format!("http://127.0.0.1:{}", provider.port);
    assert_eq!(
        seen,
        [
            (1, "POST", authority.as_str(), Some(500), "answered"),
            (2, "POST", authority.as_str(), Some(500), "answered"),
            (3, "POST", authority.as_str(), Some(200), "answered"),
        ],
        "{requests:?}"
    );
    assert!(requests.iter().all(|r| r.duration_ms.is_some()));
    // Orchestration code's refused request is no step's.
    let outside = host.workflow(ACTOR, "outside").unwrap();
    assert!(outside.requests.is_empty(), "{:?}", outside.requests);

    // Another workflow's step has its own key.
    create(&host, "second", json!({"charge": provider.url("/charge")})).await;
    let second = finished(&host, "second").await;
    assert_ne!(second["charge"]["key"], output["charge"]["key"]);

    let metrics = host.metrics();
    for line in [
        r#"burrow_outbound_requests_total{actor="http-probe",outcome="not-in-step"} 1"#,
        r#"burrow_outbound_requests_total{actor="http-probe",outcome="answered"} 4"#,
        r#"burrow_outbound_request_duration_seconds_count{actor="http-probe"} 5"#,
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "no {line} in\n{metrics}"
        );
    }

    // Replays (a restart, a sleep woken again) send nothing more.
    let host = restart(host, &[spec()]).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(finished(&host, "paid").await, output);
    assert_eq!(provider.seen_at("/charge").len(), 4);
    host.shutdown().await;
}

fn write_manifest(dir: &Path, provider: &Provider) -> std::path::PathBuf {
    let manifest = dir.join("burrow.toml");
    std::fs::write(
        &manifest,
        format!(
            "[host]\ndata_dir = \"data\"\n\n[actors.http-probe]\ncomponent = {:?}\nhttp = [{:?}]\n",
            programs::HTTP_PROBE,
            provider.authority()
        ),
    )
    .unwrap();
    manifest
}

#[test]
fn kill_9_between_a_request_and_its_steps_commit_sends_the_same_key_again() {
    let provider = Provider::start();
    let (tell, charges) = std::sync::mpsc::channel();
    *provider.charges.lock().unwrap() = Some(tell);
    *provider.charge_open.lock().unwrap() = false;
    let dir = tempfile::tempdir().unwrap();
    let manifest = write_manifest(dir.path(), &provider);
    let server = Serve::start_with(&manifest, &[]);
    let flow = json!({"charge": provider.url("/charge"), "retries": 2}).to_string();
    let out = burrow(
        &manifest,
        &["create", ACTOR, "k", &flow, "--url", &server.url],
    );
    assert!(out.status.success(), "{out:?}");

    // The request is at the provider, unanswered: the host dies.
    let first = charges.recv_timeout(Duration::from_secs(60)).unwrap();
    let server = server.kill_9_and_restart(&manifest);
    *provider.charge_open.lock().unwrap() = true;
    let second = charges.recv_timeout(Duration::from_secs(60)).unwrap();
    assert_eq!(
        first.headers["idempotency-key"],
        second.headers["idempotency-key"]
    );

    let deadline = Instant::now() + Duration::from_secs(60);
    let view = loop {
        let out = burrow(&manifest, &["inspect", ACTOR, "k", "--history"]);
        let view: Value = serde_json::from_str(&stdout(&out)).unwrap_or(Value::Null);
        if view["status"] == "completed" {
            break view;
        }
        assert!(Instant::now() < deadline, "not finished: {view}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let output: Value = serde_json::from_str(view["output"].as_str().unwrap()).unwrap();
    assert_eq!(
        output["charge"]["key"].as_str(),
        Some(first.headers["idempotency-key"].as_str())
    );
    // The first request may have been answered after the kill (the
    // provider was still holding it): at most the two attempts arrived.
    let seen = provider.seen_at("/charge");
    assert!(
        seen.iter()
            .all(|s| s.headers["idempotency-key"] == first.headers["idempotency-key"]),
        "{seen:?}"
    );
    server.stop();
}

/// A TLS front on 127.0.0.1 with `pki`'s server certificate that passes
/// each connection on to `provider` in plain HTTP; its port.
async fn tls_front(pki: &crate::tls::Pki, provider: &Provider) -> u16 {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};

    let certs = vec![CertificateDer::from_pem_slice(pki.cert.as_bytes()).unwrap()];
    let key = PrivateKeyDer::from_pem_slice(pki.key.as_bytes()).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let behind = provider.port;
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                // A handshake the client refuses ends here.
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut plain = tokio::net::TcpStream::connect(("127.0.0.1", behind))
                    .await
                    .unwrap();
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            });
        }
    });
    port
}

#[tokio::test(flavor = "multi_thread")]
async fn https_reaches_a_server_whose_ca_the_host_trusts_through_outbound_ca() {
    let provider = Provider::start();
    let pki = crate::tls::Pki::new("outbound");
    let port = tls_front(&pki, &provider).await;
    let dir = tempfile::tempdir().unwrap();
    let (_, _, ca) = pki.write(dir.path());
    let url = format!("https://127.0.0.1:{port}/ok");
    let listed = probe(&[format!("https://127.0.0.1:{port}")]);

    // The host trusts the test's CA: the request goes through TLS.
    let mut trusting = crate::support::config(&dir.path().join("trusting"));
    trusting.outbound_ca = Some(ca);
    let host = Host::start(trusting, std::slice::from_ref(&listed))
        .await
        .unwrap();
    let got = fetch(
        &host,
        "a",
        json!({"method": "POST", "url": url, "body": "paid"}),
    )
    .await;
    assert_eq!(got["status"], 200, "{got}");
    assert_eq!(got["body"], "POST paid");
    let seen = provider.seen_at("/ok");
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].headers["host"], format!("127.0.0.1:{port}"));
    host.shutdown().await;

    // A host with only the system's roots refuses the certificate: the
    // request fails and nothing reaches the server.
    let host = start(&dir.path().join("plain"), &[listed]).await;
    let got = fetch(&host, "a", json!({"url": url})).await;
    assert_eq!(got["kind"], "failed", "{got}");
    assert!(
        got["error"]
            .as_str()
            .unwrap()
            .contains("TlsCertificateError"),
        "the error says it is the server's certificate: {got}"
    );
    assert_eq!(provider.seen_at("/ok").len(), 1);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_outbound_ca_that_cannot_be_read_stops_the_host_and_says_which() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = crate::support::config(&dir.path().join("data"));
    let missing = dir.path().join("no-such-ca.pem");
    config.outbound_ca = Some(missing);
    let e = Host::start(config, &[probe(&[])])
        .await
        .err()
        .expect("refused");
    let text = format!("{e:#}");
    assert!(
        text.contains("outbound_ca") && text.contains("no-such-ca.pem"),
        "{text}"
    );
}
