//! A new instance made from a copy of a database (`burrow import`, and
//! `burrow fork`): the copy goes into the creation's transaction instead
//! of the `create` hook, and the work it holds (queue events, schedules, a
//! workflow that has not ended) is noted as that transaction's effects, so
//! that its commit sets the instance's marks and the host takes the work
//! up as after any commit. A fork is made paused instead (`pause.rs`):
//! nothing of its work is noted until it is resumed.

use crate::error::Error;
use crate::storage::{HostTables, open_image};

use super::Cell;

impl Cell {
    /// Copies the database `image` into the open creation transaction;
    /// pauses the new instance's background work with the reason `pause`,
    /// if given.
    pub(super) fn import(
        &mut self,
        image: &[u8],
        pause: Option<&str>,
        now: i64,
    ) -> Result<(), Error> {
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
        if let Some(reason) = pause {
            (self.db().conn.pause().pause(now, reason)).map_err(|e| self.storage_error(e))?;
        }
        self.note_background_work(now)
    }
}
