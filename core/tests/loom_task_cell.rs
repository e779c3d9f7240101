//! Loom models of the task cell (`magpie_core::task`): the poll harness, the
//! waker vtable, the `JoinHandle`'s output and waker handoff, and the
//! registry's shutdown sweep, each raced against the others.
//!
//! The models use the real cell through its safe API and a tiny scheduler: a
//! loom `Mutex<VecDeque<Notified>>` that `schedule` and `yield_now` push to,
//! drained by whichever thread plays the worker. The cell's own `UnsafeCell`s
//! (future/output stage, join waker, registry links) are loom's, so loom
//! reports any access the state word fails to order; its allocation is made
//! with `loom::alloc`, so loom reports a task that is never freed; and each
//! model asserts its exactly-once counts (completions, output and future
//! drops, joiner wakes) and that every task let go of the scheduler.
//!
//! Run: `RUSTFLAGS="--cfg loom -C debug-assertions" LOOM_MAX_PREEMPTIONS=2
//! CARGO_TARGET_DIR=target/loom cargo test -p magpie-core --release --test
//! loom_task_cell`. The tour is in `docs/loom.md`.
#![cfg(loom)]

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Wake, Waker};

use magpie_core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use magpie_core::sync::{thread, Arc, Mutex};
use magpie_core::task::{JoinError, JoinHandle, Notified, OwnedTasks, Schedule};

// ---------------------------------------------------------------------------
// The scheduler
// ---------------------------------------------------------------------------

#[derive(Clone)]
struct Sched(Arc<Inner>);

struct Inner {
    queue: Mutex<VecDeque<Notified<Sched>>>,
    owned: OwnedTasks<Sched>,
    /// Entries handed to `schedule` / `yield_now` (after the first).
    reschedules: AtomicUsize,
}

impl Schedule for Sched {
    fn schedule(&self, task: Notified<Self>) {
        self.0.reschedules.fetch_add(1, Ordering::Relaxed);
        self.0.queue.lock().unwrap().push_back(task);
    }
    fn owned_tasks(&self) -> &OwnedTasks<Self> {
        &self.0.owned
    }
}

impl Sched {
    fn new() -> Sched {
        Sched(Arc::new(Inner {
            queue: Mutex::new(VecDeque::new()),
            // One shard keeps the models small; the shard choice is plain
            // arithmetic on the id.
            owned: OwnedTasks::new(1),
            reschedules: AtomicUsize::new(0),
        }))
    }

    /// Bind and queue the first entry.
    fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let (entry, join) = self.0.owned.bind(future, self.clone());
        if let Some(entry) = entry {
            self.0.queue.lock().unwrap().push_back(entry);
        }
        join
    }

    /// Play the worker: run entries until the queue is empty. Returns how
    /// many ran.
    fn run_all(&self) -> usize {
        let mut ran = 0;
        loop {
            let next = self.0.queue.lock().unwrap().pop_front();
            match next {
                Some(task) => {
                    task.run();
                    ran += 1;
                }
                None => return ran,
            }
        }
    }

    fn reschedules(&self) -> usize {
        self.0.reschedules.load(Ordering::Relaxed)
    }

    /// Every task let go of the scheduler: freed (loom's leak check on the
    /// cell's allocation says the same, at the end of the execution).
    fn assert_all_freed(self) {
        assert!(self.0.owned.is_empty(), "a task is still linked");
        assert_eq!(Arc::strong_count(&self.0), 1, "a task was not freed");
    }
}

// ---------------------------------------------------------------------------
// Helpers: counters, wakers, futures
// ---------------------------------------------------------------------------

/// Counters are read after every thread has been joined: Relaxed is enough.
fn counter() -> Arc<AtomicUsize> {
    Arc::new(AtomicUsize::new(0))
}

fn count(c: &AtomicUsize) -> usize {
    c.load(Ordering::Relaxed)
}

struct DropCounter(Arc<AtomicUsize>);

