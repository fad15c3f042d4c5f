//! Who may do what over HTTP: API tokens with roles, every route with no
//! token, a client token, an admin token and a wrong one; WebSockets with a
//! token in a header or in their first message; limits per token; headers
//! only hosts of a cluster may send.

use burrow::http::{Access, Serving};
use burrow::tokens::Tokens;
use futures_util::SinkExt;
use reqwest::Method;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::{self, Message, client::IntoClientRequest};

use crate::support::*;

const ADMIN: &str = "admin-secret-0123456789";
const CLIENT: &str = "client-secret-0123456789";
const WRONG: &str = "wrong-secret-0123456789";

const TOKENS: &str = r#"
    [tokens.ops]
    role = "admin"
    secret = "admin-secret-0123456789"

    [tokens.web]
    role = "client"
    secret = "client-secret-0123456789"
    actors = ["counter", "chat-room"]
"#;

fn serving(tokens: &str) -> Serving {
    Serving {
        access: Access::with_tokens(Tokens::parse(tokens).unwrap()),
        ..Serving::default()
    }
}

/// Who sends a request.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Who {
    Nobody,
    Client,
    Admin,
    Wrong,
}

const EVERYONE: [Who; 4] = [Who::Nobody, Who::Client, Who::Admin, Who::Wrong];

impl Who {
    fn name(self) -> &'static str {
        match self {
            Who::Nobody => "nobody",
            Who::Client => "client",
            Who::Admin => "admin",
            Who::Wrong => "wrong",
        }
    }

    fn token(self) -> Option<&'static str> {
        match self {
            Who::Nobody => None,
            Who::Client => Some(CLIENT),
            Who::Admin => Some(ADMIN),
            Who::Wrong => Some(WRONG),
        }
    }
}

