//! `magpie_core::join` on real threads, sized for Miri: stack jobs taken back
//! or stolen, panics crossing, scopes, the blocking install, heap jobs and
//! the latch states.
//!
//! Run under Miri: `cargo +nightly miri test -p magpie-core --test join_miri`.
//! The pool here is a toy (one shared queue, a thief thread); the runtime's
//! is `magpie_runtime::join`.
#![cfg(not(loom))]

use std::panic::{self, AssertUnwindSafe};
use std::time::Duration;

use magpie_core::join::{
    self, CoreLatch, FallAsleep, HeapJob, JobRef, JobSink, JoinContext, Latch, LockLatch, Wake,
    WakeUp,
};
use magpie_core::park::{Parker, Unparker};
use magpie_core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use magpie_core::sync::{thread, Arc, Mutex};

/// A toy pool: one shared queue (owners pop the newest, thieves take the
/// oldest) and the unparkers of its workers.
struct Pool {
    queue: Mutex<Vec<JobRef>>,
    unparkers: Vec<Unparker>,
    done: AtomicBool,
}

impl Pool {
    fn wake(&self, wake: Wake) {
        if let Wake::Worker(i) = wake {
            self.unparkers[i].unpark();
        }
    }

    fn steal(&self) -> Option<JobRef> {
        let mut q = self.queue.lock().unwrap();
        if q.is_empty() {
            None
        } else {
            Some(q.remove(0))
        }
    }
}

/// The scope's sink: the toy pool's queue.
struct Sink(Arc<Pool>);

impl JobSink for Sink {
    fn push(&self, job: JobRef) {
        self.0.queue.lock().unwrap().push(job);
    }
}

struct Ctx<'a> {
    id: usize,
    pool: &'a Arc<Pool>,
    parker: &'a Parker,
}

impl JoinContext for Ctx<'_> {
    fn owner(&self) -> usize {
        self.id
    }
    fn push(&mut self, job: JobRef) {
        self.pool.queue.lock().unwrap().push(job);
    }
    fn pop(&mut self) -> Option<JobRef> {
        self.pool.queue.lock().unwrap().pop()
    }
    fn wake(&mut self, wake: Wake) {
        self.pool.wake(wake);
    }
    fn wait(&mut self, latch: &CoreLatch) {
        if let Some(job) = self.pool.steal() {
            return self.execute(job);
        }
        if latch.fall_asleep() == FallAsleep::Asleep {
            let _ = self.parker.park_timeout(Duration::from_millis(1));
            let _ = latch.wake_up();
        }
    }
}

