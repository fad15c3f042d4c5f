//! A client of a server: what a command that talks to one (`--url`)
//! trusts for `https://` servers.

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

/// A client of the server at `url` that trusts what [`trust`] says.
pub(super) fn client(url: &str, ca_cert: Option<&Path>) -> Result<Client, Failure> {
    Ok(Client::with_trust(url, trust(ca_cert)?))
}
