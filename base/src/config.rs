//! Host configuration and the limits a guest runs under.

use std::path::PathBuf;
use std::time::Duration;

/// Longest instance key, in bytes of UTF-8.
pub const MAX_KEY_BYTES: usize = 1024;
/// Longest actor name, in bytes (`[a-z0-9][a-z0-9_-]*`).
pub const MAX_ACTOR_NAME_BYTES: usize = 64;
/// Default idle time after which an instance sleeps.
pub const DEFAULT_SLEEP_TIMEOUT: Duration = Duration::from_secs(30);
/// Default wall-clock deadline of one call into the guest.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Default limit of an instance's linear memory.
pub const DEFAULT_MEMORY_LIMIT: usize = 128 << 20;
/// Default limit of an instance's database file.
pub const DEFAULT_DB_SIZE_LIMIT: u64 = 1 << 30;
/// Most core wasm instances one actor instance may create.
pub const MAX_WASM_INSTANCES: usize = 500;
/// Most wasm tables one actor instance may create.
pub const MAX_WASM_TABLES: usize = 500;
/// Most elements of one wasm table.
pub const MAX_TABLE_ELEMENTS: usize = 1_000_000;
/// Largest action arguments (JSON text) accepted from a caller.
pub const MAX_ARGS_BYTES: usize = 1 << 20;
/// Largest action result (JSON text) accepted from a guest.
pub const MAX_RESULT_BYTES: usize = 4 << 20;
/// Largest state value a guest may write.
pub const MAX_STATE_BYTES: usize = 1 << 20;
/// Longest SQL text of one `db` call.
pub const MAX_SQL_BYTES: usize = 100_000;
/// Most parameters of one statement.
pub const MAX_SQL_PARAMS: usize = 999;
/// Most rows one statement may return to the guest.
pub const MAX_QUERY_ROWS: usize = 100_000;
/// Most bytes (of values) one statement may return to the guest.
pub const MAX_QUERY_BYTES: usize = 16 << 20;
/// Longest log line kept from a guest; longer ones are cut.
pub const MAX_LOG_LINE_BYTES: usize = 4096;
/// Most log lines (log import, stdout and stderr together) one instance may
/// write per second; past it lines are dropped and counted.
pub const MAX_LOG_LINES_PER_SECOND: u32 = 100;
/// Largest wasm stack of one call into a guest.
pub const MAX_WASM_STACK: usize = 1 << 20;
/// Largest component file the host loads.
pub const MAX_COMPONENT_BYTES: u64 = 256 << 20;
/// Largest export file an import takes over the HTTP API: an instance of
/// the default database size limit, and its file's description.
pub const MAX_IMPORT_BYTES: u64 = DEFAULT_DB_SIZE_LIMIT + (1 << 20);
/// Default number of instances awake at once; past it the least recently
/// used idle instance is put to sleep.
pub const DEFAULT_MAX_AWAKE: usize = 1000;
/// Calls that may wait for one busy instance before callers get `overloaded`.
pub const MAX_QUEUED_CALLS_PER_INSTANCE: usize = 1024;
/// The most waiting calls of one instance run back to back in one
/// transaction, committed once (see `cell/batch.rs`); the most events of a
/// queue run and steps of a workflow's batch too (`instance/batch.rs`).
pub const MAX_BATCH_CALLS: usize = 128;
/// A batch takes no further call once its calls' arguments reach this
/// many bytes.
pub const MAX_BATCH_BYTES: usize = 4 << 20;
/// A batch takes no further call once it has run this long: the replies
/// of its first calls wait for its commit.
pub const MAX_BATCH_TIME: Duration = Duration::from_millis(5);
/// Default of the most pending events one instance's queue may hold.
pub const DEFAULT_QUEUE_MAX_PENDING: u64 = 100_000;
/// Default of the largest event payload (JSON text) a queue accepts.
pub const DEFAULT_QUEUE_MAX_PAYLOAD: usize = 1 << 20;
/// Default number of failed attempts after which an event moves to the
/// dead-letter table.
pub const DEFAULT_QUEUE_MAX_ATTEMPTS: u32 = 10;
/// Default wait before the first retry of a failed event; each further
/// retry waits twice as long, up to [`DEFAULT_QUEUE_RETRY_CAP`].
pub const DEFAULT_QUEUE_RETRY_BASE: Duration = Duration::from_secs(1);
/// Default longest wait between two attempts of an event.
pub const DEFAULT_QUEUE_RETRY_CAP: Duration = Duration::from_secs(300);
/// Longest event type and group name, in bytes.
pub const MAX_EVENT_NAME_BYTES: usize = 256;
/// Most `process` calls in flight at once in one instance, whatever its
/// policy says (an unlimited concurrency means this many).
pub const MAX_PROCESS_CALLS_PER_INSTANCE: usize = 16;
/// Most pending events a custom selector is shown at once.
pub const MAX_SELECT_EVENTS: usize = 1000;
/// Most events one workflow queue wait takes at once.
pub const MAX_QUEUE_BATCH: u32 = 1000;
/// How long a sender waits for its event's processing by default.
pub const DEFAULT_SEND_WAIT: Duration = Duration::from_secs(30);
/// Longest wait a sender may ask for.
pub const MAX_SEND_WAIT: Duration = Duration::from_secs(600);
/// How long a call waits for the instance's database while a concurrent
/// call of the same instance writes, before it is rolled back and re-run.
pub const DB_BUSY_TIMEOUT: Duration = Duration::from_millis(10);
/// Most pending schedules one instance may have.
pub const MAX_PENDING_SCHEDULES: u64 = 10_000;
/// Shortest interval of a recurring schedule, in milliseconds.
pub const MIN_SCHEDULE_INTERVAL_MS: u64 = 100;
/// Most instances on one chain of calls between actors (A calls B calls C:
/// three).
pub const MAX_CALL_DEPTH: usize = 16;
/// Largest payload of one broadcast event, in bytes.
pub const MAX_BROADCAST_BYTES: usize = 64 << 10;
/// Most events one transaction may broadcast.
pub const MAX_BROADCASTS_PER_CALL: usize = 1000;
/// Events kept for a connected client that reads slower than they come;
/// past it, the client misses the oldest and is told how many.
pub const CONNECTION_BUFFER: usize = 1024;

