//! The errors a caller of the host can meet, with their codes and statuses.

/// Why a call to an actor instance did not produce a result.
///
/// Every variant names the actor (and key, where there is one) and says
/// what the caller can do. [`Error::code`] is the stable machine-readable
/// code used by the HTTP API and `--json` output.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// No actor of this name is defined in the manifest.
    #[error("unknown actor `{0}`: it is not defined in the manifest")]
    UnknownActor(String),
    /// The actor's component is still compiling (the host started without
    /// it in the compile cache), past what the operation may wait.
    #[error(
        "actor `{actor}` is still compiling its component (waited {waited_ms} ms); try again once `GET /readyz` no longer lists it"
    )]
    Compiling {
        /// The actor.
        actor: String,
        /// How long the operation waited for it, in milliseconds.
        waited_ms: u128,
    },
    /// The actor's component failed to load when the host compiled it:
    /// the actor has no running code until a deploy gives it one.
    #[error("actor `{actor}` is unavailable: its component {path} did not load: {reason}")]
    LoadFailed {
        /// The actor.
        actor: String,
        /// The component file.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The actor has no action of this name.
    #[error("actor `{actor}` has no action `{action}`")]
    UnknownAction {
        /// The actor.
        actor: String,
        /// The action that was asked for.
        action: String,
    },
    /// The arguments did not fit the action or were not a JSON array.
    #[error("invalid arguments for `{actor}.{action}`: {message}")]
    InvalidArguments {
        /// The actor.
        actor: String,
        /// The action.
        action: String,
        /// What was wrong.
        message: String,
    },
    /// The key or the actor name is not acceptable.
    #[error("invalid instance address: {0}")]
    InvalidAddress(String),
    /// The instance was never created (or was destroyed).
    #[error("instance `{actor}/{key}` does not exist")]
    NoSuchInstance {
        /// The actor.
        actor: String,
        /// The key.
        key: String,
    },
    /// An explicit create met an instance that already exists.
    #[error("instance `{actor}/{key}` already exists")]
    AlreadyExists {
        /// The actor.
        actor: String,
        /// The key.
        key: String,
    },
    /// The action (or hook) returned an error; what it wrote is rolled back.
    #[error("`{actor}/{key}` {during} failed: {code}: {message}")]
    Failed {
        /// The actor.
        actor: String,
        /// The key.
        key: String,
        /// The guest code that failed, such as `action increment` or `hook wake`.
        during: String,
        /// The guest's error code.
        code: String,
        /// The guest's message.
        message: String,
    },
    /// The guest trapped (panicked, ran out of memory, broke an invariant);
    /// what it wrote is rolled back and the instance is replaced.
    #[error("`{actor}/{key}` trapped in {during}: {message}")]
    Trapped {
        /// The actor.
        actor: String,
        /// The key.
        key: String,
        /// The guest code that trapped.
        during: String,
        /// The trap and its backtrace.
        message: String,
    },
    /// The guest ran past its call deadline; what it wrote is rolled back.
    #[error("`{actor}/{key}` {during} ran past its call timeout of {timeout_ms} ms")]
    Timeout {
        /// The actor.
        actor: String,
        /// The key.
        key: String,
        /// The guest code that ran too long.
        during: String,
        /// The deadline, in milliseconds.
        timeout_ms: u128,
    },
    /// The host has too much to do; try again later.
    #[error("overloaded: {0}")]
    Overloaded(String),
    /// The instance's database could not be read or written.
    #[error("storage of `{actor}/{key}` failed: {message}")]
    Storage {
        /// The actor.
        actor: String,
        /// The key.
        key: String,
        /// What failed.
        message: String,
    },
    /// Reading the instance went past one of the host's limits (the bytes
    /// or memory `inspect` may use); the message names it.
    #[error("`{actor}/{key}`: {message}")]
    LimitExceeded {
        /// The actor.
        actor: String,
        /// The key.
        key: String,
        /// The limit and what exceeded it.
        message: String,
    },
    /// The host is shutting down.
    #[error("the host is shutting down")]
    ShuttingDown,
    /// The actor has no queue to send to.
    #[error(
        "actor `{0}` has no queue: its component does not export burrow:actor/processor with a policy"
    )]
    NoQueue(String),
    /// The instance has no workflow (its actor is not a workflow actor).
    #[error(
        "actor `{0}` has no workflow: its component does not export burrow:actor/workflow-runner with a workflow"
    )]
    NoWorkflow(String),
    /// The actor's component exports no `wasi:http/incoming-handler`.
    #[error(
        "actor `{0}` takes no HTTP requests: its component does not export wasi:http/incoming-handler"
    )]
    NoHttpHandler(String),
    /// The event's type, group or payload is not acceptable.
    #[error("invalid event for `{actor}`: {message}")]
    InvalidEvent {
        /// The actor.
        actor: String,
        /// What was wrong.
        message: String,
    },
    /// The event's payload is larger than the actor's `queue_max_payload`.
    #[error(
        "the payload for `{actor}` is {size} bytes; the limit (queue_max_payload) is {limit} bytes"
    )]
    PayloadTooLarge {
        /// The actor.
        actor: String,
        /// The payload's size in bytes.
        size: usize,
        /// The limit in bytes.
        limit: usize,
    },
    /// The instance's queue holds its limit of pending events.
    #[error(
        "the queue of `{actor}/{key}` is full: it holds {limit} pending events (queue_max_pending)"
    )]
    QueueFull {
        /// The actor.
        actor: String,
        /// The key.
        key: String,
        /// The limit.
        limit: u64,
    },
    /// No dead letter with this id.
    #[error("`{actor}/{key}` has no dead letter {id}")]
    NoSuchEvent {
        /// The actor.
        actor: String,
        /// The key.
        key: String,
        /// The event id asked for.
        id: i64,
    },
    /// The instance has no table of the actor's own by this name.
    #[error("`{actor}/{key}` has no table `{table}`")]
    NoSuchTable {
        /// The actor.
        actor: String,
        /// The key.
        key: String,
        /// The table asked for.
        table: String,
    },
    /// The call kept meeting concurrent queue processing of the same
    /// instance until its deadline; nothing of it was kept.
    #[error(
        "`{actor}/{key}` was busy with concurrent calls of the same instance until the deadline; nothing was kept, try again"
    )]
    Conflict {
        /// The actor.
        actor: String,
        /// The key.
        key: String,
    },
    /// The instance's connect hook refused the connection.
    #[error("`{actor}/{key}` refused the connection: {code}: {message}")]
    ConnectionRefused {
        /// The actor.
        actor: String,
        /// The key.
        key: String,
        /// The hook's error code.
        code: String,
        /// The hook's message.
        message: String,
    },
    /// A connection would pass a connection limit (of the instance, of
    /// the host, or of instances with connections); the text names it.
    #[error("too many connections: {0}")]
    TooManyConnections(String),
    /// In a cluster: another host owns the instance (the public host
    /// forwards to it; a caller meets this only when forwarding fails).
    #[error("`{actor}/{key}` is served by host {owner} at {address}{}", if *live { "" } else { ", whose lease has run out; another host takes it over after the safety margin" })]
    Moved {
        /// The actor.
        actor: String,
        /// The instance's key.
        key: String,
        /// The owner's id.
        owner: String,
        /// The owner's base URL.
        address: String,
        /// The owner's membership is unexpired.
        live: bool,
    },
    /// In a cluster: a commit was made on this host's copy but not taken by
    /// PostgreSQL (or the lease ran out before a read was answered). The
    /// call is not acknowledged; the copy is restored before the instance
    /// is used again.
    #[error("`{actor}/{key}`: the cluster did not take the call's commit: {message}")]
    NotReplicated {
        /// The actor.
        actor: String,
        /// The instance's key.
        key: String,
        /// Why, and whether the call may have been kept.
        message: String,
    },
    /// In a cluster: PostgreSQL, or the host that owns the instance, cannot
    /// be reached.
    #[error("the cluster is unavailable: {0}")]
    ClusterUnavailable(String),
    /// A component a deploy was given cannot replace the actor's running one.
    #[error("the component cannot be deployed as `{actor}`: {reason}")]
    InvalidComponent {
        /// The actor.
        actor: String,
        /// What is wrong with the component.
        reason: String,
    },
    /// A file given to import an instance from is not one that `export`
    /// wrote, was changed since, or holds what the host refuses.
    #[error("cannot import `{actor}/{key}`: the file {reason}")]
    InvalidExport {
        /// The actor.
        actor: String,
        /// The key the instance was to have.
        key: String,
        /// What is wrong with the file.
        reason: String,
    },
    /// A deploy checked first (`--check`) would make running workflows
    /// diverge; nothing changed.
    #[error(
        "the deploy of `{actor}` is refused: {} running workflow(s) would diverge: {}",
        divergences.len(),
        divergences.iter().map(|d| format!("`{}`: {}", d.key, d.message)).collect::<Vec<_>>().join("; ")
    )]
    WouldDiverge {
        /// The actor.
        actor: String,
        /// Each instance that would diverge, and where.
        divergences: Vec<Divergence>,
    },
    /// A rollback asked for an actor that was not deployed since the start.
    #[error("actor `{0}` has no previous component: it runs the manifest's since the start")]
    NoPrevious(String),
    /// What this host cannot do (the text says what and why).
    #[error("{0}")]
    NotSupported(String),
    /// An error another host of the cluster answered a forwarded request
    /// with, passed on as it came.
    #[error("{message}")]
    Remote {
        /// Its HTTP status.
        status: u16,
        /// Its code.
        code: String,
        /// Its message.
        message: String,
    },
}

