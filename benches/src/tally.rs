//! Checksums that prove every task ran exactly once, without adding a shared
//! atomic to the hot path of the pool being measured.
//!
//! Each task calls `record(id)`: the count goes up by one and the id is added
//! (wrapping) to a sum. A workload knows the expected [`Tally`] (from a closed
//! form, or from the sequential run), so a lost task lowers the count and a
//! duplicate raises it.
//!
//! Where the tally lives depends on the pool:
//!
//! - Pools with per-worker scratch (the crossbeam design, magpie's `Executor`)
//!   keep a plain [`TallyScratch`] in the scratch. It is flushed into a shared
//!   [`TallySink`] when the worker drops its scratch at exit, which happens
//!   before `join` returns.
//! - Pools without scratch (rayon's scope, tokio) register one
//!   [`ThreadTallies`] cell per pool thread from the pool's thread-start hook.
//!   The owning thread updates its cell with plain loads and stores (it is the
//!   only writer), so recording costs a thread-local lookup and no
//!   read-modify-write.

use std::cell::RefCell;
use std::sync::{Arc, Mutex};

use magpie_core::sync::atomic::{AtomicU64, Ordering};
use magpie_core::CachePadded;

/// A count of tasks and a wrapping sum of their ids.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Tasks recorded.
    pub count: u64,
    /// Wrapping sum of the recorded ids.
    pub sum: u64,
}

impl Tally {
    /// Records one task with id `value`.
    #[inline]
    pub fn record(&mut self, value: u64) {
        self.count += 1;
        self.sum = self.sum.wrapping_add(value);
    }

    /// Adds another tally into this one.
    #[inline]
    pub fn merge(&mut self, other: Tally) {
        self.count += other.count;
        self.sum = self.sum.wrapping_add(other.sum);
    }

    /// What was recorded since `earlier` (a snapshot of the same counters).
    pub fn since(self, earlier: Tally) -> Tally {
        Tally {
            count: self.count - earlier.count,
            sum: self.sum.wrapping_sub(earlier.sum),
        }
    }

    /// The tally of ids `0..n`.
    pub fn of_range(n: u64) -> Tally {
        let sum = if n == 0 {
            0
        } else {
            // n(n-1)/2 without overflow for any n < 2^32; wrapping beyond.
            let (a, b) = if n % 2 == 0 {
                (n / 2, n - 1)
            } else {
                (n, (n - 1) / 2)
            };
            a.wrapping_mul(b)
        };
        Tally { count: n, sum }
    }
}

/// Where per-worker tallies end up.
#[derive(Debug, Default)]
pub struct TallySink {
    total: Mutex<Tally>,
}

impl TallySink {
    /// An empty sink.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Adds a worker's tally.
    pub fn add(&self, t: Tally) {
        self.total.lock().expect("tally sink poisoned").merge(t);
    }

    /// Everything flushed so far.
    pub fn total(&self) -> Tally {
        *self.total.lock().expect("tally sink poisoned")
    }
}

/// Per-worker scratch holding a plain tally; flushes into its sink on drop.
#[derive(Debug)]
pub struct TallyScratch {
    tally: Tally,
    sink: Arc<TallySink>,
}

impl TallyScratch {
    /// A zeroed tally that will flush into `sink`.
    pub fn new(sink: Arc<TallySink>) -> Self {
        Self {
            tally: Tally::default(),
            sink,
        }
    }

    /// Records one task.
    #[inline]
    pub fn record(&mut self, value: u64) {
        self.tally.record(value);
    }
}

impl Drop for TallyScratch {
    fn drop(&mut self) {
        self.sink.add(self.tally);
    }
}

/// One pool thread's counters. Only the owning thread writes them.
#[derive(Debug, Default)]
struct TallyCell {
    count: AtomicU64,
    sum: AtomicU64,
}

thread_local! {
    static CELL: RefCell<Option<Arc<CachePadded<TallyCell>>>> = const { RefCell::new(None) };
}

/// The tally cells of one pool's threads.
#[derive(Debug, Default)]
pub struct ThreadTallies {
    cells: Mutex<Vec<Arc<CachePadded<TallyCell>>>>,
}

impl ThreadTallies {
    /// An empty registry.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Gives the calling thread a cell in this registry. Call it from the
    /// pool's thread-start hook.
    pub fn register_current_thread(&self) {
        let cell = Arc::new(CachePadded::new(TallyCell::default()));
        self.cells
            .lock()
            .expect("tally registry poisoned")
            .push(cell.clone());
        CELL.with(|c| *c.borrow_mut() = Some(cell));
    }

    /// Sum over every registered thread. Exact once the pool is quiescent
    /// and its completion has been observed (see the callers).
    pub fn total(&self) -> Tally {
        let cells = self.cells.lock().expect("tally registry poisoned");
        let mut t = Tally::default();
        for cell in cells.iter() {
            // Acquire: pairs with the Release store of `count` in
            // `record_on_this_thread`, so the sum read next is at least as new
            // as the count.
            let count = cell.count.load(Ordering::Acquire);
            let sum = cell.sum.load(Ordering::Relaxed);
            t.merge(Tally { count, sum });
        }
        t
    }
}

/// Records one task in the calling thread's cell.
///
/// # Panics
/// If the thread was never registered: the task ran outside the pool.
#[inline]
pub fn record_on_this_thread(value: u64) {
    CELL.with(|c| {
        let c = c.borrow();
        let cell = c
            .as_ref()
            .expect("task recorded on a thread outside the measured pool");
        // Single writer: plain load + store, no read-modify-write.
        let sum = cell.sum.load(Ordering::Relaxed).wrapping_add(value);
        cell.sum.store(sum, Ordering::Relaxed);
        let count = cell.count.load(Ordering::Relaxed) + 1;
        // Release: pairs with the Acquire load in `ThreadTallies::total`.
        cell.count.store(count, Ordering::Release);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn of_range_matches_a_direct_sum() {
        for n in [0u64, 1, 2, 3, 10, 1023, 1_000_000] {
            let mut t = Tally::default();
            (0..n).for_each(|i| t.record(i));
            assert_eq!(Tally::of_range(n), t, "n = {n}");
        }
    }

    #[test]
    fn scratch_flushes_into_the_sink_when_dropped() {
        let sink = TallySink::new();
        let mut a = TallyScratch::new(sink.clone());
        let mut b = TallyScratch::new(sink.clone());
        a.record(5);
        b.record(7);
        b.record(1);
        assert_eq!(sink.total(), Tally::default());
        drop(a);
        drop(b);
        assert_eq!(sink.total(), Tally { count: 3, sum: 13 });
    }

    #[test]
    fn thread_tallies_sum_every_registered_thread() {
        let reg = ThreadTallies::new();
        let hs: Vec<_> = (0..3u64)
            .map(|k| {
                let reg = reg.clone();
                std::thread::spawn(move || {
                    reg.register_current_thread();
                    (0..100).for_each(|i| record_on_this_thread(k * 100 + i));
                })
            })
            .collect();
        hs.into_iter().for_each(|h| h.join().unwrap());
        assert_eq!(reg.total(), Tally::of_range(300));
    }

    #[test]
    #[should_panic(expected = "outside the measured pool")]
    fn recording_on_an_unregistered_thread_panics() {
        std::thread::spawn(|| record_on_this_thread(1))
            .join()
            .map_err(std::panic::resume_unwind)
            .unwrap();
    }
}
