//! A new instance made from an exported copy (`burrow import`): the copy
//! goes into the creation's transaction instead of the `create` hook, and
//! the work it holds (queue events, schedules, a workflow that has not
//! ended) is noted as that transaction's effects, so that its commit sets
//! the instance's marks and the host takes the work up as after any
//! commit.

use crate::error::Error;
use crate::storage::{HostTables, open_image};

use super::Cell;

impl Cell {
    /// Copies the database `image` into the open creation transaction.
    pub(super) fn import(&mut self, image: &[u8], now: i64) -> Result<(), Error> {
        let name = self.name().clone();
        let invalid = |reason: String| Error::InvalidExport {
            actor: name.actor.to_string(),
            key: name.key.to_string(),
            reason,
        };
        let source = open_image(image).map_err(invalid)?;
        self.db()
            .import(&source)
            .map_err(|why| invalid(format!("cannot be imported: {why}")))?;
        drop(source);
        let storage = |e| self.storage_error(e);
        let conn = &self.db().conn;
        let appended = conn.queue().pending_count().map_err(storage)? > 0;
        let scheduled = conn.schedules().earliest().map_err(storage)?;
        let running = conn.workflow().has_schema().map_err(storage)?
            && (conn.workflow().record().map_err(storage)?)
                .is_some_and(|record| !record.status.is_final());
        let state = self.store.data_mut();
        if appended {
            state.note_appended();
        }
        if let Some(at) = scheduled {
            state.note_scheduled(at);
        }
        if running {
            state.note_workflow_started(now);
            self.workflow_started = true;
        }
        Ok(())
    }
}
