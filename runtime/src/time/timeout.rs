//! `timeout`, `timeout_at` and the `Timeout` future (tokio's semantics).

use std::fmt;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use super::error::Elapsed;
use super::{Instant, Sleep};

/// Runs `future` for at most `duration` on the current runtime's clock:
/// `Ok(output)` if it finished in time, `Err(Elapsed)` otherwise (and the
/// future is dropped with the `Timeout`).
///
/// The future is polled **before** the deadline is checked, on every poll,
/// so a future that is ready at once is `Ok` even with a zero `duration`
/// (as in tokio). The deadline is `Instant::now() + duration`, rounded up to
/// the wheel's 1 ms like any sleep, so it never fires early. The deadline's
/// timer is polled outside the cooperative budget: a future that spends the
/// whole budget on each poll still times out.
///
/// The future is pinned in place inside the `Timeout` (no allocation).
/// Creating a `Timeout` reads the clock once, as tokio's does: on this
/// project's 2-core VM `Instant::now` is about 30 ns, most of the 37 ns a
/// `timeout` around a ready future costs (`benches/examples/async_blocking.rs`;
/// docs/benchmarks.md). Taking the deadline at the first `Pending` instead
/// would be cheaper and would move the deadline of a `Timeout` polled late, so
/// it is not done.
///
/// # Panics
/// Outside a magpie runtime (no timer driver on this thread).
pub fn timeout<F: IntoFuture>(duration: Duration, future: F) -> Timeout<F::IntoFuture> {
    let driver = super::current("timeout");
    let deadline = driver.clock().now().saturating_add(duration);
    Timeout::new(future.into_future(), Sleep::new(driver, deadline))
}

/// Like [`timeout`], with an absolute deadline.
///
/// # Panics
/// Outside a magpie runtime.
pub fn timeout_at<F: IntoFuture>(deadline: Instant, future: F) -> Timeout<F::IntoFuture> {
    let driver = super::current("timeout_at");
    Timeout::new(future.into_future(), Sleep::new(driver, deadline))
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
    }
}

impl<F> Timeout<F> {
    fn new(value: F, delay: Sleep) -> Self {
        Self { value, delay }
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

    /// The deadline.
    pub fn deadline(&self) -> Instant {
        self.delay.deadline()
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
        match crate::rt::coop::unconstrained(|| Pin::new(delay).poll(cx)) {
            Poll::Ready(()) => Poll::Ready(Err(Elapsed::new())),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<F> fmt::Debug for Timeout<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timeout")
            .field("deadline", &self.delay.deadline())
            .finish_non_exhaustive()
    }
}
