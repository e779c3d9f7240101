//! fixed_rate lanes: simulated ticks (reproducible, no sleeping), the
//! overrun policies shared with `time::Interval`, independent cadences, and
//! the wall-clock sleep's prompt stop. No wall-clock assertion.
#![cfg(not(loom))]

mod lanes_util;

use std::sync::mpsc;
use std::time::Duration;

use lanes_util::*;
use magpie_runtime::lanes::{
    self, Component, ComponentError, Execution, FixedRateSpec, GraphBuilder, GraphContext,
    Invocation, LaneSpec, RunOptions, StopReason, StopToken,
};
use magpie_runtime::time::OverrunPolicy;

const MS: Duration = Duration::from_millis(1);

/// Costs `normal` each tick, except `stall` at tick `stall_at`.
struct Ticker {
    log: Log,
    normal: Duration,
    stall_at: u64,
    stall: Duration,
}

impl Component for Ticker {
    fn execute(&mut self, inv: &Invocation, ctx: &mut GraphContext) -> Result<(), ComponentError> {
        let tick = inv.tick().expect("a fixed-rate invocation has a tick");
        self.log
            .lock()
            .unwrap()
            .push((inv.name().to_string(), tick, inv.index()));
        ctx.simulate_work(if tick == self.stall_at {
            self.stall
        } else {
            self.normal
        });
        Ok(())
    }
}

fn lane(name: &str, period: Duration, policy: OverrunPolicy, ticks: u64) -> LaneSpec {
    LaneSpec::fixed_rate(
        name,
        FixedRateSpec {
            overrun_policy: policy,
            max_ticks: Some(ticks),
            ..FixedRateSpec::every(period)
        },
    )
}

fn ticker_graph(lanes_: Vec<LaneSpec>, stall_at: u64, stall: Duration) -> (lanes::Graph, Log) {
    let log = log();
    let mut g = GraphBuilder::new();
    for l in lanes_ {
        let name = l.name.clone();
        g.lane(l).unwrap();
        let lg = log.clone();
        g.component(
            &format!("on_{name}"),
            &name,
            Execution::default(),
            move || Ticker {
                log: lg.clone(),
                normal: MS,
                stall_at,
                stall,
            },
        )
        .unwrap();
    }
    (g.build().unwrap(), log)
}

fn run(g: lanes::Graph) -> lanes::RunResult {
    let rt = runtime(1);
    lanes::run(g, &rt, RunOptions::default())
}

/// (tick number, scheduled ns, lateness ns) of every released tick.
fn releases(r: &lanes::RunResult) -> Vec<(u64, u64, u64)> {
    r.trace
        .named("fixed_rate_tick_begin")
        .map(|e| {
            (
                e.u64_arg("tick").unwrap(),
                e.u64_arg("scheduled_ns").unwrap(),
                e.u64_arg("lateness_ns").unwrap(),
            )
        })
        .collect()
}

#[test]
fn simulated_ticks_are_bounded_on_the_grid_and_never_sleep() {
    let (g, log) = ticker_graph(vec![lane("c", 10 * MS, OverrunPolicy::DropTick, 50)], 0, MS);
    let started = std::time::Instant::now();
    let r = run(g);
    // 50 ticks of a 10 ms lane: simulated, so no 0.5 s of sleeping happened
    // (a hang detector, generous by two orders of magnitude, not a timing).
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_eq!(r.stop_reason, StopReason::Completed);
    assert_eq!(r.metrics.tick_count, 50);
    assert_eq!(log.lock().unwrap().len(), 50);
    let rel = releases(&r);
    for (k, &(tick, scheduled, lateness)) in rel.iter().enumerate() {
        assert_eq!(tick, k as u64 + 1);
        assert_eq!(scheduled, k as u64 * 10_000_000, "on the grid");
        assert_eq!(lateness, 0);
    }
    assert_eq!(r.metrics.max_lateness_ms, 0.0);
    assert_eq!(r.metrics.tick_jitter_ms, 0.0);
    assert_eq!(r.metrics.tick_overrun_count, 0);
    // Virtual idle time between ticks: 49 gaps of 9 ms.
    assert_eq!(r.metrics.blocked_duration_ms, 49.0 * 9.0);
}

