//! A host's metrics, in the Prometheus text format (`GET /metrics`).
//!
//! Every host has a registry of its own (`prometheus-client`), so that
//! several hosts in one process count apart. Each actor of the manifest
//! gets its handles ([`ActorMetrics`]) when the host starts: recording is
//! an atomic add on a handle found by the actor's name, with no lock and
//! no allocation on the path of a call. Failed calls, the rarer path, find
//! their counter by code in a family (a read lock).
//!
//! What only the host knows at a scrape (asleep instances, open
//! connections) is set on its gauges by the host just before it encodes
//! ([`ActorMetrics::set_asleep`], [`ActorMetrics::set_connections`]).
//!
//! This module is a leaf: the layers that record call it, and it names
//! nothing of theirs but [`Error`]'s code.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::Registry;

use crate::address::ByActor;
use crate::error::Error;

/// The `Content-Type` of [`Metrics::encode`]'s text.
pub(crate) const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// Upper bounds of the call duration histogram's buckets, in seconds: an
/// in-process call takes tens of microseconds, one over HTTP hundreds, and
/// a call may run up to its actor's `call_timeout`.
const DURATION_BUCKETS: [f64; 18] = [
    0.000_01, 0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025,
    0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];

/// The same bounds in nanoseconds, compared with a duration's.
const DURATION_BUCKETS_NANOS: [u64; 18] = {
    let mut nanos = [0; 18];
    let mut i = 0;
    while i < 18 {
        nanos[i] = (DURATION_BUCKETS[i] * 1e9) as u64;
        i += 1;
    }
    nanos
};

/// The codes an outcome label may take: a code outside the list (one a
/// remote host sent) counts as `other`, so no input makes new series.
const CODES: &[&str] = &[
    "unknown-actor",
    "compiling",
    "load-failed",
    "unknown-action",
    "invalid-arguments",
    "invalid-address",
    "no-such-instance",
    "already-exists",
    "action-failed",
    "trapped",
    "timeout",
    "overloaded",
    "storage",
    "limit-exceeded",
    "shutting-down",
    "no-queue",
    "no-workflow",
    "no-http-handler",
    "invalid-event",
    "payload-too-large",
    "queue-full",
    "no-such-event",
    "conflict",
    "connection-refused",
    "too-many-connections",
    "moved",
    "not-replicated",
    "cluster-unavailable",
];

/// The outcome label of a failure: its code, if it is one of [`CODES`].
fn outcome(e: &Error) -> &'static str {
    let code = e.code();
    CODES
        .iter()
        .find(|known| **known == code)
        .copied()
        .unwrap_or("other")
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ActorLabel {
    actor: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    actor: String,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    actor: String,
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    actor: String,
    reason: &'static str,
}

/// Why instances were handed to another host of the cluster.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HandoverLabels {
    reason: &'static str,
}

/// A histogram of durations in atomics: an observation is two atomic
/// adds (its bucket and the sum), with no lock. The count is the sum of
/// the buckets read at the scrape, so the `+Inf` bucket and `_count`
/// always agree.
#[derive(Clone, Debug, Default)]
pub(crate) struct DurationHistogram(Arc<HistogramCells>);

#[derive(Debug, Default)]
struct HistogramCells {
    /// Observations per bucket (not cumulative); the last one is `+Inf`.
    buckets: [AtomicU64; DURATION_BUCKETS.len() + 1],
    sum_nanos: AtomicU64,
}

