//! rayon's demo workloads, written once over a small [`ForkJoin`] trait and
//! run by every fork-join implementation: a sequential loop, `rayon::join`
//! in a 2-thread pool, and magpie's own `join` in a `JoinPool`.
//!
//! | workload | module | result check |
//! | --- | --- | --- |
//! | quicksort of 10^7 `u32` | [`sort`] | sorted, and the same multiset as the input ([`sort::Fingerprint`]) |
//! | mergesort of 10^7 `u32` | [`sort`] | the same |
//! | n-body, N bodies, a few steps | [`nbody`] | every body within [`nbody::TOLERANCE`] of the sequential run |
//! | fib(36), cutoffs 8 and 20 | [`fib`] | the value (and, as a spawn tree, the leaf count) |
//!
//! "Written once" means each workload is one generic function over
//! `F: ForkJoin`; the sequential version is that function with
//! [`Sequential`], whose `join` runs `a` then `b` on the caller's thread.
//! Below a workload's cutoff the recursion switches to [`Sequential`] too, so
//! every implementation runs the same leaves.
//!
//! Plugging in another fork-join implementation is one `impl ForkJoin`:
//! `install` enters the pool (runs the closure on a worker and blocks the
//! caller until it returns), `join` is called only inside `install`.

pub mod fib;
pub mod nbody;
pub mod sort;

use std::fmt;
use std::time::{Duration, Instant};

/// A fork-join implementation: run two closures, possibly in parallel, and
/// return both results. Panics in either closure reach the caller.
pub trait ForkJoin: Sync {
    /// Short name for reports.
    fn name(&self) -> &'static str;

    /// Runs `f` inside the implementation's pool and returns its result;
    /// `join` is only called from inside `f`.
    fn install<R, F>(&self, f: F) -> R
    where
        F: FnOnce() -> R + Send,
        R: Send;

    /// Runs `a` and `b`, possibly in parallel, and returns both results.
    fn join<A, B, RA, RB>(&self, a: A, b: B) -> (RA, RB)
    where
        A: FnOnce() -> RA + Send,
        B: FnOnce() -> RB + Send,
        RA: Send,
        RB: Send;
}

/// `a` then `b` on the calling thread: the sequential version of every
/// workload, and the leaves of every parallel one.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sequential;

impl ForkJoin for Sequential {
    fn name(&self) -> &'static str {
        "seq"
    }

    #[inline]
    fn install<R, F>(&self, f: F) -> R
    where
        F: FnOnce() -> R + Send,
        R: Send,
    {
        f()
    }

    #[inline]
    fn join<A, B, RA, RB>(&self, a: A, b: B) -> (RA, RB)
    where
        A: FnOnce() -> RA + Send,
        B: FnOnce() -> RB + Send,
        RA: Send,
        RB: Send,
    {
        (a(), b())
    }
}

/// `rayon::join` inside a `rayon::ThreadPool` of its own (built once,
/// reused across runs).
pub struct RayonJoin {
    pool: rayon::ThreadPool,
}

impl RayonJoin {
    /// A pool of `workers` threads.
    pub fn new(workers: usize) -> Self {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(workers)
            .thread_name(|i| format!("rayon-fj-{i}"))
            .build()
            .expect("failed to build the rayon pool");
        Self { pool }
    }
}

impl fmt::Debug for RayonJoin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RayonJoin")
            .field("threads", &self.pool.current_num_threads())
            .finish()
    }
}

impl ForkJoin for RayonJoin {
    fn name(&self) -> &'static str {
        "rayon_join"
    }

    fn install<R, F>(&self, f: F) -> R
    where
        F: FnOnce() -> R + Send,
        R: Send,
    {
        self.pool.install(f)
    }

    #[inline]
    fn join<A, B, RA, RB>(&self, a: A, b: B) -> (RA, RB)
    where
        A: FnOnce() -> RA + Send,
        B: FnOnce() -> RB + Send,
        RA: Send,
        RB: Send,
    {
        rayon::join(a, b)
    }
}

/// magpie's fork-join: `magpie_runtime::join::join` inside
/// `JoinPool::install`, on a `JoinPool` of its own (built once, reused
/// across runs). Inside the pool `join` is work-first on the worker loop;
/// `install` from outside injects the closure and blocks the caller.
pub struct MagpieJoin {
    pool: magpie_runtime::join::JoinPool,
}

impl MagpieJoin {
    /// A pool of `workers` threads.
    pub fn new(workers: usize) -> Self {
        let pool = magpie_runtime::join::JoinPool::builder()
            .workers(workers)
            .thread_name(|i| format!("magpie-fj-{i}"))
            .build()
            .expect("failed to build the magpie join pool");
        Self { pool }
    }
}

