//! The floor: the benchmark work done by a minimal program with wasmtime
//! and rusqlite and nothing of Burrow in between: no directory, no sandbox,
//! no deadlines, no limits, no statement-size checks. Each operation still
//! runs in its own committed transaction, and instances stay live after
//! their first call, like Burrow's.

use std::path::Path;
use std::time::Instant;

use anyhow::{Result, anyhow};
use rusqlite::Connection;
use rusqlite::types::ValueRef;
use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::{Config, Engine, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::Latencies;
use bindings::burrow::actor::db::{DbError, QueryResult, Value};
use bindings::burrow::actor::log::Level;
use bindings::burrow::actor::state::StateError;
use bindings::burrow::actor::{db, log, state, types};
use bindings::{Actor, ActorPre};

/// The floor's own bindings of the plain `actor` world.
mod bindings {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "burrow:actor/actor",
        imports: { default: trappable },
        exports: { default: async },
    });
}

struct Floor {
    conn: Connection,
    wasi: WasiCtx,
    table: ResourceTable,
    /// `wasi:http`, which Python and JavaScript components import; the
    /// floor's guests send nothing.
    http: wasmtime_wasi_http::WasiHttpCtx,
    no_requests: NoRequests,
}

impl wasmtime_wasi_http::WasiHttpView for Floor {
    fn http(&mut self) -> wasmtime_wasi_http::WasiHttpCtxView<'_> {
        wasmtime_wasi_http::WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.no_requests,
        }
    }
}

/// The floor's guests send no request; one that tried would be refused.
struct NoRequests;

/// What a sent request's body stream ends with.
type BodyDone = Box<dyn Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send>;

impl wasmtime_wasi_http::WasiHttpHooks for NoRequests {
    fn send_request(
        &mut self,
        _request: http::Request<wasmtime_wasi_http::WasiBody>,
        _options: Option<wasmtime_wasi_http::RequestOptions>,
        _fut: BodyDone,
    ) -> Box<
        dyn Future<
                Output = Result<
                    (http::Response<wasmtime_wasi_http::WasiBody>, BodyDone),
                    wasmtime_wasi_http::Error,
                >,
            > + Send,
    > {
        Box::new(async {
            Err(wasmtime_wasi_http::Error::InternalError(Some(
                "the floor sends no HTTP request".into(),
            )))
        })
    }
}

impl WasiView for Floor {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl types::Host for Floor {}

impl log::Host for Floor {
    fn log(&mut self, _: Level, _: String) -> wasmtime::Result<()> {
        Ok(())
    }
}

impl state::Host for Floor {
    fn get(&mut self) -> wasmtime::Result<Result<Option<Vec<u8>>, StateError>> {
        Ok(Ok(None))
    }
    fn set(&mut self, _: Vec<u8>) -> wasmtime::Result<Result<(), StateError>> {
        Ok(Ok(()))
    }
}

impl db::Host for Floor {
    fn execute(
        &mut self,
        sql: String,
        params: Vec<Value>,
    ) -> wasmtime::Result<Result<QueryResult, DbError>> {
        let mut stmt = self.conn.prepare_cached(&sql)?;
        for (i, p) in params.into_iter().enumerate() {
            match p {
                Value::Integer(v) => stmt.raw_bind_parameter(i + 1, v)?,
                Value::Text(v) => stmt.raw_bind_parameter(i + 1, v)?,
                _ => wasmtime::bail!("the floor binds integers and text only"),
            }
        }
        let columns: Vec<String> = stmt.column_names().map(String::from).collect();
        let mut rows = Vec::new();
        let mut cursor = stmt.raw_query();
        while let Some(row) = cursor.next()? {
            let mut values = Vec::new();
            for i in 0..columns.len() {
                values.push(match row.get_ref(i)? {
                    ValueRef::Integer(v) => Value::Integer(v),
                    ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
                    _ => Value::Null,
                });
            }
            rows.push(values);
        }
        drop(cursor);
        Ok(Ok(QueryResult {
            columns,
            rows,
            changes: self.conn.changes(),
            last_insert_rowid: self.conn.last_insert_rowid(),
        }))
    }

