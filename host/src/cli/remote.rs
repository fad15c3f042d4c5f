//! A client of a server: what a command that talks to one (`--url`)
//! trusts for `https://` servers, and the API token it sends.

use std::path::Path;

use burrow_client::{Client, Trust};

use super::output::Failure;

/// The system's roots and the CA certificate of `--ca-cert` (or
/// `BURROW_CA_CERT`), if given.
pub(super) fn trust(ca_cert: Option<&Path>) -> Result<Trust, Failure> {
    Ok(match ca_cert {
        Some(path) => Trust::system().with_ca_file(path)?,
        None => Trust::system(),
    })
}

/// How a command talks to a server: `--ca-cert` and `--token`.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Remote<'a> {
    /// A CA certificate to trust besides the system's roots.
    pub(super) ca_cert: Option<&'a Path>,
    /// The API token to send.
    pub(super) token: Option<&'a str>,
}

/// A client of the server at `url` that trusts what [`trust`] says and
/// sends the token, as `remote` says.
pub(super) fn client(url: &str, remote: Remote<'_>) -> Result<Client, Failure> {
    let client = Client::with_trust(url, trust(remote.ca_cert)?);
    Ok(match remote.token {
        Some(token) => client.with_token(token),
        None => client,
    })
}
