//! A component without the `burrow:actor/guest` export.

/// Keeps the component from being empty.
#[unsafe(no_mangle)]
pub extern "C" fn nothing() -> i32 {
    7
}
