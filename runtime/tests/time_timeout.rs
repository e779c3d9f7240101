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
