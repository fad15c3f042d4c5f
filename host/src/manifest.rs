//! `burrow.toml`: which actors exist, where their components are, how to
//! build them, and their options.
//!
//! ```toml
//! [host]                      # optional
//! data_dir = ".burrow"
//! synchronous = "normal"      # off | normal | full
//! ui = true                   # the web inspector at /ui (default true)
//! tokens = "tokens.toml"      # API tokens (default: none, loopback only)
//! open_metrics = false        # /metrics without a token (default false)
//! tls_cert = "tls/cert.pem"   # optional: serve HTTPS with this certificate
//! tls_key = "tls/key.pem"     #   and this key (PEM; both or neither)
//! idle_timeout = "60s"        # a connection with no request in flight
//! header_timeout = "10s"      # a request's line and headers, from the first byte
//! max_tcp_connections = 20000 # TCP connections open at once
//! max_tcp_connections_per_address = 1000
//! max_unauthenticated = 1000  # connections with no authenticated request yet
//! max_unauthenticated_per_address = 100
//! max_token_waits = 256       # WebSockets waiting for their first-message token
//! max_token_waits_per_address = 16
//! outbound_ca = "ca.pem"      # optional: CAs outgoing HTTPS trusts besides the system's
//!
//! [actors.counter]
//! component = "target/wasm32-wasip2/guest/counter.wasm"
//! build = "cargo build -p counter --target wasm32-wasip2 --profile guest"
//! watch = ["examples/counter/src"] # optional: what `burrow dev` watches
//! sleep_timeout = "30s"       # optional, default 30s
//! call_timeout = "10s"        # optional, default 10s
//! memory_limit = "128MiB"     # optional, default 128MiB
//! db_size_limit = "1GiB"      # optional, default 1GiB
//! queue_max_pending = 100000 # optional, default 100000 pending events
//! queue_max_payload = "1MiB"  # optional, default 1MiB
//! queue_max_attempts = 10     # optional, default 10, then dead letter
//! queue_retry_base = "1s"     # optional, first retry after 1s, then doubling
//! queue_retry_cap = "5m"      # optional, longest wait between attempts
//! max_connections = 1000      # optional, client connections per instance
//! http = ["https://api.example.com", "http://127.0.0.1:9000"] # optional: what
//!                             # its outgoing HTTP may reach (default: nothing)
//! http_max_request = "4MiB"   # optional, largest request body it sends or is sent
//! http_max_response = "16MiB" # optional, largest response body it reads or answers
//! public_http = false         # optional: its incoming HTTP handler needs no token
//! ```
//!
//! Relative paths are relative to the manifest's directory; build commands
//! run there too.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};
use serde::Deserialize;

use crate::address::validate_actor_name;
use crate::config::{ActorOptions, Synchronous, parse_duration, parse_size};

/// A parsed manifest.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// The directory relative paths start from.
    pub dir: PathBuf,
    /// The `[host]` section.
    pub host: HostSection,
    /// The `[cluster]` section: `burrow serve` joins this cluster.
    pub cluster: Option<ClusterSection>,
    /// The actors, by name.
    pub actors: BTreeMap<String, ActorSpec>,
}

/// The `[cluster]` section: several hosts sharing one actor space through
/// PostgreSQL. Each setting may be given to `burrow serve` as a flag
/// instead, which wins.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterSection {
    /// The PostgreSQL connection string.
    pub url: Option<String>,
    /// This host's name in `burrow cluster status`.
    pub name: Option<String>,
    /// The base URL other hosts reach this one at.
    pub advertise: Option<String>,
    /// How long a host's instances stay its own after its last heartbeat
    /// (`5s`).
    pub lease: Option<String>,
    /// Time between heartbeats (`1s`).
    pub heartbeat: Option<String>,
    /// The lease's safety margin (`1s`).
    pub margin: Option<String>,
}