async fn send(
    url: &str,
    who: Who,
    method: Method,
    path: &str,
    body: &str,
) -> (u16, reqwest::header::HeaderMap, Value) {
    let mut request = crate::support::http()
        .request(method, format!("{url}{path}"))
        .body(body.to_owned());
    if let Some(token) = who.token() {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().await.unwrap();
    (
        status,
        headers,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// Who a route lets through.
#[derive(Debug, Clone, Copy)]
enum Open {
    All,
    Clients,
    Admins,
}

#[tokio::test(flavor = "multi_thread")]
async fn every_route_answers_each_role_and_a_refusal_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[counter(), probe()]).await;
    let server = Server::start_with(host.clone(), serving(TOKENS)).await;
    host.call("counter", "seen", "increment", "[1]")
        .await
        .unwrap();

    // `{who}` stands for the sender's name: each gets a key of its own.
    let routes: &[(Method, &str, &str, Open)] = &[
        (Method::GET, "/healthz", "", Open::All),
        (Method::GET, "/readyz", "", Open::All),
        (Method::GET, "/ui/", "", Open::All),
        (Method::GET, "/metrics", "", Open::Admins),
        (Method::GET, "/cluster", "", Open::Admins),
        (Method::GET, "/actors", "", Open::Admins),
        (Method::GET, "/actors/counter", "", Open::Admins),
        (Method::GET, "/actors/counter/component", "", Open::Admins),
        (
            Method::PUT,
            "/actors/counter/component",
            "not wasm",
            Open::Admins,
        ),
        (
            Method::POST,
            "/actors/counter/component/previous",
            "",
            Open::Admins,
        ),
        (Method::PUT, "/actors/counter/{who}", "null", Open::Clients),
        (
            Method::POST,
            "/actors/counter/{who}/actions/increment",
            "[2]",
            Open::Clients,
        ),
        (
            Method::POST,
            "/actors/counter/{who}/queue",
            r#"{"type": "t"}"#,
            Open::Clients,
        ),
        (Method::GET, "/actors/counter/seen", "", Open::Admins),
        (Method::GET, "/actors/counter/seen/state", "", Open::Admins),
        (Method::GET, "/actors/counter/seen/export", "", Open::Admins),
        (
            Method::POST,
            "/actors/counter/seen/fork",
            r#"{"key": "seen-fork"}"#,
            Open::Admins,
        ),
        (Method::POST, "/actors/counter/seen/pause", "", Open::Admins),
        (
            Method::POST,
            "/actors/counter/seen/resume",
            "",
            Open::Admins,
        ),
        (Method::GET, "/actors/counter/seen/tables", "", Open::Admins),
        (
            Method::GET,
            "/actors/counter/seen/tables/counter",
            "",
            Open::Admins,
        ),
        (
            Method::GET,
            "/actors/counter/seen/schedules",
            "",
            Open::Admins,
        ),
        (Method::GET, "/actors/counter/seen/queue", "", Open::Admins),
        (
            Method::GET,
            "/actors/counter/seen/workflow",
            "",
            Open::Admins,
        ),
        (
            Method::POST,
            "/actors/counter/seen/queue/dead-letters/1/requeue",
            "",
            Open::Admins,
        ),
        (
            Method::DELETE,
            "/actors/counter/seen/queue/dead-letters/1",
            "",
            Open::Admins,
        ),
        (
            Method::GET,
            "/actors/counter/seen/connect",
            "",
            Open::Clients,
        ),
        // The counter has no HTTP handler: a 404 for whoever may ask.
        (
            Method::POST,
            "/actors/counter/seen/http/hook",
            "",
            Open::Clients,
        ),
        (Method::GET, "/actors/counter/seen/http", "", Open::Clients),
        (Method::DELETE, "/actors/counter/{who}", "", Open::Admins),
        // The client token names only `counter` and `chat-room`.
        (
            Method::POST,
            "/actors/probe/{who}/actions/bump",
            "",
            Open::Admins,
        ),
        (Method::PUT, "/actors/probe/{who}", "null", Open::Admins),
        (Method::PUT, "/actors/probe/seen/http/x", "", Open::Admins),
    ];
    for (method, path, body, open) in routes {
        for who in EVERYONE {
            let path = path.replace("{who}", who.name());
            let (status, headers, answer) =
                send(&server.url, who, method.clone(), &path, body).await;
            let what = format!("{method} {path} by {who:?}: {status} {answer}");
            let allowed = matches!(
                (open, who),
                (Open::All, _)
                    | (Open::Clients, Who::Client | Who::Admin)
                    | (Open::Admins, Who::Admin)
            );
            if allowed {
                assert!(![401, 403, 429].contains(&status), "{what}");
                continue;
            }
            let expected = match who {
                Who::Client => 403,
                _ => 401,
            };
            assert_eq!(status, expected, "{what}");
            let code = if expected == 401 {
                "unauthenticated"
            } else {
                "forbidden"
            };
            assert_eq!(answer["error"]["code"], code, "{what}");
            if expected == 401 {
                assert_eq!(headers["www-authenticate"], "Bearer", "{what}");
            }
        }
    }

    // What was let through did its work; what was refused did nothing.
    for who in [Who::Client, Who::Admin] {
        // Created, incremented, then destroyed by the admin only.
        let alive = host
            .keys("counter")
            .await
            .unwrap()
            .contains(&who.name().to_owned());
        assert_eq!(alive, who == Who::Client, "{who:?}");
    }
    for who in [Who::Nobody, Who::Wrong] {
        assert!(
            !host
                .keys("counter")
                .await
                .unwrap()
                .contains(&who.name().to_owned())
        );
    }
    assert_eq!(
        host.call("counter", "client", "get", "[]").await.unwrap(),
        "2"
    );
    assert_eq!(host.keys("probe").await.unwrap(), vec!["admin".to_owned()]);
    assert_eq!(
        host.call("counter", "seen", "get", "[]").await.unwrap(),
        "1"
    );
    assert!(
        host.keys("counter")
            .await
            .unwrap()
            .contains(&"seen".to_owned())
    );

    // A token sent another way than as a bearer is refused as such.
    let answer = crate::support::http()
        .get(format!("{}/actors", server.url))
        .basic_auth("ops", Some(ADMIN))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 401);
    let text = answer.text().await.unwrap();
    assert!(text.contains("Bearer <token>"), "{text}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn actions_and_internal_actions_see_the_token_that_called_them() {
    let dir = tempfile::tempdir().unwrap();
    let talk = burrow::manifest::ActorSpec::new("talk", programs::TALK_PROBE);
    let host = start(dir.path(), &[talk]).await;
    let tokens = TOKENS.replace("\"counter\", \"chat-room\"", "\"talk\"");
    let server = Server::start_with(host.clone(), serving(&tokens)).await;
    let whoami = async |who: Who| {
        send(
            &server.url,
            who,
            Method::POST,
            "/actors/talk/t/actions/whoami",
            "[]",
        )
        .await
    };
    assert_eq!(
        whoami(Who::Client).await.2,
        json!({"client": {"name": "web", "role": "client"}})
    );
    assert_eq!(
        whoami(Who::Admin).await.2,
        json!({"client": {"name": "ops", "role": "admin"}})
    );
    // An internal action is unknown to every client, admins too.
    for who in [Who::Client, Who::Admin] {
        let (status, _, answer) = send(
            &server.url,
            who,
            Method::POST,
            "/actors/talk/t/actions/guarded",
            r#"["from outside"]"#,
        )
        .await;
        assert_eq!(
            (status, &answer["error"]["code"]),
            (404, &json!("unknown-action"))
        );
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_can_be_opened_to_scrapers_without_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[counter()]).await;
    let serving = Serving {
        access: Access::with_tokens(Tokens::parse(TOKENS).unwrap()).open_metrics(true),
        ..Serving::default()
    };
    let server = Server::start_with(host, serving).await;
    let (status, _, answer) = send(&server.url, Who::Nobody, Method::GET, "/metrics", "").await;
    assert_eq!(status, 200);
    assert!(answer.as_str().unwrap().contains("burrow_calls_total"));
    let (status, _, _) = send(&server.url, Who::Nobody, Method::GET, "/actors", "").await;
    assert_eq!(status, 401);
    server.stop().await;
}

/// Opens a WebSocket to `path` with `token` in its header, if any.
async fn websocket(
    url: &str,
    path: &str,
    token: Option<&str>,
) -> Result<
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
    (u16, String),
> {
    let url = format!("{}{path}", url.replacen("http://", "ws://", 1));
    let mut request = url.into_client_request().unwrap();
    if let Some(token) = token {
        request
            .headers_mut()
            .insert("authorization", format!("Bearer {token}").parse().unwrap());
    }
    match tokio_tungstenite::connect_async(request).await {
        Ok((socket, _)) => Ok(socket),
        Err(tungstenite::Error::Http(answer)) => Err((
            answer.status().as_u16(),
            String::from_utf8_lossy(answer.body().as_deref().unwrap_or_default()).into_owned(),
        )),
        Err(e) => panic!("{e}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_websocket_brings_its_token_in_a_header_or_as_its_first_message() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[chat_room(), probe()]).await;
    let tokens = format!(
        "{TOKENS}
        [tokens.one-socket]
        role = \"client\"
        secret = \"one-socket-0123456789\"
        connections = 1
        "
    );
    let server = Server::start_with(host.clone(), serving(&tokens)).await;
    let path = "/actors/chat-room/lobby/connect?params=%7B%22name%22%3A%22ada%22%7D";

    // A header, as programs send it.
    let mut socket = websocket(&server.url, path, Some(CLIENT)).await.unwrap();
    assert!(next_text(&mut socket).await.unwrap()["connected"].is_u64());
    let (status, body) = websocket(&server.url, path, Some(WRONG)).await.unwrap_err();
    assert_eq!(status, 401, "{body}");
    let (status, body) = websocket(&server.url, "/actors/probe/p/connect", Some(CLIENT))
        .await
        .unwrap_err();
    assert_eq!(status, 403, "{body}");

    // The first message, as browsers send it.
    let mut browser = websocket(&server.url, path, None).await.unwrap();
    browser
        .send(Message::Text(json!({ "token": CLIENT }).to_string().into()))
        .await
        .unwrap();
    assert!(next_text(&mut browser).await.unwrap()["connected"].is_u64());
    host.call("chat-room", "lobby", "post", r#"["ada", "hello"]"#)
        .await
        .unwrap();
    // Its own `joined` comes first.
    loop {
        let event = next_text(&mut browser).await.unwrap();
        if event["event"] == "message" {
            assert_eq!(event["payload"]["text"], "hello", "{event}");
            break;
        }
    }

    for (first, code) in [
        (json!({ "token": WRONG }).to_string(), "unauthenticated"),
        ("not json".to_owned(), "unauthenticated"),
    ] {
        let mut refused = websocket(&server.url, path, None).await.unwrap();
        refused.send(Message::Text(first.into())).await.unwrap();
        let answer = next_text(&mut refused).await.unwrap();
        assert_eq!(answer["error"]["code"], code, "{answer}");
        assert!(next_text(&mut refused).await.is_none());
    }
    let mut elsewhere = websocket(&server.url, "/actors/probe/p/connect", None)
        .await
        .unwrap();
    elsewhere
        .send(Message::Text(json!({ "token": CLIENT }).to_string().into()))
        .await
        .unwrap();
    let answer = next_text(&mut elsewhere).await.unwrap();
    assert_eq!(answer["error"]["code"], "forbidden", "{answer}");

    // One open WebSocket at a time for this token, by either way.
    let mut only = websocket(&server.url, path, Some("one-socket-0123456789"))
        .await
        .unwrap();
    assert!(next_text(&mut only).await.unwrap()["connected"].is_u64());
    let (status, body) = websocket(&server.url, path, Some("one-socket-0123456789"))
        .await
        .unwrap_err();
    assert_eq!(status, 429, "{body}");
    assert!(body.contains("one-socket"), "{body}");
    let mut second = websocket(&server.url, path, None).await.unwrap();
    second
        .send(Message::Text(
            json!({ "token": "one-socket-0123456789" })
                .to_string()
                .into(),
        ))
        .await
        .unwrap();
    assert_eq!(
        next_text(&mut second).await.unwrap()["error"]["code"],
        "rate-limited"
    );
    // Closing the first makes room.
    only.close(None).await.unwrap();
    drop(only);
    eventually(
        std::time::Duration::from_secs(5),
        "room for a socket",
        async || {
            websocket(&server.url, path, Some("one-socket-0123456789"))
                .await
                .ok()
        },
    )
    .await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_past_its_rate_is_told_to_retry_and_others_are_not_held_back() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[counter()]).await;
    let tokens = format!(
        "{TOKENS}
        [tokens.slow]
        role = \"client\"
        secret = \"slow-secret-0123456789\"
        rate = 5
        "
    );
    let server = Server::start_with(host.clone(), serving(&tokens)).await;
    let http = crate::support::http();
    let url = format!("{}/actors/counter/rated/actions/increment", server.url);
    let mut limited = 0;
    let mut message = String::new();
    for _ in 0..40 {
        let answer = http
            .post(&url)
            .bearer_auth("slow-secret-0123456789")
            .body("[1]")
            .send()
            .await
            .unwrap();
        if answer.status().as_u16() == 429 {
            limited += 1;
            message = answer.text().await.unwrap();
        }
    }
    assert!(limited >= 20, "only {limited} of 40 were limited");
    assert!(message.contains("token `slow`"), "{message}");
    assert!(message.contains("5 requests per second"), "{message}");
    // Only the calls let through counted.
    let value: i64 = host
        .call("counter", "rated", "get", "[]")
        .await
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(value, 40 - limited);
    // Another token is not held back.
    for _ in 0..20 {
        let answer = http
            .post(&url)
            .bearer_auth(CLIENT)
            .body("[1]")
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status().as_u16(), 200);
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn headers_only_hosts_of_a_cluster_send_are_refused_from_anyone_else() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[counter()]).await;
    // Without tokens too: a forged chain would let a client pass for an
    // actor.
    let server = Server::start(host.clone()).await;
    let http = crate::support::http();
    for (name, value) in [
        ("x-burrow-forwarded", "some-host"),
        ("x-burrow-chain", r#"[["counter", "a"]]"#),
        ("x-burrow-caller", "00"),
        ("x-burrow-signature", "1.00"),
        ("x-burrow-http-headers", r#"[["x-signature", "forged"]]"#),
    ] {
        let answer = http
            .post(format!(
                "{}/actors/counter/forged/actions/increment",
                server.url
            ))
            .header(name, value)
            .body("[1]")
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status().as_u16(), 401, "{name}");
        let text = answer.text().await.unwrap();
        assert!(text.contains("signed by a host of this cluster"), "{text}");
    }
    assert!(host.keys("counter").await.unwrap().is_empty());
    server.stop().await;
}

fn burrow_serve(manifest: &std::path::Path, args: &[&str]) -> std::process::Child {
    crate::support::burrow_command()
        .arg("--manifest")
        .arg(manifest)
        .arg("serve")
        .args(args)
        .env("BURROW_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// The status `GET path` on the loopback at `port` answers, if it does.
fn status_of(port: u16, path: &str) -> Option<u16> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    answer.split(' ').nth(1)?.parse().ok()
}

/// Waits for `child` to end (at most 60 s): its status and stderr.
fn ended(child: std::process::Child) -> (std::process::ExitStatus, String) {
    let output = child.wait_with_output().unwrap();
    (
        output.status,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn the_library_refuses_an_address_others_reach_without_tokens_unless_told() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[counter()]).await;
    let anywhere = || async { tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap() };
    let refused = burrow::http::serve_on(host.clone(), anywhere().await, async {})
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("refusing to serve on 0.0.0.0"),
        "{refused}"
    );
    assert!(refused.contains("Access::with_tokens"), "{refused}");
    // The host was not shut down: it still answers.
    assert_eq!(call(&host, "counter", "c", "increment", "[1]").await, 1);

    // With tokens, or told, it serves (here until its shutdown, at once).
    for access in [
        Access::with_tokens(Tokens::parse(TOKENS).unwrap()),
        Access::open().insecure_no_auth(),
    ] {
        let serving = Serving {
            access,
            ..Serving::default()
        };
        burrow::http::serve_with(host.clone(), anywhere().await, serving, async {})
            .await
            .unwrap();
    }
}

#[test]
fn serve_refuses_an_address_others_reach_without_tokens_unless_told() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("burrow.toml");
    std::fs::write(
        &manifest,
        format!(
            "[host]\ndata_dir = \"data\"\n\n[actors.counter]\ncomponent = {:?}\n",
            programs::COUNTER
        ),
    )
    .unwrap();
    let everywhere = format!("0.0.0.0:{}", free_port());

    let (status, stderr) = ended(burrow_serve(&manifest, &["--listen", &everywhere]));
    assert!(!status.success());
    assert!(stderr.contains("refusing to serve on 0.0.0.0"), "{stderr}");
    assert!(stderr.contains("--tokens"), "{stderr}");

    let missing = dir.path().join("missing.toml");
    let (status, stderr) = ended(burrow_serve(
        &manifest,
        &[
            "--listen",
            &everywhere,
            "--tokens",
            missing.to_str().unwrap(),
        ],
    ));
    assert!(!status.success());
    assert!(stderr.contains("cannot read the tokens file"), "{stderr}");
    assert!(stderr.contains("missing.toml"), "{stderr}");

    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[tokens.a]\nrole = \"client\"\nsecret = \"short\"\n").unwrap();
    let (status, stderr) = ended(burrow_serve(
        &manifest,
        &["--listen", &everywhere, "--tokens", bad.to_str().unwrap()],
    ));
    assert!(!status.success());
    assert!(
        stderr.contains("bad.toml") && stderr.contains("shorter than 16"),
        "{stderr}"
    );

    // Told, it serves, with a warning.
    let port = free_port();
    let mut child = burrow_serve(
        &manifest,
        &["--listen", &format!("0.0.0.0:{port}"), "--insecure-no-auth"],
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(std::time::Instant::now() < deadline, "serve did not start");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.kill().unwrap();
    let (_, stderr) = ended(child);
    assert!(stderr.contains("--insecure-no-auth"), "{stderr}");

    // With the manifest's tokens file (relative to it), on any address.
    std::fs::write(dir.path().join("tokens.toml"), TOKENS).unwrap();
    std::fs::write(
        &manifest,
        format!(
            "[host]\ndata_dir = \"data\"\ntokens = \"tokens.toml\"\n\n\
             [actors.counter]\ncomponent = {:?}\n",
            programs::COUNTER
        ),
    )
    .unwrap();
    let port = free_port();
    let mut child = burrow_serve(&manifest, &["--listen", &format!("0.0.0.0:{port}")]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let answer = loop {
        if let Some(status) = status_of(port, "/actors") {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "serve did not start");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(answer, 401);

    // The CLI sends its token from the flag or the environment.
    let url = format!("http://127.0.0.1:{port}");
    let call = |token: Option<(&str, &str)>| {
        let mut command = crate::support::burrow_command();
        command
            .arg("--manifest")
            .arg(&manifest)
            .args(["call", "counter", "c", "increment", "[1]", "--url", &url])
            .env_remove("BURROW_TOKEN");
        match token {
            Some(("flag", token)) => {
                command.args(["--token", token]);
            }
            Some((_, token)) => {
                command.env("BURROW_TOKEN", token);
            }
            None => {}
        }
        command.output().unwrap()
    };
    let refused = call(None);
    assert_eq!(refused.status.code(), Some(10));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("API token"));
    let wrong = call(Some(("flag", WRONG)));
    assert_eq!(wrong.status.code(), Some(10));
    let by_flag = call(Some(("flag", CLIENT)));
    assert!(by_flag.status.success(), "{by_flag:?}");
    assert_eq!(String::from_utf8_lossy(&by_flag.stdout).trim(), "1");
    let by_env = call(Some(("env", CLIENT)));
    assert!(by_env.status.success(), "{by_env:?}");
    assert_eq!(String::from_utf8_lossy(&by_env.stdout).trim(), "2");
    child.kill().unwrap();
    child.wait().unwrap();
}
