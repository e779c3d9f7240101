//! Coalescing requests into runs of one job: any thread may ask for the job
//! to run; one thread at a time runs it, and a request that arrives while it
//! runs makes the runner go once more. No request is lost and no two runs
//! overlap (protocol in `README.md`, steps C1-C4).
//!
//! The runtime uses it for a paused clock's auto-advance: every worker that
//! goes idle asks "is everybody idle? then move the clock", and two workers
//! answering at once would each move the clock past timers the other had just
//! fired (`runtime/src/rt/park.rs`).
//!
//! ```
//! use magpie_core::coalesce::Coalesce;
//!
//! let c = Coalesce::new();
//! let mut runs = 0;
//! assert!(c.request(|| runs += 1));
//! assert_eq!(runs, 1);
//! ```

use crate::sync::atomic::{AtomicU8, Ordering};

/// Set while a thread runs the job (C2-C4).
const RUNNING: u8 = 1;
/// Set by a request the runner has not yet answered (C1).
const PENDING: u8 = 2;

/// One job, run by one thread at a time, once more for every request that
/// arrived during a run (several such requests share one more run).
#[derive(Debug, Default)]
pub struct Coalesce {
    state: AtomicU8,
}

impl Coalesce {
    /// Idle: nobody runs, nothing is asked.
    pub fn new() -> Self {
        Self {
            state: AtomicU8::new(0),
        }
    }

    /// Asks for `job` to run after everything this thread did before the call
    /// (its writes are visible to that run). Runs it here, as often as
    /// requests keep arriving, if no other thread is running it; returns
    /// `false` without running it if one is (that runner will run it once
    /// more, seeing this thread's writes).
    ///
    /// `job` must not call `request` on the same `Coalesce` (such a call
    /// returns `false` and makes the outer run go once more).
    pub fn request(&self, mut job: impl FnMut()) -> bool {
        // C1. AcqRel: the Release half publishes this thread's earlier writes
        // to the runner whose C2 or C4 RMW reads the bit (its Acquire); the
        // Acquire half orders nothing we rely on but keeps the RMW a plain
        // fetch_or on every platform.
        let prev = self.state.fetch_or(PENDING, Ordering::AcqRel);
        if prev & RUNNING != 0 {
            return false;
        }
        // C2. Claim: PENDING (ours or a later one) becomes RUNNING. Acquire:
        // pairs with every C1 whose bit this CAS consumes, and with the
        // Release of the previous runner's C4.
        let mut cur = prev | PENDING;
        loop {
            if cur & RUNNING != 0 || cur & PENDING == 0 {
                // Another thread claimed first; it runs after our C1 (its
                // claim read our bit or a later value), so it answers us.
                return false;
            }
            match self.state.compare_exchange_weak(
                cur,
                RUNNING,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(actual) => cur = actual,
            }
        }
        loop {
            // C3. Run: every request whose bit C2 or C4 consumed is answered
            // by this run.
            job();
            // C4. Release the claim unless a request came in meanwhile.
            // Release: pairs with the next claimer's C2 Acquire, so the next
            // run sees what this one did (the timers it fired, the tasks it
            // queued).
            #[cfg(magpie_broken = "coalesce_release_by_store")]
            {
                // broken: a plain store drops a PENDING set during the run;
                // its requester saw RUNNING and left, and nobody answers it.
                self.state.store(0, Ordering::Release);
                return true;
            }
            #[cfg(not(magpie_broken = "coalesce_release_by_store"))]
            match self
                .state
                .compare_exchange(RUNNING, 0, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(_) => {
                    // PENDING is set: consume it and run again. AcqRel: the
                    // Acquire pairs with the C1 that set it.
                    let prev = self.state.swap(RUNNING, Ordering::AcqRel);
                    debug_assert_eq!(prev, RUNNING | PENDING);
                }
            }
        }
    }

    /// Whether a thread is running the job now (a snapshot).
    pub fn is_running(&self) -> bool {
        self.state.load(Ordering::Relaxed) & RUNNING != 0
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::Coalesce;
    use crate::sync::atomic::{AtomicUsize, Ordering};
    use crate::sync::{Arc, Mutex};

    #[test]
    fn a_lone_request_runs_the_job_once() {
        let c = Coalesce::new();
        let mut runs = 0;
        assert!(c.request(|| runs += 1));
        assert_eq!(runs, 1);
        assert!(!c.is_running());
    }

    #[test]
    fn a_request_from_inside_the_job_makes_one_more_run() {
        let c = Coalesce::new();
        let mut runs = 0;
        let inner_ran = std::cell::Cell::new(None);
        assert!(c.request(|| {
            runs += 1;
            if runs == 1 {
                inner_ran.set(Some(c.request(|| unreachable!("nested run"))));
            }
        }));
        assert_eq!(inner_ran.get(), Some(false));
        assert_eq!(runs, 2, "the nested request was answered by a second run");
    }

    #[test]
    fn concurrent_requests_never_overlap_and_the_last_is_answered() {
        let c = Arc::new(Coalesce::new());
        let inside = Arc::new(AtomicUsize::new(0));
        let asked = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(Mutex::new(0));
        let rounds = if cfg!(miri) { 50 } else { 20_000 };
        std::thread::scope(|s| {
            for _ in 0..2 {
                let (c, inside, asked, seen) = (&c, &inside, &asked, &seen);
                s.spawn(move || {
                    for _ in 0..rounds {
                        asked.fetch_add(1, Ordering::Relaxed);
                        c.request(|| {
                            assert_eq!(inside.fetch_add(1, Ordering::Relaxed), 0, "overlap");
                            let now = asked.load(Ordering::Relaxed);
                            let mut seen = seen.lock().unwrap();
                            *seen = (*seen).max(now);
                            inside.fetch_sub(1, Ordering::Relaxed);
                        });
                    }
                });
            }
        });
        assert_eq!(*seen.lock().unwrap(), 2 * rounds);
    }
}