/// The `[host]` section.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostSection {
    /// Data directory (default `.burrow`).
    pub data_dir: Option<PathBuf>,
    /// `synchronous` of instance databases (default `normal`).
    pub synchronous: Option<Synchronous>,
    /// Whether `burrow serve` serves the web inspector at `/ui` (default
    /// true; `--no-ui` turns it off too).
    pub ui: Option<bool>,
    /// The API tokens file `burrow serve` checks requests against
    /// (`--tokens` wins).
    pub tokens: Option<PathBuf>,
    /// Whether `/metrics` is served without a token (default false).
    pub open_metrics: Option<bool>,
    /// The certificate (chain, PEM) `burrow serve` serves HTTPS with;
    /// with `tls_key`.
    pub tls_cert: Option<PathBuf>,
    /// The private key (PEM) of `tls_cert`.
    pub tls_key: Option<PathBuf>,
    /// How long a connection with no request in flight may send nothing
    /// (`60s`; `--idle-timeout` wins).
    pub idle_timeout: Option<String>,
    /// How long a request's line and headers may take to arrive, from
    /// their first byte (`10s`; `--header-timeout` wins).
    pub header_timeout: Option<String>,
    /// TCP connections open at once (`--max-tcp-connections` wins).
    pub max_tcp_connections: Option<usize>,
    /// TCP connections open at once from one client address.
    pub max_tcp_connections_per_address: Option<usize>,
    /// Connections with no authenticated request yet.
    pub max_unauthenticated: Option<usize>,
    /// Connections with no authenticated request yet from one client
    /// address.
    pub max_unauthenticated_per_address: Option<usize>,
    /// WebSockets waiting for their first-message token.
    pub max_token_waits: Option<usize>,
    /// WebSockets waiting for their first-message token from one client
    /// address.
    pub max_token_waits_per_address: Option<usize>,
    /// CA certificates (PEM) that actors' outgoing HTTPS requests trust
    /// besides the system's roots (`--outbound-ca` wins).
    pub outbound_ca: Option<PathBuf>,
    /// The compile cache (`--cache-dir` wins).
    pub cache_dir: Option<PathBuf>,
    /// The most bytes the compile cache keeps, such as `2GiB`
    /// (`--cache-max` wins).
    pub cache_max: Option<String>,
}

/// One actor of the manifest.
#[derive(Debug, Clone)]
pub struct ActorSpec {
    /// The actor's name.
    pub name: String,
    /// The component file (absolute).
    pub component: PathBuf,
    /// The shell command that builds the component, if any.
    pub build: Option<String>,
    /// Files and directories whose changes `burrow dev` rebuilds and
    /// deploys the actor for (absolute).
    pub watch: Vec<PathBuf>,
    /// Options.
    pub options: ActorOptions,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    #[serde(default)]
    host: HostSection,
    cluster: Option<ClusterSection>,
    #[serde(default)]
    actors: BTreeMap<String, RawActor>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawActor {
    component: PathBuf,
    build: Option<String>,
    #[serde(default)]
    watch: Vec<PathBuf>,
    sleep_timeout: Option<String>,
    call_timeout: Option<String>,
    memory_limit: Option<String>,
    db_size_limit: Option<String>,
    queue_max_pending: Option<u64>,
    queue_max_payload: Option<String>,
    queue_max_attempts: Option<u32>,
    queue_retry_base: Option<String>,
    queue_retry_cap: Option<String>,
    max_connections: Option<usize>,
    #[serde(default)]
    http: Vec<String>,
    http_max_request: Option<String>,
    http_max_response: Option<String>,
    #[serde(default)]
    public_http: bool,
}

impl Manifest {
    /// Reads and checks the manifest at `path`.
    pub fn load(path: &Path) -> Result<Manifest> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the manifest {}", path.display()))?;
        let dir = path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        let dir = if dir.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            dir
        };
        Manifest::parse(&text, &dir).with_context(|| format!("in the manifest {}", path.display()))
    }

    /// Parses manifest text whose relative paths start at `dir`.
    pub fn parse(text: &str, dir: &Path) -> Result<Manifest> {
        let raw: RawManifest = toml::from_str(text)?;
        let dir = std::path::absolute(dir)?;
        let mut actors = BTreeMap::new();
        for (name, raw) in raw.actors {
            validate_actor_name(&name).map_err(|e| anyhow!("{e}"))?;
            let spec = ActorSpec::from_raw(&name, raw, &dir)
                .with_context(|| format!("in [actors.{name}]"))?;
            actors.insert(name, spec);
        }
        if raw.host.tls_cert.is_some() != raw.host.tls_key.is_some() {
            bail!("in [host]: tls_cert and tls_key go together: give both or neither");
        }
        for (name, value) in [
            ("idle_timeout", &raw.host.idle_timeout),
            ("header_timeout", &raw.host.header_timeout),
        ] {
            if let Some(value) = value {
                parse_duration(value).map_err(|e| anyhow!("in [host]: {name}: {e}"))?;
            }
        }
        if let Some(cluster) = &raw.cluster {
            for (name, value) in [
                ("lease", &cluster.lease),
                ("heartbeat", &cluster.heartbeat),
                ("margin", &cluster.margin),
            ] {
                if let Some(value) = value {
                    parse_duration(value).map_err(|e| anyhow!("in [cluster]: {name}: {e}"))?;
                }
            }
        }
        Ok(Manifest {
            dir,
            host: raw.host,
            cluster: raw.cluster,
            actors,
        })
    }

    /// The API tokens file the manifest names, relative to its directory.
    pub fn tokens(&self) -> Option<PathBuf> {
        self.host.tokens.as_ref().map(|path| self.dir.join(path))
    }

    /// The certificate and key files `burrow serve` serves HTTPS with, if
    /// the manifest names them (relative to its directory).
    pub fn tls_files(&self) -> Option<(PathBuf, PathBuf)> {
        let cert = self.host.tls_cert.as_ref()?;
        let key = self.host.tls_key.as_ref()?;
        Some((self.dir.join(cert), self.dir.join(key)))
    }

    /// The CA certificates outgoing HTTPS requests trust besides the
    /// system's roots, if the manifest names a file (relative to its
    /// directory).
    pub fn outbound_ca(&self) -> Option<PathBuf> {
        self.host
            .outbound_ca
            .as_ref()
            .map(|path| self.dir.join(path))
    }

    /// The compile cache the manifest names, relative to its directory.
    pub fn cache_dir(&self) -> Option<PathBuf> {
        self.host.cache_dir.as_ref().map(|path| self.dir.join(path))
    }

    /// The data directory the manifest asks for, relative to its directory.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.join(
            self.host
                .data_dir
                .clone()
                .unwrap_or_else(|| PathBuf::from(".burrow")),
        )
    }
}

