//! `burrow:actor/schedule`: actions to run later, written in the current
//! call's transaction. The host's schedule runner runs them (see
//! `Cell::run_due_schedules`).

use crate::bindings::schedule::{Host, ScheduleError, Scheduled};
use crate::clock::now_ms;
use crate::config::{
    MAX_ARGS_BYTES, MAX_EVENT_NAME_BYTES, MAX_PENDING_SCHEDULES, MIN_SCHEDULE_INTERVAL_MS,
};
use crate::instance::{InstanceState, storage_trap};
use crate::storage::{AddScheduleError, HostTables};

/// Checks the action and the arguments of a schedule.
fn check(action: &str, args: &str) -> Result<(), String> {
    if action.is_empty() || action.len() > MAX_EVENT_NAME_BYTES {
        return Err(format!(
            "the action name must be 1 to {MAX_EVENT_NAME_BYTES} bytes; it is {}",
            action.len()
        ));
    }
    if args.len() > MAX_ARGS_BYTES {
        return Err(format!(
            "the arguments are {} bytes; the limit is {MAX_ARGS_BYTES} bytes",
            args.len()
        ));
    }
    match serde_json::from_str::<serde_json::Value>(args) {
        Ok(serde_json::Value::Array(_)) => Ok(()),
        Ok(_) => Err("the arguments must be a JSON array".into()),
        Err(e) => Err(format!("the arguments are not valid JSON: {e}")),
    }
}

impl InstanceState {
    fn add_schedule(
        &mut self,
        call: &str,
        due_at: i64,
        every_ms: Option<i64>,
        action: String,
        args: String,
    ) -> wasmtime::Result<Result<u64, ScheduleError>> {
        if let Err(why) = self.check_write(call) {
            return Ok(Err(why.into()));
        }
        if let Err(why) = check(&action, &args) {
            return Ok(Err(ScheduleError::Invalid(format!("{call}: {why}"))));
        }
        let added = self.db().conn.schedules().add(
            &action,
            &args,
            due_at,
            every_ms,
            now_ms(),
            MAX_PENDING_SCHEDULES,
        );
        match added {
            Ok(id) => {
                self.note_scheduled(due_at);
                Ok(Ok(id as u64))
            }
            Err(AddScheduleError::Full(limit)) => Ok(Err(ScheduleError::Full(limit))),
            Err(AddScheduleError::Sqlite(e)) => {
                let error = storage_trap(e);
                self.check_transaction(call)?;
                Err(error)
            }
        }
    }
}

impl Host for InstanceState {
    fn after(
        &mut self,
        delay_ms: u64,
        action: String,
        args: String,
    ) -> wasmtime::Result<Result<u64, ScheduleError>> {
        let delay = i64::try_from(delay_ms).unwrap_or(i64::MAX);
        let due_at = now_ms().saturating_add(delay);
        self.add_schedule("schedule.after", due_at, None, action, args)
    }

    fn at(
        &mut self,
        at_ms: i64,
        action: String,
        args: String,
    ) -> wasmtime::Result<Result<u64, ScheduleError>> {
        self.add_schedule("schedule.at", at_ms, None, action, args)
    }

    fn every(
        &mut self,
        interval_ms: u64,
        action: String,
        args: String,
    ) -> wasmtime::Result<Result<u64, ScheduleError>> {
        // The mode first: orchestration code hears not-in-step whatever it
        // passed.
        if let Err(why) = self.check_write("schedule.every") {
            return Ok(Err(why.into()));
        }
        if interval_ms < MIN_SCHEDULE_INTERVAL_MS {
            return Ok(Err(ScheduleError::Invalid(format!(
                "schedule.every: the interval is {interval_ms} ms; it must be at least \
                 {MIN_SCHEDULE_INTERVAL_MS} ms"
            ))));
        }
        let every = i64::try_from(interval_ms).unwrap_or(i64::MAX);
        let due_at = now_ms().saturating_add(every);
        self.add_schedule("schedule.every", due_at, Some(every), action, args)
    }

    fn pending(&mut self) -> wasmtime::Result<Result<Vec<Scheduled>, ScheduleError>> {
        if let Err(why) = self.check_mode("schedule.pending") {
            return Ok(Err(why.into()));
        }
        let pending = self.db().conn.schedules().pending().map_err(storage_trap)?;
        Ok(Ok(pending
            .into_iter()
            .map(|s| Scheduled {
                id: s.id as u64,
                action: s.action,
                args: s.args,
                at: s.due_at,
                every_ms: s.every_ms.map(|ms| ms as u64),
            })
            .collect()))
    }

