//! Latches: one-shot "the other half is done" signals.
//!
//! - [`CoreLatch`]: for an owner that is a pool worker. The owner keeps
//!   working while it waits and may go to sleep on its own parker; the state
//!   word says whether it sleeps, so the setter knows whether to wake it
//!   (README.md, L1-L5).
//! - [`LockLatch`]: for a caller outside the pool, which blocks on a condvar
//!   (README.md, B1-B3).
//! - [`CrossLatch`]: a [`CoreLatch`] whose owner is a worker of *another*
//!   pool (an `install` from a worker of pool A into pool B): the owner keeps
//!   working in A while it waits, and the setter, a worker of B, wakes it
//!   through A's unparker itself (README.md, X1-X3).
//!
//! A latch lives inside a job on its owner's stack (or inside a scope). The
//! set is the last thing the setting thread does with that memory: the owner
//! may return and free it the moment it sees the latch set. That is why
//! [`Latch::set`] takes a raw pointer, not `&self` (a reference argument
//! promises the memory stays valid for the whole call).

use core::fmt;

use crate::park::Unparker;
use crate::sync::atomic::{AtomicU8, Ordering};
use crate::sync::{Arc, Condvar, Mutex};

/// The state word of a [`CoreLatch`], bits 0..2.
///
/// ```text
///   7           2   1   0
/// +---------------+-------+
/// |  reserved (0) | state |   state = UNSET (0) | SLEEPING (1) | SET (2)
/// +---------------+-------+
/// ```
pub const STATE_MASK: u8 = 0b11;
/// Not set; the owner is awake (working or spinning).
pub const UNSET: u8 = 0;
/// Not set; the owner is asleep (or about to be) on its parker and must be
/// woken by whoever sets the latch.
pub const SLEEPING: u8 = 1;
/// Set. Terminal: nothing changes the word afterwards.
pub const SET: u8 = 2;

const _: () = assert!(UNSET & !STATE_MASK == 0);
const _: () = assert!(SLEEPING & !STATE_MASK == 0);
const _: () = assert!(SET & !STATE_MASK == 0);
const _: () = assert!(UNSET != SLEEPING && SLEEPING != SET && SET != UNSET);

/// One value of a [`CoreLatch`]'s word.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Snapshot(u8);

impl Snapshot {
    /// The raw word.
    #[inline]
    pub const fn raw(self) -> u8 {
        self.0
    }

    /// The latch is [`SET`].
    #[inline]
    pub const fn is_set(self) -> bool {
        self.0 & STATE_MASK == SET
    }

    /// The owner is [`SLEEPING`] (or committed to).
    #[inline]
    pub const fn is_sleeping(self) -> bool {
        self.0 & STATE_MASK == SLEEPING
    }
}

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self.0 & STATE_MASK {
            UNSET => "UNSET",
            SLEEPING => "SLEEPING",
            SET => "SET",
            _ => "?",
        };
        f.write_str(s)
    }
}

/// What the thread that set a latch must do next.
#[must_use = "a sleeping owner is woken only if the setter unparks it"]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// Nothing: the owner was awake (or blocks on a condvar that the set
    /// already notified).
    Nobody,
    /// The owner, worker `usize` of the pool the job ran in, is asleep on its
    /// parker: unpark it (README.md, L4).
    Worker(usize),
}

/// Result of [`CoreLatch::fall_asleep`].
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FallAsleep {
    /// UNSET -> SLEEPING: park now; the setter will unpark.
    Asleep,
    /// The latch was set first: do not park.
    Set,
}

/// Result of [`CoreLatch::wake_up`].
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WakeUp {
    /// SLEEPING -> UNSET: woken early (timeout or a stray unpark); keep waiting.
    Unset,
    /// The latch is set.
    Set,
}

mod sealed {
    pub trait Sealed {}
}

/// A one-shot signal a job sets after writing its result.
pub trait Latch: sealed::Sealed + Sync {
    /// Sets the latch and says whom to wake.
    ///
    /// # Safety
    ///
    /// `this` points to a live latch, and the caller does not touch the memory
    /// around it afterwards: an owner that sees the latch set may free it.
    #[doc(hidden)]
    unsafe fn set(this: *const Self) -> Wake;

