//! What a command prints and how it exits: every failure carries an error
//! code and the exit code derived from it, and is printed the same way
//! whether it came from an embedded host, a server or the command line.

use std::process::ExitCode;

use burrow_client::ClientError;
use serde_json::{Value, json};

use crate::error::Error;

/// A failure with its exit code.
pub(super) struct Failure {
    pub(super) code: String,
    pub(super) message: String,
    pub(super) exit: u8,
}

/// The exit code for an error code.
pub fn exit_code(code: &str) -> u8 {
    match code {
        "unknown-actor" | "unknown-action" | "no-such-instance" | "no-such-event"
        | "no-such-table" | "no-route" | "method-not-allowed" | "no-http-handler"
        | "no-such-host" => 3,
        "invalid-arguments"
        | "invalid-address"
        | "body-too-large"
        | "invalid-body"
        | "invalid-event"
        | "payload-too-large"
        | "no-queue"
        | "no-workflow"
        | "invalid-component"
        | "invalid-export"
        | "no-previous-component" => 4,
        "action-failed" | "dead-lettered" | "connection-refused" => 5,
        "trapped" => 6,
        "timeout"
        | "compiling"
        | "overloaded"
        | "shutting-down"
        | "queue-full"
        | "conflict"
        | "timed-out"
        | "too-many-connections"
        | "rate-limited" => 7,
        "already-exists" => 8,
        "would-diverge" => 9,
        "unauthenticated" | "forbidden" => 10,
        _ => 1,
    }
}

impl Failure {
    /// A command line that cannot be run as given.
    pub(super) fn usage(message: impl Into<String>) -> Failure {
        Failure {
            code: "invalid-arguments".into(),
            message: message.into(),
            exit: 4,
        }
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        Failure {
            code: e.code().into(),
            message: e.to_string(),
            exit: exit_code(e.code()),
        }
    }
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Failure {
        Failure {
            exit: exit_code(&e.code),
            code: e.code,
            message: e.message,
        }
    }
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Failure {
        Failure {
            code: "error".into(),
            message: format!("{e:#}"),
            exit: 1,
        }
    }
}

/// Writes `text` and a newline on stdout. A reader that went away (`burrow
/// inspect ... | grep -q`) is not an error of the command: what it did
/// stands, and its exit code says so.
fn say(text: impl std::fmt::Display) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout().lock(), "{text}");
}

/// Prints a command's output (or its failure) on stdout, as JSON with
/// `json`, and returns the process's exit code.
pub(super) fn print(json: bool, outcome: Result<Option<Value>, Failure>) -> ExitCode {
    match outcome {
        Ok(Some(output)) => {
            if json {
                say(json!({ "result": output }));
            } else {
                match output {
                    Value::String(s) => say(s),
                    other => say(serde_json::to_string_pretty(&other).unwrap_or_default()),
                }
            }
            ExitCode::SUCCESS
        }
        Ok(None) => ExitCode::SUCCESS,
        Err(failure) => {
            if json {
                say(json!({ "error": { "code": failure.code, "message": failure.message } }));
            } else {
                eprintln!("error: {}", failure.message);
            }
            ExitCode::from(failure.exit)
        }
    }
}

pub(super) fn parse_json_arg(text: &str, what: &str) -> Result<Value, Failure> {
    serde_json::from_str::<Value>(text).map_err(|e| Failure {
        code: "invalid-arguments".into(),
        message: format!("invalid JSON in {what}: {e}"),
        exit: 4,
    })
}

pub(super) fn parse_result(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

/// A send's outcome: printed when the event is queued or processed; a
/// failure (with the outcome in its message) when it was dead-lettered or
/// the wait ended first.
pub(super) fn send_outcome(outcome: Value) -> Result<Option<Value>, Failure> {
    let id = &outcome["id"];
    match outcome["status"].as_str() {
        Some("processed") => Ok(Some(outcome["result"].clone())),
        Some("dead-lettered") => Err(Failure {
            code: "dead-lettered".into(),
            message: format!(
                "event {id} was dead-lettered: {}",
                outcome["error"].as_str().unwrap_or("")
            ),
            exit: exit_code("dead-lettered"),
        }),
        Some("timed-out") => Err(Failure {
            code: "timed-out".into(),
            message: format!(
                "event {id} is queued, but its processing did not commit within the wait"
            ),
            exit: exit_code("timed-out"),
        }),
        _ => Ok(Some(outcome)),
    }
}
