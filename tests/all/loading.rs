//! Broken components fail to load with an error naming the actor, the file
//! and what is wrong (a start refuses them; a launch refuses what it sees
//! at once, and fails the actor alone when its compilation fails); a
//! corrupt compile-cache entry is rebuilt.

use std::path::Path;
use std::time::Duration;

use burrow::manifest::ActorSpec;
use burrow::{Host, HostConfig};
use serde_json::json;

use crate::support::*;

async fn load_error(path: &Path) -> String {
    let dir = tempfile::tempdir().unwrap();
    let spec = ActorSpec::new("broken", path);
    match Host::start(config(dir.path()), &[spec]).await {
        Ok(_) => panic!("{} loaded", path.display()),
        Err(e) => format!("{e:#}"),
    }
}

#[tokio::test]
async fn broken_components_are_refused_by_name() {
    let scratch = tempfile::tempdir().unwrap();
    let write = |name: &str, bytes: &[u8]| {
        let path = scratch.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    };

    let missing = load_error(&scratch.path().join("missing.wasm")).await;
    assert!(
        missing.contains("actor `broken`") && missing.contains("does not exist"),
        "{missing}"
    );

    let garbage = load_error(&write("garbage.wasm", b"hello, world")).await;
    assert!(garbage.contains("not a WebAssembly component"), "{garbage}");

    let module = load_error(&write("module.wasm", b"\0asm\x01\0\0\0")).await;
    assert!(module.contains("core WebAssembly module"), "{module}");

    let truncated = std::fs::read(programs::COUNTER).unwrap();
    let truncated = load_error(&write("truncated.wasm", &truncated[..truncated.len() / 2])).await;
    assert!(truncated.contains("does not compile"), "{truncated}");

    let no_exports = load_error(Path::new(programs::NO_EXPORTS)).await;
    assert!(no_exports.contains("burrow:actor/guest"), "{no_exports}");
    assert!(no_exports.contains("no_exports.wasm"), "{no_exports}");

    let stray = load_error(Path::new(programs::STRAY_IMPORT)).await;
    assert!(stray.contains("stray:thing/clock"), "{stray}");
}

#[tokio::test]
async fn a_corrupt_cache_entry_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let config = HostConfig {
        data_dir: dir.path().to_path_buf(),
        max_awake: 4,
        ..HostConfig::default()
    };
    let host = Host::start(config.clone(), &[counter()]).await.unwrap();
    host.shutdown().await;
    drop(host);
    let cache = dir.path().join("cache");
    let entries: Vec<_> = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    let mut bytes = std::fs::read(&entries[0]).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&entries[0], &bytes).unwrap();

    let host = Host::start(config, &[counter()]).await.unwrap();
    let value = host.call("counter", "c", "increment", "[3]").await.unwrap();
    assert_eq!(json(&value), json!(3));
    assert_ne!(
        std::fs::read(&entries[0]).unwrap(),
        bytes,
        "the entry was rewritten"
    );
}

#[tokio::test]
async fn a_second_host_on_one_data_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let first = start(dir.path(), &[counter()]).await;
    let err = Host::start(config(dir.path()), &[counter()])
        .await
        .err()
        .unwrap();
    assert!(
        format!("{err:#}").contains("another burrow host"),
        "{err:#}"
    );
    drop(first);
}

#[tokio::test]
async fn a_launch_refuses_at_once_what_it_can_see_at_once() {
    let scratch = tempfile::tempdir().unwrap();
    let launch_error = async |path: &Path| {
        let dir = tempfile::tempdir().unwrap();
        let spec = ActorSpec::new("broken", path);
        match Host::launch(config(dir.path()), &[counter(), spec]).await {
            Ok(_) => panic!("{} was launched", path.display()),
            Err(e) => format!("{e:#}"),
        }
    };
    let missing = launch_error(&scratch.path().join("missing.wasm")).await;
    assert!(
        missing.contains("actor `broken`") && missing.contains("does not exist"),
        "{missing}"
    );
    let garbage = scratch.path().join("garbage.wasm");
    std::fs::write(&garbage, b"hello, world").unwrap();
    let garbage = launch_error(&garbage).await;
    assert!(garbage.contains("not a WebAssembly component"), "{garbage}");

    // Compiled once (into the shared cache) by a start that refuses it, a
    // component that imports what the host lacks is refused by a launch
    // too, from the cache.
    let stray = load_error(Path::new(programs::STRAY_IMPORT)).await;
    assert!(stray.contains("stray:thing/clock"), "{stray}");
    let stray = launch_error(Path::new(programs::STRAY_IMPORT)).await;
    assert!(stray.contains("stray:thing/clock"), "{stray}");
}

#[tokio::test]
async fn a_component_that_does_not_compile_fails_its_actor_alone_until_a_deploy() {
    let scratch = tempfile::tempdir().unwrap();
    let good = std::fs::read(programs::COUNTER).unwrap();
    // A component's header, then half of one: seen only by compiling it.
    let truncated = scratch.path().join("truncated.wasm");
    std::fs::write(&truncated, &good[..good.len() / 2]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let broken = ActorSpec::new("broken", &truncated);
    let host = Host::launch(config(dir.path()), &[counter(), broken])
        .await
        .unwrap();

    let readiness = eventually(Duration::from_secs(600), "the compilation", async || {
        let readiness = host.readiness();
        readiness.compiling.is_empty().then_some(readiness)
    })
    .await;
    assert_eq!(readiness.ready, ["counter"]);
    assert_eq!(readiness.failed, ["broken"]);
    assert_eq!(
        call(&host, "counter", "c", "increment", "[2]").await,
        json!(2)
    );

    let failed = host
        .call("broken", "b", "increment", "[1]")
        .await
        .unwrap_err();
    assert_eq!(failed.code(), "load-failed", "{failed}");
    let message = failed.to_string();
    assert!(
        message.contains("actor `broken`")
            && message.contains("truncated.wasm")
            && message.contains("does not compile"),
        "{message}"
    );
    assert_eq!(failed.http_status(), 503);
    // Views read the files without the component.
    assert_eq!(host.keys("broken").await.unwrap(), Vec::<String>::new());

    // A deploy gives the actor its first running component.
    let deployed = host.deploy("broken", good, false).await.unwrap();
    assert_eq!(
        (deployed.version, deployed.previous_digest.as_str()),
        (1, "")
    );
    assert_eq!(
        call(&host, "broken", "b", "increment", "[3]").await,
        json!(3)
    );
    assert!(host.readiness().all_ready(), "{:?}", host.readiness());
    let no_previous = host.deploy_previous("broken", false).await.unwrap_err();
    assert_eq!(no_previous.code(), "no-previous-component", "{no_previous}");
}
