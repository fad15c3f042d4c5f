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
            .with_env_filter("burrow::guest=info,burrow=warn")
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

/// Guest text cannot forge a log line: control characters in a log line, in
/// stdout or stderr, and in a failure the host logs (a scheduled action's)
/// are escaped. Failure text is cut at `MAX_FAILURE_MESSAGE_BYTES` and
/// escaped wherever the host keeps it: the caller's error, a dead letter's
/// error, a failed workflow's error.
#[tokio::test(flavor = "multi_thread")]
async fn guest_text_cannot_forge_log_lines_and_failures_are_cut() {
    use burrow::config::MAX_FAILURE_MESSAGE_BYTES as MAX;

    let log = captured();
    let dir = tempfile::tempdir().unwrap();
    let mut queue = queue_probe();
    queue.options.queue_max_attempts = 1;
    let talk = crate::schedules::talk_probe();
    let host = start(dir.path(), &[probe(), queue, talk]).await;
    let forged = "FORGED-5521 ERROR burrow: all is lost";
    let shout = format!("marker-5521\n{forged}\r\u{1b}[2K");
    call(
        &host,
        "probe",
        "k",
        "shout",
        &serde_json::json!([shout]).to_string(),
    )
    .await;

    // An action's failure reaches the caller cut and escaped.
    let long = format!("{}\n{forged}", "z".repeat(100_000));
    let args = serde_json::json!([format!("code\n{forged}"), long]).to_string();
    let e = host
        .call("probe", "k", "fail_with", &args)
        .await
        .unwrap_err();
    let burrow::Error::Failed { code, message, .. } = &e else {
        panic!("{e}")
    };
    assert!(message.len() <= MAX, "a message of {} bytes", message.len());
    assert!(!code.contains('\n') && !message.contains('\n'), "{e}");
    assert!(code.starts_with("code\\nFORGED-5521"), "{code}");

    // A scheduled action's failure is logged by the host.
    let args = serde_json::json!([0, "fail_with", ["planned", format!("sched-5521\n{forged}")]]);
    call(&host, "talk-probe", "k", "later", &args.to_string()).await;

    // A failed event's error is kept as its dead letter's error.
    let payload = serde_json::json!(format!("{}\n{forged}", "q".repeat(100_000))).to_string();
    host.send(
        "queue-probe",
        "q",
        "fail_loudly",
        &payload,
        Default::default(),
    )
    .await
    .unwrap();
    let error = eventually(
        std::time::Duration::from_secs(10),
        "the dead letter",
        async || {
            let view = host.queue("queue-probe", "q").unwrap();
            view.dead_letters.first().map(|d| d.error.clone())
        },
    )
    .await;
    assert!(
        error.len() <= MAX,
        "a dead letter's error of {} bytes",
        error.len()
    );
    assert!(!error.contains('\n'), "{error}");

    eventually(
        std::time::Duration::from_secs(10),
        "the schedule's failure in the log",
        async || {
            let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
            text.contains("sched-5521").then_some(())
        },
    )
    .await;
    host.shutdown().await;

    let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    let mine: Vec<&str> = text.lines().filter(|l| l.contains("5521")).collect();
    for line in &mine {
        assert!(
            !line.starts_with("FORGED-5521"),
            "a forged log line: {line}"
        );
        assert!(!line.contains('\r') && !line.contains('\u{1b}'), "{line:?}");
    }
    let logged = mine
        .iter()
        .find(|l| l.contains("log: marker-5521"))
        .unwrap_or_else(|| panic!("no log line in:\n{text}"));
    assert!(logged.contains("marker-5521\\nFORGED-5521"), "{logged}");
    let scheduled = mine.iter().find(|l| l.contains("sched-5521")).unwrap();
    assert!(
        scheduled.contains("sched-5521\\nFORGED-5521"),
        "{scheduled}"
    );
}

/// A client's text cannot forge a log line either: an instance key from a
/// request's path, with a newline, a carriage return and an escape
/// sequence, is escaped in every line and span that names it (guest output
/// tagged with the instance, the `call` span at debug level).
#[tokio::test]
async fn client_text_cannot_forge_log_lines() {
    captured();
    // This test's own log, at debug level, on this thread (the runtime's
    // only one): the spans of the calls are in it.
    let log = Captured::default();
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter("burrow=debug")
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _local = tracing::subscriber::set_default(subscriber);

    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[probe()]).await;
    let server = Server::start(host.clone()).await;
    let key = "key-7733\nFORGED-7733 ERROR burrow: all is lost\r\u{1b}[2K";
    let encoded: String = key
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    let answer = crate::support::http()
        .post(format!(
            "{}/actors/probe/{encoded}/actions/shout",
            server.url
        ))
        .body("[\"marker-7733\"]")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 200);
    assert_eq!(host.keys("probe").await.unwrap(), vec![key.to_owned()]);
    server.stop().await;

    let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    let mine: Vec<&str> = text.lines().filter(|l| l.contains("7733")).collect();
    for line in &mine {
        assert!(
            !line.starts_with("FORGED-7733"),
            "a forged log line: {line}\nin:\n{text}"
        );
        assert!(!line.contains('\r') && !line.contains('\u{1b}'), "{line:?}");
    }
    for origin in ["stdout: marker-7733", "stderr: marker-7733"] {
        let line = mine
            .iter()
            .find(|l| l.contains(origin))
            .unwrap_or_else(|| panic!("no {origin} line in:\n{text}"));
        assert!(line.contains("key-7733\\nFORGED-7733"), "{line}");
    }
    let in_call = mine
        .iter()
        .find(|l| l.contains("call{"))
        .unwrap_or_else(|| panic!("no line in a call's span in:\n{text}"));
    assert!(in_call.contains("key-7733\\nFORGED-7733"), "{in_call}");
}
