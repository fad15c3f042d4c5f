//! Every guest statement is bounded in time, memory and length, whatever its
//! shape, and so is `inspect`; other instances answer meanwhile.

use std::time::{Duration, Instant};

use burrow::config::{MAX_INSPECT_BYTES, MAX_SQL_VALUE_BYTES, MAX_STATEMENT_MEMORY};
use burrow::manifest::ActorSpec;
use serde_json::{Value, json};

use crate::support::*;

const TIMEOUT: Duration = Duration::from_secs(2);
/// How long past its deadline an attack may take to end: an unbounded one
/// runs for minutes; a bounded one on a loaded 2-core machine (the suite's
/// other tests, other builds) was seen 2.3 s past it.
const MARGIN: Duration = Duration::from_secs(4);

/// Tests that measure the process's peak memory run one at a time.
static MEMORY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn hostile_probe() -> ActorSpec {
    let mut spec = probe();
    spec.options.call_timeout = TIMEOUT;
    spec
}

/// The process's resident memory, in bytes.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .expect("VmRSS in /proc/self/status");
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap();
    kib << 10
}

/// Samples the resident memory every millisecond until stopped; returns
/// how far above its first sample it went.
struct PeakMemory {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    sampler: std::thread::JoinHandle<u64>,
}

impl PeakMemory {
    fn start() -> PeakMemory {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let sampler = std::thread::spawn(move || {
            let base = rss();
            let mut peak = base;
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                peak = peak.max(rss());
                std::thread::sleep(Duration::from_millis(1));
            }
            peak - base
        });
        PeakMemory { stop, sampler }
    }

    fn grew(self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.sampler.join().unwrap()
    }
}

/// Calls a counter instance every 5 ms until stopped.
struct Bystander {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Vec<Duration>>,
}

impl Bystander {
    fn start(host: &burrow::Host) -> Bystander {
        let host = host.clone();
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            // From one call's start to the next one's: a worker held by
            // someone else shows here, also while this task sleeps.
            let mut intervals = Vec::new();
            let mut begun = Instant::now();
            while stopped.try_recv().is_err() {
                call(&host, "counter", "bystander", "increment", "[1]").await;
                tokio::time::sleep(Duration::from_millis(5)).await;
                intervals.push(begun.elapsed());
                begun = Instant::now();
            }
            intervals
        });
        Bystander { stop, task }
    }

    /// Stops; asserts that the bystander answered throughout.
    async fn answered(self, what: &str) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        self.stop.send(()).unwrap();
        let intervals = self.task.await.unwrap();
        let longest = intervals.iter().max().copied().unwrap_or_default();
        eprintln!(
            "{what}: bystander answered {} calls, longest interval {longest:?}",
            intervals.len()
        );
        assert!(intervals.len() >= 5, "{what}: {} calls", intervals.len());
        assert!(
            longest < Duration::from_secs(1),
            "{what}: the bystander waited {longest:?}"
        );
    }
}

/// Runs `sql` through the probe's `sql` action; returns how long it took
/// and what the call gave (the rows, the guest's error or the call's error).
async fn attack(
    host: &burrow::Host,
    key: &str,
    sql: &str,
) -> (Duration, Result<Value, burrow::Error>) {
    let args = json!([sql, []]).to_string();
    let begun = Instant::now();
    let got = host
        .call("probe", key, "sql", &args)
        .await
        .map(|r| json(&r));
    (begun.elapsed(), got)
}

fn guest_error(got: &Result<Value, burrow::Error>) -> String {
    match got {
        Ok(value) => value["error"]
            .as_str()
            .unwrap_or_else(|| panic!("no error: {}", short(value)))
            .to_owned(),
        Err(e) => panic!("the call failed: {e}"),
    }
}

fn short(value: &Value) -> String {
    value.to_string().chars().take(200).collect()
}

