//! Loom models of the idle protocol (`core/src/idle/README.md`), with the real
//! `Idle` and `Parker` and the miniature pool in `idle_pool/`. Each model that
//! involves sleeping ends with every thread joined, so a lost wakeup shows up
//! as loom's deadlock report; each asserts conservation of tasks.
//!
//! RUSTFLAGS="--cfg loom -C debug-assertions" LOOM_MAX_PREEMPTIONS=2 \
//!   CARGO_TARGET_DIR=target/loom cargo test -p magpie-core --release --test loom_idle
#![cfg(loom)]

mod idle_pool;

use idle_pool::{run_worker, Pool, Sleep, Start};
use magpie_core::idle::Idle;
use magpie_core::sync::atomic::{AtomicUsize, Ordering};
use magpie_core::sync::{thread, Arc, Mutex};

/// Four workers; three ask to search at once. At most two may: after each
/// success the count read back is at most `workers / 2`, and the successes
/// total at most two.
// protocol: idle W1
// broken-variant: searcher_limit_by_load; class: check-then-act; expects: 2 * idle.num_searching() <= idle.workers()
#[test]
fn searcher_limit_holds() {
    loom::model(|| {
        let idle = Arc::new(Idle::new(4));
        let admitted = Arc::new(AtomicUsize::new(0));
        let try_search = {
            let (idle, admitted) = (Arc::clone(&idle), Arc::clone(&admitted));
            move || {
                if idle.try_transition_to_searching() {
                    admitted.fetch_add(1, Ordering::Relaxed);
                    assert!(2 * idle.num_searching() <= idle.workers());
                }
            }
        };
        let a = thread::spawn(try_search.clone());
        let b = thread::spawn(try_search.clone());
        try_search();
        a.join().unwrap();
        b.join().unwrap();
        let admitted = admitted.load(Ordering::Relaxed);
        assert!(2 * admitted <= idle.workers(), "{admitted} searchers of 4");
        assert_eq!(idle.num_searching(), admitted);
    });
}

/// Workers 0 and 1 are parked. Two notifiers call `unpark_one` (each hands
/// its worker's search straight back, as if it found work at once), while
/// worker 0's park times out and it calls `unpark(0)` for itself. Every
/// worker is claimed by at most one of the three, and the counts agree with
/// the bits at the end.
// protocol: idle N2 S2 S3
// broken-variant: unpark_one_clear_by_store; class: check-then-act; expects: a worker was handed out twice
#[test]
fn unpark_one_never_hands_out_the_same_worker_twice() {
    loom::model(|| {
        let idle = Arc::new(Idle::new(2));
        assert!(!idle.transition_to_parked(0, false));
        assert!(!idle.transition_to_parked(1, false));
        let claims = Arc::new(Mutex::new(Vec::new()));
        let notifier = {
            let (idle, claims) = (Arc::clone(&idle), Arc::clone(&claims));
            move || {
                if let Some(id) = idle.unpark_one() {
                    claims.lock().unwrap().push(id);
                    // The woken worker found work; the last searcher would
                    // wake another, but here that is the other notifier's job.
                    let _ = idle.transition_from_searching();
                }
            }
        };
        let a = thread::spawn(notifier.clone());
        let b = thread::spawn(notifier);
        if idle.unpark(0) {
            claims.lock().unwrap().push(0);
        }
        a.join().unwrap();
        b.join().unwrap();
        let mut claims = claims.lock().unwrap().clone();
        claims.sort_unstable();
        let n = claims.len();
        claims.dedup();
        assert_eq!(claims.len(), n, "a worker was handed out twice: {claims:?}");
        for &id in &claims {
            assert!(!idle.is_parked(id));
        }
        let still_parked = (0..2).filter(|&id| idle.is_parked(id)).count();
        assert_eq!(still_parked + n, 2, "every worker is parked or claimed");
        assert_eq!(idle.num_parked(), still_parked);
        assert_eq!(idle.num_searching(), 0);
    });
}