impl DurationHistogram {
    pub(crate) fn observe(&self, duration: Duration) {
        let nanos = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
        let bucket = DURATION_BUCKETS_NANOS.partition_point(|bound| *bound < nanos);
        self.0.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        self.0.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// Observations so far.
    pub(crate) fn count(&self) -> u64 {
        self.0
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .sum()
    }

    /// The durations observed so far, added up.
    pub(crate) fn sum(&self) -> Duration {
        Duration::from_nanos(self.0.sum_nanos.load(Ordering::Relaxed))
    }
}

impl TypedMetric for DurationHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for DurationHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let mut buckets = [(0.0, 0); DURATION_BUCKETS.len() + 1];
        let mut count = 0;
        for (i, cell) in self.0.buckets.iter().enumerate() {
            let n = cell.load(Ordering::Relaxed);
            let bound = DURATION_BUCKETS.get(i).copied().unwrap_or(f64::INFINITY);
            buckets[i] = (bound, n);
            count += n;
        }
        let sum = self.0.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

/// A counter kept elsewhere (the commit stage's), shown as is.
#[derive(Clone, Debug)]
struct SharedCounter(Arc<AtomicU64>);

impl TypedMetric for SharedCounter {
    const TYPE: MetricType = MetricType::Counter;
}

impl EncodeMetric for SharedCounter {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_counter::<NoLabelSet, _, u64>(&self.0.load(Ordering::Relaxed), None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

/// The families of a host's registry; each actor's handles are members.
#[derive(Default)]
struct Families {
    calls: Family<OutcomeLabels, Counter>,
    call_duration: Family<ActorLabel, DurationHistogram>,
    queue_depth: Family<ActorLabel, Gauge>,
    events_processed: Family<ActorLabel, Counter>,
    events_failed: Family<ActorLabel, Counter>,
    events_dead_lettered: Family<ActorLabel, Counter>,
    workflows_started: Family<ActorLabel, Counter>,
    workflow_runs: Family<ActorLabel, Counter>,
    workflows_finished: Family<StateLabels, Counter>,
    workflows: Family<StateLabels, Gauge>,
    schedule_runs: Family<OutcomeLabels, Counter>,
    instances_awake: Family<ActorLabel, Gauge>,
    instances_asleep: Family<ActorLabel, Gauge>,
    evictions: Family<ReasonLabels, Counter>,
    connections: Family<ActorLabel, Gauge>,
    events_sent: Family<ActorLabel, Counter>,
    outbound_requests: Family<OutcomeLabels, Counter>,
    outbound_duration: Family<ActorLabel, DurationHistogram>,
}

impl Families {
    fn register(&self, registry: &mut Registry) {
        registry.register(
            "burrow_calls",
            "Action calls run on this host, by actor and outcome: ok, or the error's code",
            self.calls.clone(),
        );
        registry.register(
            "burrow_call_duration_seconds",
            "Time from a call's arrival at its host to its answer, by actor",
            self.call_duration.clone(),
        );
        registry.register(
            "burrow_queue_depth",
            "Pending queue events of the actor's instances, as their queue pumps last counted them",
            self.queue_depth.clone(),
        );
        registry.register(
            "burrow_queue_events_processed",
            "Queue events whose processing committed",
            self.events_processed.clone(),
        );
        registry.register(
            "burrow_queue_events_failed",
            "Failed attempts to process a queue event (each retry or dead letter counts one)",
            self.events_failed.clone(),
        );
        registry.register(
            "burrow_queue_events_dead_lettered",
            "Queue events moved to the dead letters after their last attempt",
            self.events_dead_lettered.clone(),
        );
        registry.register(
            "burrow_workflows_started",
            "Workflows started by the creation of their instance",
            self.workflows_started.clone(),
        );
        registry.register(
            "burrow_workflow_runs",
            "Runs of workflows' orchestration code (each replay from the start counts one)",
            self.workflow_runs.clone(),
        );
        registry.register(
            "burrow_workflows_finished",
            "Workflows that reached a final state: completed, failed or diverged",
            self.workflows_finished.clone(),
        );
        registry.register(
            "burrow_workflows",
            "Workflows not finished that this host ran or started since it started, by state: running or waiting",
            self.workflows.clone(),
        );
        registry.register(
            "burrow_schedule_runs",
            "Scheduled actions run, by actor and outcome: ok, or the error's code",
            self.schedule_runs.clone(),
        );
        registry.register(
            "burrow_instances_awake",
            "Wasm instances awake, queue workers included (what --max-awake bounds)",
            self.instances_awake.clone(),
        );
        registry.register(
            "burrow_instances_asleep",
            "Instances this host's index lists that are not awake (not reported in a cluster)",
            self.instances_asleep.clone(),
        );
        registry.register(
            "burrow_evictions",
            "Instances put to sleep, by reason: room (to wake another at --max-awake) or idle (past sleep_timeout)",
            self.evictions.clone(),
        );
        registry.register(
            "burrow_connections",
            "Client connections (WebSockets) open",
            self.connections.clone(),
        );
        registry.register(
            "burrow_connection_events_sent",
            "Events handed to client connections (one per event and connection)",
            self.events_sent.clone(),
        );
        registry.register(
            "burrow_outbound_requests",
            "Outgoing HTTP requests of actors, by actor and outcome: answered, or why not (denied, limit, not-in-step, not-allowed, timeout, too-large, failed)",
            self.outbound_requests.clone(),
        );
        registry.register(
            "burrow_outbound_request_duration_seconds",
            "Time from an outgoing request's send to its answer's head, or to its failure, by actor",
            self.outbound_duration.clone(),
        );
    }
}

/// A host's metrics: its registry and each actor's handles.
pub(crate) struct Metrics {
    registry: Registry,
    actors: ByActor<String, Arc<ActorMetrics>>,
    /// Handles of no family, for an actor the host does not define.
    detached: Arc<ActorMetrics>,
    commits: Arc<AtomicU64>,
    log_syncs: DurationHistogram,
    cluster_leases: Gauge,
    handovers: Family<HandoverLabels, Counter>,
}

impl Metrics {
    /// The metrics of a host with these actors.
    pub(crate) fn new<'a>(actors: impl IntoIterator<Item = &'a str>) -> Metrics {
        let families = Families::default();
        let mut registry = Registry::default();
        let commits = Arc::new(AtomicU64::new(0));
        registry.register(
            "burrow_commits",
            "Transactions of instances committed since the host started (a batch of calls counts once)",
            SharedCounter(commits.clone()),
        );
        families.register(&mut registry);
        let log_syncs = DurationHistogram::default();
        registry.register(
            "burrow_log_sync_seconds",
            "Syncs of instances' write-ahead logs in synchronous = full (one a commit), and how long each waited for the disk",
            log_syncs.clone(),
        );
        let cluster_leases = Gauge::default();
        registry.register(
            "burrow_cluster_leases",
            "Instances whose lease this host holds and has taken up (0 on a host alone)",
            cluster_leases.clone(),
        );
        let handovers = Family::<HandoverLabels, Counter>::default();
        registry.register(
            "burrow_cluster_handovers",
            "Instances this host handed to another host of its cluster, by reason: drain, or spread (beyond its fair share)",
            handovers.clone(),
        );
        let actors = actors
            .into_iter()
            .map(|name| {
                (
                    name.to_owned(),
                    Arc::new(ActorMetrics::new(&families, name)),
                )
            })
            .collect();
        Metrics {
            registry,
            actors,
            detached: Arc::new(ActorMetrics::new(&Families::default(), "")),
            commits,
            log_syncs,
            cluster_leases,
            handovers,
        }
    }

    /// Sets how many leases this host holds (at a scrape).
    pub(crate) fn set_cluster_leases(&self, leases: u64) {
        self.cluster_leases.set(leases as i64);
    }

    /// Counts an instance handed to another host, for `reason` (`drain`
    /// or `spread`).
    pub(crate) fn handed_over(&self, reason: &'static str) {
        self.handovers
            .get_or_create(&HandoverLabels { reason })
            .inc();
    }

    /// The handles of `actor` (handles that count nowhere for an actor the
    /// host does not define).
    pub(crate) fn actor(&self, actor: &str) -> &Arc<ActorMetrics> {
        self.actors.get(actor).unwrap_or(&self.detached)
    }

    /// Every defined actor's handles.
    pub(crate) fn actors(&self) -> impl Iterator<Item = &Arc<ActorMetrics>> {
        self.actors.values()
    }

    /// The counter of commits, which the commit stage adds to.
    pub(crate) fn commits(&self) -> Arc<AtomicU64> {
        self.commits.clone()
    }

    /// The histogram of log syncs, which the commit stage adds to.
    pub(crate) fn log_syncs(&self) -> DurationHistogram {
        self.log_syncs.clone()
    }

    /// The metrics as Prometheus text (format 0.0.4).
    pub(crate) fn encode(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut text, &self.registry)
            .expect("writing to a String does not fail");
        text
    }
}

/// The phase of a workflow that has not finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Running,
    Waiting,
}

