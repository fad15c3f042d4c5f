//! Who made the current call, and the actions only the actor's own code
//! (and, if it allows, other actors) may call.
//!
//! ```no_run
//! use burrow_sdk::{Caller, Error, Result};
//!
//! fn reset() -> Result<()> {
//!     match burrow_sdk::caller() {
//!         Caller::Client(Some(identity)) if identity.name == "operator" => Ok(()),
//!         _ => Err(Error::new("forbidden", "only the operator may reset")),
//!     }
//! }
//!
//! fn fire() -> Result<()> {
//!     Ok(())
//! }
//!
//! burrow_sdk::actor! {
//!     actions: [reset, fire],
//!     internal: [fire],
//! }
//! ```

use serde::{Deserialize, Serialize};

use crate::wit::burrow::actor::caller as wit;

/// The role of an API token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Everything: inspection, destroy, queue operations, deploys.
    Admin,
    /// Calls, sends and connections.
    Client,
}

/// A verified identity: the name and role of the API token a client's
/// request carried.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Identity {
    /// The token's name.
    pub name: String,
    /// The token's role.
    pub role: Role,
}

/// Who made the current call. As JSON (serde): `{"client": null}`,
/// `{"client": {"name": .., "role": ..}}`, `{"actor": {"actor": ..,
/// "key": ..}}`, `"schedule"` or `"host"`, as the host writes it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Caller {
    /// A client of the HTTP API or of the program that embeds the host,
    /// with its verified identity; `None` when the server checks no tokens.
    Client(Option<Identity>),
    /// Guest code of an instance: another actor's, or another instance of
    /// this actor.
    Actor {
        /// The calling instance's actor.
        actor: String,
        /// The calling instance's key.
        key: String,
    },
    /// One of this instance's own schedules.
    Schedule,
    /// Nobody: a hook other than `connect`, a queue event, a workflow (its
    /// orchestration code and its steps).
    Host,
}

/// Who made the running call: in an action, whoever called it; in the
/// `connect` hook, the connecting client; everywhere else
/// [`Caller::Host`].
pub fn caller() -> Caller {
    match wit::who() {
        wit::Caller::Client(identity) => Caller::Client(identity.map(|identity| Identity {
            name: identity.name,
            role: match identity.role {
                wit::Role::Admin => Role::Admin,
                wit::Role::Client => Role::Client,
            },
        })),
        wit::Caller::Actor(address) => Caller::Actor {
            actor: address.actor,
            key: address.key,
        },
        wit::Caller::Schedule => Caller::Schedule,
        wit::Caller::Host => Caller::Host,
    }
}
