//! `burrow:actor/actors`: calls and sends to other actor instances.
//!
//! The caller's call waits while the other instance runs (the caller keeps
//! its own instance, as every call does). A call chain that comes back to
//! an instance waiting on it would wait for itself, so it is refused:
//! every call carries the instances it passed through. The wait is bounded
//! by the caller's deadline, which also ends waits that no chain shows
//! (A's action calls B while B's queue processing calls A).

use crate::address::Address;
use crate::bindings::actors::{CallError, Host, SendOptions};
use crate::bindings::types::Failure;
use crate::config::MAX_CALL_DEPTH;
use crate::error::Error;
use crate::instance::InstanceState;

impl InstanceState {
    /// The chain a call from this instance to (`actor`, `key`) would make,
    /// or why it may not be made.
    fn chain_to(&self, call: &str, actor: &str, key: &str) -> Result<Vec<Address>, CallError> {
        self.check_write(call)?;
        let mut chain = self.chain().to_vec();
        chain.push(self.name().clone());
        if chain.iter().any(|n| &*n.actor == actor && &*n.key == key) {
            let path: Vec<String> = chain.iter().map(ToString::to_string).collect();
            return Err(CallError::Cycle(format!(
                "{call} to {actor}/{key} would wait for an instance that waits for this call: {} -> {actor}/{key}",
                path.join(" -> ")
            )));
        }
        if chain.len() >= MAX_CALL_DEPTH {
            return Err(CallError::Unavailable(Failure {
                code: "too-deep".into(),
                message: format!(
                    "{call}: the chain of calls between actors is {} instances deep; the limit is {MAX_CALL_DEPTH}",
                    chain.len()
                ),
            }));
        }
        Ok(chain)
    }

    /// How long the caller may wait, and the error it gets when that is over.
    fn wait_budget(&self, call: &str, actor: &str, key: &str) -> (std::time::Duration, CallError) {
        let budget = self.deadline().remaining().unwrap_or(self.call_timeout());
        let error = CallError::Unavailable(Failure {
            code: "timeout".into(),
            message: format!(
                "{call}: {actor}/{key} did not answer within the caller's deadline ({} ms were left)",
                budget.as_millis()
            ),
        });
        (budget, error)
    }
}

/// What the guest hears of a failed call.
fn call_error(e: Error) -> CallError {
    match e {
        Error::Failed { code, message, .. } => CallError::Failed(Failure { code, message }),
        Error::UnknownActor(_)
        | Error::UnknownAction { .. }
        | Error::InvalidArguments { .. }
        | Error::InvalidAddress(_)
        | Error::NoQueue(_)
        | Error::InvalidEvent { .. }
        | Error::PayloadTooLarge { .. } => CallError::Invalid(e.to_string()),
        other => CallError::Unavailable(Failure {
            code: other.code().into(),
            message: other.to_string(),
        }),
    }
}

impl Host for InstanceState {
    async fn call(
        &mut self,
        actor: String,
        key: String,
        action: String,
        args: String,
    ) -> wasmtime::Result<Result<String, CallError>> {
        let chain = match self.chain_to("actors.call", &actor, &key) {
            Ok(chain) => chain,
            Err(e) => return Ok(Err(e)),
        };
        let Some(outside) = self.outside().cloned() else {
            return Ok(Err(CallError::NotAllowed(
                "actors.call: the host is shutting down".into(),
            )));
        };
        self.check_reaching_outside("actors.call")?;
        let (budget, timed_out) = self.wait_budget("actors.call", &actor, &key);
        self.note_reached_outside();
        let call = outside.call(chain, &actor, &key, &action, &args);
        Ok(match tokio::time::timeout(budget, call).await {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(e)) => Err(call_error(e)),
            Err(_) => Err(timed_out),
        })
    }

    async fn send(
        &mut self,
        actor: String,
        key: String,
        event_type: String,
        payload: String,
        options: SendOptions,
    ) -> wasmtime::Result<Result<u64, CallError>> {
        if let Err(e) = self.chain_to("actors.send", &actor, &key) {
            return Ok(Err(e));
        }
        let Some(outside) = self.outside().cloned() else {
            return Ok(Err(CallError::NotAllowed(
                "actors.send: the host is shutting down".into(),
            )));
        };
        self.check_reaching_outside("actors.send")?;
        let (budget, timed_out) = self.wait_budget("actors.send", &actor, &key);
        self.note_reached_outside();
        let send = outside.send(
            &actor,
            &key,
            &event_type,
            &payload,
            options.priority,
            options.group,
        );
        Ok(match tokio::time::timeout(budget, send).await {
            Ok(Ok(id)) => Ok(id as u64),
            Ok(Err(e)) => Err(call_error(e)),
            Err(_) => Err(timed_out),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::instance::Mode;
    use crate::instance::testing::instance;

    #[test]
    fn chains_that_come_back_or_run_too_deep_are_refused() {
        let (mut state, _dir) = instance();
        let name = |actor: &str, key: &str| Address {
            actor: actor.into(),
            key: key.into(),
        };
        state.set_chain(&[name("a", "1"), name("b", "2")]);
        let chain = state.chain_to("actors.call", "c", "3").unwrap();
        assert_eq!(chain.len(), 3);
        let Err(CallError::Cycle(m)) = state.chain_to("actors.call", "a", "1") else {
            panic!()
        };
        assert_eq!(
            m,
            "actors.call to a/1 would wait for an instance that waits for this call: \
             a/1 -> b/2 -> actor/key -> a/1"
        );
        assert!(matches!(
            state.chain_to("actors.send", "actor", "key"),
            Err(CallError::Cycle(_))
        ));
        let deep: Vec<Address> = (0..MAX_CALL_DEPTH - 1)
            .map(|i| name("a", &i.to_string()))
            .collect();
        state.set_chain(&deep);
        let Err(CallError::Unavailable(f)) = state.chain_to("actors.call", "z", "z") else {
            panic!()
        };
        assert_eq!(f.code, "too-deep");
        state.clear_chain();
        state.set_mode(Mode::Orchestration);
        assert!(matches!(
            state.chain_to("actors.call", "z", "z"),
            Err(CallError::NotInStep(m)) if m.contains("actors.call")
        ));
        state.set_mode(Mode::Select);
        assert!(matches!(
            state.chain_to("actors.send", "z", "z"),
            Err(CallError::NotAllowed(_))
        ));
    }
}
