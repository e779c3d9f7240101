//! What a threaded worker does when a step finds nothing: seed 000's tiers,
//! spin, then yield, then park with a timeout that backs off; and, for the
//! async and process runtimes, a spin that stops when it stops paying
//! (README.md, "Adaptive spinning").

use std::time::Duration;

use crate::config::MAX_PARK_TIMEOUT;

/// How many of a worker's last spinning idle spells [`SpinPolicy`]
/// remembers (one bit each).
pub(crate) const SPIN_HISTORY: u32 = 8;

/// A worker spins while at least this many of its last [`SPIN_HISTORY`]
/// spinning spells found work before the spin ran out (half of them:
/// a spin that finds nothing costs its whole budget, one that finds work
/// saves a park and an unpark).
pub(crate) const SPIN_MIN_HITS: u32 = 4;

/// While spinning is off, every `SPIN_PROBE_INTERVAL`-th idle spell spins
/// anyway, to notice that spinning pays again; a probe that finds work turns
/// it back on.
pub(crate) const SPIN_PROBE_INTERVAL: u32 = 32;

/// Every [`SPIN_HISTORY`] bit set: a fresh worker spins, as seed 000's
/// fixed tier does, until its own spells say otherwise.
const HISTORY_FULL: u32 = (1 << SPIN_HISTORY) - 1;

const _: () = assert!(SPIN_MIN_HITS >= 1 && SPIN_MIN_HITS <= SPIN_HISTORY);
const _: () = assert!(SPIN_HISTORY < 32);

/// Whether an idle spell spins, decided from what the last spinning spells
/// found (README.md, "Adaptive spinning"). Pure bookkeeping, no clock, so
/// that it is tested by feeding it outcomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SpinPolicy {
    /// Bit `i`: the `i`-th most recent spinning spell found work while it
    /// spun. Only the low [`SPIN_HISTORY`] bits are used.
    history: u32,
    /// Idle spells since spinning was turned off or last probed.
    since_probe: u32,
}

impl SpinPolicy {
    pub(crate) fn new() -> Self {
        Self {
            history: HISTORY_FULL,
            since_probe: 0,
        }
    }

    /// Whether spinning is on: enough of the remembered spins paid.
    pub(crate) fn spinning(&self) -> bool {
        self.history.count_ones() >= SPIN_MIN_HITS
    }

    /// An idle spell starts: does it spin? Yes while spinning is on; while
    /// it is off, on every [`SPIN_PROBE_INTERVAL`]-th spell (a probe).
    pub(crate) fn start_spell(&mut self) -> bool {
        if self.spinning() {
            self.since_probe = 0;
            return true;
        }
        self.since_probe += 1;
        if self.since_probe >= SPIN_PROBE_INTERVAL {
            self.since_probe = 0;
            return true;
        }
        false
    }

    /// A spinning spell ended: `hit` if it found work before its spin ran
    /// out. A hit while spinning is off (a probe's) turns spinning fully
    /// back on; otherwise the outcome joins the history.
    pub(crate) fn record(&mut self, hit: bool) {
        if hit && !self.spinning() {
            self.history = HISTORY_FULL;
            return;
        }
        self.history = ((self.history << 1) | u32::from(hit)) & HISTORY_FULL;
    }
}

/// What the threaded worker does when a step finds nothing (seed 000's tiers).
#[derive(Debug)]
pub(crate) struct TieredIdle {
    rounds: u32,
    spin_iters: u32,
    /// Spin rounds of the current spell: `spin_iters`, or 0 when the policy
    /// says this spell does not spin.
    spell_spin: u32,
    /// `Some` for the adaptive tier ([`TieredIdle::adaptive`]).
    policy: Option<SpinPolicy>,
    first_timeout: Duration,
    next_timeout: Duration,
    /// The last wake was a timeout, not a notification: nobody handed this
    /// worker work, so spinning for more is unlikely to pay (see
    /// [`set_quiet`](Self::set_quiet)).
    quiet: bool,
}