impl MagpieJoin {
    /// Stops the pool and returns what its workers counted (steals, parks,
    /// latch waits and sleeps; `JoinPool::shutdown`).
    pub fn shutdown(self) -> magpie_runtime::join::JoinPoolMetrics {
        self.pool.shutdown()
    }
}

/// One of the workloads by name, for probes that run one at a time:
/// `fib8`, `fib20` (fib(36) with that cutoff), `quicksort`, `mergesort`
/// (10^7 `u32`), `nbody` (4 000 bodies, 3 steps). Each run is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// fib([`fib::FIB_N`]) with [`fib::CUTOFF_FINE`].
    Fib8,
    /// fib([`fib::FIB_N`]) with [`fib::CUTOFF_COARSE`].
    Fib20,
    /// [`sort::quicksort`] of [`sort::SORT_LEN`] values.
    Quicksort,
    /// [`sort::mergesort`] of [`sort::SORT_LEN`] values.
    Mergesort,
    /// [`nbody::simulate`], [`nbody::NBODY_N`] bodies, [`nbody::NBODY_STEPS`] steps.
    Nbody,
}

impl Workload {
    /// Every workload, in report order.
    pub const ALL: [Workload; 5] = [
        Workload::Fib8,
        Workload::Fib20,
        Workload::Quicksort,
        Workload::Mergesort,
        Workload::Nbody,
    ];

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Fib8 => "fib8",
            Workload::Fib20 => "fib20",
            Workload::Quicksort => "quicksort",
            Workload::Mergesort => "mergesort",
            Workload::Nbody => "nbody",
        }
    }

    /// The workload named `name`, if any.
    pub fn from_name(name: &str) -> Option<Workload> {
        Workload::ALL.into_iter().find(|w| w.name() == name)
    }

    /// Makes the input of one run (outside the timed part).
    pub fn input(self) -> WorkloadInput {
        match self {
            Workload::Fib8 | Workload::Fib20 => WorkloadInput::None,
            Workload::Quicksort | Workload::Mergesort => {
                WorkloadInput::Sort(sort::random_input(sort::SORT_LEN, 17))
            }
            Workload::Nbody => WorkloadInput::Bodies(nbody::initial(nbody::NBODY_N, 17)),
        }
    }

    /// Runs the workload once on `fj` (inside `install`) from `input`,
    /// returns the time of the `install` call, and checks the result.
    pub fn run<F: ForkJoin>(self, fj: &F, input: WorkloadInput) -> Duration {
        let who = fj.name();
        match (self, input) {
            (Workload::Fib8 | Workload::Fib20, WorkloadInput::None) => {
                let cutoff = if self == Workload::Fib8 {
                    fib::CUTOFF_FINE
                } else {
                    fib::CUTOFF_COARSE
                };
                let (t, v) = time_install(fj, || fib::fib_join(fj, fib::FIB_N, cutoff));
                assert_eq!(v, fib::fib_closed(fib::FIB_N), "{who}: wrong fib");
                t
            }
            (Workload::Quicksort | Workload::Mergesort, WorkloadInput::Sort(mut v)) => {
                let want = sort::Fingerprint::of(&v);
                let (t, ()) = time_install(fj, || {
                    if self == Workload::Quicksort {
                        sort::quicksort(fj, &mut v)
                    } else {
                        sort::mergesort(fj, &mut v)
                    }
                });
                sort::check_sorted(&v, want, who);
                t
            }
            (Workload::Nbody, WorkloadInput::Bodies(b)) => {
                let want = nbody::reference(b.clone(), nbody::NBODY_STEPS);
                let (t, got) = time_install(fj, || nbody::simulate(fj, b, nbody::NBODY_STEPS));
                nbody::check_against(&got, &want, who);
                t
            }
            (w, _) => panic!("{}: input of another workload", w.name()),
        }
    }
}

/// The input of one [`Workload`] run.
#[derive(Debug)]
pub enum WorkloadInput {
    /// fib needs none.
    None,
    /// The values to sort.
    Sort(Vec<u32>),
    /// The bodies to simulate.
    Bodies(Vec<nbody::Body>),
}

impl fmt::Debug for MagpieJoin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MagpieJoin")
            .field("workers", &self.pool.workers())
            .finish()
    }
}

impl ForkJoin for MagpieJoin {
    fn name(&self) -> &'static str {
        "magpie_join"
    }

    fn install<R, F>(&self, f: F) -> R
    where
        F: FnOnce() -> R + Send,
        R: Send,
    {
        self.pool.install(f)
    }

    #[inline]
    fn join<A, B, RA, RB>(&self, a: A, b: B) -> (RA, RB)
    where
        A: FnOnce() -> RA + Send,
        B: FnOnce() -> RB + Send,
        RA: Send,
        RB: Send,
    {
        magpie_runtime::join::join(a, b)
    }
}

