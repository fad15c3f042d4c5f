//! The `burrow` command.
//!
//! Exit codes: 0 success; 1 any other failure (unreachable server, bad
//! manifest, storage); 2 bad command line; 3 not found (unknown actor,
//! action, instance); 4 invalid input (arguments, key, actor name); 5 the
//! action returned an error, a waited-for event was dead-lettered, or the
//! connect hook refused a `watch`; 6 the guest trapped; 7 unavailable
//! (timed out, overloaded, shutting down, queue full, a send whose wait
//! ended first); 8 conflict (already exists).

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use burrow_client::{Client, ClientError};
use clap::{Parser, Subcommand};
use serde_json::{Value, json};

use crate::config::{DEFAULT_MAX_AWAKE, DEFAULT_MAX_CONNECTIONS, HostConfig, Synchronous};
use crate::error::Error;
use crate::host::Host;
use crate::manifest::Manifest;

/// Default address of `burrow serve` and of the client commands.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7878";

/// Burrow: a host for sandboxed, durable actors.
#[derive(Debug, Parser)]
#[command(name = "burrow", version, about)]
pub struct Cli {
    /// The manifest.
    #[arg(
        long,
        global = true,
        default_value = "burrow.toml",
        env = "BURROW_MANIFEST"
    )]
    pub manifest: PathBuf,
    /// Print results and errors as JSON.
    #[arg(long, global = true)]
    pub json: bool,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// Where a client command runs.
#[derive(Debug, clap::Args)]
pub struct Target {
    /// The server to talk to.
    #[arg(
        long,
        default_value = "http://127.0.0.1:7878",
        env = "BURROW_URL",
        conflicts_with = "local"
    )]
    pub url: String,
    /// Run an embedded host in this process on the data directory instead
    /// of talking to a server (no server may be running on it).
    #[arg(long)]
    pub local: bool,
    /// Settings of the embedded host.
    #[command(flatten)]
    pub host: HostArgs,
}

