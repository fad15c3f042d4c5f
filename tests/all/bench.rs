//! `burrow bench --languages`: a row per guest language, and a clear row for
//! a language whose actors are missing; `burrow bench --modes`: both
//! durability modes with the machine's limits beside them; `burrow bench
//! --scale`: every instance made, listed and counted on disk.

use std::path::Path;

use serde_json::Value;

use crate::support::{programs, shared_cache};

/// Hard-links the shared compile cache into `cache`, so that the bench's
/// hosts need not compile what the tests compiled already.
fn link_cache(cache: &Path) {
    std::fs::create_dir_all(cache).unwrap();
    for entry in std::fs::read_dir(shared_cache())
        .into_iter()
        .flatten()
        .flatten()
    {
        let to = cache.join(entry.file_name());
        if std::fs::hard_link(entry.path(), &to).is_err() {
            let _ = std::fs::copy(entry.path(), &to);
        }
    }
}

/// Runs `burrow bench` with `args` on `manifest`, its data under `data`;
/// it must succeed. Returns its report and what it printed on stderr.
fn bench(manifest: &Path, data: &Path, args: &[&str]) -> (Value, String) {
    let out = crate::support::burrow_command()
        .arg("--manifest")
        .arg(manifest)
        .arg("bench")
        .args(args)
        .arg("--data-dir")
        .arg(data)
        .env("BURROW_LOG", "warn")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    (serde_json::from_slice(&out.stdout).unwrap(), stderr)
}

