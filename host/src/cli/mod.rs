//! The `burrow` command.
//!
//! Exit codes: 0 success; 1 any other failure (unreachable server, bad
//! manifest, storage); 2 bad command line; 3 not found (unknown actor,
//! action, instance); 4 invalid input (arguments, key, actor name); 5 the
//! action returned an error, a waited-for event was dead-lettered, or the
//! connect hook refused a `watch`; 6 the guest trapped; 7 unavailable
//! (timed out, overloaded, shutting down, queue full, a send whose wait
//! ended first); 8 conflict (already exists).
//!
//! Every command that changes an instance is written once, for both places
//! it can run (`target.rs`): a server, or a host embedded in this process.

mod args;
mod build;
pub mod builds;
mod dev;
mod embedded;
mod new;
mod output;
mod remote;
mod target;
mod watch;

use std::path::Path;
use std::process::ExitCode;

use serde_json::{Value, json};

pub use args::{
    AccessArgs, BenchArgs, Cli, ClusterArgs, ClusterCommand, Command, DEFAULT_LISTEN, HostArgs,
    HttpArgs, Lang, LogFormat, Target, Template,
};
pub use output::exit_code;

use output::{Failure, parse_json_arg, parse_result, send_outcome};
use remote::{Remote, client};
use target::Source;

/// Prints the process's log lines to stderr in `format`, at the level
/// `BURROW_LOG` sets (default `info`; `debug` adds a span per call with
/// its actor, key and action, and per queue run, workflow run and
/// schedule run).
pub fn install_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("BURROW_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
        LogFormat::Json => builder
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .init(),
    }
}

/// Runs the command line and returns the process's exit code. `bench`
/// runs `burrow bench` (its workloads live in the crate `burrow-bench`,
/// not in the library): it gets the manifest's path and the command's
/// options and returns the figures.
pub async fn run<B>(cli: Cli, bench: B) -> ExitCode
where
    B: AsyncFnOnce(&Path, BenchArgs) -> anyhow::Result<Value>,
{
    let json = cli.json;
    output::print(json, dispatch(cli, bench).await)
}

