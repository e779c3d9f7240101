//! Threaded stress of the task cell through `OwnedTasks`, sized for Miri:
//! 10^6 spawn/complete cycles on real hardware (a few hundred under Miri),
//! with wakes, aborts, detached handles and wakers that outlive their tasks
//! crossing threads. Loom explores the small cases exhaustively
//! (`loom_task_cell.rs`); this runs the same protocols at volume.
#![cfg(not(loom))]

use std::cell::Cell;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use magpie_core::sync::atomic::{AtomicUsize, Ordering};
use magpie_core::task::{JoinHandle, Notified, OwnedTasks, Schedule};

const THREADS: usize = if cfg!(miri) { 3 } else { 4 };
/// Tasks per thread: THREADS * PER_THREAD = 10^6 outside Miri.
const PER_THREAD: usize = if cfg!(miri) { 120 } else { 250_000 };
/// Tasks spawned before the thread runs its queue and joins them.
const BATCH: usize = if cfg!(miri) { 12 } else { 100 };
const KINDS: usize = 5;

std::thread_local! {
    /// Which queue `schedule` pushes to: the current thread's.
    static QUEUE: Cell<usize> = const { Cell::new(0) };
}

#[derive(Clone)]
struct Sched(Arc<Inner>);

struct Inner {
    queues: Vec<Mutex<VecDeque<Notified<Sched>>>>,
    owned: OwnedTasks<Sched>,
    /// Wakers sent by tasks to be woken (or dropped) by any thread.
    mailbox: Mutex<Vec<Waker>>,
    /// Each task creates exactly one `Token` (in its future or its output).
    tokens_dropped: AtomicUsize,
    polls: AtomicUsize,
}

impl Schedule for Sched {
    fn schedule(&self, task: Notified<Self>) {
        let q = QUEUE.with(Cell::get);
        self.0.queues[q].lock().unwrap().push_back(task);
    }
    fn owned_tasks(&self) -> &OwnedTasks<Self> {
        &self.0.owned
    }
}

struct Token(Arc<Inner>);
impl Drop for Token {
    fn drop(&mut self) {
        self.0.tokens_dropped.fetch_add(1, Ordering::Relaxed);
    }
}

/// The task kinds, by `i % KINDS`.
enum Kind {
    /// Ready at once; the handle is awaited.
    Ready,
    /// Wakes itself once (a yield), then Ready; the handle is dropped at once.
    YieldDetached,
    /// Sends a clone of its waker to the mailbox, Pending; Ready when polled
    /// again (after some thread wakes it by value). Awaited.
    WokenElsewhere,
    /// Never ready; aborted by its spawner. Awaited (Cancelled).
    Aborted,
    /// Sends a waker clone to the mailbox and is Ready at once: the waker
    /// outlives the task and is woken or dropped on another thread.
    WakerOutlives,
}

struct Task {
    kind: Kind,
    polls: u32,
    token: Option<Token>,
}

impl Future for Task {
    type Output = Option<Token>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Token>> {
        self.polls += 1;
        let inner = self.token.as_ref().unwrap().0.clone();
        inner.polls.fetch_add(1, Ordering::Relaxed);
        let ready = match self.kind {
            Kind::Ready => true,
            Kind::YieldDetached | Kind::WokenElsewhere if self.polls >= 2 => true,
            Kind::YieldDetached => {
                cx.waker().wake_by_ref();
                false
            }
            Kind::WokenElsewhere => {
                inner.mailbox.lock().unwrap().push(cx.waker().clone());
                false
            }
            Kind::Aborted => false,
            Kind::WakerOutlives => {
                inner.mailbox.lock().unwrap().push(cx.waker().clone());
                true
            }
        };
        if ready {
            Poll::Ready(self.token.take())
        } else {
            Poll::Pending
        }
    }
}

impl Sched {
    fn run_queue(&self, q: usize) {
        loop {
            let next = self.0.queues[q].lock().unwrap().pop_front();
            match next {
                Some(task) => task.run(),
                None => return,
            }
        }
    }

    /// Wake the wakers in the mailbox: by value, or by reference and then
    /// drop. (Wakers of completed tasks are among them: the wake does
    /// nothing and the drop may free the task.)
    fn drain_mailbox(&self, by_value: bool) {
        let wakers = std::mem::take(&mut *self.0.mailbox.lock().unwrap());
        for w in wakers {
            if by_value {
                w.wake();
            } else {
                w.wake_by_ref();
                drop(w);
            }
        }
    }
}

fn worker(s: Sched, q: usize) -> (usize, usize) {
    QUEUE.with(|c| c.set(q));
    let (mut ok, mut cancelled) = (0, 0);
    let mut joins: Vec<JoinHandle<Option<Token>>> = Vec::with_capacity(BATCH);
    for batch in 0..PER_THREAD / BATCH {
        for i in 0..BATCH {
            let kind = match (batch * BATCH + i + q) % KINDS {
                0 => Kind::Ready,
                1 => Kind::YieldDetached,
                2 => Kind::WokenElsewhere,
                3 => Kind::Aborted,
                _ => Kind::WakerOutlives,
            };
            let detached = matches!(kind, Kind::YieldDetached);
            let aborted = matches!(kind, Kind::Aborted);
            let task = Task {
                kind,
                polls: 0,
                token: Some(Token(s.0.clone())),
            };
            let (entry, join) = s.0.owned.bind(task, s.clone());
            s.schedule(entry.expect("registry open"));
            if aborted {
                // Sometimes before the first poll, sometimes after.
                if i % 2 == 0 {
                    join.abort();
                } else {
                    s.run_queue(q);
                    join.abort();
                }
            }
            if !detached {
                joins.push(join);
            }
        }
        // Join everything, running tasks and serving the mailbox meanwhile.
        let waker = Waker::noop();
        while !joins.is_empty() {
            // Our queue first, then the others: a task woken by another
            // thread sits in that thread's queue, which may have finished.
            for k in 0..THREADS {
                s.run_queue((q + k) % THREADS);
            }
            s.drain_mailbox(batch % 2 == 0 || q % 2 == 0);
            joins.retain_mut(
                |j| match Pin::new(j).poll(&mut Context::from_waker(waker)) {
                    Poll::Ready(Ok(token)) => {
                        assert!(token.is_some());
                        ok += 1;
                        false
                    }
                    Poll::Ready(Err(e)) => {
                        assert!(e.is_cancelled(), "{e:?}");
                        cancelled += 1;
                        false
                    }
                    Poll::Pending => true,
                },
            );
            std::thread::yield_now();
        }
    }
    (ok, cancelled)
}

