//! The HTTP front against hostile clients, before any token is checked:
//! slow and idle connections, many unauthenticated connections or
//! WebSockets from one address, a forged request between hosts with a
//! large body, and cross-site requests from a browser to a server without
//! tokens. Every client is on the loopback: 127.0.0.0/8 is all loopback on
//! Linux, so an attacker's sockets come from 127.0.0.1 and an honest
//! client's from 127.0.0.2.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use burrow::config::HttpLimits;
use burrow::http::{Access, Serving};
use burrow::tokens::Tokens;
use futures_util::SinkExt;
use serde_json::{Value, json};
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

const ATTACKER: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1));
const HONEST: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));

fn with_tokens(limits: HttpLimits) -> Serving {
    Serving {
        access: Access::with_tokens(Tokens::parse(TOKENS).unwrap()),
        limits,
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

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_client_is_dropped_at_its_header_timeout_while_others_are_served() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[counter()]).await;
    let limits = HttpLimits {
        header_timeout: Duration::from_secs(2),
        ..HttpLimits::default()
    };
    let server = Server::start_with(
        host.clone(),
        Serving {
            limits,
            ..Serving::default()
        },
    )
    .await;
    let to = address(&server);
    let request = format!("GET /healthz HTTP/1.1\r\nHost: {to}\r\n\r\n").into_bytes();
    let length = request.len();

    // A few bytes of the request line, then one byte a second.
    let mut slow = TcpStream::connect(to).await.unwrap();
    slow.write_all(&request[..5]).await.unwrap();
    let slow = tokio::spawn(async move {
        let mut sent = 5;
        let mut buf = vec![0; 4096];
        loop {
            tokio::select! {
                read = slow.read(&mut buf) => break match read {
                    Ok(0) | Err(_) => (Seen::Closed, sent),
                    Ok(n) => (Seen::Answered(String::from_utf8_lossy(&buf[..n]).into_owned()), sent),
                },
                () = tokio::time::sleep(Duration::from_secs(1)), if sent < request.len() => {
                    if slow.write_all(&request[sent..=sent]).await.is_err() {
                        break (Seen::Closed, sent);
                    }
                    sent += 1;
                }
            }
        }
    });

    // Others are served meanwhile, a call and a health check at a time.
    let client = server.client();
    let mut served = 0;
    while !slow.is_finished() {
        assert!(client.healthy().await);
        client
            .call("counter", "meanwhile", "increment", "[1]")
            .await
            .unwrap();
        served += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (seen, sent) = slow.await.unwrap();
    assert_eq!(
        seen,
        Seen::Closed,
        "the slow client was not dropped (it sent {sent} of {length} bytes)"
    );
    assert!(
        sent < length,
        "the slow client was dropped only after its whole request"
    );
    assert!(served > 0);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn idle_connections_are_closed_and_a_kept_alive_one_after_its_answer() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[counter()]).await;
    let limits = HttpLimits {
        idle_timeout: Duration::from_secs(1),
        ..HttpLimits::default()
    };
    let server = Server::start_with(
        host,
        Serving {
            limits,
            ..Serving::default()
        },
    )
    .await;
    let to = address(&server);
    // A connection that never sends a byte.
    let mut silent = TcpStream::connect(to).await.unwrap();
    // One that asks once and keeps the connection.
    let mut kept = TcpStream::connect(to).await.unwrap();
    let (status, _) = exchange(
        &mut kept,
        &format!("GET /healthz HTTP/1.1\r\nHost: {to}\r\n\r\n"),
    )
    .await;
    assert_eq!(status, 200);
    let wait = Duration::from_secs(20);
    assert_eq!(seen(&mut silent, wait).await, Seen::Closed);
    assert_eq!(seen(&mut kept, wait).await, Seen::Closed);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn unauthenticated_connections_past_the_caps_are_closed_and_other_addresses_are_served() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[counter()]).await;
    let limits = HttpLimits {
        max_unauthenticated_per_address: 20,
        max_tcp_connections_per_address: 40,
        ..HttpLimits::default()
    };
    let server = Server::start_with(host.clone(), with_tokens(limits)).await;
    let to = address(&server);
    let honest = crate::support::http_builder()
        .local_address(HONEST)
        .build()
        .unwrap();
    let call = format!("{}/actors/counter/honest/actions/increment", server.url);
    let served = async || {
        let answer = honest
            .post(&call)
            .bearer_auth(ADMIN)
            .body("[1]")
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status().as_u16(), 200);
    };

    // 1,000 connections from one address, each with a piece of a request
    // line and no token; the honest address is served meanwhile.
    let mut attack = Vec::new();
    for n in 0..1000 {
        let Ok(mut stream) = connect_from(ATTACKER, to).await else {
            continue;
        };
        let _ = stream.write_all(b"GET /actors HTT").await;
        attack.push(stream);
        if n % 100 == 0 {
            served().await;
        }
    }
    let outcomes = futures_util::future::join_all(
        attack
            .iter_mut()
            .map(|stream| seen(stream, Duration::from_secs(3))),
    )
    .await;
    let held = outcomes.iter().filter(|s| **s == Seen::Held).count();
    let closed = outcomes.iter().filter(|s| **s == Seen::Closed).count();
    assert!(
        held <= 20,
        "{held} of 1000 unauthenticated connections from one address were held open"
    );
    assert_eq!(held + closed, 1000, "{outcomes:?}");
    served().await;

    // Once they are gone, the address is served again; a connection that
    // made an authenticated request no longer waits for authentication,
    // so more of them than the cap on waiting ones stay open.
    drop(attack);
    let request =
        format!("GET /actors HTTP/1.1\r\nHost: {to}\r\nAuthorization: Bearer {ADMIN}\r\n\r\n");
    let mut kept = Vec::new();
    for _ in 0..30 {
        let mut stream = eventually(
            Duration::from_secs(10),
            "the attacker's connections released",
            async || {
                let mut stream = connect_from(ATTACKER, to).await.ok()?;
                stream.write_all(request.as_bytes()).await.ok()?;
                match seen(&mut stream, Duration::from_secs(5)).await {
                    Seen::Answered(answer) if answer.starts_with("HTTP/1.1 200") => Some(stream),
                    _ => None,
                }
            },
        )
        .await;
        // Read what is left of the answer, if anything.
        let _ = seen(&mut stream, Duration::from_millis(50)).await;
        kept.push(stream);
    }
    // 30 authenticated and open, so 10 more of any kind (at most 40).
    let mut more = Vec::new();
    for _ in 0..15 {
        if let Ok(stream) = connect_from(ATTACKER, to).await {
            more.push(stream);
        }
    }
    let outcomes = futures_util::future::join_all(
        more.iter_mut()
            .map(|stream| seen(stream, Duration::from_secs(3))),
    )
    .await;
    let held = outcomes.iter().filter(|s| **s == Seen::Held).count();
    assert_eq!(held, 10, "{outcomes:?}");
    // The authenticated ones still answer.
    for stream in &mut kept {
        let (status, _) = exchange(stream, &request).await;
        assert_eq!(status, 200);
    }
    served().await;
    server.stop().await;
}

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

