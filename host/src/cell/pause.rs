//! A paused instance (see `storage`'s `pause`): a fork is made paused, an
//! operator may pause any instance, and `resume` hands its work to the
//! host. While paused, the queue pump picks
//! nothing, schedules do not run and the workflow is not driven; each of
//! them, finding the pause, leaves its mark empty, so that nothing wakes
//! the instance for that work until `resume` notes it again.

use crate::clock::now_ms;
use crate::error::Error;
use crate::storage::HostTables;

use super::Cell;

impl Cell {
    /// Whether the instance's background work is paused, as its open
    /// transaction (or its last commit) says.
    pub(crate) fn is_paused(&self) -> Result<bool, Error> {
        (self.db().conn.pause().is_paused()).map_err(|e| self.storage_error(e))
    }

    /// Pauses the instance's background work, in one transaction, with
    /// `reason`; returns whether it was running (a paused instance keeps
    /// its pause as it was). What runs finishes: the events in flight,
    /// the batch of schedules, the workflow's run; nothing starts after.
    pub(crate) fn pause(&mut self, reason: &str) -> Result<bool, Error> {
        let now = now_ms();
        self.host_transaction(|db| {
            let pause = db.conn.pause();
            if pause.is_paused()? {
                return Ok(false);
            }
            pause.pause(now, reason)?;
            Ok(true)
        })
    }

    /// Ends the pause and hands the instance's work to the host, in one
    /// transaction; returns whether it was paused.
    pub(crate) fn resume(&mut self) -> Result<bool, Error> {
        self.begin()?;
        let resumed = (self.db().conn.pause().resume())
            .map_err(|e| self.storage_error(e))
            .and_then(|resumed| {
                if resumed {
                    self.note_background_work(now_ms())?;
                }
                Ok(resumed)
            });
        self.finish(resumed)
    }

    /// Notes the work the database holds (queue events, the earliest
    /// schedule, a workflow that has not ended) as the open transaction's
    /// effects, so that its commit sets the instance's marks and the host
    /// takes the work up as after any commit. Nothing is noted while the
    /// instance is paused.
    pub(super) fn note_background_work(&mut self, now: i64) -> Result<(), Error> {
        let storage = |e| self.storage_error(e);
        let conn = &self.db().conn;
        if conn.pause().is_paused().map_err(storage)? {
            return Ok(());
        }
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