/// The final states of a workflow, as stored.
const FINAL_STATES: [&str; 3] = ["completed", "failed", "diverged"];

/// One actor's handles in its host's families.
#[derive(Debug)]
pub(crate) struct ActorMetrics {
    name: String,
    calls: Family<OutcomeLabels, Counter>,
    calls_ok: Counter,
    call_duration: DurationHistogram,
    queue_depth: Gauge,
    /// Pending events by key, as each instance's pump last counted them.
    depths: Mutex<HashMap<Box<str>, i64>>,
    events_processed: Counter,
    events_failed: Counter,
    events_dead_lettered: Counter,
    workflows_started: Counter,
    workflow_runs: Counter,
    workflows_finished: [Counter; 3],
    running: Gauge,
    waiting: Gauge,
    /// The phase of each workflow not finished, by key.
    phases: Mutex<HashMap<Box<str>, Phase>>,
    schedule_runs: Family<OutcomeLabels, Counter>,
    schedule_runs_ok: Counter,
    awake: Gauge,
    asleep: Gauge,
    evicted_for_room: Counter,
    evicted_idle: Counter,
    connections: Gauge,
    events_sent: Counter,
    outbound_requests: Family<OutcomeLabels, Counter>,
    outbound_duration: DurationHistogram,
}

/// Why an instance was put to sleep.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Eviction {
    /// To make room for another at `--max-awake`.
    Room,
    /// Idle past its actor's `sleep_timeout`.
    Idle,
}

