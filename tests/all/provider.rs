//! A small HTTP/1.1 server on 127.0.0.1 for the tests of outgoing HTTP
//! (`outbound.rs`, `conformance/http.rs`): it records what reaches it.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One request the provider read in full.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub headers: HashMap<String, String>,
    pub body: String,
}

/// A small HTTP/1.1 server on 127.0.0.1, a thread per connection, that
/// answers by path:
///
/// - `/ok`: 200, the body `<method> <body>`;
/// - `/charge`: 500 to the first `fail_first` requests, then 200 and
///   `{"paid": true}`;
/// - `/redirect`: 302 to `/ok`;
/// - `/never`: reads the request and never answers;
/// - `/trickle`: a head, then one byte of its body every 200 ms, forever;
/// - `/big`: a body of 64 KiB; `/big-chunked`: the same, chunked;
/// - `/slow`: 200 after 2 s;
/// - `/close`: 200, then it closes the connection (without saying so).
///
/// It counts only requests it read in full.
pub struct Provider {
    pub port: u16,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    pub fail_first: Arc<Mutex<usize>>,
    /// Told of each `/charge` request as it arrives, before its answer.
    pub charges: Arc<Mutex<Option<std::sync::mpsc::Sender<Seen>>>>,
    /// `/charge` answers only once this is true.
    pub charge_open: Arc<Mutex<bool>>,
    /// Connections accepted so far.
    pub connections: Arc<AtomicUsize>,
}

impl Provider {
    pub fn start() -> Provider {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let provider = Provider {
            port,
            seen: Arc::default(),
            fail_first: Arc::default(),
            charges: Arc::default(),
            charge_open: Arc::new(Mutex::new(true)),
            connections: Arc::default(),
        };
        let connections = provider.connections.clone();
        let (seen, fail_first, charges, open) = (
            provider.seen.clone(),
            provider.fail_first.clone(),
            provider.charges.clone(),
            provider.charge_open.clone(),
        );
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                connections.fetch_add(1, Ordering::SeqCst);
                let (seen, fail_first, charges, open) = (
                    seen.clone(),
                    fail_first.clone(),
                    charges.clone(),
                    open.clone(),
                );
                std::thread::spawn(move || {
                    let _ = serve(stream, &seen, &fail_first, &charges, &open);
                });
            }
        });
        provider
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub fn authority(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    pub fn seen_at(&self, path: &str) -> Vec<Seen> {
        self.seen().into_iter().filter(|s| s.path == path).collect()
    }
}

fn serve(
    stream: TcpStream,
    seen: &Mutex<Vec<Seen>>,
    fail_first: &Mutex<usize>,
    charges: &Mutex<Option<std::sync::mpsc::Sender<Seen>>>,
    open: &Mutex<bool>,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut out = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let mut parts = line.split_whitespace();
        let (method, path) = (
            parts.next().unwrap_or("").to_owned(),
            parts.next().unwrap_or("").to_owned(),
        );
        let mut headers = HashMap::new();
        loop {
            let mut header = String::new();
            reader.read_line(&mut header)?;
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_owned());
            }
        }
        let mut body = Vec::new();
        if let Some(length) = headers.get("content-length") {
            body.resize(length.parse().unwrap_or(0), 0);
            reader.read_exact(&mut body)?;
        } else if headers.get("transfer-encoding").map(String::as_str) == Some("chunked") {
            loop {
                let mut size = String::new();
                reader.read_line(&mut size)?;
                let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
                let mut chunk = vec![0; size + 2];
                reader.read_exact(&mut chunk)?;
                if size == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..size]);
            }
        }
        let request = Seen {
            method,
            path: path.clone(),
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        };
        seen.lock().unwrap().push(request.clone());
        let reply = |out: &mut TcpStream, status: &str, extra: &str, body: &[u8]| {
            write!(
                out,
                "HTTP/1.1 {status}\r\ncontent-length: {}\r\n{extra}\r\n",
                body.len()
            )?;
            out.write_all(body)
        };
        match path.as_str() {
            "/ok" => reply(
                &mut out,
                "200 OK",
                "",
                format!("{} {}", request.method, request.body).as_bytes(),
            )?,
            "/charge" => {
                if let Some(tell) = charges.lock().unwrap().as_ref() {
                    let _ = tell.send(request.clone());
                }
                while !*open.lock().unwrap() {
                    std::thread::sleep(Duration::from_millis(20));
                }
                let mut left = fail_first.lock().unwrap();
                if *left > 0 {
                    *left -= 1;
                    reply(&mut out, "500 Internal Server Error", "", b"try again")?;
                } else {
                    reply(&mut out, "200 OK", "", br#"{"paid": true}"#)?;
                }
            }
            "/close" => {
                reply(&mut out, "200 OK", "", b"closing")?;
                return Ok(());
            }
            "/redirect" => reply(&mut out, "302 Found", "location: /ok\r\n", b"")?,
            "/never" => loop {
                std::thread::sleep(Duration::from_secs(60));
            },
            "/trickle" => {
                write!(out, "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")?;
                loop {
                    out.write_all(b"1\r\n.\r\n")?;
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
            "/big" => reply(&mut out, "200 OK", "", &[b'x'; 64 << 10])?,
            "/big-chunked" => {
                write!(out, "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")?;
                for _ in 0..64 {
                    write!(out, "400\r\n")?;
                    out.write_all(&[b'x'; 1024])?;
                    write!(out, "\r\n")?;
                }
                write!(out, "0\r\n\r\n")?;
            }
            "/slow" => {
                std::thread::sleep(Duration::from_secs(2));
                reply(&mut out, "200 OK", "", b"slow")?;
            }
            _ => reply(&mut out, "404 Not Found", "", b"")?,
        }
    }
}
