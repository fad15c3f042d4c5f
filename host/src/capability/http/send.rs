//! Sending one admitted request: resolving its host and checking the
//! addresses (`outbound.rs`), connecting to one of them (TLS for
//! `https`), and HTTP/1.1 through hyper, within the plan's timeouts and
//! body limits. The host follows no redirect: a `3xx` is the guest's
//! answer.

use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;
use wasmtime_wasi_http::{Error, WasiBody};

use super::Sent;
use crate::outbound::refused_range;

/// What an admitted request may do.
pub(crate) struct Plan {
    pub(super) actor: Arc<str>,
    /// `scheme://host:port`, for messages.
    pub(super) authority: String,
    pub(super) https: bool,
    /// A name, or an address (an IPv6 one without brackets).
    pub(super) host: String,
    pub(super) port: u16,
    /// Its very host is listed: any address it resolves to may be reached.
    pub(super) any_address: bool,
    /// The call's or step's deadline: no timeout goes past it.
    pub(super) deadline: Instant,
    pub(super) connect_timeout: Duration,
    pub(super) first_byte_timeout: Duration,
    pub(super) between_bytes_timeout: Duration,
    pub(super) max_request: u64,
    pub(super) max_response: u64,
    pub(super) tls: Arc<rustls::ClientConfig>,
    /// Its places among the requests in flight (the instance's, the
    /// host's), given back when its response's body is dropped.
    pub(super) permits: (OwnedSemaphorePermit, OwnedSemaphorePermit),
}

impl Plan {
    /// `timeout` from now, cut at the deadline.
    fn within(&self, timeout: Duration) -> Duration {
        timeout.min(self.deadline.saturating_duration_since(Instant::now()))
    }

    fn denied(&self, why: String) -> Error {
        tracing::warn!(actor = %self.actor, authority = %self.authority, "an outgoing request was refused: {why}");
        Error::InternalError(Some(format!(
            "denied: actor `{}` may not reach `{}`: {why}",
            self.actor, self.authority
        )))
    }
}

/// A connection to a server: TCP, or TLS over it.
trait Stream: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Stream for T {}

/// Sends `request` as `plan` allows.
pub(super) async fn send(mut request: http::Request<WasiBody>, plan: Plan) -> Sent {
    let connect_by = Instant::now() + plan.within(plan.connect_timeout);
    let addresses = resolve(&plan, connect_by).await?;
    let tcp = connect(&addresses, connect_by).await?;
    let _ = tcp.set_nodelay(true);
    let stream: Box<dyn Stream> = if plan.https {
        let name = rustls::pki_types::ServerName::try_from(plan.host.clone())
            .map_err(|_| Error::HttpRequestUriInvalid)?;
        let tls = tokio_rustls::TlsConnector::from(plan.tls.clone()).connect(name, tcp);
        let tls = tokio::time::timeout(left(connect_by), tls)
            .await
            .map_err(|_| Error::ConnectionTimeout)?
            .map_err(Error::Tls)?;
        Box::new(tls)
    } else {
        Box::new(tcp)
    };
    let handshake = hyper::client::conn::http1::handshake(TokioIo::new(stream));
    let (mut sender, conn) = tokio::time::timeout(left(connect_by), handshake)
        .await
        .map_err(|_| Error::ConnectionTimeout)??;

    // On the wire, the request names its path only (and `Host`).
    let path = request
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    *request.uri_mut() = http::Uri::builder()
        .path_and_query(path)
        .build()
        .map_err(|_| Error::HttpRequestUriInvalid)?;
    let max_request = plan.max_request;
    let request = request.map(|body| RequestBody {
        inner: body,
        left: max_request,
        max: max_request,
    });

    // The response's head, within the first-byte timeout, while the
    // connection's own future drives the I/O.
    let first_byte = plan.within(plan.first_byte_timeout);
    let mut conn = Some(conn);
    let answer = tokio::time::timeout(first_byte, async {
        let mut sent = std::pin::pin!(sender.send_request(request));
        std::future::poll_fn(|cx| {
            if let Poll::Ready(answer) = sent.as_mut().poll(cx) {
                return Poll::Ready(answer.map_err(Error::from));
            }
            let Some(io) = conn.as_mut() else {
                return Poll::Pending;
            };
            match ready!(Pin::new(io).poll(cx)) {
                Ok(()) => {
                    conn = None;
                    sent.as_mut().poll(cx).map_err(Error::from)
                }
                Err(e) => Poll::Ready(Err(Error::from(e))),
            }
        })
        .await
    })
    .await
    .map_err(|_| Error::ConnectionReadTimeout)??;

    let declared = answer
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|length| length > plan.max_response) {
        return Err(Error::HttpResponseBodySize(Some(plan.max_response)));
    }
    let between = plan.within(plan.between_bytes_timeout);
    let deadline = plan.deadline;
    let max_response = plan.max_response;
    let answer = answer.map(|incoming| {
        ResponseBody {
            incoming,
            left: max_response,
            max: max_response,
            between,
            deadline,
            pause: Box::pin(tokio::time::sleep(between)),
            _permits: plan.permits,
        }
        .boxed_unsync()
    });
    let io = async move {
        match conn {
            Some(conn) => conn.await.map_err(Error::from),
            None => Ok(()),
        }
    };
    Ok((answer, Box::new(io)))
}

/// The time from now to `at`.
fn left(at: Instant) -> Duration {
    at.saturating_duration_since(Instant::now())
}

/// The addresses the request may connect to: its host's, less those of
/// the refused ranges unless the host is listed by its very name.
async fn resolve(plan: &Plan, connect_by: Instant) -> Result<Vec<SocketAddr>, Error> {
    let found = lookup(&plan.host, plan.port, connect_by).await?;
    reachable(&plan.host, found, plan.any_address).map_err(|why| plan.denied(why))
}