async fn dispatch<B>(cli: Cli, bench: B) -> Result<Option<Value>, Failure>
where
    B: AsyncFnOnce(&Path, BenchArgs) -> anyhow::Result<Value>,
{
    let manifest = &cli.manifest;
    let remote = Remote {
        ca_cert: cli.ca_cert.as_deref(),
        token: cli.token.as_deref(),
    };
    match cli.command {
        Command::New {
            name,
            lang,
            template,
            sdk,
        } => {
            let here = std::env::current_dir()
                .map_err(|e| anyhow::anyhow!("cannot read the current folder: {e}"))?;
            let next = new::new(&here, &name, lang, template, sdk.as_deref())?;
            Ok(Some(serde_json::Value::String(next)))
        }
        Command::Build { actors, host } => {
            build::build(manifest, &actors, &host).await?;
            Ok(None)
        }
        Command::Serve {
            listen,
            no_ui,
            access,
            http,
            tls_cert,
            tls_key,
            host,
            cluster,
        } => {
            let tls = tls_cert.zip(tls_key);
            embedded::serve(
                manifest,
                listen,
                no_ui,
                &access,
                &http,
                tls,
                &host,
                &cluster,
                remote.ca_cert,
            )
            .await?;
            Ok(None)
        }
        Command::Dev {
            listen,
            access,
            http,
            host,
        } => {
            dev::dev(manifest, listen, &access, &http, &host).await?;
            Ok(None)
        }
        Command::Cluster {
            command: ClusterCommand::Status { url },
        } => {
            let status = client(&url, remote)?
                .cluster_status()
                .await
                .map_err(Failure::from)?;
            Ok(Some(status))
        }
        Command::Cluster {
            command: ClusterCommand::Drain { host, url },
        } => {
            let client = client(&url, remote)?;
            let status = client.cluster_status().await.map_err(Failure::from)?;
            let address = drain_address(&status, &host)?;
            let drained = client
                .with_base_url(&address)
                .cluster_drain()
                .await
                .map_err(Failure::from)?;
            Ok(Some(drained))
        }
        Command::Call {
            actor,
            key,
            action,
            args,
            target,
        } => {
            parse_json_arg(&args, "the arguments")?;
            let result = target
                .run(manifest, remote, async |on| {
                    on.call(&actor, &key, &action, &args).await
                })
                .await?;
            Ok(Some(parse_result(&result)))
        }
        Command::Create {
            actor,
            key,
            input,
            target,
        } => {
            parse_json_arg(&input, "the create input")?;
            target
                .run(manifest, remote, async |on| {
                    on.create(&actor, &key, &input).await
                })
                .await?;
            Ok(Some(json!({ "created": true })))
        }
        Command::Deploy {
            actor,
            component,
            previous,
            check,
            url,
        } => {
            let client = client(&url, remote)?;
            let deployed = match component {
                Some(path) => {
                    let bytes = std::fs::read(&path).map_err(|e| {
                        Failure::usage(format!("cannot read {}: {e}", path.display()))
                    })?;
                    client.deploy(&actor, bytes, check).await?
                }
                None if previous => client.deploy_previous(&actor, check).await?,
                None => return Err(Failure::usage("give a component, or --previous")),
            };
            Ok(Some(deployed))
        }
        Command::Export {
            actor,
            key,
            output,
            target,
        } => {
            if output.is_none() && std::io::IsTerminal::is_terminal(&std::io::stdout()) {
                return Err(anyhow::anyhow!(
                    "an export file is not text: give --output FILE, or send standard output to a file"
                )
                .into());
            }
            let file = target
                .run(manifest, remote, async |on| on.export(&actor, &key).await)
                .await?;
            let bytes = file.len();
            match &output {
                Some(path) => std::fs::write(path, &file).map_err(|e| {
                    anyhow::anyhow!("cannot write the export to {}: {e}", path.display())
                })?,
                None => std::io::Write::write_all(&mut std::io::stdout().lock(), &file)
                    .map_err(|e| anyhow::anyhow!("cannot write the export: {e}"))?,
            }
            Ok(output.map(|path| json!({ "exported": path, "bytes": bytes })))
        }
        Command::Import {
            actor,
            key,
            file,
            replace,
            target,
        } => {
            let bytes = if file.as_os_str() == "-" {
                let mut bytes = Vec::new();
                std::io::Read::read_to_end(&mut std::io::stdin().lock(), &mut bytes).map(|_| bytes)
            } else {
                std::fs::read(&file)
            }
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", file.display()))?;
            target
                .run(manifest, remote, async |on| {
                    on.import(&actor, &key, bytes, replace).await
                })
                .await?;
            Ok(Some(json!({ "imported": true })))
        }
        Command::Fork {
            actor,
            key,
            new_key,
            target,
        } => {
            target
                .run(manifest, remote, async |on| {
                    on.fork(&actor, &key, &new_key).await
                })
                .await?;
            Ok(Some(json!({ "forked": new_key, "paused": true })))
        }
        Command::Pause { actor, key, target } => {
            let paused = target
                .run(manifest, remote, async |on| on.pause(&actor, &key).await)
                .await?;
            Ok(Some(json!({ "paused": paused })))
        }
        Command::Resume { actor, key, target } => {
            let resumed = target
                .run(manifest, remote, async |on| on.resume(&actor, &key).await)
                .await?;
            Ok(Some(json!({ "resumed": resumed })))
        }
        Command::Destroy { actor, key, target } => {
            target
                .run(manifest, remote, async |on| on.destroy(&actor, &key).await)
                .await?;
            Ok(Some(json!({ "destroyed": true })))
        }
        Command::Inspect {
            actor,
            key,
            history,
            url,
            data_dir,
        } => {
            let source = Source::new(manifest, url, remote, data_dir)?;
            Ok(Some(if history {
                source.workflow(&actor, &key).await?
            } else {
                source.inspect(&actor, &key).await?
            }))
        }
        Command::Send {
            actor,
            key,
            event_type,
            payload,
            priority,
            group,
            wait,
            timeout,
            target,
        } => {
            let options = crate::SendOptions {
                priority,
                group,
                wait: wait.then(|| timeout.unwrap_or(crate::config::DEFAULT_SEND_WAIT)),
            };
            let outcome = target
                .run(manifest, remote, async |on| {
                    on.send(&actor, &key, &event_type, &payload, options).await
                })
                .await?;
            send_outcome(outcome)
        }
        Command::Queue {
            actor,
            key,
            url,
            data_dir,
        } => {
            let source = Source::new(manifest, url, remote, data_dir)?;
            Ok(Some(source.queue(&actor, &key).await?))
        }
        Command::Requeue {
            actor,
            key,
            id,
            target,
        } => {
            target
                .run(manifest, remote, async |on| {
                    on.requeue(&actor, &key, id).await
                })
                .await?;
            Ok(Some(json!({ "id": id, "status": "requeued" })))
        }
        Command::Discard {
            actor,
            key,
            id,
            target,
        } => {
            target
                .run(manifest, remote, async |on| {
                    on.discard(&actor, &key, id).await
                })
                .await?;
            Ok(Some(json!({ "id": id, "status": "discarded" })))
        }
        Command::Watch {
            actor,
            key,
            params,
            url,
        } => {
            watch::watch(&actor, &key, params.as_deref(), &url, remote).await?;
            Ok(None)
        }
        Command::Bench(args) => Ok(Some(bench(manifest, args).await?)),
    }
}

/// The address of the host named `host` (its `--name` or its id) in the
/// cluster's `status`, if it is a live member.
fn drain_address(status: &Value, host: &str) -> Result<String, Failure> {
    let hosts = status["hosts"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let live: Vec<&Value> = hosts
        .iter()
        .filter(|h| h["live"] == true && (h["name"] == host || h["id"] == host))
        .collect();
    match live.as_slice() {
        [one] => Ok(one["address"].as_str().unwrap_or_default().to_owned()),
        [] => {
            let names: Vec<&str> = hosts
                .iter()
                .filter(|h| h["live"] == true)
                .filter_map(|h| h["name"].as_str())
                .collect();
            Err(Failure {
                code: "no-such-host".into(),
                message: format!(
                    "no live host of the cluster is named `{host}`; live hosts: {}",
                    names.join(", ")
                ),
                exit: output::exit_code("no-such-host"),
            })
        }
        _ => Err(Failure::usage(format!(
            "{} live hosts are named `{host}`: give the id of one (see `burrow cluster status`)",
            live.len()
        ))),
    }
}
