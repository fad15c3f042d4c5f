//! The host embedded in this process: its configuration from the manifest
//! and the flags, and `serve`, which always runs on it. Only one process
//! may hold a data directory: a command run on an embedded host fails while
//! a server runs on the same directory.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

use super::{AccessArgs, ClusterArgs, HostArgs, HttpArgs};
use crate::config::{
    ClusterConfig, DEFAULT_CACHE_MAX, HostConfig, HttpLimits, parse_duration, parse_size,
};
use crate::host::Host;
use crate::http::Tls;
use crate::manifest::Manifest;

pub(super) fn load_manifest(path: &Path) -> Result<Manifest> {
    Manifest::load(path)
}

pub(super) fn host_config(manifest: &Manifest, args: &HostArgs) -> Result<HostConfig> {
    let cache_max = match args.cache_max.as_ref() {
        Some(text) => parse_size(text).map_err(|e| anyhow::anyhow!("--cache-max: {e}"))?,
        None => match manifest.host.cache_max.as_ref() {
            Some(text) => parse_size(text).map_err(|e| anyhow::anyhow!("cache_max: {e}"))?,
            None => DEFAULT_CACHE_MAX as usize,
        },
    };
    Ok(HostConfig {
        data_dir: args.data_dir.clone().unwrap_or_else(|| manifest.data_dir()),
        synchronous: args
            .synchronous
            .or(manifest.host.synchronous)
            .unwrap_or_default(),
        max_awake: args.max_awake,
        max_connections: args.max_connections,
        pooling: true,
        cache_dir: args
            .cache_dir
            .clone()
            .or_else(|| manifest.cache_dir())
            .or_else(user_cache_dir),
        cache_max: cache_max as u64,
        cluster: None,
        outbound_ca: args.outbound_ca.clone().or_else(|| manifest.outbound_ca()),
    })
}

/// The user's compile cache, shared by every data directory and project:
/// `$XDG_CACHE_HOME/burrow`, else `~/.cache/burrow`; `None` (the data
/// directory's own) when neither can be told.
fn user_cache_dir() -> Option<PathBuf> {
    let absolute = |var: &str| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .filter(|path| path.is_absolute())
    };
    absolute("XDG_CACHE_HOME")
        .or_else(|| absolute("HOME").map(|home| home.join(".cache")))
        .map(|cache| cache.join("burrow"))
}

/// The cluster `burrow serve` joins, from its flags and the manifest's
/// `[cluster]` (a flag wins); `None` when neither names one. A host that
/// serves HTTPS (`tls`) advertises an `https://` address by default.
pub(super) fn cluster_config(
    manifest: &Manifest,
    args: &ClusterArgs,
    listen: SocketAddr,
    tls: bool,
) -> Result<Option<ClusterConfig>> {
    let section = manifest.cluster.clone().unwrap_or_default();
    let Some(url) = args.cluster.clone().or(section.url) else {
        return Ok(None);
    };
    let advertise = match args.advertise.clone().or(section.advertise) {
        Some(advertise) => advertise,
        None if listen.ip().is_unspecified() => bail!(
            "--listen {listen} is a wildcard address: give the address other hosts reach this one at with --advertise (or advertise under [cluster])"
        ),
        None if tls => format!("https://{listen}"),
        None => format!("http://{listen}"),
    };
    let name = args.name.clone().or(section.name).unwrap_or_else(|| {
        advertise
            .trim_start_matches("http://")
            .trim_start_matches("https://")
            .trim_end_matches('/')
            .to_owned()
    });
    let mut config = ClusterConfig::new(url, name, advertise);
    let duration = |flag: &Option<String>, option: &Option<String>, name: &str| {
        flag.as_ref()
            .or(option.as_ref())
            .map(|text| parse_duration(text).map_err(|e| anyhow::anyhow!("--{name}: {e}")))
            .transpose()
    };
    if let Some(lease) = duration(&args.lease, &section.lease, "lease")? {
        config.lease = lease;
    }
    if let Some(heartbeat) = duration(&args.heartbeat, &section.heartbeat, "heartbeat")? {
        config.heartbeat = heartbeat;
    }
    if let Some(margin) = duration(&args.lease_margin, &section.margin, "lease-margin")? {
        config.margin = margin;
    }
    config.check().map_err(anyhow::Error::msg)?;
    Ok(Some(config))
}

