//! The thread_pool lane: width, reentrancy, admission order, overflow
//! policies, aging, errors and panics. Every invocation runs on magpie's
//! workers. No wall-clock assertion: waits below are hang detectors only.
#![cfg(not(loom))]

mod lanes_util;

use magpie_core::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use lanes_util::*;
use magpie_runtime::lanes::{
    self, Component, ComponentError, Dispatch, DropReason, Execution, GraphBuilder, GraphContext,
    Invocation, Job, LaneJob, LaneRuntime, LaneSpec, OverflowPolicy, PoolLane, Priority,
    RunErrorKind, RunOptions, StopReason, StopToken, ThreadPoolSpec, Work, DEFAULT_AGING_STEP,
};

/// A hang detector, never a timing assertion.
const HANG: Duration = Duration::from_secs(20);

#[derive(Clone, Default)]
struct Latch(Arc<(Mutex<bool>, Condvar)>);

impl Latch {
    fn open(&self) {
        *self.0 .0.lock().unwrap() = true;
        self.0 .1.notify_all();
    }
    fn wait(&self) {
        let mut open = self.0 .0.lock().unwrap();
        let deadline = Instant::now() + HANG;
        while !*open {
            assert!(Instant::now() < deadline, "latch never opened (hang)");
            open = self
                .0
                 .1
                .wait_timeout(open, Duration::from_millis(50))
                .unwrap()
                .0;
        }
    }
}

/// Counts invocations in flight and the most at once; each invocation waits
/// until `want` are in flight together (or `solo`: never waits).
#[derive(Clone, Default)]
struct Overlap {
    now: Arc<AtomicUsize>,
    max: Arc<AtomicUsize>,
    ran: Arc<AtomicUsize>,
    threads: Arc<Mutex<Vec<String>>>,
}

struct Overlapping {
    o: Overlap,
    want: usize,
}

