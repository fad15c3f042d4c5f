//! No code: this crate's dependencies and their features are its purpose
//! (see its Cargo.toml).