/// SQLite's `synchronous` setting for instance databases (all are in WAL mode).
///
/// `Normal` (the default) survives a crash of the host process without
/// losing a committed call; a power loss may roll back the last commits but
/// never corrupts the database. `Full` also survives power loss, at the cost
/// of one fsync per call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Synchronous {
    /// `PRAGMA synchronous = OFF`: fastest, a crash of the machine may corrupt.
    Off,
    /// `PRAGMA synchronous = NORMAL`.
    #[default]
    Normal,
    /// `PRAGMA synchronous = FULL`.
    Full,
}

impl Synchronous {
    #[doc(hidden)] // for Burrow's own crates
    pub fn pragma(self) -> &'static str {
        match self {
            Synchronous::Off => "OFF",
            Synchronous::Normal => "NORMAL",
            Synchronous::Full => "FULL",
        }
    }
}

/// Options of one actor, from its manifest entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActorOptions {
    /// Idle time after which an instance sleeps.
    pub sleep_timeout: Duration,
    /// Wall-clock deadline of one call into the guest.
    pub call_timeout: Duration,
    /// Limit of linear memory, in bytes.
    pub memory_limit: usize,
    /// Limit of the database file, in bytes.
    pub db_size_limit: u64,
    /// Most pending events in one instance's queue.
    pub queue_max_pending: u64,
    /// Largest event payload, in bytes of JSON text.
    pub queue_max_payload: usize,
    /// Failed attempts after which an event is dead-lettered.
    pub queue_max_attempts: u32,
    /// Wait before the first retry; doubled for each further retry.
    pub queue_retry_base: Duration,
    /// Longest wait between two attempts.
    pub queue_retry_cap: Duration,
    /// Most client connections one instance may have at once.
    pub max_connections: usize,
    /// What its outgoing HTTP requests may reach (manifest `http`; by
    /// default nothing).
    pub http: crate::outbound::Allowed,
    /// Largest body of one outgoing request, and of one request to its
    /// incoming handler, in bytes.
    pub http_max_request: u64,
    /// Largest body of the response to one outgoing request, and of its
    /// incoming handler's response, in bytes.
    pub http_max_response: u64,
    /// Whether anyone may reach its incoming HTTP handler without a token
    /// (manifest `public_http`; a webhook from a third party).
    pub public_http: bool,
}

