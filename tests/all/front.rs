//! The HTTP front against hostile clients, before any token is checked:
//! a forged request between hosts with a large body, and cross-site
//! requests from a browser to a server without tokens. Every client is on
//! the loopback: 127.0.0.0/8 is all loopback on Linux, so an honest
//! client's sockets may come from 127.0.0.2.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use burrow::http::{Access, Serving};
use burrow::tokens::Tokens;
use futures_util::StreamExt;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio_tungstenite::tungstenite::{self, Message, client::IntoClientRequest};

use crate::support::*;

const ADMIN: &str = "admin-secret-0123456789";

const TOKENS: &str = r#"
    [tokens.ops]
    role = "admin"
    secret = "admin-secret-0123456789"
"#;

const HONEST: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));

fn with_tokens() -> Serving {
    Serving {
        access: Access::with_tokens(Tokens::parse(TOKENS).unwrap()),
        ..Serving::default()
    }
}

fn address(server: &Server) -> SocketAddr {
    server
        .url
        .trim_start_matches("http://")
        .parse()
        .expect("a server's address")
}

/// A TCP connection to `to` from the loopback address `from`.
async fn connect_from(from: IpAddr, to: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(from, 0))?;
    socket.connect(to).await
}

/// What the server did with a connection we hold.
#[derive(Debug, PartialEq)]
enum Seen {
    /// It closed it (end of stream or a reset).
    Closed,
    /// It sent these bytes.
    Answered(String),
    /// Nothing within the wait: it holds it open.
    Held,
}

async fn seen(stream: &mut TcpStream, wait: Duration) -> Seen {
    let mut buf = vec![0; 4096];
    match tokio::time::timeout(wait, stream.read(&mut buf)).await {
        Err(_) => Seen::Held,
        Ok(Ok(0) | Err(_)) => Seen::Closed,
        Ok(Ok(n)) => Seen::Answered(String::from_utf8_lossy(&buf[..n]).into_owned()),
    }
}

/// Sends one request on `stream` and reads its whole answer (the status
/// and the body, which the server sends with a length).
async fn exchange(stream: &mut TcpStream, request: &str) -> (u16, String) {
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let mut buf = vec![0; 4096];
    loop {
        let n = tokio::time::timeout(Duration::from_secs(30), stream.read(&mut buf))
            .await
            .expect("an answer")
            .unwrap();
        assert!(n > 0, "closed before the answer ended: {answer:?}");
        answer.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&answer);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length: usize = head
                .lines()
                .find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse().unwrap())
                })
                .unwrap_or(0);
            if body.len() >= length {
                let status = head.split(' ').nth(1).unwrap().parse().unwrap();
                return (status, body.to_owned());
            }
        }
    }
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A WebSocket to `path` from the loopback address `from`, without a
/// token; or the status and body of the refusal.
async fn websocket_from(
    from: IpAddr,
    to: SocketAddr,
    path: &str,
    origin: Option<&str>,
) -> Result<Socket, (u16, String)> {
    let mut request = format!("ws://{to}{path}").into_client_request().unwrap();
    if let Some(origin) = origin {
        request
            .headers_mut()
            .insert("origin", origin.parse().unwrap());
    }
    let stream = connect_from(from, to).await.unwrap();
    let stream = tokio_tungstenite::MaybeTlsStream::Plain(stream);
    match tokio_tungstenite::client_async(request, stream).await {
        Ok((socket, _)) => Ok(socket),
        Err(tungstenite::Error::Http(answer)) => Err((
            answer.status().as_u16(),
            String::from_utf8_lossy(answer.body().as_deref().unwrap_or_default()).into_owned(),
        )),
        Err(e) => panic!("{e}"),
    }
}

