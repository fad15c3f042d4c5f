//! Calls into the guest: actions, lifecycle and connection hooks, due
//! schedules, and the deadline and trap handling around each one.

use std::time::Duration;

use wasmtime::{Store, Trap};

use crate::address::Address;
use crate::bindings::Exports;
use crate::bindings::types::{ActionError, Failure};
use crate::caller::{Caller, InternalActions};
use crate::clock::now_ms;
use crate::config::MAX_RESULT_BYTES;
use crate::deadline::DeadlineExceeded;
use crate::error::Error;
use crate::instance::output::failure_text;
use crate::instance::{ConflictTrap, InstanceState, Mode};
use crate::storage::{HostTables, Mark};
use crate::text::escaped;

use super::{Cell, storage_error};

impl Cell {
    /// Runs the action `name` with JSON `args` for `caller` in one
    /// transaction; `chain` holds the instances waiting on this call
    /// (empty for a call from outside).
    pub(crate) async fn action(
        &mut self,
        name: &str,
        args: &str,
        chain: &[Address],
        caller: &Caller,
    ) -> Result<String, Error> {
        self.begin()?;
        self.store.data_mut().set_chain(chain);
        let result = self.run_action(name, args, caller).await;
        self.store.data_mut().clear_chain();
        self.finish(result)
    }

    /// Runs up to `limit` due schedules, each in one transaction with the
    /// deletion of its schedule (or, for a recurring one, the move to its
    /// next time), then sets the instance's schedule mark from what is
    /// left (none while it is paused). A schedule whose action fails is
    /// deleted (or moved) too, and its error logged: it ran once. Returns
    /// whether more may be due.
    pub(crate) async fn run_due_schedules(&mut self, limit: usize) -> Result<bool, Error> {
        // Commit the start's transaction (migrate, wake) first, if the
        // instance just woke.
        if self.starting.is_some() {
            self.begin()?;
            self.finish(Ok(()))?;
        }
        // A paused instance's schedules wait for its resume, which notes
        // them again: its mark is left empty meanwhile.
        let paused = self.is_paused()?;
        let mut ran = 0;
        while !paused && ran < limit && !self.is_broken() {
            let due = self
                .db()
                .conn
                .schedules()
                .next_due(now_ms())
                .map_err(|e| self.storage_error(e))?;
            let Some(schedule) = due else { break };
            ran += 1;
            self.begin()?;
            let mut result = self
                .run_action(&schedule.action, &schedule.args, &Caller::Schedule)
                .await
                .map(drop);
            if result.is_ok() {
                result = self
                    .db()
                    .conn
                    .schedules()
                    .done(&schedule, now_ms())
                    .map_err(|e| self.storage_error(e));
            }
            match self.finish(result) {
                Ok(()) => self.metrics().schedule_ran(Ok(())),
                // Not a run: it runs again.
                Err(e @ Error::Conflict { .. }) => return Err(e),
                Err(e) => {
                    self.metrics().schedule_ran(Err(&e));
                    tracing::warn!(
                        actor = &*self.name().actor,
                        key = &*self.name().key,
                        schedule = schedule.id,
                        action = %failure_text(&schedule.action),
                        error = %escaped(&e),
                        "a scheduled action failed; it is not run again (a recurring one runs at its next time)"
                    );
                    let now = now_ms();
                    self.host_transaction(|db| db.conn.schedules().done(&schedule, now))?;
                }
            }
        }
        let name = self.name().clone();
        let conn = &self.store.data().db().conn;
        let mark = self
            .marks
            .set_mark_from(Mark::Schedule, &name.actor, &name.key, || {
                if conn.pause().is_paused()? {
                    return Ok(None);
                }
                conn.schedules().earliest()
            })
            .map_err(|e| Error::storage(&name.actor, &name.key, e.to_string()))?
            .map_err(|e| storage_error(&name, e))?;
        Ok(ran == limit && mark.is_some_and(|at| at <= now_ms()))
    }

