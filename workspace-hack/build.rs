//! Nothing to build: the script exists so that its build-dependencies
//! (see Cargo.toml) are part of the build.

fn main() {}
