//! `GET /metrics`: after a known workload, the scrape (parsed by a
//! Prometheus text-format parser) counts exactly what was done.

use std::time::Duration;

use burrow::{Host, SendOptions, SendOutcome};
use prometheus_parse::{Scrape, Value as Sample};
use serde_json::json;

use crate::support::*;

const LONG: Duration = Duration::from_secs(20);

/// The metrics of the server at `url`, parsed; checks the content type.
async fn scrape(url: &str) -> Scrape {
    let response = crate::support::http()
        .get(format!("{url}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let content_type = response.headers()["content-type"].to_str().unwrap();
    assert_eq!(content_type, "text/plain; version=0.0.4; charset=utf-8");
    let text = response.text().await.unwrap();
    Scrape::parse(text.lines().map(|line| Ok(line.to_owned()))).unwrap()
}

/// The value of the sample `name` whose labels are exactly `labels`.
fn value(scrape: &Scrape, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let sample = scrape.samples.iter().find(|s| {
        s.metric == name
            && s.labels.len() == labels.len()
            && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v))
    })?;
    Some(match &sample.value {
        Sample::Counter(v) | Sample::Gauge(v) | Sample::Untyped(v) => *v,
        other => panic!("{name} is not a number: {other:?}"),
    })
}

/// [`value`], which must be there.
fn get(scrape: &Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    value(scrape, name, labels).unwrap_or_else(|| panic!("no sample {name} {labels:?}"))
}

fn actor(name: &str) -> [(&'static str, &str); 1] {
    [("actor", name)]
}

fn outcome<'a>(name: &'a str, outcome: &'a str) -> [(&'static str, &'a str); 2] {
    [("actor", name), ("outcome", outcome)]
}

fn state<'a>(name: &'a str, state: &'a str) -> [(&'static str, &'a str); 2] {
    [("actor", name), ("state", state)]
}