    /// Runs the connect hook for connection `id` of `caller` with `params`
    /// (JSON) in one transaction. An actor without the hook accepts every
    /// connection.
    pub(crate) async fn connect(
        &mut self,
        id: u64,
        params: &str,
        caller: &Caller,
    ) -> Result<(), Error> {
        self.begin()?;
        self.store.data_mut().set_caller(caller.clone());
        let result = self.connection_hook("connect", id, params).await;
        self.store.data_mut().set_caller(Caller::Host);
        self.finish(result)
    }

    /// Runs the disconnect hook for connection `id` in one transaction.
    pub(crate) async fn disconnect(&mut self, id: u64) -> Result<(), Error> {
        self.begin()?;
        let result = self.connection_hook("disconnect", id, "").await;
        self.finish(result)
    }

    pub(super) async fn connection_hook(
        &mut self,
        hook: &'static str,
        id: u64,
        params: &str,
    ) -> Result<(), Error> {
        if self.exports.connections.is_none() {
            return Ok(());
        }
        let outcome = self
            .call(
                Mode::Hook(hook),
                &format!("hook {hook}"),
                async |exports, store| {
                    let connections = exports.connections.as_ref().expect("checked above");
                    match hook {
                        "connect" => connections.call_on_connect(store, id, params).await,
                        _ => connections.call_on_disconnect(store, id).await,
                    }
                },
            )
            .await?;
        match (hook, outcome) {
            (_, Ok(())) => Ok(()),
            ("connect", Err(Failure { code, message })) => Err(Error::ConnectionRefused {
                actor: self.name().actor.to_string(),
                key: self.name().key.to_string(),
                code: failure_text(&code),
                message: failure_text(&message),
            }),
            (_, Err(failure)) => self.hook_outcome(hook, Err(failure)),
        }
    }

    /// Runs the action `name` for `caller`, unless it is internal and
    /// `caller` may not run it: then it is refused as an unknown action,
    /// before any guest code runs.
    pub(super) async fn run_action(
        &mut self,
        name: &str,
        args: &str,
        caller: &Caller,
    ) -> Result<String, Error> {
        let actor = self.name().actor.clone();
        if !caller.may_run_internal(&actor, false)
            && self.internal_actions().await?.refuses(name, caller, &actor)
        {
            return Err(Error::UnknownAction {
                actor: actor.to_string(),
                action: failure_text(name),
            });
        }
        // A scheduled action's name is guest text: `failed` and
        // `trap_error` clean it, on the failure path only.
        let during = ActionDuring(name);
        self.store.data_mut().set_caller(caller.clone());
        let outcome = self
            .call(Mode::Action, during, async |exports, store| {
                exports.guest.call_action(store, name, args).await
            })
            .await;
        self.store.data_mut().set_caller(Caller::Host);
        let outcome = outcome?;
        let fail = |code: &str, message: String| self.failed(&during.to_string(), code, message);
        match outcome {
            Ok(result) if result.len() > MAX_RESULT_BYTES => Err(fail(
                "limit-exceeded",
                format!(
                    "the result is {} bytes; the limit is {MAX_RESULT_BYTES} bytes",
                    result.len()
                ),
            )),
            Ok(result) => Ok(result),
            Err(ActionError::UnknownAction(action)) => Err(Error::UnknownAction {
                actor: self.name().actor.to_string(),
                action: failure_text(&action),
            }),
            Err(ActionError::InvalidArguments(message)) => Err(Error::InvalidArguments {
                actor: self.name().actor.to_string(),
                action: failure_text(name),
                message: failure_text(&message),
            }),
            Err(ActionError::Failed(Failure { code, message })) => Err(fail(&code, message)),
        }
    }

    /// The actor's internal actions, read from the component's `access`
    /// export the first time a caller needs them, then kept with the cell.
    async fn internal_actions(&mut self) -> Result<&InternalActions, Error> {
        if self.internal.is_none() {
            let internal = match self.exports.access.is_some() {
                false => InternalActions::default(),
                true => {
                    let declared = self
                        .call(
                            Mode::Hook("access"),
                            "access internal",
                            async |exports, store| {
                                let access = exports.access.as_ref().expect("checked above");
                                access.call_internal(store).await
                            },
                        )
                        .await?;
                    InternalActions {
                        names: declared.names,
                        from_actors: declared.from_actors,
                    }
                }
            };
            self.internal = Some(internal);
        }
        Ok(self.internal.as_ref().expect("just read"))
    }