fn terms(term: &str, n: usize, by: &str) -> String {
    vec![term; n].join(by)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_row_of_huge_zeroblobs_is_refused_by_the_length_limit() {
    let _one = MEMORY.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[hostile_probe(), counter()]).await;
    call(&host, "probe", "z", "count", "[]").await;
    let bystander = Bystander::start(&host);
    let peak = PeakMemory::start();
    let (took, got) = attack(
        &host,
        "z",
        "SELECT zeroblob(400000000), zeroblob(400000000), zeroblob(400000000)",
    )
    .await;
    let grew = peak.grew();
    eprintln!(
        "zeroblobs: {took:?}, peak memory grew by {} MiB",
        grew >> 20
    );
    let e = guest_error(&got);
    assert!(e.contains("LimitExceeded") && e.contains("length"), "{e}");
    assert!(e.contains(&MAX_SQL_VALUE_BYTES.to_string()), "{e}");
    assert!(took < TIMEOUT + MARGIN, "{took:?}");
    assert!(grew < 512 << 20, "peak memory grew by {} MiB", grew >> 20);
    bystander.answered("zeroblobs").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_loop_free_expression_of_huge_blobs_is_refused_by_the_length_limit() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[hostile_probe(), counter()]).await;
    call(&host, "probe", "r", "count", "[]").await;
    let bystander = Bystander::start(&host);
    let sql = format!(
        "SELECT {}",
        terms("length(randomblob(999999999))", 4, " + ")
    );
    let (took, got) = attack(&host, "r", &sql).await;
    let e = guest_error(&got);
    assert!(e.contains("LimitExceeded") && e.contains("length"), "{e}");
    assert!(took < TIMEOUT + MARGIN, "{took:?}");
    bystander.answered("randomblobs").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_expensive_row_under_the_length_limit_ends_by_the_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[hostile_probe(), counter()]).await;
    call(&host, "probe", "e", "count", "[]").await;
    let bystander = Bystander::start(&host);
    // Each term builds a 16 MB text; no loop, so SQLite's progress handler
    // never runs. SQLite keeps each term's values until the row is done, so
    // the statement's memory bound or its deadline ends it, whichever comes
    // first.
    let sql = format!(
        "SELECT {}",
        terms("length(hex(randomblob(8000000)))", 400, " + ")
    );
    let (took, got) = attack(&host, "e", &sql).await;
    match &got {
        Err(e) => assert_eq!(e.code(), "timeout", "{e}"),
        Ok(_) => {
            let e = guest_error(&got);
            assert!(e.contains("LimitExceeded") && e.contains("memory"), "{e}");
        }
    }
    assert!(took < TIMEOUT + MARGIN, "{took:?}");
    bystander.answered("expensive row").await;
    // The instance serves again.
    assert_eq!(call(&host, "probe", "e", "count", "[]").await, json!(0));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_statement_of_long_steps_is_interrupted_at_the_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[hostile_probe(), counter()]).await;
    call(&host, "probe", "w", "count", "[]").await;
    let bystander = Bystander::start(&host);
    // The haystack is computed once; each row scans its 16 MB without
    // allocating, so thousands of rows pass between two progress checks.
    let sql = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000000)
               SELECT sum(instr((SELECT hex(zeroblob(8000000))), i)) FROM n";
    let (took, got) = attack(&host, "w", sql).await;
    let e = match got {
        Ok(value) => panic!("the call did not time out: {}", short(&value)),
        Err(e) => e,
    };
    assert_eq!(e.code(), "timeout", "{e}");
    assert!(took < TIMEOUT + MARGIN, "{took:?}");
    bystander.answered("long steps").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_row_of_many_large_columns_stays_within_the_statement_memory_bound() {
    let _one = MEMORY.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[hostile_probe(), counter()]).await;
    call(&host, "probe", "m", "count", "[]").await;
    let bystander = Bystander::start(&host);
    let peak = PeakMemory::start();
    let sql = format!("SELECT {}", terms("randomblob(16000000)", 40, ", "));
    let (took, got) = attack(&host, "m", &sql).await;
    let grew = peak.grew();
    eprintln!("wide row: {took:?}, peak memory grew by {} MiB", grew >> 20);
    let e = guest_error(&got);
    assert!(e.contains("LimitExceeded") && e.contains("memory"), "{e}");
    assert!(e.contains(&MAX_STATEMENT_MEMORY.to_string()), "{e}");
    assert!(took < TIMEOUT + MARGIN, "{took:?}");
    assert!(grew < 512 << 20, "peak memory grew by {} MiB", grew >> 20);
    bystander.answered("wide row").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn temp_tables_are_bounded_by_the_database_size_limit() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = hostile_probe();
    spec.options.db_size_limit = 4 << 20;
    let host = start(dir.path(), &[spec]).await;
    let fill = "CREATE TEMP TABLE t (x);
                INSERT INTO temp.t SELECT zeroblob(100000) FROM
                  (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n LIMIT 200)
                   SELECT i FROM n);";
    let got = call(&host, "probe", "t", "batch", &json!([fill]).to_string()).await;
    let e = got["error"]
        .as_str()
        .unwrap_or_else(|| panic!("20 MB of temp rows were accepted: {got}"));
    assert!(
        e.contains("LimitExceeded") && e.contains("database size"),
        "{e}"
    );
}