impl ActorSpec {
    fn from_raw(name: &str, raw: RawActor, dir: &Path) -> Result<ActorSpec> {
        let mut options = ActorOptions::default();
        if let Some(t) = raw.sleep_timeout {
            options.sleep_timeout =
                parse_duration(&t).map_err(|e| anyhow!("sleep_timeout: {e}"))?;
        }
        if let Some(t) = raw.call_timeout {
            options.call_timeout = parse_duration(&t).map_err(|e| anyhow!("call_timeout: {e}"))?;
        }
        if let Some(s) = raw.memory_limit {
            options.memory_limit = parse_size(&s).map_err(|e| anyhow!("memory_limit: {e}"))?;
        }
        if let Some(s) = raw.db_size_limit {
            options.db_size_limit =
                parse_size(&s).map_err(|e| anyhow!("db_size_limit: {e}"))? as u64;
        }
        if let Some(n) = raw.queue_max_pending {
            options.queue_max_pending = n;
        }
        if let Some(s) = raw.queue_max_payload {
            options.queue_max_payload =
                parse_size(&s).map_err(|e| anyhow!("queue_max_payload: {e}"))?;
        }
        if let Some(n) = raw.queue_max_attempts {
            if n == 0 {
                bail!("queue_max_attempts: must be at least 1");
            }
            options.queue_max_attempts = n;
        }
        if let Some(t) = raw.queue_retry_base {
            options.queue_retry_base =
                parse_duration(&t).map_err(|e| anyhow!("queue_retry_base: {e}"))?;
        }
        if let Some(t) = raw.queue_retry_cap {
            options.queue_retry_cap =
                parse_duration(&t).map_err(|e| anyhow!("queue_retry_cap: {e}"))?;
        }
        if let Some(n) = raw.max_connections {
            options.max_connections = n;
        }
        options.http =
            crate::outbound::Allowed::parse(&raw.http).map_err(|e| anyhow!("http: {e}"))?;
        if let Some(s) = raw.http_max_request {
            options.http_max_request =
                parse_size(&s).map_err(|e| anyhow!("http_max_request: {e}"))? as u64;
        }
        if let Some(s) = raw.http_max_response {
            options.http_max_response =
                parse_size(&s).map_err(|e| anyhow!("http_max_response: {e}"))? as u64;
        }
        options.public_http = raw.public_http;
        Ok(ActorSpec {
            name: name.to_owned(),
            component: dir.join(raw.component),
            build: raw.build,
            watch: raw.watch.into_iter().map(|p| dir.join(p)).collect(),
            options,
        })
    }

