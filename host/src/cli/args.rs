//! The command line: every command, flag and default, as clap parses them.
//! Nothing here runs anything.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::config::{DEFAULT_MAX_AWAKE, DEFAULT_MAX_CONNECTIONS, Synchronous};

/// The language of a new project's actor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    /// Rust, with the `burrow-sdk` crate.
    Rust,
    /// Python, with the `burrow-sdk` package and componentize-py.
    Python,
    /// JavaScript, with the `burrow-sdk` npm package and componentize-js.
    Js,
}

/// What a new project's actor does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Template {
    /// A counter: `increment(n)` and `get()`.
    Counter,
    /// A workflow of durable steps and a durable sleep, started by `create`.
    Workflow,
    /// A durable job queue: `enqueue(text)`, each job processed once.
    Queue,
}

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
    /// How log lines (on stderr) are printed: `text`, or `json`, one
    /// object a line with the spans they happened in.
    #[arg(
        long,
        global = true,
        value_enum,
        default_value_t = LogFormat::Text,
        env = "BURROW_LOG_FORMAT"
    )]
    pub log_format: LogFormat,
    /// A CA certificate (PEM) to trust besides the system's roots: for a
    /// server at an `https://` `--url` (and its `wss://` WebSockets), and
    /// with `serve`, for the `https://` addresses of the other hosts of a
    /// cluster.
    #[arg(long, global = true, env = "BURROW_CA_CERT", value_name = "FILE")]
    pub ca_cert: Option<PathBuf>,
    /// The API token to send to a server (`--url`) that checks them; the
    /// environment variable keeps it out of `ps`.
    #[arg(long, global = true, env = "BURROW_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// How log lines are printed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object a line: time, level, target, fields, and the spans
    /// the line happened in (a call's has its actor, key and action).
    Json,
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
    /// CA certificates (PEM) that actors' outgoing HTTPS requests trust
    /// besides the system's roots (also `outbound_ca` under `[host]`).
    #[arg(long)]
    pub outbound_ca: Option<PathBuf>,
    /// The compile cache, shared by every data directory and project that
    /// names it (also `cache_dir` under `[host]`; default
    /// `$XDG_CACHE_HOME/burrow`, else `~/.cache/burrow`).
    #[arg(long, env = "BURROW_CACHE_DIR", value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// The most the compile cache keeps, such as `2GiB` (also `cache_max`
    /// under `[host]`; default 2 GiB): past it, the compiled components
    /// used longest ago go.
    #[arg(long, value_name = "SIZE")]
    pub cache_max: Option<String>,
}

/// Who may use a server (see docs/operating/security.md).
#[derive(Debug, clap::Args)]
pub struct AccessArgs {
    /// Check requests against the API tokens in this TOML file (also
    /// `tokens = "FILE"` under `[host]`). Without tokens, a server listens
    /// only on a loopback address.
    #[arg(long)]
    pub tokens: Option<PathBuf>,
    /// Serve on an address other than a loopback one without tokens:
    /// anyone who can reach it may do everything.
    #[arg(long)]
    pub insecure_no_auth: bool,
    /// Serve `/metrics` without a token (also `open_metrics = true` under
    /// `[host]`).
    #[arg(long)]
    pub open_metrics: bool,
}

/// How long connections may wait and how many may be open, per client
/// address and in all (each also under `[host]` in the manifest; a flag
/// wins). Past a cap a connection is closed at once.
#[derive(Debug, clap::Args)]
pub struct HttpArgs {
    /// How long a connection with no request in flight may send nothing
    /// before it is closed (default 60s).
    #[arg(long, value_name = "DURATION")]
    pub idle_timeout: Option<String>,
    /// How long a request's line and headers may take to arrive, from
    /// their first byte (default 10s).
    #[arg(long, value_name = "DURATION")]
    pub header_timeout: Option<String>,
    /// TCP connections open at once, HTTP and WebSocket (default 20000).
    #[arg(long, value_name = "N")]
    pub max_tcp_connections: Option<usize>,
    /// TCP connections open at once from one client address (default
    /// 1000; behind a proxy, every client has the proxy's).
    #[arg(long, value_name = "N")]
    pub max_tcp_connections_per_address: Option<usize>,
    /// Connections with no authenticated request yet (default 1000).
    #[arg(long, value_name = "N")]
    pub max_unauthenticated: Option<usize>,
    /// Connections with no authenticated request yet from one client
    /// address (default 100).
    #[arg(long, value_name = "N")]
    pub max_unauthenticated_per_address: Option<usize>,
    /// WebSockets waiting for their first-message token (default 256).
    #[arg(long, value_name = "N")]
    pub max_token_waits: Option<usize>,
    /// WebSockets waiting for their first-message token from one client
    /// address (default 16).
    #[arg(long, value_name = "N")]
    pub max_token_waits_per_address: Option<usize>,
}

