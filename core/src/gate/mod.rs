//! The executor gate word: an ACCEPTING bit and an in-flight count in one
//! `AtomicU64`.
//!
//! ```text
//!  63                                   1   0
//! +--------------------------------------+---+
//! |           in-flight count            | A |   A = ACCEPTING
//! +--------------------------------------+---+
//! ```
//!
//! Because the bit and the count share one word, "is the gate open?" and "count
//! me in" are one CAS, and "is the gate closed?" and "was that the last count?"
//! are one RMW: a spawn can never slip in after a close has seen the count at 0
//! (seed 000's TOCTOU), and the terminal transition (closed, count 0) is
//! observed by exactly one call over the gate's life.
//!
//! What the count counts is the runtime's choice. The runtime counts tasks that
//! sit in shared places (the inject queue) plus one activity token per awake
//! worker; local spawns and completions never touch the gate. `README.md`
//! beside this file gives the protocol and the argument, as numbered steps,
//! that termination then means no task is left anywhere; the loom models are in
//! `core/tests/loom_gate.rs`.

use core::fmt;

#[cfg(magpie_broken = "gate_split_flag")]
use crate::sync::atomic::AtomicBool;
#[cfg_attr(magpie_broken = "gate_split_flag", allow(unused_imports))]
use crate::sync::atomic::{fence, AtomicU64, Ordering};
use crate::CachePadded;

/// Bit 0: the gate accepts external spawns. Cleared once, by [`Gate::close`].
pub const ACCEPTING: u64 = 1;
/// Lowest bit of the in-flight count.
pub const COUNT_SHIFT: u32 = 1;
/// One count.
pub const COUNT_ONE: u64 = 1 << COUNT_SHIFT;
/// Largest in-flight count (2^63 - 1).
pub const COUNT_MAX: u64 = u64::MAX >> COUNT_SHIFT;

const _: () = assert!(ACCEPTING & !(COUNT_ONE - 1) == 0);
const _: () = assert!(COUNT_MAX << COUNT_SHIFT | ACCEPTING == u64::MAX);
// The terminal value is the all-zero word: closed, nothing in flight.
const TERMINAL: u64 = 0;

/// One value of the gate word.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Snapshot(u64);

impl Snapshot {
    /// The raw word.
    #[inline]
    pub const fn raw(self) -> u64 {
        self.0
    }

    /// [`ACCEPTING`] is set.
    #[inline]
    pub const fn is_accepting(self) -> bool {
        self.0 & ACCEPTING != 0
    }

    /// The in-flight count.
    #[inline]
    pub const fn in_flight(self) -> u64 {
        self.0 >> COUNT_SHIFT
    }

    /// Closed with nothing in flight: the end. No call can leave this value.
    #[inline]
    pub const fn is_terminated(self) -> bool {
        self.0 == TERMINAL
    }
}

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Snapshot")
            .field("accepting", &self.is_accepting())
            .field("in_flight", &self.in_flight())
            .finish()
    }
}

/// The gate. `Send + Sync`; every method is one RMW or a CAS loop on one word,
/// alone on its cache line (every spawner and every parking worker writes it).
pub struct Gate {
    state: CachePadded<AtomicU64>,
    /// broken: the accepting flag in its own atomic, as seed 000 warns against.
    #[cfg(magpie_broken = "gate_split_flag")]
    accepting: CachePadded<AtomicBool>,
}

// Shared by producers, workers and the joiner on any thread.
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Gate>();
};

impl Default for Gate {
    fn default() -> Self {
        Self::new()
    }
}

impl Gate {
    /// An open gate with nothing in flight.
    pub fn new() -> Self {
        Self {
            state: CachePadded::new(AtomicU64::new(ACCEPTING)),
            #[cfg(magpie_broken = "gate_split_flag")]
            accepting: CachePadded::new(AtomicBool::new(true)),
        }
    }

    /// The current value.
    #[inline]
    pub fn load(&self) -> Snapshot {
        // Acquire: pairs with the Release of `complete`, so a caller that sees
        // the terminal value also sees everything the released work did.
        Snapshot(self.state.load(Ordering::Acquire))
    }