impl Default for ActorOptions {
    fn default() -> Self {
        ActorOptions {
            sleep_timeout: DEFAULT_SLEEP_TIMEOUT,
            call_timeout: DEFAULT_CALL_TIMEOUT,
            memory_limit: DEFAULT_MEMORY_LIMIT,
            db_size_limit: DEFAULT_DB_SIZE_LIMIT,
            queue_max_pending: DEFAULT_QUEUE_MAX_PENDING,
            queue_max_payload: DEFAULT_QUEUE_MAX_PAYLOAD,
            queue_max_attempts: DEFAULT_QUEUE_MAX_ATTEMPTS,
            queue_retry_base: DEFAULT_QUEUE_RETRY_BASE,
            queue_retry_cap: DEFAULT_QUEUE_RETRY_CAP,
            max_connections: DEFAULT_MAX_CONNECTIONS_PER_INSTANCE,
            http: crate::outbound::Allowed::default(),
            http_max_request: DEFAULT_HTTP_MAX_REQUEST,
            http_max_response: DEFAULT_HTTP_MAX_RESPONSE,
            public_http: false,
        }
    }
}

/// Default largest body of an outgoing request (manifest
/// `http_max_request`).
pub const DEFAULT_HTTP_MAX_REQUEST: u64 = 4 << 20;
/// Default largest body of the response to an outgoing request (manifest
/// `http_max_response`).
pub const DEFAULT_HTTP_MAX_RESPONSE: u64 = 16 << 20;
/// Longest an outgoing request may take to connect (TLS included), at
/// most what is left of the call's or step's deadline.
pub const OUTBOUND_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest an outgoing request may wait for its response's head, once
/// sent, at most what is left of the deadline.
pub const OUTBOUND_FIRST_BYTE_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest a response's body may pause between two pieces, at most what
/// is left of the deadline.
pub const OUTBOUND_BETWEEN_BYTES_TIMEOUT: Duration = Duration::from_secs(30);
/// Outgoing requests one instance may have in flight at once (more are
/// refused at once).
pub const MAX_OUTBOUND_PER_INSTANCE: usize = 16;
/// Outgoing requests one host may have in flight at once, all instances
/// together.
pub const MAX_OUTBOUND_PER_HOST: usize = 1024;
/// Longest an outgoing request's connection is kept open, idle, for the
/// next request of the same actor to the same authority: under the five
/// seconds after which common servers (Node's among them) close an idle
/// connection themselves, so that one is rarely reused as it closes.
pub const OUTBOUND_IDLE_TIMEOUT: Duration = Duration::from_secs(4);
/// Idle connections kept per actor and authority.
pub const MAX_IDLE_PER_ROUTE: usize = 64;
/// Idle connections kept by one host, all actors together.
pub const MAX_IDLE_CONNECTIONS: usize = 256;

/// Default lease of a cluster member: how long its instances stay its own
/// after its last heartbeat.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(5);
/// Default time between a cluster member's heartbeats.
pub const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(1);
/// Default safety margin of a lease: a member stops serving this long
/// before its lease expires by its own clock, and another takes its
/// instances over this long after it expired by PostgreSQL's.
pub const DEFAULT_LEASE_MARGIN: Duration = Duration::from_secs(1);