/// A probe instance with a table of `rows` rows, to which a generated
/// column computing `expr` is added afterwards (so that the guest's own
/// connection never computes it).
async fn generated_table(host: &burrow::Host, key: &str, expr: &str, rows: usize) {
    let sql = format!(
        "CREATE TABLE g (id INTEGER PRIMARY KEY);
         INSERT INTO g (id) SELECT i FROM
           (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n LIMIT {rows})
            SELECT i FROM n);
         ALTER TABLE g ADD COLUMN b GENERATED ALWAYS AS ({expr}) VIRTUAL;"
    );
    let got = call(host, "probe", key, "batch", &json!([sql]).to_string()).await;
    assert_eq!(got, Value::Null, "{got}");
}

/// An error's code and text.
struct Failure {
    code: String,
    text: String,
}

/// Inspects on a blocking thread; returns how long it took and the result.
async fn inspect(
    host: &burrow::Host,
    key: &str,
) -> (Duration, Result<burrow::Inspection, Failure>) {
    let host = host.clone();
    let key = key.to_owned();
    let begun = Instant::now();
    let got = tokio::task::spawn_blocking(move || {
        host.inspect("probe", &key).map_err(|e| Failure {
            code: e.code().to_owned(),
            text: e.to_string(),
        })
    })
    .await
    .unwrap();
    (begun.elapsed(), got)
}

#[tokio::test(flavor = "multi_thread")]
async fn inspect_of_huge_generated_values_is_refused_by_its_limits() {
    let _one = MEMORY.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[hostile_probe(), counter()]).await;
    generated_table(&host, "huge", "zeroblob(400000000)", 3).await;
    generated_table(&host, "many", "zeroblob(9000000)", 3).await;
    let bystander = Bystander::start(&host);
    let peak = PeakMemory::start();

    let (took, got) = inspect(&host, "huge").await;
    let Err(e) = got else {
        panic!("the inspection was not refused")
    };
    eprintln!("huge: {took:?}: {}", e.text);
    assert_eq!(e.code, "limit-exceeded", "{}", e.text);
    assert!(
        e.text.contains(&MAX_SQL_VALUE_BYTES.to_string()),
        "{}",
        e.text
    );
    assert!(took < TIMEOUT + MARGIN, "{took:?}");

    let (took, got) = inspect(&host, "many").await;
    let Err(e) = got else {
        panic!("the inspection was not refused")
    };
    eprintln!("many: {took:?}: {}", e.text);
    assert_eq!(e.code, "limit-exceeded", "{}", e.text);
    assert!(
        e.text.contains(&MAX_INSPECT_BYTES.to_string()),
        "{}",
        e.text
    );
    assert!(took < TIMEOUT + MARGIN, "{took:?}");

    let grew = peak.grew();
    eprintln!("inspect: peak memory grew by {} MiB", grew >> 20);
    assert!(grew < 512 << 20, "peak memory grew by {} MiB", grew >> 20);

    // Over HTTP: a clear error, and the server's workers stay free.
    let server = Server::start(host.clone()).await;
    let response = crate::support::http()
        .get(format!("{}/actors/probe/huge", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 413);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "limit-exceeded", "{body}");
    bystander.answered("inspect").await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn inspect_of_expensive_generated_values_ends_at_the_call_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[hostile_probe(), counter()]).await;
    // Each value matches a 4 MB text against a pattern that backtracks at
    // every character: seconds per row, in one call of `like` (that depends
    // on the row, so that SQLite cannot compute it once).
    let expr = "replace(hex(zeroblob(2000000 + id)), '0', 'a')
                LIKE '%' || replace(hex(zeroblob(400)), '0', 'a') || 'b'";
    generated_table(&host, "slow", expr, 100).await;
    let bystander = Bystander::start(&host);
    let (took, got) = inspect(&host, "slow").await;
    eprintln!("slow: {took:?}");
    let Err(e) = got else {
        panic!("the inspection did not time out: it took {took:?}")
    };
    assert_eq!(e.code, "timeout", "{}", e.text);
    assert!(took < TIMEOUT + MARGIN, "{took:?}");
    bystander.answered("slow inspect").await;
}

