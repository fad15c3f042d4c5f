//! The wasmtime engine: component model, epoch interruption for call
//! deadlines, and the pooling allocator where the machine allows it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::config::MAX_WASM_STACK;

/// How often the engine's epoch advances; a call's deadline is checked (and
/// a long-running guest yields to other tasks) at this pace.
pub(crate) const EPOCH_TICK: Duration = Duration::from_millis(10);

fn base_config() -> Config {
    let mut config = Config::new();
    config.wasm_component_model(true);
    config.epoch_interruption(true);
    config.max_wasm_stack(MAX_WASM_STACK);
    config
}

fn pooling(max_awake: usize) -> PoolingAllocationConfig {
    let n = u32::try_from(max_awake.max(1)).unwrap_or(u32::MAX);
    let mut pool = PoolingAllocationConfig::new();
    // A component made by a language toolchain holds several core instances,
    // memories and tables (an adapter, a runtime, the program): a Rust actor
    // about 4 core instances, a componentize-py actor about 67.
    pool.total_component_instances(n)
        .total_core_instances(n.saturating_mul(16))
        .total_memories(n.saturating_mul(4))
        .total_tables(n.saturating_mul(4))
        .total_stacks(n)
        .max_core_instances_per_component(128)
        .max_memories_per_component(8)
        .max_tables_per_component(8)
        .table_elements(50_000)
        .max_unused_warm_slots(n.min(100));
    pool
}

/// Builds the engine. Tries the pooling allocator first; if the machine
/// refuses its reservation, falls back to on-demand allocation with one
/// log line.
pub(crate) fn build(max_awake: usize, use_pooling: bool) -> wasmtime::Result<Engine> {
    if use_pooling {
        let mut config = base_config();
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pooling(max_awake)));
        match Engine::new(&config) {
            Ok(engine) => return Ok(engine),
            Err(e) => tracing::warn!(
                "pooling allocator unavailable on this machine ({e:#}); using on-demand allocation"
            ),
        }
    }
    Engine::new(&base_config())
}

/// Advances the engine's epoch every [`EPOCH_TICK`] until dropped.
pub(crate) struct EpochTicker {
    stop: Arc<AtomicBool>,
}

impl EpochTicker {
    pub(crate) fn start(engine: &Engine) -> EpochTicker {
        let stop = Arc::new(AtomicBool::new(false));
        let weak = engine.weak();
        let flag = stop.clone();
        std::thread::Builder::new()
            .name("burrow-epoch".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    match weak.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => break,
                    }
                }
            })
            .expect("spawn the epoch thread");
        EpochTicker { stop }
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
