//! The task cell through its safe API: outputs and futures dropped exactly
//! once on every path, panics, odd future sizes and alignments, JoinHandle
//! wakers, wakers that outlive their task, aborts, shields, shutdown. Each
//! test ends with `shutdown_and_check_all_freed`, which fails if a task was
//! not freed; Miri (`cargo +nightly miri test -p magpie-core`) checks the
//! rest: no use after free, no double free, no leak.
#![cfg(not(loom))]

mod task_cell_support;

use std::future::Future;
use std::mem::size_of;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use magpie_core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use magpie_core::task::{
    current_task_id, shield_enter, shield_exit, AbortHandle, JoinError, JoinHandle, Notified,
    OwnedTasks, ShieldError, ShieldExit, TaskId,
};
use task_cell_support::*;

// ---------------------------------------------------------------------------
// Sizes and auto traits
// ---------------------------------------------------------------------------

#[test]
fn handles_and_entries_are_one_pointer_wide() {
    assert_eq!(size_of::<Notified<Sched>>(), size_of::<usize>());
    assert_eq!(size_of::<JoinHandle<[u8; 1000]>>(), size_of::<usize>());
    assert_eq!(size_of::<Option<JoinHandle<u8>>>(), size_of::<usize>());
    assert_eq!(size_of::<AbortHandle>(), size_of::<usize>());
    assert_eq!(size_of::<Option<Notified<Sched>>>(), size_of::<usize>());
    assert_eq!(size_of::<Waker>(), 2 * size_of::<usize>());
}

#[test]
fn handles_are_send_sync_and_unpin_as_documented() {
    fn send<T: Send>() {}
    fn sync<T: Sync>() {}
    fn unpin<T: Unpin>() {}
    send::<Notified<Sched>>();
    send::<JoinHandle<u32>>();
    sync::<JoinHandle<u32>>();
    unpin::<JoinHandle<std::marker::PhantomPinned>>();
    send::<AbortHandle>();
    sync::<AbortHandle>();
    send::<JoinError>();
    sync::<JoinError>();
    send::<OwnedTasks<Sched>>();
    sync::<OwnedTasks<Sched>>();
}

// ---------------------------------------------------------------------------
// Outputs: delivered or dropped exactly once
// ---------------------------------------------------------------------------

#[test]
fn output_reaches_the_join_handle() {
    let s = Sched::new(4);
    let join = s.spawn(async { 6 * 7 });
    assert!(!join.is_finished());
    assert_eq!(s.run_all(), 1);
    assert!(join.is_finished());
    assert_eq!(join_now(join).unwrap(), 42);
    s.shutdown_and_check_all_freed();
}

#[test]
fn output_dropped_once_by_the_task_when_the_handle_was_dropped_first() {
    let s = Sched::new(4);
    let drops = counter();
    let d = drops.clone();
    let join = s.spawn(async move { DropCounter(d) });
    drop(join);
    assert_eq!(count(&drops), 0);
    s.run_all();
    assert_eq!(count(&drops), 1, "the task drops its own output");
    s.shutdown_and_check_all_freed();
    assert_eq!(count(&drops), 1);
}

#[test]
fn output_dropped_once_by_the_handle_when_dropped_after_completion() {
    let s = Sched::new(4);
    let drops = counter();
    let d = drops.clone();
    let join = s.spawn(async move { DropCounter(d) });
    s.run_all();
    assert_eq!(count(&drops), 0, "the output waits for the handle");
    drop(join);
    assert_eq!(count(&drops), 1);
    s.shutdown_and_check_all_freed();
    assert_eq!(count(&drops), 1);
}

#[test]
fn output_read_by_the_handle_is_dropped_once_by_its_reader() {
    let s = Sched::new(4);
    let drops = counter();
    let d = drops.clone();
    let join = s.spawn(async move { DropCounter(d) });
    s.run_all();
    let out = join_now(join).unwrap();
    assert_eq!(count(&drops), 0);
    drop(out);
    assert_eq!(count(&drops), 1);
    s.shutdown_and_check_all_freed();
    assert_eq!(count(&drops), 1);
}

