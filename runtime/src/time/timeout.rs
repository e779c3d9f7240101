//! `timeout`, `timeout_at` and the `Timeout` future (tokio's semantics).

use std::fmt;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use super::clock::StartMark;
use super::error::Elapsed;
use super::{Instant, Sleep};

/// Runs `future` for at most `duration` on the current runtime's clock:
/// `Ok(output)` if it finished in time, `Err(Elapsed)` otherwise (and the
/// future is dropped with the `Timeout`).
///
/// The future is polled **before** the deadline is checked, on every poll,
/// so a future that is ready at once is `Ok` even with a zero `duration`
/// (as in tokio). The deadline counts `duration` from this call, rounded up
/// to the wheel's 1 ms like any sleep, so it **never fires early**. The
/// deadline's timer is polled outside the cooperative budget: a future that
/// spends the whole budget on each poll still times out.
///
/// **The start is read cheaply and settled lazily** (time/README.md,
/// "Timeouts", T1-T3): this call reads only the kernel's coarse clock (a few
/// ns; a precise `Instant::now()` is about 30 ns on this project's VM, most
/// of what a `timeout` around a ready future cost), and a future that is
/// ready on its first poll never needs more. At the first `Pending` the
/// start is settled to an instant no earlier than this call and at most
/// [`Clock::timeout_lateness_bound`](super::Clock::timeout_lateness_bound)
/// (two ticks of the kernel, 8 ms at `HZ=250`) after it; exactly the time of
/// that first poll when it follows this call within that bound, as it does
/// in `timeout(d, fut).await`. On a paused clock the start is the exact
/// paused time of this call.
///
/// The future is pinned in place inside the `Timeout` (no allocation).
///
/// # Panics
/// Outside a magpie runtime (no timer driver on this thread).
pub fn timeout<F: IntoFuture>(duration: Duration, future: F) -> Timeout<F::IntoFuture> {
    let driver = super::current("timeout");
    match driver.clock().start_mark() {
        StartMark::Exact(now) => {
            let deadline = now.saturating_add(duration);
            Timeout::new(future.into_future(), Sleep::new(driver, deadline), None)
        }
        mark => {
            // The sleep's deadline is set when the start is settled.
            let placeholder = driver.clock().origin();
            Timeout::new(
                future.into_future(),
                Sleep::new(driver, placeholder),
                Some(Lazy { mark, duration }),
            )
        }
    }
}

/// Like [`timeout`], with an absolute deadline.
///
/// # Panics
/// Outside a magpie runtime.
pub fn timeout_at<F: IntoFuture>(deadline: Instant, future: F) -> Timeout<F::IntoFuture> {
    let driver = super::current("timeout_at");
    Timeout::new(future.into_future(), Sleep::new(driver, deadline), None)
}

/// A start not yet settled: the mark taken by [`timeout`] and the duration
/// to count from it.
#[derive(Clone, Copy, Debug)]
struct Lazy {
    mark: StartMark,
    duration: Duration,
}

pin_project_lite::pin_project! {
    /// The future of [`timeout`] and [`timeout_at`]. The wrapped future is
    /// pinned in place (a pin projection by `pin-project-lite`: no box, and
    /// no `unsafe` written in this crate).
    #[must_use = "futures do nothing unless polled"]
    pub struct Timeout<F> {
        #[pin]
        value: F,
        delay: Sleep,
        lazy: Option<Lazy>,
    }
}

impl<F> Timeout<F> {
    fn new(value: F, delay: Sleep, lazy: Option<Lazy>) -> Self {
        Self { value, delay, lazy }
    }

    /// The future being run.
    pub fn get_ref(&self) -> &F {
        &self.value
    }

    /// The future being run, mutably. A `&mut Timeout` is never pinned
    /// (unless `F: Unpin`, where pinning promises nothing), so this hands
    /// out nothing a pin guards.
    pub fn get_mut(&mut self) -> &mut F {
        &mut self.value
    }

    /// The future being run, without its deadline.
    pub fn into_inner(self) -> F {
        self.value
    }

    /// The deadline. For a [`timeout`] not yet polled to `Pending` this is
    /// the latest its deadline can become (its start is settled at that
    /// poll, time/README.md "Timeouts"); from then on it is the deadline.
    pub fn deadline(&self) -> Instant {
        match self.lazy {
            Some(lazy) => self
                .delay
                .driver()
                .clock()
                .mark_upper_bound(lazy.mark)
                .saturating_add(lazy.duration),
            None => self.delay.deadline(),
        }
    }
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(out) = this.value.poll(cx) {
            return Poll::Ready(Ok(out));
        }
        let delay = this.delay;
        if let Some(lazy) = this.lazy.take() {
            // T2: the first `Pending`; settle the start. The sleep is not
            // registered yet, so `reset` only sets its deadline.
            let start = delay.driver().clock().resolve(lazy.mark);
            delay.reset(start.saturating_add(lazy.duration));
        }
        match crate::rt::coop::unconstrained(|| Pin::new(delay).poll(cx)) {
            Poll::Ready(()) => Poll::Ready(Err(Elapsed::new())),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<F> fmt::Debug for Timeout<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timeout")
            .field("deadline", &self.deadline())
            .finish_non_exhaustive()
    }
}
