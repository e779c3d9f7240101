//! Fork-join on the worker loop (`magpie_runtime::join`): results, borrows,
//! panics, calls from outside the pool and from other pools.
//!
//! Every test runs under a hang detector (`within`): a generous limit, never
//! a timing assertion.

use magpie_core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::panic::{self, AssertUnwindSafe};
use std::sync::mpsc;
use std::time::Duration;

use magpie_runtime::join::{join, scope, JoinPool};

/// Runs `f` on its own thread and fails the test if it has not finished
/// within a minute (a deadlock); its panic, if any, is raised here.
fn within<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = mpsc::channel();
    let h = std::thread::spawn(move || {
        let r = f();
        let _ = tx.send(());
        r
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => match h.join() {
            Ok(r) => r,
            Err(p) => panic::resume_unwind(p),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("hung: no result within 60 s"),
    }
}

fn pool(workers: usize) -> JoinPool {
    JoinPool::builder().workers(workers).build().unwrap()
}

fn fib(n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = join(|| fib(n - 1), || fib(n - 2));
    a + b
}

fn seq_fib(n: u64) -> u64 {
    if n < 2 {
        n
    } else {
        seq_fib(n - 1) + seq_fib(n - 2)
    }
}

#[test]
fn nested_joins_return_every_result() {
    within(|| {
        let p = pool(2);
        for n in [0, 1, 2, 10, 22] {
            assert_eq!(p.install(|| fib(n)), seq_fib(n));
        }
    });
}

fn quicksort(xs: &mut [u32]) {
    if xs.len() <= 16 {
        xs.sort_unstable();
        return;
    }
    let pivot = xs[xs.len() / 2];
    let (mut lo, mut hi) = (0, xs.len() - 1);
    loop {
        while xs[lo] < pivot {
            lo += 1;
        }
        while xs[hi] > pivot {
            hi -= 1;
        }
        if lo >= hi {
            break;
        }
        xs.swap(lo, hi);
        lo += 1;
        hi -= 1;
    }
    let (l, r) = xs.split_at_mut(hi + 1);
    join(|| quicksort(l), || quicksort(r));
}

fn xorshift(n: usize, mut s: u64) -> Vec<u32> {
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s as u32
        })
        .collect()
}

#[test]
fn both_halves_borrow_the_callers_slice_mutably() {
    within(|| {
        let p = pool(2);
        let mut xs = xorshift(200_000, 7);
        let mut expect = xs.clone();
        expect.sort_unstable();
        p.install(|| quicksort(&mut xs));
        assert_eq!(xs, expect);

        // Split sum that also writes each element.
        fn bump_sum(xs: &mut [u64]) -> u64 {
            if xs.len() <= 64 {
                return xs
                    .iter_mut()
                    .map(|x| {
                        *x += 1;
                        *x
                    })
                    .sum();
            }
            let (l, r) = xs.split_at_mut(xs.len() / 2);
            let (a, b) = join(|| bump_sum(l), || bump_sum(r));
            a + b
        }
        let mut ys: Vec<u64> = (0..100_000).collect();
        let s = p.install(|| bump_sum(&mut ys));
        assert_eq!(s, (1..=100_000).sum::<u64>());
        assert!(ys.iter().enumerate().all(|(i, &y)| y == i as u64 + 1));
    });
}

#[test]
fn b_is_stolen_by_an_idle_worker_while_a_runs() {
    // `a` does not return until `b` has run: with `b` only taken back after
    // `a`, this would hang; a second worker must steal it.
    within(|| {
        let p = pool(2);
        for _ in 0..100 {
            let started = AtomicBool::new(false);
            let who = p.install(|| {
                join(
                    || {
                        while !started.load(Ordering::Acquire) {
                            std::hint::spin_loop();
                        }
                        std::thread::current().id()
                    },
                    || {
                        started.store(true, Ordering::Release);
                        std::thread::current().id()
                    },
                )
            });
            assert_ne!(who.0, who.1, "b ran on a's thread");
        }
    });
}

#[test]
fn an_owner_waiting_on_a_stolen_b_serves_outside_work_meanwhile() {
    // `b` (stolen by the second worker) finishes only once an outside
    // install has run; the only worker free to run it is the owner waiting
    // for `b`, asleep on its latch or spinning.
    within(|| {
        let p = pool(2);
        for _ in 0..20 {
            let started = AtomicBool::new(false);
            let released = AtomicBool::new(false);
            std::thread::scope(|ts| {
                ts.spawn(|| {
                    while !started.load(Ordering::Acquire) {
                        std::thread::yield_now();
                    }
                    std::thread::sleep(Duration::from_millis(2));
                    p.install(|| released.store(true, Ordering::Release));
                });
                let (a, b) = p.install(|| {
                    join(
                        || {
                            while !started.load(Ordering::Acquire) {
                                std::hint::spin_loop();
                            }
                            1
                        },
                        || {
                            started.store(true, Ordering::Release);
                            while !released.load(Ordering::Acquire) {
                                std::hint::spin_loop();
                            }
                            2
                        },
                    )
                });
                assert_eq!((a, b), (1, 2));
            });
        }
    });
}

