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
            let mut s = self.lock();
            s.requested = true;
            std::mem::take(&mut s.wakers)
        };
        for w in wakers {
            w.wake();
        }
    }

    /// Whether the stop was requested.
    pub fn is_requested(&self) -> bool {
        self.lock().requested
    }

    /// Completes when the stop is requested. Dropping it takes its waker
    /// back out of the token (one sleep per tick must not grow the list).
    pub(crate) fn requested(&self) -> Requested<'_> {
        Requested {
            token: self,
            registered: None,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, StopState> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The future of [`StopToken::requested`].
pub(crate) struct Requested<'a> {
    token: &'a StopToken,
    /// The waker this future left in the token, if any.
    registered: Option<Waker>,
}

impl Future for Requested<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        let mut s = this.token.lock();
        if s.requested {
            return Poll::Ready(());
        }
        if !this
            .registered
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()))
        {
            if let Some(old) = this.registered.take() {
                s.wakers.retain(|w| !w.will_wake(&old));
            }
            s.wakers.push(cx.waker().clone());
            this.registered = Some(cx.waker().clone());
        }
        Poll::Pending
    }
}

impl Drop for Requested<'_> {
    fn drop(&mut self) {
        if let Some(old) = self.registered.take() {
            self.token.lock().wakers.retain(|w| !w.will_wake(&old));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::pin::pin;

    fn waiting(token: &StopToken) -> usize {
        token.lock().wakers.len()
    }

    #[test]
    fn a_dropped_wait_leaves_no_waker_behind() {
        let token = StopToken::new();
        let mut cx = Context::from_waker(Waker::noop());
        for _ in 0..100 {
            let mut fut = pin!(token.requested());
            assert!(fut.as_mut().poll(&mut cx).is_pending());
            assert!(fut.as_mut().poll(&mut cx).is_pending());
            assert_eq!(waiting(&token), 1);
        }
        assert_eq!(waiting(&token), 0);
    }

    #[test]
    fn a_request_completes_a_pending_wait() {
        let token = StopToken::new();
        let mut cx = Context::from_waker(Waker::noop());
        let mut fut = pin!(token.requested());
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        token.clone().request();
        assert!(fut.as_mut().poll(&mut cx).is_ready());
        assert!(token.is_requested());
    }
}