/// Several hosts sharing one actor space through PostgreSQL.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// The PostgreSQL connection string.
    pub url: String,
    /// This host's name (its id in the cluster is the name and a suffix
    /// that is new at every start).
    pub name: String,
    /// The base URL other hosts reach this one at (`http://host:port`).
    pub advertise: String,
    /// How long a member's instances stay its own after its last
    /// heartbeat.
    pub lease: Duration,
    /// Time between heartbeats.
    pub heartbeat: Duration,
    /// The safety margin of a lease (see [`DEFAULT_LEASE_MARGIN`]).
    pub margin: Duration,
    /// The certificates the other hosts' `https://` addresses are verified
    /// with when requests are forwarded to them (default: the system's
    /// roots).
    pub trust: burrow_client::Trust,
}

impl ClusterConfig {
    /// A cluster at `url` with the default lease, heartbeat and margin.
    pub fn new(
        url: impl Into<String>,
        name: impl Into<String>,
        advertise: impl Into<String>,
    ) -> ClusterConfig {
        ClusterConfig {
            url: url.into(),
            name: name.into(),
            advertise: advertise.into(),
            lease: DEFAULT_LEASE,
            heartbeat: DEFAULT_HEARTBEAT,
            margin: DEFAULT_LEASE_MARGIN,
            trust: burrow_client::Trust::system(),
        }
    }

    /// Checks that the timings fit together: a heartbeat well within the
    /// time a lease is served, and a margin shorter than the lease.
    pub fn check(&self) -> Result<(), String> {
        if self.margin.is_zero() || self.margin * 2 >= self.lease {
            return Err(format!(
                "the lease margin ({} ms) must be above 0 and under half the lease ({} ms)",
                self.margin.as_millis(),
                self.lease.as_millis()
            ));
        }
        let served = self.lease - self.margin;
        if self.heartbeat.is_zero() || self.heartbeat * 2 > served {
            return Err(format!(
                "the heartbeat ({} ms) must be above 0 and at most half of the lease minus its margin ({} ms)",
                self.heartbeat.as_millis(),
                served.as_millis()
            ));
        }
        if !(self.advertise.starts_with("http://") || self.advertise.starts_with("https://")) {
            return Err(format!(
                "the advertised address `{}` must be a URL such as http://10.0.0.5:7878",
                self.advertise
            ));
        }
        Ok(())
    }
}

/// How a host runs.
#[derive(Debug, Clone)]
pub struct HostConfig {
    /// Where instance databases, the index and the compile cache live.
    pub data_dir: PathBuf,
    /// `synchronous` of every instance database.
    pub synchronous: Synchronous,
    /// Instances awake at once (also sizes the pooling allocator).
    pub max_awake: usize,
    /// Client connections open at once (at most half of `max_awake`
    /// instances may have connections, see [`max_connected_instances`]).
    pub max_connections: usize,
    /// Use the pooling allocator if the machine allows it.
    pub pooling: bool,
    /// Where compiled components are cached (default: `cache/` in the data
    /// directory). Hosts on different data directories may share one.
    pub cache_dir: Option<PathBuf>,
    /// The most bytes of compiled components the cache keeps: past it, the
    /// entries used longest ago go.
    pub cache_max: u64,
    /// The cluster this host joins (`None`: it runs alone on its data
    /// directory).
    pub cluster: Option<ClusterConfig>,
    /// CA certificates (PEM) that actors' outgoing HTTPS requests trust
    /// besides the system's roots.
    pub outbound_ca: Option<PathBuf>,
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            data_dir: PathBuf::from(".burrow"),
            synchronous: Synchronous::default(),
            max_awake: DEFAULT_MAX_AWAKE,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            pooling: true,
            cache_dir: None,
            cache_max: DEFAULT_CACHE_MAX,
            cluster: None,
            outbound_ca: None,
        }
    }
}

/// Parses durations such as `250ms`, `30s`, `5m` or `1h`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("`{text}` has no unit (use ms, s, m or h)"))?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("`{text}` does not start with a whole number"))?;
    let millis = match unit.trim() {
        "ms" => number,
        "s" => number.saturating_mul(1000),
        "m" => number.saturating_mul(60_000),
        "h" => number.saturating_mul(3_600_000),
        other => {
            return Err(format!(
                "unknown unit `{other}` in `{text}` (use ms, s, m or h)"
            ));
        }
    };
    Ok(Duration::from_millis(millis))
}