/// Settings of an embedded host.
#[derive(Debug, clap::Args)]
pub struct HostArgs {
    /// Data directory (default: the manifest's, else `.burrow` beside it).
    #[arg(long, env = "BURROW_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// `synchronous` of instance databases (default: the manifest's, else normal).
    #[arg(long, value_enum)]
    pub synchronous: Option<Synchronous>,
    /// Instances awake at once.
    #[arg(long, default_value_t = DEFAULT_MAX_AWAKE)]
    pub max_awake: usize,
    /// Client connections (WebSockets) open at once.
    #[arg(long, default_value_t = DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Build the manifest's components (all, or the named actors).
    Build {
        /// Actors to build.
        actors: Vec<String>,
        /// Host settings (where compiled components are cached).
        #[command(flatten)]
        host: HostArgs,
    },
    /// Serve the HTTP API.
    Serve {
        /// Address to listen on.
        #[arg(long, default_value = DEFAULT_LISTEN)]
        listen: SocketAddr,
        /// Host settings.
        #[command(flatten)]
        host: HostArgs,
    },
    /// Call an action: `burrow call counter my-key increment '[5]'`.
    Call {
        /// Actor name.
        actor: String,
        /// Instance key.
        key: String,
        /// Action name.
        action: String,
        /// Arguments, a JSON array.
        #[arg(default_value = "[]")]
        args: String,
        /// Where to run.
        #[command(flatten)]
        target: Target,
    },
    /// Create an instance with an input for its create hook.
    Create {
        /// Actor name.
        actor: String,
        /// Instance key.
        key: String,
        /// Create input, JSON.
        #[arg(default_value = "null")]
        input: String,
        /// Where to run.
        #[command(flatten)]
        target: Target,
    },
    /// Show an instance's state and tables (read-only; works while a server runs).
    Inspect {
        /// Actor name.
        actor: String,
        /// Instance key.
        key: String,
        /// Show only the workflow: its status, what it waits for, and its
        /// history (steps with attempts, errors and timers).
        #[arg(long)]
        history: bool,
        /// Ask this server instead of reading the data directory.
        #[arg(long)]
        url: Option<String>,
        /// Data directory (default: the manifest's, else `.burrow`).
        #[arg(long, env = "BURROW_DATA_DIR")]
        data_dir: Option<PathBuf>,
    },
    /// Delete an instance and all its data.
    Destroy {
        /// Actor name.
        actor: String,
        /// Instance key.
        key: String,
        /// Where to run.
        #[command(flatten)]
        target: Target,
    },
    /// Append an event to an instance's queue:
    /// `burrow send mailer main welcome '"ada@example.com"' --wait`.
    Send {
        /// Actor name.
        actor: String,
        /// Instance key.
        key: String,
        /// Event type.
        event_type: String,
        /// Payload, JSON.
        #[arg(default_value = "null")]
        payload: String,
        /// Lower values are processed first.
        #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
        priority: i32,
        /// The event's group (events of a group share the policy's concurrency).
        #[arg(long)]
        group: Option<String>,
        /// Wait until the event's processing commits, and print its result.
        #[arg(long)]
        wait: bool,
        /// How long to wait (such as `30s`; default 30s).
        #[arg(long, requires = "wait", value_parser = crate::config::parse_duration)]
        timeout: Option<std::time::Duration>,
        /// Where to run.
        #[command(flatten)]
        target: Target,
    },
    /// Show an instance's queue: policy, pending events, dead letters
    /// (read-only; works while a server runs).
    Queue {
        /// Actor name.
        actor: String,
        /// Instance key.
        key: String,
        /// Ask this server instead of reading the data directory.
        #[arg(long)]
        url: Option<String>,
        /// Data directory (default: the manifest's, else `.burrow`).
        #[arg(long, env = "BURROW_DATA_DIR")]
        data_dir: Option<PathBuf>,
    },
    /// Move a dead letter back into its queue, with its attempts reset.
    Requeue {
        /// Actor name.
        actor: String,
        /// Instance key.
        key: String,
        /// The dead letter's event id.
        id: i64,
        /// Where to run.
        #[command(flatten)]
        target: Target,
    },
    /// Delete a dead letter for good.
    Discard {
        /// Actor name.
        actor: String,
        /// Instance key.
        key: String,
        /// The dead letter's event id.
        id: i64,
        /// Where to run.
        #[command(flatten)]
        target: Target,
    },
    /// Connect to an instance's events and print each as a JSON line, until
    /// the server closes the connection:
    /// `burrow watch chat-room lobby --params '{"name": "ada"}'`.
    Watch {
        /// Actor name.
        actor: String,
        /// Instance key.
        key: String,
        /// Parameters for the actor's connect hook, JSON.
        #[arg(long)]
        params: Option<String>,
        /// The server to talk to.
        #[arg(long, default_value = "http://127.0.0.1:7878", env = "BURROW_URL")]
        url: String,
    },
    /// Run the benchmark workloads and print their figures.
    Bench(crate::bench::BenchArgs),
}

/// A failure with its exit code.
struct Failure {
    code: String,
    message: String,
    exit: u8,
}

/// The exit code for an error code.
pub fn exit_code(code: &str) -> u8 {
    match code {
        "unknown-actor" | "unknown-action" | "no-such-instance" | "no-such-event" | "no-route"
        | "method-not-allowed" => 3,
        "invalid-arguments" | "invalid-address" | "body-too-large" | "invalid-body"
        | "invalid-event" | "payload-too-large" | "no-queue" | "no-workflow" => 4,
        "action-failed" | "dead-lettered" | "connection-refused" => 5,
        "trapped" => 6,
        "timeout"
        | "overloaded"
        | "shutting-down"
        | "queue-full"
        | "conflict"
        | "timed-out"
        | "too-many-connections" => 7,
        "already-exists" => 8,
        _ => 1,
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        Failure {
            code: e.code().into(),
            message: e.to_string(),
            exit: exit_code(e.code()),
        }
    }
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Failure {
        Failure {
            exit: exit_code(&e.code),
            code: e.code,
            message: e.message,
        }
    }
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Failure {
        Failure {
            code: "error".into(),
            message: format!("{e:#}"),
            exit: 1,
        }
    }
}

