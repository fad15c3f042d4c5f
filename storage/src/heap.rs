//! SQLite's heap, counted per guest statement.
//!
//! Burrow gives SQLite its own allocator (`SQLITE_CONFIG_MALLOC`), installed
//! before SQLite initializes. While a guest statement runs ([`bounded`]),
//! the allocator charges what SQLite allocates on that thread to the
//! statement's account, and refuses an allocation that would take the
//! account past its limit, or any large allocation once the call's deadline
//! has passed (so that an expression without a loop, which never reaches
//! SQLite's interrupt checks, still stops). SQLite then fails the statement
//! with `SQLITE_NOMEM`, and the caller learns from [`Refused`] why.
//!
//! Memory freed during the statement is credited back, so the bound is on
//! how much SQLite's heap grows while one statement runs. Outside guest
//! statements nothing is counted or refused.

use std::alloc::Layout;
use std::cell::Cell;
use std::ffi::{c_int, c_void};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use rusqlite::ffi;

use crate::deadline::Deadline;

/// Bytes before each block: its size (kept at 16 so that blocks stay
/// aligned for any type).
const HEADER: usize = 16;
/// Allocations at least this large are refused once the deadline passed.
const LARGE: usize = 64 << 10;

/// Why the allocator refused a statement's allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The statement would have held more than its limit.
    Memory,
    /// The call's deadline passed.
    Deadline,
}

struct Account<'a> {
    used: Cell<i64>,
    limit: i64,
    deadline: &'a Deadline,
    refused: Cell<Option<Refused>>,
}

thread_local! {
    static CURRENT: Cell<*const Account<'static>> = const { Cell::new(std::ptr::null()) };
}

/// Whether SQLite keeps its process-wide memory statistics (see
/// `keep_statistics`): in tests, whichever test opens the first connection.
static STATISTICS: AtomicBool = AtomicBool::new(cfg!(any(test, feature = "testing")));

/// Asks SQLite to keep its process-wide memory statistics
/// (`sqlite3_memory_used`, `sqlite3_memory_highwater`), for a harness that
/// checks the bound from outside. Call it before any connection opens.
/// The host does without: SQLite takes one process-wide lock for every
/// allocation to keep them, and threads that meet at that lock on a
/// small machine wait for each other's time slices (in a profile of W2
/// over HTTP on two cores, most of the time the workers slept inside
/// SQLite). Burrow's own bound needs no statistics: each statement's
/// account is its thread's.
#[cfg(any(test, feature = "testing"))]
pub fn keep_statistics() {
    STATISTICS.store(true, Ordering::Relaxed);
}

/// Whether SQLite keeps its memory statistics in this process (it decides
/// when the first connection opens).
#[cfg(any(test, feature = "testing"))]
pub fn statistics_kept() -> bool {
    install();
    let mut current: c_int = 0;
    let mut highwater: c_int = 0;
    // SAFETY: reads one of SQLite's status counters into the two locals.
    let rc = unsafe {
        ffi::sqlite3_status(
            ffi::SQLITE_STATUS_MEMORY_USED,
            &mut current,
            &mut highwater,
            0,
        )
    };
    rc == ffi::SQLITE_OK && highwater > 0
}

/// Installs Burrow's allocator into SQLite. Call it before any connection
/// opens; returns whether the allocator is in place (it cannot be once
/// SQLite has initialized, which only code outside Burrow could have made
/// happen: then statements are not counted, and a warning says so).
pub fn install() -> bool {
    static INSTALLED: OnceLock<bool> = OnceLock::new();
    *INSTALLED.get_or_init(|| {
        let statistics = c_int::from(STATISTICS.load(Ordering::Relaxed));
        // SAFETY: a configuration call before SQLite initializes, like the
        // one below; it fails harmlessly (the statistics stay on) after.
        unsafe { ffi::sqlite3_config(ffi::SQLITE_CONFIG_MEMSTATUS, statistics) };
        let methods = ffi::sqlite3_mem_methods {
            xMalloc: Some(x_malloc),
            xFree: Some(x_free),
            xRealloc: Some(x_realloc),
            xSize: Some(x_size),
            xRoundup: Some(x_roundup),
            xInit: Some(x_init),
            xShutdown: Some(x_shutdown),
            pAppData: std::ptr::null_mut(),
        };
        // SAFETY: SQLite copies the methods; called once, before any
        // connection of this process opens (every open path calls this first).
        let rc = unsafe { ffi::sqlite3_config(ffi::SQLITE_CONFIG_MALLOC, &methods) };
        if rc != ffi::SQLITE_OK {
            tracing::warn!(
                "SQLite was initialized before Burrow could install its allocator; \
                 the memory of guest statements is not bounded in this process"
            );
        }
        rc == ffi::SQLITE_OK
    })
}

