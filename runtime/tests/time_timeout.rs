//! `timeout` and `timeout_at` (time/README.md, "Timeouts"): the future is
//! polled first, the deadline never fires early, and it fires even under a
//! future that spends the whole cooperative budget.
#![cfg(not(loom))]

mod time_util;

use std::future::{pending, ready, Future};
use std::io;
use std::pin::Pin;
use std::sync::mpsc;
use std::task::{Context, Poll};

use magpie_runtime::time::{self, error::Elapsed, timeout, timeout_at, Duration, Instant};
use magpie_runtime::Runtime;
use time_util::{paused, TestTask};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn a_ready_future_is_ok_even_with_a_zero_timeout() {
    let (_driver, _guard, start, log) = paused();
    let mut t = TestTask::new(0, &log, timeout(Duration::ZERO, ready(5)));
    assert_eq!(t.poll(), Poll::Ready(Ok(5)));
    // And with a deadline already in the past.
    let mut t = TestTask::new(1, &log, timeout_at(start, ready(6)));
    assert_eq!(t.poll(), Poll::Ready(Ok(6)));
}

#[test]
fn a_pending_future_times_out_exactly_at_the_deadline_never_before() {
    let (_driver, _guard, start, log) = paused();
    let fut = timeout(ms(10), pending::<()>());
    assert_eq!(fut.deadline(), start + ms(10));
    let mut t = TestTask::new(0, &log, fut);
    assert!(t.poll().is_pending());
    time::advance(ms(9));
    assert_eq!(t.wakes(), 0);
    assert!(t.poll().is_pending(), "timed out early");
    time::advance(ms(1));
    assert_eq!(t.wakes(), 1, "the deadline wakes the task");
    let err: Elapsed = match t.poll() {
        Poll::Ready(Err(e)) => e,
        other => panic!("expected Elapsed, got {other:?}"),
    };
    assert_eq!(Instant::now(), start + ms(10));
    assert_eq!(err.to_string(), "deadline has elapsed");
    let io_err: io::Error = err.into();
    assert_eq!(io_err.kind(), io::ErrorKind::TimedOut);
}

/// Ready on its `n`-th poll.
struct ReadyAfter(u32);

impl Future for ReadyAfter {
    type Output = &'static str;
    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<&'static str> {
        self.0 -= 1;
        if self.0 == 0 {
            Poll::Ready("done")
        } else {
            Poll::Pending
        }
    }
}

#[test]
fn the_future_is_polled_before_the_deadline_is_checked() {
    let (_driver, _guard, _start, log) = paused();
    let mut t = TestTask::new(0, &log, timeout(ms(10), ReadyAfter(2)));
    assert!(t.poll().is_pending());
    time::advance(ms(50)); // the deadline passed, and the future is ready now
    assert_eq!(t.poll(), Poll::Ready(Ok("done")));
}

#[test]
fn a_timeout_fires_under_a_future_that_spends_the_whole_budget() {
    // Each poll of the inner loop completes zero-length sleeps until the
    // task's budget runs out (then the sleep answers Pending and wakes the
    // task): the deadline's own timer must not need budget, or it would
    // never fire.
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let rt = Runtime::builder().worker_threads(1).build().unwrap();
        let out = rt.block_on(async {
            magpie_runtime::spawn(timeout(ms(5), async {
                loop {
                    time::sleep(Duration::ZERO).await;
                }
            }))
            .await
            .unwrap()
        });
        let _ = tx.send(out.is_err());
    });
    let timed_out = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the timeout never fired");
    assert!(timed_out);
}

