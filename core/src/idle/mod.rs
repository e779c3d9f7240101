//! Idle state: how many workers search, how many sleep, and which.
//!
//! One packed word ([`Idle`]'s `state`) holds three counts — searching,
//! unparked, parked — so that every decision ("am I the last searcher?", "is
//! anybody searching, and is somebody asleep?") is a single read-modify-write
//! on it. A bitmap of `ceil(workers / 64)` words says *which* workers are
//! parked; a notifier wakes the lowest one by trailing zeros.
//!
//! The protocol — the worker's park sequence, the notifier's side, and why no
//! wakeup is lost — is written as numbered steps in `README.md` beside this
//! file. The step numbers in comments below refer to it.

use core::fmt;

use crate::sync::atomic::{AtomicU64, Ordering};
use crate::sync::thread;
use crate::CachePadded;

/// Bits per count in the state word.
const FIELD_BITS: u32 = 21;
/// Mask of one count.
const FIELD_MASK: u64 = (1 << FIELD_BITS) - 1;
/// Shift of the searching count (bits 0..21).
const SEARCHING_SHIFT: u32 = 0;
/// Shift of the unparked count (bits 21..42).
const UNPARKED_SHIFT: u32 = FIELD_BITS;
/// Shift of the parked count (bits 42..63).
const PARKED_SHIFT: u32 = 2 * FIELD_BITS;
/// One searcher, as an addend to the state word.
const SEARCHING_ONE: u64 = 1 << SEARCHING_SHIFT;
/// One unparked worker, as an addend.
const UNPARKED_ONE: u64 = 1 << UNPARKED_SHIFT;
/// One parked worker, as an addend.
const PARKED_ONE: u64 = 1 << PARKED_SHIFT;

/// The most workers an [`Idle`] can count: every count must fit its field.
pub const MAX_WORKERS: usize = FIELD_MASK as usize;

/// Workers per bitmap word.
const WORD_BITS: usize = 64;

// The three counts fit the word without overlapping.
const _: () = assert!(PARKED_SHIFT + FIELD_BITS <= 64);
const _: () = assert!(SEARCHING_ONE & UNPARKED_ONE == 0 && UNPARKED_ONE & PARKED_ONE == 0);
const _: () = assert!(MAX_WORKERS >= 1 << 20);

/// A copy of the state word, read with accessors.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Snapshot(u64);

impl Snapshot {
    fn new(searching: usize, unparked: usize, parked: usize) -> Self {
        Self(
            ((searching as u64) << SEARCHING_SHIFT)
                | ((unparked as u64) << UNPARKED_SHIFT)
                | ((parked as u64) << PARKED_SHIFT),
        )
    }

    /// Workers counted as searching, including a worker a notifier has just
    /// claimed and is waking (it wakes as a searcher).
    fn searching(self) -> usize {
        ((self.0 >> SEARCHING_SHIFT) & FIELD_MASK) as usize
    }

    /// Workers running: not counted as parked.
    fn unparked(self) -> usize {
        ((self.0 >> UNPARKED_SHIFT) & FIELD_MASK) as usize
    }

    /// Workers asleep (or about to be) that nobody has yet claimed to wake.
    fn parked(self) -> usize {
        ((self.0 >> PARKED_SHIFT) & FIELD_MASK) as usize
    }

    /// The notifier's claim (step N1): one parked worker becomes an unparked
    /// searcher. The caller has checked `parked() > 0`.
    fn claim_one(self) -> Self {
        Self(self.0 - PARKED_ONE + UNPARKED_ONE + SEARCHING_ONE)
    }
}

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Snapshot")
            .field("searching", &self.searching())
            .field("unparked", &self.unparked())
            .field("parked", &self.parked())
            .finish()
    }
}