impl ActorMetrics {
    fn new(families: &Families, name: &str) -> ActorMetrics {
        let actor = ActorLabel {
            actor: name.to_owned(),
        };
        let with = |outcome| OutcomeLabels {
            actor: name.to_owned(),
            outcome,
        };
        let state = |state| StateLabels {
            actor: name.to_owned(),
            state,
        };
        let reason = |reason| ReasonLabels {
            actor: name.to_owned(),
            reason,
        };
        let finished =
            FINAL_STATES.map(|s| families.workflows_finished.get_or_create_owned(&state(s)));
        ActorMetrics {
            name: name.to_owned(),
            calls: families.calls.clone(),
            calls_ok: families.calls.get_or_create_owned(&with("ok")),
            call_duration: families.call_duration.get_or_create_owned(&actor),
            queue_depth: families.queue_depth.get_or_create_owned(&actor),
            depths: Mutex::default(),
            events_processed: families.events_processed.get_or_create_owned(&actor),
            events_failed: families.events_failed.get_or_create_owned(&actor),
            events_dead_lettered: families.events_dead_lettered.get_or_create_owned(&actor),
            workflows_started: families.workflows_started.get_or_create_owned(&actor),
            workflow_runs: families.workflow_runs.get_or_create_owned(&actor),
            workflows_finished: finished,
            running: families.workflows.get_or_create_owned(&state("running")),
            waiting: families.workflows.get_or_create_owned(&state("waiting")),
            phases: Mutex::default(),
            schedule_runs: families.schedule_runs.clone(),
            schedule_runs_ok: families.schedule_runs.get_or_create_owned(&with("ok")),
            awake: families.instances_awake.get_or_create_owned(&actor),
            asleep: families.instances_asleep.get_or_create_owned(&actor),
            evicted_for_room: families.evictions.get_or_create_owned(&reason("room")),
            evicted_idle: families.evictions.get_or_create_owned(&reason("idle")),
            connections: families.connections.get_or_create_owned(&actor),
            events_sent: families.events_sent.get_or_create_owned(&actor),
            outbound_requests: families.outbound_requests.clone(),
            outbound_duration: families.outbound_duration.get_or_create_owned(&actor),
        }
    }