#[test]
fn after_a_stall_of_ten_periods_catch_up_once_fires_exactly_one_extra_tick_and_drop_tick_none() {
    // Tick 3 (scheduled at 20 ms) takes 100 ms: ten periods.
    let mut at_stall_end = Vec::new();
    for policy in [
        OverrunPolicy::DropTick,
        OverrunPolicy::CatchUpOnce,
        OverrunPolicy::SkipNext,
    ] {
        let (g, _) = ticker_graph(vec![lane("c", 10 * MS, policy, 8)], 3, 100 * MS);
        let r = run(g);
        let rel = releases(&r);
        // The stall ends at 120 ms. Ticks released before the next grid
        // instant (130 ms), each tick costing 1 ms:
        let at_end: Vec<_> = rel
            .iter()
            .filter(|(_, s, l)| (120_000_000..130_000_000).contains(&(s + l)))
            .map(|&(_, s, _)| s / 1_000_000)
            .collect();
        // Every tick after that is back on the 10 ms grid, on time.
        let after: Vec<_> = rel
            .iter()
            .filter(|(_, s, l)| s + l >= 130_000_000)
            .map(|&(_, s, l)| (s / 1_000_000, l))
            .collect();
        assert!(
            after.iter().all(|&(s, l)| s % 10 == 0 && l == 0),
            "{policy:?}: {after:?}"
        );
        assert_eq!(
            r.metrics.tick_overrun_count, 1,
            "the stalled tick overran its budget"
        );
        assert_eq!(
            r.metrics.late_tick_count, 1,
            "one tick released a period or more late"
        );
        assert_eq!(r.metrics.max_lateness_ms, 90.0);
        at_stall_end.push((
            policy,
            at_end,
            after.first().map(|a| a.0),
            r.metrics.skipped_tick_count,
        ));
    }
    assert_eq!(
        at_stall_end,
        [
            // The late tick (30 ms) is delivered; 40..=120 are dropped; next 130.
            (OverrunPolicy::DropTick, vec![30], Some(130), 9),
            // Plus exactly one catch-up tick on the grid (120), then 130.
            (OverrunPolicy::CatchUpOnce, vec![30, 120], Some(130), 8),
            // And skip_next gives a whole period more: next 140.
            (OverrunPolicy::SkipNext, vec![30], Some(140), 10),
        ]
    );
}

#[test]
fn fixed_rate_overrun_policy_matches_time_interval_plan() {
    // The lane's arithmetic is `OverrunPolicy::plan`, the same function
    // `time::Interval` uses: one table for both.
    let p = 10 * MS;
    for policy in [
        OverrunPolicy::DropTick,
        OverrunPolicy::SkipNext,
        OverrunPolicy::CatchUpOnce,
    ] {
        let plan = policy.plan(90 * MS, p);
        let (g, _) = ticker_graph(vec![lane("c", p, policy, 5)], 3, 100 * MS);
        let r = run(g);
        let rel = releases(&r);
        let late = rel.iter().position(|&(_, _, l)| l == 90_000_000).unwrap();
        let (_, s, _) = rel[late];
        let (_, next, _) = rel[late + 1];
        assert_eq!(next, s + plan.steps * 10_000_000, "{policy:?}");
    }
}

#[test]
fn tick_budget_overrides_overrun_accounting_without_changing_the_cadence() {
    // Every tick costs 1 ms; a 0.5 ms budget makes each one an overrun, but
    // the grid stays at 10 ms.
    let mut spec = FixedRateSpec::every(10 * MS);
    spec.tick_budget = Some(MS / 2);
    spec.max_ticks = Some(6);
    let (g, _) = ticker_graph(vec![LaneSpec::fixed_rate("c", spec)], 0, MS);
    let r = run(g);
    assert_eq!(r.metrics.tick_overrun_count, 6);
    assert_eq!(r.trace.named("fixed_rate_overrun").count(), 6);
    let scheduled: Vec<u64> = releases(&r).iter().map(|r| r.1 / 1_000_000).collect();
    assert_eq!(scheduled, [0, 10, 20, 30, 40, 50]);
}

#[test]
fn independent_fixed_rate_lanes_each_keep_their_own_cadence() {
    let (g, log) = ticker_graph(
        vec![
            lane("fast", 10 * MS, OverrunPolicy::DropTick, 10),
            lane("slow", 25 * MS, OverrunPolicy::DropTick, 4),
        ],
        0,
        Duration::ZERO,
    );
    let r = run(g);
    let fast = &r.lane_metrics["fast"];
    let slow = &r.lane_metrics["slow"];
    assert_eq!((fast.tick_count, slow.tick_count), (10, 4));
    let on = |lane: &str| -> Vec<u64> {
        r.trace
            .named("fixed_rate_tick_begin")
            .filter(|e| r.trace.str_arg(e, "lane") == Some(lane))
            .map(|e| e.u64_arg("scheduled_ns").unwrap() / 1_000_000)
            .collect()
    };
    assert_eq!(on("fast"), [0, 10, 20, 30, 40, 50, 60, 70, 80, 90]);
    assert_eq!(on("slow"), [0, 25, 50, 75]);
    assert_eq!(fast.max_lateness_ms + slow.max_lateness_ms, 0.0);
    // A component runs only in epochs where its own lane ticks.
    let log = log.lock().unwrap();
    assert_eq!(log.iter().filter(|(n, _, _)| n == "on_fast").count(), 10);
    assert_eq!(log.iter().filter(|(n, _, _)| n == "on_slow").count(), 4);
    assert_eq!(r.epochs, 12, "0 and 50 ms are shared ticks: 10 + 4 - 2");
}