/// A running workflow that a component would not replay: the instance
/// and what the replay met.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct Divergence {
    /// The instance's key.
    pub key: String,
    /// Where its history and the new code part, as the replay said it.
    pub message: String,
}

/// The guest error code of an operation that succeeded although SQLite
/// rolled its transaction back by itself after a failed statement (it
/// does on a full database, for one): nothing of it was kept.
pub const TRANSACTION_ROLLED_BACK: &str = "transaction-rolled-back";

impl Error {
    /// `no-such-instance`: (`actor`, `key`) does not exist.
    #[doc(hidden)] // for Burrow's own crates
    pub fn no_such_instance(actor: &str, key: &str) -> Error {
        Error::NoSuchInstance {
            actor: actor.into(),
            key: key.into(),
        }
    }

    /// `already-exists`: (`actor`, `key`) exists already.
    #[doc(hidden)] // for Burrow's own crates
    pub fn already_exists(actor: &str, key: &str) -> Error {
        Error::AlreadyExists {
            actor: actor.into(),
            key: key.into(),
        }
    }

    /// `conflict`: the call met concurrent processing of (`actor`, `key`).
    #[doc(hidden)] // for Burrow's own crates
    pub fn conflict(actor: &str, key: &str) -> Error {
        Error::Conflict {
            actor: actor.into(),
            key: key.into(),
        }
    }