/// `burrow bench`'s options are part of the command line although its
/// workloads are not part of the library: `--help` lists them, and an
/// unknown one is a bad command line (exit code 2) that names it, before
/// any workload runs.
#[test]
fn the_bench_options_are_listed_and_a_wrong_one_is_named() {
    let help = crate::support::burrow_command()
        .args(["bench", "--help"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(help.status.success(), "{help:?}");
    for option in ["--scale", "--modes", "--cluster", "--wrk", "--data-dir"] {
        assert!(text.contains(option), "{option} is missing from:\n{text}");
    }
    let wrong = crate::support::burrow_command()
        .args(["bench", "--modes", "--no-such-option"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&wrong.stderr);
    assert_eq!(wrong.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--no-such-option"), "{stderr}");
}

/// Writes a manifest with the counter alone into `dir`; its path.
fn counter_manifest(dir: &Path) -> std::path::PathBuf {
    let manifest = dir.join("burrow.toml");
    std::fs::write(
        &manifest,
        format!("[actors.counter]\ncomponent = {:?}\n", programs::COUNTER),
    )
    .unwrap();
    manifest
}

#[tokio::test(flavor = "multi_thread")]
async fn the_languages_run_side_by_side_and_a_missing_one_says_so() {
    let counter_py = programs::COUNTER_PY.expect("the Python counter was built");
    let stepper_py = programs::STEPPER_PY.expect("the Python stepper was built");
    // The components compile once into the shared cache.
    let warm = tempfile::tempdir().unwrap();
    let specs = [
        crate::support::counter_py(),
        burrow::manifest::ActorSpec::new("stepper-py", stepper_py),
        burrow::manifest::ActorSpec::new("stepper", programs::STEPPER),
    ];
    crate::support::start(warm.path(), &specs)
        .await
        .shutdown()
        .await;

    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let manifest = dir.path().join("burrow.toml");
    std::fs::write(
        &manifest,
        format!(
            "[actors.counter]\ncomponent = {:?}\n\
             [actors.stepper]\ncomponent = {:?}\n\
             [actors.counter-py]\ncomponent = {counter_py:?}\nmemory_limit = \"256MiB\"\n\
             [actors.stepper-py]\ncomponent = {stepper_py:?}\nmemory_limit = \"256MiB\"\n\
             [actors.counter-js]\ncomponent = \"missing/counter-js.wasm\"\n\
             [actors.stepper-js]\ncomponent = \"missing/stepper-js.wasm\"\n",
            programs::COUNTER,
            programs::STEPPER,
        ),
    )
    .unwrap();
    let data = dir.path().join("bench");
    link_cache(&data.join("languages").join("cache"));
    let (report, stderr) = bench(
        &manifest,
        &data,
        &["--languages", "--ops", "50", "--w5-steps", "5"],
    );
    let rows = report["languages"].as_array().unwrap();
    let languages: Vec<&str> = rows
        .iter()
        .map(|r| r["language"].as_str().unwrap())
        .collect();
    assert_eq!(languages, ["Rust", "Python", "JavaScript"]);
    for row in &rows[..2] {
        for figure in [
            "w1_mean_us",
            "floor_w1_mean_us",
            "w1_to_own_floor",
            "w5_us_per_step",
            "compile_s",
        ] {
            assert!(row[figure].as_f64().unwrap() > 0.0, "{figure}: {row}");
        }
    }
    assert!(
        rows[1]["component_mb"].as_f64().unwrap() > 1.0,
        "{}",
        rows[1]
    );
    let missing = rows[2]["error"].as_str().unwrap();
    assert!(
        missing.starts_with("not built") && missing.contains("counter-js.wasm is missing"),
        "{missing}"
    );
    let table = report["table"].as_str().unwrap();
    assert!(table.contains("| Python | "), "{table}");
    assert!(table.contains("| JavaScript | not built"), "{table}");
    assert!(stderr.contains("| language |"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_durability_modes_bound_w1_by_its_own_syncs_and_w2_by_the_cpu_of_its_calls_and_syncs() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let manifest = counter_manifest(dir.path());
    let (report, _) = bench(
        &manifest,
        &dir.path().join("bench"),
        &[
            "--modes",
            "--no-http",
            "--ops",
            "50",
            "--w2-calls",
            "5",
            "--hot-calls",
            "128",
        ],
    );
    let in_process = &report["modes"]["in_process"];
    for mode in ["normal", "full"] {
        assert_eq!(in_process[mode]["w2"]["ops"], 64 * 5, "{in_process}");
        assert_eq!(in_process[mode]["w2"]["failed"], 0, "{in_process}");
    }
    let call = in_process["normal"]["w2_machine_cpu_per_call_us"]
        .as_f64()
        .unwrap();
    let sync = in_process["disk_before_full"]["cpu_per_parallel_fsync_us"]
        .as_f64()
        .unwrap();
    let bound = in_process["full_mode_limits"]["w2_cpu_bound_ops_per_sec"]
        .as_f64()
        .unwrap();
    assert!(call > 0.0 && sync > 0.0, "{in_process}");
    let cores = std::thread::available_parallelism().unwrap().get() as f64;
    let expected = cores * 1e6 / (call + sync);
    assert!(
        (bound - expected).abs() <= expected * 0.01 + 1.0,
        "{bound} against {expected}: {in_process}"
    );
    // W1's own syncs: one a call in `full` mode (50 of them), none in
    // `normal`; their mean bounds W1.
    assert!(
        in_process["normal"]["w1_log_sync_mean_us"].is_null(),
        "{in_process}"
    );
    let own_sync = in_process["full"]["w1_log_sync_mean_us"].as_f64().unwrap();
    let own_bound = in_process["full_mode_limits"]["w1_own_syncs_bound_ops_per_sec"]
        .as_f64()
        .unwrap();
    assert!(own_sync > 0.0, "{in_process}");
    assert!(
        (own_bound - 1e6 / own_sync).abs() <= own_bound * 0.01 + 1.0,
        "{own_bound} against {own_sync} µs: {in_process}"
    );
    let table = report["modes"]["table"].as_str().unwrap();
    assert!(table.contains("at W1's own syncs ("), "{table}");
    assert!(
        table.contains("with the CPU of the calls and syncs"),
        "{table}"
    );
    assert!(table.contains("each sync costing the machine"), "{table}");
}

#[test]
fn w8_steps_send_their_requests_and_stand_beside_the_floor() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let manifest = dir.path().join("burrow.toml");
    std::fs::write(
        &manifest,
        format!(
            "[actors.counter]\ncomponent = {:?}\n[actors.stepper]\ncomponent = {:?}\n",
            programs::COUNTER,
            programs::STEPPER,
        ),
    )
    .unwrap();
    let data = dir.path().join("bench");
    link_cache(&data.join("w1").join("cache"));
    link_cache(&data.join("w8").join("cache"));
    let (report, stderr) = bench(
        &manifest,
        &data,
        &["--outbound", "--ops", "50", "--w8-steps", "20"],
    );
    let w8 = &report["w8"];
    assert_eq!(w8["steps"], 20, "{stderr}");
    assert_eq!(w8["parallel_workflows"], 64);
    assert_eq!(w8["parallel_steps_each"], 2);
    for figure in [
        "us_per_step_with_request",
        "us_per_step_without_request",
        "floor_us_per_request_new_connection",
        "floor_us_per_request_kept_alive",
        "parallel_steps_per_sec",
        "floor_parallel_requests_per_sec",
    ] {
        assert!(w8[figure].as_f64().unwrap() > 0.0, "{figure}: {w8}");
    }
}

#[test]
fn the_scale_bench_makes_lists_and_weighs_every_instance() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let manifest = counter_manifest(dir.path());
    let (report, stderr) = bench(&manifest, &dir.path().join("bench"), &["--scale", "300"]);
    assert_eq!(report["instances"], 300, "{report}");
    let tenths = report["tenths"].as_array().unwrap();
    assert_eq!(tenths.len(), 10, "{report}");
    for (i, tenth) in tenths.iter().enumerate() {
        assert_eq!(tenth["instances"], 30 * (i + 1), "{report}");
        assert!(
            tenth["creations_per_sec"].as_f64().unwrap() > 0.0,
            "{report}"
        );
        assert!(tenth["rss_bytes"].as_u64().unwrap() > 0, "{report}");
        // At least the counter's database: a page or more each.
        assert!(
            tenth["disk_bytes_per_instance"].as_u64().unwrap() >= 4096,
            "{report}"
        );
    }
    assert!(report["start_ms"].is_u64(), "{report}");
    assert!(report["list_ms"].is_u64(), "{report}");
    assert!(
        report["floor_creations_per_sec"].as_f64().unwrap() > 0.0,
        "{report}"
    );
    assert!(stderr.contains("start over that directory"), "{stderr}");
}
