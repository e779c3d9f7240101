//! The run's stop token: checked before every iteration, observable by
//! components, and able to wake a wall-clock sleep at once.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};

/// Requests a run to stop. Clone it freely; every clone is the same token.
#[derive(Clone, Default)]
pub struct StopToken {
    inner: Arc<Mutex<StopState>>,
}

#[derive(Default)]
struct StopState {
    requested: bool,
    /// Sleeps waiting for the request (the runner's wall-clock sleep).
    wakers: Vec<Waker>,
}

impl fmt::Debug for StopToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StopToken")
            .field("requested", &self.is_requested())
            .finish()
    }
}

impl StopToken {
    /// A token nobody has triggered.
    pub fn new() -> StopToken {
        StopToken::default()
    }

    /// Requests the stop. Idempotent. Wakes a runner sleeping for its next
    /// tick.
    pub fn request(&self) {
        let wakers = {
            let mut s = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            s.requested = true;
            std::mem::take(&mut s.wakers)
        };
        for w in wakers {
            w.wake();
        }
    }

    /// Whether the stop was requested.
    pub fn is_requested(&self) -> bool {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .requested
    }

    /// Completes when the stop is requested.
    pub(crate) fn requested(&self) -> Requested<'_> {
        Requested { token: self }
    }
}

/// The future of [`StopToken::requested`].
pub(crate) struct Requested<'a> {
    token: &'a StopToken,
}

impl Future for Requested<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut s = self
            .token
            .inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if s.requested {
            return Poll::Ready(());
        }
        if !s.wakers.iter().any(|w| w.will_wake(cx.waker())) {
            s.wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }
}
