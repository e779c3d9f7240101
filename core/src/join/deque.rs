//! A fixed-capacity Chase-Lev deque of [`JobRef`]s: the owner end of a join
//! worker's work (steps D1-D8 of `README.md` beside this file).
//!
//! The owner pushes and pops at the bottom with plain loads and stores and
//! one `SeqCst` fence per pop; only taking the *last* job is a
//! compare-and-swap, because a thief may be taking it at the same moment.
//! Thieves take the oldest job from the top with a compare-and-swap. The
//! orderings are those of Lê, Pop, Cohen and Zappa Nardelli, "Correct and
//! efficient work-stealing for weak memory models" (PPoPP 2013), figure 1,
//! without the resizing: the buffer has [`DEQUE_CAPACITY`] slots and a push
//! into a full deque hands the job back (the runtime runs it at once,
//! inline).
//!
//! A job reference is two words (data pointer, execute function). Each slot
//! holds them as two atomic words, so a thief that reads a slot while the
//! owner rewrites it (the race every Chase-Lev deque has, D7) reads defined
//! values; it uses them only if its compare-and-swap on `top` then
//! succeeds, which proves the slot was not rewritten in between.

use core::cell::Cell;
use core::fmt;
use core::ptr::NonNull;

use super::job::{ExecuteFn, JobRef};
use crate::sync::atomic::{fence, AtomicI64, AtomicPtr, Ordering};
use crate::sync::Arc;
use crate::CachePadded;

/// Slots in a deque: 1024 (16 under Miri, 2 under `cfg(loom)`, so a model
/// fills it and wraps around in a couple of pushes). One slot is one
/// nested `join` (or one scope spawn) not yet taken back; a recursion
/// deeper than this runs its extra jobs inline (D2). A power of two (slot
/// index = position & (capacity - 1)); pinned by
/// `deque_capacity_is_1024`.
#[cfg(not(any(loom, miri)))]
pub const DEQUE_CAPACITY: usize = 1024;

/// Slots in a deque: 1024 (16 under Miri, 2 under `cfg(loom)`); see the
/// non-loom definition.
#[cfg(all(miri, not(loom)))]
pub const DEQUE_CAPACITY: usize = 16;

/// Slots in a deque: 1024 (16 under Miri, 2 under `cfg(loom)`); see the
/// non-loom definition.
#[cfg(loom)]
pub const DEQUE_CAPACITY: usize = 2;

const _: () = assert!(DEQUE_CAPACITY.is_power_of_two());

const CAP: i64 = DEQUE_CAPACITY as i64;
const MASK: i64 = CAP - 1;

/// One job reference as two atomic words (D7).
struct Slot {
    data: AtomicPtr<()>,
    execute: AtomicPtr<()>,
}

struct Inner {
    /// The oldest job's position. Only grows, and only by a
    /// compare-and-swap (a thief's, or the owner's for the last job).
    top: CachePadded<AtomicI64>,
    /// One past the newest job's position. Only the owner writes it.
    bottom: CachePadded<AtomicI64>,
    slots: [Slot; DEQUE_CAPACITY],
}

/// Creates a deque: the owner's end and the thieves' end.
pub fn deque() -> (Local, Steal) {
    let inner = Arc::new(Inner {
        top: CachePadded::new(AtomicI64::new(0)),
        bottom: CachePadded::new(AtomicI64::new(0)),
        slots: core::array::from_fn(|_| Slot {
            data: AtomicPtr::new(core::ptr::null_mut()),
            execute: AtomicPtr::new(core::ptr::null_mut()),
        }),
    });
    (
        Local {
            inner: inner.clone(),
            bottom: Cell::new(0),
            top_bound: Cell::new(0),
        },
        Steal(inner),
    )
}

/// The owner's end: push and pop at the bottom. One thread only (`!Sync`,
/// not `Clone`); it may move to another thread (`Send`).
pub struct Local {
    inner: Arc<Inner>,
    /// `inner.bottom`'s value: only this handle writes it (D1).
    bottom: Cell<i64>,
    /// A value of `top` this handle loaded with Acquire (or wrote by its
    /// own compare-and-swap): `top` is at least this (D3).
    top_bound: Cell<i64>,
}