impl Component for Overlapping {
    fn execute(&mut self, _: &Invocation, _: &mut GraphContext) -> Result<(), ComponentError> {
        let o = &self.o;
        let n = o.now.fetch_add(1, Ordering::SeqCst) + 1;
        o.max.fetch_max(n, Ordering::SeqCst);
        o.threads
            .lock()
            .unwrap()
            .push(std::thread::current().name().unwrap_or("").to_string());
        let deadline = Instant::now() + HANG;
        // Wait for company (proves overlap), but not past the hang detector.
        while self.want > 1 && o.max.load(Ordering::SeqCst) < self.want {
            assert!(Instant::now() < deadline, "no overlap (hang)");
            std::thread::yield_now();
        }
        // Stay a little so a wrongly admitted extra would be seen in `max`.
        for _ in 0..1000 {
            std::thread::yield_now();
        }
        o.now.fetch_sub(1, Ordering::SeqCst);
        o.ran.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

fn pool_graph(spec: ThreadPoolSpec, exec: Execution, o: &Overlap, want: usize) -> lanes::Graph {
    let mut g = GraphBuilder::new();
    g.lane(LaneSpec::thread_pool("pool", spec)).unwrap();
    let o = o.clone();
    g.component("work", "pool", exec, move || Overlapping {
        o: o.clone(),
        want,
    })
    .unwrap();
    g.build().unwrap()
}

fn iterations(n: u64) -> RunOptions {
    RunOptions {
        max_iterations: Some(n),
        ..RunOptions::default()
    }
}

#[test]
fn thread_pool_lane_executes_reentrant_invocations_concurrently_up_to_max_threads() {
    let rt = runtime(3);
    let o = Overlap::default();
    let spec = ThreadPoolSpec {
        max_threads: 2,
        ..ThreadPoolSpec::default()
    };
    let exec = Execution {
        reentrant: true,
        invocations: 8,
        ..Execution::default()
    };
    let r = lanes::run(pool_graph(spec, exec, &o, 2), &rt, iterations(2));
    assert_eq!(r.stop_reason, StopReason::Completed);
    assert_eq!(o.ran.load(Ordering::SeqCst), 16);
    assert_eq!(
        o.max.load(Ordering::SeqCst),
        2,
        "overlap, and never above max_threads"
    );
    assert_eq!(r.metrics.active_count, 2);
    assert_eq!(r.metrics.worker_count, 2);
    assert_eq!(r.metrics.completed_count, 16);
}

#[test]
fn thread_pool_workers_persist_across_multiple_runtime_steps_on_magpies_workers() {
    let rt = runtime(2);
    let o = Overlap::default();
    let spec = ThreadPoolSpec {
        max_threads: 2,
        ..ThreadPoolSpec::default()
    };
    let exec = Execution {
        reentrant: true,
        invocations: 4,
        ..Execution::default()
    };
    let r = lanes::run(pool_graph(spec, exec, &o, 1), &rt, iterations(5));
    assert_eq!(r.epochs, 5);
    assert_eq!(o.ran.load(Ordering::SeqCst), 20);
    // Every invocation ran on one of the lane runtime's worker threads
    // (magpie's worker loop): no other pool of threads exists.
    let threads = o.threads.lock().unwrap();
    assert!(
        threads.iter().all(|t| t.starts_with("magpie-lane-worker-")),
        "{threads:?}"
    );
    // And the batches' worker ids are lane runtime worker ids.
    for b in r.trace.named("thread_pool_batch") {
        let Some(ids) = r.trace.list_arg(b, "worker_ids") else {
            panic!("thread_pool_batch without worker_ids");
        };
        assert!(!ids.is_empty() && ids.iter().all(|&w| w < 2), "{ids:?}");
    }
    assert_eq!(r.trace.named("thread_pool_batch").count(), 5);
    assert!(r.metrics.active_count <= 2);
}

#[test]
fn thread_pool_lane_serializes_non_reentrant_invocations() {
    let rt = runtime(2);
    let o = Overlap::default();
    let spec = ThreadPoolSpec {
        max_threads: 2,
        ..ThreadPoolSpec::default()
    };
    let exec = Execution {
        reentrant: false,
        invocations: 6,
        ..Execution::default()
    };
    let r = lanes::run(pool_graph(spec, exec, &o, 1), &rt, iterations(2));
    assert_eq!(o.ran.load(Ordering::SeqCst), 12);
    assert_eq!(o.max.load(Ordering::SeqCst), 1, "never two at once");
    assert_eq!(r.metrics.active_count, 1);
}

#[test]
fn component_execute_events_on_a_thread_pool_lane_carry_worker_ids() {
    let rt = runtime(2);
    let o = Overlap::default();
    let spec = ThreadPoolSpec {
        max_threads: 2,
        ..ThreadPoolSpec::default()
    };
    let exec = Execution {
        reentrant: true,
        invocations: 3,
        ..Execution::default()
    };
    let r = lanes::run(pool_graph(spec, exec, &o, 1), &rt, iterations(1));
    let spans: Vec<_> = r.trace.named("component_execute").collect();
    assert_eq!(spans.len(), 3);
    for s in spans {
        let w = s.u64_arg("worker_id").expect("worker_id");
        assert!(w < 2);
        assert_eq!(s.tid, w, "the event sits on its worker's track");
    }
}

/// Submits `name` to `pool`; its run appends the name to `order`.
fn job(order: &Arc<Mutex<Vec<String>>>, name: &str, component: usize, priority: Priority) -> Job {
    let (order, name) = (order.clone(), name.to_string());
    Job {
        component,
        index: 0,
        priority,
        reentrant: false,
        run: Box::new(move |d| {
            let tag = match d {
                Dispatch::Run { .. } => name,
                Dispatch::Dropped(DropReason::Rejected) => format!("{name}:rejected"),
                Dispatch::Dropped(DropReason::Evicted) => format!("{name}:evicted"),
                Dispatch::Dropped(DropReason::Closed) => format!("{name}:closed"),
            };
            order.lock().unwrap().push(tag);
            None
        }),
    }
}

/// A lane of width 1 whose slot is held by a gate job until the latch opens.
fn gated(spec: ThreadPoolSpec) -> (LaneRuntime, PoolLane, Latch) {
    let rt = runtime(2);
    let pool = PoolLane::new(&spec, &rt);
    let latch = Latch::default();
    let l = latch.clone();
    let adm = pool.submit(Job {
        component: 999,
        index: 0,
        priority: Priority::Background,
        reentrant: false,
        run: Box::new(move |_| {
            l.wait();
            None
        }),
    });
    assert_eq!(adm.admitted, 1);
    (rt, pool, latch)
}

#[test]
fn admission_orders_by_priority_then_enqueue_order_then_component_id() {
    let (_rt, pool, latch) = gated(ThreadPoolSpec::default());
    let order = Arc::new(Mutex::new(Vec::new()));
    let _ = pool.submit(job(&order, "n-first", 5, Priority::Normal));
    let _ = pool.submit(job(&order, "bg", 1, Priority::Background));
    // One batch: equal priority and enqueue order, so component id decides.
    let _ = pool.submit_batch(vec![
        job(&order, "h-c7", 7, Priority::High),
        job(&order, "h-c3", 3, Priority::High),
        job(&order, "n-c2", 2, Priority::Normal),
    ]);
    let _ = pool.submit(job(&order, "low", 0, Priority::Low));
    let _ = pool.submit(job(&order, "h-last", 9, Priority::High));
    latch.open();
    pool.wait_idle();
    assert_eq!(
        *order.lock().unwrap(),
        ["h-c3", "h-c7", "h-last", "n-first", "n-c2", "low", "bg"]
    );
    let s = pool.stats();
    assert_eq!(s.completed, 8);
    assert_eq!(s.completed_by_priority, [3, 2, 1, 2]);
    assert_eq!(s.starvation_guard, 0, "nothing waited long enough to age");
}

fn overflow_case(
    overflow: OverflowPolicy,
) -> (Vec<String>, magpie_runtime::lanes::PoolStats, bool) {
    let (_rt, pool, latch) = gated(ThreadPoolSpec {
        queue_capacity: Some(2),
        overflow,
        ..ThreadPoolSpec::default()
    });
    let order = Arc::new(Mutex::new(Vec::new()));
    let a = pool.submit(job(&order, "old", 1, Priority::Low));
    let b = pool.submit(job(&order, "mid", 2, Priority::Normal));
    assert_eq!((a.admitted, b.admitted), (1, 1));
    let c = pool.submit(job(&order, "new", 3, Priority::Normal));
    latch.open();
    pool.wait_idle();
    let order = order.lock().unwrap().clone();
    (order, pool.stats(), c.fail_fast)
}

#[test]
fn thread_pool_lane_queue_capacity_rejects_newest_when_full() {
    let (order, stats, fail_fast) = overflow_case(OverflowPolicy::RejectNew);
    assert_eq!(order, ["new:rejected", "mid", "old"]);
    assert_eq!((stats.rejected, stats.low_priority_rejected), (1, 0));
    assert_eq!(stats.max_queue_depth, 2);
    assert!(!fail_fast);
}

#[test]
fn thread_pool_lane_reject_new_keeps_oldest_admission_when_full() {
    // The seed's aliases all keep the oldest admitted work.
    for alias in ["drop_newest", "reject", "reject_new", "block"] {
        let policy = OverflowPolicy::parse(alias).unwrap();
        let (order, stats, _) = overflow_case(policy);
        assert_eq!(order, ["new:rejected", "mid", "old"], "{alias}");
        assert_eq!(stats.rejected, 1);
    }
}

#[test]
fn thread_pool_lane_queue_capacity_drops_oldest_when_configured() {
    for alias in ["drop_oldest", "overwrite"] {
        let (order, stats, _) = overflow_case(OverflowPolicy::parse(alias).unwrap());
        // `old` (low) was the oldest waiting: evicted, and counted as a
        // low-priority rejection.
        assert_eq!(order, ["old:evicted", "mid", "new"], "{alias}");
        assert_eq!((stats.rejected, stats.low_priority_rejected), (1, 1));
    }
}

#[test]
fn fail_fast_overflow_refuses_and_reports() {
    let (order, stats, fail_fast) = overflow_case(OverflowPolicy::FailFast);
    assert_eq!(order, ["new:rejected", "mid", "old"]);
    assert_eq!(stats.rejected, 1);
    assert!(fail_fast);
}

#[test]
fn capacity_zero_admits_only_the_active_width() {
    let (_rt, pool, latch) = gated(ThreadPoolSpec {
        queue_capacity: Some(0),
        ..ThreadPoolSpec::default()
    });
    let order = Arc::new(Mutex::new(Vec::new()));
    let a = pool.submit(job(&order, "x", 1, Priority::Background));
    assert_eq!(a.rejected, 1);
    latch.open();
    pool.wait_idle();
    assert_eq!(*order.lock().unwrap(), ["x:rejected"]);
    assert_eq!(pool.stats().low_priority_rejected, 1);
}

/// The aging bound: a job with `a` jobs of its own class ahead of it starts
/// within `(a + 1) * (step + 3)` dispatches, however many `high` jobs keep
/// arriving.
fn flood(step: u64, flood_len: usize) -> (Option<usize>, u64) {
    let (_rt, pool, latch) = gated(ThreadPoolSpec {
        aging_step: step,
        ..ThreadPoolSpec::default()
    });
    let started = Arc::new(Mutex::new(Vec::<String>::new()));
    // Each high job, when it runs, submits the next one: the queue always
    // holds high work (a sustained flood) until `flood_len` have run.
    fn high(pool: &PoolLane, started: &Arc<Mutex<Vec<String>>>, k: usize, left: usize) -> Job {
        let (pool2, started2) = (pool.clone(), started.clone());
        Job {
            component: 10 + k % 3,
            index: k,
            priority: Priority::High,
            reentrant: true,
            run: Box::new(move |d| {
                if let Dispatch::Run { .. } = d {
                    started2.lock().unwrap().push(format!("h{k}"));
                    if left > 0 {
                        let next = high(&pool2, &started2, k + 3, left - 1);
                        let _ = pool2.submit(next);
                    }
                }
                None
            }),
        }
    }
    let per_chain = flood_len / 3;
    for k in 0..3 {
        let _ = pool.submit(high(&pool, &started, k, per_chain));
    }
    let s = started.clone();
    let _ = pool.submit(Job {
        component: 1,
        index: 0,
        priority: Priority::Background,
        reentrant: false,
        run: Box::new(move |_| {
            s.lock().unwrap().push("bg".into());
            None
        }),
    });
    latch.open();
    pool.wait_idle();
    let order = started.lock().unwrap().clone();
    let pos = order.iter().position(|n| n == "bg");
    (pos, pool.stats().starvation_guard)
}

#[test]
fn aging_bounds_the_wait_of_background_work_under_a_sustained_high_priority_flood() {
    const STEP: u64 = 8;
    const FLOOD: usize = 300;
    let (pos, guards) = flood(STEP, FLOOD);
    let pos = pos.expect("the background job ran");
    eprintln!("background job started after {pos} others ({guards} guard interventions)");
    // Nothing of its class ahead of it (a = 0): at most STEP + 3 jobs start
    // before it.
    assert!(pos as u64 <= STEP + 3, "started after {pos} others");
    // It was passed over STEP times first: the guard, not luck, ran it.
    assert_eq!(pos as u64, STEP);
    assert_eq!(guards, 1);
}

#[test]
fn a_backlog_of_low_work_does_not_age_ahead_of_new_high_work() {
    // 40 low jobs wait behind each other (not behind better work); the 20th
    // to run submits a high job, which must run next: waiting in a backlog
    // of one's own class is not starvation.
    let (_rt, pool, latch) = gated(ThreadPoolSpec {
        aging_step: 4,
        ..ThreadPoolSpec::default()
    });
    let order = Arc::new(Mutex::new(Vec::new()));
    for k in 0..40 {
        let (o, p) = (order.clone(), pool.clone());
        let _ = pool.submit(Job {
            component: k,
            index: 0,
            priority: Priority::Low,
            reentrant: false,
            run: Box::new(move |_| {
                o.lock().unwrap().push(format!("low{k}"));
                if k == 19 {
                    let _ = p.submit(job(&o, "high", 100, Priority::High));
                }
                None
            }),
        });
    }
    latch.open();
    pool.wait_idle();
    let order = order.lock().unwrap();
    assert_eq!(order[19], "low19");
    assert_eq!(order[20], "high");
    assert_eq!(pool.stats().starvation_guard, 0);
}

#[test]
fn the_default_aging_step_serves_a_starving_class_after_64_pass_overs() {
    assert_eq!(ThreadPoolSpec::default().aging_step, DEFAULT_AGING_STEP);
    assert_eq!(DEFAULT_AGING_STEP, 64);
    let (pos, guards) = flood(DEFAULT_AGING_STEP, 300);
    assert_eq!((pos, guards), (Some(64), 1));
}

#[test]
fn without_aging_the_same_flood_starves_background_work_until_it_ends() {
    let (pos, guards) = flood(0, 300);
    assert_eq!(pos, Some(303), "runs only after every high job");
    assert_eq!(guards, 0);
}

struct Failing {
    panic: bool,
    deactivated: Arc<AtomicUsize>,
}

impl Component for Failing {
    fn execute(&mut self, inv: &Invocation, _: &mut GraphContext) -> Result<(), ComponentError> {
        if inv.epoch() == 2 {
            if self.panic {
                panic!("boom in epoch {}", inv.epoch());
            }
            return Err(ComponentError::new("sensor offline"));
        }
        Ok(())
    }
    fn deactivate(&mut self) {
        self.deactivated.fetch_add(1, Ordering::SeqCst);
    }
}

fn failing_run(lane: LaneSpec, panic: bool) -> (lanes::RunResult, usize) {
    let rt = runtime(2);
    let deactivated = Arc::new(AtomicUsize::new(0));
    let mut g = GraphBuilder::new();
    let lane_name = lane.name.clone();
    g.lane(lane).unwrap();
    g.lane(LaneSpec::event_loop("other")).unwrap();
    let d = deactivated.clone();
    g.component("bad", &lane_name, Execution::default(), move || Failing {
        panic,
        deactivated: d.clone(),
    })
    .unwrap();
    let l = log();
    g.component(
        "fine",
        "other",
        Execution::with_priority(Priority::Low),
        move || Noop { log: l.clone() },
    )
    .unwrap();
    let r = lanes::run(g.build().unwrap(), &rt, iterations(10));
    let d = deactivated.load(Ordering::SeqCst);
    (r, d)
}

#[test]
fn thread_pool_execute_status_failure_keeps_structured_runtime_error() {
    let (r, deactivated) = failing_run(
        LaneSpec::thread_pool("pool", ThreadPoolSpec::default()),
        false,
    );
    assert_eq!(r.stop_reason, StopReason::Error);
    let e = r.error.expect("structured error");
    assert_eq!(e.component.as_deref(), Some("bad"));
    assert_eq!(e.epoch, 2);
    assert_eq!(e.kind, RunErrorKind::Failed("sensor offline".into()));
    assert_eq!(r.epochs, 2, "no epoch after the failing one");
    assert_eq!(deactivated, 1, "cleanup still runs");
    assert_eq!(r.deactivated, ["fine", "bad"], "reverse startup order");
}

#[test]
fn a_panicking_component_stops_the_run_with_an_error_and_cleanup_runs() {
    for lane in [
        LaneSpec::thread_pool("pool", ThreadPoolSpec::default()),
        LaneSpec::event_loop("main"),
    ] {
        let (r, deactivated) = failing_run(lane, true);
        assert_eq!(r.stop_reason, StopReason::Error);
        let e = r.error.expect("structured error");
        assert_eq!(e.kind, RunErrorKind::Panicked("boom in epoch 2".into()));
        assert_eq!(deactivated, 1);
    }
}

#[test]
fn graph_overflow_at_capacity_counts_rejections_and_fail_fast_stops_the_run() {
    // One epoch submits 5 low invocations to a lane of width 1 and capacity
    // 2: 1 runs, 2 wait, 2 are rejected.
    for (overflow, reason) in [
        (OverflowPolicy::RejectNew, StopReason::Completed),
        (OverflowPolicy::FailFast, StopReason::Error),
    ] {
        let rt = runtime(2);
        let mut g = GraphBuilder::new();
        g.lane(LaneSpec::thread_pool(
            "pool",
            ThreadPoolSpec {
                queue_capacity: Some(2),
                overflow,
                ..ThreadPoolSpec::default()
            },
        ))
        .unwrap();
        let l = log();
        let exec = Execution {
            priority: Priority::Low,
            invocations: 5,
            ..Execution::default()
        };
        let ll = l.clone();
        g.component("w", "pool", exec, move || Noop { log: ll.clone() })
            .unwrap();
        let r = lanes::run(g.build().unwrap(), &rt, iterations(1));
        assert_eq!(r.stop_reason, reason);
        assert_eq!(r.metrics.rejected_count, 2);
        assert_eq!(r.metrics.low_priority_rejected_count, 2);
        assert_eq!(r.metrics.completed_count, 3);
        assert_eq!(r.trace.named("scheduler_reject").count(), 2);
        let kept: Vec<usize> = l.lock().unwrap().iter().map(|(_, _, i)| *i).collect();
        assert_eq!(kept, [0, 1, 2], "the oldest admitted are kept");
        if reason == StopReason::Error {
            assert!(matches!(
                r.error.unwrap().kind,
                RunErrorKind::QueueFull { .. }
            ));
        }
    }
}

#[test]
fn thread_pool_stop_while_queue_non_empty_drains_admitted_work() {
    struct Stopper {
        stop: StopToken,
        ran: Arc<AtomicUsize>,
    }
    impl Component for Stopper {
        fn execute(
            &mut self,
            inv: &Invocation,
            _: &mut GraphContext,
        ) -> Result<(), ComponentError> {
            if inv.index() == 0 {
                self.stop.request();
            }
            self.ran.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    }
    let rt = runtime(2);
    let stop = StopToken::new();
    let ran = Arc::new(AtomicUsize::new(0));
    let mut g = GraphBuilder::new();
    g.lane(LaneSpec::thread_pool("pool", ThreadPoolSpec::default()))
        .unwrap();
    let (s, r2) = (stop.clone(), ran.clone());
    let exec = Execution {
        invocations: 10,
        ..Execution::default()
    };
    g.component("w", "pool", exec, move || Stopper {
        stop: s.clone(),
        ran: r2.clone(),
    })
    .unwrap();
    let r = lanes::run(
        g.build().unwrap(),
        &rt,
        RunOptions {
            max_iterations: Some(100),
            stop,
            ..RunOptions::default()
        },
    );
    assert_eq!(r.stop_reason, StopReason::StopRequested);
    assert_eq!(r.epochs, 1, "no new iteration after the stop");
    assert_eq!(
        ran.load(Ordering::SeqCst),
        10,
        "the 9 queued behind it drained"
    );
    assert_eq!(r.metrics.queue_depth, 9);
    assert_eq!(r.deactivated, ["w"]);
    assert_eq!(r.trace.named("loop_cancellation_observed").count(), 1);
}

#[test]
fn after_the_stop_is_seen_no_new_pool_work_is_submitted() {
    struct StopNow(StopToken);
    impl Component for StopNow {
        fn execute(&mut self, _: &Invocation, _: &mut GraphContext) -> Result<(), ComponentError> {
            self.0.request();
            Ok(())
        }
    }
    let rt = runtime(2);
    let stop = StopToken::new();
    let log = log();
    let mut g = GraphBuilder::new();
    g.lane(LaneSpec::event_loop("main")).unwrap();
    g.lane(LaneSpec::thread_pool("pool", ThreadPoolSpec::default()))
        .unwrap();
    let s = stop.clone();
    g.component(
        "stopper",
        "main",
        Execution::with_priority(Priority::High),
        move || StopNow(s.clone()),
    )
    .unwrap();
    let l = log.clone();
    g.component("pooled", "pool", Execution::default(), move || Noop {
        log: l.clone(),
    })
    .unwrap();
    let r = lanes::run(
        g.build().unwrap(),
        &rt,
        RunOptions {
            stop,
            ..RunOptions::default()
        },
    );
    assert_eq!((r.stop_reason, r.epochs), (StopReason::StopRequested, 1));
    assert!(
        log.lock().unwrap().is_empty(),
        "the pool region came after the stop check"
    );
    assert_eq!(r.trace.named("thread_pool_batch").count(), 0);
}

/// A job that records how it ended.
fn record(log: &Arc<Mutex<Vec<Dispatch>>>) -> Job {
    let log = log.clone();
    Job {
        component: 1,
        index: 0,
        priority: Priority::Normal,
        reentrant: true,
        run: Box::new(move |d| {
            log.lock().unwrap().push(d);
            None
        }),
    }
}

#[test]
fn after_its_lane_runtime_is_dropped_a_lane_drops_new_jobs_as_closed_and_never_hangs() {
    let rt = LaneRuntime::new(2).unwrap();
    let pool = PoolLane::new(
        &ThreadPoolSpec {
            max_threads: 2,
            ..ThreadPoolSpec::default()
        },
        &rt,
    );
    let log = Arc::new(Mutex::new(Vec::new()));
    for _ in 0..10 {
        let _ = pool.submit(record(&log));
    }
    pool.wait_idle();
    drop(rt);
    for _ in 0..3 {
        let _ = pool.submit(record(&log));
    }
    // wait_idle on a thread of its own: a lost job would block it forever.
    let (tx, rx) = std::sync::mpsc::channel();
    let p = pool.clone();
    std::thread::spawn(move || {
        p.wait_idle();
        let _ = tx.send(());
    });
    rx.recv_timeout(HANG)
        .expect("wait_idle hung after the drop");
    let log = log.lock().unwrap();
    assert_eq!(log.len(), 13, "every job's closure is called exactly once");
    assert!(log[..10]
        .iter()
        .all(|d| matches!(d, Dispatch::Run { worker_id: Some(w) } if *w < 2)));
    assert!(log[10..]
        .iter()
        .all(|d| *d == Dispatch::Dropped(DropReason::Closed)));
    assert_eq!(pool.stats().completed, 10);
}

#[test]
fn lanes_sharing_one_lane_runtime_each_keep_their_own_max_threads() {
    let rt = LaneRuntime::new(3).unwrap();
    let lane = |w| {
        PoolLane::new(
            &ThreadPoolSpec {
                max_threads: w,
                ..ThreadPoolSpec::default()
            },
            &rt,
        )
    };
    let (narrow, wide) = (lane(1), lane(2));
    let counters: Vec<(Arc<AtomicUsize>, Arc<AtomicUsize>)> =
        (0..2).map(|_| (Arc::default(), Arc::default())).collect();
    for k in 0..40 {
        let (pool, (now, max)) = if k % 2 == 0 {
            (&narrow, &counters[0])
        } else {
            (&wide, &counters[1])
        };
        let (now, max) = (now.clone(), max.clone());
        let _ = pool.submit(Job {
            component: k,
            index: 0,
            priority: Priority::Normal,
            reentrant: true,
            run: Box::new(move |_| {
                let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                max.fetch_max(n, Ordering::SeqCst);
                for _ in 0..200 {
                    std::thread::yield_now();
                }
                now.fetch_sub(1, Ordering::SeqCst);
                None
            }),
        });
    }
    narrow.wait_idle();
    wide.wait_idle();
    assert_eq!(counters[0].1.load(Ordering::SeqCst), 1);
    assert!(counters[1].1.load(Ordering::SeqCst) <= 2);
    assert_eq!(narrow.stats().max_active, 1);
    assert!(wide.stats().max_active <= 2);
    assert_eq!(narrow.stats().completed + wide.stats().completed, 40);
}

#[test]
fn a_backlog_runs_on_the_runner_already_there_without_scheduling_one_per_job() {
    let (_rt, pool, latch) = gated(ThreadPoolSpec::default());
    let log = Arc::new(Mutex::new(Vec::new()));
    for _ in 0..200 {
        let _ = pool.submit(record(&log));
    }
    latch.open();
    pool.wait_idle();
    let s = pool.stats();
    assert_eq!(s.completed, 201);
    // Width 1: the gate job's runner takes each next job as it finishes
    // one (yielding its worker every 64 jobs, which is no new runner).
    assert_eq!(s.runners_scheduled, 1);
    assert_eq!(log.lock().unwrap().len(), 200);
}

/// Plain-data work (no closure): a gate that holds the slot until its
/// latch opens, or a numbered note. `then` logs how the job ended and how
/// many jobs the lane had counted complete by then.
enum Step {
    Gate(Latch),
    Note(usize),
}

/// (job id, how it ended, `completed` seen in `then`).
type StepLog = Arc<Mutex<Vec<(usize, Dispatch, u64)>>>;

struct StepJob {
    step: Step,
    log: StepLog,
    pool: Arc<std::sync::OnceLock<PoolLane<StepJob>>>,
}

impl Work for StepJob {
    type Done = (
        usize,
        Dispatch,
        StepLog,
        Arc<std::sync::OnceLock<PoolLane<StepJob>>>,
    );

    fn run(self, d: Dispatch) -> Self::Done {
        let id = match self.step {
            Step::Gate(latch) => {
                if let Dispatch::Run { .. } = d {
                    latch.wait();
                }
                0
            }
            Step::Note(id) => id,
        };
        (id, d, self.log, self.pool)
    }

    fn then((id, d, log, pool): Self::Done) {
        let completed = pool.get().map_or(0, |p| p.stats().completed);
        log.lock().unwrap().push((id, d, completed));
    }
}

#[test]
fn a_lane_of_plain_data_work_runs_each_job_once_and_hands_it_on_after_its_slot_is_free() {
    let rt = runtime(2);
    let pool = PoolLane::<StepJob>::typed(
        &ThreadPoolSpec {
            max_threads: 1,
            queue_capacity: Some(4),
            overflow: OverflowPolicy::RejectNew,
            ..ThreadPoolSpec::default()
        },
        &rt,
    );
    let cell = Arc::new(std::sync::OnceLock::new());
    assert!(cell.set(pool.clone()).is_ok());
    let log: StepLog = Arc::default();
    let job = |step| LaneJob {
        component: 1,
        index: 0,
        priority: Priority::Normal,
        reentrant: true,
        run: StepJob {
            step,
            log: log.clone(),
            pool: cell.clone(),
        },
    };
    let latch = Latch::default();
    assert_eq!(pool.submit(job(Step::Gate(latch.clone()))).admitted, 1);
    let mut rejected = 0;
    for id in 1..=6 {
        rejected += pool.submit(job(Step::Note(id))).rejected;
    }
    assert_eq!(rejected, 2, "4 wait behind the gate, 2 find the queue full");
    latch.open();
    pool.wait_idle();
    // `wait_idle` returns once the lane's bookkeeping is done, which is
    // before the last job's `then` (that order is the point): wait for it.
    let deadline = Instant::now() + HANG;
    while log.lock().unwrap().len() < 7 {
        assert!(
            Instant::now() < deadline,
            "a job was never handed on (hang)"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let log = log.lock().unwrap().clone();
    // Refused jobs were handed on at once, on the submitting thread.
    let dropped: Vec<usize> = log
        .iter()
        .filter(|(_, d, _)| *d == Dispatch::Dropped(DropReason::Rejected))
        .map(|(id, _, _)| *id)
        .collect();
    assert_eq!(dropped, [5, 6]);
    // The others ran once each, in order, on a worker, and each was handed
    // on only after the lane had counted it complete (its slot free).
    let ran: Vec<(usize, u64)> = log
        .iter()
        .filter(|(_, d, _)| matches!(d, Dispatch::Run { worker_id: Some(w) } if *w < 2))
        .map(|(id, _, completed)| (*id, *completed))
        .collect();
    assert_eq!(ran.iter().map(|r| r.0).collect::<Vec<_>>(), [0, 1, 2, 3, 4]);
    for (k, (_, completed)) in ran.iter().enumerate() {
        assert!(
            *completed > k as u64,
            "job {k} handed on before it was counted"
        );
    }
    assert_eq!(log.len(), 7);
    let s = pool.stats();
    assert_eq!((s.completed, s.rejected), (5, 2));
}