async fn next_text(socket: &mut Socket) -> Option<Value> {
    loop {
        match socket.next().await? {
            Ok(Message::Text(text)) => return Some(serde_json::from_str(&text).unwrap()),
            Ok(Message::Close(_)) | Err(_) => return None,
            Ok(_) => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_forged_request_between_hosts_is_refused_before_its_body_is_read() {
    for serving in [Serving::default(), with_tokens()] {
        let dir = tempfile::tempdir().unwrap();
        let host = start(dir.path(), &[counter()]).await;
        let server = Server::start_with(host.clone(), serving).await;
        let to = address(&server);
        // The head only: a megabyte is declared, none of it is sent.
        let mut stream = TcpStream::connect(to).await.unwrap();
        stream
            .write_all(
                format!(
                    "POST /actors/counter/forged/actions/increment HTTP/1.1\r\nHost: {to}\r\n\
                     x-burrow-forwarded: other-host\r\nx-burrow-caller: 00\r\n\
                     x-burrow-signature: 1.00\r\nContent-Length: 1000000\r\n\r\n"
                )
                .as_bytes(),
            )
            .await
            .unwrap();
        match seen(&mut stream, Duration::from_secs(10)).await {
            Seen::Answered(answer) => {
                assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
                assert!(answer.contains("runs alone"), "{answer}");
            }
            other => panic!("the forged request was not answered before its body: {other:?}"),
        }
        assert!(host.keys("counter").await.unwrap().is_empty());
        server.stop().await;
    }
}

/// A request's status and JSON answer, sent as a browser on another site
/// would send it (`origin`), or with another `Host`.
async fn request_as(
    to: SocketAddr,
    method: &str,
    path: &str,
    host: &str,
    origin: Option<&str>,
    token: Option<&str>,
) -> (u16, Value) {
    let mut stream = TcpStream::connect(to).await.unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 3\r\n");
    if let Some(origin) = origin {
        head.push_str(&format!("Origin: {origin}\r\n"));
    }
    if let Some(token) = token {
        head.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    let (status, body) = exchange(&mut stream, &format!("{head}\r\n[1]")).await;
    (
        status,
        serde_json::from_str(&body).unwrap_or(Value::String(body)),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_without_tokens_refuses_other_sites_and_other_hosts() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[counter(), chat_room()]).await;
    let server = Server::start(host.clone()).await;
    let to = address(&server);
    let own = to.to_string();
    let call = "/actors/counter/c/actions/increment";

    for (origin, hostname, code) in [
        (
            Some("http://evil.example"),
            own.as_str(),
            Some("cross-origin"),
        ),
        (Some("null"), own.as_str(), Some("cross-origin")),
        // Another port of the loopback is another site.
        (
            Some("http://127.0.0.1:1"),
            own.as_str(),
            Some("cross-origin"),
        ),
        // DNS rebinding: a name of the attacker's that points here.
        (None, "evil.example", Some("untrusted-host")),
        (
            Some("http://evil.example:7878"),
            "evil.example:7878",
            Some("untrusted-host"),
        ),
        // The inspector's own origin, and programs that send none.
        (Some(server.url.as_str()), own.as_str(), None),
        (None, own.as_str(), None),
        (None, &format!("localhost:{}", to.port()), None),
        (
            Some(&format!("http://localhost:{}", to.port())),
            &format!("localhost:{}", to.port()),
            None,
        ),
    ] {
        let (status, answer) = request_as(to, "POST", call, hostname, origin, None).await;
        let what = format!("Origin {origin:?}, Host {hostname}: {status} {answer}");
        match code {
            Some(code) => {
                assert_eq!(status, 403, "{what}");
                assert_eq!(answer["error"]["code"], code, "{what}");
            }
            None => assert_eq!(status, 200, "{what}"),
        }
    }
    // Only the allowed ones called.
    assert_eq!(call_value(&host).await, 4);
    for (method, path) in [
        ("DELETE", "/actors/counter/c"),
        ("POST", "/actors/counter/component/previous"),
        ("GET", "/actors/counter/c/state"),
    ] {
        let (status, answer) =
            request_as(to, method, path, &own, Some("http://evil.example"), None).await;
        assert_eq!(status, 403, "{method} {path}: {answer}");
    }
    assert_eq!(call_value(&host).await, 4);

    // WebSockets too: the inspector's own are let through.
    let path = "/actors/chat-room/lobby/connect?params=%7B%22name%22%3A%22ada%22%7D";
    let (status, body) = websocket_from(HONEST, to, path, Some("http://evil.example"))
        .await
        .expect_err("a cross-site WebSocket was let through");
    assert_eq!(status, 403, "{body}");
    let mut own_socket = websocket_from(HONEST, to, path, Some(&server.url))
        .await
        .unwrap();
    assert!(next_text(&mut own_socket).await.unwrap()["connected"].is_u64());
    drop(own_socket);
    server.stop().await;

    // A server with tokens answers by the token, as before: a browser
    // does not send one by itself.
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[counter()]).await;
    let server = Server::start_with(host, with_tokens()).await;
    let to = address(&server);
    let (status, answer) = request_as(
        to,
        "POST",
        call,
        "evil.example",
        Some("http://evil.example"),
        Some(ADMIN),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let (status, _) = request_as(
        to,
        "POST",
        call,
        &to.to_string(),
        Some("http://evil.example"),
        None,
    )
    .await;
    assert_eq!(status, 401);
    server.stop().await;
}

async fn call_value(host: &burrow::Host) -> i64 {
    host.call("counter", "c", "get", "[]")
        .await
        .map(|v| v.parse().unwrap())
        .unwrap_or(0)
}