/// The HTTP front's timeouts and caps, from the flags and the manifest's
/// `[host]` (a flag wins), else the defaults; an error names the setting
/// that is not acceptable.
pub(super) fn http_limits(manifest: &Manifest, args: &HttpArgs) -> Result<HttpLimits> {
    let section = &manifest.host;
    let mut limits = HttpLimits::default();
    let duration = |flag: &Option<String>, option: &Option<String>, name: &str| {
        flag.as_ref()
            .or(option.as_ref())
            .map(|text| parse_duration(text).map_err(|e| anyhow::anyhow!("{name}: {e}")))
            .transpose()
    };
    if let Some(t) = duration(&args.idle_timeout, &section.idle_timeout, "idle_timeout")? {
        limits.idle_timeout = t;
    }
    if let Some(t) = duration(
        &args.header_timeout,
        &section.header_timeout,
        "header_timeout",
    )? {
        limits.header_timeout = t;
    }
    for (flag, option, cap) in [
        (
            args.max_tcp_connections,
            section.max_tcp_connections,
            &mut limits.max_tcp_connections,
        ),
        (
            args.max_tcp_connections_per_address,
            section.max_tcp_connections_per_address,
            &mut limits.max_tcp_connections_per_address,
        ),
        (
            args.max_unauthenticated,
            section.max_unauthenticated,
            &mut limits.max_unauthenticated,
        ),
        (
            args.max_unauthenticated_per_address,
            section.max_unauthenticated_per_address,
            &mut limits.max_unauthenticated_per_address,
        ),
        (
            args.max_token_waits,
            section.max_token_waits,
            &mut limits.max_token_waits,
        ),
        (
            args.max_token_waits_per_address,
            section.max_token_waits_per_address,
            &mut limits.max_token_waits_per_address,
        ),
    ] {
        if let Some(n) = flag.or(option) {
            *cap = n;
        }
    }
    limits.check().map_err(anyhow::Error::msg)?;
    Ok(limits)
}

/// The certificate and key a server serves HTTPS with: the flags' pair,
/// else the manifest's; `None` (plain HTTP) when neither names one. Read
/// now, so that a missing or bad file stops the command before the host
/// starts.
pub(super) fn tls(manifest: &Manifest, flags: Option<(PathBuf, PathBuf)>) -> Result<Option<Tls>> {
    flags
        .or_else(|| manifest.tls_files())
        .map(|(cert, key)| Tls::load(cert, key))
        .transpose()
}

/// A host on the manifest's data directory for one command: started at
/// once, its components compiling in the background; the command waits
/// for the actor it uses ([`Host::wait_ready`]), not for the others.
pub(super) async fn start_host(manifest_path: &Path, args: &HostArgs) -> Result<Host> {
    let manifest = load_manifest(manifest_path)?;
    let actors: Vec<_> = manifest.actors.values().cloned().collect();
    Host::launch(host_config(&manifest, args)?, &actors).await
}

/// Serves the HTTP API (and, unless `no_ui` or the manifest says
/// otherwise, the web inspector) on `listen`, over HTTPS with the `tls`
/// certificate and key (or the manifest's), until Ctrl-C or SIGTERM, then
/// puts every instance to sleep (and, in a cluster, gives its leases back).
/// In a cluster, other hosts' `https://` addresses are verified with the
/// system's roots and `ca_cert`.
#[allow(clippy::too_many_arguments)]
pub(super) async fn serve(
    manifest_path: &Path,
    listen: SocketAddr,
    no_ui: bool,
    access: &AccessArgs,
    http: &HttpArgs,
    tls: Option<(PathBuf, PathBuf)>,
    args: &HostArgs,
    cluster: &ClusterArgs,
    ca_cert: Option<&Path>,
) -> Result<()> {
    let manifest = load_manifest(manifest_path)?;
    let access = access_of(&manifest, access, listen)?;
    let limits = http_limits(&manifest, http)?;
    let actors: Vec<_> = manifest.actors.values().cloned().collect();
    let tls = self::tls(&manifest, tls)?;
    let mut config = host_config(&manifest, args)?;
    config.cluster = cluster_config(&manifest, cluster, listen, tls.is_some())?;
    if let Some(cluster) = &mut config.cluster {
        cluster.trust = super::remote::trust(ca_cert)
            .map_err(|failure| anyhow::anyhow!("{}", failure.message))?;
    }
    // Bound before the host starts: a cluster member must be reachable at
    // its advertised address from the moment it joins.
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {listen}: {e}"))?;
    // Serves at once: components the compile cache lacks compile in the
    // background, and each actor is ready when its component is.
    let host = Host::launch(config, &actors).await?;
    announce(&host, &listener, tls.is_some())?;
    let serving = crate::http::Serving {
        ui: !no_ui && manifest.host.ui.unwrap_or(true),
        access,
        tls,
        limits,
    };
    crate::http::serve_with(host, listener, serving, stop_signal()).await?;
    Ok(())
}