/// Worker 0 is the only searcher and one task is queued; worker 1 is parked.
/// A producer pushes a second task and calls `unpark_one`, which may see
/// worker 0 searching and wake nobody. Worker 0 takes one task and then stays
/// busy with it (its thread ends). The second task is taken only if the last
/// searcher, on finding work, woke worker 1.
// protocol: idle W3 N1
// broken-variant: last_searcher_does_not_wake; class: lost wakeup; expects: deadlock; threads
#[test]
fn last_searcher_wakes_a_parked_worker() {
    loom::model(|| {
        let (pool, mut parkers) = Pool::new(2, 2);
        let pool = Arc::new(pool);
        let p1 = parkers.pop().unwrap();
        assert!(!pool.idle.transition_to_parked(1, false));
        assert!(pool.idle.try_transition_to_searching());
        pool.queued.fetch_add(1, Ordering::Relaxed);
        let w0 = thread::spawn({
            let pool = Arc::clone(&pool);
            move || {
                assert!(pool.try_take(), "a task was queued before it started");
                if pool.idle.transition_from_searching() {
                    pool.notify();
                }
                pool.complete();
                // Busy with its task from here on.
            }
        });
        let w1 = thread::spawn({
            let pool = Arc::clone(&pool);
            move || run_worker(&pool, 1, &p1, Start::Parked, Sleep::Park)
        });
        pool.push(1);
        w0.join().unwrap();
        let took1 = w1.join().unwrap();
        assert_eq!(took1, 1);
        assert_eq!(pool.taken.load(Ordering::Relaxed), 2);
        assert_eq!(pool.queued.load(Ordering::Relaxed), 0);
    });
}

/// Worker 0 is the last searcher and finds the queue empty; it runs the park
/// sequence (P1, the re-check of P3, P4) while a producer pushes one task and
/// calls `unpark_one`. Worker 1 is parked throughout. The task is taken
/// exactly once, and every thread ends (nobody sleeps with the task queued).
// protocol: idle P1 P3 N1
// broken-variant: park_skips_last_searcher_recheck; class: lost wakeup; expects: deadlock; threads
// broken-variant: notify_by_load; class: store buffering; expects: deadlock; threads
#[test]
fn task_pushed_while_last_searcher_parks_is_not_stranded() {
    loom::model(|| {
        let (pool, parkers) = Pool::new(2, 1);
        let pool = Arc::new(pool);
        let mut parkers = parkers.into_iter();
        let (p0, p1) = (parkers.next().unwrap(), parkers.next().unwrap());
        assert!(!pool.idle.transition_to_parked(1, false));
        assert!(pool.idle.try_transition_to_searching());
        let w0 = thread::spawn({
            let pool = Arc::clone(&pool);
            move || run_worker(&pool, 0, &p0, Start::Searching, Sleep::Park)
        });
        let w1 = thread::spawn({
            let pool = Arc::clone(&pool);
            move || run_worker(&pool, 1, &p1, Start::Parked, Sleep::Park)
        });
        pool.push(1);
        let took = w0.join().unwrap() + w1.join().unwrap();
        assert_eq!(took, 1, "the task is taken exactly once");
        assert_eq!(pool.taken.load(Ordering::Relaxed), 1);
        assert_eq!(pool.queued.load(Ordering::Relaxed), 0);
    });
}

/// Shutdown (`done`, then `unpark_all`) races a worker on its way to sleep.
/// The worker must end: either `unpark_all` counted it and wakes it, or its
/// P1 comes later and it sees `done` before sleeping.
// protocol: idle P1 P3 unpark_all
// broken-variant: unpark_all_relaxed; class: missing Release/Acquire pair; expects: deadlock; threads
#[test]
fn shutdown_wakes_a_worker_that_is_parking() {
    loom::model(|| {
        let (pool, mut parkers) = Pool::new(2, 1);
        let pool = Arc::new(pool);
        let p0 = parkers.swap_remove(0);
        let w0 = thread::spawn({
            let pool = Arc::clone(&pool);
            move || run_worker(&pool, 0, &p0, Start::Running, Sleep::Park)
        });
        pool.shutdown();
        assert_eq!(w0.join().unwrap(), 0);
        assert!(!pool.idle.is_parked(0));
    });
}