#[test]
fn output_and_join_waker_dropped_once_when_a_registered_handle_is_dropped() {
    // Registered, then dropped before completion: the handle drops its waker,
    // the task drops its output.
    let s = Sched::new(4);
    let drops = counter();
    let d = drops.clone();
    let (f, gate) = Gate::new();
    let mut join = s.spawn(async move {
        f.await;
        DropCounter(d)
    });
    s.run_all();
    let (wakes, waker) = counting_waker();
    assert!(poll_join(&mut join, &waker).is_pending());
    let waker_refs = Arc::strong_count(&wakes);
    assert_eq!(waker_refs, 3, "ours, the Waker's, the registered clone");
    drop(join);
    assert_eq!(Arc::strong_count(&wakes), 2, "the handle dropped its waker");
    gate.open();
    s.run_all();
    assert_eq!(count(&drops), 1);
    assert_eq!(wakes.count(), 0, "a dropped handle is not woken");
    s.shutdown_and_check_all_freed();
}

#[test]
fn output_stays_until_the_handle_reads_it_after_a_completion_wake() {
    let s = Sched::new(4);
    let drops = counter();
    let d = drops.clone();
    let (f, gate) = Gate::new();
    let mut join = s.spawn(async move {
        f.await;
        DropCounter(d)
    });
    s.run_all();
    let (wakes, waker) = counting_waker();
    assert!(poll_join(&mut join, &waker).is_pending());
    gate.open();
    s.run_all();
    assert_eq!(wakes.count(), 1, "completion wakes the joiner once");
    assert_eq!(
        Arc::strong_count(&wakes),
        3,
        "the task side hands the waker back to the live handle"
    );
    assert_eq!(count(&drops), 0);
    let out = match poll_join(&mut join, &waker) {
        Poll::Ready(out) => out.unwrap(),
        Poll::Pending => panic!("woken but not ready"),
    };
    drop(out);
    drop(join);
    assert_eq!(count(&drops), 1);
    assert_eq!(Arc::strong_count(&wakes), 2);
    s.shutdown_and_check_all_freed();
}

#[test]
#[should_panic(expected = "polled after it returned Ready")]
fn join_handle_polled_after_ready_panics() {
    let s = Sched::new(1);
    let mut join = s.spawn(async { 1 });
    s.run_all();
    assert!(poll_join(&mut join, Waker::noop()).is_ready());
    let _ = poll_join(&mut join, Waker::noop());
}

// ---------------------------------------------------------------------------
// Panics
// ---------------------------------------------------------------------------

struct PanicOnDrop(Arc<AtomicUsize>);
impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Relaxed);
        panic!("drop panic");
    }
}

#[test]
fn panicking_poll_becomes_a_panic_join_error_and_drops_the_future_once() {
    let s = Sched::new(4);
    let drops = counter();
    let d = DropCounter(drops.clone());
    let join = s.spawn(async move {
        let _held = d;
        if std::hint::black_box(true) {
            panic!("boom");
        }
    });
    s.run_all();
    assert_eq!(
        count(&drops),
        1,
        "the future (and what it held) dropped once"
    );
    let err = join_now(join).unwrap_err();
    assert!(err.is_panic() && !err.is_cancelled());
    assert!(err.to_string().contains("boom"), "{err}");
    assert!(format!("{err:?}").contains("boom"));
    let payload = err.into_panic();
    assert_eq!(*payload.downcast::<&str>().unwrap(), "boom");
    s.shutdown_and_check_all_freed();
}

#[test]
fn panicking_drop_of_a_cancelled_future_becomes_a_panic_join_error() {
    let s = Sched::new(4);
    let drops = counter();
    let p = PanicOnDrop(drops.clone());
    let join = s.spawn(async move {
        let _p = p;
        Never.await;
    });
    s.run_all();
    join.abort();
    s.run_all();
    assert_eq!(count(&drops), 1);
    let err = join_now(join).unwrap_err();
    assert!(err.is_panic(), "{err:?}");
    assert!(err.try_into_panic().is_ok());
    s.shutdown_and_check_all_freed();
}