/// What a thief's [`Steal::steal`] got.
#[derive(Debug)]
pub enum Stolen {
    /// The oldest job, now this thief's to run.
    Job(JobRef),
    /// Nothing to take.
    Empty,
    /// Lost a race for the oldest job (to another thief or the owner);
    /// there may be more.
    Retry,
}

/// The thieves' end: take the oldest job from the top. Shared by every
/// other worker (`Send + Sync`).
pub struct Steal(Arc<Inner>);

impl Local {
    /// D1-D3: makes `job` the newest, visible to thieves. `Err` hands it
    /// back when [`DEQUE_CAPACITY`] jobs are in the deque (the caller runs
    /// it itself).
    #[inline]
    pub fn push(&self, job: JobRef) -> Result<(), JobRef> {
        let b = self.bottom.get();
        if b - self.top_bound.get() >= CAP {
            return self.push_slow(job);
        }
        self.write(b, job);
        Ok(())
    }

    /// D2: the bound says full; load `top` itself.
    #[cold]
    fn push_slow(&self, job: JobRef) -> Result<(), JobRef> {
        // Acquire: pairs with the compare-and-swap (its Release half) that
        // wrote this value of `top` (D6, D8): that thief read the slot we
        // are about to reuse before its swap, so the read happened-before
        // our write (D3).
        let t = self.inner.top.load(Ordering::Acquire);
        self.top_bound.set(t);
        #[cfg(not(magpie_broken = "deque_push_skips_full_check"))]
        if self.bottom.get() - t >= CAP {
            return Err(job);
        }
        self.write(self.bottom.get(), job);
        Ok(())
    }

    /// D1 and D3: the job's two words into slot `b`, then `bottom = b + 1`.
    #[inline(always)]
    fn write(&self, b: i64, job: JobRef) {
        let (data, execute) = job.into_raw();
        let slot = &self.inner.slots[(b & MASK) as usize];
        // Relaxed: published by the fence below.
        slot.data.store(data.as_ptr(), Ordering::Relaxed);
        slot.execute.store(execute as *mut (), Ordering::Relaxed);
        // Release: pairs with the Acquire load of `bottom` in `steal` (D6):
        // a thief that sees this `bottom` (or any later one) sees the slot's
        // words and everything written before the push: the job itself (its
        // closure, its latch). A fence, not a Release store: a thief may
        // read a later Relaxed store of `bottom` (a pop's restore, D5),
        // which the fence covers too.
        #[cfg(not(magpie_broken = "deque_push_relaxed"))]
        fence(Ordering::Release);
        self.inner.bottom.store(b + 1, Ordering::Relaxed);
        self.bottom.set(b + 1);
    }

    /// D4-D5: the newest job, unless the deque is empty or a thief took the
    /// last one first.
    #[inline]
    pub fn pop(&self) -> Option<JobRef> {
        let b = self.bottom.get();
        // D4: `top` never shrinks, so a bound at `bottom` means empty
        // without touching the shared line (a worker's loop asks this on
        // every turn).
        if b <= self.top_bound.get() {
            return None;
        }
        let b = b - 1;
        let inner = &*self.inner;
        // D4: claim position `b` first ...
        inner.bottom.store(b, Ordering::Relaxed);
        // SeqCst: pairs with the SeqCst fence in `steal` (D5, D6). Between
        // our store of `bottom` and our load of `top` (and a thief's load
        // of `top` and of `bottom`) this is Dekker's pattern: of the two
        // fences, one is first in the single total order, and the thread
        // whose fence is second sees the other's write. So either we see
        // the thief's raised `top` (and do not take its job), or it sees
        // our lowered `bottom` (and does not take ours); both may see
        // both, and then they race by compare-and-swap (D5). Without it, a
        // thief and the owner can both take the job at `b` (model
        // `pop_and_steal_never_take_one_job_twice`).
        #[cfg(not(magpie_broken = "deque_pop_no_fence"))]
        fence(Ordering::SeqCst);
        // ... then look at `top`. Acquire: pairs with the compare-and-swap
        // that wrote it (its Release half), so this value may serve as the
        // push's bound (D3) as well.
        let t = inner.top.load(Ordering::Acquire);
        self.top_bound.set(t);
        if t > b {
            // Empty (thieves took everything, `t == b + 1`): restore.
            inner.bottom.store(b + 1, Ordering::Relaxed);
            return None;
        }
        // SAFETY: position `b` holds a job this handle wrote (D1) and no
        // thief can take it: `t < b` here means thieves stop before it
        // (D5); `t == b` is decided by the compare-and-swap below.
        let job = unsafe { self.read(b) };
        if t < b {
            self.bottom.set(b);
            return Some(job);
        }
        // D5: the last job; a thief may be taking it. One swap wins.
        #[cfg(not(magpie_broken = "deque_pop_skips_last_cas"))]
        let won = inner
            .top
            // SeqCst: the same total order as the fences (Lê et al.); its
            // Release half pairs with the Acquire loads of `top` in
            // `steal` and `push_slow`.
            .compare_exchange(t, t + 1, Ordering::SeqCst, Ordering::Relaxed)
            .is_ok();
        #[cfg(magpie_broken = "deque_pop_skips_last_cas")]
        let won = {
            // Broken: takes the last job whatever a thief did (check, then
            // act: `top` is advanced by a store, not a swap).
            inner.top.store(t + 1, Ordering::SeqCst);
            true
        };
        // Empty either way: `top` is `b + 1` now.
        inner.bottom.store(b + 1, Ordering::Relaxed);
        self.top_bound.set(t + 1);
        won.then_some(job)
    }

