//! The conformance suite: the actors of `tests/conformance/SPEC.md`, built
//! in every guest language, under one test body per case.
//!
//! Each test starts one host with every language's actors and runs its
//! cases for each language side by side; a language that fails a case, or
//! whose components are missing, fails the test, and the panic message is a
//! table of what each language did. `BURROW_CONFORMANCE=rust,py` restricts
//! a local run to some languages.

mod actors;
mod durability;
mod http;
mod queue;
mod workflow;

use std::future::Future;
use std::time::Duration;

use futures_util::FutureExt;

use burrow::manifest::ActorSpec;
use burrow::workflow::WorkflowView;
use burrow::{Error, Host};
use serde_json::Value;

use crate::support::{eventually, json, programs};

/// Every language the suite runs. A language here whose components are
/// missing fails every case.
pub const LANGUAGES: &[&str] = &["rust", "py", "js"];

/// How long a test waits for background work (queues, schedules, workflows).
pub const LONG: Duration = Duration::from_secs(60);

/// The components of one language: the plain actor and the workflow actor,
/// or why they are missing.
fn components(
    language: &str,
) -> (
    Result<&'static str, &'static str>,
    Result<&'static str, &'static str>,
) {
    match language {
        "rust" => (
            Ok(programs::CONFORMANCE_RUST),
            Ok(programs::CONFORMANCE_FLOW_RUST),
        ),
        "py" => (programs::CONFORMANCE_PY, programs::CONFORMANCE_FLOW_PY),
        "js" => (programs::CONFORMANCE_JS, programs::CONFORMANCE_FLOW_JS),
        other => panic!("no components for the language `{other}`"),
    }
}

/// The languages of this run: `LANGUAGES`, or those named in
/// `BURROW_CONFORMANCE`.
pub fn languages() -> Vec<&'static str> {
    match std::env::var("BURROW_CONFORMANCE") {
        Ok(list) if !list.trim().is_empty() => {
            let wanted: Vec<&str> = list.split(',').map(str::trim).collect();
            for name in &wanted {
                assert!(
                    LANGUAGES.contains(name),
                    "BURROW_CONFORMANCE names `{name}`; the languages are {LANGUAGES:?}"
                );
            }
            LANGUAGES
                .iter()
                .copied()
                .filter(|l| wanted.contains(l))
                .collect()
        }
        _ => LANGUAGES.to_vec(),
    }
}

/// `conformance-<language>`.
pub fn basic(language: &str) -> String {
    format!("conformance-{language}")
}

/// `conformance-flow-<language>`.
pub fn flow(language: &str) -> String {
    format!("conformance-flow-{language}")
}

fn limit_memory(spec: &mut ActorSpec, language: &str) {
    if language != "rust" {
        spec.options.memory_limit = 256 << 20;
    }
}

/// The plain actor's spec, with quick queue retries.
fn basic_spec(language: &str, path: &str) -> ActorSpec {
    let mut spec = ActorSpec::new(&basic(language), path);
    spec.options.queue_retry_base = Duration::from_millis(20);
    spec.options.queue_retry_cap = Duration::from_millis(100);
    spec.options.queue_max_attempts = 3;
    limit_memory(&mut spec, language);
    spec
}

/// The workflow actor's spec.
fn flow_spec(language: &str, path: &str) -> ActorSpec {
    let mut spec = ActorSpec::new(&flow(language), path);
    spec.options.call_timeout = Duration::from_secs(5);
    limit_memory(&mut spec, language);
    spec
}