/// Scrapes until `done` holds for the scrape (background work finishes
/// after the calls that started it answered).
async fn settled(url: &str, what: &str, done: impl Fn(&Scrape) -> bool) -> Scrape {
    eventually(LONG, what, async || {
        let scrape = scrape(url).await;
        done(&scrape).then_some(scrape)
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn the_counters_equal_the_work_done() {
    let dir = tempfile::tempdir().unwrap();
    let mut queue = queue_probe();
    queue.options.queue_max_attempts = 2;
    let actors = [counter(), probe(), queue, workflow_probe(), chat_room()];
    let host = start(dir.path(), &actors).await;
    let server = Server::start(host.clone()).await;
    let client = server.client();

    // Calls: 5 that succeed and 2 of an unknown action on the counter; on
    // the probe, 2 that succeed (they schedule), an error of the actor's
    // own and a trap.
    for n in 1..=5 {
        let result = client.call("counter", "c", "increment", "[1]").await;
        assert_eq!(result.unwrap(), n.to_string());
    }
    for _ in 0..2 {
        let e = client.call("counter", "c", "nope", "[]").await.unwrap_err();
        assert_eq!(e.code, "unknown-action");
    }
    let e = client
        .call("probe", "p", "fail_with", r#"["planned", "no"]"#)
        .await
        .unwrap_err();
    assert_eq!(e.code, "action-failed");
    let e = client
        .call("probe", "p", "add_then_trap", r#"["x"]"#)
        .await
        .unwrap_err();
    assert_eq!(e.code, "trapped");
    // Schedules: one that succeeds, one whose action fails.
    client
        .call("probe", "p", "later", r#"[10, "bump", []]"#)
        .await
        .unwrap();
    client
        .call(
            "probe",
            "p",
            "later",
            r#"[10, "fail_with", ["late", "no"]]"#,
        )
        .await
        .unwrap();

    // Queue events: 3 processed, 1 dead-lettered after its 2 attempts.
    host.create("queue-probe", "q", "{}").await.unwrap();
    let wait = SendOptions {
        wait: Some(LONG),
        ..SendOptions::default()
    };
    for n in 0..3 {
        let sent = host
            .send("queue-probe", "q", "ok", &n.to_string(), wait.clone())
            .await
            .unwrap();
        assert!(matches!(sent, SendOutcome::Processed { .. }), "{sent:?}");
    }
    let failing = json!({"until_healed": true}).to_string();
    let sent = host
        .send("queue-probe", "q", "fail", &failing, wait)
        .await
        .unwrap();
    assert!(matches!(sent, SendOutcome::DeadLettered { .. }), "{sent:?}");

    // Workflows: one runs to completion, one sleeps for a minute.
    host.create("workflow-probe", "done", r#"{"steps": 3}"#)
        .await
        .unwrap();
    host.create(
        "workflow-probe",
        "sleeper",
        r#"{"steps": 1, "sleep_ms": 60000}"#,
    )
    .await
    .unwrap();

    // A connection: the connect hook's event, then a post's.
    let room = client.actor("chat-room", "lobby");
    let mut ada = room
        .subscribe(Some(&json!({ "name": "ada" })))
        .await
        .unwrap();
    crate::client::expect_event(&mut ada, "joined").await;
    let _: i64 = room.call("post", &("ada", "hello")).await.unwrap();
    crate::client::expect_event(&mut ada, "message").await;

    let m = settled(&server.url, "the background work", |m| {
        value(
            m,
            "burrow_schedule_runs_total",
            &outcome("probe", "action-failed"),
        ) == Some(1.0)
            && value(
                m,
                "burrow_workflows_finished_total",
                &state("workflow-probe", "completed"),
            ) == Some(1.0)
            && value(m, "burrow_workflows", &state("workflow-probe", "waiting")) == Some(1.0)
            && value(m, "burrow_workflows", &state("workflow-probe", "running")) == Some(0.0)
            && value(m, "burrow_queue_depth", &actor("queue-probe")) == Some(0.0)
    })
    .await;

    // Calls by actor and outcome, and their durations.
    assert_eq!(
        get(&m, "burrow_calls_total", &outcome("counter", "ok")),
        5.0
    );
    assert_eq!(
        get(
            &m,
            "burrow_calls_total",
            &outcome("counter", "unknown-action")
        ),
        2.0
    );
    assert_eq!(get(&m, "burrow_calls_total", &outcome("probe", "ok")), 2.0);
    assert_eq!(
        get(&m, "burrow_calls_total", &outcome("probe", "action-failed")),
        1.0
    );
    assert_eq!(
        get(&m, "burrow_calls_total", &outcome("probe", "trapped")),
        1.0
    );
    assert_eq!(
        get(&m, "burrow_calls_total", &outcome("chat-room", "ok")),
        1.0
    );
    assert_eq!(
        value(&m, "burrow_calls_total", &outcome("counter", "trapped")),
        None,
        "no series for outcomes that did not happen"
    );
    assert_eq!(
        get(&m, "burrow_call_duration_seconds_count", &actor("counter")),
        7.0
    );
    let buckets = m
        .samples
        .iter()
        .find(|s| {
            s.metric == "burrow_call_duration_seconds" && s.labels.get("actor") == Some("counter")
        })
        .expect("the counter's histogram");
    let Sample::Histogram(buckets) = &buckets.value else {
        panic!("not a histogram: {buckets:?}");
    };
    let inf = buckets
        .iter()
        .find(|b| b.less_than == f64::INFINITY)
        .unwrap();
    assert_eq!(inf.count, 7.0);
    assert!(get(&m, "burrow_call_duration_seconds_sum", &actor("counter")) > 0.0);

    // Schedules.
    assert_eq!(
        get(&m, "burrow_schedule_runs_total", &outcome("probe", "ok")),
        1.0
    );
    assert_eq!(
        get(
            &m,
            "burrow_schedule_runs_total",
            &outcome("probe", "action-failed")
        ),
        1.0
    );

    // The queue.
    assert_eq!(
        get(
            &m,
            "burrow_queue_events_processed_total",
            &actor("queue-probe")
        ),
        3.0
    );
    assert_eq!(
        get(
            &m,
            "burrow_queue_events_failed_total",
            &actor("queue-probe")
        ),
        2.0
    );
    assert_eq!(
        get(
            &m,
            "burrow_queue_events_dead_lettered_total",
            &actor("queue-probe")
        ),
        1.0
    );

    // Workflows.
    assert_eq!(
        get(
            &m,
            "burrow_workflows_started_total",
            &actor("workflow-probe")
        ),
        2.0
    );
    assert!(get(&m, "burrow_workflow_runs_total", &actor("workflow-probe")) >= 2.0);
    for failed in ["failed", "diverged"] {
        assert_eq!(
            get(
                &m,
                "burrow_workflows_finished_total",
                &state("workflow-probe", failed)
            ),
            0.0
        );
    }

    // Connections.
    assert_eq!(get(&m, "burrow_connections", &actor("chat-room")), 1.0);
    assert_eq!(
        get(
            &m,
            "burrow_connection_events_sent_total",
            &actor("chat-room")
        ),
        2.0
    );

    // Commits: what the host counts.
    assert_eq!(get(&m, "burrow_commits_total", &[]), host.commits() as f64);
    // Instances: all awake (none slept yet), none asleep.
    assert_eq!(get(&m, "burrow_instances_awake", &actor("counter")), 1.0);
    assert_eq!(get(&m, "burrow_instances_asleep", &actor("counter")), 0.0);
    assert_eq!(
        get(
            &m,
            "burrow_evictions_total",
            &[("actor", "counter"), ("reason", "room")]
        ),
        0.0
    );

    drop(ada);
    settled(&server.url, "the connection's close", |m| {
        value(m, "burrow_connections", &actor("chat-room")) == Some(0.0)
    })
    .await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn evictions_and_sleeping_instances_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(dir.path());
    config.max_awake = 2;
    let actors = [counter(), sleepy_probe(Duration::from_millis(100))];
    let host = Host::start(config, &actors).await.unwrap();
    let server = Server::start(host.clone()).await;
    // A third counter makes room: the least recently used goes to sleep.
    for key in ["a", "b", "c"] {
        call(&host, "counter", key, "increment", "[1]").await;
    }
    let m = scrape(&server.url).await;
    let room = [("actor", "counter"), ("reason", "room")];
    assert_eq!(get(&m, "burrow_evictions_total", &room), 1.0);
    assert_eq!(get(&m, "burrow_instances_awake", &actor("counter")), 2.0);
    assert_eq!(get(&m, "burrow_instances_asleep", &actor("counter")), 1.0);

    // A probe idle past its sleep timeout is put to sleep by the reaper
    // (a counter makes room for it first). The eviction is counted when
    // it begins, the instance no longer awake once its sleep hook has run,
    // and asleep once the reaper has let go of its slot.
    call(&host, "probe", "p", "bump", "[]").await;
    let idle = [("actor", "probe"), ("reason", "idle")];
    let m = settled(&server.url, "the idle probe to sleep", |m| {
        value(m, "burrow_evictions_total", &idle) == Some(1.0)
            && value(m, "burrow_instances_awake", &actor("probe")) == Some(0.0)
            && value(m, "burrow_instances_asleep", &actor("probe")) == Some(1.0)
    })
    .await;
    assert_eq!(get(&m, "burrow_evictions_total", &room), 2.0);
    assert_eq!(get(&m, "burrow_instances_awake", &actor("probe")), 0.0);
    assert_eq!(get(&m, "burrow_instances_asleep", &actor("probe")), 1.0);
    assert_eq!(
        get(&m, "burrow_instances_awake", &actor("counter"))
            + get(&m, "burrow_instances_asleep", &actor("counter")),
        3.0
    );
    server.stop().await;
}

/// In `synchronous = full`, every commit's log sync is counted with the
/// time it waited for the disk, in the scrape and in `Host::log_syncs`;
/// in `normal` mode there is none.
#[tokio::test(flavor = "multi_thread")]
async fn log_syncs_are_counted_in_full_mode_only() {
    for (synchronous, syncing) in [
        (burrow::Synchronous::Normal, false),
        (burrow::Synchronous::Full, true),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut config = config(dir.path());
        config.synchronous = synchronous;
        let host = Host::start(config, &[counter()]).await.unwrap();
        let server = Server::start(host.clone()).await;
        for _ in 0..3 {
            call(&host, "counter", "a", "increment", "[1]").await;
        }
        let m = scrape(&server.url).await;
        let syncs = host.log_syncs();
        assert_eq!(
            get(&m, "burrow_log_sync_seconds_count", &[]),
            syncs.syncs as f64
        );
        let waited = get(&m, "burrow_log_sync_seconds_sum", &[]);
        assert!(
            (waited - syncs.waited.as_secs_f64()).abs() < 1e-6,
            "{waited} {syncs:?}"
        );
        if syncing {
            // The creation's commit and one a call, at least.
            assert!(syncs.syncs >= 3, "{syncs:?}");
            assert!(syncs.waited > Duration::ZERO, "{syncs:?}");
        } else {
            assert_eq!(syncs, burrow::LogSyncs::default());
        }
        server.stop().await;
    }
}

/// Bad input to the metrics (actors the host does not define, codes a
/// peer made up) makes no series, and the host keeps answering.
#[tokio::test(flavor = "multi_thread")]
async fn calls_to_unknown_actors_make_no_series() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(start(dir.path(), &[counter()]).await).await;
    let client = server.client();
    for name in ["ghost", "x\"y", "a{b}"] {
        assert!(client.call(name, "k", "go", "[]").await.is_err());
    }
    let m = scrape(&server.url).await;
    assert!(
        m.samples
            .iter()
            .all(|s| s.labels.get("actor").is_none_or(|a| a == "counter")),
        "{:?}",
        m.samples
    );
    server.stop().await;
}

/// `--log-format json`: one JSON object a line, and a line written during
/// a call carries the call's span with its actor, key and action.
#[test]
fn json_logs_carry_the_span_of_the_call() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("burrow.toml");
    std::fs::write(
        &manifest,
        format!(
            "[host]\ndata_dir = \"data\"\n\n[actors.probe]\ncomponent = {:?}\n",
            programs::PROBE
        ),
    )
    .unwrap();
    let output = crate::support::burrow_command()
        .arg("--manifest")
        .arg(&manifest)
        .args(["--log-format", "json", "call", "--local", "probe", "k"])
        .args(["shout", "[\"marker-5113\"]"])
        .env("BURROW_LOG", "burrow=debug")
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let stderr = String::from_utf8(output.stderr).unwrap();
    let lines: Vec<serde_json::Value> = stderr
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    let shout = lines
        .iter()
        .find(|line| line["fields"]["message"].as_str() == Some("log: marker-5113"))
        .unwrap_or_else(|| panic!("no guest line in {stderr}"));
    assert_eq!(shout["target"], "burrow::guest");
    assert_eq!(
        shout["span"],
        json!({"name": "call", "actor": "probe", "key": "k", "action": "shout"}),
        "{shout}"
    );
    assert_eq!(shout["spans"][0]["name"], "call", "{shout}");
}
