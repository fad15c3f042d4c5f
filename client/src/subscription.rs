//! [`Subscription`]: the events of one instance, over a WebSocket.

use std::time::Duration;

use futures_util::StreamExt;
use serde::Deserialize;
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::{ClientError, Hello, Lagged, Trust, decode};

/// How long [`Subscription::close`] (or the end of a subscription the
/// server closed) waits for the closing handshake to finish.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// What a [`Subscription`] receives.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// An event the instance broadcast; it went out once the call that
    /// broadcast it committed.
    Message {
        /// The event's name.
        name: String,
        /// Its payload.
        payload: Value,
    },
    /// The subscription was read too slowly, and the server dropped this
    /// many events (the oldest) for it.
    Lagged(u64),
}

/// A frame as the server sends it.
#[derive(Deserialize)]
#[serde(untagged)]
enum Frame {
    Event {
        event: String,
        #[serde(default)]
        payload: Value,
    },
    Lagged(Lagged),
}

impl Event {
    /// Parses a text frame of the server: `{"event": name, "payload": ...}`
    /// or `{"lagged": n}`.
    pub fn from_frame(text: &str) -> Result<Event, ClientError> {
        Ok(match decode(None, text, "the frame")? {
            Frame::Event { event, payload } => Event::Message {
                name: event,
                payload,
            },
            Frame::Lagged(Lagged { lagged }) => Event::Lagged(lagged),
        })
    }
}

/// A live connection to an instance's events, from
/// [`Instance::subscribe`](crate::Instance::subscribe). The server keeps
/// it until the instance is destroyed or the host shuts down; dropping it
/// breaks the connection off, [`close`](Subscription::close) ends it
/// cleanly. Either way the instance's disconnect hook runs.
#[derive(Debug)]
pub struct Subscription {
    id: u64,
    socket: WebSocketStream<MaybeTlsStream<TcpStream>>,
    base: String,
    done: bool,
}

impl Subscription {
    /// Opens the WebSocket at `url` (a `wss://` one verified with `trust`)
    /// and reads the server's first frame (`{"connected": id}`); `base`
    /// names the server in errors.
    pub(crate) async fn connect(
        url: &str,
        base: &str,
        trust: &Trust,
        token: Option<&str>,
    ) -> Result<Subscription, ClientError> {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        let connector = url.starts_with("wss://").then(|| trust.connector());
        let mut request = url.into_client_request().map_err(|e| ClientError {
            status: None,
            code: "invalid-arguments".into(),
            message: format!("{url} is not a WebSocket URL: {e}"),
        })?;
        if let Some(token) = token {
            let value = format!("Bearer {token}").parse().map_err(|_| ClientError {
                status: None,
                code: "invalid-arguments".into(),
                message: "the API token cannot be sent in a header".into(),
            })?;
            request.headers_mut().insert("authorization", value);
        }
        let connected =
            tokio_tungstenite::connect_async_tls_with_config(request, None, false, connector).await;
        let socket = match connected {
            Ok((socket, _)) => socket,
            Err(WsError::Http(response)) => {
                let status = response.status().as_u16();
                let body = response
                    .body()
                    .as_deref()
                    .map(String::from_utf8_lossy)
                    .unwrap_or_default();
                return Err(ClientError::from_answer(status, &body));
            }
            Err(e) => return Err(ClientError::unreachable(base, &e)),
        };
        let mut subscription = Subscription {
            id: 0,
            socket,
            base: base.to_owned(),
            done: false,
        };
        let hello = match subscription.next_text().await {
            Some(Ok(text)) => text,
            Some(Err(e)) => return Err(e),
            None => {
                return Err(ClientError {
                    status: None,
                    code: "disconnected".into(),
                    message: format!(
                        "the burrow server at {base} closed the connection before confirming it"
                    ),
                });
            }
        };
        let hello: Hello = decode(None, &hello, "the server's first frame")?;
        subscription.id = hello.connected;
        Ok(subscription)
    }

    /// The connection's id, unique within the server's run (the connect
    /// and disconnect hooks get it too).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The next event; `None` once the server has closed the connection
    /// (the instance was destroyed, or the host shut down). An error (code
    /// `disconnected`) means the connection broke off; `None` follows it.
    pub async fn next(&mut self) -> Option<Result<Event, ClientError>> {
        Some(
            self.next_text()
                .await?
                .and_then(|text| Event::from_frame(&text)),
        )
    }

    /// The next frame as the server sent it (JSON text, see
    /// [`Event::from_frame`]); `None` and errors as with
    /// [`next`](Subscription::next).
    pub async fn next_text(&mut self) -> Option<Result<String, ClientError>> {
        while !self.done {
            let error = match self.socket.next().await {
                Some(Ok(Message::Text(text))) => return Some(Ok(text.as_str().to_owned())),
                Some(Ok(Message::Close(_))) => {
                    self.finish().await;
                    return None;
                }
                // Pings are answered by the socket; nothing else is expected.
                Some(Ok(_)) => continue,
                None | Some(Err(WsError::ConnectionClosed | WsError::AlreadyClosed)) => {
                    self.done = true;
                    return None;
                }
                Some(Err(e)) => e,
            };
            self.done = true;
            return Some(Err(ClientError {
                status: None,
                code: "disconnected".into(),
                message: format!(
                    "the connection to the burrow server at {} broke off: {error}",
                    self.base
                ),
            }));
        }
        None
    }

    /// Closes the connection: sends a close frame and waits briefly for
    /// the server's.
    pub async fn close(mut self) {
        if self.done {
            return;
        }
        let _ = self.socket.close(None).await;
        self.finish().await;
    }

    /// Reads until the socket ends (which sends any pending close reply),
    /// for at most `CLOSE_WAIT`.
    async fn finish(&mut self) {
        self.done = true;
        let socket = &mut self.socket;
        let _ = tokio::time::timeout(CLOSE_WAIT, async {
            while let Some(Ok(_)) = socket.next().await {}
        })
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::Event;
    use serde_json::json;

    #[test]
    fn frames_parse_into_events() {
        assert_eq!(
            Event::from_frame(r#"{"event":"message","payload":{"text":"hi"}}"#).unwrap(),
            Event::Message {
                name: "message".into(),
                payload: json!({"text": "hi"}),
            }
        );
        assert_eq!(
            Event::from_frame(r#"{"lagged":7}"#).unwrap(),
            Event::Lagged(7)
        );
        let e = Event::from_frame(r#"{"what":1}"#).unwrap_err();
        assert_eq!(e.code, "invalid-response");
    }
}