/// Runs the command line and returns the process's exit code.
pub async fn run(cli: Cli) -> ExitCode {
    let json = cli.json;
    match dispatch(cli).await {
        Ok(Some(output)) => {
            if json {
                println!("{}", json!({ "result": output }));
            } else {
                match output {
                    Value::String(s) => println!("{s}"),
                    other => println!(
                        "{}",
                        serde_json::to_string_pretty(&other).unwrap_or_default()
                    ),
                }
            }
            ExitCode::SUCCESS
        }
        Ok(None) => ExitCode::SUCCESS,
        Err(failure) => {
            if json {
                println!(
                    "{}",
                    json!({ "error": { "code": failure.code, "message": failure.message } })
                );
            } else {
                eprintln!("error: {}", failure.message);
            }
            ExitCode::from(failure.exit)
        }
    }
}

fn load_manifest(path: &Path) -> Result<Manifest> {
    Manifest::load(path)
}

fn host_config(manifest: &Manifest, args: &HostArgs) -> HostConfig {
    HostConfig {
        data_dir: args.data_dir.clone().unwrap_or_else(|| manifest.data_dir()),
        synchronous: args
            .synchronous
            .or(manifest.host.synchronous)
            .unwrap_or_default(),
        max_awake: args.max_awake,
        max_connections: args.max_connections,
        pooling: true,
        cache_dir: None,
    }
}

async fn start_host(manifest_path: &Path, args: &HostArgs) -> Result<Host> {
    let manifest = load_manifest(manifest_path)?;
    let actors: Vec<_> = manifest.actors.values().cloned().collect();
    Host::start(host_config(&manifest, args), &actors).await
}

/// Runs `op` on a host embedded in this process (`--local`), then puts
/// its instances to sleep.
async fn on_local_host<T>(
    manifest: &Path,
    args: &HostArgs,
    op: impl AsyncFnOnce(&Host) -> Result<T, Error>,
) -> Result<T, Failure> {
    let host = start_host(manifest, args).await?;
    let result = op(&host).await;
    host.shutdown().await;
    Ok(result?)
}

fn parse_json_arg(text: &str, what: &str) -> Result<Value, Failure> {
    serde_json::from_str::<Value>(text).map_err(|e| Failure {
        code: "invalid-arguments".into(),
        message: format!("invalid JSON in {what}: {e}"),
        exit: 4,
    })
}