/// Parses sizes such as `512KiB`, `128MiB`, `1GiB` or a plain number of bytes.
pub fn parse_size(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: usize = number
        .parse()
        .map_err(|_| format!("`{text}` does not start with a whole number"))?;
    let factor = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        other => {
            return Err(format!(
                "unknown unit `{other}` in `{text}` (use KiB, MiB or GiB)"
            ));
        }
    };
    number
        .checked_mul(factor)
        .ok_or_else(|| format!("`{text}` is too large"))
}

// The host's timer and its retries.

/// Wait before the schedules of an instance whose schedule run could not
/// start or failed (its database cannot be opened, the host is
/// overloaded) are tried again; meanwhile the timer serves the others.
pub const SCHEDULE_RETRY_AFTER_ERROR: Duration = Duration::from_secs(1);

// Every guest statement bounded in time, memory and length.

/// Largest value (string or blob) and largest row SQLite builds for a guest,
/// in bytes (`SQLITE_LIMIT_LENGTH`): what one statement may return, so a
/// larger value could never be read back.
pub const MAX_SQL_VALUE_BYTES: usize = MAX_QUERY_BYTES;
/// Most bytes SQLite's heap may grow by while one guest statement runs
/// (rows it materializes, sorters, expression values); past it the
/// statement fails with `limit-exceeded`.
pub const MAX_STATEMENT_MEMORY: usize = 64 << 20;
/// Most virtual-machine instructions of one prepared statement
/// (`SQLITE_LIMIT_VDBE_OP`), views and triggers expanded: bounds the memory
/// a prepared (and cached) statement holds.
pub const MAX_SQL_PROGRAM_OPS: usize = 100_000;
/// Most bytes of values `inspect` reads from an instance's tables; past it
/// the inspection fails with `limit-exceeded`.
pub const MAX_INSPECT_BYTES: usize = MAX_QUERY_BYTES;
/// Longest pattern of a guest's `LIKE` or `GLOB`, in bytes
/// (`SQLITE_LIMIT_LIKE_PATTERN_LENGTH`, SQLite's default 50,000): bounds
/// the matcher's recursion, one level per wildcard, and its work per
/// character of the string; the call's deadline bounds the rest.
pub const MAX_LIKE_PATTERN_BYTES: usize = 1_000;

// Step timeouts, client connections and failure text.

/// Longest timeout a workflow step may ask for (`StepOptions::timeout`),
/// unless the actor's `call_timeout` is longer (then that is the longest).
/// A step asking for more is refused before it runs: the run fails with
/// `invalid`, naming this limit. It bounds how long one step can hold its
/// instance and hold up a shutdown.
pub const MAX_STEP_TIMEOUT: Duration = Duration::from_secs(300);
/// Default of the most connections one instance may have at once
/// (manifest `max_connections`); past it a connect gets HTTP 503
/// `too-many-connections`.
pub const DEFAULT_MAX_CONNECTIONS_PER_INSTANCE: usize = 1000;
/// Default of the most bytes of compiled components a compile cache keeps
/// (`cache_max` under `[host]`, `--cache-max`): a Python or JavaScript
/// actor's compiled component takes about 40 MB, a Rust one 1 MB.
pub const DEFAULT_CACHE_MAX: u64 = 2 << 30;
/// Default of the most connections one host may have at once
/// (`--max-connections`); past it a connect gets HTTP 503
/// `too-many-connections`.
pub const DEFAULT_MAX_CONNECTIONS: usize = 10_000;
/// Longest guest failure text (an error's code or message, a trap's text,
/// a workflow's or step's error) the host keeps, logs or stores, in bytes
/// after its control characters are escaped; longer text is cut.
pub const MAX_FAILURE_MESSAGE_BYTES: usize = 4096;
/// Largest message a connected client may send (clients only listen; a
/// larger one closes the connection), and the read buffer of a connection.
pub const MAX_CLIENT_MESSAGE_BYTES: usize = 4096;