/// The addresses `host` (a name or an address) resolves to, by `by`.
async fn lookup(host: &str, port: u16, by: Instant) -> Result<Vec<SocketAddr>, Error> {
    let found: Vec<SocketAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => tokio::time::timeout(left(by), tokio::net::lookup_host((host, port)))
            .await
            .map_err(|_| Error::DnsTimeout)?
            .map_err(|e| Error::DnsError {
                rcode: Some(e.to_string()),
                info_code: None,
            })?
            .collect(),
    };
    if found.is_empty() {
        return Err(Error::DestinationNotFound);
    }
    Ok(found)
}

/// Of the addresses `host` resolved to, those a request may reach (all of
/// them when `any_address`), or why none.
fn reachable(
    host: &str,
    found: Vec<SocketAddr>,
    any_address: bool,
) -> Result<Vec<SocketAddr>, String> {
    if any_address {
        return Ok(found);
    }
    let (allowed, refused): (Vec<SocketAddr>, Vec<SocketAddr>) = found
        .into_iter()
        .partition(|address| refused_range(address.ip()).is_none());
    match refused.first() {
        Some(address) if allowed.is_empty() => Err(format!(
            "`{host}` resolves to {}, a {} address, which only a host listed by its exact name \
             may reach",
            address.ip(),
            refused_range(address.ip()).unwrap_or("refused")
        )),
        _ => Ok(allowed),
    }
}

/// A connection to the first of `addresses` that answers by `connect_by`.
async fn connect(addresses: &[SocketAddr], connect_by: Instant) -> Result<TcpStream, Error> {
    let mut failed = Error::ConnectionRefused;
    for address in addresses {
        match tokio::time::timeout(left(connect_by), TcpStream::connect(address)).await {
            Ok(Ok(stream)) => return Ok(stream),
            Ok(Err(e)) => failed = Error::Connect(e),
            Err(_) => return Err(Error::ConnectionTimeout),
        }
    }
    Err(failed)
}

/// The guest's request body, cut at the actor's limit.
struct RequestBody {
    inner: WasiBody,
    left: u64,
    max: u64,
}

impl Body for RequestBody {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        let frame = ready!(Pin::new(&mut self.inner).poll_frame(cx));
        if let Some(Ok(frame)) = &frame
            && let Some(data) = frame.data_ref()
        {
            let size = data.len() as u64;
            if size > self.left {
                return Poll::Ready(Some(Err(Error::HttpRequestBodySize(Some(self.max)))));
            }
            self.left -= size;
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A response's body as the guest reads it: cut at the actor's limit,
/// ended when it pauses longer than the between-bytes timeout or runs
/// past the deadline, and holding the request's places among those in
/// flight until it is dropped.
struct ResponseBody {
    incoming: hyper::body::Incoming,
    left: u64,
    max: u64,
    between: Duration,
    deadline: Instant,
    pause: Pin<Box<tokio::time::Sleep>>,
    _permits: (OwnedSemaphorePermit, OwnedSemaphorePermit),
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        let this = &mut *self;
        match Pin::new(&mut this.incoming).poll_frame(cx) {
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(Error::from(e)))),
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    let size = data.len() as u64;
                    if size > this.left {
                        return Poll::Ready(Some(Err(Error::HttpResponseBodySize(Some(this.max)))));
                    }
                    this.left -= size;
                }
                let next = (Instant::now() + this.between).min(this.deadline);
                this.pause.as_mut().reset(next.into());
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Pending => {
                ready!(this.pause.as_mut().poll(cx));
                Poll::Ready(Some(Err(Error::ConnectionReadTimeout)))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.incoming.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.incoming.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn by() -> Instant {
        Instant::now() + Duration::from_secs(5)
    }

    /// A name is checked by the addresses it resolves to: `localhost`
    /// (from the hosts file, no traffic) is loopback, refused unless
    /// listed by that very name.
    #[tokio::test]
    async fn a_name_that_resolves_to_loopback_is_refused_unless_listed_exactly() {
        let found = lookup("localhost", 8080, by()).await.unwrap();
        assert!(found.iter().all(|a| a.ip().is_loopback()), "{found:?}");
        let why = reachable("localhost", found.clone(), false).unwrap_err();
        assert!(why.contains("`localhost` resolves to"), "{why}");
        assert!(why.contains("loopback"), "{why}");
        assert_eq!(reachable("localhost", found.clone(), true).unwrap(), found);
    }

    #[tokio::test]
    async fn addresses_of_refused_ranges_are_refused_before_any_connection() {
        for (host, range) in [
            ("169.254.169.254", "link-local"),
            ("127.0.0.1", "loopback"),
            ("10.1.2.3", "private"),
            ("192.168.0.10", "private"),
            ("0.0.0.0", "unspecified"),
            ("::1", "loopback"),
            ("fe80::1", "link-local"),
            ("::ffff:169.254.169.254", "link-local"),
        ] {
            let found = lookup(host, 80, by()).await.unwrap();
            let why = reachable(host, found, false).unwrap_err();
            assert!(why.contains(range), "{host}: {why}");
        }
    }

    #[test]
    fn of_mixed_addresses_only_the_public_ones_are_kept() {
        let public: SocketAddr = "93.184.215.14:443".parse().unwrap();
        let metadata: SocketAddr = "169.254.169.254:443".parse().unwrap();
        let kept = reachable("mixed.example", vec![metadata, public], false).unwrap();
        assert_eq!(kept, vec![public]);
    }
}
