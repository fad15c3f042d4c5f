//! Host bindings of the `burrow:actor` WIT package. Private: the rest of
//! the host uses the hand-written types around them.
//!
//! The bindings are generated for the largest world, `full-actor`, so the
//! linker offers every import. Exports are looked up one interface at a
//! time: `guest` is required; `processor`, `workflow-runner`,
//! `connections`, `access` and `wasi:http/incoming-handler` are optional
//! (a plain `actor` component exports none).

use wasmtime::component::{Instance, InstancePre};
use wasmtime::{AsContextMut, Result};

wasmtime::component::bindgen!({
    path: "../wit",
    world: "burrow:actor/full-actor",
    // Imports may trap: a storage failure or a passed deadline is not an
    // error the guest can handle. Calls to other actors wait for them.
    imports: {
        "burrow:actor/actors.call": async | trappable,
        "burrow:actor/actors.send": async | trappable,
        default: trappable,
    },
    exports: { default: async },
});

pub(crate) use self::burrow::actor::{
    actors, caller, db, events, log, queue, schedule, state, types, workflow,
};
pub(crate) use self::exports::burrow::actor::{
    access, connections, guest, processor, workflow_runner,
};
pub(crate) use wasmtime_wasi_http::p2::bindings::exports::wasi::http::incoming_handler;

/// Where a component's exports are, found once per component.
pub(crate) struct ExportsPre<T: 'static> {
    pub(crate) instance_pre: InstancePre<T>,
    guest: guest::GuestIndices,
    processor: Option<processor::GuestIndices>,
    runner: Option<workflow_runner::GuestIndices>,
    connections: Option<connections::GuestIndices>,
    access: Option<access::GuestIndices>,
    incoming: Option<incoming_handler::GuestIndices>,
}

impl<T: 'static> Clone for ExportsPre<T> {
    fn clone(&self) -> Self {
        ExportsPre {
            instance_pre: self.instance_pre.clone(),
            guest: self.guest.clone(),
            processor: self.processor.clone(),
            runner: self.runner.clone(),
            connections: self.connections.clone(),
            access: self.access.clone(),
            incoming: self.incoming.clone(),
        }
    }
}

/// The exports of one instantiated component.
pub(crate) struct Exports {
    pub(crate) guest: guest::Guest,
    pub(crate) processor: Option<processor::Guest>,
    pub(crate) runner: Option<workflow_runner::Guest>,
    pub(crate) connections: Option<connections::Guest>,
    pub(crate) access: Option<access::Guest>,
    /// `wasi:http/incoming-handler`: requests to
    /// `/actors/{actor}/{key}/http/...` (see `cell/incoming.rs`).
    pub(crate) incoming: Option<incoming_handler::Guest>,
}

impl<T: Send + 'static> ExportsPre<T> {
    /// Fails if the component does not export `burrow:actor/guest`.
    pub(crate) fn new(instance_pre: InstancePre<T>) -> Result<Self> {
        let guest = guest::GuestIndices::new(&instance_pre)?;
        let processor = processor::GuestIndices::new(&instance_pre).ok();
        let runner = workflow_runner::GuestIndices::new(&instance_pre).ok();
        let connections = connections::GuestIndices::new(&instance_pre).ok();
        let access = access::GuestIndices::new(&instance_pre).ok();
        let incoming = incoming_handler::GuestIndices::new(&instance_pre).ok();
        Ok(ExportsPre {
            instance_pre,
            guest,
            processor,
            runner,
            connections,
            access,
            incoming,
        })
    }

    /// Whether the component exports `burrow:actor/processor`.
    pub(crate) fn has_processor(&self) -> bool {
        self.processor.is_some()
    }

    /// Whether the component exports `burrow:actor/workflow-runner`.
    pub(crate) fn has_runner(&self) -> bool {
        self.runner.is_some()
    }

    /// Whether the component exports `wasi:http/incoming-handler`.
    pub(crate) fn has_incoming_http(&self) -> bool {
        self.incoming.is_some()
    }

    pub(crate) async fn instantiate_async(
        &self,
        mut store: impl AsContextMut<Data = T>,
    ) -> Result<Exports> {
        let instance: Instance = self.instance_pre.instantiate_async(&mut store).await?;
        let guest = self.guest.load(&mut store, &instance)?;
        let processor = match &self.processor {
            Some(indices) => Some(indices.load(&mut store, &instance)?),
            None => None,
        };
        let runner = match &self.runner {
            Some(indices) => Some(indices.load(&mut store, &instance)?),
            None => None,
        };
        let connections = match &self.connections {
            Some(indices) => Some(indices.load(&mut store, &instance)?),
            None => None,
        };
        let access = match &self.access {
            Some(indices) => Some(indices.load(&mut store, &instance)?),
            None => None,
        };
        let incoming = match &self.incoming {
            Some(indices) => Some(indices.load(&mut store, &instance)?),
            None => None,
        };
        Ok(Exports {
            guest,
            processor,
            runner,
            connections,
            access,
            incoming,
        })
    }
}
