//! The action argument codec of the Rust SDK: arbitrary text as the JSON
//! arguments of actions of several shapes. Decoding must give the value or
//! an `invalid-arguments` error that names the argument, never a panic,
//! and results must encode as JSON.

#![no_main]

use burrow_sdk::Result;
use burrow_sdk::wit::burrow::actor::types::ActionError;
use libfuzzer_sys::fuzz_target;

#[derive(serde::Serialize, serde::Deserialize)]
struct Point {
    x: i64,
    y: Option<f64>,
    tags: Vec<String>,
}

fn none() -> Result<()> {
    Ok(())
}

fn one(n: i64) -> Result<i64> {
    Ok(n.wrapping_mul(2))
}

fn mixed(
    a: String,
    b: Vec<u8>,
    c: Option<bool>,
    p: Point,
) -> Result<(String, usize, Option<bool>, Point)> {
    Ok((a, b.len(), c, p))
}

fn value(v: serde_json::Value) -> Result<serde_json::Value> {
    Ok(v)
}

fn check(result: std::result::Result<String, ActionError>) {
    match result {
        Ok(json) => {
            serde_json::from_str::<serde_json::Value>(&json).expect("results are JSON");
        }
        Err(ActionError::InvalidArguments(message)) => {
            assert!(
                message.starts_with("expected ") || message.starts_with("argument "),
                "{message}"
            );
        }
        Err(other) => panic!("unexpected {other:?}"),
    }
}

fuzz_target!(|text: &str| {
    let Ok(args) = burrow_sdk::__parse_args(text) else {
        return;
    };
    check(burrow_sdk::__action(&none, args.clone()));
    check(burrow_sdk::__action(&one, args.clone()));
    check(burrow_sdk::__action(&mixed, args.clone()));
    check(burrow_sdk::__action(&value, args));
});
