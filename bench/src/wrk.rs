//! The HTTP workloads of the durability modes driven by `wrk` (with
//! `--wrk`; it must be on the PATH), a lighter client than
//! `burrow-client`: the scripts of `wrk/` are written beside the server's
//! data, `wrk` runs each workload for a fixed time on 2 threads, and its
//! report gives requests/s, mean, p50, p99 and (from `wrk/tail.lua`,
//! appended to every script) p99.9.
//!
//! `wrk` counts the requests a steady client would have sent while one
//! answer was late (it adds them to its latencies, spaced by the mean
//! time between requests): one call of 3 ms among calls of 50 µs weighs
//! as sixty. Its p99 is a tail as a caller at a steady rate sees it.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail};

/// `increment(1)` on the instance of the URL (W1, hot instance).
const INCREMENT_SCRIPT: &str = include_str!("wrk/increment.lua");
/// `increment(1)` over 64 instances (W2).
const SPREAD_SCRIPT: &str = include_str!("wrk/spread.lua");
/// Prints the 99.9th percentile; appended to every script.
const TAIL_SCRIPT: &str = include_str!("wrk/tail.lua");

/// What one `wrk` run reports.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WrkReport {
    /// Requests answered.
    pub requests: u64,
    /// Requests per second.
    pub requests_per_sec: f64,
    /// Mean latency.
    pub mean: Duration,
    /// Median latency.
    pub p50: Duration,
    /// 99th percentile latency.
    pub p99: Duration,
    /// 99.9th percentile latency.
    pub p999: Duration,
    /// Answers other than 2xx or 3xx, and socket errors.
    pub errors: u64,
}

/// A latency as `wrk` prints it: `45.00us`, `0.87ms`, `1.20s`, `2.00m`.
fn parse_latency(text: &str) -> Option<Duration> {
    let split = text.find(|c: char| c.is_ascii_alphabetic())?;
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let seconds = match unit {
        "us" => number / 1e6,
        "ms" => number / 1e3,
        "s" => number,
        "m" => number * 60.0,
        "h" => number * 3600.0,
        _ => return None,
    };
    Some(Duration::from_secs_f64(seconds))
}

/// Parses the report of `wrk --latency`.
pub fn parse(output: &str) -> Result<WrkReport> {
    let mut requests = None;
    let mut requests_per_sec = None;
    let mut mean = None;
    let mut p50 = None;
    let mut p99 = None;
    let mut p999 = None;
    let mut errors = 0;
    for line in output.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["Latency", avg, _stdev, _max, _within] => mean = parse_latency(avg),
            ["50%", value] => p50 = parse_latency(value),
            ["99%", value] => p99 = parse_latency(value),
            ["99.9%", value] => p999 = parse_latency(value),
            ["Requests/sec:", value] => requests_per_sec = value.parse().ok(),
            [count, "requests", "in", ..] => requests = count.parse().ok(),
            ["Non-2xx", "or", "3xx", "responses:", count] => errors += count.parse::<u64>()?,
            ["Socket", "errors:", rest @ ..] => {
                for count in rest
                    .iter()
                    .filter_map(|w| w.trim_end_matches(',').parse::<u64>().ok())
                {
                    errors += count;
                }
            }
            _ => {}
        }
    }
    let missing = |what: &str| format!("the report of wrk has no {what}:\n{output}");
    Ok(WrkReport {
        requests: requests.with_context(|| missing("request count"))?,
        requests_per_sec: requests_per_sec.with_context(|| missing("Requests/sec"))?,
        mean: mean.with_context(|| missing("mean latency"))?,
        p50: p50.with_context(|| missing("50% latency (run with --latency)"))?,
        p99: p99.with_context(|| missing("99% latency (run with --latency)"))?,
        p999: p999.with_context(|| missing("99.9% latency (from wrk/tail.lua)"))?,
        errors,
    })
}

/// Fails unless `wrk` can be run.
pub async fn check_installed() -> Result<()> {
    let found = tokio::process::Command::new("wrk")
        .arg("--version")
        .output()
        .await
        .is_ok();
    if !found {
        bail!("`--wrk` needs wrk on the PATH (such as `apt-get install wrk`)");
    }
    Ok(())
}

/// The scripts, written into `dir`.
pub struct Scripts {
    increment: std::path::PathBuf,
    spread: std::path::PathBuf,
    health: std::path::PathBuf,
}

