//! The read-only views the inspector pages through: the manifest's actors,
//! a page of an actor's keys, an instance's tables (a page at a time) and
//! its schedules. Reads of an instance go through [`Routed::view`] (in
//! a cluster, to the host that serves it; off the async workers), bounded
//! like `GET /actors/{actor}/{key}`.

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::response::Response;
use serde_json::{Value, json};

use super::{ApiError, ApiResult, Routed};
use crate::client::KeyList;
use crate::host::Host;
use crate::inspect::{INSPECT_ROWS, MAX_TABLE_PAGE_ROWS};

/// The most keys one page of `GET /actors/{actor}` holds.
pub const MAX_KEY_PAGE: usize = 1000;

/// `GET /actors`: the actors of the manifest, sorted by name.
pub(super) async fn actors(State(host): State<Host>) -> axum::Json<Value> {
    let actors: Vec<Value> = host
        .actors()
        .into_iter()
        .map(|name| json!({ "name": name }))
        .collect();
    axum::Json(json!({ "actors": actors }))
}

/// The query of `GET /actors/{actor}`.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct KeysQuery {
    prefix: Option<String>,
    after: Option<String>,
    limit: Option<String>,
}

fn bad_query(message: String) -> ApiError {
    ApiError::new(400, "invalid-arguments", message)
}

fn query<T>(query: Result<Query<T>, QueryRejection>, allowed: &str) -> ApiResult<T> {
    query.map(|Query(q)| q).map_err(|e| {
        bad_query(format!(
            "the query is not acceptable ({allowed} are allowed): {}",
            e.body_text()
        ))
    })
}

/// A whole number of `name` from `min` to `max`, or `default` when absent.
fn number(text: Option<&str>, name: &str, min: u64, max: u64, default: u64) -> ApiResult<u64> {
    let Some(text) = text else {
        return Ok(default);
    };
    match text.parse::<u64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(bad_query(format!(
            "`{name}` must be a whole number from {min} to {max}, not `{text}`"
        ))),
    }
}

/// `GET /actors/{actor}?prefix=&after=&limit=`: the keys of the actor's
/// instances in byte order, those beginning with `prefix`, after `after`,
/// at most `limit`; `next` (the last key) when more follow. Without
/// `limit`, every key.
pub(super) async fn keys(
    State(host): State<Host>,
    path: Result<Path<String>, PathRejection>,
    q: Result<Query<KeysQuery>, QueryRejection>,
) -> ApiResult<axum::Json<KeyList>> {
    let Path(actor) = path?;
    let q = query(q, "`prefix`, `after` and `limit`")?;
    let limit = match q.limit.as_deref() {
        None => None,
        some => Some(number(some, "limit", 1, MAX_KEY_PAGE as u64, 0)? as usize),
    };
    let prefix = q.prefix.unwrap_or_default();
    let after = q.after.filter(|a| !a.is_empty());
    let mut keys = host
        .keys_page(&actor, &prefix, after.as_deref(), limit.map(|n| n + 1))
        .await?;
    let next = match limit {
        Some(limit) if keys.len() > limit => {
            keys.truncate(limit);
            keys.last().cloned()
        }
        _ => None,
    };
    Ok(axum::Json(KeyList { keys, next }))
}

/// `GET /actors/{actor}/{key}/tables`: the actor's tables in the instance,
/// with their columns and row counts.
pub(super) async fn tables(State(host): State<Host>, routed: Routed) -> ApiResult<Response> {
    routed
        .view(&host, |host, actor, key| {
            host.tables(actor, key)
                .map(|tables| json!({ "tables": tables }))
        })
        .await
}

/// The query of `GET /actors/{actor}/{key}/tables/{table}`.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PageQuery {
    offset: Option<String>,
    limit: Option<String>,
}

/// `GET /actors/{actor}/{key}/tables/{table}?offset=&limit=`: up to
/// `limit` rows (default 100, at most 1,000) from row `offset` on.
pub(super) async fn table_page(
    State(host): State<Host>,
    routed: Routed,
    path: Result<Path<(String, String, String)>, PathRejection>,
    q: Result<Query<PageQuery>, QueryRejection>,
) -> ApiResult<Response> {
    let Path((_, _, table)) = path?;
    let q = query(q, "`offset` and `limit`")?;
    let offset = number(q.offset.as_deref(), "offset", 0, i64::MAX as u64, 0)?;
    let limit = number(
        q.limit.as_deref(),
        "limit",
        1,
        MAX_TABLE_PAGE_ROWS as u64,
        INSPECT_ROWS as u64,
    )? as usize;
    routed
        .view(&host, move |host, actor, key| {
            host.table_page(actor, key, &table, offset, limit)
        })
        .await
}

/// `GET /actors/{actor}/{key}/schedules`: the pending schedules, soonest
/// first (`count` in all, the first 100).
pub(super) async fn schedules(State(host): State<Host>, routed: Routed) -> ApiResult<Response> {
    routed
        .view(&host, |host, actor, key| host.schedules(actor, key))
        .await
}