    pub(super) async fn hook(&mut self, hook: &'static str) -> Result<(), Error> {
        let outcome = self
            .call(
                Mode::Hook(hook),
                &format!("hook {hook}"),
                async |exports, store| {
                    let guest = &exports.guest;
                    match hook {
                        "migrate" => guest.call_migrate(store).await,
                        "wake" => guest.call_wake(store).await,
                        "sleep" => guest.call_sleep(store).await,
                        "destroy" => guest.call_destroy(store).await,
                        other => unreachable!("no hook named {other}"),
                    }
                },
            )
            .await?;
        self.hook_outcome(hook, outcome)
    }

    pub(super) async fn create_hook(&mut self, input: &str) -> Result<(), Error> {
        let outcome = self
            .call(
                Mode::Hook("create"),
                "hook create",
                async |exports, store| exports.guest.call_create(store, input).await,
            )
            .await?;
        self.hook_outcome("create", outcome)
    }

    pub(super) fn hook_outcome(
        &self,
        hook: &str,
        outcome: Result<(), Failure>,
    ) -> Result<(), Error> {
        outcome.map_err(|Failure { code, message }| {
            self.failed(&format!("hook {hook}"), &code, message)
        })
    }

    /// Calls into the guest under the call deadline, in `mode`.
    pub(super) async fn call<R>(
        &mut self,
        mode: Mode,
        during: impl std::fmt::Display,
        f: impl AsyncFnOnce(&Exports, &mut Store<InstanceState>) -> wasmtime::Result<R>,
    ) -> Result<R, Error> {
        self.store.data_mut().set_mode(mode);
        self.store.data().deadline().start(self.call_timeout);
        self.store.set_epoch_deadline(1);
        self.in_call = true;
        // The epoch deadline stops guest code; this also stops a guest that
        // waits in a host call (a WASI sleep, say) past its deadline.
        let deadline = self.store.data().deadline().clone();
        // The call first: a call that ends at its first poll, the common
        // case, never sets the timer.
        let result = tokio::select! {
            biased;
            result = f(&self.exports, &mut self.store) => result,
            _ = deadline.overdue(GRACE_AFTER_DEADLINE) => Err(DeadlineExceeded.into()),
        };
        self.in_call = false;
        self.store.data().deadline().clear();
        self.store.data_mut().set_mode(Mode::Idle);
        result.map_err(|e| {
            self.broken = true;
            trap_error(self.name(), &during.to_string(), self.call_timeout, e)
        })
    }
}

/// What a call of an action is doing, as its errors name it (`action
/// NAME`): written out only when there is an error.
#[derive(Clone, Copy)]
struct ActionDuring<'a>(&'a str);

impl std::fmt::Display for ActionDuring<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "action {}", self.0)
    }
}

/// How long past its deadline a call may wait in a host call before it is
/// abandoned.
const GRACE_AFTER_DEADLINE: Duration = Duration::from_millis(100);

pub(super) fn trap_error(
    name: &Address,
    during: &str,
    timeout: Duration,
    e: wasmtime::Error,
) -> Error {
    if e.downcast_ref::<ConflictTrap>().is_some() {
        return Error::conflict(&name.actor, &name.key);
    }
    let timed_out = e.downcast_ref::<DeadlineExceeded>().is_some()
        || matches!(e.downcast_ref::<Trap>(), Some(Trap::Interrupt));
    if timed_out {
        Error::Timeout {
            actor: name.actor.to_string(),
            key: name.key.to_string(),
            during: failure_text(during),
            timeout_ms: timeout.as_millis(),
        }
    } else {
        // The trap's text holds guest names (its backtrace's functions).
        Error::Trapped {
            actor: name.actor.to_string(),
            key: name.key.to_string(),
            during: failure_text(during),
            message: failure_text(&format!("{e:?}")),
        }
    }
}