impl Scripts {
    /// Writes the scripts into `dir`.
    pub fn write(dir: &Path) -> Result<Scripts> {
        std::fs::create_dir_all(dir)?;
        let increment = dir.join("increment.lua");
        let spread = dir.join("spread.lua");
        let health = dir.join("health.lua");
        std::fs::write(&increment, format!("{INCREMENT_SCRIPT}\n{TAIL_SCRIPT}"))?;
        std::fs::write(&spread, format!("{SPREAD_SCRIPT}\n{TAIL_SCRIPT}"))?;
        std::fs::write(&health, TAIL_SCRIPT)?;
        Ok(Scripts {
            increment,
            spread,
            health,
        })
    }
}

/// What `wrk` runs: connections, and the script with its arguments.
pub enum Load {
    /// W1: one connection on `w1`.
    Sequential,
    /// W2: 64 connections over `w2-0` .. `w2-63`.
    Spread,
    /// The hot instance: 64 connections on `hot`.
    Hot,
    /// `GET /healthz` on one connection (beside W1) or 64 (beside W2).
    Health { connections: u32 },
}

/// Runs `wrk` for `seconds` against the server at `url`.
pub async fn run(url: &str, scripts: &Scripts, load: Load, seconds: u64) -> Result<WrkReport> {
    let mut command = tokio::process::Command::new("wrk");
    command.arg("--latency").arg(format!("-d{seconds}s"));
    match load {
        Load::Sequential => command
            .args(["-t1", "-c1", "-s"])
            .arg(&scripts.increment)
            .arg(format!("{url}/actors/counter/w1/actions/increment")),
        Load::Spread => command
            .args(["-t2", "-c64", "-s"])
            .arg(&scripts.spread)
            .arg(url)
            .args(["--", "64"]),
        Load::Hot => command
            .args(["-t2", "-c64", "-s"])
            .arg(&scripts.increment)
            .arg(format!("{url}/actors/counter/hot/actions/increment")),
        Load::Health { connections } => command
            .arg(if connections > 1 { "-t2" } else { "-t1" })
            .arg(format!("-c{connections}"))
            .arg("-s")
            .arg(&scripts.health)
            .arg(format!("{url}/healthz")),
    };
    let output = command.output().await.context("cannot run wrk")?;
    let text = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        bail!(
            "wrk failed ({}): {}{}",
            output.status,
            text,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    parse(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPORT: &str = "\
Running 5s test @ http://127.0.0.1:7979/actors/counter/w1/actions/increment
  1 threads and 1 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   413.39us    1.38ms  20.72ms   92.51%
    Req/Sec    18.84k     3.49k   25.87k    64.00%
  Latency Distribution
     50%   45.00us
     75%   59.00us
     90%    0.89ms
     99%    6.81ms
  93646 requests in 5.00s, 9.99MB read
  Socket errors: connect 0, read 1, write 0, timeout 2
  Non-2xx or 3xx responses: 3
Requests/sec:  18727.27
Transfer/sec:      2.00MB
   99.9%  12400us
";

    #[test]
    fn the_report_of_wrk_is_parsed() {
        let report = parse(REPORT).unwrap();
        assert_eq!(report.requests, 93_646);
        assert_eq!(report.requests_per_sec, 18_727.27);
        assert_eq!(report.mean, Duration::from_nanos(413_390));
        assert_eq!(report.p50, Duration::from_micros(45));
        assert_eq!(report.p99, Duration::from_micros(6_810));
        assert_eq!(report.p999, Duration::from_micros(12_400));
        assert_eq!(report.errors, 6);
    }

    #[test]
    fn a_report_without_percentiles_is_refused() {
        let without: String = REPORT
            .lines()
            .filter(|l| !l.contains('%') || l.contains("Latency") || l.contains("Req/Sec"))
            .map(|l| format!("{l}\n"))
            .collect();
        let error = parse(&without).unwrap_err().to_string();
        assert!(error.contains("--latency"), "{error}");
    }

    #[test]
    fn latencies_are_read_in_their_units() {
        assert_eq!(parse_latency("45.00us"), Some(Duration::from_micros(45)));
        assert_eq!(parse_latency("1.50ms"), Some(Duration::from_micros(1_500)));
        assert_eq!(parse_latency("2.00s"), Some(Duration::from_secs(2)));
        assert_eq!(parse_latency("1.00m"), Some(Duration::from_secs(60)));
        assert_eq!(parse_latency("12"), None);
        assert_eq!(parse_latency("3.0xs"), None);
    }
}
