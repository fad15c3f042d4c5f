//! A client for the HTTP API, used by the CLI and the tests.

use serde_json::Value;

/// An error answer from the server, or a failure to reach it.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ClientError {
    /// The HTTP status, or `None` if the server could not be reached.
    pub status: Option<u16>,
    /// The error code (`unreachable` when the server could not be reached).
    pub code: String,
    /// What went wrong.
    pub message: String,
}

/// A client of one Burrow server.
#[derive(Debug, Clone)]
pub struct Client {
    base: String,
    http: reqwest::Client,
}

/// Percent-encodes one path segment (keys may hold any text).
pub fn encode_segment(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for byte in segment.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

impl Client {
    /// A client of the server at `base` (such as `http://127.0.0.1:7878`).
    pub fn new(base: &str) -> Client {
        Client {
            base: base.trim_end_matches('/').to_owned(),
            http: reqwest::Client::new(),
        }
    }

    fn instance_url(&self, actor: &str, key: &str) -> String {
        format!(
            "{}/actors/{}/{}",
            self.base,
            encode_segment(actor),
            encode_segment(key)
        )
    }

    async fn request(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<(u16, String), ClientError> {
        let response = request.send().await.map_err(|e| ClientError {
            status: None,
            code: "unreachable".into(),
            message: format!("cannot reach the burrow server at {}: {e}", self.base),
        })?;
        let status = response.status().as_u16();
        let text = response.text().await.map_err(|e| ClientError {
            status: Some(status),
            code: "unreachable".into(),
            message: format!("the answer of {} broke off: {e}", self.base),
        })?;
        if (200..300).contains(&status) {
            return Ok((status, text));
        }
        let error: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let field = |name: &str| error["error"][name].as_str().map(str::to_owned);
        Err(ClientError {
            status: Some(status),
            code: field("code").unwrap_or_else(|| "http".into()),
            message: field("message").unwrap_or_else(|| format!("HTTP {status}: {text}")),
        })
    }

    /// Calls `action` with `args` (a JSON array as text); returns the JSON result text.
    pub async fn call(
        &self,
        actor: &str,
        key: &str,
        action: &str,
        args: &str,
    ) -> Result<String, ClientError> {
        let url = format!(
            "{}/actions/{}",
            self.instance_url(actor, key),
            encode_segment(action)
        );
        let request = self
            .http
            .post(url)
            .header("content-type", "application/json")
            .body(args.to_owned());
        Ok(self.request(request).await?.1)
    }

    /// Creates the instance with `input` (JSON text).
    pub async fn create(&self, actor: &str, key: &str, input: &str) -> Result<(), ClientError> {
        let request = self
            .http
            .put(self.instance_url(actor, key))
            .body(input.to_owned());
        self.request(request).await.map(drop)
    }

    /// Destroys the instance.
    pub async fn destroy(&self, actor: &str, key: &str) -> Result<(), ClientError> {
        self.request(self.http.delete(self.instance_url(actor, key)))
            .await
            .map(drop)
    }

    /// The instance's state.
    pub async fn state(&self, actor: &str, key: &str) -> Result<Value, ClientError> {
        let url = format!("{}/state", self.instance_url(actor, key));
        let (_, text) = self.request(self.http.get(url)).await?;
        Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// The instance's state and tables.
    pub async fn inspect(&self, actor: &str, key: &str) -> Result<Value, ClientError> {
        let (_, text) = self
            .request(self.http.get(self.instance_url(actor, key)))
            .await?;
        Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// The instance's workflow: status, what it waits for, and history.
    pub async fn workflow(&self, actor: &str, key: &str) -> Result<Value, ClientError> {
        let url = format!("{}/workflow", self.instance_url(actor, key));
        let (_, text) = self.request(self.http.get(url)).await?;
        Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// Appends an event to the instance's queue; with `options.wait`, waits
    /// for its processing. Returns the outcome: `{"status": "queued" |
    /// "processed" | "dead-lettered" | "timed-out", "id", ...}`.
    pub async fn send(
        &self,
        actor: &str,
        key: &str,
        event_type: &str,
        payload: &str,
        options: &crate::SendOptions,
    ) -> Result<Value, ClientError> {
        let payload: Value = serde_json::from_str(payload).map_err(|e| ClientError {
            status: None,
            code: "invalid-event".into(),
            message: format!("the payload is not valid JSON: {e}"),
        })?;
        let mut body = serde_json::json!({
            "type": event_type,
            "payload": payload,
            "priority": options.priority,
            "group": options.group,
        });
        if let Some(wait) = options.wait {
            body["wait"] = true.into();
            body["timeout_ms"] = (wait.as_millis() as u64).into();
        }
        let url = format!("{}/queue", self.instance_url(actor, key));
        let request = self
            .http
            .post(url)
            .header("content-type", "application/json")
            .body(body.to_string());
        let (_, text) = self.request(request).await?;
        Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// The instance's queue: policy, pending events and dead letters.
    pub async fn queue(&self, actor: &str, key: &str) -> Result<Value, ClientError> {
        let url = format!("{}/queue", self.instance_url(actor, key));
        let (_, text) = self.request(self.http.get(url)).await?;
        Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// Moves a dead letter back into the queue.
    pub async fn requeue(&self, actor: &str, key: &str, id: i64) -> Result<(), ClientError> {
        let url = format!(
            "{}/queue/dead-letters/{id}/requeue",
            self.instance_url(actor, key)
        );
        self.request(self.http.post(url)).await.map(drop)
    }

    /// Deletes a dead letter for good.
    pub async fn discard(&self, actor: &str, key: &str, id: i64) -> Result<(), ClientError> {
        let url = format!("{}/queue/dead-letters/{id}", self.instance_url(actor, key));
        self.request(self.http.delete(url)).await.map(drop)
    }

    /// Whether the server answers its health check.
    pub async fn healthy(&self) -> bool {
        self.request(self.http.get(format!("{}/healthz", self.base)))
            .await
            .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::encode_segment;

    #[test]
    fn segments_are_percent_encoded() {
        assert_eq!(encode_segment("plain-key_1.x~"), "plain-key_1.x~");
        assert_eq!(encode_segment("../a b"), "..%2Fa%20b");
        assert_eq!(encode_segment("ü\0"), "%C3%BC%00");
    }
}