    /// Whether the latch is set. `true` makes every write the setter did
    /// before [`Latch::set`] visible.
    fn probe(&self) -> bool;
}

/// A latch for a worker that waits by working and sleeps on its own parker.
pub struct CoreLatch {
    state: AtomicU8,
    /// The owner's worker index, read by the setter before its swap.
    owner: usize,
}

impl CoreLatch {
    /// An unset latch owned by worker `owner`.
    pub fn new(owner: usize) -> Self {
        CoreLatch {
            state: AtomicU8::new(UNSET),
            owner,
        }
    }

    /// The owner's worker index.
    pub fn owner(&self) -> usize {
        self.owner
    }

    /// The current word (Relaxed; for tests and debugging).
    pub fn snapshot(&self) -> Snapshot {
        Snapshot(self.state.load(Ordering::Relaxed))
    }

    /// L2: the owner commits to sleeping, UNSET -> SLEEPING, in one CAS.
    /// Called by the owner only, right before it parks.
    pub fn fall_asleep(&self) -> FallAsleep {
        #[cfg(not(magpie_broken = "latch_sleep_overwrites_set"))]
        {
            // Relaxed: the CAS and the setter's swap are ordered by the word's
            // modification order alone; the owner reads no data on this path
            // (it probes with Acquire before touching the result).
            match self
                .state
                .compare_exchange(UNSET, SLEEPING, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => FallAsleep::Asleep,
                Err(_) => FallAsleep::Set,
            }
        }
        #[cfg(magpie_broken = "latch_sleep_overwrites_set")]
        {
            // Broken: a check then a store, not one CAS. A set between the two
            // is overwritten and its setter saw an awake owner: lost wakeup.
            if self.state.load(Ordering::Relaxed) == SET {
                return FallAsleep::Set;
            }
            self.state.store(SLEEPING, Ordering::Relaxed);
            FallAsleep::Asleep
        }
    }

    /// L5: the owner woke; SLEEPING -> UNSET unless the latch was set.
    pub fn wake_up(&self) -> WakeUp {
        // Relaxed: as in `fall_asleep`; the caller probes before reading data.
        match self
            .state
            .compare_exchange(SLEEPING, UNSET, Ordering::Relaxed, Ordering::Relaxed)
        {
            Ok(_) => WakeUp::Unset,
            Err(_) => WakeUp::Set,
        }
    }
}

impl sealed::Sealed for CoreLatch {}

impl Latch for CoreLatch {
    /// L3-L4: one swap to SET; if it replaced SLEEPING the owner is parked
    /// (or about to park) and the caller must unpark it.
    unsafe fn set(this: *const Self) -> Wake {
        // SAFETY: the caller guarantees `this` is live until the swap below;
        // the owner index is read first, because after the swap the owner may
        // free the latch.
        let (owner, state) = unsafe { ((*this).owner, &(*this).state as *const AtomicU8) };
        #[cfg(not(magpie_broken = "latch_set_relaxed"))]
        // Release: pairs with the Acquire load in `probe`, so the owner that
        // sees SET sees the job's result (and every write of the job).
        // SAFETY: still live; this swap is the last access (see above).
        let old = unsafe { (*state).swap(SET, Ordering::Release) };
        #[cfg(magpie_broken = "latch_set_relaxed")]
        // Broken: nothing orders the result write before the owner's read.
        // SAFETY: as above.
        let old = unsafe { (*state).swap(SET, Ordering::Relaxed) };
        debug_assert_ne!(old, SET, "a latch was set twice");
        if old == SLEEPING {
            Wake::Worker(owner)
        } else {
            Wake::Nobody
        }
    }

    #[inline]
    fn probe(&self) -> bool {
        // Acquire: pairs with the Release swap in `set`.
        self.state.load(Ordering::Acquire) == SET
    }
}

impl fmt::Debug for CoreLatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CoreLatch")
            .field("state", &self.snapshot())
            .field("owner", &self.owner)
            .finish()
    }
}

