//! WASI clocks and randomness, refused to a workflow's orchestration code.
//!
//! Orchestration code is replayed, so it must take the same path every
//! time: a clock read or a random number there would differ between runs.
//! The workflow import gives recorded values instead (`workflow.now`, or a
//! step's output). These wrappers of wasmtime-wasi's clocks and random
//! interfaces trap, naming the call, when orchestration code calls them;
//! everywhere else (actions, hooks, steps) they pass through.
//! `insecure-seed` stays allowed: Rust's `HashMap` asks for it once. The
//! monotonic clock's `now` is answered, but it stands still: orchestration
//! code reads [`ORCHESTRATION_INSTANT`] every time, in every run, so no
//! path it takes can depend on it. Language runtimes read that clock for
//! their own bookkeeping (SpiderMonkey, in JavaScript components, stamps
//! every promise it makes with it, and every export of a componentize-js
//! component is an async function); refusing it made every JavaScript
//! workflow fail at its first instruction.

use wasmtime::component::{HasData, Linker, Resource};
use wasmtime_wasi::WasiView;
use wasmtime_wasi::clocks::{WasiClocksCtxView, WasiClocksView};
use wasmtime_wasi::p2::DynPollable;
use wasmtime_wasi::p2::bindings::clocks::{monotonic_clock, wall_clock};
use wasmtime_wasi::p2::bindings::random::{insecure, random};
use wasmtime_wasi::random::WasiRandomCtx;

use crate::instance::{InstanceState, Mode};

/// Replaces the clocks and random interfaces that `add_to_linker_async`
/// added with the guarded ones.
pub(crate) fn shadow_wasi(linker: &mut Linker<InstanceState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    wall_clock::add_to_linker::<InstanceState, GuardedClocks>(linker, guarded_clocks)?;
    monotonic_clock::add_to_linker::<InstanceState, GuardedClocks>(linker, guarded_clocks)?;
    random::add_to_linker::<InstanceState, GuardedRandom>(linker, guarded_random)?;
    insecure::add_to_linker::<InstanceState, GuardedRandom>(linker, guarded_random)?;
    linker.allow_shadowing(false);
    Ok(())
}

fn refuse(mode: Mode, call: &str) -> wasmtime::Result<()> {
    if mode == Mode::Orchestration {
        wasmtime::bail!(
            "{call} was called by workflow orchestration code, which is replayed and must be \
             deterministic; use the workflow's recorded time (workflow.now) or call it inside a step"
        );
    }
    Ok(())
}

struct GuardedClocks;

impl HasData for GuardedClocks {
    type Data<'a> = Clocks<'a>;
}

struct Clocks<'a> {
    mode: Mode,
    inner: WasiClocksCtxView<'a>,
}

fn guarded_clocks(state: &mut InstanceState) -> Clocks<'_> {
    Clocks {
        mode: state.mode(),
        inner: state.clocks(),
    }
}

impl wall_clock::Host for Clocks<'_> {
    fn now(&mut self) -> wasmtime::Result<wall_clock::Datetime> {
        refuse(self.mode, "wasi:clocks/wall-clock.now")?;
        wall_clock::Host::now(&mut self.inner)
    }

    fn resolution(&mut self) -> wasmtime::Result<wall_clock::Datetime> {
        wall_clock::Host::resolution(&mut self.inner)
    }
}

/// What the monotonic clock reads in orchestration code, always.
pub(crate) const ORCHESTRATION_INSTANT: monotonic_clock::Instant = 0;

impl monotonic_clock::Host for Clocks<'_> {
    fn now(&mut self) -> wasmtime::Result<monotonic_clock::Instant> {
        if self.mode == Mode::Orchestration {
            return Ok(ORCHESTRATION_INSTANT);
        }
        monotonic_clock::Host::now(&mut self.inner)
    }

    fn resolution(&mut self) -> wasmtime::Result<monotonic_clock::Instant> {
        monotonic_clock::Host::resolution(&mut self.inner)
    }

    fn subscribe_instant(
        &mut self,
        when: monotonic_clock::Instant,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        self.inner.subscribe_instant(when)
    }

    fn subscribe_duration(
        &mut self,
        duration: monotonic_clock::Duration,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        self.inner.subscribe_duration(duration)
    }
}

struct GuardedRandom;

impl HasData for GuardedRandom {
    type Data<'a> = Random<'a>;
}

struct Random<'a> {
    mode: Mode,
    inner: &'a mut WasiRandomCtx,
}

fn guarded_random(state: &mut InstanceState) -> Random<'_> {
    let mode = state.mode();
    Random {
        mode,
        inner: state.ctx().ctx.random(),
    }
}

impl random::Host for Random<'_> {
    fn get_random_bytes(&mut self, len: u64) -> wasmtime::Result<Vec<u8>> {
        refuse(self.mode, "wasi:random/random.get-random-bytes")?;
        random::Host::get_random_bytes(self.inner, len)
    }

    fn get_random_u64(&mut self) -> wasmtime::Result<u64> {
        refuse(self.mode, "wasi:random/random.get-random-u64")?;
        random::Host::get_random_u64(self.inner)
    }
}

impl insecure::Host for Random<'_> {
    fn get_insecure_random_bytes(&mut self, len: u64) -> wasmtime::Result<Vec<u8>> {
        refuse(self.mode, "wasi:random/insecure.get-insecure-random-bytes")?;
        insecure::Host::get_insecure_random_bytes(self.inner, len)
    }

    fn get_insecure_random_u64(&mut self) -> wasmtime::Result<u64> {
        refuse(self.mode, "wasi:random/insecure.get-insecure-random-u64")?;
        insecure::Host::get_insecure_random_u64(self.inner)
    }
}