    /// External spawn of `n` tasks (1, or a whole batch: all or nothing).
    /// Succeeds, adding `n` to the count, only while ACCEPTING; the check and
    /// the add are one CAS, so a concurrent [`Gate::close`] either comes first
    /// (this returns `false`) or sees the count including these `n`.
    ///
    /// # Panics
    /// If the count would exceed [`COUNT_MAX`].
    #[must_use]
    pub fn try_spawn(&self, n: u64) -> bool {
        #[cfg(magpie_broken = "gate_split_flag")]
        return self.try_spawn_split(n);
        #[cfg(magpie_broken = "try_spawn_not_atomic")]
        return self.try_spawn_load_store(n);
        #[cfg(not(any(
            magpie_broken = "gate_split_flag",
            magpie_broken = "try_spawn_not_atomic"
        )))]
        return self.add_while(n, |curr| curr.is_accepting());
    }

    /// Internal spawn by a thread that already holds a count (a worker holding
    /// its activity token moving tasks to the inject queue). The gate cannot
    /// be terminal while the caller's count is in it, so no check is needed:
    /// one `fetch_add`.
    pub fn spawn_internal(&self, n: u64) {
        // Relaxed: the count carries no data; the tasks travel through the
        // queue that the caller pushes them to, which has its own
        // synchronization.
        let prev = Snapshot(self.state.fetch_add(n << COUNT_SHIFT, Ordering::Relaxed));
        debug_assert!(
            prev.in_flight() > 0,
            "spawn_internal without holding a count"
        );
        debug_assert!(n <= COUNT_MAX - prev.in_flight(), "gate count overflow");
    }

    /// Release `n` counts. `true` exactly once over the gate's life: for the
    /// call that takes the count to 0 while the gate is closed (the terminal
    /// transition). The caller that gets `true` ends the executor.
    ///
    /// # Panics
    /// If `n` is 0 (such a call could report the end twice) or more than the
    /// count (a count released twice).
    #[must_use]
    pub fn complete(&self, n: u64) -> bool {
        assert!(n > 0, "Gate::complete(0)");
        #[cfg(magpie_broken = "gate_split_flag")]
        return self.complete_split(n);
        #[cfg(not(magpie_broken = "gate_split_flag"))]
        return self.complete_word(n);
    }

    #[cfg(not(magpie_broken = "gate_split_flag"))]
    #[inline]
    fn complete_word(&self, n: u64) -> bool {
        // Release: everything the caller did under the count (ran tasks,
        // pushed results) happens before the terminal observation, via the
        // Acquire fence below or the Acquire of `close` / `load`.
        let prev = Snapshot(self.state.fetch_sub(n << COUNT_SHIFT, Ordering::Release));
        assert!(prev.in_flight() >= n, "Gate::complete({n}) with {prev:?}");
        #[cfg(not(magpie_broken = "complete_ignores_accepting"))]
        let terminal = prev.in_flight() == n && !prev.is_accepting();
        // broken: "count reached 0" taken as the end, open or not.
        #[cfg(magpie_broken = "complete_ignores_accepting")]
        let terminal = prev.in_flight() == n;
        if terminal {
            // Acquire: pairs with the Release `complete` of every other count
            // (all RMWs, so all in this word's release sequence).
            fence(Ordering::Acquire);
        }
        terminal
    }

    /// Stop accepting external spawns. `true` if this call made the gate
    /// terminal (the count was already 0); otherwise the last `complete` will
    /// report it. A second `close` returns `false`.
    #[must_use]
    pub fn close(&self) -> bool {
        #[cfg(magpie_broken = "gate_split_flag")]
        return self.close_split();
        #[cfg(not(magpie_broken = "gate_split_flag"))]
        return self.close_word();
    }

    #[cfg(not(magpie_broken = "gate_split_flag"))]
    #[inline]
    fn close_word(&self) -> bool {
        // Acquire: pairs with the Release of every `complete`, for the case
        // where this call is the terminal observation.
        let prev = Snapshot(self.state.fetch_and(!ACCEPTING, Ordering::Acquire));
        // broken: the count is read in a second access, after the bit.
        #[cfg(magpie_broken = "close_split_read")]
        let prev = Snapshot(prev.0 & ACCEPTING | self.state.load(Ordering::Acquire) & !ACCEPTING);
        prev.is_accepting() && prev.in_flight() == 0
    }

    /// Take one count unless the gate is terminal. An idle worker calls this
    /// to take its activity token before it searches for work; `false` means
    /// the executor has ended and the worker exits. Unlike [`Gate::try_spawn`]
    /// it also succeeds on a closed gate with counts in flight, because
    /// draining needs awake workers; but it can never bring a terminal gate
    /// back, so the end is observed once.
    #[must_use]
    pub fn try_enter(&self) -> bool {
        #[cfg(magpie_broken = "gate_split_flag")]
        return self.try_enter_split();
        // broken: no terminal check, a terminated gate comes back to life.
        #[cfg(magpie_broken = "try_enter_no_terminal_check")]
        return self.try_enter_unchecked();
        // broken: the external-spawn rule, so a closed gate cannot drain.
        #[cfg(magpie_broken = "try_enter_requires_accepting")]
        return self.add_while(1, |curr| curr.is_accepting());
        #[cfg(not(any(
            magpie_broken = "gate_split_flag",
            magpie_broken = "try_enter_no_terminal_check",
            magpie_broken = "try_enter_requires_accepting"
        )))]
        return self.add_while(1, |curr| !curr.is_terminated());
    }

    /// The in-flight count (a statistic: it may change at once).
    #[inline]
    pub fn in_flight(&self) -> u64 {
        // Relaxed: a statistic, read by no protocol step.
        Snapshot(self.state.load(Ordering::Relaxed)).in_flight()
    }

    /// The gate still accepts external spawns (a hint: [`Gate::try_spawn`] is
    /// the only real check).
    #[inline]
    pub fn is_accepting(&self) -> bool {
        #[cfg(magpie_broken = "gate_split_flag")]
        return self.accepting.load(Ordering::Acquire);
        // Relaxed: a hint, read by no protocol step.
        #[cfg(not(magpie_broken = "gate_split_flag"))]
        return Snapshot(self.state.load(Ordering::Relaxed)).is_accepting();
    }

    /// Closed with nothing in flight. Once true, true forever.
    #[inline]
    pub fn is_terminated(&self) -> bool {
        #[cfg(magpie_broken = "gate_split_flag")]
        return !self.is_accepting() && self.in_flight() == 0;
        #[cfg(not(magpie_broken = "gate_split_flag"))]
        return self.load().is_terminated();
    }

    /// CAS loop: add `n` counts while `allowed(current)` holds.
    #[inline]
    #[cfg_attr(magpie_broken = "gate_split_flag", allow(dead_code))]
    fn add_while(&self, n: u64, allowed: impl Fn(Snapshot) -> bool) -> bool {
        // Relaxed everywhere: taking a count publishes nothing (the tasks go
        // through a queue with its own synchronization) and the decision
        // depends only on this word, which a CAS reads at its latest value.
        let mut curr = Snapshot(self.state.load(Ordering::Relaxed));
        loop {
            if !allowed(curr) {
                return false;
            }
            assert!(n <= COUNT_MAX - curr.in_flight(), "gate count overflow");
            let next = curr.0 + (n << COUNT_SHIFT);
            match self.state.compare_exchange_weak(
                curr.0,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(actual) => curr = Snapshot(actual),
            }
        }
    }
}

