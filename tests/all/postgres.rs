//! A private PostgreSQL for the cluster tests: the server named by
//! `BURROW_TEST_POSTGRES` (a connection string; `scripts/test.sh` starts
//! one), else one this test process starts with `scripts/postgres.sh` in a
//! temporary directory and that stops when the process ends. Every test
//! gets a database of its own.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

/// The URL of the server (its `postgres` database).
fn server() -> &'static str {
    static SERVER: OnceLock<String> = OnceLock::new();
    SERVER.get_or_init(|| {
        if let Ok(url) = std::env::var("BURROW_TEST_POSTGRES")
            && !url.is_empty()
        {
            return url;
        }
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let script = root.join("scripts/postgres.sh");
        let dir = tempfile::Builder::new()
            .prefix("burrow-test-pg-")
            .tempdir()
            .expect("a temporary directory")
            .keep();
        // The server runs as the `postgres` user when the tests run as root.
        let _ = Command::new("chmod").arg("755").arg(&dir).status();
        let started = Command::new("bash")
            .arg(&script)
            .arg("start")
            .arg(&dir)
            .stderr(Stdio::inherit())
            .output()
            .expect("run scripts/postgres.sh");
        assert!(
            started.status.success(),
            "cannot start a private PostgreSQL: {started:?}"
        );
        let url = String::from_utf8(started.stdout).unwrap().trim().to_owned();
        // Stops the server once this process has ended, however it ends.
        let watcher = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 1; done; bash {script:?} stop {dir:?}; rm -rf {dir:?}",
            pid = std::process::id(),
        );
        // It outlives this process by design: nobody waits for it.
        #[allow(clippy::zombie_processes)]
        Command::new("setsid")
            .args(["bash", "-c", &watcher])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the watcher that stops PostgreSQL");
        url
    })
}

/// The URL of a new, empty database on the test server.
pub fn database() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let server = server();
    let name = format!(
        "burrow_test_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let created = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                runtime.block_on(async {
                    let (client, connection) =
                        tokio_postgres::connect(server, tokio_postgres::NoTls).await?;
                    tokio::spawn(connection);
                    client
                        .batch_execute(&format!("CREATE DATABASE {name}"))
                        .await
                })
            })
            .join()
            .unwrap()
    });
    created.unwrap_or_else(|e| panic!("cannot create the test database {name}: {e}"));
    let config: tokio_postgres::Config = server.parse().unwrap();
    let host = match &config.get_hosts()[0] {
        tokio_postgres::config::Host::Tcp(host) => host.clone(),
        tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
    };
    format!(
        "postgres://{}@{}:{}/{name}",
        config.get_user().unwrap_or("postgres"),
        host,
        config.get_ports().first().copied().unwrap_or(5432)
    )
}
