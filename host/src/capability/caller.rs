//! `burrow:actor/caller`: who made the running call.
//!
//! The cell sets the caller for an action and for the connect hook;
//! everything else runs with `host`. A workflow's orchestration code and
//! its steps always read `host`, so a replay reads what the first run read.

use crate::bindings::caller::{ActorRef, Caller as WitCaller, Host, Identity, Role as WitRole};
use crate::caller::{Caller, Role};
use crate::instance::{InstanceState, Mode};

impl Host for InstanceState {
    fn who(&mut self) -> wasmtime::Result<WitCaller> {
        if matches!(self.mode(), Mode::Orchestration | Mode::Step) {
            return Ok(WitCaller::Host);
        }
        Ok(match self.caller() {
            Caller::Client(identity) => {
                WitCaller::Client(identity.as_ref().map(|identity| Identity {
                    name: identity.name.clone(),
                    role: match identity.role {
                        Role::Admin => WitRole::Admin,
                        Role::Client => WitRole::Client,
                    },
                }))
            }
            Caller::Actor { actor, key } => WitCaller::Actor(ActorRef {
                actor: actor.clone(),
                key: key.clone(),
            }),
            Caller::Schedule => WitCaller::Schedule,
            Caller::Host => WitCaller::Host,
        })
    }
}
