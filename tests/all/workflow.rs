//! Durable workflows: steps commit once, retries and failure kinds, sleeps
//! across a restart, divergence, and side effects refused outside steps.

use std::time::{Duration, Instant};

use burrow::Host;
use burrow::workflow::{EntryKind, EntryStatus, HistoryEntry, WorkflowStatus, WorkflowView};
use serde_json::{Value, json};

use crate::support::{call, counter, eventually, restart, start, workflow_probe};

const ACTOR: &str = "workflow-probe";
const LONG: Duration = Duration::from_secs(30);

async fn create(host: &Host, key: &str, config: Value) {
    host.create(ACTOR, key, &config.to_string()).await.unwrap();
}

/// Waits until the workflow of `key` stops running; returns it.
async fn finished(host: &Host, key: &str) -> WorkflowView {
    eventually(
        LONG,
        &format!("the workflow of {key} to finish"),
        async || {
            let view = host.workflow(ACTOR, key).unwrap();
            view.record.status.is_final().then_some(view)
        },
    )
    .await
}

fn output(view: &WorkflowView) -> Value {
    assert_eq!(
        view.record.status,
        WorkflowStatus::Completed,
        "{:?}",
        view.record
    );
    serde_json::from_str(view.record.output.as_deref().unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn steps_commit_once_and_the_workflow_completes_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[workflow_probe()]).await;
    create(&host, "k", json!({"steps": 20})).await;
    let view = finished(&host, "k").await;
    assert_eq!(output(&view)["count"], 20);
    assert_eq!(view.history_len, 21);
    let done = call(&host, ACTOR, "k", "done", "[]").await;
    let done = done.as_array().unwrap();
    assert_eq!(done.len(), 20);
    assert!(done.iter().all(|d| d[1] == 1), "{done:?}");

    // A restart finds nothing to run again: no step body runs twice.
    let host = restart(host, &[workflow_probe()]).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(call(&host, ACTOR, "k", "count", "[]").await, 20);
    assert_eq!(host.workflow(ACTOR, "k").unwrap().record.runs, 1);
    // The record alone is the view's, without the history.
    let record = host.workflow_record(ACTOR, "k").unwrap();
    assert_eq!(record.status, WorkflowStatus::Completed);
    assert_eq!(record.output, view.record.output);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_durable_sleep_survives_a_restart_and_actions_read_meanwhile() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[workflow_probe()]).await;
    create(&host, "k", json!({"steps": 4, "sleep_ms": 1500})).await;
    let waiting = eventually(LONG, "the sleep", async || {
        let view = host.workflow(ACTOR, "k").unwrap();
        (view.record.status == WorkflowStatus::Waiting).then_some(view)
    })
    .await;
    assert_eq!(waiting.record.waiting_on.as_deref(), Some("sleep `nap`"));
    // Actions answer while the workflow sleeps.
    assert_eq!(call(&host, ACTOR, "k", "count", "[]").await, 2);

    let host = restart(host, &[workflow_probe()]).await;
    let view = finished(&host, "k").await;
    let out = output(&view);
    assert_eq!(out["count"], 4);
    let slept_from = out["slept_from"].as_i64().unwrap();
    let sleep = view
        .history
        .iter()
        .find(|e| e.name == "nap")
        .expect("the sleep is in the history");
    // The time was recorded just before the sleep's first run.
    let wake_at = sleep.wake_at.unwrap();
    assert!(
        (slept_from + 1500..slept_from + 2500).contains(&wake_at),
        "{slept_from} {wake_at}"
    );
    assert!(view.record.updated_at >= slept_from + 1500);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_host_restarts_at_once_while_a_workflow_waits_a_moment() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[workflow_probe()]).await;
    create(&host, "k", json!({"steps": 2, "sleep_ms": 800})).await;
    eventually(LONG, "the sleep", async || {
        let view = host.workflow(ACTOR, "k").unwrap();
        (view.record.status == WorkflowStatus::Waiting).then_some(())
    })
    .await;
    // The driver waits for the sleep in its task; the host must still be
    // free to go, and the next one to take the data directory.
    let host = restart(host, &[workflow_probe()]).await;
    assert_eq!(output(&finished(&host, "k").await)["count"], 2);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn failed_attempts_roll_back_and_retry_until_they_succeed_or_run_out() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[workflow_probe()]).await;
    create(&host, "heals", json!({"fail_until": 3, "retries": 3})).await;
    create(&host, "gives-up", json!({"fail_until": 9, "retries": 1})).await;

    let out = output(&finished(&host, "heals").await);
    assert_eq!(out["flaky"], json!({"ok": 3}));
    // Only the successful attempt's write is kept.
    assert_eq!(out["count"], 1000);

    let view = finished(&host, "gives-up").await;
    let out = output(&view);
    assert_eq!(out["flaky"]["kind"], "Exhausted");
    assert_eq!(out["flaky"]["attempts"], 2);
    assert_eq!(out["flaky"]["code"], "flaky");
    assert_eq!(out["count"], 0);
    let flaky = view.history.iter().find(|e| e.name == "flaky").unwrap();
    assert_eq!(flaky.failure_kind.as_deref(), Some("exhausted"));
    assert_eq!(flaky.error.as_deref(), Some("attempt 2 fails"));
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn critical_errors_timeouts_and_traps_are_told_apart() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[workflow_probe(), counter()]).await;
    create(
        &host,
        "k",
        json!({"critical": true, "spin_step": true, "trap_step": true, "try_block": true}),
    )
    .await;
    // Another instance answers while a step spins.
    let begun = Instant::now();
    while begun.elapsed() < Duration::from_millis(600) {
        let t = Instant::now();
        call(&host, "counter", "other", "increment", "[1]").await;
        assert!(
            t.elapsed() < Duration::from_millis(500),
            "{:?}",
            t.elapsed()
        );
    }
    let out = output(&finished(&host, "k").await);
    assert_eq!(out["fragile"]["kind"], "Critical");
    assert_eq!(out["fragile"]["attempts"], 1);
    assert_eq!(out["fragile"]["code"], "broken");
    assert_eq!(out["spin"]["kind"], "Timeout");
    assert_eq!(out["spin"]["attempts"], 1);
    let message = out["spin"]["message"].as_str().unwrap();
    assert!(message.contains("timeout of 300 ms"), "{message}");
    // The first attempt trapped and counted; the second committed.
    assert_eq!(out["panics"], 1);
    let done = call(&host, ACTOR, "k", "done", "[]").await;
    assert!(
        done.as_array().unwrap().contains(&json!(["panics", 2])),
        "{done}"
    );
    // try_block: block-a stays committed (roll forward), block-b's failure
    // is data.
    assert_eq!(out["block"]["kind"], "Exhausted");
    assert_eq!(out["block"]["code"], "nope");
    assert_eq!(out["count"], 2);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn every_side_effect_outside_a_step_gets_not_in_step() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[workflow_probe()]).await;
    create(&host, "k", json!({"probe_outside": true})).await;
    let out = output(&finished(&host, "k").await);
    let heard: Vec<String> = serde_json::from_value(out["outside"].clone()).unwrap();
    let calls = [
        "db.execute",
        "db.execute",
        "db.execute-batch",
        "state.get",
        "state.set",
        "queue.append",
        "schedule.after",
        "schedule.pending",
        "schedule.cancel",
        "actors.call",
        "actors.send",
        "events.broadcast",
    ];
    assert_eq!(heard.len(), calls.len());
    for (call, error) in calls.iter().zip(&heard) {
        // The db module returns the WIT error (`DbError::NotInStep`); state and
        // queue turn it into an SDK error with the code `not-in-step`.
        let not_in_step = error.contains("NotInStep") || error.starts_with("not-in-step");
        assert!(
            not_in_step && error.contains(call) && error.contains("outside a step"),
            "{call}: {error}"
        );
    }
    assert_eq!(out["count"], 0);
    assert_eq!(
        host.inspect(ACTOR, "k").unwrap().state,
        json!({"inside": true})
    );
    // Workflow imports are refused outside a workflow run.
    let heard = call(&host, ACTOR, "k", "workflow_call_in_action", "[]").await;
    let heard = heard.as_str().unwrap();
    assert!(
        heard.contains("Invalid") && heard.contains("only for a workflow's run"),
        "{heard}"
    );
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_that_meets_another_step_stops_as_diverged() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[workflow_probe()]).await;
    create(&host, "k", json!({"diverge": true})).await;
    let view = finished(&host, "k").await;
    assert_eq!(view.record.status, WorkflowStatus::Diverged);
    let error = view.record.error.unwrap();
    assert!(
        error.contains("position 0")
            && error.contains("step `first`")
            && error.contains("step `second`"),
        "{error}"
    );
    // The history is untouched.
    assert_eq!(view.history[0].name, "first");
    assert_eq!(call(&host, ACTOR, "k", "count", "[]").await, 1);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn orchestration_code_that_never_returns_fails_the_workflow() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = workflow_probe();
    spec.options.call_timeout = Duration::from_millis(300);
    let host = start(dir.path(), &[spec]).await;
    create(&host, "k", json!({"spin_orchestration": true})).await;
    let view = finished(&host, "k").await;
    assert_eq!(view.record.status, WorkflowStatus::Failed);
    let error = view.record.error.unwrap();
    assert!(error.contains("call timeout of 300 ms"), "{error}");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn orchestration_code_may_not_read_the_clock() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[workflow_probe()]).await;
    create(&host, "k", json!({"clock_in_orchestration": true})).await;
    let view = finished(&host, "k").await;
    assert_eq!(view.record.status, WorkflowStatus::Failed);
    let error = view.record.error.unwrap();
    assert!(
        error.contains("wasi:clocks/wall-clock.now was called by workflow orchestration code"),
        "{error}"
    );
    // The step that read the clock committed.
    assert_eq!(view.history[0].name, "clock");
    assert_eq!(view.history[0].status, burrow::workflow::EntryStatus::Done);
    host.shutdown().await;
}

