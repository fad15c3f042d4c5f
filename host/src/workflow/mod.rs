//! Durable workflows: the host drives each instance's workflow until it
//! completes, replaying it from the start after every wait, wake or
//! restart (see `background::drivers`). This module names what the public
//! API shows of them.

pub use crate::inspect::WorkflowView;
pub use crate::storage::{EntryKind, EntryStatus, HistoryEntry, WorkflowRecord, WorkflowStatus};
