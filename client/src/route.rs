//! The routes of the HTTP API, one definition for the server, its clients
//! and a host that forwards a request to another: each route's pattern,
//! as the server's router matches it (`{actor}`, `{key}`, ... name a path
//! segment, `{*path}` the rest), and [`path`], which fills one in.
//!
//! ```
//! use burrow_client::route;
//!
//! assert_eq!(
//!     route::path(route::ACTION, &["chat-room", "a b", "post"]),
//!     "/actors/chat-room/a%20b/actions/post"
//! );
//! ```

/// `GET`: is the server alive.
pub const HEALTH: &str = "/healthz";
/// `GET`: is every actor ready.
pub const READY: &str = "/readyz";
/// `GET`: the metrics, in Prometheus' text format.
pub const METRICS: &str = "/metrics";
/// `GET`: the hosts of the server's cluster.
pub const CLUSTER: &str = "/cluster";
/// `POST`: hands every instance the host serves to the other hosts.
pub const CLUSTER_DRAIN: &str = "/cluster/drain";
/// `GET`: the actors.
pub const ACTORS: &str = "/actors";
/// `GET`: an actor's keys.
pub const KEYS: &str = "/actors/{actor}";
/// `GET` the actor's component; `PUT` deploys one.
pub const COMPONENT: &str = "/actors/{actor}/component";
/// `POST`: puts back the component the actor ran before its last deploy.
pub const PREVIOUS_COMPONENT: &str = "/actors/{actor}/component/previous";
/// `GET` inspects an instance, `PUT` creates it, `DELETE` destroys it.
pub const INSTANCE: &str = "/actors/{actor}/{key}";
/// `GET`: an instance's state value.
pub const STATE: &str = "/actors/{actor}/{key}/state";
/// `GET`: the instance's export file; `PUT`: a new instance from one.
pub const EXPORT: &str = "/actors/{actor}/{key}/export";
/// `POST` ([`crate::ForkBody`]): a new instance from the instance's
/// database as committed now, its background work paused.
pub const FORK: &str = "/actors/{actor}/{key}/fork";
/// `POST`: pauses the instance's background work.
pub const PAUSE: &str = "/actors/{actor}/{key}/pause";
/// `POST`: ends the pause of the instance's background work.
pub const RESUME: &str = "/actors/{actor}/{key}/resume";
/// `GET`: an instance's tables.
pub const TABLES: &str = "/actors/{actor}/{key}/tables";
/// `GET`: a page of one of an instance's tables.
pub const TABLE: &str = "/actors/{actor}/{key}/tables/{table}";
/// `GET`: an instance's schedules.
pub const SCHEDULES: &str = "/actors/{actor}/{key}/schedules";
/// `POST`: calls an action.
pub const ACTION: &str = "/actors/{actor}/{key}/actions/{action}";
/// `GET` an instance's queue; `POST` sends an event ([`crate::SendBody`]).
pub const QUEUE: &str = "/actors/{actor}/{key}/queue";
/// `GET`: an instance's workflow and its history.
pub const WORKFLOW: &str = "/actors/{actor}/{key}/workflow";
/// `POST ?digest=SHA256`: replays the instance's unfinished workflow
/// against a component the cluster holds (a deploy's check), nothing kept.
pub const WORKFLOW_CHECK: &str = "/actors/{actor}/{key}/workflow/check";
/// Any method: the instance's own HTTP handler, at `/`.
pub const HTTP: &str = "/actors/{actor}/{key}/http";
/// Any method: the instance's own HTTP handler, at the path after `/http`.
pub const HTTP_PATH: &str = "/actors/{actor}/{key}/http/{*path}";
/// `GET`: a WebSocket to the instance's events.
pub const CONNECT: &str = "/actors/{actor}/{key}/connect";
/// `POST`: puts a dead letter back on the queue.
pub const REQUEUE: &str = "/actors/{actor}/{key}/queue/dead-letters/{id}/requeue";
/// `DELETE`: discards a dead letter.
pub const DEAD_LETTER: &str = "/actors/{actor}/{key}/queue/dead-letters/{id}";

/// `pattern` with its `{...}` segments replaced by `segments`, in order,
/// each percent-encoded as one path segment ([`crate::encode_segment`]).
/// A pattern with more placeholders than segments keeps the rest as they
/// are; segments beyond its placeholders are left out.
pub fn path(pattern: &str, segments: &[&str]) -> String {
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut segments = segments.iter();
    let mut rest = pattern;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        out.push_str(&rest[..open]);
        match segments.next() {
            Some(segment) => out.push_str(&crate::encode_segment(segment)),
            None => out.push_str(&rest[open..=open + close]),
        }
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_is_filled_in_order_with_encoded_segments() {
        assert_eq!(path(KEYS, &["counter"]), "/actors/counter");
        assert_eq!(path(INSTANCE, &["a/b", "k?x"]), "/actors/a%2Fb/k%3Fx");
        assert_eq!(
            path(REQUEUE, &["mailer", "main", "7"]),
            "/actors/mailer/main/queue/dead-letters/7/requeue"
        );
        assert_eq!(path(HEALTH, &[]), "/healthz");
        assert_eq!(path(ACTION, &["a"]), "/actors/a/{key}/actions/{action}");
    }
}