/// Who is searching and who is parked, for `workers` workers numbered
/// `0..workers`. `Send + Sync`; shared by every worker and notifier.
pub struct Idle {
    /// The packed counts ([`Snapshot`]). Every worker and every notifier
    /// writes it, so it gets a cache line of its own.
    state: CachePadded<AtomicU64>,
    /// Bit `id % 64` of word `id / 64` is set while worker `id` is parked and
    /// unclaimed. Not padded word by word: a notifier scans the words in order,
    /// and up to 64 workers it is one word anyway.
    parked: Box<[AtomicU64]>,
    workers: usize,
}

/// The word and bit of worker `id`.
#[inline]
fn locate(id: usize) -> (usize, u64) {
    (id / WORD_BITS, 1 << (id % WORD_BITS))
}

impl Idle {
    /// Idle state for `workers` workers, all unparked and none searching.
    ///
    /// # Panics
    /// If `workers` is 0 or above [`MAX_WORKERS`].
    pub fn new(workers: usize) -> Self {
        assert!(
            (1..=MAX_WORKERS).contains(&workers),
            "Idle::new: workers must be in 1..={MAX_WORKERS}, got {workers}"
        );
        let parked = (0..workers.div_ceil(WORD_BITS))
            .map(|_| AtomicU64::new(0))
            .collect();
        Self {
            state: CachePadded::new(AtomicU64::new(Snapshot::new(0, workers, 0).0)),
            parked,
            workers,
        }
    }

    /// The number of workers.
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// The invariants every transition keeps (debug builds).
    #[inline]
    fn check(&self, s: Snapshot) {
        debug_assert_eq!(
            s.unparked(),
            self.workers - s.parked(),
            "unparked == workers - parked broke: {s:?}"
        );
        debug_assert!(
            s.searching() <= s.unparked(),
            "searching <= unparked broke: {s:?}"
        );
    }

    #[inline]
    fn word(&self, id: usize) -> (&AtomicU64, u64) {
        assert!(
            id < self.workers,
            "worker id {id} out of 0..{}",
            self.workers
        );
        let (w, mask) = locate(id);
        (&self.parked[w], mask)
    }