/// Settings of a host that joins a cluster (each also under `[cluster]` in
/// the manifest; a flag wins).
#[derive(Debug, clap::Args)]
pub struct ClusterArgs {
    /// Join the cluster on this PostgreSQL (a connection string such as
    /// `postgres://burrow@db:5432/burrow`): several hosts share one actor
    /// space. Without it (and without `[cluster]`), the host runs alone.
    #[arg(long, env = "BURROW_CLUSTER")]
    pub cluster: Option<String>,
    /// This host's name in `burrow cluster status` (default: the advertised
    /// address's host and port).
    #[arg(long)]
    pub name: Option<String>,
    /// The base URL other hosts reach this one at (default: `http://`, or
    /// `https://` with `--tls-cert`, and the listen address, which must
    /// then not be a wildcard).
    #[arg(long)]
    pub advertise: Option<String>,
    /// How long a host's instances stay its own after its last heartbeat
    /// (default 5s).
    #[arg(long)]
    pub lease: Option<String>,
    /// Time between heartbeats (default 1s).
    #[arg(long)]
    pub heartbeat: Option<String>,
    /// The lease's safety margin (default 1s): a host stops serving this
    /// long before its lease expires by its clock, and another takes over
    /// this long after it expired by PostgreSQL's.
    #[arg(long)]
    pub lease_margin: Option<String>,
}