#[test]
fn scope_runs_many_borrowing_spawns_before_returning() {
    within(|| {
        let p = pool(2);
        let mut slots = vec![0u64; 5_000];
        let nested = AtomicUsize::new(0);
        let r = p.install(|| {
            scope(|s| {
                for (i, slot) in slots.iter_mut().enumerate() {
                    let nested = &nested;
                    s.spawn(move |s| {
                        *slot = i as u64 * 3;
                        s.spawn(move |_| {
                            nested.fetch_add(1, Ordering::Relaxed);
                        });
                    });
                }
                42
            })
        });
        assert_eq!(r, 42);
        assert!(slots.iter().enumerate().all(|(i, &v)| v == i as u64 * 3));
        assert_eq!(nested.load(Ordering::Relaxed), 5_000);
    });
}

#[test]
fn panic_in_a_is_raised_after_b_completes() {
    within(|| {
        let p = pool(2);
        for _ in 0..200 {
            let mut b_done = false;
            let r = panic::catch_unwind(AssertUnwindSafe(|| {
                p.install(|| {
                    join(
                        || -> u32 { panic!("a failed") },
                        || {
                            // Long enough that a thief is mid-run at times.
                            std::hint::black_box(seq_fib(12));
                            b_done = true;
                        },
                    )
                })
            }));
            assert_eq!(r.unwrap_err().downcast_ref::<&str>(), Some(&"a failed"));
            assert!(b_done, "join returned before b finished");
        }
    });
}

#[test]
fn panic_in_b_reaches_the_caller_and_a_still_ran() {
    within(|| {
        let p = pool(2);
        for _ in 0..200 {
            let mut a_done = false;
            let r = panic::catch_unwind(AssertUnwindSafe(|| {
                p.install(|| join(|| a_done = true, || -> u8 { panic!("b failed") }))
            }));
            assert_eq!(r.unwrap_err().downcast_ref::<&str>(), Some(&"b failed"));
            assert!(a_done);
        }
        // The pool still works afterwards.
        assert_eq!(p.install(|| fib(15)), seq_fib(15));
    });
}

#[test]
fn panic_in_a_scope_spawn_is_raised_after_every_spawn_ran() {
    within(|| {
        let p = pool(2);
        let ran = AtomicUsize::new(0);
        let r = panic::catch_unwind(AssertUnwindSafe(|| {
            p.install(|| {
                scope(|s| {
                    for i in 0..100 {
                        let ran = &ran;
                        s.spawn(move |_| {
                            ran.fetch_add(1, Ordering::Relaxed);
                            if i == 37 {
                                panic!("spawn 37 failed");
                            }
                        });
                    }
                })
            })
        }));
        assert_eq!(
            r.unwrap_err().downcast_ref::<&str>(),
            Some(&"spawn 37 failed")
        );
        assert_eq!(ran.load(Ordering::Relaxed), 100);
    });
}

#[test]
fn join_from_outside_any_pool_uses_the_global_pool() {
    within(|| {
        let mut left = 0;
        let (a, b) = join(
            || {
                left = 5;
                fib(12)
            },
            || fib(13),
        );
        assert_eq!((a, b, left), (seq_fib(12), seq_fib(13), 5));
        let mut v = [1u8; 64];
        scope(|s| {
            for x in v.iter_mut() {
                s.spawn(move |_| *x += 1);
            }
        });
        assert!(v.iter().all(|&x| x == 2));
    });
}

#[test]
fn many_outside_threads_join_on_one_pool_at_once() {
    within(|| {
        let p = pool(2);
        std::thread::scope(|ts| {
            for t in 0..8u64 {
                let p = &p;
                ts.spawn(move || {
                    for i in 0..50 {
                        let n = 5 + (t + i) % 10;
                        assert_eq!(p.install(|| fib(n)), seq_fib(n));
                    }
                });
            }
        });
    });
}

#[test]
fn join_in_pool_b_from_a_job_of_pool_a() {
    within(|| {
        let a = pool(2);
        let b = pool(2);
        let r = a.install(|| {
            let (x, y) = join(|| b.install(|| fib(16)), || fib(14));
            // And a join inside b's job that installs back on b itself (runs
            // in place: already on b's worker).
            let z = b.install(|| join(|| b.install(|| fib(10)), || 1).0);
            x + y + z
        });
        assert_eq!(r, seq_fib(16) + seq_fib(14) + seq_fib(10));
    });
}