    /// A spec for a component file with default options (for embedding and tests).
    pub fn new(name: &str, component: impl Into<PathBuf>) -> ActorSpec {
        ActorSpec {
            name: name.to_owned(),
            component: component.into(),
            build: None,
            watch: Vec::new(),
            options: ActorOptions::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_manifest_parses_with_options_and_defaults() {
        let m = Manifest::parse(
            r#"
            [host]
            synchronous = "full"
            [actors.counter]
            component = "c.wasm"
            build = "make"
            sleep_timeout = "2s"
            memory_limit = "64MiB"
            public_http = true
            [actors.other]
            component = "/abs/o.wasm"
            "#,
            Path::new("/proj"),
        )
        .unwrap();
        assert_eq!(m.host.synchronous, Some(Synchronous::Full));
        let c = &m.actors["counter"];
        assert_eq!(c.component, Path::new("/proj/c.wasm"));
        assert_eq!(c.options.sleep_timeout, Duration::from_secs(2));
        assert_eq!(c.options.memory_limit, 64 << 20);
        assert_eq!(c.options.call_timeout, crate::config::DEFAULT_CALL_TIMEOUT);
        assert!(c.options.public_http);
        assert!(!m.actors["other"].options.public_http);
        assert_eq!(m.actors["other"].component, Path::new("/abs/o.wasm"));
        assert_eq!(m.data_dir(), Path::new("/proj/.burrow"));
    }

    #[test]
    fn bad_manifests_say_what_is_wrong() {
        let err = |text: &str| format!("{:#}", Manifest::parse(text, Path::new("/p")).unwrap_err());
        assert!(
            err("[actors.c]\ncomponent = 'x'\nsleep_timeout = '5 days'").contains("sleep_timeout")
        );
        assert!(err("[actors.c]\ncomponent = 'x'\ncolour = 'red'").contains("colour"));
        assert!(err("[actors.Bad]\ncomponent = 'x'").contains("actor name `Bad`"));
        assert!(err("[actors.c]\nbuild = 'x'").contains("component"));
        assert!(err("[host]\ntls_cert = 'c.pem'").contains("tls_cert and tls_key go together"));
        assert!(err("[host]\nidle_timeout = '1 day'").contains("idle_timeout"));
        assert!(err("[host]\nmax_token_waits = -1").contains("max_token_waits"));
        assert!(err("[actors.c]\ncomponent = 'x'\npublic_http = 'yes'").contains("public_http"));
    }

    #[test]
    fn the_http_fronts_limits_are_host_options() {
        let m = Manifest::parse(
            "[host]\nidle_timeout = '90s'\nheader_timeout = '5s'\nmax_tcp_connections = 50\n\
             max_tcp_connections_per_address = 40\nmax_unauthenticated = 30\n\
             max_unauthenticated_per_address = 20\nmax_token_waits = 10\n\
             max_token_waits_per_address = 5",
            Path::new("/proj"),
        )
        .unwrap();
        assert_eq!(m.host.idle_timeout.as_deref(), Some("90s"));
        assert_eq!(m.host.header_timeout.as_deref(), Some("5s"));
        assert_eq!(m.host.max_tcp_connections, Some(50));
        assert_eq!(m.host.max_tcp_connections_per_address, Some(40));
        assert_eq!(m.host.max_unauthenticated, Some(30));
        assert_eq!(m.host.max_unauthenticated_per_address, Some(20));
        assert_eq!(m.host.max_token_waits, Some(10));
        assert_eq!(m.host.max_token_waits_per_address, Some(5));
    }

    #[test]
    fn tls_files_are_relative_to_the_manifest() {
        let m = Manifest::parse(
            "[host]\ntls_cert = 'tls/cert.pem'\ntls_key = '/etc/burrow/key.pem'",
            Path::new("/proj"),
        )
        .unwrap();
        assert_eq!(
            m.tls_files(),
            Some((
                PathBuf::from("/proj/tls/cert.pem"),
                PathBuf::from("/etc/burrow/key.pem")
            ))
        );
        assert_eq!(
            Manifest::parse("", Path::new("/proj")).unwrap().tls_files(),
            None
        );
    }
}
