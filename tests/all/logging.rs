//! Guest logs, stdout and stderr reach the host log, tagged with the
//! instance, and cut at the line limit.

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

use crate::support::*;

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The log of this test binary, captured once for all tests.
fn captured() -> &'static Captured {
    static LOG: OnceLock<Captured> = OnceLock::new();
    LOG.get_or_init(|| {
        let log = Captured::default();
        let writer = log.clone();
        tracing_subscriber::fmt()
            .with_env_filter("burrow::guest=info")
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .init();
        log
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn guest_output_goes_to_the_host_log_tagged_with_the_instance() {
    let log = captured();
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[probe()]).await;
    call(&host, "probe", "loud-key", "shout", "[\"marker-7781\"]").await;
    let long = "y".repeat(burrow::config::MAX_LOG_LINE_BYTES + 100);
    call(
        &host,
        "probe",
        "loud-key",
        "shout",
        &format!("[\"{long}\"]"),
    )
    .await;
    host.shutdown().await;

    let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("marker-7781")).collect();
    for (origin, stream) in [
        ("stdout: ", "stream=\"stdout\""),
        ("stderr: ", "stream=\"stderr\""),
        ("log: ", ""),
    ] {
        let line = lines
            .iter()
            .find(|l| l.contains(&format!("{origin}marker-7781")))
            .unwrap_or_else(|| panic!("no {origin} line in:\n{text}"));
        assert!(
            line.contains("actor=\"probe\"") || line.contains("actor=probe"),
            "{line}"
        );
        assert!(line.contains("loud-key"), "{line}");
        assert!(line.contains(stream), "{line}");
    }
    assert!(
        text.contains("probe woke up"),
        "the wake hook's log line is missing"
    );
    let longest = text
        .lines()
        .filter(|l| l.contains("yyyy"))
        .map(str::len)
        .max()
        .unwrap();
    assert!(
        longest < burrow::config::MAX_LOG_LINE_BYTES + 200,
        "a line of {longest} bytes"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_chatty_guest_is_held_to_its_lines_per_second() {
    let log = captured();
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[probe()]).await;
    call(&host, "probe", "chatty", "chatter", "[1000]").await;
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    // The next line after the second is over reports what was dropped.
    call(&host, "probe", "chatty", "shout", "[\"after\"]").await;
    host.shutdown().await;

    let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    let mine = |l: &&str| l.contains("chatty");
    let kept = text
        .lines()
        .filter(mine)
        .filter(|l| l.contains("chatter "))
        .count();
    let limit = burrow::config::MAX_LOG_LINES_PER_SECOND as usize;
    assert!(kept <= limit && kept >= limit / 2, "{kept} lines kept");
    let report = text
        .lines()
        .filter(mine)
        .find(|l| l.contains("log lines dropped"))
        .unwrap_or_else(|| panic!("no report of dropped lines"));
    assert!(report.contains("dropped="), "{report}");
}
