//! Who makes a call: a client (with the identity its API token proves, if
//! the server checks tokens), guest code of an instance, one of the
//! instance's own schedules, or the host itself.
//!
//! The caller decides whether an internal action may run (see
//! `cell/calls.rs`), and guest code reads it with `burrow:actor/caller`.
//! As JSON (serde), a caller is `{"client": null}`, `{"client": {"name":
//! "ann", "role": "client"}}`, `{"actor": {"actor": "a", "key": "k"}}`,
//! `"schedule"` or `"host"`.

use serde::{Deserialize, Serialize};

use crate::address::Address;

/// The role of an API token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Everything: inspect, destroy, queue operations, deploys.
    Admin,
    /// Calls, sends and connections.
    Client,
}

/// A verified identity: the name and role of the API token a request
/// carried.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Identity {
    /// The token's name.
    pub name: String,
    /// The token's role.
    pub role: Role,
}

/// Who makes a call.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Caller {
    /// A client of the HTTP API or the embedding program, with its
    /// verified identity; `None` when the server checks no tokens.
    Client(Option<Identity>),
    /// Guest code of an instance (another one, or one of the same actor).
    Actor {
        /// The calling instance's actor.
        actor: String,
        /// The calling instance's key.
        key: String,
    },
    /// One of the instance's own schedules.
    Schedule,
    /// Nobody: the host runs a hook (other than connect), a queue event or
    /// a workflow.
    Host,
}

impl Caller {
    /// Guest code of the instance at `address`.
    pub(crate) fn actor(address: &Address) -> Caller {
        Caller::Actor {
            actor: address.actor.to_string(),
            key: address.key.to_string(),
        }
    }

    /// Whether this caller may run an internal action of `actor`: its
    /// schedules, the host and the actor's own code always may; other
    /// actors when `from_actors`; clients never.
    pub(crate) fn may_run_internal(&self, actor: &str, from_actors: bool) -> bool {
        match self {
            Caller::Client(_) => false,
            Caller::Actor { actor: caller, .. } => from_actors || caller == actor,
            Caller::Schedule | Caller::Host => true,
        }
    }
}

/// The actions of an actor that clients may not call, as its component
/// declares them (`burrow:actor/access`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct InternalActions {
    /// The internal actions' names.
    pub(crate) names: Vec<String>,
    /// Whether other actors may call them.
    pub(crate) from_actors: bool,
}

impl InternalActions {
    /// Whether `caller` may not run `action` of `actor`.
    pub(crate) fn refuses(&self, action: &str, caller: &Caller, actor: &str) -> bool {
        self.names.iter().any(|name| name == action)
            && !caller.may_run_internal(actor, self.from_actors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callers_are_json_as_documented() {
        let ann = Identity {
            name: "ann".into(),
            role: Role::Client,
        };
        let cases = [
            (Caller::Client(None), r#"{"client":null}"#),
            (
                Caller::Client(Some(ann)),
                r#"{"client":{"name":"ann","role":"client"}}"#,
            ),
            (
                Caller::Actor {
                    actor: "a".into(),
                    key: "k".into(),
                },
                r#"{"actor":{"actor":"a","key":"k"}}"#,
            ),
            (Caller::Schedule, r#""schedule""#),
            (Caller::Host, r#""host""#),
        ];
        for (caller, text) in cases {
            assert_eq!(serde_json::to_string(&caller).unwrap(), text);
            assert_eq!(serde_json::from_str::<Caller>(text).unwrap(), caller);
        }
    }

    #[test]
    fn internal_actions_are_refused_to_clients_and_maybe_to_other_actors() {
        let internal = |from_actors| InternalActions {
            names: vec!["fire".into()],
            from_actors,
        };
        let other = Caller::Actor {
            actor: "b".into(),
            key: "1".into(),
        };
        let same = Caller::Actor {
            actor: "a".into(),
            key: "2".into(),
        };
        let admin = Caller::Client(Some(Identity {
            name: "root".into(),
            role: Role::Admin,
        }));
        for from_actors in [true, false] {
            let internal = internal(from_actors);
            assert!(internal.refuses("fire", &Caller::Client(None), "a"));
            assert!(internal.refuses("fire", &admin, "a"));
            assert!(!internal.refuses("remind", &Caller::Client(None), "a"));
            assert!(!internal.refuses("fire", &same, "a"));
            assert!(!internal.refuses("fire", &Caller::Schedule, "a"));
            assert!(!internal.refuses("fire", &Caller::Host, "a"));
            assert_eq!(internal.refuses("fire", &other, "a"), !from_actors);
        }
        assert!(!InternalActions::default().refuses("fire", &Caller::Client(None), "a"));
    }
}
