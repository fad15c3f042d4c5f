//! Sending one admitted request: on a connection kept from an earlier
//! request of the same actor to the same authority (`pool.rs`), or on a
//! new one: resolving its host and checking the addresses
//! (`outbound.rs`), connecting to one of them (TLS for `https`), and
//! HTTP/1.1 through hyper; within the plan's timeouts and body limits. The
//! host follows no redirect: a `3xx` is the guest's answer.

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
use super::pool::{Pool, Route};
use crate::outbound::refused_range;

/// What an admitted request may do.
pub(crate) struct Plan {
    /// The actor, where the request goes and under which address rule;
    /// its connection's place in the pool.
    pub(super) route: Route,
    /// `scheme://host:port`, for messages.
    pub(super) authority: String,
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
    /// The host's kept connections.
    pub(super) pool: Arc<Pool<RequestBody>>,
}

impl Plan {
    /// `timeout` from now, cut at the deadline.
    fn within(&self, timeout: Duration) -> Duration {
        timeout.min(self.deadline.saturating_duration_since(Instant::now()))
    }

    fn denied(&self, why: String) -> Error {
        tracing::warn!(actor = %self.route.actor, authority = %self.authority, "an outgoing request was refused: {why}");
        Error::InternalError(Some(format!(
            "denied: actor `{}` may not reach `{}`: {why}",
            self.route.actor, self.authority
        )))
    }
}

/// A connection to a server: TCP, or TLS over it.
trait Stream: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Stream for T {}

/// The sending half of a connection, as the pool keeps it.
type Sender = hyper::client::conn::http1::SendRequest<RequestBody>;

/// Sends `request` as `plan` allows: on a connection kept from an earlier
/// request of the same route if there is one, else on a new one.
pub(super) async fn send(request: http::Request<WasiBody>, plan: Plan) -> Sent {
    let connect_by = Instant::now() + plan.within(plan.connect_timeout);
    let mut request = on_the_wire(request, plan.max_request)?;
    let first_byte = plan.within(plan.first_byte_timeout);
    // A kept connection the server closed meanwhile gives the request back
    // unsent: it goes on the next one, or on a new connection.
    while let Some(mut sender) = plan.pool.take(&plan.route) {
        let ready = tokio::time::timeout(left(connect_by), sender.ready()).await;
        if !matches!(ready, Ok(Ok(()))) {
            continue;
        }
        match tokio::time::timeout(first_byte, sender.try_send_request(request)).await {
            Err(_) => return Err(Error::ConnectionReadTimeout),
            Ok(Ok(answer)) => return answered(answer, sender, plan),
            Ok(Err(mut failed)) => match failed.take_message() {
                Some(unsent) => request = unsent,
                None => return Err(Error::from(failed.into_error())),
            },
        }
    }
    let mut sender = connect_to(&plan, connect_by).await?;
    let answer = tokio::time::timeout(first_byte, sender.send_request(request))
        .await
        .map_err(|_| Error::ConnectionReadTimeout)??;
    answered(answer, sender, plan)
}

/// `request` as it goes on the wire: naming its path only (and `Host`),
/// its body cut at `max_request`.
fn on_the_wire(
    mut request: http::Request<WasiBody>,
    max_request: u64,
) -> Result<http::Request<RequestBody>, Error> {
    let path = request
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    *request.uri_mut() = http::Uri::builder()
        .path_and_query(path)
        .build()
        .map_err(|_| Error::HttpRequestUriInvalid)?;
    Ok(request.map(|body| RequestBody {
        inner: body,
        left: max_request,
        max: max_request,
    }))
}

/// A new connection for `plan`'s request, by `connect_by`: the name
/// resolved and its addresses checked, TCP, TLS for `https`, and HTTP/1.1,
/// whose connection runs on a task of its own until its sender is dropped.
async fn connect_to(plan: &Plan, connect_by: Instant) -> Result<Sender, Error> {
    let addresses = resolve(plan, connect_by).await?;
    let tcp = connect(&addresses, connect_by).await?;
    let _ = tcp.set_nodelay(true);
    let stream: Box<dyn Stream> = if plan.route.https {
        let name = rustls::pki_types::ServerName::try_from(plan.route.host.clone())
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
    let (sender, conn) = tokio::time::timeout(left(connect_by), handshake)
        .await
        .map_err(|_| Error::ConnectionTimeout)??;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "an outgoing connection ended with an error");
        }
    });
    Ok(sender)
}

/// The answer's head came: its body, within the plan's limits, gives the
/// connection back to the pool once read to its end.
fn answered(answer: http::Response<hyper::body::Incoming>, sender: Sender, plan: Plan) -> Sent {
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
            back: Some((plan.pool, plan.route, sender)),
            _permits: plan.permits,
        }
        .boxed_unsync()
    });
    // The connection runs on its own task (`connect_to`): nothing is left
    // for the caller to drive.
    Ok((answer, Box::new(async { Ok(()) })))
}

/// The time from now to `at`.
fn left(at: Instant) -> Duration {
    at.saturating_duration_since(Instant::now())
}

/// The addresses the request may connect to: its host's, less those of
/// the refused ranges unless the host is listed by its very name.
async fn resolve(plan: &Plan, connect_by: Instant) -> Result<Vec<SocketAddr>, Error> {
    let route = &plan.route;
    let found = lookup(&route.host, route.port, connect_by).await?;
    reachable(&route.host, found, route.any_address).map_err(|why| plan.denied(why))
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
pub(super) struct RequestBody {
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
    /// Where its connection goes once the body has ended.
    back: Option<(Arc<Pool<RequestBody>>, Route, Sender)>,
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
            Poll::Ready(None) => {
                // Read to its end: the connection may take another request.
                if let Some((pool, route, sender)) = this.back.take() {
                    pool.put(route, sender);
                }
                Poll::Ready(None)
            }
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