    fn cancel(&mut self, id: u64) -> wasmtime::Result<Result<bool, ScheduleError>> {
        if let Err(why) = self.check_write("schedule.cancel") {
            return Ok(Err(why.into()));
        }
        let Ok(id) = i64::try_from(id) else {
            return Ok(Ok(false));
        };
        match self.db().conn.schedules().delete(id) {
            Ok(deleted) => Ok(Ok(deleted)),
            Err(e) => {
                let error = storage_trap(e);
                self.check_transaction("schedule.cancel")?;
                Err(error)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::instance::Mode;
    use crate::instance::testing::instance;

    /// The host's own statements on the schedules' table are not in the
    /// connection's statement cache: a guest sending the same text meets
    /// the authorizer.
    #[test]
    fn a_guest_sending_the_hosts_schedule_sql_is_still_refused() {
        use crate::bindings::db::{DbError, Host as _, Value};
        let (mut state, _dir) = instance();
        let id = state.at(5, "go".into(), "[]".into()).unwrap().unwrap();
        assert_eq!(state.pending().unwrap().unwrap().len(), 1);
        assert!(!state.cancel(id + 1).unwrap().unwrap());
        for (sql, params) in [
            ("SELECT count(*) FROM main._burrow_schedule", vec![]),
            (
                "DELETE FROM main._burrow_schedule WHERE id = ?",
                vec![Value::Integer(id as i64)],
            ),
            (
                "SELECT id, action, args, due_at, every_ms FROM main._burrow_schedule ORDER BY due_at, id",
                vec![],
            ),
        ] {
            let e = state.execute(sql.into(), params).unwrap();
            assert!(
                matches!(&e, Err(DbError::Denied(m)) if m.contains("internal table")),
                "{sql}: {e:?}"
            );
        }
        assert_eq!(state.pending().unwrap().unwrap().len(), 1);
    }

    #[test]
    fn schedules_are_checked_refused_by_mode_and_noted_for_the_mark() {
        let (mut state, _dir) = instance();
        let e = state.after(10, "".into(), "[]".into()).unwrap();
        assert!(matches!(e, Err(ScheduleError::Invalid(m)) if m.contains("action name")));
        let e = state.after(10, "go".into(), "{}".into()).unwrap();
        assert!(matches!(e, Err(ScheduleError::Invalid(m)) if m.contains("JSON array")));
        let e = state.at(5, "go".into(), "[oops".into()).unwrap();
        assert!(matches!(e, Err(ScheduleError::Invalid(m)) if m.contains("not valid JSON")));
        assert_eq!(state.effects().scheduled, None);

        let late = state.at(500, "go".into(), "[1]".into()).unwrap().unwrap();
        let soon = state.at(100, "go".into(), "[2]".into()).unwrap().unwrap();
        assert_eq!(state.effects().scheduled, Some(100));
        let pending = state.pending().unwrap().unwrap();
        assert_eq!(
            pending.iter().map(|s| s.id).collect::<Vec<_>>(),
            [soon, late]
        );
        assert!(state.cancel(soon).unwrap().unwrap());
        assert!(!state.cancel(soon).unwrap().unwrap());
        assert!(!state.cancel(u64::MAX).unwrap().unwrap());

        let e = state.every(99, "go".into(), "[]".into()).unwrap();
        assert!(matches!(e, Err(ScheduleError::Invalid(m)) if m.contains("at least 100 ms")));
        let every = state.every(100, "go".into(), "[]".into()).unwrap().unwrap();
        let pending = state.pending().unwrap().unwrap();
        assert_eq!(
            pending.last().map(|s| (s.id, s.every_ms)),
            Some((every, Some(100)))
        );

        state.set_mode(Mode::Select);
        let e = state.after(1, "go".into(), "[]".into()).unwrap();
        assert!(matches!(e, Err(ScheduleError::NotAllowed(m)) if m.contains("may only read")));
        assert!(state.pending().unwrap().is_ok(), "the selector may read");
        state.set_mode(Mode::Orchestration);
        let e = state.cancel(late).unwrap();
        assert!(matches!(e, Err(ScheduleError::NotInStep(m)) if m.contains("schedule.cancel")));
        let e = state.pending().unwrap();
        assert!(matches!(e, Err(ScheduleError::NotInStep(m)) if m.contains("schedule.pending")));
    }
}
