//! Cooperative budget: a task may make this many progress steps through the
//! runtime's own leaf futures (join handles, sleeps, `yield_now`) per poll
//! before those futures start answering `Pending` and rescheduling it, so one
//! busy task cannot hold a worker forever.

use std::cell::Cell;
use std::task::{Context, Poll};

/// Progress steps a task gets per poll (seed 003's 128).
pub(crate) const BUDGET: u8 = 128;

thread_local! {
    /// `None`: unconstrained (no task is being polled on this thread).
    static BUDGET_LEFT: Cell<Option<u8>> = const { Cell::new(None) };
}

/// Runs `f` (one task poll) with a fresh budget, restoring the previous one.
#[inline]
pub(crate) fn with_budget<R>(f: impl FnOnce() -> R) -> R {
    with_budget_left(Some(BUDGET), f)
}

/// Runs `f` with no budget, restoring the one in force afterwards. For a
/// timeout's deadline: it must fire even when the future it guards spent the
/// whole budget in the same poll (tokio does the same).
#[inline]
pub(crate) fn unconstrained<R>(f: impl FnOnce() -> R) -> R {
    with_budget_left(None, f)
}

#[inline]
fn with_budget_left<R>(budget: Option<u8>, f: impl FnOnce() -> R) -> R {
    struct Reset(Option<u8>);
    impl Drop for Reset {
        fn drop(&mut self) {
            BUDGET_LEFT.with(|b| b.set(self.0));
        }
    }
    let _reset = Reset(BUDGET_LEFT.with(|b| b.replace(budget)));
    f()
}

/// Called first by every leaf future: spends one unit, or, when the budget is
/// gone, wakes the task and answers `Pending` so it goes behind other work.
/// The returned [`Spent`] gives the unit back if the leaf then returns
/// `Pending` anyway (no progress, no charge).
#[inline]
pub(crate) fn poll_proceed(cx: &mut Context<'_>) -> Poll<Spent> {
    BUDGET_LEFT.with(|b| match b.get() {
        None => Poll::Ready(Spent(false)),
        Some(0) => {
            cx.waker().wake_by_ref();
            Poll::Pending
        }
        Some(n) => {
            b.set(Some(n - 1));
            Poll::Ready(Spent(true))
        }
    })
}

/// One unit of budget, spent by [`poll_proceed`].
#[derive(Debug)]
#[must_use]
pub(crate) struct Spent(bool);

impl Spent {
    /// The leaf made no progress: give the unit back.
    #[inline]
    pub(crate) fn refund(self) {
        if self.0 {
            BUDGET_LEFT.with(|b| {
                if let Some(n) = b.get() {
                    b.set(Some(n.saturating_add(1).min(BUDGET)));
                }
            });
        }
    }
}

/// The budget left on this thread (`None` outside a task poll). For tests.
#[cfg(test)]
pub(crate) fn remaining() -> Option<u8> {
    BUDGET_LEFT.with(|b| b.get())
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::task::{Wake, Waker};

    struct Flag(std::sync::Mutex<u32>);
    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            *self.0.lock().unwrap() += 1;
        }
    }

    #[test]
    fn budget_runs_out_after_128_steps_and_wakes_the_task() {
        let flag = Arc::new(Flag(std::sync::Mutex::new(0)));
        let waker = Waker::from(flag.clone());
        let mut cx = Context::from_waker(&waker);
        assert!(matches!(poll_proceed(&mut cx), Poll::Ready(Spent(false))));
        with_budget(|| {
            for _ in 0..BUDGET {
                assert!(matches!(poll_proceed(&mut cx), Poll::Ready(Spent(true))));
            }
            assert!(poll_proceed(&mut cx).is_pending());
            assert_eq!(*flag.0.lock().unwrap(), 1);
        });
        assert_eq!(remaining(), None);
    }

    #[test]
    fn a_refund_gives_the_unit_back() {
        let waker = Waker::noop();
        let mut cx = Context::from_waker(waker);
        with_budget(|| {
            let Poll::Ready(spent) = poll_proceed(&mut cx) else {
                panic!("fresh budget")
            };
            assert_eq!(remaining(), Some(BUDGET - 1));
            spent.refund();
            assert_eq!(remaining(), Some(BUDGET));
        });
    }
}