    /// The actor's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// A call that arrived at `began` ended with `result`.
    pub(crate) fn call_ended<T>(&self, began: Instant, result: &Result<T, Error>) {
        self.call_duration.observe(began.elapsed());
        match result {
            Ok(_) => {
                self.calls_ok.inc();
            }
            Err(e) => {
                self.failed(&self.calls, e);
            }
        }
    }

    fn failed(&self, family: &Family<OutcomeLabels, Counter>, e: &Error) {
        let labels = OutcomeLabels {
            actor: self.name.clone(),
            outcome: outcome(e),
        };
        family.get_or_create(&labels).inc();
    }

    /// A scheduled action ran, with this outcome.
    pub(crate) fn schedule_ran(&self, result: Result<(), &Error>) {
        match result {
            Ok(()) => {
                self.schedule_runs_ok.inc();
            }
            Err(e) => self.failed(&self.schedule_runs, e),
        }
    }

    /// A queue event's processing committed.
    pub(crate) fn event_processed(&self) {
        self.events_processed.inc();
    }

    /// An attempt to process a queue event failed; `dead_lettered` if it
    /// was the last.
    pub(crate) fn event_failed(&self, dead_lettered: bool) {
        self.events_failed.inc();
        if dead_lettered {
            self.events_dead_lettered.inc();
        }
    }

    /// The queue of instance `key` holds `pending` events.
    pub(crate) fn queue_depth(&self, key: &str, pending: u64) {
        let pending = i64::try_from(pending).unwrap_or(i64::MAX);
        let mut depths = self.depths.lock().unwrap_or_else(|e| e.into_inner());
        let before = if pending == 0 {
            depths.remove(key).unwrap_or(0)
        } else {
            match depths.get_mut(key) {
                Some(depth) => std::mem::replace(depth, pending),
                None => {
                    depths.insert(key.into(), pending);
                    0
                }
            }
        };
        self.queue_depth.inc_by(pending - before);
    }

    /// The creation of instance `key` started its workflow.
    pub(crate) fn workflow_started(&self, key: &str) {
        self.workflows_started.inc();
        self.set_phase(key, Some(Phase::Running));
    }

    /// A run of the workflow of instance `key` begins.
    pub(crate) fn workflow_run(&self, key: &str) {
        self.workflow_runs.inc();
        self.set_phase(key, Some(Phase::Running));
    }

    /// The workflow of instance `key` waits (for a time, or its queue).
    pub(crate) fn workflow_waits(&self, key: &str) {
        self.set_phase(key, Some(Phase::Waiting));
    }

    /// The workflow of instance `key` reached the final `state`.
    pub(crate) fn workflow_finished(&self, key: &str, state: &str) {
        if let Some(i) = FINAL_STATES.iter().position(|s| *s == state) {
            self.workflows_finished[i].inc();
        }
        self.set_phase(key, None);
    }

    fn set_phase(&self, key: &str, phase: Option<Phase>) {
        let mut phases = self.phases.lock().unwrap_or_else(|e| e.into_inner());
        let before = match phase {
            None => phases.remove(key),
            Some(phase) => match phases.get_mut(key) {
                Some(was) => Some(std::mem::replace(was, phase)),
                None => {
                    phases.insert(key.into(), phase);
                    None
                }
            },
        };
        if before == phase {
            return;
        }
        match before {
            Some(Phase::Running) => self.running.dec(),
            Some(Phase::Waiting) => self.waiting.dec(),
            None => 0,
        };
        match phase {
            Some(Phase::Running) => self.running.inc(),
            Some(Phase::Waiting) => self.waiting.inc(),
            None => 0,
        };
    }

    /// Instance `key` was destroyed: its queue and workflow count no more.
    pub(crate) fn forget_instance(&self, key: &str) {
        self.queue_depth(key, 0);
        self.set_phase(key, None);
    }