/// One worker thread: a long statement must hand it over, or every other
/// instance waits for the statement's deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_long_statement_does_not_hold_the_only_worker() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[hostile_probe(), counter()]).await;
    call(&host, "probe", "x", "count", "[]").await;
    call(&host, "counter", "bystander", "increment", "[1]").await;
    let bystander = Bystander::start(&host);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let hostile = {
        let host = host.clone();
        tokio::spawn(async move {
            let forever = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n)
                           SELECT count(*) FROM n";
            attack(&host, "x", forever).await
        })
    };
    let (took, got) = hostile.await.unwrap();
    let e = match got {
        Ok(value) => panic!("the call did not time out: {}", short(&value)),
        Err(e) => e,
    };
    assert_eq!(e.code(), "timeout", "{e}");
    assert!(took < TIMEOUT + MARGIN, "{took:?}");
    bystander.answered("one worker").await;
}

/// Built-in functions whose C implementations are quadratic answer in time
/// linear in their arguments, even on values at the length limit.
#[tokio::test(flavor = "multi_thread")]
async fn instr_replace_and_trim_of_huge_values_answer_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[hostile_probe()]).await;
    call(&host, "probe", "i", "count", "[]").await;
    // SQLite's would compare up to 8 MB at each of 16 M positions (`instr`),
    // 2 MB at each of 4 M (`replace`), or look through 2 M characters of
    // the set for each of 4 M (`ltrim`): hours.
    let cases = [
        (
            "SELECT instr(zeroblob(16000000) || x'01', zeroblob(8000000) || x'01')",
            json!(8000001),
        ),
        (
            "SELECT length(replace(hex(zeroblob(2000000)), hex(zeroblob(1000000)) || '1', 'x'))",
            json!(4000000),
        ),
        (
            "SELECT length(ltrim(hex(zeroblob(2000000)) || 'x',
                                 replace(hex(zeroblob(1000000)), '0', '1') || '0'))",
            json!(1),
        ),
    ];
    for (sql, expected) in cases {
        let (took, got) = attack(&host, "i", sql).await;
        let value = got.unwrap_or_else(|e| panic!("{sql}: the call failed after {took:?}: {e}"));
        assert_eq!(
            value["rows"],
            json!([[expected]]),
            "{sql}: {}",
            short(&value)
        );
        assert!(took < TIMEOUT, "{sql}: {took:?}");
    }
}

/// A pattern that backtracks over a 16 MB text (at each of its 16 M
/// characters, the pattern's 998 characters are compared) is ended by the
/// call's deadline, in each form of LIKE and GLOB.
#[tokio::test(flavor = "multi_thread")]
async fn a_backtracking_like_or_glob_ends_at_the_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[hostile_probe(), counter()]).await;
    call(&host, "probe", "p", "count", "[]").await;
    let bystander = Bystander::start(&host);
    let text = "replace(hex(zeroblob(8000000)), '0', 'a')";
    let run = |c: &str| format!("replace(hex(zeroblob(499)), '0', '{c}')");
    let a = run("a");
    // `_` right after `%` is skipped by a character, not backtracked.
    let any = "replace(hex(zeroblob(249)), '0', 'a_')";
    let attacks = [
        format!("SELECT {text} LIKE '%' || {a} || 'b'"),
        format!("SELECT {text} LIKE '%' || {any} || 'b'"),
        format!("SELECT {text} LIKE '%' || substr({a}, 2) || '!%' ESCAPE '!'"),
        format!("SELECT like('%' || {a} || 'b', {text})"),
        format!("SELECT {text} GLOB '*' || {a} || 'b'"),
        format!("SELECT glob('*' || substr({a}, 5) || '[b]', {text})"),
    ];
    for sql in &attacks {
        let (took, got) = attack(&host, "p", sql).await;
        let e = match got {
            Ok(value) => panic!("{sql}: the call did not time out: {}", short(&value)),
            Err(e) => e,
        };
        assert_eq!(e.code(), "timeout", "{sql}: {e}");
        assert!(took < TIMEOUT + MARGIN, "{sql}: {took:?}");
    }
    bystander.answered("backtracking patterns").await;
    // The instance serves again, and LIKE still matches.
    let (_, got) = attack(&host, "p", "SELECT 'abc' LIKE 'AB%', 'abc' GLOB 'a*'").await;
    assert_eq!(got.unwrap()["rows"], json!([[1, 1]]));
}