/// Records in the data directory where `host` serves (`listener`'s
/// address; a wildcard one as the loopback address), so that commands
/// reading the directory while it runs ask it.
pub(super) fn announce(host: &Host, listener: &tokio::net::TcpListener, tls: bool) -> Result<()> {
    let mut address = listener.local_addr()?;
    if address.ip().is_unspecified() {
        address.set_ip(match address {
            SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    let scheme = if tls { "https" } else { "http" };
    host.announce(&format!("{scheme}://{address}"))
}

/// Who may use a server on `listen`, from its flags and the manifest's
/// `[host]`. Without tokens, only a loopback address is served, unless
/// `--insecure-no-auth` says otherwise.
pub(super) fn access_of(
    manifest: &Manifest,
    args: &AccessArgs,
    listen: SocketAddr,
) -> Result<crate::http::Access> {
    let open_metrics = args.open_metrics || manifest.host.open_metrics.unwrap_or(false);
    let tokens = args.tokens.clone().or_else(|| manifest.tokens());
    if let Some(path) = tokens {
        let tokens = crate::tokens::Tokens::load(&path)?;
        tracing::info!(tokens = tokens.iter().count(), file = %path.display(), "requests need an API token");
        return Ok(crate::http::Access::with_tokens(tokens).open_metrics(open_metrics));
    }
    if !listen.ip().is_loopback() {
        if !args.insecure_no_auth {
            anyhow::bail!(
                "refusing to serve on {listen} without API tokens: anyone who can reach it could \
                 call, read, destroy and deploy anything. Give --tokens FILE (or `tokens` under \
                 [host]), listen on a loopback address, or say --insecure-no-auth"
            );
        }
        tracing::warn!(address = %listen, "serving without API tokens on an address other hosts can reach (--insecure-no-auth)");
        return Ok(crate::http::Access::open()
            .insecure_no_auth()
            .open_metrics(open_metrics));
    }
    Ok(crate::http::Access::open().open_metrics(open_metrics))
}

/// Resolves at Ctrl-C or SIGTERM.
pub(super) async fn stop_signal() {
    let interrupt = async {
        if tokio::signal::ctrl_c().await.is_err() {
            // No Ctrl-C handler: only SIGTERM stops the server.
            std::future::pending::<()>().await
        }
    };
    let terminate = async {
        #[cfg(unix)]
        if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            s.recv().await;
            return;
        }
        std::future::pending::<()>().await
    };
    tokio::select! { _ = interrupt => {}, _ = terminate => {} }
    tracing::info!("shutting down");
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, Command};

    fn serve_flags(flags: &[&str]) -> HttpArgs {
        let cli = Cli::try_parse_from(["burrow", "serve"].iter().chain(flags)).unwrap();
        match cli.command {
            Command::Serve { http, .. } => http,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn http_limits_come_from_the_flags_then_the_manifest_then_the_defaults() {
        let manifest = Manifest::parse(
            "[host]\nidle_timeout = '90s'\nheader_timeout = '5s'\nmax_token_waits = 7",
            Path::new("/proj"),
        )
        .unwrap();
        let limits = http_limits(
            &manifest,
            &serve_flags(&[
                "--header-timeout",
                "2s",
                "--max-unauthenticated-per-address",
                "3",
            ]),
        )
        .unwrap();
        assert_eq!(limits.idle_timeout, Duration::from_secs(90));
        assert_eq!(limits.header_timeout, Duration::from_secs(2));
        assert_eq!(limits.max_token_waits, 7);
        assert_eq!(limits.max_unauthenticated_per_address, 3);
        assert_eq!(
            limits.max_tcp_connections,
            HttpLimits::default().max_tcp_connections
        );
        let refused = http_limits(&manifest, &serve_flags(&["--max-tcp-connections", "0"]))
            .unwrap_err()
            .to_string();
        assert!(
            refused.contains("max_tcp_connections must be at least 1"),
            "{refused}"
        );
        let refused = http_limits(&manifest, &serve_flags(&["--idle-timeout", "soon"]))
            .unwrap_err()
            .to_string();
        assert!(refused.starts_with("idle_timeout:"), "{refused}");
    }
}