    fn execute_batch(&mut self, sql: String) -> wasmtime::Result<Result<(), DbError>> {
        self.conn.execute_batch(&sql)?;
        Ok(Ok(()))
    }
}

/// WAL mode, `synchronous = NORMAL`, a new file switched as Burrow
/// switches its own (`enter_wal` in `storage/instance_db.rs`): without a
/// journal, whose syncs an empty file does not need.
fn open(path: &Path) -> Result<Connection> {
    let conn = Connection::open(path)?;
    let pages: i64 = conn.query_row("PRAGMA page_count", [], |r| r.get(0))?;
    if pages == 0 {
        conn.pragma_update(None, "synchronous", "OFF")?;
        conn.pragma_update(None, "journal_mode", "OFF")?;
    }
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    Ok(conn)
}

async fn start(
    engine: &Engine,
    pre: &ActorPre<Floor>,
    path: &Path,
    new: bool,
) -> Result<(Store<Floor>, Actor)> {
    let floor = Floor {
        conn: open(path)?,
        wasi: WasiCtx::builder().build(),
        table: ResourceTable::new(),
        http: Default::default(),
        no_requests: NoRequests,
    };
    let mut store = Store::new(engine, floor);
    let actor = pre.instantiate_async(&mut store).await?;
    let guest = actor.burrow_actor_guest();
    store.data().conn.execute_batch("BEGIN")?;
    guest
        .call_migrate(&mut store)
        .await?
        .map_err(|f| anyhow!(f.message))?;
    if new {
        guest
            .call_create(&mut store, "null")
            .await?
            .map_err(|f| anyhow!(f.message))?;
    }
    guest
        .call_wake(&mut store)
        .await?
        .map_err(|f| anyhow!(f.message))?;
    Ok((store, actor))
}

async fn increment(store: &mut Store<Floor>, actor: &Actor) -> Result<()> {
    actor
        .burrow_actor_guest()
        .call_action(&mut *store, "increment", "[1]")
        .await?
        .map_err(|e| anyhow!("{e:?}"))?;
    store.data().conn.execute_batch("COMMIT")?;
    Ok(())
}

/// A component built for a larger world (a Python or JavaScript counter
/// imports every interface of `full-actor`, and `wasi:http`, which the
/// floor links but never lets send) gets traps for the Burrow
/// interfaces the floor does not serve, which a counter never calls.
/// (`define_unknown_imports_as_traps` would also shadow WASI imports of a
/// newer minor version that the linker serves by semver.)
fn trap_other_burrow_imports(
    engine: &Engine,
    linker: &mut Linker<Floor>,
    component: &Component,
) -> Result<()> {
    use wasmtime::component::types::ComponentItem;
    const SERVED: [&str; 4] = ["types", "state", "db", "log"];
    for (name, item) in component.component_type().imports(engine) {
        let Some(interface) = name.strip_prefix("burrow:actor/") else {
            continue;
        };
        let interface = interface.split('@').next().unwrap_or(interface);
        let ComponentItem::ComponentInstance(instance) = item.ty else {
            continue;
        };
        if SERVED.contains(&interface) {
            continue;
        }
        let mut stubs = linker.instance(name)?;
        for (func, item) in instance.exports(engine) {
            if let ComponentItem::ComponentFunc(_) = item.ty {
                let what = format!("{name}#{func}");
                stubs.func_new(func, move |_, _, _, _| {
                    wasmtime::bail!("the floor does not serve {what}")
                })?;
            }
        }
    }
    Ok(())
}

pub(super) struct FloorReport {
    /// How long compiling the component took (no cache).
    pub(super) compile: std::time::Duration,
    pub(super) w1: Latencies,
    pub(super) create: Latencies,
    pub(super) wake: Latencies,
}

/// Runs W1 (`ops` increments on one instance) and W3 (`instances` creates,
/// then as many wakes) with the component at `component`.
pub(super) async fn run(
    component: &Path,
    dir: &Path,
    ops: usize,
    instances: usize,
) -> Result<FloorReport> {
    std::fs::create_dir_all(dir)?;
    let mut config = Config::new();
    config.wasm_component_model(true);
    let engine = Engine::new(&config)?;
    let compiling = Instant::now();
    let component = Component::from_file(&engine, component)?;
    let compile = compiling.elapsed();
    let mut linker = Linker::new(&engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
    // Only what the counter imports: the floor has no schedules, calls or
    // events.
    types::add_to_linker::<Floor, HasSelf<Floor>>(&mut linker, |f| f)?;
    state::add_to_linker::<Floor, HasSelf<Floor>>(&mut linker, |f| f)?;
    db::add_to_linker::<Floor, HasSelf<Floor>>(&mut linker, |f| f)?;
    log::add_to_linker::<Floor, HasSelf<Floor>>(&mut linker, |f| f)?;
    trap_other_burrow_imports(&engine, &mut linker, &component)?;
    let pre = ActorPre::new(linker.instantiate_pre(&component)?)?;

    let (mut store, actor) = start(&engine, &pre, &dir.join("w1.sqlite"), true).await?;
    increment(&mut store, &actor).await?;
    let mut samples = Vec::with_capacity(ops);
    let begun = Instant::now();
    for _ in 0..ops {
        let t = Instant::now();
        store.data().conn.execute_batch("BEGIN")?;
        increment(&mut store, &actor).await?;
        samples.push(t.elapsed());
    }
    let w1 = Latencies::new(samples, begun.elapsed());
    drop(store);

    let phase = async |new: bool| -> Result<Latencies> {
        let mut samples = Vec::with_capacity(instances);
        // Like Burrow's, the instances stay live (awake) after their call,
        // until the phase ends.
        let mut live = Vec::with_capacity(instances);
        let begun = Instant::now();
        for i in 0..instances {
            let t = Instant::now();
            let (mut store, actor) =
                start(&engine, &pre, &dir.join(format!("w3-{i}.sqlite")), new).await?;
            increment(&mut store, &actor).await?;
            samples.push(t.elapsed());
            live.push((store, actor));
        }
        Ok(Latencies::new(samples, begun.elapsed()))
    };
    let create = phase(true).await?;
    let wake = phase(false).await?;
    Ok(FloorReport {
        compile,
        w1,
        create,
        wake,
    })
}