#[derive(Debug, PartialEq, Eq)]
pub(crate) enum IdleAction {
    /// Spin-loop hint, then step again.
    Spin,
    /// Give the core away once, then step again.
    Yield,
    /// Run the park sequence and sleep at most this long.
    Park(Duration),
}

impl TieredIdle {
    /// Seed 000's fixed tiers: every idle spell spins `spin_iters` rounds.
    pub(crate) fn new(spin_iters: u32, park_timeout: Duration) -> Self {
        Self {
            rounds: 0,
            spin_iters,
            spell_spin: spin_iters,
            policy: None,
            first_timeout: park_timeout,
            next_timeout: park_timeout,
            quiet: false,
        }
    }

    /// The same tiers with a [`SpinPolicy`]: a spell spins `spin_iters`
    /// rounds only while the worker's recent spins found work.
    pub(crate) fn adaptive(spin_iters: u32, park_timeout: Duration) -> Self {
        Self {
            policy: Some(SpinPolicy::new()),
            ..Self::new(spin_iters, park_timeout)
        }
    }

    /// Idle rounds of the current spell so far (0: none under way), for
    /// the I/O probe's `look_first` switch (`../io/probe.rs`).
    #[cfg(all(feature = "io-probe", not(loom)))]
    pub(crate) fn spell_rounds(&self) -> u32 {
        self.rounds
    }

    /// Work was found: start over at the spinning tier. If a spell was
    /// under way and still in its spin, the spin paid.
    #[inline]
    pub(crate) fn on_work(&mut self) {
        if self.rounds != 0 {
            self.end_spell();
        }
    }

    #[inline]
    fn end_spell(&mut self) {
        if let Some(policy) = &mut self.policy {
            // A spin that ran out was recorded as a miss by `next_action`.
            if self.spell_spin > 0 && self.rounds <= self.spell_spin {
                policy.record(true);
            }
        }
        self.rounds = 0;
        self.next_timeout = self.first_timeout;
    }

    /// Quiet: the worker's last wake was its own timeout and it found only
    /// the timers it fired then (the async runtime's timer-watcher waking
    /// at a deadline), so its next idle
    /// spells skip the spin and yield tiers (park at once) until a
    /// notification wakes it. A 1 ms interval alone then costs one park per
    /// tick instead of `spin_iters` rounds of searching plus a park: issue
    /// 13's idle-CPU measurement (`examples/idle_interval_cpu.rs`). Work
    /// handed over by other workers always comes with a notification, which
    /// brings the spinning back. Quiet spells are not recorded by the
    /// adaptive policy.
    pub(crate) fn set_quiet(&mut self, quiet: bool) {
        self.quiet = quiet;
    }

