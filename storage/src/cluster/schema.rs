//! The tables a cluster keeps in PostgreSQL.
//!
//! - `burrow_hosts`: the members, each until `expires_at` (by PostgreSQL's
//!   clock), which its heartbeat moves on, and the second key of the
//!   advisory lock its session holds (`session_lock`, NULL without one),
//!   and whether it is draining (`draining`).
//! - `burrow_instances`: one row per instance address ever used: its lease
//!   (`owner`, a member's id or NULL, and `epoch`, which grows with every
//!   change of owner), its replicated database (`version`, one more per
//!   shipped commit, `written_epoch`, the epoch it was shipped under,
//!   `page_size`, `pages`), whether it exists (`created_at`), and its three
//!   marks (milliseconds since the Unix epoch, as in `host.sqlite`).
//! - `burrow_pages`: every page of every instance's database as of its
//!   last shipped commit.
//! - `burrow_secret`: one row, the key the hosts sign their requests to
//!   each other with (made by the first host that finds it missing).
//! - `burrow_deploys`: every deploy of an actor through any host (its
//!   version in the cluster, the component's digest and the one before),
//!   in a sequence across actors; `burrow_components`: their components'
//!   bytes, by digest. A member's `deploys_taken` is the last deploy it
//!   took up (`deploys.rs`).
//!
//! Hosts that start together may create the tables at the same time: an
//! advisory lock makes them take turns. A host that finds the tables as
//! they are now ([`CURRENT`]) runs no DDL at all: `CREATE INDEX IF NOT
//! EXISTS` locks its table even when the index exists, and an `ALTER
//! TABLE` locks `burrow_hosts` whole, which, in one transaction, deadlocks
//! with the other hosts' commits (they write `burrow_instances`, then read
//! `burrow_hosts`). The columns added since the first release
//! ([`UPGRADES`]) are added each in a transaction of its own, once.

/// The advisory lock around the schema's creation ("burrow" in ASCII).
pub(super) const SCHEMA_LOCK: i64 = 0x6275_7272_6f77;

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS burrow_hosts (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    address TEXT NOT NULL,
    started_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at TIMESTAMPTZ NOT NULL,
    session_lock INTEGER,
    draining BOOLEAN NOT NULL DEFAULT false,
    deploys_taken BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS burrow_instances (
    id BIGSERIAL PRIMARY KEY,
    actor TEXT NOT NULL,
    key TEXT NOT NULL,
    owner TEXT,
    epoch BIGINT NOT NULL DEFAULT 0,
    version BIGINT NOT NULL DEFAULT 0,
    written_epoch BIGINT NOT NULL DEFAULT 0,
    page_size INTEGER NOT NULL DEFAULT 0,
    pages INTEGER NOT NULL DEFAULT 0,
    created_at BIGINT,
    queue_due_at BIGINT,
    workflow_due_at BIGINT,
    schedule_due_at BIGINT,
    UNIQUE (actor, key)
);
CREATE INDEX IF NOT EXISTS burrow_instances_owner ON burrow_instances (owner);
CREATE INDEX IF NOT EXISTS burrow_instances_queue_due ON burrow_instances (queue_due_at)
    WHERE queue_due_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS burrow_instances_workflow_due ON burrow_instances (workflow_due_at)
    WHERE workflow_due_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS burrow_instances_schedule_due ON burrow_instances (schedule_due_at)
    WHERE schedule_due_at IS NOT NULL;
CREATE TABLE IF NOT EXISTS burrow_pages (
    instance BIGINT NOT NULL,
    pgno INTEGER NOT NULL,
    data BYTEA NOT NULL,
    PRIMARY KEY (instance, pgno)
);
CREATE TABLE IF NOT EXISTS burrow_secret (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    secret BYTEA NOT NULL
);
CREATE TABLE IF NOT EXISTS burrow_components (
    digest TEXT PRIMARY KEY,
    bytes BYTEA NOT NULL
);
CREATE TABLE IF NOT EXISTS burrow_deploys (
    seq BIGSERIAL PRIMARY KEY,
    actor TEXT NOT NULL,
    version BIGINT NOT NULL,
    digest TEXT NOT NULL REFERENCES burrow_components (digest),
    previous_digest TEXT NOT NULL,
    host TEXT NOT NULL,
    deployed_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (actor, version)
);
";

/// True when the tables are as [`SCHEMA`] and [`UPGRADES`] make them.
pub(super) const CURRENT: &str = "
SELECT to_regclass('burrow_secret') IS NOT NULL
   AND to_regclass('burrow_pages') IS NOT NULL
   AND to_regclass('burrow_instances_schedule_due') IS NOT NULL
   AND to_regclass('burrow_deploys') IS NOT NULL
   AND (SELECT count(*) FROM information_schema.columns
        WHERE table_schema = current_schema() AND table_name = 'burrow_hosts'
          AND column_name IN ('session_lock', 'draining', 'deploys_taken')) = 3
";

/// The columns added to tables made by an earlier release, each run on
/// its own (see the module docs).
pub(super) const UPGRADES: &[&str] = &[
    "ALTER TABLE burrow_hosts ADD COLUMN IF NOT EXISTS session_lock INTEGER",
    "ALTER TABLE burrow_hosts ADD COLUMN IF NOT EXISTS draining BOOLEAN NOT NULL DEFAULT false",
    "ALTER TABLE burrow_hosts ADD COLUMN IF NOT EXISTS deploys_taken BIGINT NOT NULL DEFAULT 0",
];
