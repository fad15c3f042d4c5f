//! The workflow view of an instance, read without waking it.

use crate::error::Error;
use crate::inspect::WorkflowView;
use crate::storage::WorkflowRecord;

use super::Host;

impl Host {
    /// The workflow of (`actor`, `key`) and its history, read from a
    /// separate read-only connection (the instance is not woken).
    pub fn workflow(&self, actor: &str, key: &str) -> Result<WorkflowView, Error> {
        self.core.listed(actor, key)?;
        crate::inspect::workflow_view(self.data_dir(), actor, key)?
            .ok_or_else(|| Error::NoWorkflow(actor.into()))
    }

    /// The workflow's record of (`actor`, `key`) alone: its status, output
    /// and error, without the history [`Host::workflow`] reads. For one
    /// who waits for a workflow to end.
    pub fn workflow_record(&self, actor: &str, key: &str) -> Result<WorkflowRecord, Error> {
        self.core.listed(actor, key)?;
        crate::inspect::workflow_record(self.data_dir(), actor, key)?
            .ok_or_else(|| Error::NoWorkflow(actor.into()))
    }
}
