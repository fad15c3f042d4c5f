//! The wire types of the HTTP API, one definition for the server and its
//! clients: what a send asks for ([`SendOptions`], the request body) and
//! what it achieved ([`SendOutcome`]), an error answer ([`ErrorBody`]),
//! the list of an actor's keys ([`KeyList`]), a fork's request and the
//! answers of a pause and a resume ([`ForkBody`], [`Paused`],
//! [`Resumed`]), and the frames of a
//! connection that are not events ([`Hello`], [`Lagged`]). The JSON they
//! write is the HTTP API's; the host serializes the same types it answers
//! with.

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

/// How to send an event.
#[derive(Debug, Clone, Default)]
pub struct SendOptions {
    /// Lower values are processed first.
    pub priority: i32,
    /// The event's group; `None` for the default group.
    pub group: Option<String>,
    /// Wait this long for the event's processing to commit.
    pub wait: Option<Duration>,
}

/// How a processed event's result is held in a [`SendOutcome`]: parsed, as
/// a [`Value`] (what a client decodes), or as its JSON text, a [`String`]
/// (what the host has). Either is written as the JSON value it holds.
pub trait EventResult: Sized {
    /// Writes the result as the JSON value it holds.
    fn write_json<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error>;
    /// Reads a result written by [`EventResult::write_json`].
    fn read_json<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error>;
}

impl EventResult for Value {
    fn write_json<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.serialize(serializer)
    }

    fn read_json<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Value::deserialize(deserializer)
    }
}

/// JSON text; text that is not JSON is written as a JSON string.
impl EventResult for String {
    fn write_json<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match serde_json::from_str::<&RawValue>(self) {
            Ok(raw) => raw.serialize(serializer),
            Err(_) => serializer.serialize_str(self),
        }
    }

    fn read_json<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Value::deserialize(deserializer).map(|value| value.to_string())
    }
}

/// What a send achieved, as the server answers it. A client holds the
/// result of a processed event as a [`Value`], the host as JSON text
/// (`SendOutcome<String>`); both write the same JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "status",
    rename_all = "kebab-case",
    bound(serialize = "R: EventResult", deserialize = "R: EventResult")
)]
pub enum SendOutcome<R = Value> {
    /// The event is committed to the queue (the sender did not wait).
    Queued {
        /// The event's id.
        id: i64,
    },
    /// The event was processed and the processing committed.
    Processed {
        /// The event's id.
        id: i64,
        /// What the actor's `process` returned.
        #[serde(
            serialize_with = "EventResult::write_json",
            deserialize_with = "EventResult::read_json"
        )]
        result: R,
    },
    /// The event failed too often and is in the dead-letter table.
    DeadLettered {
        /// The event's id.
        id: i64,
        /// The error of its last attempt.
        error: String,
    },
    /// The wait ended first; the event is still queued and will be processed.
    TimedOut {
        /// The event's id.
        id: i64,
    },
}

impl<R> SendOutcome<R> {
    /// The event's id.
    pub fn id(&self) -> i64 {
        match self {
            SendOutcome::Queued { id }
            | SendOutcome::Processed { id, .. }
            | SendOutcome::DeadLettered { id, .. }
            | SendOutcome::TimedOut { id } => *id,
        }
    }

    /// The HTTP status that carries this outcome: 200 when the event's
    /// fate is known, 202 when it is queued.
    pub fn http_status(&self) -> u16 {
        match self {
            SendOutcome::Processed { .. } | SendOutcome::DeadLettered { .. } => 200,
            SendOutcome::Queued { .. } | SendOutcome::TimedOut { .. } => 202,
        }
    }
}

/// The body of a send, `POST /actors/{actor}/{key}/queue`: `{"type",
/// "payload", "priority", "group", "wait", "timeout_ms"}`. A client writes
/// it with a payload it serializes (`SendBody<&P>`), the server reads it
/// with the payload's JSON text (`SendBody`), and a host forwards it with
/// the text it has.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SendBody<P = Box<RawValue>> {
    /// The event's type.
    #[serde(rename = "type")]
    pub event_type: String,
    /// The event's payload; `null` when there is none.
    #[serde(default)]
    pub payload: Option<P>,
    /// Lower values are processed first.
    #[serde(default)]
    pub priority: i32,
    /// The event's group; `None` for the default group.
    #[serde(default)]
    pub group: Option<String>,
    /// Whether the sender waits for the event's processing to commit.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub wait: bool,
    /// How long it waits, in milliseconds (with `wait` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