/// Language runtimes read the monotonic clock for their own bookkeeping
/// (SpiderMonkey at every promise): orchestration code may read it, and it
/// stands still there, so a replay sees what the first run saw.
#[tokio::test(flavor = "multi_thread")]
async fn the_monotonic_clock_stands_still_in_orchestration_code() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[workflow_probe()]).await;
    create(&host, "k", json!({"monotonic_in_orchestration": true})).await;
    let view = finished(&host, "k").await;
    assert_eq!(view.record.status, WorkflowStatus::Completed, "{view:?}");
    let output: Value = serde_json::from_str(view.record.output.as_deref().unwrap()).unwrap();
    assert!(output["step_ms"].as_u64().unwrap() >= 20, "{output}");
    assert_eq!(output["orchestration_ms"], 0, "{output}");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn oversized_outputs_fail_the_step_and_the_workflow() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[workflow_probe()]).await;
    let n = burrow::config::MAX_RESULT_BYTES + 1;
    create(&host, "k", json!({ "big_output": n })).await;
    let view = finished(&host, "k").await;
    assert_eq!(view.record.status, WorkflowStatus::Failed);
    let error = view.record.error.unwrap();
    assert!(
        error.starts_with("limit-exceeded: the workflow's output"),
        "{error}"
    );
    let big = &view.history[0];
    assert_eq!(
        (big.failure_kind.as_deref(), big.error_code.as_deref()),
        (Some("critical"), Some("limit-exceeded"))
    );
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_actor_without_a_workflow_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[counter()]).await;
    call(&host, "counter", "k", "increment", "[1]").await;
    let err = host.workflow("counter", "k").unwrap_err();
    assert_eq!((err.code(), err.http_status()), ("no-workflow", 400));
    let err = host.workflow_record("counter", "k").unwrap_err();
    assert_eq!(err.code(), "no-workflow");
    let err = host.workflow_record("counter", "nobody").unwrap_err();
    assert_eq!(err.code(), "no-such-instance");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_long_loop_keeps_a_short_history() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[workflow_probe()]).await;
    let n = 10_000;
    create(&host, "k", json!({"loop_iterations": n})).await;
    let mut longest = 0;
    let view = eventually(LONG * 4, "the loop to finish", async || {
        let view = host.workflow(ACTOR, "k").unwrap();
        longest = longest.max(view.history_len);
        view.record.status.is_final().then_some(view)
    })
    .await;
    let out = output(&view);
    assert_eq!(
        (out["loop"].clone(), out["count"].clone()),
        (json!(n), json!(n))
    );
    // The loop's entry, the final step; while it ran, at most one
    // iteration's step besides.
    assert_eq!(view.history_len, 2, "{:?}", view.history);
    assert!(longest <= 3, "the history grew to {longest} entries");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_payment_loop_takes_queue_batches_once_each() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[workflow_probe()]).await;
    create(
        &host,
        "k",
        json!({"payment_batch": 5, "batch_timeout_ms": 700}),
    )
    .await;
    let mut total = 0;
    for i in 1..=12 {
        let payload = json!({"amount": i}).to_string();
        host.send(ACTOR, "k", "payment", &payload, Default::default())
            .await
            .unwrap();
        total += i;
    }
    // Not a payment: the loop leaves it in the queue.
    host.send(ACTOR, "k", "other", "null", Default::default())
        .await
        .unwrap();
    let view = finished(&host, "k").await;
    let out = output(&view);
    assert_eq!(out["applied"], 12);
    assert_eq!(out["count"], total);
    let done = call(&host, ACTOR, "k", "done", "[]").await;
    assert_eq!(done.as_array().unwrap().len(), 12);
    let queue = host.queue(ACTOR, "k").unwrap();
    let left: Vec<&str> = queue
        .pending
        .iter()
        .map(|e| e.event_type.as_str())
        .collect();
    assert_eq!(left, ["other"]);
    // Nothing would answer a sender that waits.
    let wait = burrow::SendOptions {
        wait: Some(Duration::from_secs(5)),
        ..Default::default()
    };
    let err = host
        .send(ACTOR, "k", "payment", "{}", wait)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "invalid-event", "{err}");
    assert!(err.to_string().contains("send without waiting"), "{err}");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_race_keeps_the_first_branch_to_finish() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[workflow_probe()]).await;
    create(&host, "approved", json!({"race_ms": 60_000})).await;
    create(&host, "late", json!({"race_ms": 300})).await;
    eventually(LONG, "the race to wait", async || {
        let view = host.workflow(ACTOR, "approved").unwrap();
        (view.record.status == WorkflowStatus::Waiting).then_some(())
    })
    .await;
    host.send(ACTOR, "approved", "approve", "null", Default::default())
        .await
        .unwrap();
    let out = output(&finished(&host, "approved").await);
    assert_eq!(out["race"][0], 0);
    assert!(
        out["race"][1]
            .as_str()
            .unwrap()
            .starts_with("approved by event")
    );

    let view = finished(&host, "late").await;
    let out = output(&view);
    assert_eq!(out["race"], json!([1, "timed out"]));
    // The losing queue wait was dropped from the history; an approval that
    // comes now stays in the queue.
    assert!(
        view.history.iter().all(|e| e.kind != EntryKind::Queue),
        "{:?}",
        view.history
    );
    host.send(ACTOR, "late", "approve", "null", Default::default())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(host.queue(ACTOR, "late").unwrap().pending_count, 1);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_join_waits_for_every_branch() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[workflow_probe()]).await;
    create(&host, "k", json!({"join_ms": 1500})).await;
    let waiting = eventually(LONG, "the join to wait", async || {
        let view = host.workflow(ACTOR, "k").unwrap();
        (view.record.status == WorkflowStatus::Waiting).then_some(view)
    })
    .await;
    assert_eq!(waiting.record.waiting_on.as_deref(), Some("sleep `pause`"));
    let join = |history: &[HistoryEntry]| {
        let joins: Vec<_> = history
            .iter()
            .filter(|e| e.kind == EntryKind::Join)
            .collect();
        assert_eq!(joins.len(), 1, "{history:?}");
        joins[0].status
    };
    assert_eq!(join(&waiting.history), EntryStatus::Running);
    // The quick branch ran while the slow one waits.
    assert_eq!(call(&host, ACTOR, "k", "count", "[]").await, 2);
    let view = finished(&host, "k").await;
    assert_eq!(output(&view)["join"], json!([3, 2]));
    // Once every branch ended, so did the join.
    assert_eq!(join(&view.history), EntryStatus::Done);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failure_after_a_checkpoint_runs_the_rollback_handlers() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[workflow_probe()]).await;
    create(&host, "k", json!({"rollback": true})).await;
    let view = finished(&host, "k").await;
    assert_eq!(view.record.status, WorkflowStatus::Failed);
    let error = view.record.error.unwrap();
    assert!(error.contains("declined"), "{error}");
    assert_eq!(call(&host, ACTOR, "k", "count", "[]").await, 0);
    let done = call(&host, ACTOR, "k", "done", "[]").await;
    assert_eq!(done, json!([["reserve", 1], ["undo reserve", 1]]));
    let names: Vec<&str> = view.history.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["reserve", "charge", "rollback reserve"]);

    // A step that asks for a rollback: data to try_step, not caught by
    // try_block, and the workflow rolls back.
    create(
        &host,
        "asked",
        json!({"rollback": true, "request_rollback": true}),
    )
    .await;
    let view = finished(&host, "asked").await;
    assert_eq!(view.record.status, WorkflowStatus::Failed);
    let error = view.record.error.unwrap();
    assert!(
        error.contains("fraud") && error.contains("Rollback"),
        "{error}"
    );
    let done = call(&host, ACTOR, "asked", "done", "[]").await;
    assert_eq!(
        done,
        json!([["reserve", 1], ["Rollback", 0], ["undo reserve", 1]])
    );
    let charge = view.history.iter().find(|e| e.name == "charge").unwrap();
    assert_eq!(charge.failure_kind.as_deref(), Some("rollback"));
    assert_eq!(charge.attempts, 1);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn removed_steps_and_versions_keep_old_histories_replaying() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[workflow_probe()]).await;
    create(&host, "k", json!({"remove_step": true})).await;
    let out = output(&finished(&host, "k").await);
    assert_eq!(out["version"], 7);
    assert_eq!(out["count"], 1);
    create(&host, "v", json!({"version": 2})).await;
    assert_eq!(output(&finished(&host, "v").await)["version"], 2);
    host.shutdown().await;
}