/// Runs `f` as worker 0 of a toy pool whose worker 1 steals all along.
fn with_pool<R>(f: impl FnOnce(&mut Ctx<'_>) -> R) -> R {
    let parkers = [Parker::new(), Parker::new()];
    let pool = Arc::new(Pool {
        queue: Mutex::new(Vec::new()),
        unparkers: parkers.iter().map(Parker::unparker).collect(),
        done: AtomicBool::new(false),
    });
    let [p0, p1] = parkers;
    let thief = {
        let pool = pool.clone();
        thread::spawn(move || {
            while !pool.done.load(Ordering::Acquire) {
                match pool.steal() {
                    Some(job) => pool.wake(job.execute()),
                    None => {
                        let _ = p1.park_timeout(Duration::from_micros(100));
                    }
                }
            }
        })
    };
    let r = f(&mut Ctx {
        id: 0,
        pool: &pool,
        parker: &p0,
    });
    pool.done.store(true, Ordering::Release);
    pool.unparkers[1].unpark();
    thief.join().unwrap();
    assert!(
        pool.queue.lock().unwrap().is_empty(),
        "a job was left queued"
    );
    r
}

fn sum(ctx: &mut Ctx<'_>, xs: &mut [u64]) -> u64 {
    if xs.len() <= 2 {
        for x in xs.iter_mut() {
            *x += 1;
        }
        return xs.iter().sum();
    }
    let (l, r) = xs.split_at_mut(xs.len() / 2);
    // The second half runs as a stolen or taken-back job with a context of
    // its own kind: a plain recursive sum (the thief has no `Ctx`).
    let (a, b) = join::join(ctx, || plain_sum(l), || plain_sum(r));
    a + b
}

fn plain_sum(xs: &mut [u64]) -> u64 {
    xs.iter_mut()
        .map(|x| {
            *x += 1;
            *x
        })
        .sum()
}

const N: usize = if cfg!(miri) { 16 } else { 2_000 };

#[test]
fn join_returns_both_results_and_each_half_writes_its_borrow() {
    with_pool(|ctx| {
        for round in 0..N {
            let mut xs: Vec<u64> = (0..7 + round as u64 % 5).collect();
            let expect: u64 = xs.iter().map(|x| x + 1).sum();
            assert_eq!(sum(ctx, &mut xs), expect);
            assert!(xs.iter().enumerate().all(|(i, &x)| x == i as u64 + 1));
        }
    });
}

#[test]
fn nested_joins_on_the_owner_return_every_result() {
    fn fib(ctx: &mut Ctx<'_>, n: u32) -> u64 {
        if n < 2 {
            return n as u64;
        }
        // `a` recurses on this worker with a context of its own (the
        // runtime's comes from a thread-local); `b` may be stolen.
        let (id, pool, parker) = (ctx.id, ctx.pool, ctx.parker);
        let (x, y) = join::join(
            ctx,
            || fib(&mut Ctx { id, pool, parker }, n - 1),
            move || seq_fib(n - 2),
        );
        x + y
    }
    fn seq_fib(n: u32) -> u64 {
        if n < 2 {
            n as u64
        } else {
            seq_fib(n - 1) + seq_fib(n - 2)
        }
    }
    let n = if cfg!(miri) { 6 } else { 18 };
    assert_eq!(with_pool(|ctx| fib(ctx, n)), seq_fib(n));
}

#[test]
fn panic_in_a_is_raised_after_b_finished_writing_its_borrow() {
    with_pool(|ctx| {
        for _ in 0..N {
            let mut written = 0u32;
            let r = panic::catch_unwind(AssertUnwindSafe(|| {
                join::join(ctx, || panic!("a failed"), || written = 7)
            }));
            let payload = r.expect_err("a's panic was lost");
            assert_eq!(payload.downcast_ref::<&str>(), Some(&"a failed"));
            assert_eq!(written, 7, "b did not finish before join returned");
        }
    });
}

#[test]
fn panic_in_b_reaches_the_joiner_with_its_payload() {
    with_pool(|ctx| {
        for _ in 0..N {
            let mut ran_a = false;
            let r = panic::catch_unwind(AssertUnwindSafe(|| {
                join::join(ctx, || ran_a = true, || -> u32 { panic!("b failed") })
            }));
            let payload = r.expect_err("b's panic was lost");
            assert_eq!(payload.downcast_ref::<&str>(), Some(&"b failed"));
            assert!(ran_a);
        }
    });
}

#[test]
fn panic_in_both_halves_raises_a_first() {
    with_pool(|ctx| {
        let r = panic::catch_unwind(AssertUnwindSafe(|| {
            join::join(ctx, || -> u8 { panic!("a") }, || -> u8 { panic!("b") })
        }));
        assert_eq!(r.unwrap_err().downcast_ref::<&str>(), Some(&"a"));
    });
}

#[test]
fn scope_runs_every_spawn_before_it_returns() {
    let spawns = if cfg!(miri) { 8 } else { 500 };
    with_pool(|ctx| {
        let pool = Sink(ctx.pool.clone());
        let mut slots = vec![0usize; spawns];
        let total = AtomicUsize::new(0);
        let total_ref = &total;
        let r = join::scope(ctx, pool, |s| {
            for (i, slot) in slots.iter_mut().enumerate() {
                s.spawn(move |s| {
                    *slot = i + 1;
                    // A nested spawn borrowing the same outside data.
                    s.spawn(move |_| {
                        total_ref.fetch_add(1, Ordering::Relaxed);
                    });
                });
            }
            "op's value"
        });
        assert_eq!(r, "op's value");
        assert!(slots.iter().enumerate().all(|(i, &v)| v == i + 1));
        assert_eq!(total.load(Ordering::Relaxed), spawns);
    });
}

#[test]
fn scope_raises_a_spawned_panic_after_every_spawn_ran() {
    with_pool(|ctx| {
        let pool = Sink(ctx.pool.clone());
        let ran = AtomicUsize::new(0);
        let ran_ref = &ran;
        let r = panic::catch_unwind(AssertUnwindSafe(|| {
            join::scope(ctx, pool, |s| {
                for i in 0..6 {
                    s.spawn(move |_| {
                        ran_ref.fetch_add(1, Ordering::Relaxed);
                        if i == 2 {
                            panic!("spawn 2 failed");
                        }
                    });
                }
            })
        }));
        assert_eq!(
            r.unwrap_err().downcast_ref::<&str>(),
            Some(&"spawn 2 failed")
        );
        assert_eq!(ran.load(Ordering::Relaxed), 6);
    });
}

#[test]
fn install_blocks_until_a_worker_ran_the_job() {
    with_pool(|ctx| {
        let pool = ctx.pool.clone();
        for i in 0..N {
            let mut seen = 0;
            let r = join::install(
                || {
                    seen = i;
                    i * 2
                },
                |job| {
                    pool.queue.lock().unwrap().push(job);
                    pool.unparkers[1].unpark();
                    Ok(())
                },
            );
            assert_eq!((r, seen), (i * 2, i));
        }
        let r = panic::catch_unwind(AssertUnwindSafe(|| {
            join::install(
                || panic!("installed job failed"),
                |job| {
                    pool.queue.lock().unwrap().push(job);
                    Ok::<(), JobRef>(())
                },
            )
        }));
        assert_eq!(
            r.unwrap_err().downcast_ref::<&str>(),
            Some(&"installed job failed")
        );
    });
}

/// X1-X3: worker 0 of the toy pool installs into a second pool (one worker
/// thread with its own queue) and waits by working in its own; the job
/// borrows the caller's frame, and its panic comes back.
#[test]
fn cross_install_returns_once_the_other_pools_worker_ran_the_job() {
    with_pool(|ctx| {
        let b_queue: Arc<Mutex<Vec<JobRef>>> = Arc::new(Mutex::new(Vec::new()));
        let b_parker = Parker::new();
        let b_unparker = b_parker.unparker();
        let b_done = Arc::new(AtomicBool::new(false));
        let b_worker = {
            let (b_queue, b_done) = (b_queue.clone(), b_done.clone());
            thread::spawn(move || {
                while !b_done.load(Ordering::Acquire) {
                    let job = b_queue.lock().unwrap().pop();
                    match job {
                        // B acts on a wake by unparking its own worker: a
                        // cross latch must never ask it to.
                        Some(job) => assert_eq!(job.execute(), Wake::Nobody),
                        None => {
                            let _ = b_parker.park_timeout(Duration::from_micros(100));
                        }
                    }
                }
            })
        };
        let owner = ctx.pool.unparkers[0].clone();
        for i in 0..N {
            let mut seen = 0;
            let r = join::install_cross(
                ctx,
                owner.clone(),
                || {
                    seen = i;
                    i * 2
                },
                |job| {
                    b_queue.lock().unwrap().push(job);
                    b_unparker.unpark();
                    Ok(())
                },
            );
            assert_eq!((r, seen), (i * 2, i));
        }
        let r = panic::catch_unwind(AssertUnwindSafe(|| {
            join::install_cross(
                ctx,
                owner.clone(),
                || panic!("cross-installed job failed"),
                |job| {
                    b_queue.lock().unwrap().push(job);
                    b_unparker.unpark();
                    Ok::<(), JobRef>(())
                },
            )
        }));
        assert_eq!(
            r.unwrap_err().downcast_ref::<&str>(),
            Some(&"cross-installed job failed")
        );
        b_done.store(true, Ordering::Release);
        b_unparker.unpark();
        b_worker.join().unwrap();
    });
}

#[test]
fn install_refused_gives_the_job_back_and_panics() {
    let r = panic::catch_unwind(|| join::install(|| 1, Err));
    assert!(r.is_err());
}

#[test]
fn heap_job_runs_once_and_frees_its_closure() {
    struct Counted(Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
    let drops = Arc::new(AtomicUsize::new(0));
    let runs = Arc::new(AtomicUsize::new(0));
    let jobs: Vec<JobRef> = (0..4)
        .map(|_| {
            let c = Counted(drops.clone());
            let runs = runs.clone();
            HeapJob::new(move || {
                let _c = c;
                runs.fetch_add(1, Ordering::Relaxed);
            })
            .into_job_ref()
        })
        .collect();
    let t = thread::spawn(move || {
        for job in jobs {
            assert_eq!(job.execute(), Wake::Nobody);
        }
    });
    t.join().unwrap();
    assert_eq!(runs.load(Ordering::Relaxed), 4);
    assert_eq!(drops.load(Ordering::Relaxed), 4);
}

#[test]
fn core_latch_set_on_a_sleeper_names_it_and_on_a_waker_names_nobody() {
    let latch = CoreLatch::new(3);
    assert_eq!(latch.fall_asleep(), FallAsleep::Asleep);
    assert_eq!(latch.wake_up(), WakeUp::Unset);
    assert!(!latch.probe());
    assert_eq!(latch.fall_asleep(), FallAsleep::Asleep);
    // SAFETY: the latch is a local that outlives the call.
    assert_eq!(unsafe { CoreLatch::set(&latch) }, Wake::Worker(3));
    assert!(latch.probe() && latch.snapshot().is_set());
    assert_eq!(latch.wake_up(), WakeUp::Set);
    assert_eq!(latch.fall_asleep(), FallAsleep::Set);

    let awake = CoreLatch::new(1);
    // SAFETY: as above.
    assert_eq!(unsafe { CoreLatch::set(&awake) }, Wake::Nobody);
    assert_eq!(awake.fall_asleep(), FallAsleep::Set);
}

#[test]
fn lock_latch_releases_a_blocked_waiter() {
    let latch = Arc::new(LockLatch::new());
    let setter = {
        let latch = latch.clone();
        thread::spawn(move || {
            // SAFETY: the Arc keeps the latch alive past the call.
            assert_eq!(unsafe { LockLatch::set(&*latch) }, Wake::Nobody);
        })
    };
    latch.wait();
    assert!(latch.probe());
    setter.join().unwrap();
}
