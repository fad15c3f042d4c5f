//! Host bindings of the `burrow:actor` WIT package. Private: the rest of
//! the host uses the hand-written types around them.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "burrow:actor/actor",
    // Imports may trap: a storage failure or a passed deadline is not an
    // error the guest can handle.
    imports: { default: trappable },
    exports: { default: async },
});

pub(crate) use self::burrow::actor::{db, log, state, types};
