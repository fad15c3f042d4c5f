//! HTTPS: a server with a certificate and key from files (made here by a
//! CA of the test), clients that trust the CA and one that does not,
//! WebSockets over TLS, plain HTTP to the TLS port, a pair replaced while
//! the server runs, and bad pairs at startup.

use std::path::{Path, PathBuf};
use std::time::Duration;

use burrow::http::{RELOAD_POLL, Serving, Tls};
use burrow_client::{Client, ClientError, Trust};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use serde_json::json;

use crate::client::expect_event;
use crate::support::*;

/// A CA and a server certificate it signed for `localhost` and
/// `127.0.0.1`, as PEM.
pub(crate) struct Pki {
    pub(crate) ca: String,
    pub(crate) cert: String,
    pub(crate) key: String,
}

impl Pki {
    /// A new CA named `name` and a server certificate of its own.
    pub(crate) fn new(name: &str) -> Pki {
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, format!("Burrow test CA {name}"));
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca_params, ca_key);
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, "burrow test server");
        let cert = params.signed_by(&key, &issuer).unwrap();
        Pki {
            ca: ca.pem(),
            cert: cert.pem(),
            key: key.serialize_pem(),
        }
    }

    /// Writes the server's certificate and key to `cert.pem` and
    /// `key.pem`, and the CA's certificate to `ca.pem`, in `dir`; the
    /// three paths.
    pub(crate) fn write(&self, dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
        let paths = (
            dir.join("cert.pem"),
            dir.join("key.pem"),
            dir.join("ca.pem"),
        );
        std::fs::write(&paths.0, &self.cert).unwrap();
        std::fs::write(&paths.1, &self.key).unwrap();
        std::fs::write(&paths.2, &self.ca).unwrap();
        paths
    }

    /// A client of `url` that trusts this CA (and the system's roots).
    fn client(&self, url: &str) -> Client {
        Client::with_trust(
            url,
            Trust::system().with_ca_pem(self.ca.as_bytes()).unwrap(),
        )
    }
}

/// A server of `actors` over TLS with the pair in `cert` and `key`.
async fn serve_tls(
    data: &Path,
    actors: &[burrow::manifest::ActorSpec],
    cert: &Path,
    key: &Path,
) -> Server {
    let tls = Tls::load(cert, key).expect("the pair loads");
    let serving = Serving {
        tls: Some(tls),
        ..Serving::default()
    };
    Server::start_with(start(data, actors).await, serving).await
}

/// `increment(1)` on counter `c` of `server`, by a client trusting `pki`.
async fn increment(pki: &Pki, server: &Server) -> i64 {
    pki.client(&server.url)
        .actor("counter", "c")
        .call("increment", &(1,))
        .await
        .unwrap()
}

