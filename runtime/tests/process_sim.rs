//! The process simulator over many seeds (`magpie_runtime::process::sim`):
//! exactly-once, per-sender FIFO delivery, exactly-once yield completion,
//! no stranded process at quiescence, terminating shutdown, and replay.

use magpie_runtime::process::sim::{simulate_processes, ProcSimConfig};

/// 10^4 seeds in release builds; debug builds (plain `cargo test`) run
/// 2 000, which takes about as long.
const SEEDS: u64 = if cfg!(debug_assertions) {
    2_000
} else {
    10_000
};

#[test]
fn every_seed_delivers_once_in_order_completes_yields_once_and_terminates() {
    let mut totals = (0u64, 0u64, 0u64);
    for seed in 1..=SEEDS {
        let cfg = ProcSimConfig {
            seed,
            workers: 1 + (seed % 3) as usize,
            ..ProcSimConfig::default()
        };
        let r = simulate_processes(cfg);
        assert!(r.violations.is_empty(), "seed {seed}: {:?}", r.violations);
        assert_eq!(r.delivered, r.sent, "seed {seed}");
        assert_eq!(r.completions, r.yields, "seed {seed}");
        totals.0 += r.delivered;
        totals.1 += r.completions;
        totals.2 += r.steps;
    }
    // The workload did something on these seeds.
    assert!(totals.0 > SEEDS * 20, "messages delivered: {}", totals.0);
    assert!(totals.1 > SEEDS, "yields completed: {}", totals.1);
}

#[test]
fn same_seed_same_trace() {
    for seed in [1, 7, 42, 1234, 99_999] {
        let cfg = ProcSimConfig {
            seed,
            ..ProcSimConfig::default()
        };
        let a = simulate_processes(cfg.clone());
        let b = simulate_processes(cfg);
        assert_eq!(a.digest, b.digest, "seed {seed}");
        assert_eq!(a.moves, b.moves, "seed {seed}");
    }
    let a = simulate_processes(ProcSimConfig {
        seed: 3,
        ..ProcSimConfig::default()
    });
    let b = simulate_processes(ProcSimConfig {
        seed: 4,
        ..ProcSimConfig::default()
    });
    assert_ne!(a.digest, b.digest, "the digest ignores the schedule");
}

/// Small versions of the Savina workloads (`SimWorkload`): over many seeds
/// and 1-3 workers, every property holds, every message the pattern implies
/// is delivered (outside kick-offs plus the internal budget, all of it
/// spent), and the same seed gives the same trace.
#[test]
fn savina_shaped_workloads_deliver_every_message_and_replay_by_seed() {
    use magpie_runtime::process::sim::SimWorkload;
    let seeds: u64 = if cfg!(debug_assertions) { 300 } else { 2_000 };
    for workload in SimWorkload::ALL {
        for seed in 1..=seeds {
            let cfg = workload.small(seed, 1 + (seed % 3) as usize);
            let r = simulate_processes(cfg.clone());
            assert!(
                r.violations.is_empty(),
                "{workload:?} seed {seed}: {:?}",
                r.violations
            );
            assert_eq!(r.delivered, r.sent, "{workload:?} seed {seed}");
            if workload != SimWorkload::Mixed {
                let want = u64::from(cfg.external_messages + cfg.internal_messages);
                assert_eq!(
                    r.delivered, want,
                    "{workload:?} seed {seed}: every message of the pattern"
                );
            }
            if seed <= 20 {
                let again = simulate_processes(cfg);
                assert_eq!(again.digest, r.digest, "{workload:?} seed {seed}: replay");
            }
        }
        let a = simulate_processes(workload.small(1, 2));
        let b = simulate_processes(workload.small(2, 2));
        assert_ne!(
            a.digest, b.digest,
            "{workload:?}: seeds 1 and 2 schedule differently"
        );
    }
}

/// `Sleep` on simulated time (`SimWorkload::Sleeps`: sleeps of 0-4 ms mixed
/// with messages): over the seeds and 1-3 workers every sleep is completed
/// exactly once, never before its deadline, by the first timer pass at or
/// after it, one process's sleeps in deadline order; every message is
/// delivered once in per-sender order; the same seed gives the same trace.
#[test]
fn sleeps_complete_once_on_time_in_deadline_order_and_replay_by_seed() {
    use magpie_runtime::process::sim::SimWorkload;
    // 10^4 in release; debug builds (plain `cargo test`) run fewer, sized to
    // stay well under 2 s.
    let seeds: u64 = if cfg!(debug_assertions) { 400 } else { 10_000 };
    let (mut sleeps, mut timed, mut clock_ms, mut delivered) = (0u64, 0u64, 0u64, 0u64);
    for seed in 1..=seeds {
        let cfg = SimWorkload::Sleeps.small(seed, 1 + (seed % 3) as usize);
        let r = simulate_processes(cfg.clone());
        assert!(r.violations.is_empty(), "seed {seed}: {:?}", r.violations);
        assert_eq!(r.completions, r.yields, "seed {seed}: every yield once");
        assert_eq!(r.delivered, r.sent, "seed {seed}: every message once");
        let want = u64::from(cfg.external_messages + cfg.internal_messages);
        assert_eq!(
            r.delivered, want,
            "seed {seed}: every message of the pattern"
        );
        assert_eq!(r.sleeps, r.delivered, "seed {seed}: one sleep per message");
        sleeps += r.sleeps;
        timed += r.timed_sleeps;
        clock_ms += r.clock_ms;
        delivered += r.delivered;
        if seed % 20 == 0 {
            let again = simulate_processes(cfg);
            assert_eq!(again.digest, r.digest, "seed {seed}: replay");
            assert_eq!(again.moves, r.moves, "seed {seed}: replay");
        }
    }
    // The clock moved and most sleeps waited for it (4 in 5 are 1-4 ms).
    assert!(timed > sleeps / 2, "timed sleeps: {timed} of {sleeps}");
    assert!(clock_ms > seeds, "simulated ms: {clock_ms}");
    assert!(delivered > seeds * 20, "messages delivered: {delivered}");
    let a = simulate_processes(SimWorkload::Sleeps.small(1, 2));
    let b = simulate_processes(SimWorkload::Sleeps.small(2, 2));
    assert_ne!(a.digest, b.digest, "seeds 1 and 2 schedule differently");
}
