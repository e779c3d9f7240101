//! [`ExecutorConfig`]: the knobs of the typed executor, with seed 000's defaults.

use std::time::Duration;

/// The seed every executor uses unless told otherwise (seed 000's constant).
pub const DEFAULT_SEED: u64 = 0x853c_49e6_748f_ea9b;

/// Configuration of an [`Executor`](crate::Executor).
///
/// | field | default | what it trades |
/// | --- | --- | --- |
/// | `workers` | available cores | parallelism against memory and wakeups |
/// | `seed` | [`DEFAULT_SEED`] | victim selection order (runs are reproducible per seed in the simulator) |
/// | `steal_tries` | 4 | steal attempts per search round: fan-out against idle CPU |
/// | `spin_iters` | 200 | idle rounds spent spinning before yielding and parking: latency against CPU |
/// | `park_timeout` | 200 µs | the first park's timeout; consecutive idle parks back off to [`MAX_PARK_TIMEOUT`] |
/// | `pin_threads` | `true` on Linux | cache locality against sharing cores with other processes |
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecutorConfig {
    /// Number of worker threads. At least 1.
    pub workers: usize,
    /// Seed for each worker's [`XorShift64`](magpie_core::rng::XorShift64) (worker `i`
    /// gets `seed` mixed with `i`).
    pub seed: u64,
    /// Steal attempts per search round.
    pub steal_tries: u32,
    /// Idle rounds spent spinning before a worker yields and parks.
    pub spin_iters: u32,
    /// Timeout of a worker's first park. Wakeups never depend on it (the idle
    /// protocol loses none); it bounds the damage of a bug and lets a worker
    /// notice a closed gate. Consecutive idle parks double it up to
    /// [`MAX_PARK_TIMEOUT`], so an idle executor costs almost no CPU.
    pub park_timeout: Duration,
    /// Pin worker `i` to core `i % cores` (Linux only; ignored elsewhere).
    pub pin_threads: bool,
}

/// The longest a parked worker sleeps before it looks around by itself.
pub const MAX_PARK_TIMEOUT: Duration = Duration::from_millis(100);

impl Default for ExecutorConfig {
    fn default() -> Self {
        Self {
            workers: magpie_core::affinity::available_cores(),
            seed: DEFAULT_SEED,
            steal_tries: 4,
            spin_iters: 200,
            park_timeout: Duration::from_micros(200),
            pin_threads: cfg!(target_os = "linux"),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_the_documented_table() {
        let cfg = ExecutorConfig::default();
        assert_eq!(cfg.workers, magpie_core::affinity::available_cores());
        assert!(cfg.workers >= 1);
        assert_eq!(cfg.seed, DEFAULT_SEED);
        assert_eq!(cfg.steal_tries, 4);
        assert_eq!(cfg.spin_iters, 200);
        assert_eq!(cfg.park_timeout, Duration::from_micros(200));
        assert_eq!(cfg.pin_threads, cfg!(target_os = "linux"));
    }
}
