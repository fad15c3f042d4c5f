//! What a guest writes that reaches the host's log or a stored error: log
//! lines, stdout and stderr, failure codes and messages, traps.
//!
//! Every such text goes through [`clean`] (`text.rs`) first: cut to its
//! limit, with control characters escaped, so that no guest can forge a
//! log line or fill the log; and every line counts against the instance's
//! [`LogLimit`].

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use wasmtime_wasi::cli::{IsTerminal, StdoutStream};

use crate::address::Address;
use crate::config::{MAX_FAILURE_MESSAGE_BYTES, MAX_LOG_LINE_BYTES, MAX_LOG_LINES_PER_SECOND};
use crate::text::clean;

/// The per-second budget of log lines of one instance, shared by the log
/// import and the guest's stdout and stderr.
#[derive(Clone, Default)]
pub(crate) struct LogLimit(Arc<Mutex<Window>>);

#[derive(Default)]
struct Window {
    start: Option<Instant>,
    lines: u32,
    dropped: u64,
}

impl LogLimit {
    /// Whether one more line may go to the log now. When a new second
    /// starts, reports the lines dropped in the last one.
    pub(crate) fn admit(&self, name: &Address) -> bool {
        let mut window = self.0.lock().unwrap();
        let now = Instant::now();
        if window
            .start
            .is_none_or(|start| now.duration_since(start) >= Duration::from_secs(1))
        {
            if window.dropped > 0 {
                tracing::warn!(
                    target: "burrow::guest",
                    actor = &*name.actor,
                    key = &*name.key,
                    dropped = window.dropped,
                    "log lines dropped: over {MAX_LOG_LINES_PER_SECOND} lines per second"
                );
            }
            *window = Window {
                start: Some(now),
                ..Window::default()
            };
        }
        if window.lines < MAX_LOG_LINES_PER_SECOND {
            window.lines += 1;
            true
        } else {
            window.dropped += 1;
            false
        }
    }
}

/// Guest failure text (an error's code or message, a trap) as the host
/// keeps, logs and stores it: [`clean`], cut at
/// [`MAX_FAILURE_MESSAGE_BYTES`].
pub(crate) fn failure_text(text: &str) -> String {
    clean(text, MAX_FAILURE_MESSAGE_BYTES)
}

/// Guest stdout or stderr: each line goes to the host log, tagged with the
/// instance, cut at [`MAX_LOG_LINE_BYTES`] and with control characters
/// escaped.
#[derive(Clone)]
pub(crate) struct GuestOutput {
    name: Address,
    stream: &'static str,
    limit: LogLimit,
}

impl GuestOutput {
    pub(crate) fn new(name: Address, stream: &'static str, limit: LogLimit) -> Self {
        GuestOutput {
            name,
            stream,
            limit,
        }
    }
}

impl IsTerminal for GuestOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestOutput {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(LineWriter {
            out: self.clone(),
            line: Vec::new(),
        })
    }
}

struct LineWriter {
    out: GuestOutput,
    line: Vec<u8>,
}

impl LineWriter {
    fn emit(&mut self) {
        if self.line.is_empty() {
            return;
        }
        if !self.out.limit.admit(&self.out.name) {
            self.line.clear();
            return;
        }
        let text = String::from_utf8_lossy(&self.line);
        let text = clean(text.trim_end(), MAX_LOG_LINE_BYTES);
        tracing::info!(
            target: "burrow::guest",
            actor = &*self.out.name.actor,
            key = &*self.out.name.key,
            stream = self.out.stream,
            "{text}"
        );
        self.line.clear();
    }
}

impl tokio::io::AsyncWrite for LineWriter {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        for &byte in buf {
            if byte == b'\n' {
                self.emit();
            } else if self.line.len() < MAX_LOG_LINE_BYTES {
                self.line.push(byte);
            }
        }
        Poll::Ready(Ok(buf.len()))
    }

    // Guests flush after every write (Rust's unbuffered stderr writes a
    // line in pieces), so a flush keeps the partial line; it goes out at
    // its newline, or when the stream closes.
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.emit();
        Poll::Ready(Ok(()))
    }
}

impl Drop for LineWriter {
    fn drop(&mut self) {
        self.emit();
    }
}
