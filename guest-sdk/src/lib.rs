//! # burrow-sdk
//!
//! Write Burrow actors in Rust. An actor is a WebAssembly component: its
//! actions are plain Rust functions whose arguments and results are serde
//! types, its durable data lives in its own SQLite database ([`db`]) and in
//! one state value ([`state`]), and every action runs in one transaction
//! that the host commits only if the action returns `Ok`. An actor can also
//! process a durable queue ([`queue`]), run a durable workflow
//! ([`workflow`]), schedule its actions for later ([`schedule`]), call other
//! actors ([`actors`]) and send events to connected clients ([`events`]).
//! It can keep actions from clients (`internal` in [`actor!`]) and see who
//! calls ([`caller()`]).
//!
//! # Example
//!
//! The counter from `examples/counter`, built with
//! `cargo build --target wasm32-wasip2 --release` and run by `burrow`:
//!
//! ```no_run
//! use burrow_sdk::{db, Result};
//!
//! fn migrate() -> Result<()> {
//!     db::execute_batch(
//!         "CREATE TABLE IF NOT EXISTS counter (
//!              id INTEGER PRIMARY KEY CHECK (id = 1),
//!              value INTEGER NOT NULL
//!          );
//!          INSERT OR IGNORE INTO counter (id, value) VALUES (1, 0);",
//!     )?;
//!     Ok(())
//! }
//!
//! fn increment(amount: i64) -> Result<i64> {
//!     db::query_one("UPDATE counter SET value = value + ? WHERE id = 1 RETURNING value", [amount])?
//!         .get(0)
//! }
//!
//! fn get() -> Result<i64> {
//!     db::query_one("SELECT value FROM counter WHERE id = 1", ())?.get(0)
//! }
//!
//! burrow_sdk::actor! {
//!     migrate: migrate,
//!     actions: [increment, get],
//! }
//! ```
//!
//! `burrow call counter my-key increment '[5]'` then answers `5`, and
//! the count survives restarts of the host.
#![deny(missing_docs)]

pub mod actors;
mod caller;
pub mod db;
mod dispatch;
mod error;
pub mod events;
pub mod http;
pub mod log;
pub mod queue;
pub mod schedule;
pub mod state;
pub mod workflow;

pub use caller::{Caller, Identity, Role, caller};
pub use error::{Error, Result};
pub use serde_json::Value as Json;

#[doc(hidden)]
pub use dispatch::{__action, __create, __hook, __parse_args, Action};
#[doc(hidden)]
pub use wasip2 as __wasip2;

/// Generated bindings of the `burrow:actor` WIT package. Not a stable API:
/// use the functions of this crate instead.
#[doc(hidden)]
pub mod wit {
    // `wit` is a link to the repository's WIT package, so that the crate,
    // packaged, carries it.
    wit_bindgen::generate!({
        path: "wit",
        world: "burrow:actor/full-actor",
        pub_export_macro: true,
        export_macro_name: "__export_actor",
        default_bindings_module: "burrow_sdk::wit",
    });
}