/// The actors of the languages of this run, and the languages whose
/// components are missing (with why).
pub fn actors() -> (
    Vec<ActorSpec>,
    Vec<&'static str>,
    Vec<(&'static str, String)>,
) {
    actors_reaching(&[])
}

/// [`actors`], each allowed to reach the authorities `http` (manifest
/// `http`).
pub fn actors_reaching(
    http: &[String],
) -> (
    Vec<ActorSpec>,
    Vec<&'static str>,
    Vec<(&'static str, String)>,
) {
    let allowed = burrow::outbound::Allowed::parse(http).unwrap();
    let mut specs = Vec::new();
    let mut present = Vec::new();
    let mut missing = Vec::new();
    for language in languages() {
        match components(language) {
            (Ok(basic), Ok(workflow)) => {
                for mut spec in [basic_spec(language, basic), flow_spec(language, workflow)] {
                    spec.options.http = allowed.clone();
                    specs.push(spec);
                }
                present.push(language);
            }
            (Err(why), _) | (_, Err(why)) => missing.push((language, why.to_owned())),
        }
    }
    (specs, present, missing)
}

/// What happened to one language in one case.
enum Outcome {
    Passed,
    Failed(String),
    Missing(String),
}

/// The languages of a test and what became of each.
pub struct Report {
    case: &'static str,
    outcomes: Vec<(String, Outcome)>,
}

impl Report {
    /// A report for `case`, with the missing languages failed already.
    pub fn new(case: &'static str, missing: &[(&'static str, String)]) -> Report {
        let outcomes = missing
            .iter()
            .map(|(language, why)| (language.to_string(), Outcome::Missing(why.clone())))
            .collect();
        Report { case, outcomes }
    }

    /// Runs `case` for each language at once (on this task, side by side)
    /// and records whether it passed (a panic is a failure, with its
    /// message).
    pub async fn run<F, Fut>(&mut self, languages: &[&'static str], case: F)
    where
        F: Fn(&'static str) -> Fut,
        Fut: Future<Output = ()>,
    {
        let cases = languages.iter().map(|language| {
            let case = std::panic::AssertUnwindSafe(case(language));
            async move { (*language, case.catch_unwind().await) }
        });
        for (language, result) in futures_util::future::join_all(cases).await {
            self.record(language, result);
        }
    }

    /// The languages among `languages` that have not failed so far.
    pub fn passing(&self, languages: &[&'static str]) -> Vec<&'static str> {
        languages
            .iter()
            .copied()
            .filter(|language| {
                self.outcomes
                    .iter()
                    .all(|(l, o)| l != language || matches!(o, Outcome::Passed))
            })
            .collect()
    }

    fn set(&mut self, language: &str, outcome: Outcome) {
        match self.outcomes.iter_mut().find(|(l, _)| l == language) {
            Some((_, old)) => *old = outcome,
            None => self.outcomes.push((language.to_owned(), outcome)),
        }
    }

    /// Records the outcome of a case that ran outside `run`.
    pub fn record(&mut self, language: &str, result: std::thread::Result<()>) {
        let outcome = match result {
            Ok(()) => Outcome::Passed,
            Err(payload) => Outcome::Failed(payload_text(payload.as_ref())),
        };
        self.set(language, outcome);
    }

    /// Panics, with every language's outcome, unless each passed.
    pub fn finish(self) {
        let mut lines = Vec::new();
        let mut failed = false;
        for (language, outcome) in &self.outcomes {
            match outcome {
                Outcome::Passed => lines.push(format!("  {language}: passed")),
                Outcome::Failed(why) => {
                    failed = true;
                    lines.push(format!("  {language}: FAILED: {why}"));
                }
                Outcome::Missing(why) => {
                    failed = true;
                    lines.push(format!("  {language}: MISSING: {why}"));
                }
            }
        }
        let table = lines.join("\n");
        eprintln!("conformance case `{}`:\n{table}", self.case);
        assert!(!failed, "conformance case `{}`:\n{table}", self.case);
    }
}

fn payload_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else {
        "a panic without a message".to_owned()
    }
}

/// Starts a host on `dir` with every language's actors.
pub async fn start(dir: &std::path::Path, specs: &[ActorSpec]) -> Host {
    crate::support::start(dir, specs).await
}

/// Calls and decodes the result, or panics naming the call.
pub async fn call(host: &Host, actor: &str, key: &str, action: &str, args: Value) -> Value {
    crate::support::call(host, actor, key, action, &args.to_string()).await
}

/// Calls and expects an error.
pub async fn call_err(host: &Host, actor: &str, key: &str, action: &str, args: &str) -> Error {
    match host.call(actor, key, action, args).await {
        Ok(result) => panic!("{actor}/{key}.{action}({args}) returned {result}, not an error"),
        Err(e) => e,
    }
}

/// The guest's code of an `action-failed` error.
pub fn guest_code(e: &Error) -> &str {
    match e {
        Error::Failed { code, .. } => code,
        other => panic!(
            "expected an action's failure, got {} ({other})",
            other.code()
        ),
    }
}

/// Waits until the workflow of `actor/key` has ended.
pub async fn finished(host: &Host, actor: &str, key: &str) -> WorkflowView {
    eventually(LONG, &format!("{actor}/{key} to finish"), async || {
        let view = host.workflow(actor, key).ok()?;
        view.record.status.is_final().then_some(view)
    })
    .await
}

/// The output of a completed workflow.
pub fn output(view: &WorkflowView) -> Value {
    assert_eq!(
        view.record.status.as_str(),
        "completed",
        "the workflow did not complete: {:?}",
        view.record
    );
    json(view.record.output.as_deref().unwrap_or("null"))
}