    /// `action-failed` with code [`TRANSACTION_ROLLED_BACK`]: SQLite rolled
    /// back the transaction of a call to (`actor`, `key`) that itself
    /// succeeded, after `cause`; nothing of the call was kept.
    #[doc(hidden)] // for Burrow's own crates
    pub fn transaction_rolled_back(actor: &str, key: &str, cause: &str) -> Error {
        Error::Failed {
            actor: actor.into(),
            key: key.into(),
            during: "the call".into(),
            code: TRANSACTION_ROLLED_BACK.into(),
            message: format!(
                "SQLite rolled the call's transaction back after {cause}; nothing of the call was kept"
            ),
        }
    }

    /// `storage`: the database of (`actor`, `key`) failed with `message`.
    #[doc(hidden)] // for Burrow's own crates
    pub fn storage(actor: &str, key: &str, message: String) -> Error {
        Error::Storage {
            actor: actor.into(),
            key: key.into(),
            message,
        }
    }
}

impl Error {
    /// The stable machine-readable code of this error.
    pub fn code(&self) -> &str {
        match self {
            Error::UnknownActor(_) => "unknown-actor",
            Error::Compiling { .. } => "compiling",
            Error::LoadFailed { .. } => "load-failed",
            Error::UnknownAction { .. } => "unknown-action",
            Error::InvalidArguments { .. } => "invalid-arguments",
            Error::InvalidAddress(_) => "invalid-address",
            Error::NoSuchInstance { .. } => "no-such-instance",
            Error::AlreadyExists { .. } => "already-exists",
            Error::Failed { .. } => "action-failed",
            Error::Trapped { .. } => "trapped",
            Error::Timeout { .. } => "timeout",
            Error::Overloaded(_) => "overloaded",
            Error::Storage { .. } => "storage",
            Error::LimitExceeded { .. } => "limit-exceeded",
            Error::ShuttingDown => "shutting-down",
            Error::NoQueue(_) => "no-queue",
            Error::NoWorkflow(_) => "no-workflow",
            Error::NoHttpHandler(_) => "no-http-handler",
            Error::InvalidEvent { .. } => "invalid-event",
            Error::PayloadTooLarge { .. } => "payload-too-large",
            Error::QueueFull { .. } => "queue-full",
            Error::NoSuchEvent { .. } => "no-such-event",
            Error::NoSuchTable { .. } => "no-such-table",
            Error::Conflict { .. } => "conflict",
            Error::ConnectionRefused { .. } => "connection-refused",
            Error::TooManyConnections(_) => "too-many-connections",
            Error::Moved { .. } => "moved",
            Error::NotReplicated { .. } => "not-replicated",
            Error::ClusterUnavailable(_) => "cluster-unavailable",
            Error::InvalidComponent { .. } => "invalid-component",
            Error::InvalidExport { .. } => "invalid-export",
            Error::WouldDiverge { .. } => "would-diverge",
            Error::NoPrevious(_) => "no-previous-component",
            Error::NotSupported(_) => "not-supported",
            Error::Remote { code, .. } => code,
        }
    }