// The HTTP front: how long a connection may wait, and how many may be
// open, per client address and in all, before any token is checked.

/// Default of how long a connection with no request in flight may send
/// nothing before it is closed (`--idle-timeout`): from its opening (after
/// TLS's handshake) or from the end of its last answer.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Default of how long a request's head (its request line and headers) may
/// take to arrive whole, from its first byte (`--header-timeout`).
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Default of the most TCP connections the server holds open at once, HTTP
/// and WebSocket alike (`--max-tcp-connections`); past it a new one is
/// closed at once.
pub const DEFAULT_MAX_TCP_CONNECTIONS: usize = 20_000;
/// Default of the most TCP connections one client address may hold open
/// (`--max-tcp-connections-per-address`); past it its new ones are closed
/// at once. IPv6 addresses count by their /64 network.
pub const DEFAULT_MAX_TCP_CONNECTIONS_PER_ADDRESS: usize = 1_000;
/// Default of the most connections waiting for authentication (accepted,
/// with no authenticated request yet) at once (`--max-unauthenticated`);
/// past it a new connection is closed at once.
pub const DEFAULT_MAX_UNAUTHENTICATED: usize = 1_000;
/// Default of the most connections one client address may have waiting
/// for authentication (`--max-unauthenticated-per-address`).
pub const DEFAULT_MAX_UNAUTHENTICATED_PER_ADDRESS: usize = 100;
/// Default of the most WebSockets waiting for their first-message token at
/// once (`--max-token-waits`); past it an upgrade without a token is
/// answered 503 `too-many-connections`.
pub const DEFAULT_MAX_TOKEN_WAITS: usize = 256;
/// Default of the most WebSockets one client address may have waiting for
/// their first-message token (`--max-token-waits-per-address`); past it an
/// upgrade without a token is answered 429 `rate-limited`.
pub const DEFAULT_MAX_TOKEN_WAITS_PER_ADDRESS: usize = 16;
/// Longest `idle_timeout` or `header_timeout` a server takes.
pub const MAX_HTTP_TIMEOUT: Duration = Duration::from_secs(24 * 3600);
/// How long a WebSocket without a token has to send it as its first
/// message.
pub const FIRST_MESSAGE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a request signed by another host of the cluster may take to
/// send its body (read only once its signature's form and time hold).
pub const PEER_BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// The timeouts and caps of the HTTP front (`burrow serve`'s flags, or the
/// same names under `[host]`). A refused connection or upgrade is refused
/// at once, never queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// See [`DEFAULT_IDLE_TIMEOUT`].
    pub idle_timeout: Duration,
    /// See [`DEFAULT_HEADER_TIMEOUT`].
    pub header_timeout: Duration,
    /// See [`DEFAULT_MAX_TCP_CONNECTIONS`].
    pub max_tcp_connections: usize,
    /// See [`DEFAULT_MAX_TCP_CONNECTIONS_PER_ADDRESS`].
    pub max_tcp_connections_per_address: usize,
    /// See [`DEFAULT_MAX_UNAUTHENTICATED`].
    pub max_unauthenticated: usize,
    /// See [`DEFAULT_MAX_UNAUTHENTICATED_PER_ADDRESS`].
    pub max_unauthenticated_per_address: usize,
    /// See [`DEFAULT_MAX_TOKEN_WAITS`].
    pub max_token_waits: usize,
    /// See [`DEFAULT_MAX_TOKEN_WAITS_PER_ADDRESS`].
    pub max_token_waits_per_address: usize,
}

