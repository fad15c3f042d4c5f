//! The host embedded in this process: its configuration from the manifest
//! and the flags, and `serve`, which always runs on it. Only one process
//! may hold a data directory: a command run on an embedded host fails while
//! a server runs on the same directory.

use std::net::SocketAddr;
use std::path::Path;

use anyhow::Result;

use super::HostArgs;
use crate::config::HostConfig;
use crate::host::Host;
use crate::manifest::Manifest;

pub(super) fn load_manifest(path: &Path) -> Result<Manifest> {
    Manifest::load(path)
}

pub(super) fn host_config(manifest: &Manifest, args: &HostArgs) -> HostConfig {
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

pub(super) async fn start_host(manifest_path: &Path, args: &HostArgs) -> Result<Host> {
    let manifest = load_manifest(manifest_path)?;
    let actors: Vec<_> = manifest.actors.values().cloned().collect();
    Host::start(host_config(&manifest, args), &actors).await
}

/// Serves the HTTP API on `listen` until Ctrl-C or SIGTERM, then puts every
/// instance to sleep.
pub(super) async fn serve(manifest_path: &Path, listen: SocketAddr, args: &HostArgs) -> Result<()> {
    let host = start_host(manifest_path, args).await?;
    let shutdown = async {
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
    let stop = async move {
        tokio::select! { _ = shutdown => {}, _ = terminate => {} }
        tracing::info!("shutting down");
    };
    crate::http::serve(host, listen, stop).await?;
    Ok(())
}
