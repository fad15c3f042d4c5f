//! `burrow:actor/workflow`: steps, durable sleeps, recorded times, loops,
//! joins and races, and queue waits for a workflow's orchestration code.
//!
//! Every call takes the run's next location (numbered as the workflow
//! tables in `storage` describe). A location the history already holds
//! replays its entry; a different kind or name there is a divergence, and
//! the run stops without touching the history. A step runs in its own
//! transaction, opened by `begin-step` and committed by `end-step`
//! together with the step's history entry; a queue wait deletes the events
//! it takes in the transaction that records them.
//!
//! `history.rs` has the replay guard every import passes and the recorded
//! values (`now`, `version`, `removed`); `step.rs` a step's attempts;
//! `scopes.rs` loops, joins and races; `waits.rs` durable sleeps and queue
//! waits.

mod history;
mod scopes;
mod step;
mod waits;

use crate::bindings::queue::Event as WitEvent;
use crate::bindings::workflow::{
    Host, Interrupt, LoopStart, StepFailure, StepOptions, StepOutcome, StepStart,
};
use crate::clock::now_ms;
use crate::instance::InstanceState;

impl Host for InstanceState {
    fn begin_step(
        &mut self,
        name: String,
        options: StepOptions,
    ) -> wasmtime::Result<Result<StepStart, Interrupt>> {
        step::begin_step(self, name, options)
    }

    fn end_step(
        &mut self,
        outcome: StepOutcome,
    ) -> wasmtime::Result<Result<Option<StepFailure>, Interrupt>> {
        step::end_step(self, outcome)
    }

    fn step_key(&mut self) -> wasmtime::Result<Option<String>> {
        step::step_key(self)
    }

    fn sleep(&mut self, name: String, duration_ms: u64) -> wasmtime::Result<Result<(), Interrupt>> {
        let now = now_ms();
        let at = now.saturating_add(duration_ms.min(i64::MAX as u64) as i64);
        self.durable_sleep(name, "workflow.sleep", at)
    }

    fn sleep_until(&mut self, name: String, at_ms: i64) -> wasmtime::Result<Result<(), Interrupt>> {
        self.durable_sleep(name, "workflow.sleep-until", at_ms)
    }

    fn now(&mut self) -> wasmtime::Result<Result<i64, Interrupt>> {
        history::now(self)
    }

    fn loop_enter(
        &mut self,
        name: String,
        state: String,
    ) -> wasmtime::Result<Result<LoopStart, Interrupt>> {
        scopes::loop_enter(self, name, state)
    }

    fn loop_continue(&mut self, state: String) -> wasmtime::Result<Result<(), Interrupt>> {
        self.end_iteration("workflow.loop-continue", Some(state), None)
    }

    fn loop_break(&mut self, output: String) -> wasmtime::Result<Result<(), Interrupt>> {
        self.end_iteration("workflow.loop-break", None, Some(output))
    }

    fn loop_leave(&mut self) -> wasmtime::Result<Result<(), Interrupt>> {
        scopes::loop_leave(self)
    }

    fn join_enter(
        &mut self,
        name: String,
        race: bool,
    ) -> wasmtime::Result<Result<Option<u32>, Interrupt>> {
        scopes::join_enter(self, name, race)
    }

    fn branch(&mut self, index: u32) -> wasmtime::Result<Result<(), Interrupt>> {
        scopes::branch(self, index)
    }

    fn join_exit(
        &mut self,
        winner: Option<u32>,
    ) -> wasmtime::Result<Result<Option<u32>, Interrupt>> {
        scopes::join_exit(self, winner)
    }

    fn queue_next(
        &mut self,
        name: String,
        event_types: Vec<String>,
        count: u32,
        timeout_ms: Option<u64>,
    ) -> wasmtime::Result<Result<Vec<WitEvent>, Interrupt>> {
        waits::queue_next(self, name, event_types, count, timeout_ms)
    }

    fn version(&mut self, name: String, latest: u32) -> wasmtime::Result<Result<u32, Interrupt>> {
        history::version(self, name, latest)
    }

    fn removed(&mut self, name: String) -> wasmtime::Result<Result<(), Interrupt>> {
        history::removed(self, name)
    }
}
