//! HTTPS: the API served over TLS (rustls, with axum-server's handshake,
//! through the accept loop of `accept.rs`) with a certificate and private
//! key read from PEM files, and read again when the files change.
//!
//! Every [`RELOAD_POLL`] the files are read and compared with what was
//! last read; a changed pair that is good serves every connection accepted
//! from then on (open ones keep theirs), a bad one (unreadable, not PEM, a
//! key that does not fit the certificate) is logged as a warning and the
//! previous pair stays. A certificate and its key are rarely written at
//! the same instant: a poll that sees one new and one old file warns, and
//! the next one takes the pair.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use axum::Router;
use axum_server::tls_rustls::{RustlsAcceptor, RustlsConfig};
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::accept::Front;

/// How often the certificate and key files are read for a change.
pub const RELOAD_POLL: Duration = Duration::from_secs(1);

/// A TLS certificate (chain) and its private key, from PEM files: what
/// `burrow serve --tls-cert FILE --tls-key FILE` serves with. Cheap to
/// clone; clones share the pair in use.
#[derive(Clone)]
pub struct Tls {
    cert: PathBuf,
    key: PathBuf,
    /// The configuration new connections are accepted with.
    config: RustlsConfig,
    /// The files' contents the configuration was made from.
    loaded: Arc<Files>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("cert", &self.cert)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

/// What a certificate file and a key file hold.
#[derive(Clone, PartialEq, Eq)]
struct Files {
    cert: Vec<u8>,
    key: Vec<u8>,
}

impl Tls {
    /// Reads the certificate chain at `cert` (PEM `CERTIFICATE` blocks, the
    /// server's first) and the private key at `key` (PEM, PKCS#8, PKCS#1 or
    /// SEC1). The error names the file that cannot be read or does not hold
    /// what it should, or says that the key does not fit the certificate.
    pub fn load(cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Result<Tls> {
        let (cert, key) = (cert.into(), key.into());
        let files = Files {
            cert: read(&cert, "certificate")?,
            key: read(&key, "private key")?,
        };
        let config = server_config(&cert, &key, &files)?;
        Ok(Tls {
            config: RustlsConfig::from_config(config),
            cert,
            key,
            loaded: Arc::new(files),
        })
    }

    /// The certificate file.
    pub fn cert_path(&self) -> &Path {
        &self.cert
    }

    /// The private key file.
    pub fn key_path(&self) -> &Path {
        &self.key
    }

    /// Reads the files every [`RELOAD_POLL`], and takes a changed pair for
    /// the connections accepted after it, or warns and keeps the old one.
    async fn watch(self) {
        let mut seen: Result<Files, String> = Ok((*self.loaded).clone());
        loop {
            tokio::time::sleep(RELOAD_POLL).await;
            let now = match (
                tokio::fs::read(&self.cert).await,
                tokio::fs::read(&self.key).await,
            ) {
                (Ok(cert), Ok(key)) => Ok(Files { cert, key }),
                (Err(e), _) => Err(format!(
                    "cannot read the TLS certificate {}: {e}",
                    self.cert.display()
                )),
                (_, Err(e)) => Err(format!(
                    "cannot read the TLS private key {}: {e}",
                    self.key.display()
                )),
            };
            if now == seen {
                continue;
            }
            seen = now.clone();
            let taken = now
                .map_err(anyhow::Error::msg)
                .and_then(|files| server_config(&self.cert, &self.key, &files));
            match taken {
                Ok(config) => {
                    self.config.reload_from_config(config);
                    tracing::info!(
                        cert = %self.cert.display(),
                        key = %self.key.display(),
                        "TLS certificate and key reloaded: new connections use them"
                    );
                }
                Err(e) => tracing::warn!(
                    error = %format!("{e:#}"),
                    "the changed TLS certificate or key cannot be used: the previous pair is kept"
                ),
            }
        }
    }
}

fn read(path: &Path, what: &str) -> Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("cannot read the TLS {what} {}", path.display()))
}

/// A rustls server configuration for the pair `files` (read from `cert`
/// and `key`, which errors name).
fn server_config(cert: &Path, key: &Path, files: &Files) -> Result<Arc<ServerConfig>> {
    let chain = CertificateDer::pem_slice_iter(&files.cert)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            anyhow!(
                "the TLS certificate {} is not valid PEM: {e}",
                cert.display()
            )
        })?;
    if chain.is_empty() {
        bail!(
            "the TLS certificate {} holds no PEM CERTIFICATE block",
            cert.display()
        );
    }
    let private_key = PrivateKeyDer::from_pem_slice(&files.key).map_err(|e| {
        anyhow!(
            "the TLS private key {} holds no PEM private key (PKCS#8, PKCS#1 or SEC1): {e}",
            key.display()
        )
    })?;
    let mut config = ServerConfig::builder_with_provider(burrow_client::crypto_provider())
        .with_safe_default_protocol_versions()
        .context("the TLS provider supports no protocol version")?
        .with_no_client_auth()
        .with_single_cert(chain, private_key)
        .map_err(|e| {
            anyhow!(
                "the TLS private key {} does not go with the certificate {}: {e}",
                key.display(),
                cert.display()
            )
        })?;
    // HTTP/1.1 only, as over plain TCP: WebSockets upgrade from it.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Serves `router` over TLS on `listener` until `shutdown` resolves, then
/// waits for the open connections to finish (see `accept.rs`), with the
/// pair in use read again as it changes. A handshake has the front's
/// `header_timeout`.
pub(super) async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    tls: Tls,
    front: Front,
    shutdown: impl Future<Output = ()>,
) {
    let handshake =
        RustlsAcceptor::new(tls.config.clone()).handshake_timeout(front.limits.header_timeout);
    let watcher = tokio::spawn(tls.watch());
    super::accept::serve(listener, router, handshake, front, shutdown).await;
    watcher.abort();
}