/// broken: `try_spawn` as a load, a check and a store.
#[cfg(magpie_broken = "try_spawn_not_atomic")]
impl Gate {
    fn try_spawn_load_store(&self, n: u64) -> bool {
        let curr = Snapshot(self.state.load(Ordering::Relaxed));
        if !curr.is_accepting() {
            return false;
        }
        self.state
            .store(curr.0 + (n << COUNT_SHIFT), Ordering::Relaxed);
        true
    }
}

/// broken: `try_enter` as a bare `fetch_add`.
#[cfg(magpie_broken = "try_enter_no_terminal_check")]
impl Gate {
    fn try_enter_unchecked(&self) -> bool {
        self.state.fetch_add(COUNT_ONE, Ordering::Relaxed);
        true
    }
}

/// broken: seed 000's naive design, an `AtomicBool` beside the count. The word
/// keeps only the count (its ACCEPTING bit stays set and is ignored).
#[cfg(magpie_broken = "gate_split_flag")]
impl Gate {
    fn count(&self) -> u64 {
        self.state.load(Ordering::Acquire) >> COUNT_SHIFT
    }

    fn try_spawn_split(&self, n: u64) -> bool {
        if !self.accepting.load(Ordering::Acquire) {
            return false;
        }
        self.state.fetch_add(n << COUNT_SHIFT, Ordering::AcqRel);
        true
    }

    fn complete_split(&self, n: u64) -> bool {
        let prev = self.state.fetch_sub(n << COUNT_SHIFT, Ordering::AcqRel) >> COUNT_SHIFT;
        prev == n && !self.accepting.load(Ordering::Acquire)
    }

    fn close_split(&self) -> bool {
        self.accepting.swap(false, Ordering::AcqRel) && self.count() == 0
    }

    fn try_enter_split(&self) -> bool {
        if !self.accepting.load(Ordering::Acquire) && self.count() == 0 {
            return false;
        }
        self.state.fetch_add(COUNT_ONE, Ordering::AcqRel);
        true
    }
}

impl fmt::Debug for Gate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Gate").field(&self.load()).finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