impl<P> SendBody<P> {
    /// The body that sends `payload` as an event of `event_type` with
    /// `options`.
    pub fn new(event_type: &str, payload: P, options: &SendOptions) -> SendBody<P> {
        SendBody {
            event_type: event_type.to_owned(),
            payload: Some(payload),
            priority: options.priority,
            group: options.group.clone(),
            wait: options.wait.is_some(),
            timeout_ms: options
                .wait
                .map(|wait| u64::try_from(wait.as_millis()).unwrap_or(u64::MAX)),
        }
    }

    /// The options the body asks for: a wait of `timeout_ms` capped at
    /// `max`, or `default` when it gives none; an error for a `timeout_ms`
    /// without `wait`.
    pub fn options(&self, default: Duration, max: Duration) -> Result<SendOptions, String> {
        let wait = match (self.wait, self.timeout_ms) {
            (false, Some(_)) => return Err("timeout_ms needs \"wait\": true".into()),
            (false, None) => None,
            (true, None) => Some(default),
            (true, Some(ms)) => Some(Duration::from_millis(ms).min(max)),
        };
        Ok(SendOptions {
            priority: self.priority,
            group: self.group.clone(),
            wait,
        })
    }
}

/// An error answer: `{"error": {"code": ..., "message": ...}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// The error of an [`ErrorBody`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorDetail {
    /// The stable error code (`unknown-actor`, `timeout`, ...).
    pub code: String,
    /// What happened, for people.
    pub message: String,
    /// For an error the actor's code returned (`action-failed`,
    /// `connection-refused`): its own code and message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest: Option<GuestFailure>,
}

/// An error an actor's code returned, as it gave it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuestFailure {
    /// What the actor was doing (`the call`, `process`, ...).
    pub during: String,
    /// The actor's code.
    pub code: String,
    /// The actor's message.
    pub message: String,
}

/// The keys of an actor's instances: `{"keys": [...]}`, and `"next"`
/// when a page of them (`?limit=`) is followed by more.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyList {
    /// The keys, sorted.
    pub keys: Vec<String>,
    /// The last key of a page that more keys follow: the next page is the
    /// one `after` it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// The body of `POST /actors/{actor}/{key}/fork`: `{"key": new_key}`,
/// the key of the instance the fork makes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForkBody {
    /// The new instance's key.
    pub key: String,
}

/// The answer of `POST /actors/{actor}/{key}/pause`: whether the
/// instance's background work was running (a paused instance is left as
/// it is).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Paused {
    /// Whether the instance was running.
    pub paused: bool,
}

/// The answer of `POST /actors/{actor}/{key}/resume`: whether the
/// instance was paused (an instance that was not is left as it is).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resumed {
    /// Whether the instance was paused.
    pub resumed: bool,
}

/// The first frame of a connection: `{"connected": id}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// The connection's id, unique within the server's run.
    pub connected: u64,
}

