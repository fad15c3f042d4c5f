//! The calls the `imports` target makes: every import a guest could call,
//! with any arguments, and the transaction boundaries the host makes.

/// A value for a statement parameter.
#[derive(Debug, Clone)]
pub enum FuzzValue {
    /// SQL NULL.
    Null,
    /// An integer.
    Integer(i64),
    /// A float.
    Real(f64),
    /// Text.
    Text(String),
    /// A blob.
    Blob(Vec<u8>),
}

/// One call a guest could make, or a transaction boundary the host makes.
#[derive(Debug, Clone)]
pub enum ImportCall {
    /// `db.execute`.
    Execute(String, Vec<FuzzValue>),
    /// `db.execute-batch`.
    ExecuteBatch(String),
    /// `state.get`.
    StateGet,
    /// `state.set`.
    StateSet(Vec<u8>),
    /// `queue.append`.
    Append {
        /// Event type.
        event_type: String,
        /// Payload text.
        payload: String,
        /// Priority.
        priority: i32,
        /// Group.
        group: Option<String>,
    },
    /// `log.log`.
    Log(u8, String),
    /// The host switches what guest code is running (0 idle, 1 hook,
    /// 2 action, 3 process, 4 select, 5 workflow orchestration, 6 a
    /// workflow step).
    SetMode(u8),
    /// A call of the `workflow` import.
    Workflow(WorkflowCall),
    /// The workflow's run ends and the next one starts from its first
    /// position, as after a wait.
    NewRun,
    /// `schedule.after`, `schedule.at` or `schedule.every`.
    Schedule {
        /// Which, and its time.
        when: When,
        /// The action name.
        action: String,
        /// The arguments text.
        args: String,
    },
    /// `schedule.cancel`.
    CancelSchedule(u64),
    /// `schedule.pending`.
    PendingSchedules,
    /// `events.broadcast`.
    Broadcast(String, String),
    /// `wasi:http/outgoing-handler.handle` of a request the guest built
    /// with `wasi:http/types` (a method, the URL's parts, headers). The
    /// session's instance may reach nothing: no request leaves.
    HttpRequest {
        /// The method (a name of `wasi:http`'s, or any text).
        method: String,
        /// The scheme (`http`, `https`, or any text).
        scheme: Option<String>,
        /// The authority.
        authority: Option<String>,
        /// The path and query.
        path: Option<String>,
        /// Headers.
        headers: Vec<(String, Vec<u8>)>,
    },
    /// The host commits the call's transaction and opens the next.
    Commit,
    /// The host rolls the call's transaction back and opens the next.
    Rollback,
}

/// When a schedule runs.
#[derive(Debug, Clone)]
pub enum When {
    /// `schedule.after`, with this delay in ms.
    After(u64),
    /// `schedule.at`, at this time in ms.
    At(i64),
    /// `schedule.every`, with this interval in ms.
    Every(u64),
}

/// A call of the `workflow` import, in any order.
#[derive(Debug, Clone)]
pub enum WorkflowCall {
    /// `begin-step`.
    BeginStep {
        /// Step name.
        name: String,
        /// Retries after the first attempt.
        max_retries: u32,
        /// Backoff base and cap, in ms.
        backoff_ms: (u64, u64),
        /// Attempt timeout, in ms.
        timeout_ms: Option<u64>,
    },
    /// `end-step`: 0 ok, 1 error, 2 critical, 3 rollback; output or message.
    EndStep(u8, String),
    /// `sleep`.
    Sleep(String, u64),
    /// `sleep-until`.
    SleepUntil(String, i64),
    /// `now`.
    Now,
    /// `loop-enter`.
    LoopEnter(String, String),
    /// `loop-continue`.
    LoopContinue(String),
    /// `loop-break`.
    LoopBreak(String),
    /// `loop-leave`.
    LoopLeave,
    /// `join-enter` (race when true).
    JoinEnter(String, bool),
    /// `branch`.
    Branch(u32),
    /// `join-exit`.
    JoinExit(Option<u32>),
    /// `queue-next`.
    QueueNext(String, Vec<String>, u32, Option<u64>),
    /// `version`.
    Version(String, u32),
    /// `removed`.
    Removed(String),
}