/// The error of a client that could not make its TLS connection: no
/// answer, and a message that says it is the certificate.
fn assert_untrusted(e: &ClientError) {
    assert_eq!((e.status, e.code.as_str()), (None, "unreachable"), "{e}");
    assert!(
        e.message.contains("certificate") && e.message.contains("BURROW_CA_CERT"),
        "the message says the certificate is not trusted, and what to do: {e}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn calls_and_websockets_over_tls_need_a_trusted_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new("a");
    let (cert, key, _) = pki.write(dir.path());
    let server = serve_tls(
        &dir.path().join("data"),
        &[counter(), chat_room()],
        &cert,
        &key,
    )
    .await;
    assert!(
        server.url.starts_with("https://127.0.0.1:"),
        "{}",
        server.url
    );

    // A client that trusts the CA: calls, by address and by name.
    let client = pki.client(&server.url);
    let value: i64 = client
        .actor("counter", "c")
        .call("increment", &(2,))
        .await
        .unwrap();
    assert_eq!(value, 2);
    let by_name = server.url.replace("127.0.0.1", "localhost");
    let value: i64 = pki
        .client(&by_name)
        .actor("counter", "c")
        .call("increment", &(3,))
        .await
        .unwrap();
    assert_eq!(value, 5);

    // A WebSocket over TLS (wss://) gets its events.
    let room = client.actor("chat-room", "lobby");
    let mut ada = room
        .subscribe(Some(&json!({ "name": "ada" })))
        .await
        .unwrap();
    assert_eq!(
        expect_event(&mut ada, "joined").await,
        json!({ "name": "ada" })
    );
    let _: i64 = room.call("post", &("bob", "over tls")).await.unwrap();
    let message = expect_event(&mut ada, "message").await;
    assert_eq!(message["text"], "over tls");
    ada.close().await;

    // A client that trusts only the system's roots is refused, calls and
    // WebSockets alike, and nothing ran.
    let stranger = Client::new(&server.url);
    let e = stranger
        .actor("counter", "c")
        .call::<_, i64>("increment", &(100,))
        .await
        .unwrap_err();
    assert_untrusted(&e);
    let e = stranger
        .actor("chat-room", "lobby")
        .subscribe(Some(&json!({ "name": "eve" })))
        .await
        .unwrap_err();
    assert_untrusted(&e);
    // A client that trusts another CA is refused the same way.
    let e = Pki::new("other")
        .client(&server.url)
        .actor("counter", "c")
        .call::<_, i64>("get", &())
        .await
        .unwrap_err();
    assert_untrusted(&e);

    // Plain HTTP to the TLS port gets no answer.
    let plain = server.url.replace("https://", "http://");
    let e = Client::new(&plain)
        .actor("counter", "c")
        .call::<_, i64>("increment", &(100,))
        .await
        .unwrap_err();
    assert_eq!(e.status, None, "plain HTTP got an answer: {e}");

    let value: i64 = client.actor("counter", "c").call("get", &()).await.unwrap();
    assert_eq!(value, 5, "no refused request ran");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_replaced_pair_serves_new_connections_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let old = Pki::new("old");
    let (cert, key, _) = old.write(dir.path());
    let server = serve_tls(&dir.path().join("data"), &[counter()], &cert, &key).await;
    assert_eq!(increment(&old, &server).await, 1);

    // A pair of another CA written over the files is taken within a poll
    // or two: a client that trusts only the new CA gets in.
    let new = Pki::new("new");
    std::fs::write(&cert, &new.cert).unwrap();
    std::fs::write(&key, &new.key).unwrap();
    let url = server.url.clone();
    let value: i64 = eventually(RELOAD_POLL * 10, "the new pair", async || {
        new.client(&url)
            .actor("counter", "c")
            .call("increment", &(1,))
            .await
            .ok()
    })
    .await;
    assert_eq!(value, 2);
    let e = old
        .client(&server.url)
        .actor("counter", "c")
        .call::<_, i64>("get", &())
        .await
        .unwrap_err();
    assert_untrusted(&e);

    // A broken pair (a key that is not one) is not taken: the new pair
    // stays in use.
    std::fs::write(&key, "not a key").unwrap();
    tokio::time::sleep(RELOAD_POLL * 2 + Duration::from_millis(500)).await;
    let value: i64 = new
        .client(&server.url)
        .actor("counter", "c")
        .call("get", &())
        .await
        .unwrap();
    assert_eq!(value, 2);
    server.stop().await;
}

#[test]
fn a_bad_pair_is_a_clear_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new("a");
    let (cert, key, _) = pki.write(dir.path());
    let error = |cert: &Path, key: &Path| format!("{:#}", Tls::load(cert, key).unwrap_err());

    let missing = dir.path().join("missing.pem");
    let e = error(&missing, &key);
    assert!(
        e.contains("cannot read the TLS certificate") && e.contains("missing.pem"),
        "{e}"
    );
    let e = error(&cert, &missing);
    assert!(
        e.contains("cannot read the TLS private key") && e.contains("missing.pem"),
        "{e}"
    );

    let garbage = dir.path().join("garbage.pem");
    std::fs::write(&garbage, "hello").unwrap();
    let e = error(&garbage, &key);
    assert!(
        e.contains("garbage.pem") && e.contains("no PEM CERTIFICATE"),
        "{e}"
    );
    // A certificate where the key should be.
    let e = error(&cert, &cert);
    assert!(
        e.contains("cert.pem") && e.contains("no PEM private key"),
        "{e}"
    );

    // The key of another pair.
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let (_, other_key, _) = Pki::new("b").write(&other);
    let e = error(&cert, &other_key);
    assert!(
        e.contains("does not go with the certificate") && e.contains("cert.pem"),
        "{e}"
    );

    assert!(Tls::load(&cert, &key).is_ok());
}

/// A client that opens a connection and never starts its TLS handshake
/// does not hold the server's stop.
#[tokio::test(flavor = "multi_thread")]
async fn a_connection_without_a_handshake_does_not_hold_the_stop() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new("a");
    let (cert, key, _) = pki.write(dir.path());
    let server = serve_tls(&dir.path().join("data"), &[counter()], &cert, &key).await;
    let address = server.url.trim_start_matches("https://").to_owned();
    let silent = tokio::net::TcpStream::connect(&address).await.unwrap();
    assert_eq!(increment(&pki, &server).await, 1);
    // The handshake would time out after 10 s.
    let stopped = tokio::time::timeout(Duration::from_secs(5), server.stop()).await;
    assert!(stopped.is_ok(), "the stop waited for the silent connection");
    drop(silent);
}
