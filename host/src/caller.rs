//! Who asks for a call or a connection: a client (with the identity its
//! API token proves, when the server checks tokens), another instance's
//! guest code, one of the instance's own schedules, or nobody.

use serde::{Deserialize, Serialize};

/// What an API token allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Everything: calls, inspection, destruction, queue operations,
    /// deploys, the inspector and the metrics.
    Admin,
    /// Calls, sends and connections (to the actors its token names, if it
    /// names any).
    Client,
}

/// A client's verified identity: the name of the token it presented, and
/// the token's role.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// The token's name (its table in the tokens file), never its secret.
    pub name: String,
    /// What the token allows.
    pub role: Role,
}

/// Who asks for a call or a connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Caller {
    /// A client of the HTTP API or the program embedding the host, with
    /// its identity when the server checks tokens (`None` otherwise).
    Client(Option<Identity>),
    /// Guest code of an instance: another one, or the same one.
    Actor {
        /// The calling instance's actor.
        actor: String,
        /// The calling instance's key.
        key: String,
    },
    /// One of the instance's own schedules.
    Schedule,
    /// Nobody: a hook other than connect, a queue event, a workflow.
    Host,
}