#[test]
fn hz_derives_the_period_when_period_ms_is_absent() {
    let text = "[lanes.c]\ntype = \"fixed_rate\"\nhz = 200\nmax_ticks = 3\n\n\
                [[components]]\nname = \"t\"\nkind = \"t\"\nlane = \"c\"\n";
    let log = log();
    let mut reg = lanes::Registry::new();
    let l = log.clone();
    reg.register("t", move || Ticker {
        log: l.clone(),
        normal: Duration::ZERO,
        stall_at: 0,
        stall: Duration::ZERO,
    });
    let g = lanes::load_toml(text, &reg).unwrap();
    let r = run(g);
    let scheduled: Vec<u64> = releases(&r).iter().map(|r| r.1).collect();
    assert_eq!(scheduled, [0, 5_000_000, 10_000_000]);
}

fn replay_graph() -> (lanes::Graph, Log) {
    ticker_graph(
        vec![
            lane("a", 10 * MS, OverrunPolicy::CatchUpOnce, 20),
            lane("b", 4 * MS, OverrunPolicy::SkipNext, 30),
        ],
        5,
        37 * MS,
    )
}

#[test]
fn simulated_fixed_rate_runs_replay_exactly() {
    let (g1, log1) = replay_graph();
    let (g2, log2) = replay_graph();
    let (r1, r2) = (run(g1), run(g2));
    assert_eq!(*log1.lock().unwrap(), *log2.lock().unwrap(), "same output");
    // Same trace, timestamps included (virtual time).
    assert_eq!(r1.trace, r2.trace);
    assert_eq!(r1.metrics, r2.metrics);
    assert!(
        r1.metrics.skipped_tick_count > 0,
        "the replay covers overruns"
    );
}

#[test]
fn a_wall_clock_sleep_wakes_promptly_on_stop() {
    // An hour-long period: only a prompt wake on stop lets this finish.
    let stop = StopToken::new();
    let (tx, rx) = mpsc::channel();
    let s = stop.clone();
    let handle = std::thread::spawn(move || {
        let rt = runtime(1);
        let spec = FixedRateSpec {
            wall_clock: true,
            ..FixedRateSpec::every(Duration::from_secs(3600))
        };
        let (g, log) = ticker_graph(vec![LaneSpec::fixed_rate("c", spec)], 0, MS);
        let r = lanes::run(
            g,
            &rt,
            RunOptions {
                stop: s,
                ..RunOptions::default()
            },
        );
        tx.send((
            r.stop_reason,
            r.metrics.tick_count,
            log.lock().unwrap().len(),
        ))
        .unwrap();
    });
    // Let the first tick run, then stop while it sleeps for the second.
    std::thread::sleep(Duration::from_millis(50));
    stop.request();
    let got = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the run did not stop (hang)");
    handle.join().unwrap();
    assert_eq!(got, (StopReason::StopRequested, 1, 1));
}

#[test]
fn wall_clock_ticks_run_on_the_runtime_timer_and_count() {
    // 5 ticks of 2 ms in real time: only counts are asserted.
    let rt = runtime(1);
    let spec = FixedRateSpec {
        wall_clock: true,
        max_ticks: Some(5),
        ..FixedRateSpec::every(2 * MS)
    };
    let (g, log) = ticker_graph(vec![LaneSpec::fixed_rate("c", spec)], 0, Duration::ZERO);
    let r = lanes::run(g, &rt, RunOptions::default());
    assert_eq!(r.stop_reason, StopReason::Completed);
    assert_eq!(r.metrics.tick_count, 5);
    assert_eq!(log.lock().unwrap().len(), 5);
    assert!(
        r.metrics.blocked_duration_ms > 0.0,
        "it slept between ticks"
    );
}

/// Records what `Invocation::release_lateness` said at each tick; stalls
/// 25 ms (2.5 periods) at tick 2.
struct LatenessProbe(std::sync::Arc<std::sync::Mutex<Vec<(u64, Duration)>>>);

impl Component for LatenessProbe {
    fn execute(&mut self, inv: &Invocation, ctx: &mut GraphContext) -> Result<(), ComponentError> {
        let tick = inv.tick().unwrap();
        let late = inv.release_lateness().expect("a fixed-rate invocation");
        self.0.lock().unwrap().push((tick, late));
        ctx.simulate_work(if tick == 2 { 25 * MS } else { MS });
        Ok(())
    }
}

#[test]
fn an_invocation_sees_the_release_lateness_of_its_tick() {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut g = GraphBuilder::new();
    g.lane(lane("c", 10 * MS, OverrunPolicy::CatchUpOnce, 6))
        .unwrap();
    let s = seen.clone();
    g.component("probe", "c", Execution::default(), move || {
        LatenessProbe(s.clone())
    })
    .unwrap();
    let r = run(g.build().unwrap());
    let seen: Vec<(u64, u64)> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|&(t, l)| (t, l.as_nanos() as u64))
        .collect();
    let traced: Vec<(u64, u64)> = releases(&r).iter().map(|&(t, _, l)| (t, l)).collect();
    assert_eq!(seen, traced);
    assert_eq!(seen.len(), 6);
    assert!(
        seen.iter().any(|&(_, l)| l > 0),
        "the stall made a tick late"
    );
}