impl Drop for DropCounter {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// The joiner's waker: counts wakes. `std::sync::Arc` because `Wake` is
/// implemented for it; the count is a loom atomic.
struct Joiner {
    wakes: AtomicUsize,
}

impl Wake for Joiner {
    fn wake(self: std::sync::Arc<Self>) {
        self.wakes.fetch_add(1, Ordering::Relaxed);
    }
}

fn joiner() -> (std::sync::Arc<Joiner>, Waker) {
    let j = std::sync::Arc::new(Joiner {
        wakes: AtomicUsize::new(0),
    });
    (j.clone(), Waker::from(j))
}

fn poll_join<T>(join: &mut JoinHandle<T>, waker: &Waker) -> Poll<Result<T, JoinError>> {
    Pin::new(join).poll(&mut Context::from_waker(waker))
}

/// A future driven by hand: `step` sees the poll number (1-based) and the
/// context, and says whether it is done. Counts its polls; holds a
/// `DropCounter` for its own drop.
struct Scripted<F> {
    polls: Arc<AtomicUsize>,
    n: usize,
    step: F,
    _drop: DropCounter,
}

impl<F: FnMut(usize, &mut Context<'_>) -> bool + Unpin> Future for Scripted<F> {
    type Output = DropCounter;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<DropCounter> {
        self.n += 1;
        self.polls.fetch_add(1, Ordering::Relaxed);
        let n = self.n;
        if (self.step)(n, cx) {
            // The output: a second counter shared with the future's.
            Poll::Ready(DropCounter(self._drop.0.clone()))
        } else {
            Poll::Pending
        }
    }
}

/// `drops` counts the future's drop and its output's drop together: every
/// path must end with exactly 2 (or 1 if the task was cancelled).
fn scripted<F>(polls: &Arc<AtomicUsize>, drops: &Arc<AtomicUsize>, step: F) -> Scripted<F>
where
    F: FnMut(usize, &mut Context<'_>) -> bool + Unpin,
{
    Scripted {
        polls: polls.clone(),
        n: 0,
        step,
        _drop: DropCounter(drops.clone()),
    }
}

/// A waker given away by the first poll.
type Slot = Arc<Mutex<Option<Waker>>>;

fn take(slot: &Slot) -> Waker {
    slot.lock()
        .unwrap()
        .take()
        .expect("the first poll stored a waker")
}

/// When a parked task (see `spawn_parked`) is Ready.
enum ReadyWhen {
    /// Once this flag is set (Release by the setter, Acquire by the poll).
    Event(Arc<AtomicBool>),
    /// At its second poll.
    SecondPoll,
}

/// Spawn a scripted task whose first poll gives its waker away, run that
/// poll (Pending: the task is IDLE), and return the handle and the waker.
fn spawn_parked(
    s: &Sched,
    polls: &Arc<AtomicUsize>,
    drops: &Arc<AtomicUsize>,
    ready: ReadyWhen,
) -> (JoinHandle<DropCounter>, Waker) {
    let slot: Slot = Arc::new(Mutex::new(None));
    let sl = slot.clone();
    let join = s.spawn(scripted(polls, drops, move |n, cx| {
        if n == 1 {
            *sl.lock().unwrap() = Some(cx.waker().clone());
        }
        match &ready {
            // Acquire: pairs with the setter's Release store.
            ReadyWhen::Event(event) => event.load(Ordering::Acquire),
            ReadyWhen::SecondPoll => n >= 2,
        }
    }));
    assert_eq!(s.run_all(), 1);
    let waker = take(&slot);
    (join, waker)
}

// ---------------------------------------------------------------------------
// The models
// ---------------------------------------------------------------------------

/// A wake racing the poll that completes the task, plus a stale wake: the
/// task is rescheduled or completed, never both, never lost.
// protocol: task-cell W2 W3 P3
// broken-variant: wake_skips_write_when_queued; class: store buffering; expects: wake lost: the event was published and the task never completed
#[test]
fn wake_racing_completion_runs_or_completes_once() {
    loom::model(|| {
        let s = Sched::new();
        let (polls, drops) = (counter(), counter());
        let event = Arc::new(AtomicBool::new(false));
        let ready = ReadyWhen::Event(event.clone());
        let (mut join, waker) = spawn_parked(&s, &polls, &drops, ready);
        let stale = waker.clone();
        // Make it SCHEDULED again so the worker below races the wakes.
        stale.wake_by_ref();

        let w = thread::spawn(move || {
            // Release: pairs with the poll's Acquire load.
            event.store(true, Ordering::Release);
            waker.wake_by_ref();
        });
        let st = thread::spawn(move || stale.wake());
        s.run_all();
        w.join().unwrap();
        st.join().unwrap();
        s.run_all();

        assert!(
            matches!(poll_join(&mut join, Waker::noop()), Poll::Ready(Ok(_))),
            "wake lost: the event was published and the task never completed"
        );
        drop(join);
        assert_eq!(count(&drops), 2, "future and output each dropped once");
        // Every poll after the first came from exactly one reschedule.
        assert_eq!(count(&polls), 1 + s.reschedules());
        assert!(s.reschedules() <= 3, "at most one reschedule per wake");
        s.assert_all_freed();
    });
}

/// `abort()` from another thread at any point of a task that yields once
/// and then completes: the JoinHandle gets the output or Cancelled, the
/// future is dropped once, a queued task found cancelled is never polled.
// protocol: task-cell C1 P1 P3 P6
#[test]
fn abort_racing_completion() {
    loom::model(|| {
        let s = Sched::new();
        let (polls, drops) = (counter(), counter());
        let mut join = s.spawn(scripted(&polls, &drops, |n, cx| {
            if n == 1 {
                cx.waker().wake_by_ref(); // yield once
                false
            } else {
                true
            }
        }));
        let abort = join.abort_handle();
        let a = thread::spawn(move || abort.abort());
        s.run_all();
        a.join().unwrap();
        s.run_all();

        match poll_join(&mut join, Waker::noop()) {
            Poll::Ready(Ok(out)) => {
                assert_eq!(count(&polls), 2, "Ready only after both polls");
                drop(out);
                assert_eq!(count(&drops), 2);
            }
            Poll::Ready(Err(e)) => {
                assert!(e.is_cancelled());
                assert!(count(&polls) < 2);
                assert_eq!(count(&drops), 1, "the future only");
            }
            Poll::Pending => panic!("task neither completed nor cancelled"),
        }
        drop(join);
        s.assert_all_freed();
    });
}

/// The JoinHandle registers its waker and is dropped while another thread
/// runs the task to completion: the output and the join waker are each
/// dropped exactly once, on the right side, and no access to either races.
// protocol: task-cell J2 J4 P5
// broken-variant: join_waker_written_after_flag; class: publish before write; expects: Causality violation
#[test]
fn join_handle_drop_racing_completion_drops_output_once() {
    join_handle_drop_racing_completion();
}

fn join_handle_drop_racing_completion() {
    loom::model(|| {
        let s = Sched::new();
        let (polls, drops) = (counter(), counter());
        let mut join = s.spawn(scripted(&polls, &drops, |_, _| true));
        let (joiner, waker) = joiner();

        let worker = {
            let s = s.clone();
            thread::spawn(move || {
                s.run_all();
            })
        };
        let out = poll_join(&mut join, &waker);
        drop(join);
        worker.join().unwrap();

        let read = matches!(out, Poll::Ready(Ok(_)));
        drop(out);
        assert_eq!(count(&polls), 1);
        assert_eq!(count(&drops), 2, "future and output each dropped once");
        // The joiner is woken only if its waker was registered before the
        // completion, and never more than once.
        let wakes = count(&joiner.wakes);
        assert!(wakes <= 1);
        assert!(!(read && wakes == 1), "woken but read without waiting");
        drop(waker);
        assert_eq!(
            std::sync::Arc::strong_count(&joiner),
            1,
            "the registered join waker was dropped exactly once"
        );
        s.assert_all_freed();
    });
}

/// Same race, checked for the output's write: the handle reads the output
/// only after it observes COMPLETE.
// protocol: task-cell P4 P5 J1 J4
// broken-variant: output_written_after_complete; class: publish before write; expects: Causality violation
#[test]
fn join_handle_reads_the_output_only_after_completion() {
    join_handle_drop_racing_completion();
}

/// Same race, checked for the task side's use of the join waker: it wakes the
/// waker before handing the cell back.
// protocol: task-cell P5 J4
// broken-variant: join_waker_released_before_wake; class: slot reuse; expects: Causality violation
#[test]
fn join_waker_is_woken_before_the_cell_is_handed_back() {
    loom::model(|| {
        let s = Sched::new();
        let (polls, drops) = (counter(), counter());
        let mut join = s.spawn(scripted(&polls, &drops, |_, _| true));
        let (joiner, waker) = joiner();
        // Registered before the race: JOIN_WAKER is set when the task
        // completes, so the task side always wakes it.
        assert!(poll_join(&mut join, &waker).is_pending());
        let worker = {
            let s = s.clone();
            thread::spawn(move || {
                s.run_all();
            })
        };
        drop(join);
        worker.join().unwrap();
        assert_eq!(count(&drops), 2);
        assert!(count(&joiner.wakes) <= 1);
        drop(waker);
        assert_eq!(std::sync::Arc::strong_count(&joiner), 1);
        s.assert_all_freed();
    });
}

/// The JoinHandle, registered with one waker, is polled with another while
/// a worker completes the task: the new waker replaces the old one (and is
/// the one woken) or the handle finds the task complete, even when the task
/// side has already woken the old waker and handed the cell back.
// protocol: task-cell J3
// broken-variant: unset_join_waker_checks_flag_first; class: check-then-act; expects: unset_join_waker: Snapshot
#[test]
fn join_handle_replacing_its_waker_racing_completion() {
    loom::model(|| {
        let s = Sched::new();
        let (polls, drops) = (counter(), counter());
        let mut join = s.spawn(scripted(&polls, &drops, |_, _| true));
        let (first, w1) = joiner();
        let (second, w2) = joiner();
        assert!(poll_join(&mut join, &w1).is_pending());
        let worker = {
            let s = s.clone();
            thread::spawn(move || {
                s.run_all();
            })
        };
        let out = poll_join(&mut join, &w2);
        worker.join().unwrap();
        let woken = count(&first.wakes) + count(&second.wakes);
        assert!(woken <= 1, "the joiner is woken at most once");
        if out.is_pending() {
            // The second waker was registered before completion: it, not
            // the first, is the one woken.
            assert_eq!(count(&second.wakes), 1, "the replacing waker was lost");
            assert!(poll_join(&mut join, &w2).is_ready());
        }
        drop(out);
        drop(join);
        assert_eq!(count(&drops), 2);
        drop((w1, w2));
        assert_eq!(std::sync::Arc::strong_count(&first), 1);
        assert_eq!(std::sync::Arc::strong_count(&second), 1);
        s.assert_all_freed();
    });
}

/// Two waker clones, one woken by value and one dropped, on two threads,
/// while the worker runs and the JoinHandle is dropped: the task is freed
/// exactly once (by whichever reference is last), never used after.
// protocol: task-cell W1 W4
#[test]
fn waker_clone_and_drop_from_other_threads_free_exactly_once() {
    loom::model(|| {
        let s = Sched::new();
        let (polls, drops) = (counter(), counter());
        let (join, w1) = spawn_parked(&s, &polls, &drops, ReadyWhen::SecondPoll);
        let w2 = w1.clone();

        let a = thread::spawn(move || w1.wake());
        let b = thread::spawn(move || drop(w2));
        s.run_all();
        drop(join);
        a.join().unwrap();
        b.join().unwrap();
        s.run_all();

        assert_eq!(count(&polls), 2);
        assert_eq!(count(&drops), 2, "future and output each dropped once");
        s.assert_all_freed();
    });
}

/// A wake from another thread while the task is queued or being polled: it
/// is rescheduled exactly once (through `yield_now` if the wake landed
/// during the poll), never lost, never queued twice.
// protocol: task-cell P3
// broken-variant: idle_ignores_notified; class: lost wakeup; expects: wake during the poll lost
#[test]
fn wake_during_poll_reschedules_exactly_once() {
    loom::model(|| {
        let s = Sched::new();
        let (polls, drops) = (counter(), counter());
        let event = Arc::new(AtomicBool::new(false));
        let ready = ReadyWhen::Event(event.clone());
        let (mut join, waker) = spawn_parked(&s, &polls, &drops, ready);
        // Queue it (this thread's wake), then race a second wake against
        // the poll that follows.
        waker.wake_by_ref();
        let w = thread::spawn(move || {
            // Release: pairs with the poll's Acquire load.
            event.store(true, Ordering::Release);
            waker.wake();
        });
        let ran = s.run_all();
        w.join().unwrap();
        let ran = ran + s.run_all();

        assert!(
            matches!(poll_join(&mut join, Waker::noop()), Poll::Ready(Ok(_))),
            "wake during the poll lost: the task never completed"
        );
        drop(join);
        assert_eq!(count(&polls), 1 + ran, "one poll per entry");
        assert_eq!(ran, s.reschedules(), "one entry per reschedule");
        assert!(ran <= 2, "two wakes, at most two reschedules");
        assert_eq!(count(&drops), 2);
        s.assert_all_freed();
    });
}

/// `abort()` of a task that nobody will ever wake, landing before, during
/// or after its first poll: the task is always cancelled and completed
/// (an IDLE task is scheduled by the abort so a worker drops it).
// protocol: task-cell C1
// broken-variant: cancel_idle_no_schedule; class: lost wakeup; expects: aborted idle task stranded
#[test]
fn abort_of_idle_task_completes_it() {
    loom::model(|| {
        let s = Sched::new();
        let (polls, drops) = (counter(), counter());
        let mut join = s.spawn(scripted(&polls, &drops, |_, _| false));
        let (joiner, waker) = joiner();
        assert!(poll_join(&mut join, &waker).is_pending());
        let abort = join.abort_handle();
        let a = thread::spawn(move || abort.abort());
        s.run_all();
        a.join().unwrap();
        s.run_all();

        match poll_join(&mut join, Waker::noop()) {
            Poll::Ready(Err(e)) => assert!(e.is_cancelled()),
            Poll::Ready(Ok(_)) => panic!("a task that is never Ready completed"),
            Poll::Pending => panic!("aborted idle task stranded: never completed"),
        }
        assert!(count(&polls) <= 1);
        assert_eq!(count(&drops), 1, "the future dropped once");
        assert_eq!(count(&joiner.wakes), 1, "the joiner woken once");
        drop(join);
        s.assert_all_freed();
    });
}

/// A wake (which may submit the task) racing the registry's shutdown sweep:
/// the task is cancelled exactly once, its entry (if the wake pushed one) is
/// stale and only releases its reference, the joiner is woken, the task is
/// freed.
// protocol: task-cell S2 S4
// broken-variant: shutdown_claim_not_atomic; class: check-then-act; expects: a task alive at shutdown was not cancelled
#[test]
fn shutdown_racing_wake() {
    loom::model(|| {
        let s = Sched::new();
        let (polls, drops) = (counter(), counter());
        let (mut join, waker) = spawn_parked(&s, &polls, &drops, ReadyWhen::SecondPoll);
        let (joiner, jw) = joiner();
        assert!(poll_join(&mut join, &jw).is_pending());

        let w = thread::spawn(move || waker.wake());
        // The workers have stopped: shut down, then drain by running.
        s.0.owned.close_and_shutdown_all();
        s.run_all();
        w.join().unwrap();
        s.run_all();

        // The JoinHandle still holds a reference, so the task (and the
        // scheduler clone in it) must still be there; checked before the
        // handle touches the task.
        assert_eq!(
            Arc::strong_count(&s.0),
            2,
            "the task was freed while its JoinHandle still holds it"
        );
        match poll_join(&mut join, Waker::noop()) {
            Poll::Ready(Err(e)) => assert!(e.is_cancelled()),
            Poll::Ready(Ok(_)) => panic!("a task was polled after the shutdown sweep"),
            Poll::Pending => panic!("a task alive at shutdown was not cancelled: {join:?}"),
        }
        assert_eq!(count(&polls), 1, "never polled after the sweep");
        assert_eq!(count(&drops), 1);
        assert_eq!(count(&joiner.wakes), 1);
        drop(join);
        s.assert_all_freed();
    });
}

/// A spawn racing the registry's close: the task is either refused
/// (cancelled at once, no entry) or linked in time for the sweep to cancel
/// it. Never stranded: linked in a closed registry, alive, uncancelled.
// protocol: task-cell O2 S1 S2
// broken-variant: bind_checks_closed_outside_lock; class: check-then-act; expects: a task survived the shutdown
#[test]
fn bind_racing_close_never_strands_a_task() {
    loom::model(|| {
        let s = Sched::new();
        let (polls, drops) = (counter(), counter());
        let future = scripted(&polls, &drops, |_, _| false);
        let spawner = {
            let s = s.clone();
            thread::spawn(move || s.spawn(future))
        };
        s.0.owned.close_and_shutdown_all();
        let join = spawner.join().unwrap();
        s.run_all();

        assert!(join.is_finished(), "a task survived the shutdown");
        assert_eq!(count(&polls), 0, "nothing is polled after the sweep");
        assert_eq!(count(&drops), 1);
        drop(join);
        s.assert_all_freed();
    });
}