/// The future is held in place, not boxed: a `Timeout` is at least as large
/// as the future it wraps (a boxed one would be a pointer), it is `!Unpin`
/// when its future is, and `get_mut` / `into_inner` hand the future back.
#[test]
fn the_future_is_pinned_in_place_not_boxed() {
    let (_driver, _guard, _start, log) = paused();
    let big = async {
        let buf = [7u8; 1024];
        std::future::ready(()).await;
        buf.iter().map(|&b| usize::from(b)).sum::<usize>()
    };
    let inner = std::mem::size_of_val(&big);
    assert!(inner >= 1024, "{inner}");
    let t = timeout(ms(10), big);
    assert!(
        std::mem::size_of_val(&t) >= inner,
        "the future lives inside"
    );
    let mut t = TestTask::new(0, &log, t);
    assert_eq!(t.poll(), Poll::Ready(Ok(7 * 1024)));
    let mut unpinned = timeout(ms(10), ready(3));
    let inner: &mut std::future::Ready<i32> = unpinned.get_mut();
    assert_eq!(std::mem::replace(inner, ready(5)).into_inner(), 3);
    assert_eq!(unpinned.into_inner().into_inner(), 5);
    assert_eq!(timeout(ms(10), ready(4)).into_inner().into_inner(), 4);
}

/// time/README.md, "The start of a `timeout`": on a running clock a
/// `timeout` around a ready future returns its output and never registers a
/// timer (nothing but the coarse mark is read).
#[test]
fn a_ready_future_is_ok_on_a_running_clock_without_a_timer() {
    let driver = time::Driver::new();
    let _guard = time::enter(&driver);
    let log = time_util::WakeLog::default();
    for i in 0..3 {
        let mut t = TestTask::new(i, &log, timeout(ms(1_000), ready(i)));
        assert_eq!(t.poll(), Poll::Ready(Ok(i)));
    }
    assert_eq!(driver.next_expiration(), None, "no timer was registered");
}

/// T3 with a real clock: a `Timeout` made, then first polled later than the
/// coarse clock's allowed lag, counts from no earlier than the call and no
/// later than the bound after it, and does not elapse before `creation +
/// duration`. Only instants are compared, never elapsed wall-clock spans.
#[test]
fn a_timeout_polled_late_never_fires_early_and_starts_at_most_the_bound_after_the_call() {
    let rt = Runtime::builder().worker_threads(1).build().unwrap();
    rt.block_on(async {
        let d = ms(15);
        let bound = time::Driver::try_current()
            .unwrap()
            .clock()
            .timeout_lateness_bound();
        // Two polls late by more than the bound, one at once.
        for delay in [bound + ms(2), Duration::ZERO, bound + ms(1)] {
            let before = Instant::now();
            let mut t = std::pin::pin!(timeout(d, pending::<()>()));
            let after = Instant::now();
            assert!(t.deadline() >= before + d);
            std::thread::sleep(delay);
            let first_poll = std::future::poll_fn(|cx| Poll::Ready(t.as_mut().poll(cx))).await;
            let polled = Instant::now();
            let deadline = t.deadline();
            assert!(
                deadline >= before + d,
                "early: {:?}",
                (before + d) - deadline
            );
            assert!(
                deadline <= after + d + bound,
                "late by more than the bound: {:?}",
                deadline - (after + d + bound)
            );
            assert!(deadline <= polled + d, "later than the first poll");
            // A loaded machine may oversleep the delay past the deadline:
            // then the first poll already elapsed, never before it was due.
            match first_poll {
                Poll::Pending => assert!(t.await.is_err()),
                Poll::Ready(r) => assert!(r.is_err()),
            }
            assert!(Instant::now() >= before + d, "fired early");
        }
    });
}

/// T1 on a paused clock: the start is the paused time of the call, not of
/// the first poll (tokio's semantics, exactly).
#[test]
fn a_paused_clock_counts_from_the_call_not_the_first_poll() {
    let (_driver, _guard, start, log) = paused();
    let fut = timeout(ms(10), pending::<()>());
    assert_eq!(fut.deadline(), start + ms(10));
    time::advance(ms(4));
    let mut t = TestTask::new(0, &log, fut);
    assert!(t.poll().is_pending());
    time::advance(ms(5));
    assert!(t.poll().is_pending(), "timed out early");
    time::advance(ms(1));
    assert_eq!(t.wakes(), 1);
    assert!(matches!(t.poll(), Poll::Ready(Err(_))));
    assert_eq!(Instant::now(), start + ms(10));
}
