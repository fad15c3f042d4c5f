//! [`Trust`]: which servers a client believes for `https://` and `wss://`.
//!
//! Every TLS connection of the client (its HTTP requests and its
//! WebSockets) verifies the server's certificate against the system's
//! root certificates plus the CA certificates a [`Trust`] adds, such as the
//! CA that signed a server's self-made certificate. The cryptography is
//! rustls with its `ring` provider, which becomes the process's default
//! provider when none is installed yet.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rustls::ClientConfig;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use crate::ClientError;

/// The environment variable that names a CA certificate (PEM) to trust
/// besides the system's roots, read by [`Trust::from_env`].
pub const CA_CERT_ENV: &str = "BURROW_CA_CERT";

/// How long a client of Burrow keeps an idle connection to a server for
/// its next request.
pub const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(50);

/// The certificates a client trusts: the system's roots, plus the CA
/// certificates added to it. Cheap to clone.
#[derive(Clone, Default)]
pub struct Trust {
    /// The files the extra CA certificates came from, for messages.
    files: Vec<PathBuf>,
    /// The extra CA certificates.
    extra: Vec<CertificateDer<'static>>,
    /// The TLS configuration with the extra certificates, made once
    /// (reading the system's roots costs a few milliseconds).
    config: Arc<OnceLock<Arc<ClientConfig>>>,
}

impl std::fmt::Debug for Trust {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trust")
            .field("ca_files", &self.files)
            .field("extra_roots", &self.extra.len())
            .finish()
    }
}

impl Trust {
    /// The system's root certificates only.
    pub fn system() -> Trust {
        Trust::default()
    }

    /// The system's roots, and the CA certificate(s) in the PEM file that
    /// [`CA_CERT_ENV`] (`BURROW_CA_CERT`) names, if it is set.
    pub fn from_env() -> Result<Trust, ClientError> {
        match std::env::var_os(CA_CERT_ENV) {
            Some(path) if !path.is_empty() => Trust::system().with_ca_file(path),
            _ => Ok(Trust::system()),
        }
    }

    /// This trust and the CA certificates in the PEM file at `path` (one or
    /// more `CERTIFICATE` blocks). An error names the file if it cannot be
    /// read or holds no certificate.
    pub fn with_ca_file(self, path: impl AsRef<Path>) -> Result<Trust, ClientError> {
        let path = path.as_ref();
        let pem = std::fs::read(path).map_err(|e| {
            ClientError::local(
                "invalid-ca-cert",
                format!("cannot read the CA certificate {}: {e}", path.display()),
            )
        })?;
        let mut trust = self.with_ca_pem(&pem).map_err(|e| {
            ClientError::local(
                "invalid-ca-cert",
                format!("the CA certificate {}: {}", path.display(), e.message),
            )
        })?;
        trust.files.push(path.to_owned());
        Ok(trust)
    }

    /// This trust and the CA certificates in `pem` (one or more
    /// `CERTIFICATE` blocks).
    pub fn with_ca_pem(mut self, pem: &[u8]) -> Result<Trust, ClientError> {
        let invalid = |why: String| ClientError::local("invalid-ca-cert", why);
        let certs = CertificateDer::pem_slice_iter(pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| invalid(format!("not a PEM certificate: {e}")))?;
        if certs.is_empty() {
            return Err(invalid("it holds no PEM certificate".into()));
        }
        // Each must parse as a trust anchor: found wrong now rather than at
        // the first connection.
        let mut store = rustls::RootCertStore::empty();
        for cert in &certs {
            store
                .add(cert.clone())
                .map_err(|e| invalid(format!("not a usable CA certificate: {e}")))?;
        }
        self.extra.extend(certs);
        self.config = Arc::default();
        Ok(self)
    }

    /// The rustls configuration of a client with this trust.
    pub fn client_config(&self) -> Arc<ClientConfig> {
        // The system's roots alone are read once per process.
        static SYSTEM: OnceLock<Arc<ClientConfig>> = OnceLock::new();
        let config = if self.extra.is_empty() {
            &SYSTEM
        } else {
            &*self.config
        };
        config
            .get_or_init(|| Arc::new(client_config(&self.extra)))
            .clone()
    }

    /// A reqwest client builder whose TLS has this trust: every HTTP client
    /// of Burrow is made from one. It lets an idle connection go after
    /// [`POOL_IDLE_TIMEOUT`], before a server with the default idle
    /// timeout (60 s) closes it: a request sent as the server closes would
    /// fail.
    pub fn http_client(&self) -> reqwest::ClientBuilder {
        reqwest::Client::builder()
            .tls_backend_preconfigured(ClientConfig::clone(&self.client_config()))
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
    }

    /// The connector of a WebSocket with this trust.
    pub fn connector(&self) -> tokio_tungstenite::Connector {
        tokio_tungstenite::Connector::Rustls(self.client_config())
    }
}

/// The process's crypto provider: the one installed, else `ring`,
/// installed as the default so that every rustls user of the process
/// agrees.
pub fn crypto_provider() -> Arc<CryptoProvider> {
    if let Some(provider) = CryptoProvider::get_default() {
        return provider.clone();
    }
    // Another thread may install one meanwhile: whichever won is used.
    let _ = rustls::crypto::ring::default_provider().install_default();
    CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()))
}

/// A TLS client configuration that verifies servers against the system's
/// roots and `extra`; with no system roots to be found (a bare container),
/// against `extra` alone.
fn client_config(extra: &[CertificateDer<'static>]) -> ClientConfig {
    let provider = crypto_provider();
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("the default provider supports the default protocol versions");
    let mut config = match rustls_platform_verifier::Verifier::new_with_extra_roots(
        extra.iter().cloned(),
        provider,
    ) {
        Ok(verifier) => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth(),
        Err(_) => {
            let mut roots = rustls::RootCertStore::empty();
            roots.add_parsable_certificates(extra.iter().cloned());
            builder.with_root_certificates(roots).with_no_client_auth()
        }
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_certificate_that_is_not_one_is_refused_with_the_file_named() {
        let e = Trust::system().with_ca_pem(b"hello").unwrap_err();
        assert_eq!(e.code, "invalid-ca-cert");
        assert!(e.message.contains("no PEM certificate"), "{e}");
        let dir = std::env::temp_dir().join(format!("burrow-ca-{}", std::process::id()));
        let e = Trust::system().with_ca_file(&dir).unwrap_err();
        assert_eq!(e.code, "invalid-ca-cert");
        assert!(e.message.contains(&dir.display().to_string()), "{e}");
    }
}
