//! What guest code may do right now: the mode of the running call, which
//! every import checks first, and why an import refuses.

/// What guest code is running right now. Imports check it first, so that
/// later modes (workflow orchestration, steps) can refuse side effects at
/// the import boundary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// No call into the guest is running.
    Idle,
    /// A lifecycle hook (`migrate`, `create`, `wake`, `sleep`, `destroy`).
    Hook(&'static str),
    /// An action.
    Action,
    /// Processing one queue event.
    Process,
    /// A custom queue selector: it may read, not write.
    Select,
    /// A workflow's orchestration code: it may only open steps, sleep and
    /// read recorded values.
    Orchestration,
    /// A workflow step: side effects are allowed.
    Step,
}

/// Why an import refused a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The mode forbids it; the text names the call.
    NotAllowed(String),
    /// A workflow's orchestration code made it outside a step.
    NotInStep(String),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::NotAllowed(why) | Refusal::NotInStep(why) => f.write_str(why),
        }
    }
}

/// The trap an import raises when the instance's database is busy with a
/// concurrent call of the same instance: the call is rolled back and run
/// again (see ARCHITECTURE.md, "Concurrent processing").
#[derive(Debug)]
pub(crate) struct ConflictTrap;

impl std::fmt::Display for ConflictTrap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the instance's database is busy with a concurrent call of this instance")
    }
}

impl std::error::Error for ConflictTrap {}

/// Whether SQLite refused because another connection holds the write lock
/// or committed since this transaction began reading.
pub(crate) fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// A storage failure inside an import, as a trap: [`ConflictTrap`] when the
/// database was busy, so that the call is re-run rather than failed.
/// The trap of a failed commit inside guest code (a batch of workflow
/// steps, orchestration code's writes).
pub(crate) fn commit_trap(e: super::commit::CommitError) -> wasmtime::Error {
    match e {
        super::commit::CommitError::Sqlite(e) => storage_trap(e),
        super::commit::CommitError::NotReplicated(e) => {
            wasmtime::Error::msg(format!("the cluster did not take the commit: {e}"))
        }
        e @ super::commit::CommitError::LogNotSynced(_) => wasmtime::Error::msg(e.to_string()),
    }
}

pub(crate) fn storage_trap(e: rusqlite::Error) -> wasmtime::Error {
    if is_busy(&e) {
        ConflictTrap.into()
    } else {
        e.into()
    }
}