    /// Spin for the spell's rounds (`spin_iters`, or 0 when the adaptive
    /// policy says so); past that, yield every 16th round and park
    /// otherwise; while quiet, park at once. Each consecutive park doubles
    /// the timeout, up to `MAX_PARK_TIMEOUT`, so an idle executor all but
    /// stops waking.
    pub(crate) fn next_action(&mut self) -> IdleAction {
        if self.rounds == 0 {
            // A spell starts. A quiet one does not spin (nor does the rest
            // of it if a notification ends the quiet) and is not one of the
            // policy's spells.
            self.spell_spin = match &mut self.policy {
                None => self.spin_iters,
                Some(_) if self.quiet || self.spin_iters == 0 => 0,
                Some(policy) => {
                    if policy.start_spell() {
                        self.spin_iters
                    } else {
                        0
                    }
                }
            };
        }
        self.rounds = self.rounds.saturating_add(1);
        if !self.quiet {
            if self.rounds <= self.spell_spin {
                return IdleAction::Spin;
            }
            if self.rounds - self.spell_spin == 1 && self.spell_spin > 0 {
                // The spin ran out without finding work.
                if let Some(policy) = &mut self.policy {
                    policy.record(false);
                }
            }
            if (self.rounds - self.spell_spin) % 16 == 1 {
                return IdleAction::Yield;
            }
        }
        let timeout = self.next_timeout;
        self.next_timeout = (self.next_timeout * 2).min(MAX_PARK_TIMEOUT.max(self.first_timeout));
        IdleAction::Park(timeout)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn tiers_spin_then_yield_then_park_with_doubling_timeouts() {
        let mut idle = TieredIdle::new(3, Duration::from_millis(1));
        for _ in 0..3 {
            assert_eq!(idle.next_action(), IdleAction::Spin);
        }
        assert_eq!(idle.next_action(), IdleAction::Yield);
        assert_eq!(
            idle.next_action(),
            IdleAction::Park(Duration::from_millis(1))
        );
        assert_eq!(
            idle.next_action(),
            IdleAction::Park(Duration::from_millis(2))
        );
        assert_eq!(
            idle.next_action(),
            IdleAction::Park(Duration::from_millis(4))
        );
        for _ in 0..20 {
            if let IdleAction::Park(t) = idle.next_action() {
                assert!(t <= MAX_PARK_TIMEOUT);
            }
        }
        idle.on_work();
        assert_eq!(idle.next_action(), IdleAction::Spin);
    }

    #[test]
    fn a_quiet_worker_skips_the_spin_tier_until_notified() {
        let mut idle = TieredIdle::new(3, Duration::from_millis(1));
        idle.set_quiet(true);
        idle.on_work();
        assert_eq!(
            idle.next_action(),
            IdleAction::Park(Duration::from_millis(1))
        );
        idle.set_quiet(false);
        idle.on_work();
        for _ in 0..3 {
            assert_eq!(idle.next_action(), IdleAction::Spin);
        }
        assert_eq!(idle.next_action(), IdleAction::Yield);
    }

    const SPIN: u32 = 3;

    /// One idle spell of an adaptive tier: how many rounds it spun, with work
    /// found after `found_after` actions (`None`: the spell runs until it
    /// parks, then work comes).
    fn spell(idle: &mut TieredIdle, found_after: Option<u32>) -> u32 {
        let mut spun = 0;
        for n in 0.. {
            if found_after == Some(n) {
                break;
            }
            match idle.next_action() {
                IdleAction::Spin => spun += 1,
                IdleAction::Yield => {}
                IdleAction::Park(_) => break,
            }
            assert!(n < 1000, "a spell parks within a bounded number of rounds");
        }
        idle.on_work();
        spun
    }

    /// Misses needed to turn a fresh (all hits) history off.
    const MISSES_TO_STOP: u32 = SPIN_HISTORY - SPIN_MIN_HITS + 1;

    #[test]
    fn spinning_stops_after_spins_that_find_nothing() {
        let mut idle = TieredIdle::adaptive(SPIN, Duration::from_millis(1));
        for _ in 0..MISSES_TO_STOP {
            assert_eq!(spell(&mut idle, None), SPIN);
        }
        assert_eq!(spell(&mut idle, None), 0, "the spin stopped paying");
        // Off, the spell goes straight to the yield tier, then parks.
        assert_eq!(idle.next_action(), IdleAction::Yield);
        assert!(matches!(idle.next_action(), IdleAction::Park(_)));
    }

    #[test]
    fn spins_that_find_work_half_the_time_keep_spinning() {
        let mut idle = TieredIdle::adaptive(SPIN, Duration::from_millis(1));
        for i in 0..100 {
            let found = (i % 2 == 0).then_some(SPIN);
            assert_eq!(
                spell(&mut idle, found),
                SPIN,
                "spell {i}: half the spins pay"
            );
        }
    }

    #[test]
    fn spins_that_rarely_find_work_stop_spinning() {
        let mut idle = TieredIdle::adaptive(SPIN, Duration::from_millis(1));
        // One hit in four spins: under SPIN_MIN_HITS of SPIN_HISTORY.
        let mut spun_last = Vec::new();
        for i in 0..(4 * SPIN_HISTORY) {
            let found = (i % 4 == 0).then_some(1);
            spun_last.push(spell(&mut idle, found));
        }
        assert!(
            spun_last.iter().rev().take(8).all(|&s| s == 0),
            "spinning is off: {spun_last:?}"
        );
    }

    #[test]
    fn a_probe_spins_once_every_interval_while_spinning_is_off() {
        let mut idle = TieredIdle::adaptive(SPIN, Duration::from_millis(1));
        for _ in 0..MISSES_TO_STOP {
            spell(&mut idle, None);
        }
        let spins: Vec<u32> = (0..3 * SPIN_PROBE_INTERVAL)
            .map(|_| spell(&mut idle, None))
            .collect();
        let probes: Vec<usize> = (0..spins.len()).filter(|&i| spins[i] > 0).collect();
        let interval = SPIN_PROBE_INTERVAL as usize;
        assert_eq!(
            probes,
            vec![interval - 1, 2 * interval - 1, 3 * interval - 1],
            "probes spin exactly every SPIN_PROBE_INTERVAL spells"
        );
        assert!(probes.iter().all(|&i| spins[i] == SPIN));
    }

    #[test]
    fn a_probe_that_finds_work_turns_spinning_back_on() {
        let mut idle = TieredIdle::adaptive(SPIN, Duration::from_millis(1));
        for _ in 0..MISSES_TO_STOP {
            spell(&mut idle, None);
        }
        for _ in 0..SPIN_PROBE_INTERVAL - 1 {
            assert_eq!(spell(&mut idle, None), 0);
        }
        // The probe: work turns up on its second spin round.
        assert_eq!(spell(&mut idle, Some(2)), 2);
        // Back on with a full history: it takes MISSES_TO_STOP misses again.
        for _ in 0..MISSES_TO_STOP {
            assert_eq!(spell(&mut idle, None), SPIN);
        }
        assert_eq!(spell(&mut idle, None), 0);
    }

    #[test]
    fn work_found_on_the_yield_tier_is_a_miss() {
        let mut idle = TieredIdle::adaptive(SPIN, Duration::from_millis(1));
        for _ in 0..MISSES_TO_STOP {
            // SPIN spins, then the yield: work found there.
            assert_eq!(spell(&mut idle, Some(SPIN + 1)), SPIN);
        }
        assert_eq!(spell(&mut idle, None), 0);
    }

    #[test]
    fn quiet_spells_are_not_recorded() {
        let mut idle = TieredIdle::adaptive(SPIN, Duration::from_millis(1));
        idle.set_quiet(true);
        for _ in 0..10 * SPIN_HISTORY {
            assert_eq!(spell(&mut idle, None), 0);
            assert_eq!(spell(&mut idle, Some(0)), 0);
        }
        idle.set_quiet(false);
        assert_eq!(spell(&mut idle, None), SPIN, "still spinning");
    }

    #[test]
    fn the_fixed_tier_spins_every_spell() {
        let mut idle = TieredIdle::new(SPIN, Duration::from_millis(1));
        for _ in 0..4 * SPIN_HISTORY {
            assert_eq!(spell(&mut idle, None), SPIN);
        }
    }

    #[test]
    fn zero_spin_iters_never_spins_nor_probes() {
        let mut idle = TieredIdle::adaptive(0, Duration::from_millis(1));
        for _ in 0..3 * SPIN_PROBE_INTERVAL {
            assert_eq!(spell(&mut idle, None), 0);
        }
    }

    #[test]
    fn spin_policy_history_counts_only_the_last_spells() {
        let mut p = SpinPolicy::new();
        assert!(p.spinning());
        for _ in 0..SPIN_HISTORY {
            p.record(false);
        }
        assert!(!p.spinning());
        // Off: a hit (a probe's) refills the history.
        p.record(true);
        assert_eq!(p, SpinPolicy::new());
        // On: SPIN_MIN_HITS hits followed by misses stay on until the
        // hits slide out of the window.
        for _ in 0..SPIN_HISTORY - SPIN_MIN_HITS {
            p.record(false);
        }
        assert!(p.spinning());
        p.record(false);
        assert!(!p.spinning());
    }
}