    /// Reads slot `pos` as a job.
    ///
    /// # Safety
    ///
    /// Slot `pos` holds the two words of one `JobRef` written by `write`,
    /// and the caller owns that job (D5, D6).
    #[inline(always)]
    unsafe fn read(&self, pos: i64) -> JobRef {
        // SAFETY: forwarded.
        unsafe { read_slot(&self.inner, pos) }
    }

    /// `true` only if the deque is empty, from this handle's own state (no
    /// shared access); `false` may still be empty (thieves took the rest
    /// since the owner last looked at `top`). A push onto a surely empty
    /// deque is new work for idle workers.
    #[inline]
    pub fn surely_empty(&self) -> bool {
        self.bottom.get() <= self.top_bound.get()
    }

    /// Whether the deque holds no job (exact for the owner: only it adds).
    pub fn is_empty(&self) -> bool {
        // Relaxed: a count; the owner's own `bottom` and a `top` that only
        // grows can only make it err towards "empty" after a steal.
        self.bottom.get() <= self.inner.top.load(Ordering::Relaxed)
    }
}

/// Reads slot `pos` as a job.
///
/// # Safety
///
/// The slot's two words are those of one `JobRef` (`Local::write` stored
/// them) that the caller now owns: the owner for a position only it can
/// take (D5), a thief only once its compare-and-swap succeeded (D6, D7).
#[inline(always)]
unsafe fn read_slot(inner: &Inner, pos: i64) -> JobRef {
    let (data, execute) = read_words(inner, pos);
    // SAFETY: the caller's contract: these are one JobRef's words, so
    // `data` is its non-null data pointer and `execute` its function,
    // stored as a pointer by `write` (a function pointer round-trips
    // through `*mut ()` on every platform Rust supports).
    unsafe {
        let execute = core::mem::transmute::<*mut (), ExecuteFn>(execute);
        JobRef::from_raw(NonNull::new_unchecked(data), execute)
    }
}

/// The two words of slot `pos`, as they are now (they may be a torn pair
/// while the owner rewrites the slot; D7 says why that is never used).
#[inline(always)]
fn read_words(inner: &Inner, pos: i64) -> (*mut (), *mut ()) {
    let slot = &inner.slots[(pos & MASK) as usize];
    // Relaxed: ordered by the Acquire load of `bottom` (thief, D6) or by
    // program order (owner).
    (
        slot.data.load(Ordering::Relaxed),
        slot.execute.load(Ordering::Relaxed),
    )
}

