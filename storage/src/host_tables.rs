//! The host's tables in an instance's database, as the layers above reach
//! them.
//!
//! Any connection to an instance's database (its own, inside a transaction
//! or not, or a read-only one of `inspect`) gives the statements on each of
//! the host's tables: `conn.queue()`, `conn.workflow()` and
//! `conn.schedules()`, `conn.pause()`. The tables themselves, their schemas and their SQL
//! stay in `queue`, `workflow`, `schedule` and `pause`, private to storage.

use rusqlite::Connection;

use super::pause::PauseTable;
use super::queue::QueueTables;
use super::schedule::ScheduleTable;
use super::workflow::WorkflowTables;

/// The host's tables, through a connection to an instance's database.
pub trait HostTables {
    /// The queue's events, dead letters and policy.
    fn queue(&self) -> QueueTables<'_>;
    /// The workflow's record, history and the requests of its steps.
    fn workflow(&self) -> WorkflowTables<'_>;
    /// The pending schedules.
    fn schedules(&self) -> ScheduleTable<'_>;
    /// Whether the instance's background work is paused.
    fn pause(&self) -> PauseTable<'_>;
}

impl HostTables for Connection {
    fn queue(&self) -> QueueTables<'_> {
        QueueTables::of(self)
    }

    fn workflow(&self) -> WorkflowTables<'_> {
        WorkflowTables::of(self)
    }

    fn schedules(&self) -> ScheduleTable<'_> {
        ScheduleTable::of(self)
    }

    fn pause(&self) -> PauseTable<'_> {
        PauseTable::of(self)
    }
}
