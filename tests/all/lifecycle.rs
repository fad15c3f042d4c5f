//! Create, wake, sleep and destroy.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn the_first_call_creates_and_every_start_wakes() {
    let dir = tempfile::tempdir().unwrap();
    let actors = [probe()];
    let host = start(dir.path(), &actors).await;
    assert_eq!(
        call(&host, "probe", "p", "hooks", "[]").await,
        json!(["migrate", "create", "wake"])
    );
    assert_eq!(host.keys("probe").await.unwrap(), vec!["p".to_string()]);

    let host = restart(host, &actors).await;
    // The sleep hook ran at shutdown; the restart ran migrate and wake.
    assert_eq!(
        call(&host, "probe", "p", "hooks", "[]").await,
        json!(["migrate", "create", "wake", "sleep", "migrate", "wake"])
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_idle_instance_sleeps_and_the_next_call_wakes_it() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[sleepy_probe(Duration::from_millis(100))]).await;
    assert_eq!(call(&host, "probe", "p", "add", "[\"x\"]").await, json!(1));
    assert_eq!(host.awake_count(), 1);

    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while host.awake_count() > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the instance never went to sleep"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(call(&host, "probe", "p", "count", "[]").await, json!(1));
    assert_eq!(host.awake_count(), 1);
    assert_eq!(
        call(&host, "probe", "p", "hooks", "[]").await,
        json!(["migrate", "create", "wake", "sleep", "migrate", "wake"])
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_explicit_create_passes_its_input_once() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[probe()]).await;
    host.create("probe", "c", r#"{"label": "first"}"#)
        .await
        .unwrap();
    assert_eq!(
        call(&host, "probe", "c", "create_label", "[]").await,
        json!("first")
    );
    let err = host
        .create("probe", "c", r#"{"label": "again"}"#)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "already-exists", "{err}");
    assert_eq!(
        call(&host, "probe", "c", "create_label", "[]").await,
        json!("first")
    );

    let err = host.create("probe", "d", "{not json").await.unwrap_err();
    assert_eq!(err.code(), "invalid-arguments", "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_create_hook_leaves_no_instance() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[probe()]).await;
    let err = host
        .create("probe", "f", r#"{"fail": true}"#)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "action-failed", "{err}");
    assert!(err.to_string().contains("hook create"), "{err}");
    assert!(!burrow::instance_path(host.data_dir(), "probe", "f").exists());
    assert_eq!(
        host.inspect("probe", "f").unwrap_err().code(),
        "no-such-instance"
    );
    host.create("probe", "f", r#"{"label": "second try"}"#)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_first_call_leaves_no_instance() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[probe()]).await;
    let err = host
        .call("probe", "typo", "no_such_action", "[]")
        .await
        .unwrap_err();
    assert_eq!(err.code(), "unknown-action");
    assert!(!burrow::instance_path(host.data_dir(), "probe", "typo").exists());
    assert!(host.keys("probe").await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn destroy_deletes_the_data() {
    let dir = tempfile::tempdir().unwrap();
    let actors = [counter()];
    let host = start(dir.path(), &actors).await;
    assert_eq!(
        call(&host, "counter", "gone", "increment", "[4]").await,
        json!(4)
    );
    host.destroy("counter", "gone").await.unwrap();
    assert!(!burrow::instance_path(host.data_dir(), "counter", "gone").exists());
    assert_eq!(
        host.inspect("counter", "gone").unwrap_err().code(),
        "no-such-instance"
    );
    let err = host.destroy("counter", "gone").await.unwrap_err();
    assert_eq!(err.code(), "no-such-instance");

    // Destroying an asleep instance works too, and a new one starts at zero.
    assert_eq!(
        call(&host, "counter", "gone", "increment", "[1]").await,
        json!(1)
    );
    let host = restart(host, &actors).await;
    host.destroy("counter", "gone").await.unwrap();
    assert_eq!(
        call(&host, "counter", "gone", "increment", "[1]").await,
        json!(1)
    );
}

/// A data directory of the flat layout (every instance file in its actor's
/// directory, as hosts before subdirectories kept them) opens with its
/// files moved into subdirectories, and every instance serves, lists,
/// inspects and destroys as before.
#[tokio::test(flavor = "multi_thread")]
async fn a_data_directory_of_the_flat_layout_is_moved_and_serves_every_instance() {
    let dir = tempfile::tempdir().unwrap();
    let actors = [counter()];
    let host = start(dir.path(), &actors).await;
    let keys: Vec<String> = (0..40).map(|i| format!("k{i}")).collect();
    for (i, key) in keys.iter().enumerate() {
        let by = format!("[{}]", i + 1);
        assert_eq!(
            call(&host, "counter", key, "increment", &by).await,
            json!(i + 1)
        );
    }
    host.shutdown().await;
    drop(host);
    let actor = dir.path().join("actors/counter");
    make_flat(&actor);

    let host = start(dir.path(), &actors).await;
    assert_eq!(flat_files(&actor), 0, "every file was moved");
    for (i, key) in keys.iter().enumerate() {
        assert!(burrow::instance_path(dir.path(), "counter", key).exists());
        assert_eq!(call(&host, "counter", key, "get", "[]").await, json!(i + 1));
    }
    let mut listed = host.keys("counter").await.unwrap();
    listed.sort();
    let mut expected = keys.clone();
    expected.sort();
    assert_eq!(listed, expected);
    assert_eq!(host.inspect("counter", "k3").unwrap().key, "k3");
    host.destroy("counter", "k3").await.unwrap();
    assert!(!burrow::instance_path(dir.path(), "counter", "k3").exists());
    assert_eq!(call(&host, "counter", "k3", "get", "[]").await, json!(0));
}

/// Moves every file of the actor directory `actor` out of its
/// subdirectories, into the flat layout of hosts before them.
fn make_flat(actor: &Path) {
    for subdir in std::fs::read_dir(actor).unwrap() {
        let subdir = subdir.unwrap().path();
        if !subdir.is_dir() {
            continue;
        }
        for file in std::fs::read_dir(&subdir).unwrap() {
            let file = file.unwrap().path();
            std::fs::rename(&file, actor.join(file.file_name().unwrap())).unwrap();
        }
        std::fs::remove_dir(&subdir).unwrap();
    }
}

/// The files in the actor directory `actor` itself.
fn flat_files(actor: &Path) -> usize {
    std::fs::read_dir(actor)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_type().unwrap().is_file())
        .count()
}

/// `burrow serve` killed with SIGKILL in the middle of the move into
/// subdirectories: the next start finishes the move, and every instance
/// answers with its value. Empty side files of 20,000 other keys make the
/// move long enough for the test to see half of the files moved and kill
/// the server before the move ends; if a fast disk finishes first, the
/// test tries again.
#[tokio::test(flavor = "multi_thread")]
async fn a_kill_9_in_the_middle_of_the_move_into_subdirectories_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let actors = [counter()];
    let host = start(&data, &actors).await;
    let keys: Vec<String> = (0..40).map(|i| format!("k{i}")).collect();
    for (i, key) in keys.iter().enumerate() {
        let by = format!("[{}]", i + 1);
        call(&host, "counter", key, "increment", &by).await;
    }
    host.shutdown().await;
    drop(host);
    let actor = data.join("actors/counter");
    make_flat(&actor);
    for i in 0..20_000 {
        let path = burrow::instance_path(&data, "counter", &format!("other{i}"));
        let name = format!("{}-shm", path.file_name().unwrap().to_str().unwrap());
        std::fs::File::create(actor.join(name)).unwrap();
    }
    let total = flat_files(&actor);
    let manifest = crate::cli::write_manifest(dir.path());

    let mut cut_in_the_middle = false;
    for _try in 0..5 {
        let mut server = crate::support::burrow_command()
            .arg("--manifest")
            .arg(&manifest)
            .args(["serve", "--listen", &format!("127.0.0.1:{}", free_port())])
            .env("BURROW_LOG", "warn")
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(120);
        while flat_files(&actor) > total / 2 {
            assert!(
                std::time::Instant::now() < deadline,
                "the move never got half way"
            );
            assert!(server.try_wait().unwrap().is_none(), "burrow serve ended");
        }
        server.kill().unwrap();
        server.wait().unwrap();
        let left = flat_files(&actor);
        if left > 0 {
            assert!(left < total);
            cut_in_the_middle = true;
            break;
        }
        make_flat(&actor);
    }
    assert!(cut_in_the_middle, "every move ended before the kill");

    let host = start(&data, &actors).await;
    assert_eq!(flat_files(&actor), 0, "the next start finished the move");
    for (i, key) in keys.iter().enumerate() {
        assert_eq!(call(&host, "counter", key, "get", "[]").await, json!(i + 1));
    }
}

/// A counter holds its table and the host's two tables every instance
/// has, no others: 16 KB on disk once asleep, with no file beside it.
#[tokio::test(flavor = "multi_thread")]
async fn a_sleeping_counter_is_four_pages_and_one_file() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[counter()]).await;
    assert_eq!(
        call(&host, "counter", "c", "increment", "[2]").await,
        json!(2)
    );
    host.shutdown().await;
    drop(host);
    let path = burrow::instance_path(dir.path(), "counter", "c");
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 16 * 1024);
    let beside: Vec<_> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(beside, [path.file_name().unwrap()]);
    let conn =
        rusqlite::Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_schema ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(tables, ["_burrow_instance", "_burrow_state", "counter"]);
}
