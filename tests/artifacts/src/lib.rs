//! Paths of the guest test programs, built into components by this crate's
//! build script. Every program here is used by a test in `tests/all`.

include!(concat!(env!("OUT_DIR"), "/programs.rs"));