/// The frame that tells a slow client how many events it missed:
/// `{"lagged": n}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lagged {
    /// Events dropped for this client.
    pub lagged: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_send_body_reads_back_as_it_was_written() {
        let options = SendOptions {
            priority: -2,
            group: Some("g".into()),
            wait: Some(Duration::from_millis(1_500)),
        };
        let payload = serde_json::json!({"email": "ada@example.com"});
        let text = serde_json::to_string(&SendBody::new("welcome", &payload, &options)).unwrap();
        assert_eq!(
            text,
            r#"{"type":"welcome","payload":{"email":"ada@example.com"},"priority":-2,"group":"g","wait":true,"timeout_ms":1500}"#
        );
        let body: SendBody = serde_json::from_str(&text).unwrap();
        assert_eq!(
            body.payload.as_deref().map(RawValue::get),
            Some(r#"{"email":"ada@example.com"}"#)
        );
        let read = body
            .options(Duration::from_secs(30), Duration::from_secs(600))
            .unwrap();
        assert_eq!(
            (read.priority, read.group, read.wait),
            (-2, Some("g".into()), options.wait)
        );

        let queued = SendBody::new("t", 1, &SendOptions::default());
        assert_eq!(
            serde_json::to_string(&queued).unwrap(),
            r#"{"type":"t","payload":1,"priority":0,"group":null}"#
        );
    }

    #[test]
    fn a_send_body_s_wait_has_a_default_a_cap_and_needs_wait() {
        let read = |text: &str| {
            serde_json::from_str::<SendBody>(text)
                .map_err(|e| e.to_string())?
                .options(Duration::from_secs(30), Duration::from_secs(600))
        };
        assert_eq!(
            read(r#"{"type":"t","wait":true}"#).unwrap().wait,
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            read(r#"{"type":"t","wait":true,"timeout_ms":9000000}"#)
                .unwrap()
                .wait,
            Some(Duration::from_secs(600))
        );
        assert_eq!(read(r#"{"type":"t"}"#).unwrap().wait, None);
        assert!(
            read(r#"{"type":"t","timeout_ms":5}"#)
                .unwrap_err()
                .contains("needs \"wait\"")
        );
        assert!(
            read(r#"{"type":"t","colour":1}"#)
                .unwrap_err()
                .contains("unknown field")
        );
    }

    #[test]
    fn send_outcomes_decode_from_the_answers() {
        let cases = [
            (
                r#"{"status":"queued","id":3}"#,
                SendOutcome::Queued { id: 3 },
            ),
            (
                r#"{"status":"processed","id":4,"result":{"ok":true}}"#,
                SendOutcome::Processed {
                    id: 4,
                    result: serde_json::json!({"ok": true}),
                },
            ),
            (
                r#"{"status":"dead-lettered","id":5,"error":"boom"}"#,
                SendOutcome::DeadLettered {
                    id: 5,
                    error: "boom".into(),
                },
            ),
            (
                r#"{"status":"timed-out","id":6}"#,
                SendOutcome::TimedOut { id: 6 },
            ),
        ];
        for (text, outcome) in cases {
            let decoded: SendOutcome = serde_json::from_str(text).unwrap();
            assert_eq!(decoded, outcome);
            assert_eq!(decoded.id(), outcome.id());
        }
    }

    #[test]
    fn the_hosts_outcomes_write_the_json_text_they_hold() {
        let cases = [
            (
                SendOutcome::Queued { id: 3 },
                r#"{"status":"queued","id":3}"#,
            ),
            (
                SendOutcome::Processed {
                    id: 4,
                    result: r#"{"ok": true}"#.to_owned(),
                },
                r#"{"status":"processed","id":4,"result":{"ok": true}}"#,
            ),
            (
                SendOutcome::Processed {
                    id: 5,
                    result: "not json".to_owned(),
                },
                r#"{"status":"processed","id":5,"result":"not json"}"#,
            ),
            (
                SendOutcome::DeadLettered {
                    id: 6,
                    error: "boom".into(),
                },
                r#"{"status":"dead-lettered","id":6,"error":"boom"}"#,
            ),
            (
                SendOutcome::TimedOut { id: 7 },
                r#"{"status":"timed-out","id":7}"#,
            ),
        ];
        for (outcome, text) in cases {
            assert_eq!(serde_json::to_string(&outcome).unwrap(), text);
            let decoded: SendOutcome = serde_json::from_str(text).unwrap();
            assert_eq!(decoded.id(), outcome.id());
            assert_eq!(decoded.http_status(), outcome.http_status());
        }
    }

    #[test]
    fn the_other_answers_and_frames_write_the_apis_json() {
        let error = ErrorBody {
            error: ErrorDetail {
                code: "unknown-actor".into(),
                message: "unknown actor `x`".into(),
                guest: None,
            },
        };
        let text = r#"{"error":{"code":"unknown-actor","message":"unknown actor `x`"}}"#;
        assert_eq!(serde_json::to_string(&error).unwrap(), text);
        assert_eq!(serde_json::from_str::<ErrorBody>(text).unwrap(), error);
        let keys = KeyList {
            keys: vec!["a".into(), "b".into()],
            next: None,
        };
        assert_eq!(
            serde_json::to_string(&keys).unwrap(),
            r#"{"keys":["a","b"]}"#
        );
        let page = r#"{"keys":["a","b"],"next":"b"}"#;
        let parsed: KeyList = serde_json::from_str(page).unwrap();
        assert_eq!(parsed.next.as_deref(), Some("b"));
        assert_eq!(serde_json::to_string(&parsed).unwrap(), page);
        assert_eq!(
            serde_json::to_string(&Hello { connected: 3 }).unwrap(),
            r#"{"connected":3}"#
        );
        assert_eq!(
            serde_json::to_string(&Lagged { lagged: 7 }).unwrap(),
            r#"{"lagged":7}"#
        );
    }
}
