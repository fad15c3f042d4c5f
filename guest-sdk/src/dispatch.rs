//! Turning JSON arguments into calls of plain Rust functions.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::Result;
use crate::wit::burrow::actor::types::{ActionError, Failure};

/// A function that can serve as an action: `Fn(A, B, ..) -> Result<R>` where
/// every argument is `DeserializeOwned` and `R` is `Serialize`.
pub trait Action<Args> {
    /// Decodes `args` and calls the function.
    fn invoke(&self, args: Vec<serde_json::Value>) -> std::result::Result<String, ActionError>;
}

fn encode<R: Serialize>(result: Result<R>) -> std::result::Result<String, ActionError> {
    match result {
        Ok(value) => serde_json::to_string(&value).map_err(|e| {
            ActionError::Failed(Failure {
                code: "json".into(),
                message: format!("the result could not be encoded as JSON: {e}"),
            })
        }),
        Err(e) => Err(ActionError::Failed(e.into())),
    }
}

fn decode<T: DeserializeOwned>(
    index: usize,
    value: serde_json::Value,
) -> std::result::Result<T, ActionError> {
    serde_json::from_value(value)
        .map_err(|e| ActionError::InvalidArguments(format!("argument {}: {e}", index + 1)))
}

fn check_arity(expected: usize, got: usize) -> std::result::Result<(), ActionError> {
    if expected == got {
        Ok(())
    } else {
        Err(ActionError::InvalidArguments(format!(
            "expected {expected} argument{}, got {got}",
            if expected == 1 { "" } else { "s" }
        )))
    }
}

macro_rules! impl_action {
    ($n:expr; $($arg:ident),*) => {
        impl<F, R, $($arg),*> Action<($($arg,)*)> for F
        where
            F: Fn($($arg),*) -> Result<R>,
            R: Serialize,
            $($arg: DeserializeOwned,)*
        {
            #[allow(non_snake_case, unused_mut, unused_variables)]
            fn invoke(&self, args: Vec<serde_json::Value>) -> std::result::Result<String, ActionError> {
                check_arity($n, args.len())?;
                let mut args = args.into_iter().enumerate();
                $(
                    let (index, value) = args.next().expect("arity checked");
                    let $arg: $arg = decode(index, value)?;
                )*
                encode(self($($arg),*))
            }
        }
    };
}

impl_action!(0;);
impl_action!(1; A1);
impl_action!(2; A1, A2);
impl_action!(3; A1, A2, A3);
impl_action!(4; A1, A2, A3, A4);
impl_action!(5; A1, A2, A3, A4, A5);
impl_action!(6; A1, A2, A3, A4, A5, A6);
impl_action!(7; A1, A2, A3, A4, A5, A6, A7);
impl_action!(8; A1, A2, A3, A4, A5, A6, A7, A8);

#[doc(hidden)]
pub fn __parse_args(args: &str) -> std::result::Result<Vec<serde_json::Value>, ActionError> {
    match serde_json::from_str(args) {
        Ok(serde_json::Value::Array(items)) => Ok(items),
        Ok(_) => Err(ActionError::InvalidArguments(
            "arguments must be a JSON array".into(),
        )),
        Err(e) => Err(ActionError::InvalidArguments(format!(
            "arguments are not valid JSON: {e}"
        ))),
    }
}

#[doc(hidden)]
pub fn __action<Args, F: Action<Args>>(
    f: &F,
    args: Vec<serde_json::Value>,
) -> std::result::Result<String, ActionError> {
    f.invoke(args)
}

#[doc(hidden)]
pub fn __hook(f: fn() -> Result<()>) -> std::result::Result<(), Failure> {
    f().map_err(Into::into)
}

#[doc(hidden)]
pub fn __create<T: DeserializeOwned>(
    f: fn(T) -> Result<()>,
    input: &str,
) -> std::result::Result<(), Failure> {
    let input: T = serde_json::from_str(input).map_err(|e| Failure {
        code: "invalid-input".into(),
        message: format!("the create input does not fit: {e}"),
    })?;
    f(input).map_err(Into::into)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    fn add(a: i64, b: i64) -> Result<i64> {
        Ok(a + b)
    }

    fn refuse() -> Result<()> {
        Err(Error::new("no", "never"))
    }

    fn call<Args>(f: impl Action<Args>, args: &str) -> std::result::Result<String, ActionError> {
        f.invoke(__parse_args(args)?)
    }

    fn invalid(result: std::result::Result<String, ActionError>) -> String {
        match result {
            Err(ActionError::InvalidArguments(m)) => m,
            other => panic!("expected invalid arguments, got {other:?}"),
        }
    }

    #[test]
    fn arguments_are_decoded_and_results_encoded() {
        assert_eq!(call(add, "[2, 3]").unwrap(), "5");
        assert_eq!(call(|s: String| Ok(s.len()), "[\"four\"]").unwrap(), "4");
    }

    #[test]
    fn bad_arguments_say_what_is_wrong() {
        assert_eq!(invalid(call(add, "[1]")), "expected 2 arguments, got 1");
        assert_eq!(invalid(call(refuse, "[1]")), "expected 0 arguments, got 1");
        assert!(invalid(call(add, "[1, \"x\"]")).starts_with("argument 2:"));
        assert!(invalid(call(add, "{}")).contains("JSON array"));
        assert!(invalid(call(add, "[1,")).contains("not valid JSON"));
    }

    #[test]
    fn errors_keep_their_code_and_message() {
        match call(refuse, "[]") {
            Err(ActionError::Failed(Failure { code, message })) => {
                assert_eq!((code.as_str(), message.as_str()), ("no", "never"));
            }
            other => panic!("{other:?}"),
        }
    }
}