/// Times `f` inside `fj.install`: the clock starts before `install` (so the
/// trip into the pool and back is part of the time, as it is for a user) and
/// stops when it returns.
pub fn time_install<F: ForkJoin, R: Send>(fj: &F, f: impl FnOnce() -> R + Send) -> (Duration, R) {
    let t0 = Instant::now();
    let r = fj.install(f);
    (t0.elapsed(), r)
}

/// Round-trip latency of one `join` entered from outside the pool:
/// `install(|| join(|| 1, || 2))`, `samples` times; returns each sample's
/// time in nanoseconds, in the order taken.
pub fn outside_join_latencies<F: ForkJoin>(fj: &F, samples: usize) -> Vec<f64> {
    (0..samples)
        .map(|_| {
            let t0 = Instant::now();
            let (a, b) = fj.install(|| fj.join(|| std::hint::black_box(1u32), || 2u32));
            let ns = t0.elapsed().as_secs_f64() * 1e9;
            assert_eq!(
                (a, b),
                (1, 2),
                "{}: join returned the wrong pair",
                fj.name()
            );
            ns
        })
        .collect()
}

/// The `p`-quantile (0..=1) of `xs` by nearest rank; `None` when empty.
pub fn quantile(xs: &[f64], p: f64) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = (p * v.len() as f64).ceil().max(1.0) as usize;
    Some(v[rank.min(v.len()) - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_implementation_returns_both_results_in_order() {
        let rayon = RayonJoin::new(2);
        assert_eq!(
            rayon.install(|| rayon.join(|| "a", || 7u8)),
            ("a", 7),
            "rayon"
        );
        let magpie = MagpieJoin::new(2);
        assert_eq!(
            magpie.install(|| magpie.join(|| "a", || 7u8)),
            ("a", 7),
            "magpie"
        );
        assert_eq!(Sequential.install(|| Sequential.join(|| 1, || 2)), (1, 2));
    }

    #[test]
    fn outside_join_latency_gives_one_sample_per_call() {
        let rayon = RayonJoin::new(2);
        let magpie = MagpieJoin::new(2);
        for xs in [
            outside_join_latencies(&rayon, 50),
            outside_join_latencies(&magpie, 50),
        ] {
            assert_eq!(xs.len(), 50);
            assert!(xs.iter().all(|&x| x > 0.0));
        }
    }

    /// The workload benches/README.md's "Add your own workload" shows, word
    /// for word: it must keep compiling and agree with the plain sum.
    pub fn sum<F: ForkJoin>(fj: &F, v: &[u64]) -> u64 {
        if v.len() <= 4096 {
            return v.iter().sum();
        }
        let (a, b) = v.split_at(v.len() / 2);
        let (x, y) = fj.join(|| sum(fj, a), || sum(fj, b));
        x + y
    }

    #[test]
    fn the_readme_workload_sums_alike_on_every_implementation() {
        let data: Vec<u64> = (0..100_000).collect();
        let want: u64 = data.iter().sum();
        let rayon = RayonJoin::new(2);
        assert_eq!(
            time_install(&Sequential, || sum(&Sequential, &data)).1,
            want
        );
        assert_eq!(time_install(&rayon, || sum(&rayon, &data)).1, want);
        let magpie = MagpieJoin::new(2);
        assert_eq!(time_install(&magpie, || sum(&magpie, &data)).1, want);
    }

    #[test]
    fn quantile_is_nearest_rank() {
        let xs = [5.0, 1.0, 4.0, 2.0, 3.0];
        assert_eq!(quantile(&xs, 0.5), Some(3.0));
        assert_eq!(quantile(&xs, 0.99), Some(5.0));
        assert_eq!(quantile(&xs, 0.0), Some(1.0));
        assert_eq!(quantile(&[], 0.5), None);
    }

    #[test]
    #[should_panic(expected = "left boom")]
    fn a_panic_in_a_joined_closure_reaches_the_caller() {
        let rayon = RayonJoin::new(2);
        rayon.install(|| rayon.join(|| panic!("left boom"), || 1));
    }

    #[test]
    #[should_panic(expected = "right boom")]
    fn a_panic_in_a_joined_closure_reaches_the_caller_on_magpie() {
        let magpie = MagpieJoin::new(2);
        magpie.install(|| magpie.join(|| 1, || -> u8 { panic!("right boom") }));
    }
}