/// A step may not ask for a timeout past the host's maximum: its run fails
/// at once, naming the limit, instead of a step computing for as long as it
/// asked (for `u64::MAX` ms, with no deadline at all) and holding up the
/// shutdown. Within the maximum, a step may ask for more than the call
/// timeout.
#[tokio::test(flavor = "multi_thread")]
async fn a_step_cannot_ask_for_a_timeout_past_the_host_maximum() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[workflow_probe()]).await;
    let too_long = burrow::config::MAX_STEP_TIMEOUT.as_millis() as u64 + 1;
    let asks = [("long", too_long), ("forever", u64::MAX), ("allowed", 2500)];
    for (key, ms) in asks {
        create(&host, key, json!({ "patient_step_ms": ms })).await;
    }
    for (key, ms) in asks {
        let view = eventually(Duration::from_secs(10), key, async || {
            let view = host.workflow(ACTOR, key).unwrap();
            view.record.status.is_final().then_some(view)
        })
        .await;
        assert_eq!(view.record.status, WorkflowStatus::Failed, "{key}");
        let error = view.record.error.as_deref().unwrap();
        if key == "allowed" {
            assert!(error.contains("timeout of 2500 ms"), "{error}");
        } else {
            assert!(
                error.contains("step `patient`")
                    && error.contains(&format!("a timeout of {ms} ms"))
                    && error.contains("MAX_STEP_TIMEOUT"),
                "{error}"
            );
        }
    }
    let begun = Instant::now();
    host.shutdown().await;
    assert!(
        begun.elapsed() < Duration::from_secs(5),
        "{:?}",
        begun.elapsed()
    );
}