    /// Step W1: an idle, unparked worker that is not searching asks to search.
    /// Succeeds, counting the caller as a searcher, unless
    /// `2 * searching >= workers`. At most `ceil(workers / 2)` search at once.
    ///
    /// Decided by a read-modify-write, never a plain load: a refusal is a
    /// successful compare-exchange that writes back the same value.
    #[must_use]
    pub fn try_transition_to_searching(&self) -> bool {
        #[cfg(magpie_broken = "searcher_limit_by_load")]
        {
            // broken: check with a load, then add; two workers that load the
            // same count both get in.
            let s = Snapshot(self.state.load(Ordering::Acquire));
            if 2 * s.searching() >= self.workers {
                return false;
            }
            let prev = Snapshot(self.state.fetch_add(SEARCHING_ONE, Ordering::Acquire));
            self.check(Snapshot(prev.0 + SEARCHING_ONE));
            true
        }
        #[cfg(not(magpie_broken = "searcher_limit_by_load"))]
        {
            let mut cur = Snapshot(self.state.load(Ordering::Relaxed));
            loop {
                let allow = 2 * cur.searching() < self.workers;
                let next = if allow {
                    Snapshot(cur.0 + SEARCHING_ONE)
                } else {
                    cur
                };
                // Acquire: pairs with the Release CAS in `unpark_one`. A
                // notifier that pushed a task and then saw us not searching
                // woke nobody only if its CAS came first; then we see its task
                // when we search.
                match self.state.compare_exchange_weak(
                    cur.0,
                    next.0,
                    Ordering::Acquire,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        self.check(next);
                        return allow;
                    }
                    Err(actual) => cur = Snapshot(actual),
                }
            }
        }
    }

    /// Step W3: a searcher found work and stops searching. Returns true if it
    /// was the last searcher; the caller must then call [`Idle::unpark_one`]
    /// (and unpark the worker it names), so that one searcher stays awake
    /// while work may remain.
    #[must_use]
    pub fn transition_from_searching(&self) -> bool {
        // Acquire: pairs with the Release CAS in `unpark_one`. If a notifier
        // saw us searching and woke nobody, we see its task, and the worker
        // our own `unpark_one` wakes (a Release RMW after this) sees it too.
        let prev = Snapshot(self.state.fetch_sub(SEARCHING_ONE, Ordering::Acquire));
        debug_assert!(prev.searching() >= 1, "not searching: {prev:?}");
        self.check(Snapshot(prev.0 - SEARCHING_ONE));
        #[cfg(magpie_broken = "last_searcher_does_not_wake")]
        return false;
        #[cfg(not(magpie_broken = "last_searcher_does_not_wake"))]
        return prev.searching() == 1;
    }

    /// Steps P1–P2: worker `id` is about to sleep. Counts it parked (and drops
    /// its searcher count if `is_searching`), then sets its bit.
    ///
    /// Returns true if it was the last searcher. The caller must then check
    /// every queue once more before sleeping (step P3); if it finds work it
    /// calls [`Idle::unpark`] for itself instead of sleeping.
    ///
    /// # Panics
    /// If `id >= workers`.
    #[must_use]
    pub fn transition_to_parked(&self, id: usize, is_searching: bool) -> bool {
        let (word, mask) = self.word(id);
        let delta = PARKED_ONE
            .wrapping_sub(UNPARKED_ONE)
            .wrapping_sub(if is_searching { SEARCHING_ONE } else { 0 });
        // P1. Acquire: pairs with the Release CAS in `unpark_one` (and in
        // `unpark_all`). If a notifier's CAS came before this RMW, it saw us
        // still counted as searching (or running) and woke nobody; this
        // Acquire makes its task visible to the re-check of step P3.
        let prev = Snapshot(self.state.fetch_add(delta, Ordering::Acquire));
        debug_assert!(
            prev.unparked() >= 1 && prev.searching() >= usize::from(is_searching),
            "transition_to_parked({id}, {is_searching}) from {prev:?}"
        );
        self.check(Snapshot(prev.0.wrapping_add(delta)));
        // P2. Relaxed: the bit carries no data; a notifier that counted us in
        // P1 waits until it can see the bit, and every change to the word is
        // an RMW, so none is lost.
        let old = word.fetch_or(mask, Ordering::Relaxed);
        debug_assert_eq!(old & mask, 0, "worker {id} parked twice");
        is_searching && prev.searching() == 1
    }

    /// Steps N1–N3, the notifier's side, called after pushing work. If nobody
    /// is searching and somebody is parked — decided by a read-modify-write,
    /// never a load — claims the lowest parked worker: clears its bit, counts
    /// it unparked *and* searching, and returns its id. The caller then
    /// unparks that worker's parker. Returns `None` if somebody is searching
    /// (it will find the work) or nobody is parked.
    ///
    /// No parked worker is handed out twice, here or by [`Idle::unpark`] and
    /// [`Idle::unpark_all`]: a worker is handed out by whoever's `fetch_and`
    /// clears its bit.
    #[must_use]
    pub fn unpark_one(&self) -> Option<usize> {
        #[cfg(magpie_broken = "notify_by_load")]
        let mut cur = {
            // broken: decide "someone is searching / nobody is parked" from a
            // load, which may return a count older than a parking worker's P1.
            let s = Snapshot(self.state.load(Ordering::Acquire));
            if s.searching() != 0 || s.parked() == 0 {
                return None;
            }
            s
        };
        #[cfg(not(magpie_broken = "notify_by_load"))]
        let mut cur = Snapshot(self.state.load(Ordering::Relaxed));
        loop {
            let wake = cur.searching() == 0 && cur.parked() > 0;
            // N1. When nobody is to be woken the CAS writes back the value it
            // read: still a read-modify-write, so it reads the latest count.
            let next = if wake { cur.claim_one() } else { cur };
            // Release: pairs with the Acquire RMWs in `transition_to_parked`
            // (P1), `try_transition_to_searching` and
            // `transition_from_searching`: any of those that comes after this
            // CAS sees the work the caller pushed before calling us.
            match self.state.compare_exchange_weak(
                cur.0,
                next.0,
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    self.check(next);
                    if !wake {
                        return None;
                    }
                    break;
                }
                Err(actual) => {
                    cur = Snapshot(actual);
                    #[cfg(magpie_broken = "notify_by_load")]
                    if cur.searching() != 0 || cur.parked() == 0 {
                        return None;
                    }
                }
            }
        }
        // N2. We hold a claim on one parked worker: find a bit to clear.
        Some(self.take_any_bit())
    }

    /// Clears one set bit, the lowest this scan finds, and returns its worker.
    /// The caller holds a claim from the count, so a bit is there to take
    /// (README: "Counts and bits"); a scan can miss only while another claimer
    /// takes the bit first or the counted worker is between P1 and P2.
    fn take_any_bit(&self) -> usize {
        loop {
            for (w, word) in self.parked.iter().enumerate() {
                let mut bits = word.load(Ordering::Relaxed);
                while bits != 0 {
                    let bit = bits.trailing_zeros() as usize;
                    let mask = 1u64 << bit;
                    #[cfg(not(magpie_broken = "unpark_one_clear_by_store"))]
                    {
                        // Release: pairs with the Acquire load and fetch_and
                        // in `unpark`: a worker that finds its bit gone learns
                        // it was handed out as a searcher, and sees the work
                        // the notifier pushed.
                        let prev = word.fetch_and(!mask, Ordering::Release);
                        if prev & mask != 0 {
                            return w * WORD_BITS + bit;
                        }
                        // Someone took it first; `prev` is the freshest view.
                        bits = prev;
                    }
                    #[cfg(magpie_broken = "unpark_one_clear_by_store")]
                    {
                        // broken: clear with a load and a store; two
                        // claimers (or a claimer and the worker itself) can
                        // both see the bit and both take the worker.
                        let prev = word.load(Ordering::Relaxed);
                        if prev & mask != 0 {
                            word.store(prev & !mask, Ordering::Release);
                            return w * WORD_BITS + bit;
                        }
                        bits = prev;
                    }
                }
            }
            thread::yield_now();
        }
    }

    /// Step P5 / S1: worker `id` leaves the parked set on its own (its park
    /// timed out, it woke for no reason, or its step-P3 re-check found work),
    /// or shutdown wakes it by id.
    ///
    /// Returns true if its bit was set and this call cleared it and counted it
    /// unparked: the worker is running and *not* searching. Returns false if
    /// someone else already claimed it: [`Idle::unpark_one`] (the worker is
    /// counted as a searcher, and an unpark of its parker is on its way) or
    /// [`Idle::unpark_all`].
    ///
    /// # Panics
    /// If `id >= workers`.
    #[must_use]
    pub fn unpark(&self, id: usize) -> bool {
        let (word, mask) = self.word(id);
        // S1: claim one parked count for ourselves, as a notifier would.
        let mut cur = Snapshot(self.state.load(Ordering::Relaxed));
        loop {
            // Acquire: pairs with the Release fetch_and in `take_any_bit`. If
            // a notifier cleared our bit, we are its searcher and must see the
            // work it pushed.
            if word.load(Ordering::Acquire) & mask == 0 {
                return false;
            }
            if cur.parked() == 0 {
                // Every parked count is claimed, and our bit is still set:
                // some claimer will clear a bit (maybe ours) or give a claim
                // back (S3). Both are a few instructions away.
                thread::yield_now();
                cur = Snapshot(self.state.load(Ordering::Relaxed));
                continue;
            }
            let next = Snapshot(cur.0 - PARKED_ONE + UNPARKED_ONE);
            // Relaxed: this claim publishes nothing; the worker's next step is
            // an Acquire RMW of its own (`try_transition_to_searching`).
            match self.state.compare_exchange_weak(
                cur.0,
                next.0,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    self.check(next);
                    break;
                }
                Err(actual) => cur = Snapshot(actual),
            }
        }
        // S2. Acquire: as above, for the case where a notifier cleared the
        // bit between our check and this RMW.
        let prev = word.fetch_and(!mask, Ordering::Acquire);
        if prev & mask != 0 {
            return true;
        }
        // S3: a notifier took our bit after all; it counted us unparked and
        // searching with a claim of its own. Give ours back.
        let delta = PARKED_ONE.wrapping_sub(UNPARKED_ONE);
        let prev = Snapshot(self.state.fetch_add(delta, Ordering::Relaxed));
        self.check(Snapshot(prev.0.wrapping_add(delta)));
        false
    }

    /// Shutdown: claims every parked worker, clears its bit and counts it
    /// unparked (not searching). Returns the ids this call cleared, lowest
    /// first per scan; the caller unparks each one's parker.
    ///
    /// A worker whose P1 comes after this call sees what the caller wrote
    /// before it (a shutdown flag) and must not sleep; workers being claimed
    /// concurrently by [`Idle::unpark_one`] or [`Idle::unpark`] are woken by
    /// those callers and are not in the list.
    pub fn unpark_all(&self) -> Vec<usize> {
        let mut cur = Snapshot(self.state.load(Ordering::Relaxed));
        let claimed = loop {
            let n = cur.parked();
            let next = Snapshot(cur.0 - n as u64 * PARKED_ONE + n as u64 * UNPARKED_ONE);
            // Release: pairs with the Acquire fetch_add of P1 in
            // `transition_to_parked`: a worker that counts itself parked after
            // this sees the caller's shutdown flag in its own check.
            #[cfg(not(magpie_broken = "unpark_all_relaxed"))]
            const PUBLISH: Ordering = Ordering::Release;
            // broken: a worker parking after this may miss the shutdown flag.
            #[cfg(magpie_broken = "unpark_all_relaxed")]
            const PUBLISH: Ordering = Ordering::Relaxed;
            match self
                .state
                .compare_exchange_weak(cur.0, next.0, PUBLISH, Ordering::Relaxed)
            {
                Ok(_) => {
                    self.check(next);
                    break n;
                }
                Err(actual) => cur = Snapshot(actual),
            }
        };
        let mut ids: Vec<usize> = (0..claimed).map(|_| self.take_any_bit()).collect();
        ids.sort_unstable();
        ids
    }

    /// Whether worker `id`'s parked bit is set (a snapshot; may be stale).
    ///
    /// # Panics
    /// If `id >= workers`.
    pub fn is_parked(&self, id: usize) -> bool {
        let (word, mask) = self.word(id);
        word.load(Ordering::Relaxed) & mask != 0
    }

    /// Workers counted as searching (a snapshot).
    pub fn num_searching(&self) -> usize {
        Snapshot(self.state.load(Ordering::Relaxed)).searching()
    }

    /// Workers counted as parked and not yet claimed (a snapshot).
    pub fn num_parked(&self) -> usize {
        Snapshot(self.state.load(Ordering::Relaxed)).parked()
    }

    /// Whether [`Idle::unpark_one`] would wake somebody now, by a plain load:
    /// nobody searching and somebody parked. A snapshot that may be stale, so
    /// it is no substitute for `unpark_one` after making work visible (that
    /// needs the read-modify-write, step N1). It serves hints: a worker
    /// hoarding private work checks it before paying for the RMW.
    #[inline]
    pub fn would_unpark(&self) -> bool {
        let s = Snapshot(self.state.load(Ordering::Relaxed));
        s.searching() == 0 && s.parked() > 0
    }
}

impl fmt::Debug for Idle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = Snapshot(self.state.load(Ordering::Relaxed));
        f.debug_struct("Idle")
            .field("workers", &self.workers)
            .field("searching", &s.searching())
            .field("unparked", &s.unparked())
            .field("parked", &s.parked())
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
