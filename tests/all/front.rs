//! The HTTP front against hostile clients, before any token is checked: a
//! forged request between hosts with a large body.

use std::net::SocketAddr;
use std::time::Duration;

use burrow::http::{Access, Serving};
use burrow::tokens::Tokens;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::*;

const TOKENS: &str = r#"
    [tokens.ops]
    role = "admin"
    secret = "admin-secret-0123456789"
"#;

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