/// A latch for a thread outside the pool: it blocks on a condvar.
///
/// The flag and the condvar live in their own allocation, shared by the
/// setter: unlocking a mutex still uses the mutex after the waiter can see
/// the flag (Miri reports exactly that when the mutex lives in the owner's
/// frame), so the setter holds its own reference until it is done (B2).
#[derive(Debug, Default)]
pub struct LockLatch {
    inner: Arc<LockInner>,
}

#[derive(Debug, Default)]
struct LockInner {
    set: Mutex<bool>,
    cond: Condvar,
}

impl LockLatch {
    /// An unset latch.
    pub fn new() -> Self {
        LockLatch {
            inner: Arc::new(LockInner {
                set: Mutex::new(false),
                cond: Condvar::new(),
            }),
        }
    }

    /// B3: blocks until the latch is set.
    pub fn wait(&self) {
        let inner = &*self.inner;
        let mut set = inner.set.lock().unwrap_or_else(|e| e.into_inner());
        while !*set {
            set = inner.cond.wait(set).unwrap_or_else(|e| e.into_inner());
        }
    }
}

impl sealed::Sealed for LockLatch {}

impl Latch for LockLatch {
    /// B2: take a reference of our own to the flag and condvar (while the
    /// latch is surely live), then flag and notify under the lock.
    unsafe fn set(this: *const Self) -> Wake {
        // SAFETY: the caller guarantees `this` is live here; the waiter
        // cannot leave `wait` before the flag is set below.
        let inner = unsafe { (*this).inner.clone() };
        let mut set = inner.set.lock().unwrap_or_else(|e| e.into_inner());
        *set = true;
        // Broken: the waiter, already blocked on the condvar, is never told.
        #[cfg(not(magpie_broken = "lock_latch_skips_notify"))]
        inner.cond.notify_all();
        drop(set);
        Wake::Nobody
    }

    fn probe(&self) -> bool {
        *self.inner.set.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A [`CoreLatch`] for an owner that is a worker of another pool than the
/// one that runs the job (X1-X3 in README.md).
///
/// The pool that runs the job acts on a [`Wake::Worker`] by unparking *its
/// own* worker with that index, which is the wrong thread here. So the set
/// wakes the owner itself, through the owner's [`Unparker`], and always
/// returns [`Wake::Nobody`].
pub struct CrossLatch {
    latch: CoreLatch,
    owner: Unparker,
}

impl CrossLatch {
    /// An unset latch owned by worker `owner` of a pool, woken through
    /// `unparker` (that worker's).
    pub fn new(owner: usize, unparker: Unparker) -> Self {
        CrossLatch {
            latch: CoreLatch::new(owner),
            owner: unparker,
        }
    }

    /// The state word the owner waits on (L2, L5 as for any `CoreLatch`).
    pub fn core(&self) -> &CoreLatch {
        &self.latch
    }
}

impl sealed::Sealed for CrossLatch {}

impl Latch for CrossLatch {
    /// X2: clone the owner's unparker while the latch is surely live, then
    /// the `CoreLatch` swap (L3), then, if the owner slept, unpark it through
    /// the clone (the latch may be freed by then).
    unsafe fn set(this: *const Self) -> Wake {
        // SAFETY: the caller guarantees `this` is live here; the owner cannot
        // leave its wait before the swap below.
        let owner = unsafe { (*this).owner.clone() };
        // SAFETY: live until this call's swap, which is its last access.
        let wake = unsafe { CoreLatch::set(core::ptr::addr_of!((*this).latch)) };
        #[cfg(not(magpie_broken = "cross_latch_returns_wake"))]
        {
            if let Wake::Worker(_) = wake {
                owner.unpark();
            }
            Wake::Nobody
        }
        #[cfg(magpie_broken = "cross_latch_returns_wake")]
        {
            // Broken: hands the wake to the pool that ran the job, which
            // unparks its own worker with that index, not the owner.
            drop(owner);
            wake
        }
    }

    #[inline]
    fn probe(&self) -> bool {
        self.latch.probe()
    }
}

impl fmt::Debug for CrossLatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CrossLatch")
            .field("latch", &self.latch)
            .finish_non_exhaustive()
    }
}