fn parse_result(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

async fn dispatch(cli: Cli) -> Result<Option<Value>, Failure> {
    match cli.command {
        Command::Build { actors, host } => {
            build(&cli.manifest, &actors, &host).await?;
            Ok(None)
        }
        Command::Serve { listen, host } => {
            let host = start_host(&cli.manifest, &host).await?;
            let shutdown = async {
                if tokio::signal::ctrl_c().await.is_err() {
                    // No Ctrl-C handler: only SIGTERM stops the server.
                    std::future::pending::<()>().await
                }
            };
            let terminate = async {
                #[cfg(unix)]
                if let Ok(mut s) =
                    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                {
                    s.recv().await;
                    return;
                }
                std::future::pending::<()>().await
            };
            let stop = async move {
                tokio::select! { _ = shutdown => {}, _ = terminate => {} }
                tracing::info!("shutting down");
            };
            crate::http::serve(host, listen, stop).await?;
            Ok(None)
        }
        Command::Call {
            actor,
            key,
            action,
            args,
            target,
        } => {
            parse_json_arg(&args, "the arguments")?;
            let result = if target.local {
                on_local_host(&cli.manifest, &target.host, async |host| {
                    host.call(&actor, &key, &action, &args).await
                })
                .await?
            } else {
                Client::new(&target.url)
                    .call(&actor, &key, &action, &args)
                    .await?
            };
            Ok(Some(parse_result(&result)))
        }
        Command::Create {
            actor,
            key,
            input,
            target,
        } => {
            parse_json_arg(&input, "the create input")?;
            if target.local {
                on_local_host(&cli.manifest, &target.host, async |host| {
                    host.create(&actor, &key, &input).await
                })
                .await?;
            } else {
                Client::new(&target.url)
                    .create(&actor, &key, &input)
                    .await?;
            }
            Ok(Some(json!({ "created": true })))
        }
        Command::Destroy { actor, key, target } => {
            if target.local {
                on_local_host(&cli.manifest, &target.host, async |host| {
                    host.destroy(&actor, &key).await
                })
                .await?;
            } else {
                Client::new(&target.url).destroy(&actor, &key).await?;
            }
            Ok(Some(json!({ "destroyed": true })))
        }
        Command::Inspect {
            actor,
            key,
            history,
            url,
            data_dir,
        } => {
            if let Some(url) = url {
                let client = Client::new(&url);
                return Ok(Some(if history {
                    client.workflow(&actor, &key).await?
                } else {
                    client.inspect(&actor, &key).await?
                }));
            }
            let data_dir = match data_dir {
                Some(dir) => dir,
                None => load_manifest(&cli.manifest)?.data_dir(),
            };
            if history {
                let view = crate::inspect::workflow_view(&data_dir, &actor, &key)?
                    .ok_or_else(|| Error::NoWorkflow(actor.clone()))?;
                return Ok(Some(serde_json::to_value(view).unwrap_or(Value::Null)));
            }
            let inspection = crate::inspect::inspect(
                &data_dir,
                &actor,
                &key,
                crate::config::DEFAULT_CALL_TIMEOUT,
            )?;
            Ok(Some(
                serde_json::to_value(inspection).unwrap_or(Value::Null),
            ))
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
            let outcome = if target.local {
                let outcome = on_local_host(&cli.manifest, &target.host, async |host| {
                    host.send(&actor, &key, &event_type, &payload, options)
                        .await
                })
                .await?;
                serde_json::to_value(outcome).unwrap_or(Value::Null)
            } else {
                Client::new(&target.url)
                    .send(&actor, &key, &event_type, &payload, &options)
                    .await?
            };
            send_outcome(outcome)
        }
        Command::Queue {
            actor,
            key,
            url,
            data_dir,
        } => {
            if let Some(url) = url {
                return Ok(Some(Client::new(&url).queue(&actor, &key).await?));
            }
            let data_dir = match data_dir {
                Some(dir) => dir,
                None => load_manifest(&cli.manifest)?.data_dir(),
            };
            let view = crate::inspect::queue_view(&data_dir, &actor, &key)?
                .ok_or_else(|| Error::NoQueue(actor.clone()))?;
            Ok(Some(serde_json::to_value(view).unwrap_or(Value::Null)))
        }
        Command::Requeue {
            actor,
            key,
            id,
            target,
        } => {
            if target.local {
                on_local_host(&cli.manifest, &target.host, async |host| {
                    host.requeue(&actor, &key, id).await
                })
                .await?;
            } else {
                Client::new(&target.url).requeue(&actor, &key, id).await?;
            }
            Ok(Some(json!({ "id": id, "status": "requeued" })))
        }
        Command::Discard {
            actor,
            key,
            id,
            target,
        } => {
            if target.local {
                on_local_host(&cli.manifest, &target.host, async |host| {
                    host.drop_dead_letter(&actor, &key, id).await
                })
                .await?;
            } else {
                Client::new(&target.url).discard(&actor, &key, id).await?;
            }
            Ok(Some(json!({ "id": id, "status": "discarded" })))
        }
        Command::Watch {
            actor,
            key,
            params,
            url,
        } => {
            watch(&actor, &key, params.as_deref(), &url).await?;
            Ok(None)
        }
        Command::Bench(args) => {
            let report = crate::bench::run(&cli.manifest, args).await?;
            Ok(Some(report))
        }
    }
}

/// Prints the events of an instance, one JSON line each, as the server
/// sends them, until the server closes the connection; Ctrl-C closes it
/// from this side.
async fn watch(actor: &str, key: &str, params: Option<&str>, url: &str) -> Result<(), Failure> {
    let params = params
        .map(|text| parse_json_arg(text, "the parameters"))
        .transpose()?;
    let mut subscription = Client::new(url)
        .actor(actor, key)
        .subscribe(params.as_ref())
        .await?;
    eprintln!("connected as {}", subscription.id());
    let interrupted = async {
        if tokio::signal::ctrl_c().await.is_err() {
            // No Ctrl-C handler: only the server ends the watch.
            std::future::pending::<()>().await
        }
    };
    tokio::pin!(interrupted);
    loop {
        let frame = tokio::select! {
            frame = subscription.next_text() => frame,
            _ = &mut interrupted => {
                subscription.close().await;
                return Ok(());
            }
        };
        let Some(frame) = frame else {
            return Ok(());
        };
        let frame = frame?;
        let mut stdout = std::io::stdout().lock();
        let written = writeln!(stdout, "{frame}").and_then(|()| stdout.flush());
        drop(stdout);
        match written {
            Ok(()) => {}
            // The reader went away (`burrow watch ... | head -1`): done.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                subscription.close().await;
                return Ok(());
            }
            Err(e) => {
                subscription.close().await;
                return Err(anyhow::Error::new(e)
                    .context("cannot write to stdout")
                    .into());
            }
        }
    }
}

