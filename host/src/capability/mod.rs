//! The host side of each WIT interface, one module per capability, and the
//! linker that offers them (with WASI) to every component.

pub(crate) mod actors;
pub(crate) mod caller;
pub(crate) mod db;
pub(crate) mod determinism;
pub(crate) mod events;
pub(crate) mod http;
pub(crate) mod log;
pub(crate) mod queue;
pub(crate) mod schedule;
#[cfg(test)]
mod schema_guard_tests;
pub(crate) mod state;
pub(crate) mod workflow;

use wasmtime::Engine;
use wasmtime::component::{HasSelf, Linker};

use crate::bindings;
use crate::instance::{InstanceState, Refusal};

impl bindings::types::Host for InstanceState {}

/// A refusal of the instance's mode, as each interface's error type says
/// it: every one of them has `not-allowed` and `not-in-step`.
macro_rules! refusals_as {
    ($($error:ty),* $(,)?) => {$(
        impl From<Refusal> for $error {
            fn from(refusal: Refusal) -> Self {
                match refusal {
                    Refusal::NotAllowed(why) => <$error>::NotAllowed(why),
                    Refusal::NotInStep(why) => <$error>::NotInStep(why),
                }
            }
        }
    )*};
}

refusals_as!(
    bindings::actors::CallError,
    bindings::db::DbError,
    bindings::events::EventError,
    bindings::queue::QueueError,
    bindings::schedule::ScheduleError,
    bindings::state::StateError,
);

/// The linker every actor is instantiated through: WASI (without ambient
/// authority, see [`InstanceState::new`]), `wasi:http` (outgoing requests
/// only where an actor's manifest allows them, see `http`) and Burrow's
/// imports.
pub(crate) fn linker(engine: &Engine) -> wasmtime::Result<Linker<InstanceState>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    determinism::shadow_wasi(&mut linker)?;
    http::add_to_linker(&mut linker)?;
    bindings::FullActor::add_to_linker::<InstanceState, HasSelf<InstanceState>>(
        &mut linker,
        |s| s,
    )?;
    Ok(linker)
}