/// What `burrow cluster` shows.
#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// The hosts of the cluster a server is part of, and the leases each
    /// holds.
    Status {
        /// The server to ask (any host of the cluster).
        #[arg(long, default_value = "http://127.0.0.1:7878", env = "BURROW_URL")]
        url: String,
    },
    /// Moves every instance a host serves to the other hosts, each between
    /// two calls, and returns once it serves none: then stop it.
    Drain {
        /// The host to drain: its name (`--name`) or its id, as `burrow
        /// cluster status` shows them.
        host: String,
        /// A server to ask where that host is (any host of the cluster).
        #[arg(long, default_value = "http://127.0.0.1:7878", env = "BURROW_URL")]
        url: String,
    },
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start a project of one actor in a new folder: `burrow new hello
    /// --lang python`, then `cd hello` and `burrow build`.
    New {
        /// The project's folder, and its actor's name.
        name: String,
        /// The actor's language.
        #[arg(long, value_enum, default_value_t = Lang::Rust)]
        lang: Lang,
        /// What the actor does.
        #[arg(long, value_enum, default_value_t = Template::Counter)]
        template: Template,
        /// Where the SDK comes from, in the language's own terms: a git URL
        /// or a crate's folder (Rust), a package's folder, wheel or URL
        /// (Python), an `npm pack` tarball or folder (JavaScript), or a
        /// version (default: this burrow's, as published).
        #[arg(long, value_name = "SOURCE")]
        sdk: Option<String>,
    },
    /// Build the manifest's components (all, or the named actors).
    Build {
        /// Actors to build.
        actors: Vec<String>,
        /// Host settings (where compiled components are cached).
        #[command(flatten)]
        host: HostArgs,
    },
    /// Serve the HTTP API and the web inspector (at /ui).
    Serve {
        /// Address to listen on.
        #[arg(long, default_value = DEFAULT_LISTEN)]
        listen: SocketAddr,
        /// Do not serve the web inspector at /ui (also `[host] ui = false`
        /// in the manifest).
        #[arg(long)]
        no_ui: bool,
        /// Who may use the server.
        #[command(flatten)]
        access: AccessArgs,
        /// How long connections may wait, and how many may be open.
        #[command(flatten)]
        http: HttpArgs,
        /// Serve HTTPS with this certificate (chain, PEM), read again when
        /// the file changes; with `--tls-key` (also `[host] tls_cert`).
        #[arg(long, value_name = "FILE", requires = "tls_key")]
        tls_cert: Option<PathBuf>,
        /// The private key (PEM) of `--tls-cert` (also `[host] tls_key`).
        #[arg(long, value_name = "FILE", requires = "tls_cert")]
        tls_key: Option<PathBuf>,
        /// Host settings.
        #[command(flatten)]
        host: HostArgs,
        /// Cluster settings.
        #[command(flatten)]
        cluster: ClusterArgs,
    },
    /// The cluster a server is part of.
    Cluster {
        /// What to show.
        #[command(subcommand)]
        command: ClusterCommand,
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
    /// Serve the manifest, and rebuild and deploy an actor whenever the
    /// files under its `watch` change.
    Dev {
        /// Address to listen on.
        #[arg(long, default_value = DEFAULT_LISTEN)]
        listen: SocketAddr,
        /// Who may use the server.
        #[command(flatten)]
        access: AccessArgs,
        /// How long connections may wait, and how many may be open.
        #[command(flatten)]
        http: HttpArgs,
        /// Host settings.
        #[command(flatten)]
        host: HostArgs,
    },
    /// Replace an actor's component on a running server, with no instance
    /// reset: `burrow deploy counter target/.../counter.wasm --check`.
    Deploy {
        /// Actor name.
        actor: String,
        /// The new component (a `.wasm` file); not with `--previous`.
        #[arg(required_unless_present = "previous", conflicts_with = "previous")]
        component: Option<PathBuf>,
        /// Put back the component the actor ran before its last deploy.
        #[arg(long)]
        previous: bool,
        /// Replay every running workflow of the actor against the new
        /// component first, and refuse the deploy if one would diverge.
        #[arg(long)]
        check: bool,
        /// The server.
        #[arg(long, default_value = "http://127.0.0.1:7878", env = "BURROW_URL")]
        url: String,
    },
    /// Write an instance's database as committed now, with its actor's
    /// component, to one file: `burrow export counter my-key -o my-key.burrow`
    Export {
        /// Actor name.
        actor: String,
        /// Instance key.
        key: String,
        /// The file to write (default: standard output, unless it is a
        /// terminal).
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// Where to run.
        #[command(flatten)]
        target: Target,
    },
    /// Create an instance from a file `burrow export` wrote (of the same
    /// actor, under any key, from any host): `burrow import counter
    /// copy-of-my-key my-key.burrow`
    Import {
        /// Actor name.
        actor: String,
        /// The new instance's key.
        key: String,
        /// The export file (`-`: standard input).
        file: PathBuf,
        /// Destroy an existing instance of that key first (its destroy
        /// hook runs), once the file is found whole.
        #[arg(long)]
        replace: bool,
        /// Where to run.
        #[command(flatten)]
        target: Target,
    },
    /// Create an instance from another's database as committed now, its
    /// queue, schedules and workflow paused until `burrow resume`, so that
    /// the copy repeats nothing by itself: `burrow fork counter my-key
    /// my-key-copy`
    Fork {
        /// Actor name.
        actor: String,
        /// The instance to copy.
        key: String,
        /// The new instance's key.
        new_key: String,
        /// Where to run.
        #[command(flatten)]
        target: Target,
    },
    /// Pause an instance's queue, schedules and workflow (what runs
    /// finishes; calls go on) until `burrow resume`: `burrow pause counter
    /// my-key`
    Pause {
        /// Actor name.
        actor: String,
        /// Instance key.
        key: String,
        /// Where to run.
        #[command(flatten)]
        target: Target,
    },
    /// Let a paused instance (a fork) process its queue, run its schedules
    /// and drive its workflow: `burrow resume counter my-key-copy`
    Resume {
        /// Actor name.
        actor: String,
        /// Instance key.
        key: String,
        /// Where to run.
        #[command(flatten)]
        target: Target,
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
    Bench(BenchArgs),
}

/// Options of `burrow bench` (its workloads are in the crate
/// `burrow-bench`, not in the library: see [`super::run`]).
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// Calls in W1.
    #[arg(long, default_value_t = 20_000)]
    pub ops: usize,
    /// Instances in W3.
    #[arg(long, default_value_t = 1_000)]
    pub instances: usize,
    /// Calls per instance in W2 (64 instances).
    #[arg(long, default_value_t = 300)]
    pub w2_calls: usize,
    /// Skip the HTTP parts: W1 over HTTP and the durability modes' HTTP
    /// workloads.
    #[arg(long)]
    pub no_http: bool,
    /// Where the benchmark's data goes (default: a fresh temporary directory).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Allocate instances on demand instead of from the pooling allocator.
    #[arg(long)]
    pub on_demand: bool,
    /// Jobs in W4.
    #[arg(long, default_value_t = 10_000)]
    pub w4_jobs: usize,
    /// Run only W4 (the queue), and W1 in-process to compare with.
    #[arg(long)]
    pub queue: bool,
    /// Steps of the workflow in W5.
    #[arg(long, default_value_t = 1_000)]
    pub w5_steps: usize,
    /// Run only W5 (workflows), and W1 in-process to compare with.
    #[arg(long)]
    pub workflows: bool,
    /// Steps of the sequential workflow in W8 (its 64 parallel ones take a
    /// tenth each).
    #[arg(long, default_value_t = 1_000)]
    pub w8_steps: usize,
    /// Run only W8 (steps that send HTTP requests), and W1 in-process to
    /// compare with.
    #[arg(long)]
    pub outbound: bool,
    /// Calls in W6.
    #[arg(long, default_value_t = 5_000)]
    pub w6_calls: usize,
    /// Connected clients in W7.
    #[arg(long, default_value_t = 100)]
    pub w7_clients: usize,
    /// Messages posted in W7 (each goes to every client).
    #[arg(long, default_value_t = 500)]
    pub w7_messages: usize,
    /// Run only W6 and W7 (actors talking), and W1 in-process to compare with.
    #[arg(long)]
    pub talk: bool,
    /// Run only the load workload: 64 HTTP clients for this many seconds on
    /// the manifest's counters (every actor named `counter*`) and its
    /// `mailer` (queue sends).
    #[arg(long, value_name = "SECONDS")]
    pub load: Option<u64>,
    /// Calls on the hot instance (64 callers on one instance), all callers
    /// together, in each durability mode.
    #[arg(long, default_value_t = 20_000)]
    pub hot_calls: usize,
    /// Run only the durability modes: the disk's limits, then W1, W2 and
    /// the hot instance with `synchronous = normal` and `full`, in-process
    /// and (unless `--no-http`) against `burrow serve` in a child process.
    #[arg(long)]
    pub modes: bool,
    /// Drive the HTTP workloads of the durability modes with `wrk` (it
    /// must be on the PATH) for this many seconds each, instead of
    /// `burrow-client` from this process.
    #[arg(long, value_name = "SECONDS")]
    pub wrk: Option<u64>,
    /// Run only the languages side by side: W1 and W5 for the counter and
    /// the stepper of each guest language (`counter`, `counter-py`,
    /// `counter-js`, `stepper`, ...), against the floor, with compile and
    /// build times.
    #[arg(long)]
    pub languages: bool,
    /// Leave the durability modes out of a full run.
    #[arg(long, conflicts_with = "modes")]
    pub no_modes: bool,
    /// Run only the cluster's benchmark, on the PostgreSQL at this URL: W1
    /// and W2 over HTTP on one host alone, on one in a cluster and on three
    /// in one, W1 in-process alone and in a cluster (what shipping a commit
    /// costs), PostgreSQL's own round trip and commit, and the failover
    /// time after kill -9 and after a clean stop.
    #[arg(long, value_name = "URL")]
    pub cluster: Option<String>,
    /// Run only the scale benchmark: this many new counters (default
    /// 100,000) made over HTTP, 16 at a time, against `burrow serve`; per
    /// tenth the creation rate, the server's memory and the disk used per
    /// instance, then the time to start over that data directory and to
    /// list every key, beside the floor's creations on every core.
    #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "100000")]
    pub scale: Option<usize>,
}