#[test]
fn panicking_drop_after_ready_becomes_a_panic_and_the_output_is_dropped_once() {
    // A hand-written future that is Ready but panics when dropped.
    struct ReadyThenPanic(Option<DropCounter>, Arc<AtomicUsize>);
    impl Future for ReadyThenPanic {
        type Output = DropCounter;
        fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<DropCounter> {
            Poll::Ready(self.0.take().unwrap())
        }
    }
    impl Drop for ReadyThenPanic {
        fn drop(&mut self) {
            self.1.fetch_add(1, Ordering::Relaxed);
            panic!("drop after ready");
        }
    }
    let s = Sched::new(4);
    let outputs = counter();
    let fut_drops = counter();
    let join = s.spawn(ReadyThenPanic(
        Some(DropCounter(outputs.clone())),
        fut_drops.clone(),
    ));
    s.run_all();
    assert_eq!(count(&fut_drops), 1);
    assert_eq!(count(&outputs), 1, "the orphaned output was dropped once");
    assert!(join_now(join).unwrap_err().is_panic());
    s.shutdown_and_check_all_freed();
}

#[test]
fn panicking_output_drop_on_the_task_side_is_contained() {
    let s = Sched::new(4);
    let drops = counter();
    let d = drops.clone();
    let join = s.spawn(async move { PanicOnDrop(d) });
    drop(join);
    // The worker (this thread) does not unwind.
    s.run_all();
    assert_eq!(count(&drops), 1);
    s.shutdown_and_check_all_freed();
}

#[test]
fn join_error_into_panic_resumes_with_the_original_payload() {
    let s = Sched::new(1);
    let join = s.spawn(async {
        std::panic::panic_any(17u32);
    });
    s.run_all();
    let err = join_now(join).unwrap_err();
    assert_eq!(err.to_string(), format!("task {} panicked", err.id()));
    let payload = err.into_panic();
    let caught = catch_unwind(AssertUnwindSafe(|| resume_unwind(payload))).unwrap_err();
    assert_eq!(*caught.downcast::<u32>().unwrap(), 17);
    s.shutdown_and_check_all_freed();
}

#[test]
#[should_panic(expected = "cancelled task")]
fn join_error_into_panic_on_a_cancellation_panics() {
    let s = Sched::new(1);
    let join = s.spawn(Never);
    join.abort();
    s.run_all();
    let err = join_now(join).unwrap_err();
    assert!(err.is_cancelled());
    let _ = err.into_panic();
}

// ---------------------------------------------------------------------------
// Future sizes and alignment
// ---------------------------------------------------------------------------

#[test]
fn zero_sized_future_and_output_complete() {
    struct Zst;
    impl Future for Zst {
        type Output = ();
        fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
            Poll::Ready(())
        }
    }
    assert_eq!(size_of::<Zst>(), 0);
    let s = Sched::new(1);
    let join = s.spawn(Zst);
    s.run_all();
    join_now(join).unwrap();
    s.shutdown_and_check_all_freed();
}