    /// An awake instance was put to sleep.
    pub(crate) fn evicted(&self, why: Eviction) {
        match why {
            Eviction::Room => self.evicted_for_room.inc(),
            Eviction::Idle => self.evicted_idle.inc(),
        };
    }

    /// An event was handed to a client connection.
    /// An outgoing HTTP request ended (`outcome`: `answered`, or why
    /// not) after `took`.
    pub(crate) fn outbound_ended(&self, outcome: &'static str, took: Duration) {
        self.outbound_requests
            .get_or_create(&OutcomeLabels {
                actor: self.name.clone(),
                outcome,
            })
            .inc();
        self.outbound_duration.observe(took);
    }

    pub(crate) fn event_sent(&self) {
        self.events_sent.inc();
    }

    /// A wasm instance of the actor woke (a cell started).
    pub(crate) fn woke(&self) {
        self.awake.inc();
    }

    /// A wasm instance of the actor went away.
    pub(crate) fn slept(&self) {
        self.awake.dec();
    }

    /// At a scrape: instances asleep.
    pub(crate) fn set_asleep(&self, asleep: u64) {
        self.asleep.set(i64::try_from(asleep).unwrap_or(i64::MAX));
    }

    /// At a scrape: client connections open.
    pub(crate) fn set_connections(&self, open: u64) {
        self.connections
            .set(i64::try_from(open).unwrap_or(i64::MAX));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(code: &str) -> Error {
        Error::Failed {
            actor: "a".into(),
            key: "k".into(),
            during: "action x".into(),
            code: code.into(),
            message: "no".into(),
        }
    }

    #[test]
    fn durations_fall_in_the_bucket_whose_bound_they_do_not_pass() {
        let h = DurationHistogram::default();
        h.observe(Duration::from_micros(10));
        h.observe(Duration::from_micros(11));
        h.observe(Duration::from_secs(60));
        let counts: Vec<u64> =
            h.0.buckets
                .iter()
                .map(|b| b.load(Ordering::Relaxed))
                .collect();
        assert_eq!(counts[0], 1, "10 µs is at the first bound");
        assert_eq!(counts[1], 1);
        assert_eq!(
            counts[DURATION_BUCKETS.len()],
            1,
            "past the last bound: +Inf"
        );
        assert_eq!(h.count(), 3);
    }

    #[test]
    fn codes_outside_the_list_count_as_other() {
        let remote = Error::Remote {
            status: 500,
            code: "made-up\nby a peer".into(),
            message: String::new(),
        };
        assert_eq!(outcome(&remote), "other");
        assert_eq!(outcome(&failure("x")), "action-failed");
        assert_eq!(outcome(&Error::ShuttingDown), "shutting-down");
    }

    #[test]
    fn hosts_count_apart() {
        let one = Metrics::new(["a"]);
        let two = Metrics::new(["a"]);
        one.actor("a")
            .call_ended(Instant::now(), &Ok::<_, Error>(()));
        assert!(
            one.encode()
                .contains("burrow_calls_total{actor=\"a\",outcome=\"ok\"} 1\n")
        );
        assert!(
            two.encode()
                .contains("burrow_calls_total{actor=\"a\",outcome=\"ok\"} 0\n")
        );
    }

    #[test]
    fn unknown_actors_count_nowhere() {
        let metrics = Metrics::new(["a"]);
        metrics
            .actor("nope")
            .call_ended(Instant::now(), &Ok::<_, Error>(()));
        assert!(!metrics.encode().contains("nope"));
    }

    #[test]
    fn gauges_by_instance_add_up_per_actor() {
        let metrics = Metrics::new(["a"]);
        let a = metrics.actor("a");
        a.queue_depth("k1", 5);
        a.queue_depth("k2", 3);
        a.queue_depth("k1", 2);
        assert_eq!(a.queue_depth.get(), 5);
        a.forget_instance("k2");
        assert_eq!(a.queue_depth.get(), 2);
        a.workflow_started("w1");
        a.workflow_started("w2");
        a.workflow_waits("w1");
        a.workflow_run("w1");
        a.workflow_waits("w2");
        assert_eq!((a.running.get(), a.waiting.get()), (1, 1));
        a.workflow_finished("w1", "completed");
        a.forget_instance("w2");
        assert_eq!((a.running.get(), a.waiting.get()), (0, 0));
        assert_eq!(a.workflows_finished[0].get(), 1);
    }

    /// Every line of the text is a comment naming a family (`# HELP`,
    /// `# TYPE`, in that order, once each) or a sample of the family last
    /// typed, with well-formed labels and a number; histograms' buckets are
    /// cumulative, end with `+Inf` and agree with `_count`.
    fn check_exposition(text: &str) {
        assert!(text.ends_with('\n'), "the text ends with a newline");
        let name_ok = |name: &str| {
            let mut chars = name.chars();
            chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
        };
        let mut family: Option<(String, String)> = None;
        let mut helped: Option<String> = None;
        let mut seen = std::collections::HashSet::new();
        let mut buckets: Vec<(String, f64, f64)> = Vec::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let (name, help) = rest.split_once(' ').expect("HELP has a text");
                assert!(name_ok(name) && !help.is_empty(), "{line}");
                assert!(seen.insert(name.to_owned()), "{name} is described twice");
                helped = Some(name.to_owned());
                continue;
            }
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').expect("TYPE has a type");
                assert_eq!(helped.as_deref(), Some(name), "TYPE follows its HELP");
                assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
                family = Some((name.to_owned(), kind.to_owned()));
                continue;
            }
            assert!(!line.starts_with('#'), "unknown comment: {line}");
            let (family_name, kind) = family.as_ref().expect("a sample after its TYPE");
            let (series, value) = line.rsplit_once(' ').expect("a sample has a value");
            let value: f64 = match value {
                "+Inf" => f64::INFINITY,
                v => v.parse().unwrap_or_else(|_| panic!("not a number: {line}")),
            };
            let (name, labels) = match series.split_once('{') {
                Some((name, labels)) => {
                    (name, labels.strip_suffix('}').expect("labels end with }"))
                }
                None => (series, ""),
            };
            let allowed: Vec<String> = match kind.as_str() {
                "histogram" => ["_bucket", "_sum", "_count"]
                    .iter()
                    .map(|s| format!("{family_name}{s}"))
                    .collect(),
                _ => vec![family_name.clone()],
            };
            assert!(
                allowed.iter().any(|a| a == name),
                "{name} is not of {family_name}"
            );
            if kind == "counter" {
                assert!(name.ends_with("_total"), "{name}");
            }
            // Labels: name="value" separated by commas, values escaped.
            let mut rest = labels;
            let mut le = None;
            while !rest.is_empty() {
                let (label, after) = rest.split_once("=\"").expect("label=\"value\"");
                assert!(name_ok(label) && !label.starts_with("__"), "{line}");
                let mut value = String::new();
                let mut chars = after.char_indices();
                let end = loop {
                    match chars.next().expect("the value is closed") {
                        (_, '\\') => match chars.next().expect("an escape").1 {
                            'n' => value.push('\n'),
                            c @ ('\\' | '"') => value.push(c),
                            c => panic!("bad escape \\{c} in {line}"),
                        },
                        (i, '"') => break i,
                        (_, c) => value.push(c),
                    }
                };
                if label == "le" {
                    le = Some(match value.as_str() {
                        "+Inf" => f64::INFINITY,
                        v => v.parse::<f64>().expect("le is a number"),
                    });
                }
                rest = &after[end + 1..];
                rest = rest.strip_prefix(',').unwrap_or(rest);
            }
            if name.ends_with("_bucket") {
                // The other labels: before `le`, which comes last.
                let series = match labels.rsplit_once("le=") {
                    Some((others, _)) => others.strip_suffix(',').unwrap_or(others),
                    None => labels,
                };
                // Named by its histogram too: two histograms may have the
                // same labels.
                let series = format!("{}{{{series}}}", name.trim_end_matches("_bucket"));
                buckets.push((series, le.expect("a bucket has le"), value));
            }
            if name.ends_with("_count") && kind == "histogram" {
                let series = format!("{}{{{labels}}}", name.trim_end_matches("_count"));
                let mine: Vec<_> = buckets.iter().filter(|(s, _, _)| *s == series).collect();
                assert!(!mine.is_empty(), "buckets before _count: {line}");
                assert!(
                    mine.windows(2).all(|w| w[0].1 < w[1].1 && w[0].2 <= w[1].2),
                    "buckets rise: {line}"
                );
                let last = mine.last().unwrap();
                assert_eq!(last.1, f64::INFINITY, "the last bucket is +Inf");
                assert_eq!(last.2, value, "+Inf equals _count: {line}");
            }
        }
    }

    #[test]
    fn the_text_is_valid_exposition_format() {
        let metrics = Metrics::new(["counter", "odd-name_2"]);
        let a = metrics.actor("counter");
        for micros in [5, 30, 700, 20_000, 3_000_000, 20_000_000] {
            a.call_duration.observe(Duration::from_micros(micros));
        }
        a.call_ended(Instant::now(), &Ok::<_, Error>(()));
        a.call_ended(Instant::now(), &Err::<(), _>(failure("planned")));
        a.call_ended(
            Instant::now(),
            &Err::<(), _>(Error::UnknownAction {
                actor: "counter".into(),
                action: "x".into(),
            }),
        );
        a.schedule_ran(Err(&Error::Overloaded("busy".into())));
        a.event_failed(true);
        a.queue_depth("k", 4);
        a.workflow_started("k");
        a.workflow_finished("k", "diverged");
        a.evicted(Eviction::Room);
        a.woke();
        a.set_asleep(7);
        a.set_connections(1);
        metrics.commits().fetch_add(3, Ordering::Relaxed);
        metrics.log_syncs().observe(Duration::from_micros(120));
        let text = metrics.encode();
        check_exposition(&text);
        for expected in [
            "burrow_commits_total 3\n",
            "burrow_log_sync_seconds_count 1\n",
            "burrow_log_sync_seconds_bucket{le=\"0.00025\"} 1\n",
            "burrow_log_sync_seconds_bucket{le=\"0.0001\"} 0\n",
            "burrow_calls_total{actor=\"counter\",outcome=\"action-failed\"} 1\n",
            "burrow_calls_total{actor=\"counter\",outcome=\"unknown-action\"} 1\n",
            "burrow_call_duration_seconds_count{actor=\"counter\"} 9\n",
            "burrow_call_duration_seconds_bucket{actor=\"counter\",le=\"+Inf\"} 9\n",
            "burrow_queue_events_dead_lettered_total{actor=\"counter\"} 1\n",
            "burrow_queue_depth{actor=\"counter\"} 4\n",
            "burrow_workflows_finished_total{actor=\"counter\",state=\"diverged\"} 1\n",
            "burrow_schedule_runs_total{actor=\"counter\",outcome=\"overloaded\"} 1\n",
            "burrow_evictions_total{actor=\"counter\",reason=\"room\"} 1\n",
            "burrow_instances_asleep{actor=\"counter\"} 7\n",
            "burrow_calls_total{actor=\"odd-name_2\",outcome=\"ok\"} 0\n",
        ] {
            assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
        }
    }

    #[test]
    fn the_checker_refuses_broken_text() {
        for broken in [
            "# HELP a_total x\n# TYPE a_total counter\na_total{actor=\"x} 1\n",
            "# HELP a x\n# TYPE a gauge\nb 1\n",
            "# HELP a x\n# TYPE a gauge\na one\n",
            "# HELP a_total x\n# TYPE a_total counter\na_total{actor=\"\\q\"} 1\n",
        ] {
            let result = std::panic::catch_unwind(|| check_exposition(broken));
            assert!(result.is_err(), "accepted: {broken}");
        }
    }
}