/// Runs `f` (a guest statement) with SQLite's allocations on this thread
/// charged to an account of `limit` bytes, and refused past the deadline.
/// Returns `f`'s result and why an allocation was refused, if one was.
pub fn bounded<R>(
    limit: usize,
    deadline: &Deadline,
    f: impl FnOnce() -> R,
) -> (R, Option<Refused>) {
    let account = Account {
        used: Cell::new(0),
        limit: i64::try_from(limit).unwrap_or(i64::MAX),
        deadline,
        refused: Cell::new(None),
    };
    let previous = CURRENT.with(|c| c.replace((&account as *const Account<'_>).cast()));
    let restore = Restore(previous);
    let result = f();
    drop(restore);
    (result, account.refused.get())
}

/// Runs `f` with no account: for rusqlite calls that assert on a failed
/// allocation (reading a value expands a zeroblob), whose sizes the caller
/// bounds itself.
pub fn uncounted<R>(f: impl FnOnce() -> R) -> R {
    let previous = CURRENT.with(|c| c.replace(std::ptr::null()));
    let _restore = Restore(previous);
    f()
}

/// Puts the previous account back when dropped, also if the code in between
/// unwinds.
struct Restore(*const Account<'static>);

impl Drop for Restore {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.0));
    }
}

/// Charges `bytes` to the current account, if any; false if refused.
fn charge(bytes: usize) -> bool {
    CURRENT.with(|c| {
        let account = c.get();
        if account.is_null() {
            return true;
        }
        // SAFETY: the account outlives the closure of `bounded` that set it,
        // and only this thread uses it.
        let account = unsafe { &*account };
        let bytes = bytes as i64;
        if account.used.get().saturating_add(bytes) > account.limit {
            account.refused.set(Some(Refused::Memory));
            return false;
        }
        if bytes as usize >= LARGE && account.deadline.passed() {
            account.refused.set(Some(Refused::Deadline));
            return false;
        }
        account.used.set(account.used.get() + bytes);
        true
    })
}

fn credit(bytes: usize) {
    CURRENT.with(|c| {
        let account = c.get();
        if !account.is_null() {
            // SAFETY: as in `charge`.
            let account = unsafe { &*account };
            account.used.set(account.used.get() - bytes as i64);
        }
    })
}

fn layout(size: usize) -> Option<Layout> {
    Layout::from_size_align(size.checked_add(HEADER)?, HEADER).ok()
}

unsafe extern "C" fn x_malloc(n: c_int) -> *mut c_void {
    let size = usize::try_from(n).unwrap_or(0);
    let Some(layout) = layout(size) else {
        return std::ptr::null_mut();
    };
    if !charge(size) {
        return std::ptr::null_mut();
    }
    // SAFETY: the layout's size is at least HEADER, never zero.
    let block = unsafe { std::alloc::alloc(layout) };
    if block.is_null() {
        credit(size);
        return std::ptr::null_mut();
    }
    // SAFETY: the block has room for the header, aligned for usize.
    unsafe {
        block.cast::<usize>().write(size);
        block.add(HEADER).cast()
    }
}

/// The block and size behind a pointer SQLite got from `x_malloc`.
///
/// # Safety
/// `p` must come from `x_malloc` or `x_realloc` and not be freed.
unsafe fn block_of(p: *mut c_void) -> (*mut u8, usize) {
    // SAFETY: per the contract, the header precedes `p`.
    unsafe {
        let block = p.cast::<u8>().sub(HEADER);
        (block, block.cast::<usize>().read())
    }
}

unsafe extern "C" fn x_free(p: *mut c_void) {
    if p.is_null() {
        return;
    }
    // SAFETY: SQLite frees only what its allocator gave it.
    let (block, size) = unsafe { block_of(p) };
    credit(size);
    // SAFETY: allocated with this layout.
    unsafe { std::alloc::dealloc(block, layout(size).expect("allocated with it")) }
}

unsafe extern "C" fn x_realloc(p: *mut c_void, n: c_int) -> *mut c_void {
    if p.is_null() {
        // SAFETY: same contract.
        return unsafe { x_malloc(n) };
    }
    let new_size = usize::try_from(n).unwrap_or(0);
    if layout(new_size).is_none() {
        return std::ptr::null_mut();
    }
    // SAFETY: SQLite reallocates only what its allocator gave it.
    let (block, old_size) = unsafe { block_of(p) };
    if new_size > old_size && !charge(new_size - old_size) {
        return std::ptr::null_mut();
    }
    // SAFETY: the block was allocated with `layout(old_size)`; the new size
    // does not overflow (checked above).
    let grown = unsafe {
        std::alloc::realloc(
            block,
            layout(old_size).expect("allocated with it"),
            new_size + HEADER,
        )
    };
    if grown.is_null() {
        if new_size > old_size {
            credit(new_size - old_size);
        }
        return std::ptr::null_mut();
    }
    if new_size < old_size {
        credit(old_size - new_size);
    }
    // SAFETY: the block has room for the header.
    unsafe {
        grown.cast::<usize>().write(new_size);
        grown.add(HEADER).cast()
    }
}

unsafe extern "C" fn x_size(p: *mut c_void) -> c_int {
    if p.is_null() {
        return 0;
    }
    // SAFETY: SQLite asks only about blocks of its allocator.
    let (_, size) = unsafe { block_of(p) };
    size as c_int
}

unsafe extern "C" fn x_roundup(n: c_int) -> c_int {
    n.saturating_add(7) & !7
}

unsafe extern "C" fn x_init(_: *mut c_void) -> c_int {
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_shutdown(_: *mut c_void) {}