/// A send's outcome: printed when the event is queued or processed; a
/// failure (with the outcome in its message) when it was dead-lettered or
/// the wait ended first.
fn send_outcome(outcome: Value) -> Result<Option<Value>, Failure> {
    let id = &outcome["id"];
    match outcome["status"].as_str() {
        Some("processed") => Ok(Some(outcome["result"].clone())),
        Some("dead-lettered") => Err(Failure {
            code: "dead-lettered".into(),
            message: format!(
                "event {id} was dead-lettered: {}",
                outcome["error"].as_str().unwrap_or("")
            ),
            exit: exit_code("dead-lettered"),
        }),
        Some("timed-out") => Err(Failure {
            code: "timed-out".into(),
            message: format!(
                "event {id} is queued, but its processing did not commit within the wait"
            ),
            exit: exit_code("timed-out"),
        }),
        _ => Ok(Some(outcome)),
    }
}

/// Runs the build command of each selected actor, with progress on stderr,
/// then compiles and checks the components (into the compile cache, so the
/// next `serve` starts at once).
async fn build(manifest_path: &Path, only: &[String], host: &HostArgs) -> Result<()> {
    let manifest = load_manifest(manifest_path)?;
    for name in only {
        if !manifest.actors.contains_key(name) {
            bail!(
                "unknown actor `{name}`: it is not defined in {}",
                manifest_path.display()
            );
        }
    }
    let selected: Vec<_> = manifest
        .actors
        .values()
        .filter(|a| only.is_empty() || only.contains(&a.name))
        .collect();
    let total = selected.len();
    for (i, actor) in selected.iter().enumerate() {
        let Some(command) = &actor.build else {
            eprintln!(
                "[{}/{total}] {}: no build command; using {}",
                i + 1,
                actor.name,
                actor.component.display()
            );
            continue;
        };
        eprintln!("[{}/{total}] building {}: {command}", i + 1, actor.name);
        let started = Instant::now();
        let status = std::process::Command::new("sh")
            .arg("-c")
            .arg(command)
            .current_dir(&manifest.dir)
            .status()
            .with_context(|| format!("cannot run the build command of `{}`", actor.name))?;
        if !status.success() {
            bail!(
                "the build command of `{}` failed ({status}): {command}",
                actor.name
            );
        }
        if !actor.component.exists() {
            bail!(
                "the build command of `{}` succeeded but {} does not exist; check `component` in the manifest",
                actor.name,
                actor.component.display()
            );
        }
        eprintln!(
            "[{}/{total}] built {} in {:.1}s -> {}",
            i + 1,
            actor.name,
            started.elapsed().as_secs_f64(),
            actor.component.display()
        );
    }
    let specs: Vec<_> = selected.into_iter().cloned().collect();
    eprintln!("checking and compiling {} component(s)", specs.len());
    crate::host::check_actors(&host_config(&manifest, host), &specs).await?;
    eprintln!("ready");
    Ok(())
}