#[test]
fn million_spawn_complete_cycles_across_threads_drop_every_token_once_and_free_every_task() {
    let s = Sched(Arc::new(Inner {
        queues: (0..THREADS).map(|_| Mutex::new(VecDeque::new())).collect(),
        owned: OwnedTasks::new(4 * THREADS),
        mailbox: Mutex::new(Vec::new()),
        tokens_dropped: AtomicUsize::new(0),
        polls: AtomicUsize::new(0),
    }));
    let results: Vec<(usize, usize)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..THREADS)
            .map(|q| {
                let s = s.clone();
                scope.spawn(move || worker(s, q))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    // Wakers that outlived their tasks may still sit in the mailbox; a wake
    // of a completed task schedules nothing.
    s.drain_mailbox(true);
    for q in 0..THREADS {
        s.run_queue(q);
    }
    let total = THREADS * (PER_THREAD / BATCH) * BATCH;
    let ok: usize = results.iter().map(|r| r.0).sum();
    let cancelled: usize = results.iter().map(|r| r.1).sum();
    // Kinds 0, 2 and 4 are awaited and Ok, kind 3 Cancelled, kind 1 detached.
    assert_eq!(ok + cancelled + total / KINDS, total);
    assert_eq!(cancelled, total / KINDS);
    assert!(
        s.0.owned.is_empty(),
        "{} tasks still linked",
        s.0.owned.len()
    );
    assert_eq!(
        s.0.tokens_dropped.load(Ordering::Relaxed),
        total,
        "every future or output dropped exactly once"
    );
    s.0.owned.close_and_shutdown_all();
    assert_eq!(Arc::strong_count(&s.0), 1, "every task freed");
    // Polls: Ready 1, YieldDetached 2, WokenElsewhere 2, Aborted 0 or 1,
    // WakerOutlives 1.
    let polls = s.0.polls.load(Ordering::Relaxed);
    let per_kind = total / KINDS;
    assert!(polls >= per_kind * 6 && polls <= per_kind * 7, "{polls}");
}

#[test]
fn wakes_racing_polls_on_other_threads_reschedule_without_loss() {
    // One task woken by clones of its waker from several threads while
    // workers poll it: it is Ready once it has seen every event, so a lost
    // wake hangs the test and an extra entry trips `transition_to_running`.
    const WAKERS: usize = 3;
    const EVENTS: usize = if cfg!(miri) { 20 } else { 20_000 };
    struct Events {
        seen: Arc<AtomicUsize>,
        slot: Arc<Mutex<Option<Waker>>>,
    }
    impl Future for Events {
        type Output = usize;
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<usize> {
            *self.slot.lock().unwrap() = Some(cx.waker().clone());
            // Acquire: pairs with the waker threads' Release increments.
            let seen = self.seen.load(Ordering::Acquire);
            if seen == WAKERS * EVENTS {
                Poll::Ready(seen)
            } else {
                Poll::Pending
            }
        }
    }
    let s = Sched(Arc::new(Inner {
        queues: (0..2).map(|_| Mutex::new(VecDeque::new())).collect(),
        owned: OwnedTasks::new(2),
        mailbox: Mutex::new(Vec::new()),
        tokens_dropped: AtomicUsize::new(0),
        polls: AtomicUsize::new(0),
    }));
    let seen = Arc::new(AtomicUsize::new(0));
    let slot = Arc::new(Mutex::new(None));
    let (entry, mut join) = s.0.owned.bind(
        Events {
            seen: seen.clone(),
            slot: slot.clone(),
        },
        s.clone(),
    );
    s.schedule(entry.unwrap());
    std::thread::scope(|scope| {
        for _ in 0..WAKERS {
            let (seen, slot) = (seen.clone(), slot.clone());
            scope.spawn(move || {
                for _ in 0..EVENTS {
                    // Release: pairs with the poll's Acquire load.
                    seen.fetch_add(1, Ordering::Release);
                    let w = slot.lock().unwrap().clone();
                    if let Some(w) = w {
                        w.wake();
                    }
                }
                // A last wake after every event is published.
                let w = slot.lock().unwrap().clone();
                if let Some(w) = w {
                    w.wake();
                }
            });
        }
        // Two workers; wakers push to queue 0 (their thread-local default).
        for _ in 0..2 {
            let s = s.clone();
            let done = &join;
            scope.spawn(move || {
                while !done.is_finished() {
                    s.run_queue(0);
                    std::thread::yield_now();
                }
            });
        }
    });
    let out = Pin::new(&mut join).poll(&mut Context::from_waker(Waker::noop()));
    assert!(matches!(out, Poll::Ready(Ok(n)) if n == WAKERS * EVENTS));
    drop(join);
    drop(slot.lock().unwrap().take());
    s.0.owned.close_and_shutdown_all();
    s.run_queue(0);
    assert_eq!(Arc::strong_count(&s.0), 1);
}