/// A -> B -> A with one worker in A: B's job installs back on A while A's
/// only worker waits for B. That worker must run the inner job while it
/// waits (a blocked worker would deadlock here: the hang detector fires).
#[test]
fn installs_crossing_back_and_forth_between_two_pools_do_not_deadlock() {
    within(|| {
        let a = std::sync::Arc::new(pool(1));
        let b = pool(1);
        let a2 = a.clone();
        let r = a.install(|| {
            let outer = std::thread::current().id();
            b.install(move || {
                let inner_thread = a2.install(|| (std::thread::current().id(), fib(15)));
                assert_eq!(inner_thread.0, outer, "A's only worker ran the inner job");
                inner_thread.1 + 1
            })
        });
        assert_eq!(r, seq_fib(15) + 1);
    });
}

/// While A's worker waits in `B.install`, work pushed onto A (here a job
/// injected from outside A) still runs on it: B's job waits for a flag
/// only A's work sets.
#[test]
fn a_worker_waiting_in_another_pools_install_keeps_running_its_own_pool() {
    within(|| {
        let a = std::sync::Arc::new(pool(1));
        let b = pool(1);
        let done = std::sync::Arc::new(AtomicBool::new(false));
        let (a2, done2) = (a.clone(), done.clone());
        // An outside thread injects into A once B's job has started.
        let (started_tx, started_rx) = mpsc::channel::<()>();
        let helper = std::thread::spawn(move || {
            started_rx.recv().unwrap();
            a2.install(|| done2.store(true, Ordering::Release));
        });
        a.install(|| {
            b.install(move || {
                started_tx.send(()).unwrap();
                while !done.load(Ordering::Acquire) {
                    std::thread::yield_now();
                }
            })
        });
        helper.join().unwrap();
    });
}

#[test]
fn one_worker_pool_runs_joins_and_scopes_without_deadlock() {
    within(|| {
        let p = pool(1);
        assert_eq!(p.install(|| fib(20)), seq_fib(20));
        let mut xs = xorshift(50_000, 3);
        let mut expect = xs.clone();
        expect.sort_unstable();
        p.install(|| quicksort(&mut xs));
        assert_eq!(xs, expect);
        let hits = AtomicUsize::new(0);
        p.install(|| {
            scope(|s| {
                for _ in 0..1_000 {
                    s.spawn(|_| {
                        let (a, b) = join(|| 1, || 1);
                        hits.fetch_add(a + b, Ordering::Relaxed);
                    });
                }
            })
        });
        assert_eq!(hits.load(Ordering::Relaxed), 2_000);
    });
}

#[test]
fn scope_handed_to_an_outside_thread_still_waits_for_its_spawns() {
    within(|| {
        let p = pool(2);
        let done = AtomicUsize::new(0);
        p.install(|| {
            scope(|s| {
                // A plain thread spawns into the scope: its jobs go through
                // the pool's global queue.
                std::thread::scope(|ts| {
                    ts.spawn(|| {
                        for _ in 0..100 {
                            s.spawn(|_| {
                                done.fetch_add(1, Ordering::Relaxed);
                            });
                        }
                    });
                });
            })
        });
        assert_eq!(done.load(Ordering::Relaxed), 100);
    });
}

#[test]
fn dropping_a_pool_joins_its_threads() {
    within(|| {
        for _ in 0..20 {
            let p = pool(3);
            assert_eq!(p.install(|| fib(12)), seq_fib(12));
            drop(p);
        }
    });
}

#[test]
fn thread_names_come_from_the_builder() {
    within(|| {
        let p = JoinPool::builder()
            .workers(2)
            .thread_name(|i| format!("fj-test-{i}"))
            .build()
            .unwrap();
        let name = p.install(|| std::thread::current().name().map(str::to_owned));
        assert!(name.unwrap().starts_with("fj-test-"));
        assert_eq!(p.workers(), 2);
    });
}

#[test]
fn b_one_level_down_is_stolen_while_its_a_runs() {
    // The outer `b` may already be gone (taken or stolen); the inner `b`
    // must still be stealable while the inner `a` waits for it. (An
    // owner-only slot, tried and dropped, hangs here: README.md,
    // "Work-first".)
    within(|| {
        let p = pool(2);
        for _ in 0..100 {
            let started = AtomicBool::new(false);
            p.install(|| {
                join(
                    || {
                        join(
                            || {
                                while !started.load(Ordering::Acquire) {
                                    std::hint::spin_loop();
                                }
                            },
                            || started.store(true, Ordering::Release),
                        )
                    },
                    || (),
                )
            });
        }
    });
}