    /// The HTTP status that carries this error.
    pub fn http_status(&self) -> u16 {
        match self {
            Error::UnknownActor(_)
            | Error::UnknownAction { .. }
            | Error::NoSuchInstance { .. }
            | Error::NoSuchEvent { .. }
            | Error::NoSuchTable { .. }
            | Error::NoPrevious(_)
            | Error::NoHttpHandler(_) => 404,
            Error::InvalidArguments { .. }
            | Error::InvalidAddress(_)
            | Error::NoQueue(_)
            | Error::NoWorkflow(_)
            | Error::InvalidEvent { .. }
            | Error::InvalidComponent { .. }
            | Error::InvalidExport { .. } => 400,
            Error::PayloadTooLarge { .. } | Error::LimitExceeded { .. } => 413,
            Error::QueueFull { .. } => 429,
            Error::Conflict { .. } => 503,
            Error::AlreadyExists { .. } | Error::WouldDiverge { .. } | Error::NotSupported(_) => {
                409
            }
            Error::ConnectionRefused { .. } => 403,
            Error::Failed { .. } => 422,
            Error::Trapped { .. } | Error::Storage { .. } => 500,
            Error::Timeout { .. }
            | Error::Compiling { .. }
            | Error::LoadFailed { .. }
            | Error::Overloaded(_)
            | Error::ShuttingDown
            | Error::TooManyConnections(_)
            | Error::Moved { .. }
            | Error::NotReplicated { .. }
            | Error::ClusterUnavailable(_) => 503,
            Error::Remote { status, .. } => *status,
        }
    }
}
