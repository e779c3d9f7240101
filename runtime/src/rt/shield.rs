//! Cancellation shields: a section of a task that an `abort()` cannot cut in
//! half. The abort is remembered and takes effect when the last shield of the
//! task ends (at the task's next `Pending`), seed 003's deferred cancellation.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use magpie_core::task::{shield_enter, shield_exit, ShieldError};

/// Runs `future` inside a cancellation shield.
///
/// ```
/// # let rt = magpie_runtime::Runtime::builder().worker_threads(1).build().unwrap();
/// # rt.block_on(async {
/// let task = magpie_runtime::spawn(async {
///     magpie_runtime::shield(async {
///         // An abort arriving here waits until this block is done.
///         magpie_runtime::yield_now().await;
///         "committed"
///     })
///     .await
/// });
/// task.abort();
/// // Either it never started (cancelled) or the shielded block finished.
/// let _ = task.await;
/// # });
/// ```
///
/// Polled outside a task (directly in `block_on`), there is nothing to
/// cancel and the shield does nothing. Shields nest up to 255 deep; deeper
/// ones panic rather than corrupt the task's state.
pub fn shield<F: Future>(future: F) -> Shield<F> {
    Shield {
        future: Box::pin(future),
        state: ShieldState::NotEntered,
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ShieldState {
    NotEntered,
    Entered,
    /// Entered nothing (not inside a task) or already exited.
    Inactive,
}

/// The future [`shield`] returns. The inner future is boxed: pinning it in
/// place would need `unsafe`, which this crate does not have, and shields are
/// rare enough for one allocation each.
#[must_use = "futures do nothing unless polled"]
pub struct Shield<F> {
    future: Pin<Box<F>>,
    state: ShieldState,
}

impl<F> fmt::Debug for Shield<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shield")
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl<F> Shield<F> {
    fn exit(&mut self) {
        if self.state == ShieldState::Entered {
            self.state = ShieldState::Inactive;
            // NotInTask: the task's future is being dropped by a thread that
            // is not its poller (runtime shutdown); nothing to defer then.
            let _ = shield_exit();
        }
    }
}

impl<F: Future> Future for Shield<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        if self.state == ShieldState::NotEntered {
            self.state = match shield_enter() {
                Ok(()) => ShieldState::Entered,
                Err(ShieldError::NotInTask) => ShieldState::Inactive,
                Err(e) => panic!("cannot enter a cancellation shield: {e}"),
            };
        }
        let out = self.future.as_mut().poll(cx);
        if out.is_ready() {
            self.exit();
        }
        out
    }
}

impl<F> Drop for Shield<F> {
    fn drop(&mut self) {
        self.exit();
    }
}
