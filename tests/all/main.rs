//! Burrow's integration tests: one binary, a module per area.
//!
//! Guest test programs are built into components by the
//! `burrow-test-artifacts` crate; each is used by a test here.

mod postgres;
mod provider;
mod support;

mod access;
mod batches;
mod bench;
mod calls;
mod cli;
mod client;
mod cluster;
mod compile_cache;
mod compiling;
mod concurrency;
mod conformance;
mod connections;
mod counter;
mod deploy;

mod destroy;
mod docs;
mod errors;
mod examples;
mod export;
mod fork;
mod front;
mod hostile;
mod http;
mod incoming;
mod lifecycle;
mod loading;
mod logging;
mod metrics;
mod new;
mod outbound;
mod queue;
mod sandbox;
mod sandbox_bounds;
mod sandbox_limits;
mod sandbox_names;
mod sandbox_upkeep;
mod schedules;
mod security;
mod timers;
mod tls;
mod transactions;
mod ui;
mod workflow;