/// Consecutive steps of a run share their commits, and every step still
/// runs once.
#[tokio::test(flavor = "multi_thread")]
async fn the_steps_of_a_run_commit_together() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[workflow_probe()]).await;
    let before = host.commits();
    create(&host, "k", json!({"steps": 100})).await;
    let view = finished(&host, "k").await;
    assert_eq!(output(&view)["count"], 100);
    let commits = host.commits() - before;
    // The creation, a few batches, the end of the run: not one a step.
    assert!(commits < 50, "{commits} commits for 100 steps");
    let done = call(&host, ACTOR, "k", "done", "[]").await;
    assert_eq!(done.as_array().unwrap().len(), 100);
    host.shutdown().await;
}

/// A step that calls another actor from inside a batch of steps: the run
/// stops before the call, the steps before it commit, and the run goes on
/// with its steps alone. The call goes out once, after they are durable.
#[tokio::test(flavor = "multi_thread")]
async fn a_call_from_a_step_goes_out_only_after_the_steps_before_it_commit() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[workflow_probe()]).await;
    let nap_ms = 1_000;
    create(&host, "k", json!({ "call_nap_ms": nap_ms })).await;
    let done_at = |view: &WorkflowView, name: &str| {
        view.history
            .iter()
            .any(|e| e.kind == EntryKind::Step && e.name == name && e.status == EntryStatus::Done)
    };
    let begun = Instant::now();
    let (mut before_call, mut call_done) = (None, None);
    while call_done.is_none() {
        assert!(
            begun.elapsed() < LONG,
            "the workflow did not get past its call"
        );
        let view = host.workflow(ACTOR, "k").unwrap();
        if before_call.is_none() && done_at(&view, "before-call") {
            before_call = Some(Instant::now());
        }
        if done_at(&view, "call") {
            call_done = Some(Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (before_call, call_done) = (before_call.unwrap(), call_done.unwrap());
    // Committed together, both would show at once.
    assert!(
        call_done - before_call >= Duration::from_millis(nap_ms / 2),
        "step `before-call` was durable only {:?} before the call it precedes ended",
        call_done - before_call
    );
    let view = finished(&host, "k").await;
    let out = output(&view);
    assert_eq!(out["napped"], 1, "{out}");
    let done = call(&host, ACTOR, "k", "done", "[]").await;
    assert_eq!(
        done,
        json!([["before-call", 1], ["call", 1], ["after-call", 1]])
    );
    host.shutdown().await;
}