/// Declares the actor that this component exports.
///
/// Hooks are optional and come in this order: `migrate` (runs at every
/// start, before the others), `create` (once, with the creator's input as
/// its one serde argument), `wake`, `sleep` and `destroy`. Then, for an
/// actor with a queue, `queue: { policy: .., process: .., select: .. }`
/// (see [`queue`]; `select` is for [`queue::Policy::custom`] only); for a
/// workflow actor, `workflow: run` (see [`workflow`]); then the connection
/// hooks `connect` and `disconnect` (see [`events`]). Actions
/// are listed by function name; the name of the function is the name of the
/// action.
///
/// ```no_run
/// fn hello(name: String) -> burrow_sdk::Result<String> {
///     Ok(format!("hello, {name}"))
/// }
/// burrow_sdk::actor! { actions: [hello] }
/// ```
///
/// After the actions, `internal: [..]` names those of them that clients
/// may not call: the host answers a client as if the action did not exist
/// (`unknown-action`), before the actor's code runs. The instance's
/// schedules and the actor's own code (any of its instances) may call
/// them, and so may other actors, unless the list says
/// `internal(from_actors = false): [..]`. [`caller()`] tells an action who
/// called it.
///
/// ```no_run
/// # fn remind(text: String) -> burrow_sdk::Result<u64> { burrow_sdk::schedule::after(1000, "fire", &(text,)) }
/// # fn fire(text: String) -> burrow_sdk::Result<()> { Ok(()) }
/// burrow_sdk::actor! {
///     actions: [remind, fire],
///     internal(from_actors = false): [fire],
/// }
/// ```
#[macro_export]
macro_rules! actor {
    (
        $(migrate: $migrate:path,)?
        $(create: $create:path,)?
        $(wake: $wake:path,)?
        $(sleep: $sleep:path,)?
        $(destroy: $destroy:path,)?
        $(queue: {
            policy: $policy:expr,
            process: $process:path
            $(, select: $select:path)? $(,)?
        },)?
        $(workflow: $workflow:path,)?
        $(connect: $connect:path,)?
        $(disconnect: $disconnect:path,)?
        actions: [$($action:ident),* $(,)?]
        $(, internal $(( from_actors = $from_actors:literal ))? : [$($internal:ident),* $(,)?])?
        $(,)?
    ) => {
        #[doc(hidden)]
        pub struct __BurrowActor;

        #[allow(unreachable_code)]
        impl $crate::wit::exports::burrow::actor::guest::Guest for __BurrowActor {
            fn migrate() -> ::core::result::Result<(), $crate::wit::burrow::actor::types::Failure> {
                $(return $crate::__hook($migrate);)?
                Ok(())
            }
            fn create(input: ::std::string::String) -> ::core::result::Result<(), $crate::wit::burrow::actor::types::Failure> {
                $(return $crate::__create($create, &input);)?
                let _ = input;
                Ok(())
            }
            fn wake() -> ::core::result::Result<(), $crate::wit::burrow::actor::types::Failure> {
                $(return $crate::__hook($wake);)?
                Ok(())
            }
            fn sleep() -> ::core::result::Result<(), $crate::wit::burrow::actor::types::Failure> {
                $(return $crate::__hook($sleep);)?
                Ok(())
            }
            fn destroy() -> ::core::result::Result<(), $crate::wit::burrow::actor::types::Failure> {
                $(return $crate::__hook($destroy);)?
                Ok(())
            }
            fn action(
                name: ::std::string::String,
                args: ::std::string::String,
            ) -> ::core::result::Result<::std::string::String, $crate::wit::burrow::actor::types::ActionError> {
                let args = $crate::__parse_args(&args)?;
                match name.as_str() {
                    $(::core::stringify!($action) => $crate::__action(&$action, args),)*
                    _ => Err($crate::wit::burrow::actor::types::ActionError::UnknownAction(name)),
                }
            }
        }

        #[allow(unreachable_code)]
        impl $crate::wit::exports::burrow::actor::processor::Guest for __BurrowActor {
            fn policy() -> ::core::option::Option<$crate::wit::exports::burrow::actor::processor::QueuePolicy> {
                $(return ::core::option::Option::Some($crate::queue::__policy($policy));)?
                ::core::option::Option::None
            }
            fn process(
                event: $crate::wit::burrow::actor::queue::Event,
            ) -> ::core::result::Result<::std::string::String, $crate::wit::burrow::actor::types::Failure> {
                $(return $crate::queue::__process($process, event);)?
                let _ = event;
                ::core::result::Result::Err($crate::Error::new("no-queue", "this actor has no queue").into())
            }
            fn select(
                pending: ::std::vec::Vec<$crate::wit::burrow::actor::queue::Event>,
            ) -> ::std::vec::Vec<u64> {
                $($(return $crate::queue::__select($select, pending);)?)?
                pending.first().map(|e| e.id).into_iter().collect()
            }
        }

        #[allow(unreachable_code)]
        impl $crate::wit::exports::burrow::actor::workflow_runner::Guest for __BurrowActor {
            fn has_workflow() -> bool {
                $(let _ = $workflow; return true;)?
                false
            }
            fn run(input: ::std::string::String) -> $crate::wit::exports::burrow::actor::workflow_runner::RunOutcome {
                $(return $crate::workflow::__run($workflow, &input);)?
                let _ = input;
                $crate::wit::exports::burrow::actor::workflow_runner::RunOutcome::Failed(
                    $crate::Error::new("no-workflow", "this actor has no workflow").into(),
                )
            }
        }

        #[allow(unreachable_code)]
        impl $crate::wit::exports::burrow::actor::connections::Guest for __BurrowActor {
            fn on_connect(
                id: u64,
                params: ::std::string::String,
            ) -> ::core::result::Result<(), $crate::wit::burrow::actor::types::Failure> {
                $(return $crate::events::__connect($connect, id, &params);)?
                let _ = (id, params);
                Ok(())
            }
            fn on_disconnect(id: u64) -> ::core::result::Result<(), $crate::wit::burrow::actor::types::Failure> {
                $(return $crate::events::__disconnect($disconnect, id);)?
                let _ = id;
                Ok(())
            }
        }

        impl $crate::wit::exports::burrow::actor::access::Guest for __BurrowActor {
            fn internal() -> $crate::wit::exports::burrow::actor::access::InternalActions {
                // `true`, unless the list says `from_actors = false`.
                let from_actors: bool = true $($(&& $from_actors)?)?;
                $crate::wit::exports::burrow::actor::access::InternalActions {
                    names: ::std::vec![$($(::std::string::String::from(::core::stringify!($internal))),*)?],
                    from_actors,
                }
            }
        }

        $crate::wit::__export_actor!(__BurrowActor);
    };
}