impl Steal {
    /// D6-D8: takes the oldest job.
    pub fn steal(&self) -> Stolen {
        let inner = &*self.0;
        // Acquire: pairs with the compare-and-swap that wrote this `top`
        // (Lê et al. figure 1): we start after the take it completed.
        let t = inner.top.load(Ordering::Acquire);
        // SeqCst: pairs with the owner's fence in `pop` (D5); see there.
        #[cfg(not(magpie_broken = "deque_steal_no_fence"))]
        fence(Ordering::SeqCst);
        // Acquire: pairs with the Release fence of the push (D3) that wrote
        // the job at `t`: its words and the job's own contents.
        let b = inner.bottom.load(Ordering::Acquire);
        if t >= b {
            return Stolen::Empty;
        }
        // D7: read before the swap (after it, the owner may reuse the slot).
        let (data, execute) = read_words(inner, t);
        // SeqCst: the total order of Lê et al.; its Release half pairs with
        // the Acquire load of `top` in `push_slow` and `pop` (D3): our read
        // of the slot above happens-before the owner reuses it.
        match inner
            .top
            .compare_exchange(t, t + 1, Ordering::SeqCst, Ordering::Relaxed)
        {
            Ok(_) => {
                // SAFETY: D7: our swap from `t` succeeded, so no other
                // thread took position `t`, and the owner did not rewrite
                // its slot since we read it (a rewrite needs `top > t`
                // first, D3); the Acquire load of `bottom` made the words
                // the push wrote visible. The job is ours now.
                let execute = unsafe { core::mem::transmute::<*mut (), ExecuteFn>(execute) };
                // A slot that was never written reads null: only a push
                // that did not publish its words (D3) lets a thief see one.
                let data = NonNull::new(data)
                    .expect("deque: stole a slot the push had not published (D3)");
                // SAFETY: as above: the words of one pushed JobRef.
                Stolen::Job(unsafe { JobRef::from_raw(data, execute) })
            }
            Err(_) => Stolen::Retry,
        }
    }

    /// Whether the deque looks empty: a hint for a worker about to sleep.
    pub fn is_empty(&self) -> bool {
        // Relaxed: a hint (see the worker loop's last-searcher re-check);
        // the jobs themselves travel through `steal`'s orderings.
        let t = self.0.top.load(Ordering::Relaxed);
        let b = self.0.bottom.load(Ordering::Relaxed);
        t >= b
    }
}

impl fmt::Debug for Local {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("deque::Local")
            .field("bottom", &self.bottom.get())
            .field("top_bound", &self.top_bound.get())
            .finish()
    }
}

impl fmt::Debug for Steal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("deque::Steal")
            .field("top", &self.0.top.load(Ordering::Relaxed))
            .field("bottom", &self.0.bottom.load(Ordering::Relaxed))
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::join::{HeapJob, Wake};
    use crate::sync::atomic::AtomicUsize;

    #[test]
    fn deque_capacity_is_1024() {
        if !cfg!(miri) {
            assert_eq!(DEQUE_CAPACITY, 1024);
        }
    }

    fn counting_job(hits: &Arc<AtomicUsize>) -> JobRef {
        let hits = hits.clone();
        HeapJob::new(move || {
            hits.fetch_add(1, Ordering::Relaxed);
        })
        .into_job_ref()
    }

    #[test]
    fn owner_pops_newest_first_and_thief_takes_oldest() {
        let (local, steal) = deque();
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        for i in 0..4 {
            let order = order.clone();
            local
                .push(HeapJob::new(move || order.lock().unwrap().push(i)).into_job_ref())
                .unwrap();
        }
        match steal.steal() {
            Stolen::Job(j) => assert_eq!(j.execute(), Wake::Nobody),
            other => panic!("expected a job, got {other:?}"),
        }
        while let Some(j) = local.pop() {
            let _ = j.execute();
        }
        assert!(matches!(steal.steal(), Stolen::Empty));
        assert_eq!(*order.lock().unwrap(), vec![0, 3, 2, 1]);
    }

    #[test]
    fn push_into_a_full_deque_hands_the_job_back_and_wraps_after_a_steal() {
        let (local, steal) = deque();
        let hits = Arc::new(AtomicUsize::new(0));
        for _ in 0..DEQUE_CAPACITY {
            local.push(counting_job(&hits)).unwrap();
        }
        let back = local.push(counting_job(&hits)).expect_err("full");
        let _ = back.execute();
        // One steal frees the oldest slot; the next push reuses it.
        let Stolen::Job(j) = steal.steal() else {
            panic!("a full deque had nothing to steal")
        };
        let _ = j.execute();
        local.push(counting_job(&hits)).unwrap();
        let mut popped = 0;
        while let Some(j) = local.pop() {
            let _ = j.execute();
            popped += 1;
        }
        assert_eq!(popped, DEQUE_CAPACITY);
        assert!(local.is_empty() && steal.is_empty());
        assert_eq!(hits.load(Ordering::Relaxed), DEQUE_CAPACITY + 2);
    }
}