#[test]
fn large_future_and_output_survive_a_yield() {
    const N: usize = if cfg!(miri) { 16 * 1024 } else { 256 * 1024 };
    // The future itself is large: the array lives inline in it.
    struct Inline {
        data: [u8; N],
        yielded: bool,
    }
    impl Future for Inline {
        type Output = u64;
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u64> {
            if !self.yielded {
                self.yielded = true;
                self.data[N - 1] = 7;
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            Poll::Ready(self.data.iter().map(|&b| b as u64).sum())
        }
    }
    // Run on a thread with room for the copies a debug build makes of the
    // future and the output on their way into and out of the cell.
    std::thread::Builder::new()
        .stack_size(64 * N + (4 << 20))
        .spawn(|| {
            let s = Sched::new(1);
            let mut data = [1u8; N];
            data[0] = 2;
            let join = s.spawn(Inline {
                data,
                yielded: false,
            });
            s.run_all();
            assert_eq!(join_now(join).unwrap(), N as u64 + 1 + 6);
            let big_out = s.spawn(async { [3u8; N] });
            s.run_all();
            let out = join_now(big_out).unwrap();
            assert!(out.iter().all(|&b| b == 3));
            s.shutdown_and_check_all_freed();
        })
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn over_aligned_future_is_polled_at_an_aligned_address() {
    #[repr(align(64))]
    struct Align64(u8, bool);
    impl Future for Align64 {
        type Output = usize;
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<usize> {
            let addr = &*self as *const Align64 as usize;
            assert_eq!(addr % 64, 0, "future not 64-aligned");
            if !self.1 {
                self.1 = true;
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            Poll::Ready(self.0 as usize)
        }
    }
    #[repr(align(4096))]
    struct Align4096(u8);
    impl Future for Align4096 {
        type Output = u8;
        fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<u8> {
            assert_eq!(&*self as *const Align4096 as usize % 4096, 0);
            Poll::Ready(self.0)
        }
    }
    let s = Sched::new(1);
    let a = s.spawn(Align64(9, false));
    let b = s.spawn(Align4096(5));
    s.run_all();
    assert_eq!(join_now(a).unwrap(), 9);
    assert_eq!(join_now(b).unwrap(), 5);
    s.shutdown_and_check_all_freed();
}

// ---------------------------------------------------------------------------
// Wakes
// ---------------------------------------------------------------------------

#[test]
fn wake_of_an_idle_task_schedules_it_once() {
    let s = Sched::new(2);
    let (f, gate) = Gate::new();
    let join = s.spawn(f);
    s.run_all();
    assert_eq!(gate.polls(), 1);
    let waker = gate.take_waker();
    let waker2 = waker.clone();
    waker.wake_by_ref();
    assert_eq!(s.queued(), 1);
    waker2.wake_by_ref(); // already SCHEDULED: NOTIFIED only
    waker.wake(); // by value, still SCHEDULED
    assert_eq!(s.queued(), 1, "one entry however many wakes");
    s.run_all();
    assert_eq!(gate.polls(), 2);
    assert!(!join.is_finished());
    // The waker stored by poll 2 is in the slot; wake through an older clone.
    gate.flag.store(true, Ordering::Release);
    waker2.wake();
    s.run_all();
    assert!(join.is_finished());
    assert_eq!(gate.polls(), 3);
    drop(gate.take_waker());
    join_now(join).unwrap();
    s.shutdown_and_check_all_freed();
}

#[test]
fn wake_during_the_poll_reschedules_through_yield_now_exactly_once() {
    let s = Sched::new(2);
    let join = s.spawn(YieldTimes(3));
    s.run_all();
    assert_eq!(s.yields(), 3);
    assert_eq!(s.schedules(), 0);
    join_now(join).unwrap();
    s.shutdown_and_check_all_freed();
}

#[test]
fn waker_outliving_its_task_can_wake_and_drop_safely() {
    let s = Sched::new(2);
    let kept: Arc<Mutex<Vec<Waker>>> = Arc::new(Mutex::new(Vec::new()));
    let k = kept.clone();
    let join = s.spawn(std::future::poll_fn(move |cx| {
        k.lock().unwrap().push(cx.waker().clone());
        k.lock().unwrap().push(cx.waker().clone());
        Poll::Ready(5)
    }));
    s.run_all();
    assert_eq!(join_now(join).unwrap(), 5);
    s.0.owned.close_and_shutdown_all();
    let mut wakers = std::mem::take(&mut *kept.lock().unwrap());
    assert_eq!(wakers.len(), 2);
    // The task completed and its handle is gone; only the wakers keep it.
    wakers[0].wake_by_ref();
    let clone = wakers[0].clone();
    assert!(clone.will_wake(&wakers[1]), "same task, same vtable");
    wakers.pop().unwrap().wake(); // by value, not the last
    assert_eq!(s.queued(), 0, "a completed task is never scheduled");
    drop(wakers);
    clone.wake(); // by value, the last reference: frees the task
    assert_eq!(Arc::strong_count(&s.0), 1);
}

#[test]
fn join_handle_polled_with_changing_wakers_wakes_only_the_latest() {
    let s = Sched::new(2);
    let (f, gate) = Gate::new();
    let mut join = s.spawn(f);
    s.run_all();
    let (a, wa) = counting_waker();
    let (b, wb) = counting_waker();
    assert!(poll_join(&mut join, &wa).is_pending());
    assert!(poll_join(&mut join, &wa).is_pending());
    assert_eq!(
        Arc::strong_count(&a),
        3,
        "the same waker is not cloned again"
    );
    assert!(poll_join(&mut join, &wb).is_pending());
    assert_eq!(Arc::strong_count(&a), 2, "the replaced waker was dropped");
    assert_eq!(Arc::strong_count(&b), 3);
    gate.open();
    s.run_all();
    assert_eq!(a.count(), 0);
    assert_eq!(b.count(), 1);
    assert!(poll_join(&mut join, &wb).is_ready());
    drop(join);
    assert_eq!(Arc::strong_count(&b), 2);
    s.shutdown_and_check_all_freed();
}

#[test]
fn join_handle_registering_after_completion_reads_at_once() {
    let s = Sched::new(2);
    let mut join = s.spawn(async { 3 });
    s.run_all();
    let (w, waker) = counting_waker();
    assert!(matches!(poll_join(&mut join, &waker), Poll::Ready(Ok(3))));
    assert_eq!(w.count(), 0);
    drop(join);
    assert_eq!(Arc::strong_count(&w), 2);
    s.shutdown_and_check_all_freed();
}

// ---------------------------------------------------------------------------
// Abort and shields
// ---------------------------------------------------------------------------

#[test]
fn abort_of_an_idle_task_schedules_and_cancels_it() {
    let s = Sched::new(2);
    let drops = counter();
    let d = DropCounter(drops.clone());
    let mut join = s.spawn(async move {
        let _d = d;
        Never.await;
    });
    s.run_all();
    let (w, waker) = counting_waker();
    assert!(poll_join(&mut join, &waker).is_pending());
    let abort = join.abort_handle();
    abort.abort();
    assert_eq!(s.queued(), 1, "the idle task was scheduled to be cancelled");
    abort.abort(); // idempotent: already SCHEDULED
    assert_eq!(s.queued(), 1);
    s.run_all();
    assert_eq!(count(&drops), 1);
    assert_eq!(w.count(), 1);
    assert!(abort.is_finished());
    let err = join_now(join).unwrap_err();
    assert!(err.is_cancelled());
    assert_eq!(err.id(), abort.id());
    assert!(err.to_string().contains("cancelled"));
    drop(abort);
    s.shutdown_and_check_all_freed();
}

#[test]
fn abort_after_completion_keeps_the_output() {
    let s = Sched::new(2);
    let join = s.spawn(async { 8 });
    s.run_all();
    join.abort();
    assert_eq!(s.queued(), 0);
    assert_eq!(join_now(join).unwrap(), 8);
    s.shutdown_and_check_all_freed();
}

#[test]
fn abort_during_the_poll_takes_effect_when_it_returns_pending() {
    let s = Sched::new(2);
    let slot: Arc<Mutex<Option<AbortHandle>>> = Arc::new(Mutex::new(None));
    let sl = slot.clone();
    let polls = counter();
    let p = polls.clone();
    let join = s.spawn(std::future::poll_fn(move |_| {
        p.fetch_add(1, Ordering::Relaxed);
        sl.lock().unwrap().as_ref().unwrap().abort();
        Poll::<()>::Pending
    }));
    *slot.lock().unwrap() = Some(join.abort_handle());
    s.run_all();
    assert_eq!(count(&polls), 1);
    assert!(join_now(join).unwrap_err().is_cancelled());
    drop(slot.lock().unwrap().take());
    s.shutdown_and_check_all_freed();
}

#[test]
fn abort_during_a_poll_that_returns_ready_keeps_the_output() {
    let s = Sched::new(2);
    let slot: Arc<Mutex<Option<AbortHandle>>> = Arc::new(Mutex::new(None));
    let sl = slot.clone();
    let join = s.spawn(std::future::poll_fn(move |_| {
        sl.lock().unwrap().take().unwrap().abort();
        Poll::Ready(4)
    }));
    *slot.lock().unwrap() = Some(join.abort_handle());
    s.run_all();
    assert_eq!(join_now(join).unwrap(), 4);
    s.shutdown_and_check_all_freed();
}

#[test]
fn shield_defers_an_abort_until_its_exit() {
    let s = Sched::new(2);
    let slot: Arc<Mutex<Option<AbortHandle>>> = Arc::new(Mutex::new(None));
    let sl = slot.clone();
    let steps = counter();
    let st = steps.clone();
    let exits: Arc<Mutex<Vec<ShieldExit>>> = Arc::new(Mutex::new(Vec::new()));
    let ex = exits.clone();
    let mut poll_no = 0;
    let join = s.spawn(std::future::poll_fn(move |cx| {
        poll_no += 1;
        match poll_no {
            1 => {
                shield_enter().unwrap();
                sl.lock().unwrap().as_ref().unwrap().abort();
                st.fetch_add(1, Ordering::Relaxed);
                // Still shielded: yield; the poll after it must run.
                cx.waker().wake_by_ref();
                Poll::Pending
            }
            2 => {
                st.fetch_add(1, Ordering::Relaxed);
                ex.lock().unwrap().push(shield_exit().unwrap());
                Poll::<()>::Pending
            }
            _ => unreachable!("polled after the cancel took effect"),
        }
    }));
    *slot.lock().unwrap() = Some(join.abort_handle());
    s.run_all();
    assert_eq!(count(&steps), 2, "both shielded steps ran");
    assert_eq!(*exits.lock().unwrap(), vec![ShieldExit::CancelPending]);
    assert!(join_now(join).unwrap_err().is_cancelled());
    drop(slot.lock().unwrap().take());
    s.shutdown_and_check_all_freed();
}

#[test]
fn shield_and_current_task_id_outside_a_task_are_errors() {
    assert_eq!(shield_enter(), Err(ShieldError::NotInTask));
    assert_eq!(shield_exit(), Err(ShieldError::NotInTask));
    assert_eq!(current_task_id(), None);
    assert!(ShieldError::NotInTask
        .to_string()
        .contains("outside a task"));
}

#[test]
fn current_task_id_is_the_polled_task_and_is_restored_after() {
    let s = Sched::new(2);
    let seen: Arc<Mutex<Vec<Option<TaskId>>>> = Arc::new(Mutex::new(Vec::new()));
    let se = seen.clone();
    let join = s.spawn(async move {
        se.lock().unwrap().push(current_task_id());
    });
    let id = join.id();
    s.run_all();
    assert_eq!(*seen.lock().unwrap(), vec![Some(id)]);
    assert_eq!(current_task_id(), None);
    let err_id = join_now(join).map(|()| id).unwrap();
    assert_eq!(err_id, id);
    s.shutdown_and_check_all_freed();
}

#[test]
fn current_task_is_set_while_a_cancelled_future_is_dropped() {
    struct SeeIdOnDrop(Arc<Mutex<Option<TaskId>>>);
    impl Drop for SeeIdOnDrop {
        fn drop(&mut self) {
            *self.0.lock().unwrap() = current_task_id();
        }
    }
    let s = Sched::new(2);
    let seen = Arc::new(Mutex::new(None));
    let g = SeeIdOnDrop(seen.clone());
    let join = s.spawn(async move {
        let _g = g;
        Never.await
    });
    s.run_all();
    join.abort();
    s.run_all();
    assert_eq!(*seen.lock().unwrap(), Some(join.id()));
    drop(join);
    s.shutdown_and_check_all_freed();
}

#[test]
fn shield_overflow_inside_a_task_is_an_error_and_the_task_is_freed_once() {
    let s = Sched::new(2);
    let join = s.spawn(async {
        for _ in 0..255 {
            shield_enter().unwrap();
        }
        let overflow = shield_enter();
        for _ in 0..255 {
            assert_eq!(shield_exit(), Ok(ShieldExit::Clear));
        }
        (overflow, shield_exit())
    });
    s.run_all();
    let (overflow, underflow) = join_now(join).unwrap();
    assert_eq!(overflow, Err(ShieldError::Overflow));
    assert_eq!(underflow, Err(ShieldError::Underflow));
    s.shutdown_and_check_all_freed();
}

#[test]
fn task_ids_are_unique() {
    let s = Sched::new(2);
    let mut ids = Vec::new();
    let mut joins = Vec::new();
    for _ in 0..100 {
        let j = s.spawn(async {});
        ids.push(j.id());
        joins.push(j);
    }
    let from_threads: Vec<TaskId> = std::thread::scope(|scope| {
        let hs: Vec<_> = (0..2)
            .map(|_| {
                let s = s.clone();
                scope.spawn(move || (0..50).map(|_| s.spawn(async {}).id()).collect::<Vec<_>>())
            })
            .collect();
        hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    ids.extend(from_threads);
    let mut sorted = ids.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), ids.len());
    assert!(ids.iter().all(|id| id.as_u64() != 0));
    s.run_all();
    drop(joins);
    s.shutdown_and_check_all_freed();
}

// ---------------------------------------------------------------------------
// Dropped entries and shutdown
// ---------------------------------------------------------------------------

#[test]
fn dropped_entry_cancels_a_task_nothing_else_would_run() {
    let s = Sched::new(2);
    let drops = counter();
    let d = DropCounter(drops.clone());
    let mut join = s.spawn(async move {
        let _d = d;
        Never.await;
    });
    let (w, waker) = counting_waker();
    assert!(poll_join(&mut join, &waker).is_pending());
    let entry = s.pop().unwrap();
    drop(entry);
    assert_eq!(count(&drops), 1);
    assert_eq!(w.count(), 1);
    assert!(join_now(join).unwrap_err().is_cancelled());
    assert!(s.0.owned.is_empty(), "the cancelled task unlinked itself");
    s.shutdown_and_check_all_freed();
}

#[test]
fn wake_into_a_closed_queue_cancels_the_task() {
    let s = Sched::new(2);
    let (f, gate) = Gate::new();
    let join = s.spawn(f);
    s.run_all();
    s.0.drop_entries.store(true, Ordering::Relaxed);
    gate.take_waker().wake();
    assert_eq!(gate.polls(), 1);
    assert!(join_now(join).unwrap_err().is_cancelled());
    s.shutdown_and_check_all_freed();
}

#[test]
fn bind_after_close_cancels_at_once_without_an_entry() {
    let s = Sched::new(2);
    s.0.owned.close_and_shutdown_all();
    let drops = counter();
    let d = DropCounter(drops.clone());
    let (entry, join) = s.0.owned.bind(
        async move {
            let _d = d;
        },
        s.clone(),
    );
    assert!(entry.is_none());
    assert_eq!(count(&drops), 1, "the future was dropped at once");
    assert!(join.is_finished());
    assert!(join_now(join).unwrap_err().is_cancelled());
    assert_eq!(s.0.owned.len(), 0);
    s.shutdown_and_check_all_freed();
}

#[test]
fn shutdown_cancels_idle_and_scheduled_tasks_and_keeps_completed_outputs() {
    let s = Sched::new(4);
    let drops = counter();
    // idle: polled once, waiting forever, joiner registered
    let d = DropCounter(drops.clone());
    let mut idle = s.spawn(async move {
        let _d = d;
        Never.await;
    });
    s.run_all();
    let (w, waker) = counting_waker();
    assert!(poll_join(&mut idle, &waker).is_pending());
    // scheduled: never polled, its entry is still queued
    let polled = Arc::new(AtomicBool::new(false));
    let p = polled.clone();
    let d = DropCounter(drops.clone());
    let scheduled = s.spawn(async move {
        let _d = d;
        p.store(true, Ordering::Relaxed);
    });
    // completed, output not read yet
    let done = s.spawn(async { 11 });
    let done_entry = s.0.queue.lock().unwrap().pop_back().unwrap();
    done_entry.run();
    assert_eq!(s.0.owned.len(), 2);

    s.0.owned.close_and_shutdown_all();
    assert_eq!(count(&drops), 2, "both futures dropped by the sweep");
    assert_eq!(w.count(), 1, "the idle task's joiner was woken");
    assert!(s.0.owned.is_empty());
    assert!(
        poll_join(&mut idle, &waker).map(|r| r.unwrap_err().is_cancelled()) == Poll::Ready(true)
    );
    assert!(join_now(scheduled).unwrap_err().is_cancelled());
    assert_eq!(join_now(done).unwrap(), 11);
    // The queued entry is stale: running it polls nothing.
    assert_eq!(s.run_all(), 1);
    assert!(!polled.load(Ordering::Relaxed));
    // A spawn after the sweep is refused.
    let late = s.spawn(async {});
    assert!(join_now(late).unwrap_err().is_cancelled());
    drop(idle);
    s.shutdown_and_check_all_freed();
}

#[test]
fn stale_entry_dropped_after_shutdown_only_releases() {
    let s = Sched::new(1);
    let polled = Arc::new(AtomicBool::new(false));
    let p = polled.clone();
    let join = s.spawn(async move { p.store(true, Ordering::Relaxed) });
    s.0.owned.close_and_shutdown_all();
    let entry = s.pop().unwrap();
    assert!(join.is_finished());
    drop(entry);
    assert!(!polled.load(Ordering::Relaxed));
    assert!(join_now(join).unwrap_err().is_cancelled());
    s.shutdown_and_check_all_freed();
}

#[test]
fn dropping_the_registry_cancels_and_frees_what_is_left() {
    let owned_elsewhere = Sched::new(1);
    // A registry that is not the scheduler's: `remove` never finds tasks
    // here, so only the registry's `Drop` can release them.
    let registry: OwnedTasks<Sched> = OwnedTasks::new(3);
    let (entry, join) = registry.bind(async { 1 }, owned_elsewhere.clone());
    entry.unwrap().run();
    assert_eq!(join_now(join).unwrap(), 1);
    assert_eq!(
        registry.len(),
        1,
        "completed but linked in a foreign registry"
    );
    let (entry, join) = registry.bind(Never, owned_elsewhere.clone());
    drop(entry); // cancels; still linked here
    assert!(join_now(join).unwrap_err().is_cancelled());
    let (_entry_kept, idle) = registry.bind(Never, owned_elsewhere.clone());
    assert_eq!(registry.len(), 3);
    drop(registry);
    assert!(idle.is_finished());
    drop(idle);
    drop(_entry_kept);
    assert_eq!(Arc::strong_count(&owned_elsewhere.0), 1);
}

#[test]
fn registry_shard_count_rounds_up_to_a_power_of_two() {
    let s = Sched::new(1);
    for shards in [0, 1, 3, 4, 5] {
        let r: OwnedTasks<Sched> = OwnedTasks::new(shards);
        assert!(r.is_empty());
        let dbg = format!("{r:?}");
        let want = shards.max(1).next_power_of_two();
        assert!(dbg.contains(&format!("shards: {want}")), "{dbg}");
    }
    s.shutdown_and_check_all_freed();
}

#[test]
fn debug_output_names_the_task() {
    let s = Sched::new(1);
    let join = s.spawn(async {});
    let abort = join.abort_handle();
    let entry = s.pop().unwrap();
    assert!(format!("{entry:?}").contains("Notified"));
    assert_eq!(entry.id(), join.id());
    assert!(format!("{join:?}").contains("JoinHandle"));
    assert!(format!("{abort:?}").contains("AbortHandle"));
    entry.run();
    drop((join, abort));
    s.shutdown_and_check_all_freed();
}

#[test]
fn abort_handle_clones_and_drops_free_the_task_once() {
    let s = Sched::new(1);
    let join = s.spawn(Never);
    let a = join.abort_handle();
    let b = a.clone();
    drop(join);
    s.run_all();
    assert!(!b.is_finished());
    a.abort();
    drop(a);
    s.run_all();
    assert!(b.is_finished());
    drop(b);
    s.shutdown_and_check_all_freed();
}
