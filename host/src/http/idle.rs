//! How long a connection may wait without a request in flight
//! ([`HttpLimits`]): a connection that sends nothing for `idle_timeout`
//! (from its opening, or from the last byte of its last answer), or whose
//! request's head takes longer than `header_timeout` from its first byte,
//! is closed.
//!
//! hyper's own header-read timeout (a tokio timer on the connection's
//! builder) starts as soon as the connection waits for a request, so it
//! would count the idle time between requests as time spent on headers;
//! it is set to both timeouts added, as a bound behind these. What a
//! connection does is seen through [`Watched`], its bytes in and out, and
//! [`Activity::request_began`] / [`InFlight`], its requests.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::config::HttpLimits;

/// What one connection has been doing. Its methods are called from the
/// connection's own task; the atomics only make it shareable.
pub(super) struct Activity {
    opened: Instant,
    in_flight: AtomicUsize,
    /// Milliseconds from `opened` to the last time the connection had
    /// nothing to do: its opening, the end of an answer, a byte of an
    /// answer written.
    quiet_since: AtomicU64,
    /// Milliseconds from `opened` to the first byte read while no request
    /// was in flight, plus one (0: none since the last request began).
    head_began: AtomicU64,
}

/// What the connection's timer finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Look again after this long.
    Wait(Duration),
    /// No request in flight, and nothing received for `idle_timeout`.
    Idle,
    /// A request's head took longer than `header_timeout`.
    SlowHead,
}

impl Activity {
    pub(super) fn new() -> Arc<Activity> {
        Arc::new(Activity {
            opened: Instant::now(),
            in_flight: AtomicUsize::new(0),
            quiet_since: AtomicU64::new(0),
            head_began: AtomicU64::new(0),
        })
    }

    fn now_ms(&self) -> u64 {
        self.opened.elapsed().as_millis() as u64
    }

    fn read(&self) {
        if self.in_flight.load(Ordering::Relaxed) == 0
            && self.head_began.load(Ordering::Relaxed) == 0
        {
            self.head_began.store(self.now_ms() + 1, Ordering::Relaxed);
        }
    }

    fn wrote(&self) {
        self.quiet_since.store(self.now_ms(), Ordering::Relaxed);
    }

    /// A request's head arrived whole: it is in flight until the returned
    /// hold is dropped (when its answer is ready).
    pub(super) fn request_began(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        self.head_began.store(0, Ordering::Relaxed);
        InFlight(self.clone())
    }

    /// Whether the connection is past a timeout, at `now_ms` from its
    /// opening. A wait is never longer than `header_timeout`: a head may
    /// begin meanwhile, and is then looked at again within its time.
    fn verdict_at(&self, limits: &HttpLimits, now_ms: u64) -> Verdict {
        let most = limits.header_timeout;
        let since = |start: u64, limit: Duration| {
            let limit = limit.as_millis() as u64;
            match now_ms.checked_sub(start) {
                Some(passed) if passed >= limit => None,
                passed => Some(Duration::from_millis(limit - passed.unwrap_or(0))),
            }
        };
        if self.in_flight.load(Ordering::Relaxed) > 0 {
            return Verdict::Wait(most);
        }
        match self.head_began.load(Ordering::Relaxed) {
            0 => match since(
                self.quiet_since.load(Ordering::Relaxed),
                limits.idle_timeout,
            ) {
                Some(left) => Verdict::Wait(left.min(most)),
                None => Verdict::Idle,
            },
            began => match since(began - 1, limits.header_timeout) {
                Some(left) => Verdict::Wait(left),
                None => Verdict::SlowHead,
            },
        }
    }

    /// Whether the connection is past a timeout now.
    pub(super) fn verdict(&self, limits: &HttpLimits) -> Verdict {
        self.verdict_at(limits, self.now_ms())
    }
}

/// A request in flight; dropped when its answer is ready.
pub(super) struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
        self.0.wrote();
    }
}

/// A connection's stream, telling its [`Activity`] of every byte read and
/// written.
pub(super) struct Watched<S> {
    stream: S,
    activity: Arc<Activity>,
}

impl<S> Watched<S> {
    pub(super) fn new(stream: S, activity: Arc<Activity>) -> Watched<S> {
        Watched { stream, activity }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.read();
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = polled
            && n > 0
        {
            self.activity.wrote();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = polled
            && n > 0
        {
            self.activity.wrote();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> HttpLimits {
        HttpLimits {
            idle_timeout: Duration::from_secs(60),
            header_timeout: Duration::from_secs(10),
            ..HttpLimits::default()
        }
    }

    #[test]
    fn a_silent_connection_is_idle_after_the_idle_timeout() {
        let activity = Activity::new();
        let limits = limits();
        // Looked at again at least every header_timeout.
        assert_eq!(
            activity.verdict_at(&limits, 0),
            Verdict::Wait(Duration::from_secs(10))
        );
        assert_eq!(
            activity.verdict_at(&limits, 59_000),
            Verdict::Wait(Duration::from_secs(1))
        );
        assert_eq!(activity.verdict_at(&limits, 60_000), Verdict::Idle);
    }

    #[test]
    fn a_head_has_the_header_timeout_from_its_first_byte() {
        let activity = Activity::new();
        let limits = limits();
        // Bytes of a head, a while after the opening.
        activity.head_began.store(30_000 + 1, Ordering::Relaxed);
        activity.read();
        assert_eq!(activity.head_began.load(Ordering::Relaxed), 30_001);
        assert_eq!(
            activity.verdict_at(&limits, 35_000),
            Verdict::Wait(Duration::from_secs(5))
        );
        assert_eq!(activity.verdict_at(&limits, 40_000), Verdict::SlowHead);
        // The head arrived: no timeout while the request is in flight.
        let in_flight = activity.request_began();
        assert_eq!(
            activity.verdict_at(&limits, 500_000),
            Verdict::Wait(limits.header_timeout)
        );
        // A body read meanwhile is no head.
        activity.read();
        assert_eq!(activity.head_began.load(Ordering::Relaxed), 0);
        drop(in_flight);
        // Quiet from the answer on.
        let quiet = activity.quiet_since.load(Ordering::Relaxed);
        assert_eq!(
            activity.verdict_at(&limits, quiet + 55_000),
            Verdict::Wait(Duration::from_secs(5))
        );
        assert_eq!(activity.verdict_at(&limits, quiet + 60_000), Verdict::Idle);
    }
}
