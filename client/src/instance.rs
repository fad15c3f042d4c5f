//! [`Instance`]: a typed handle on one actor instance.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::subscription::Subscription;
use crate::{Client, ClientError, SendOptions, SendOutcome, decode};

/// A handle on one instance of an actor (an actor name and a key), from
/// [`Client::actor`]. Arguments, inputs and payloads are serialized with
/// serde, results deserialized. Cloning it is cheap.
#[derive(Debug, Clone)]
pub struct Instance {
    client: Client,
    actor: String,
    key: String,
}

/// Serializes `args` into the JSON array text of a call: a tuple becomes
/// an array (`(5,)` is `[5]`), and `()` means no arguments (`[]`).
fn args_array<A: Serialize + ?Sized>(args: &A) -> Result<String, ClientError> {
    let text = serde_json::to_string(args).map_err(|e| {
        ClientError::local(
            "invalid-arguments",
            format!("the arguments do not serialize to JSON: {e}"),
        )
    })?;
    if text == "null" {
        Ok("[]".to_owned())
    } else if text.starts_with('[') {
        Ok(text)
    } else {
        Err(ClientError::local(
            "invalid-arguments",
            format!(
                "the arguments must serialize to a JSON array (a tuple such as `(5,)`, or `()` for none), not {text}"
            ),
        ))
    }
}

impl Instance {
    pub(crate) fn new(client: Client, actor: &str, key: &str) -> Instance {
        Instance {
            client,
            actor: actor.to_owned(),
            key: key.to_owned(),
        }
    }

    /// The actor's name.
    pub fn actor(&self) -> &str {
        &self.actor
    }

    /// The instance's key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The client this handle talks through.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Calls `action` with `args`, which must serialize to a JSON array: a
    /// tuple such as `&(5,)` or `&("ada", "hi")`, a slice or vector, or
    /// `&()` for no arguments. Deserializes the result into `R` (use
    /// [`serde_json::Value`] to take any result, `()` for a `null` one).
    pub async fn call<A, R>(&self, action: &str, args: &A) -> Result<R, ClientError>
    where
        A: Serialize + ?Sized,
        R: DeserializeOwned,
    {
        let args = args_array(args)?;
        let (status, text) = self
            .client
            .post_action(&self.actor, &self.key, action, args)
            .await?;
        decode(
            Some(status),
            &text,
            &format!("the result of {}.{action}", self.actor),
        )
    }

    /// Calls `action` with `args_json`, a JSON array as text (`"[5]"`);
    /// returns the result as JSON.
    pub async fn call_json(&self, action: &str, args_json: &str) -> Result<Value, ClientError> {
        let (status, text) = self
            .client
            .post_action(&self.actor, &self.key, action, args_json.to_owned())
            .await?;
        decode(
            Some(status),
            &text,
            &format!("the result of {}.{action}", self.actor),
        )
    }

    /// Creates the instance, passing `input` to its create hook (`&()`
    /// passes `null`). Fails with `already-exists` if it exists.
    pub async fn create<I: Serialize + ?Sized>(&self, input: &I) -> Result<(), ClientError> {
        let input = serde_json::to_string(input).map_err(|e| {
            ClientError::local(
                "invalid-arguments",
                format!("the create input does not serialize to JSON: {e}"),
            )
        })?;
        self.client.create(&self.actor, &self.key, &input).await
    }

    /// Destroys the instance and all its data; its subscriptions end.
    pub async fn destroy(&self) -> Result<(), ClientError> {
        self.client.destroy(&self.actor, &self.key).await
    }

    /// The instance's state (`null` if it has none).
    pub async fn state(&self) -> Result<Value, ClientError> {
        self.client.state(&self.actor, &self.key).await
    }

    /// The instance's state and tables.
    pub async fn inspect(&self) -> Result<Value, ClientError> {
        self.client.inspect(&self.actor, &self.key).await
    }

    /// The instance's workflow: status, what it waits for, and history.
    pub async fn workflow(&self) -> Result<Value, ClientError> {
        self.client.workflow(&self.actor, &self.key).await
    }

    /// Appends an event of `event_type` with `payload` to the instance's
    /// queue. With `options.wait`, waits that long for its processing to
    /// commit; the outcome then tells how it ended.
    pub async fn send<P: Serialize + ?Sized>(
        &self,
        event_type: &str,
        payload: &P,
        options: &SendOptions,
    ) -> Result<SendOutcome, ClientError> {
        let (status, text) = self
            .client
            .post_event(&self.actor, &self.key, event_type, payload, options)
            .await?;
        decode(Some(status), &text, "the outcome of the send")
    }

    /// The instance's queue: policy, pending events and dead letters.
    pub async fn queue(&self) -> Result<Value, ClientError> {
        self.client.queue(&self.actor, &self.key).await
    }

    /// Moves dead letter `id` back into the queue, its attempts reset.
    pub async fn requeue(&self, id: i64) -> Result<(), ClientError> {
        self.client.requeue(&self.actor, &self.key, id).await
    }

    /// Deletes dead letter `id` for good.
    pub async fn discard(&self, id: i64) -> Result<(), ClientError> {
        self.client.discard(&self.actor, &self.key, id).await
    }

    /// Connects to the instance's events over a WebSocket, passing `params`
    /// to its connect hook. Fails with the server's error if the upgrade is
    /// refused: `connection-refused` (status 403) when the connect hook
    /// refuses, `unknown-actor` (404), `invalid-arguments` (400).
    pub async fn subscribe(&self, params: Option<&Value>) -> Result<Subscription, ClientError> {
        let url = self.client.connect_url(&self.actor, &self.key, params);
        Subscription::connect(
            &url,
            self.client.base_url(),
            &self.client.trust,
            self.client.token.as_deref(),
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::args_array;

    #[test]
    fn arguments_serialize_to_a_json_array() {
        assert_eq!(args_array(&()).unwrap(), "[]");
        assert_eq!(args_array(&(5,)).unwrap(), "[5]");
        assert_eq!(args_array(&("ada", 2)).unwrap(), r#"["ada",2]"#);
        assert_eq!(args_array(&[1, 2][..]).unwrap(), "[1,2]");
        assert_eq!(args_array(&Vec::<i32>::new()).unwrap(), "[]");
        let e = args_array(&5).unwrap_err();
        assert_eq!((e.status, e.code.as_str()), (None, "invalid-arguments"));
        assert!(args_array(&serde_json::json!({"a": 1})).is_err());
    }
}
