//! A client for the HTTP API, used by the CLI and the tests: the
//! `burrow-client` crate ([`Client`], typed [`Instance`] handles and
//! [`Subscription`]s to an instance's events), re-exported.

pub use burrow_client::*;