impl Default for HttpLimits {
    fn default() -> HttpLimits {
        HttpLimits {
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            max_tcp_connections: DEFAULT_MAX_TCP_CONNECTIONS,
            max_tcp_connections_per_address: DEFAULT_MAX_TCP_CONNECTIONS_PER_ADDRESS,
            max_unauthenticated: DEFAULT_MAX_UNAUTHENTICATED,
            max_unauthenticated_per_address: DEFAULT_MAX_UNAUTHENTICATED_PER_ADDRESS,
            max_token_waits: DEFAULT_MAX_TOKEN_WAITS,
            max_token_waits_per_address: DEFAULT_MAX_TOKEN_WAITS_PER_ADDRESS,
        }
    }
}

impl HttpLimits {
    /// Checks that every timeout and cap lets something through: `Err`
    /// names the one that would refuse every connection.
    pub fn check(&self) -> Result<(), String> {
        for (name, timeout) in [
            ("idle_timeout", self.idle_timeout),
            ("header_timeout", self.header_timeout),
        ] {
            if timeout.is_zero() {
                return Err(format!(
                    "{name} must be above 0: every connection would be closed at once"
                ));
            }
            if timeout > MAX_HTTP_TIMEOUT {
                return Err(format!(
                    "{name} must be at most {} h",
                    MAX_HTTP_TIMEOUT.as_secs() / 3600
                ));
            }
        }
        for (name, cap) in [
            ("max_tcp_connections", self.max_tcp_connections),
            (
                "max_tcp_connections_per_address",
                self.max_tcp_connections_per_address,
            ),
            ("max_unauthenticated", self.max_unauthenticated),
            (
                "max_unauthenticated_per_address",
                self.max_unauthenticated_per_address,
            ),
            ("max_token_waits", self.max_token_waits),
            (
                "max_token_waits_per_address",
                self.max_token_waits_per_address,
            ),
        ] {
            if cap == 0 {
                return Err(format!("{name} must be at least 1"));
            }
        }
        Ok(())
    }
}

/// Most instances that may have connections at once: half of `max_awake`
/// (rounded down). A connected instance stays awake, so the other half of
/// the awake instances stays free for calls, queues, schedules and
/// workflows of every other instance.
pub fn max_connected_instances(max_awake: usize) -> usize {
    max_awake / 2
}

// Conflicts: a transaction that met concurrent processing of the same
// instance was rolled back whole and runs again after a pause.

/// First pause before a call that met concurrent processing runs again
/// (the pause doubles at every further conflict).
pub const FIRST_CONFLICT_PAUSE: Duration = Duration::from_millis(1);
/// Longest pause between two runs of a call that keeps meeting concurrent
/// processing.
pub const MAX_CONFLICT_PAUSE: Duration = Duration::from_millis(50);
/// Pause before background work (a queue event's processing, a workflow
/// run) that met a concurrent call is tried again.
pub const BACKGROUND_CONFLICT_PAUSE: Duration = Duration::from_millis(5);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("30").unwrap_err().contains("no unit"));
        assert!(
            parse_duration("3 days")
                .unwrap_err()
                .contains("unknown unit")
        );
        assert!(parse_duration("ms").is_err());
    }

    #[test]
    fn http_limits_refuse_what_would_refuse_every_connection() {
        assert_eq!(HttpLimits::default().check(), Ok(()));
        let zero = HttpLimits {
            header_timeout: Duration::ZERO,
            ..HttpLimits::default()
        };
        assert!(
            zero.check()
                .unwrap_err()
                .starts_with("header_timeout must be above 0")
        );
        let long = HttpLimits {
            idle_timeout: MAX_HTTP_TIMEOUT + Duration::from_secs(1),
            ..HttpLimits::default()
        };
        assert!(
            long.check()
                .unwrap_err()
                .contains("idle_timeout must be at most 24 h")
        );
        let none = HttpLimits {
            max_unauthenticated_per_address: 0,
            ..HttpLimits::default()
        };
        assert_eq!(
            none.check(),
            Err("max_unauthenticated_per_address must be at least 1".into())
        );
    }

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(parse_size("128MiB"), Ok(128 << 20));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("12MB").unwrap_err().contains("unknown unit"));
        assert!(
            parse_size("99999999999999GiB")
                .unwrap_err()
                .contains("too large")
        );
    }
}
