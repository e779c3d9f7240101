//! What a threaded worker does when a step finds nothing: seed 000's tiers,
//! spin, then yield, then park with a timeout that backs off.

use std::time::Duration;

use crate::config::MAX_PARK_TIMEOUT;

/// What the threaded worker does when a step finds nothing (seed 000's tiers).
#[derive(Debug)]
pub(crate) struct TieredIdle {
    rounds: u32,
    spin_iters: u32,
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
    pub(crate) fn new(spin_iters: u32, park_timeout: Duration) -> Self {
        Self {
            rounds: 0,
            spin_iters,
            first_timeout: park_timeout,
            next_timeout: park_timeout,
            quiet: false,
        }
    }

    /// Work was found: start over at the spinning tier.
    #[inline]
    pub(crate) fn on_work(&mut self) {
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
    /// brings the spinning back.
    pub(crate) fn set_quiet(&mut self, quiet: bool) {
        self.quiet = quiet;
    }

    /// Spin for `spin_iters` rounds; past that, yield every 16th round and
    /// park otherwise; while quiet, park at once. Each consecutive park
    /// doubles the timeout, up to `MAX_PARK_TIMEOUT`, so an idle executor all
    /// but stops waking.
    pub(crate) fn next_action(&mut self) -> IdleAction {
        self.rounds = self.rounds.saturating_add(1);
        if !self.quiet {
            if self.rounds <= self.spin_iters {
                return IdleAction::Spin;
            }
            if (self.rounds - self.spin_iters) % 16 == 1 {
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
}