#[tokio::test(flavor = "multi_thread")]
async fn websockets_waiting_for_their_token_past_the_caps_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[chat_room()]).await;
    let limits = HttpLimits {
        max_token_waits_per_address: 4,
        max_token_waits: 6,
        ..HttpLimits::default()
    };
    let server = Server::start_with(host.clone(), with_tokens(limits)).await;
    let to = address(&server);
    let path = "/actors/chat-room/lobby/connect?params=%7B%22name%22%3A%22ada%22%7D";

    let mut waiting = Vec::new();
    for _ in 0..4 {
        waiting.push(websocket_from(ATTACKER, to, path, None).await.unwrap());
    }
    for n in 5..=10 {
        let (status, body) = websocket_from(ATTACKER, to, path, None)
            .await
            .err()
            .unwrap_or_else(|| panic!("WebSocket {n} without a token was let through"));
        assert_eq!(status, 429, "{body}");
        assert!(body.contains("rate-limited"), "{body}");
    }
    // Another address has room of its own, up to the cap on all.
    for _ in 0..2 {
        waiting.push(websocket_from(HONEST, to, path, None).await.unwrap());
    }
    let (status, body) = websocket_from(HONEST, to, path, None).await.err().unwrap();
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("too-many-connections"), "{body}");
    // A token in the header waits for nothing, and is let through.
    let mut request = format!("ws://{to}{path}").into_client_request().unwrap();
    request
        .headers_mut()
        .insert("authorization", format!("Bearer {ADMIN}").parse().unwrap());
    let (mut with_header, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    assert!(next_text(&mut with_header).await.unwrap()["connected"].is_u64());

    // Those that send their token are served, and make room.
    for socket in &mut waiting {
        socket
            .send(Message::Text(json!({ "token": ADMIN }).to_string().into()))
            .await
            .unwrap();
        assert!(next_text(socket).await.unwrap()["connected"].is_u64());
    }
    let mut again = websocket_from(ATTACKER, to, path, None).await.unwrap();
    again
        .send(Message::Text(json!({ "token": ADMIN }).to_string().into()))
        .await
        .unwrap();
    assert!(next_text(&mut again).await.unwrap()["connected"].is_u64());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_forged_request_between_hosts_is_refused_before_its_body_is_read() {
    for serving in [Serving::default(), with_tokens(HttpLimits::default())] {
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
    let server = Server::start_with(host, with_tokens(HttpLimits::default())).await;
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
