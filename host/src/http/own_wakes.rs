//! A connection's task that wakes itself while it runs is polled again at
//! once, instead of going back to tokio's queue.
//!
//! hyper hands a request's body from the connection's dispatcher to the
//! handler through a channel, and both ends are polled by the one task of
//! the connection: the handler taking the body wakes the dispatcher, that
//! is, its own task, while it runs. tokio treats a task woken during its
//! own poll as one that yields: it puts it at the back of the queue and
//! wakes a parked worker to come and take it. On two cores, that woke the
//! other worker for nearly every request of a lone connection, and moved
//! the connection between the workers: about 40 µs of the cores' time a
//! request, nearly half of what W1 over HTTP cost the server (CHANGELOG.md,
//! "One connection's requests stay on one worker").
//!
//! [`RepollOwnWakes`] gives the future a waker of its own. A wake that
//! comes while the future is being polled (from its own code, or from
//! another thread meanwhile) is kept, and the future is polled again
//! before the task returns; a wake at any other time goes to the task's
//! waker as before. The future is polled again only while the task's
//! poll is younger than [`REPOLL_WITHIN`], and at most [`MAX_POLLS`] times
//! in a row; past either, the wake goes to the task's waker, so a future
//! that yields on purpose still yields: a guest computing in an action
//! call (wasmtime yields at every epoch tick, 10 ms apart), hyper after a
//! run of pipelined requests, tokio's budget.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use futures_util::task::AtomicWaker;

/// Polls of the future in one poll of the task, at most.
const MAX_POLLS: usize = 4;

/// How long after the task's poll began the future may still be polled
/// again: hyper's hand-over of a body takes microseconds.
const REPOLL_WITHIN: Duration = Duration::from_micros(500);

/// The future is being polled.
const POLLING: u8 = 1;
/// It was woken since its poll began.
const WOKEN: u8 = 2;

/// `future`, polled again at once when it wakes itself while it runs.
pub(super) struct RepollOwnWakes<F> {
    future: Pin<Box<F>>,
    shared: Arc<Shared>,
    waker: Waker,
}

struct Shared {
    state: AtomicU8,
    /// The waker of the task that polls the future.
    task: AtomicWaker,
}

impl Wake for Shared {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let before = self.state.fetch_or(WOKEN, Ordering::AcqRel);
        if before & POLLING == 0 {
            self.task.wake();
        }
    }
}

impl<F: Future> RepollOwnWakes<F> {
    pub(super) fn new(future: F) -> Self {
        let shared = Arc::new(Shared {
            state: AtomicU8::new(0),
            task: AtomicWaker::new(),
        });
        RepollOwnWakes {
            future: Box::pin(future),
            waker: Waker::from(shared.clone()),
            shared,
        }
    }
}

impl<F: Future> Future for RepollOwnWakes<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        this.shared.task.register(cx.waker());
        let mut own = Context::from_waker(&this.waker);
        let begun = Instant::now();
        for _ in 0..MAX_POLLS {
            this.shared.state.store(POLLING, Ordering::Release);
            let polled = this.future.as_mut().poll(&mut own);
            let state = this.shared.state.swap(0, Ordering::AcqRel);
            if polled.is_ready() || state & WOKEN == 0 {
                return polled;
            }
            if begun.elapsed() >= REPOLL_WITHIN {
                break;
            }
        }
        // Still waking itself, or long at work: let the task yield.
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// Counts the wakes of the task.
    struct CountWakes(AtomicUsize);

    impl Wake for CountWakes {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn task() -> (Arc<CountWakes>, Waker) {
        let count = Arc::new(CountWakes(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        (count, waker)
    }

    /// Wakes itself `times` times, each in its own poll, then is ready
    /// with the number of polls it took.
    fn waking_itself(times: usize) -> impl Future<Output = usize> {
        let mut polls = 0;
        std::future::poll_fn(move |cx| {
            polls += 1;
            if polls > times {
                return Poll::Ready(polls);
            }
            cx.waker().wake_by_ref();
            Poll::Pending
        })
    }

    /// Polls `inner`, wrapped, twice: the first poll must be pending and
    /// wake the task once, to yield. Returns the second.
    fn yields_once<F: Future>(inner: F) -> Poll<F::Output> {
        let (count, waker) = task();
        let mut future = std::pin::pin!(RepollOwnWakes::new(inner));
        let first = future.as_mut().poll(&mut Context::from_waker(&waker));
        assert!(first.is_pending());
        assert_eq!(
            count.0.load(Ordering::SeqCst),
            1,
            "the task was woken to yield"
        );
        future.as_mut().poll(&mut Context::from_waker(&waker))
    }

    #[test]
    fn a_wake_during_its_own_poll_polls_again_without_waking_the_task() {
        let (count, waker) = task();
        let mut future = std::pin::pin!(RepollOwnWakes::new(waking_itself(2)));
        let polled = future.as_mut().poll(&mut Context::from_waker(&waker));
        assert_eq!(polled, Poll::Ready(3));
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_future_that_keeps_waking_itself_still_yields_to_the_task() {
        let second = yields_once(waking_itself(MAX_POLLS + 1));
        assert_eq!(second, Poll::Ready(MAX_POLLS + 2));
    }

    #[test]
    fn a_future_that_worked_long_before_waking_itself_yields_to_the_task() {
        let mut polls = 0;
        // Works past the bound, then wakes itself, as a guest does at an
        // epoch tick.
        let inner = std::future::poll_fn(move |cx| {
            polls += 1;
            if polls == 1 {
                std::thread::sleep(REPOLL_WITHIN * 2);
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            Poll::Ready(polls)
        });
        assert_eq!(yields_once(inner), Poll::Ready(2));
    }

    #[test]
    fn a_wake_between_polls_wakes_the_task() {
        let (count, waker) = task();
        let (send, receive) = tokio::sync::oneshot::channel::<u8>();
        let mut future = std::pin::pin!(RepollOwnWakes::new(receive));
        assert!(
            future
                .as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_pending()
        );
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
        send.send(7).unwrap();
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        let polled = future.as_mut().poll(&mut Context::from_waker(&waker));
        assert_eq!(polled, Poll::Ready(Ok(7)));
    }

    #[test]
    fn a_wake_from_another_thread_during_a_poll_is_not_lost() {
        let (count, waker) = task();
        let (send, receive) = std::sync::mpsc::channel::<Waker>();
        let woken = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let seen = woken.clone();
        let mut polls = 0;
        // The first poll hands its waker to a thread that wakes it and
        // waits until that is done, all inside the poll.
        let inner = std::future::poll_fn(move |cx| {
            polls += 1;
            if polls == 1 {
                send.send(cx.waker().clone()).unwrap();
                while !seen.load(Ordering::SeqCst) {
                    std::thread::yield_now();
                }
                return Poll::Pending;
            }
            Poll::Ready(polls)
        });
        let thread = std::thread::spawn(move || {
            receive.recv().unwrap().wake();
            woken.store(true, Ordering::SeqCst);
        });
        let mut future = std::pin::pin!(RepollOwnWakes::new(inner));
        let polled = future.as_mut().poll(&mut Context::from_waker(&waker));
        thread.join().unwrap();
        // Polled again at once, or (when the thread took longer than
        // `REPOLL_WITHIN` to run) the task woken to poll it.
        match polled {
            Poll::Ready(polls) => {
                assert_eq!(polls, 2);
                assert_eq!(count.0.load(Ordering::SeqCst), 0);
            }
            Poll::Pending => assert_eq!(count.0.load(Ordering::SeqCst), 1),
        }
    }
}
