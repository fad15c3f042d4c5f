//! The guest languages side by side: for each language, its counter under
//! W1 (sequential `increment(1)`, in-process) and its stepper under W5 (one
//! workflow of N steps), W1 against the floor (see [`super::floor`]) run
//! with the same component and with the Rust counter, the time to compile
//! each component (timed in the floor: a fresh engine, no cache, the same
//! compiler settings as Burrow's but for epoch interruption) and the build
//! time `burrow build` recorded (see `burrow::cli::builds`).
//!
//! The actors are the manifest's `counter`, `counter-py`, `counter-js`,
//! `stepper`, `stepper-py` and `stepper-js`; a language whose actors are not
//! in the manifest, or whose components were not built, gets a row that
//! says so.

use std::fmt::Write;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::{Value, json};

use super::{BenchArgs, config, floor, timed, workflow};
use burrow::config::HostConfig;
use burrow::host::Host;
use burrow::manifest::{ActorSpec, Manifest};

/// The languages: a name and the suffix of their actors' names.
pub const LANGUAGES: &[(&str, &str)] = &[("Rust", ""), ("Python", "-py"), ("JavaScript", "-js")];

/// One language's figures.
struct Figures {
    w1_mean: Duration,
    w1_p99: Duration,
    floor_mean: Duration,
    w5_per_step: Duration,
    component_bytes: u64,
    compile: Duration,
    build_s: Option<f64>,
}

/// The actor `name`, if the manifest has it and its component exists.
fn actor(manifest: &Manifest, name: &str) -> Result<ActorSpec, String> {
    let Some(spec) = manifest.actors.get(name) else {
        return Err(format!("not built: no `{name}` in the manifest"));
    };
    if !spec.component.exists() {
        return Err(format!(
            "not built: {} is missing (burrow build {name})",
            spec.component.display()
        ));
    }
    Ok(spec.clone())
}

async fn measure(
    counter: &ActorSpec,
    stepper: &ActorSpec,
    root: &Path,
    args: &BenchArgs,
    build_s: Option<f64>,
) -> Result<Figures> {
    let name = &counter.name;
    // One compile cache for the run's hosts: a component compiles once.
    let config = |dir: &str| HostConfig {
        cache_dir: Some(root.join("cache")),
        ..config(&root.join(dir), args)
    };
    let host = Host::start(config(name), std::slice::from_ref(counter)).await?;
    host.call(name, "w1", "increment", "[1]").await?;
    let w1 = timed(args.ops, async |_| {
        Ok(host.call(name, "w1", "increment", "[1]").await.map(drop)?)
    })
    .await?;
    host.shutdown().await;
    drop(host);
    let floor = floor::run(
        &counter.component,
        &root.join(format!("{name}-floor")),
        args.ops,
        0,
    )
    .await
    .with_context(|| format!("the floor of {name} failed"))?;
    let w5 = workflow::run(config(&stepper.name), stepper, args.w5_steps).await?;
    let per_step = w5["us_per_step"].as_f64().unwrap_or(0.0);
    Ok(Figures {
        w1_mean: w1.mean(),
        w1_p99: w1.percentile(99.0),
        floor_mean: floor.w1.mean(),
        w5_per_step: Duration::from_secs_f64(per_step / 1e6),
        component_bytes: std::fs::metadata(&counter.component).map_or(0, |m| m.len()),
        compile: floor.compile,
        build_s,
    })
}

fn us(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e7).round() / 10.0
}

fn ratio(a: Duration, b: Duration) -> f64 {
    if b.is_zero() {
        return 0.0;
    }
    (a.as_secs_f64() / b.as_secs_f64() * 10.0).round() / 10.0
}

/// Runs the workloads for every language; returns their figures, with a
/// Markdown table under `table`.
pub(super) async fn run(manifest_path: &Path, root: &Path, args: &BenchArgs) -> Result<Value> {
    let manifest = Manifest::load(manifest_path)?;
    let records = burrow::cli::builds::read_records(&manifest.data_dir());
    let mut rows: Vec<(&str, Result<Figures, String>)> = Vec::new();
    for (language, suffix) in LANGUAGES {
        let counter = actor(&manifest, &format!("counter{suffix}"));
        let stepper = actor(&manifest, &format!("stepper{suffix}"));
        let figures = match (counter, stepper) {
            (Ok(counter), Ok(stepper)) => {
                eprintln!("languages: {language} ({}, {})", counter.name, stepper.name);
                let build_s = records.get(&counter.name).and_then(|r| r.build_s);
                measure(&counter, &stepper, root, args, build_s)
                    .await
                    .map_err(|e| format!("failed: {e:#}"))
            }
            (Err(why), _) | (_, Err(why)) => Err(why),
        };
        rows.push((language, figures));
    }
    let rust_floor = match &rows[0].1 {
        Ok(rust) => rust.floor_mean,
        Err(_) => Duration::ZERO,
    };
    let mut out = Vec::new();
    for (language, figures) in &rows {
        out.push(match figures {
            Ok(f) => json!({
                "language": language,
                "w1_mean_us": us(f.w1_mean),
                "w1_p99_us": us(f.w1_p99),
                "floor_w1_mean_us": us(f.floor_mean),
                "w1_to_own_floor": ratio(f.w1_mean, f.floor_mean),
                "w1_to_rust_floor": ratio(f.w1_mean, rust_floor),
                "w5_us_per_step": us(f.w5_per_step),
                "w5_step_to_w1_call": ratio(f.w5_per_step, f.w1_mean),
                "component_mb": (f.component_bytes as f64 / 1e5).round() / 10.0,
                "compile_s": (f.compile.as_secs_f64() * 100.0).round() / 100.0,
                "build_s": f.build_s.map(|s| (s * 10.0).round() / 10.0),
            }),
            Err(why) => json!({ "language": language, "error": why }),
        });
    }
    let table = table(&rows, rust_floor, args);
    Ok(json!({ "languages": out, "table": table }))
}

fn table(
    rows: &[(&str, Result<Figures, String>)],
    rust_floor: Duration,
    args: &BenchArgs,
) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "| language | W1 µs/call (p99) | floor µs/call, same component | × own floor | × Rust floor | W5 µs/step ({} steps) | component | compile (no cache) | build |",
        args.w5_steps
    );
    let _ = writeln!(t, "| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for (language, figures) in rows {
        match figures {
            Ok(f) => {
                let build = f
                    .build_s
                    .map_or("not recorded".to_owned(), |s| format!("{s:.1} s"));
                let _ = writeln!(
                    t,
                    "| {language} | {:.1} ({:.1}) | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} MB | {:.2} s | {build} |",
                    us(f.w1_mean),
                    us(f.w1_p99),
                    us(f.floor_mean),
                    ratio(f.w1_mean, f.floor_mean),
                    ratio(f.w1_mean, rust_floor),
                    us(f.w5_per_step),
                    f.component_bytes as f64 / 1e6,
                    f.compile.as_secs_f64(),
                );
            }
            Err(why) => {
                let _ = writeln!(t, "| {language} | {why} | | | | | | | |");
            }
        }
    }
    let _ = writeln!(
        t,
        "\nW1: {} sequential increment(1) in-process. Build: the build command's time in the last `burrow build` (builds.json in the data directory).",
        args.ops
    );
    t
}
