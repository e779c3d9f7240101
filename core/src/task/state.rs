//! The packed task-state word: one `AtomicU64` per task.
//!
//! ```text
//!  63            40 39      32 31           6   5    4    3    2   1  0
//! +----------------+----------+--------------+----+----+----+----+------+
//! | ref count (24) | shield(8)| reserved (0) | JW | JI | CA | NO | life |
//! +----------------+----------+--------------+----+----+----+----+------+
//!   JW = JOIN_WAKER, JI = JOIN_INTEREST, CA = CANCELLED, NO = NOTIFIED,
//!   life = IDLE (0) | SCHEDULED (1) | RUNNING (2) | COMPLETE (3)
//! ```
//!
//! Every transition is one read-modify-write of the word (a CAS loop or a
//! `fetch_*`) and returns a `#[must_use]` value telling the caller what it now
//! owns or must do. The protocol, with numbered steps, the lifecycle diagram
//! and the table of who holds which reference, is in `README.md` beside this
//! file; the loom models are in `core/tests/loom_task_state.rs`.

use core::fmt;

#[cfg_attr(magpie_broken = "ref_dec_no_acquire_fence", allow(unused_imports))]
use crate::sync::atomic::{fence, AtomicU64, Ordering};

// ---------------------------------------------------------------------------
// Layout
// ---------------------------------------------------------------------------

/// Bits 0..2: the lifecycle. Exactly one of [`IDLE`], [`SCHEDULED`],
/// [`RUNNING`], [`COMPLETE`].
pub const LIFECYCLE_MASK: u64 = 0b11;
/// Not queued and not being polled: waiting for a waker (or for nothing, and
/// then freed when its last reference goes).
pub const IDLE: u64 = 0;
/// Exactly one run-queue entry for the task exists (or is about to be pushed
/// by the thread that made this transition).
pub const SCHEDULED: u64 = 1;
/// A worker is polling the future (or dropping it, for a cancelled task).
pub const RUNNING: u64 = 2;
/// The future is gone; the output (if anyone wants it) is in the task.
pub const COMPLETE: u64 = 3;

/// A waker fired while the task was SCHEDULED or RUNNING. `transition_to_idle`
/// reads it in the same RMW that ends the poll, so a wake that lands during the
/// poll reschedules the task instead of being lost. Clear whenever the task is
/// IDLE or COMPLETE.
pub const NOTIFIED: u64 = 1 << 2;
/// `abort()` was called. It takes effect when the shield depth is 0 (see
/// [`Snapshot::is_cancel_effective`]). Never cleared.
pub const CANCELLED: u64 = 1 << 3;
/// A `JoinHandle` exists and wants the output. Cleared by
/// [`State::unset_join_interest`] when the handle is dropped.
pub const JOIN_INTEREST: u64 = 1 << 4;
/// The join-waker cell holds a waker the task side will wake on completion.
/// While set (and the task not COMPLETE) only the task side may read the cell;
/// while clear only the `JoinHandle` may touch it.
pub const JOIN_WAKER: u64 = 1 << 5;
/// All flag bits.
pub const FLAGS_MASK: u64 = NOTIFIED | CANCELLED | JOIN_INTEREST | JOIN_WAKER;

/// Lowest bit of the shield depth.
pub const SHIELD_SHIFT: u32 = 32;
/// Width of the shield depth.
pub const SHIELD_BITS: u32 = 8;
/// One shield level.
pub const SHIELD_ONE: u64 = 1 << SHIELD_SHIFT;
/// Deepest nesting of shields (255). One more is [`ShieldError::Overflow`].
pub const SHIELD_MAX: u64 = (1 << SHIELD_BITS) - 1;
/// The shield-depth field.
pub const SHIELD_MASK: u64 = SHIELD_MAX << SHIELD_SHIFT;

/// Lowest bit of the reference count.
pub const REF_SHIFT: u32 = 40;
/// Width of the reference count.
pub const REF_BITS: u32 = 24;
/// One reference.
pub const REF_ONE: u64 = 1 << REF_SHIFT;
/// Most references a task can have (16,777,215). One more aborts the process.
pub const REF_MAX: u64 = (1 << REF_BITS) - 1;
/// The reference-count field.
pub const REF_MASK: u64 = REF_MAX << REF_SHIFT;

// The fields do not overlap.
const _: () = assert!(LIFECYCLE_MASK & FLAGS_MASK == 0);
const _: () = assert!((LIFECYCLE_MASK | FLAGS_MASK) & SHIELD_MASK == 0);
const _: () = assert!((LIFECYCLE_MASK | FLAGS_MASK | SHIELD_MASK) & REF_MASK == 0);
// The four lifecycle values fit the lifecycle field.
const _: () = assert!(COMPLETE & !LIFECYCLE_MASK == 0);
// The reference count is the top field, so an overflowing `fetch_add` in
// `ref_inc` wraps off the end of the word instead of corrupting a neighbour
// before the process aborts.
const _: () = assert!(REF_SHIFT + REF_BITS == 64);
// The shield depth sits directly below the reference count: a carry out of it
// would add a reference. That is why `shield_enter` checks the depth inside
// its CAS instead of using `fetch_add` (seed 003's bug).
const _: () = assert!(SHIELD_SHIFT + SHIELD_BITS == REF_SHIFT);
// The sizes the README quotes.
const _: () = assert!(SHIELD_MAX == 255 && REF_MAX == 16_777_215);

// ---------------------------------------------------------------------------
// Snapshot
// ---------------------------------------------------------------------------

/// The lifecycle part of a [`Snapshot`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lifecycle {
    /// [`IDLE`]
    Idle,
    /// [`SCHEDULED`]
    Scheduled,
    /// [`RUNNING`]
    Running,
    /// [`COMPLETE`]
    Complete,
}

/// One value of the state word, with accessors for its fields.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Snapshot(u64);

impl Snapshot {
    /// The raw word.
    #[inline]
    pub const fn raw(self) -> u64 {
        self.0
    }

    /// The lifecycle field.
    #[inline]
    pub const fn lifecycle(self) -> Lifecycle {
        match self.0 & LIFECYCLE_MASK {
            IDLE => Lifecycle::Idle,
            SCHEDULED => Lifecycle::Scheduled,
            RUNNING => Lifecycle::Running,
            _ => Lifecycle::Complete,
        }
    }

    /// Lifecycle is IDLE.
    #[inline]
    pub const fn is_idle(self) -> bool {
        self.0 & LIFECYCLE_MASK == IDLE
    }

    /// Lifecycle is SCHEDULED.
    #[inline]
    pub const fn is_scheduled(self) -> bool {
        self.0 & LIFECYCLE_MASK == SCHEDULED
    }

    /// Lifecycle is RUNNING.
    #[inline]
    pub const fn is_running(self) -> bool {
        self.0 & LIFECYCLE_MASK == RUNNING
    }

    /// Lifecycle is COMPLETE.
    #[inline]
    pub const fn is_complete(self) -> bool {
        self.0 & LIFECYCLE_MASK == COMPLETE
    }

    /// [`NOTIFIED`] is set.
    #[inline]
    pub const fn is_notified(self) -> bool {
        self.0 & NOTIFIED != 0
    }

    /// [`CANCELLED`] is set (whether or not a shield defers it).
    #[inline]
    pub const fn is_cancelled(self) -> bool {
        self.0 & CANCELLED != 0
    }

    /// [`JOIN_INTEREST`] is set.
    #[inline]
    pub const fn has_join_interest(self) -> bool {
        self.0 & JOIN_INTEREST != 0
    }

    /// [`JOIN_WAKER`] is set.
    #[inline]
    pub const fn has_join_waker(self) -> bool {
        self.0 & JOIN_WAKER != 0
    }

    /// Number of shields the task is inside (0..=255).
    #[inline]
    pub const fn shield_depth(self) -> u32 {
        ((self.0 & SHIELD_MASK) >> SHIELD_SHIFT) as u32
    }

    /// Number of references (0..=16,777,215).
    #[inline]
    pub const fn ref_count(self) -> u32 {
        (self.0 >> REF_SHIFT) as u32
    }

    /// Cancellation was requested and no shield defers it.
    #[inline]
    pub const fn is_cancel_effective(self) -> bool {
        #[cfg(not(magpie_broken = "cancel_ignores_shield"))]
        return self.is_cancelled() && self.shield_depth() == 0;
        // broken: a shield no longer defers anything.
        #[cfg(magpie_broken = "cancel_ignores_shield")]
        return self.is_cancelled();
    }

    #[inline]
    const fn with_lifecycle(self, lifecycle: u64) -> Self {
        Self((self.0 & !LIFECYCLE_MASK) | lifecycle)
    }

    #[inline]
    const fn set(self, bits: u64) -> Self {
        Self(self.0 | bits)
    }

    #[inline]
    const fn unset(self, bits: u64) -> Self {
        Self(self.0 & !bits)
    }

    /// SCHEDULED -> RUNNING (NOTIFIED cleared), and whether the poll must be
    /// skipped because cancellation is effective.
    #[inline]
    fn start_running(self) -> (Self, bool) {
        let next = self.with_lifecycle(RUNNING).unset(NOTIFIED);
        #[cfg(not(magpie_broken = "running_ignores_cancel"))]
        let cancelled = self.is_cancel_effective();
        // broken: a cancel requested before the poll is not seen.
        #[cfg(magpie_broken = "running_ignores_cancel")]
        let cancelled = false;
        (next, cancelled)
    }

    /// One more reference. The callers are transitions that create a queue
    /// entry; at [`REF_MAX`] the process aborts (see [`State::ref_inc`]).
    #[inline]
    fn ref_inc(self) -> Self {
        if self.ref_count() as u64 == REF_MAX {
            ref_overflow();
        }
        Self(self.0 + REF_ONE)
    }
}

impl Snapshot {
    /// One reference fewer, for transitions that drop the caller's reference
    /// in their RMW: `(others_remain, next)` or `(last, next)`. Aborts the
    /// process on an underflow (see [`State::ref_dec_by`]).
    #[inline]
    fn ref_dec_one<T>(self, others_remain: T, last: T) -> (T, Option<Snapshot>) {
        if self.ref_count() == 0 {
            ref_underflow();
        }
        let next = Self(self.0 - REF_ONE);
        if next.ref_count() == 0 {
            (last, Some(next))
        } else {
            (others_remain, Some(next))
        }
    }
}

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Snapshot")
            .field("lifecycle", &self.lifecycle())
            .field("notified", &self.is_notified())
            .field("cancelled", &self.is_cancelled())
            .field("join_interest", &self.has_join_interest())
            .field("join_waker", &self.has_join_waker())
            .field("shield_depth", &self.shield_depth())
            .field("ref_count", &self.ref_count())
            .finish()
    }
}

// ---------------------------------------------------------------------------
// Transition results
// ---------------------------------------------------------------------------

/// What [`State::transition_to_running`] tells the worker.
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransitionToRunning {
    /// SCHEDULED -> RUNNING: poll the future.
    Success,
    /// SCHEDULED -> RUNNING, but cancellation is effective: drop the future
    /// instead of polling it, store the cancelled output, then
    /// [`State::transition_to_complete`].
    Cancelled,
}

/// What [`State::transition_to_idle`] tells the worker after a `Pending` poll.
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransitionToIdle {
    /// RUNNING -> IDLE, and the worker's reference was dropped in the same
    /// RMW; others remain. The worker must not touch the task again.
    Ok,
    /// RUNNING -> IDLE, and the worker's reference was the last one: the
    /// worker frees the task (nobody can ever wake it).
    OkDealloc,
    /// A wake arrived during the poll: RUNNING -> SCHEDULED with NOTIFIED
    /// cleared. The worker's reference now belongs to the new queue entry:
    /// push the task to a run queue.
    OkNotified,
    /// Cancellation arrived during the poll and is effective now. The state
    /// is unchanged (still RUNNING, the worker keeps its reference): drop the
    /// future, store the cancelled output, then
    /// [`State::transition_to_complete`].
    Cancelled,
}

/// What [`State::transition_to_notified`] tells the waker.
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransitionToNotified {
    /// IDLE -> SCHEDULED with one new reference: the caller pushes the task to
    /// a run queue, and that entry owns the new reference.
    Submit,
    /// Nothing for the caller to do: the task is already queued or running
    /// (NOTIFIED is now set) or complete.
    DoNothing,
}

/// What [`State::cancel`] tells the caller of `abort()`.
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransitionToCancelled {
    /// The task was IDLE: it is now SCHEDULED and CANCELLED with one new
    /// reference. The caller pushes it to a run queue so a worker drops it.
    Schedule,
    /// The task is being polled; the worker sees CANCELLED in
    /// `transition_to_idle` (or the task completes first).
    Running,
    /// The task is queued; the worker sees CANCELLED in
    /// `transition_to_running`.
    Scheduled,
    /// Too late: the task already completed. Nothing changed.
    AlreadyComplete,
}

/// What [`State::transition_to_running_or_stale`] tells the worker that
/// popped a run-queue entry.
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransitionToRunningOrStale {
    /// SCHEDULED -> RUNNING: poll the future (as [`TransitionToRunning::Success`]).
    Poll,
    /// SCHEDULED -> RUNNING with an effective cancel: drop the future (as
    /// [`TransitionToRunning::Cancelled`]).
    Cancel,
    /// The entry is stale: the shutdown sweep claimed the task while it was
    /// queued ([`State::transition_to_shutdown`]). The entry's reference was
    /// dropped in the same RMW and others remain; do not touch the task.
    Stale,
    /// As [`TransitionToRunningOrStale::Stale`], and that reference was the
    /// last: the caller frees the task.
    StaleDealloc,
}

/// What [`State::transition_to_idle_keep_ref`] tells the worker after a
/// `Pending` poll.
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransitionToIdleKeepRef {
    /// RUNNING -> IDLE, the worker's reference dropped in the same RMW; others
    /// remain (as [`TransitionToIdle::Ok`]).
    Ok,
    /// RUNNING -> IDLE and that reference was the last (as
    /// [`TransitionToIdle::OkDealloc`]).
    OkDealloc,
    /// A wake arrived during the poll: RUNNING -> SCHEDULED with NOTIFIED
    /// cleared and ONE NEW reference for the queue entry. The worker keeps its
    /// own reference while it hands the entry to the scheduler (which borrows
    /// the task's scheduler field), then drops it with [`State::ref_dec`].
    OkNotified,
    /// Cancellation is effective: unchanged (as [`TransitionToIdle::Cancelled`]).
    Cancelled,
}

/// What [`State::transition_to_notified_by_val`] tells a waker that is
/// consumed by its wake.
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransitionToNotifiedByVal {
    /// IDLE -> SCHEDULED with one new reference for the queue entry. The waker
    /// still holds its own: it schedules the task, then drops its reference
    /// with [`State::ref_dec`] (the scheduler call borrows the task, so the
    /// waker's reference must outlive it).
    Submit,
    /// NOTIFIED set (SCHEDULED or RUNNING) or nothing to do (COMPLETE); the
    /// waker's reference was dropped in the same RMW and others remain.
    DoNothing,
    /// COMPLETE and the waker's reference was the last: the caller frees the
    /// task.
    Dealloc,
}

/// What [`State::transition_to_shutdown`] tells the shutdown sweep (or the
/// dropper of a queue entry).
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransitionToShutdown {
    /// The task was IDLE or SCHEDULED: it is now RUNNING and CANCELLED, and the
    /// caller owns the future as a worker would. The caller drops the future,
    /// stores the cancelled output and completes the task, using a reference
    /// it already holds. A queue entry that existed for the SCHEDULED task is
    /// now stale ([`State::transition_to_running_or_stale`]).
    Claimed,
    /// RUNNING: CANCELLED is set; the worker polling it completes it (or, if
    /// a shield defers the cancel, the task goes on).
    Running,
    /// COMPLETE: nothing changed.
    Complete,
}

/// What [`State::shield_exit`] reports.
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShieldExit {
    /// No cancellation takes effect: either none was requested or an outer
    /// shield still defers it.
    Clear,
    /// The depth is back to 0 with CANCELLED set: cancellation takes effect
    /// now. The poll should return promptly; `transition_to_idle` will report
    /// [`TransitionToIdle::Cancelled`].
    CancelPending,
}

/// A shield operation that would corrupt the word. The word is unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShieldError {
    /// `shield_enter` at depth [`SHIELD_MAX`]: 256 nested shields.
    Overflow,
    /// `shield_exit` at depth 0: more exits than enters.
    Underflow,
    /// `magpie_core::task::shield_enter` / `shield_exit` called on a thread
    /// that is not polling (or dropping) a task: there is no word to change.
    NotInTask,
}

impl fmt::Display for ShieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShieldError::Overflow => {
                write!(f, "more than {SHIELD_MAX} nested cancellation shields")
            }
            ShieldError::Underflow => {
                f.write_str("cancellation shield exited more often than entered")
            }
            ShieldError::NotInTask => f.write_str("cancellation shield used outside a task"),
        }
    }
}

impl std::error::Error for ShieldError {}

// ---------------------------------------------------------------------------
// The word
// ---------------------------------------------------------------------------

/// The task-state word. `Send + Sync`; every method is one atomic RMW (or a
/// load).
pub struct State {
    val: AtomicU64,
}

// Shared by workers, wakers and handles on any thread.
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<State>();
};

impl State {
    /// A freshly spawned task: SCHEDULED (the spawner is about to queue it),
    /// JOIN_INTEREST if it has a `JoinHandle`, and one reference for the queue
    /// entry plus one for the `JoinHandle` if there is one.
    pub fn new(join_interest: bool) -> Self {
        let (flag, refs) = if join_interest {
            (JOIN_INTEREST, 2)
        } else {
            (0, 1)
        };
        Self {
            val: AtomicU64::new(SCHEDULED | flag | (refs * REF_ONE)),
        }
    }

    /// A task bound to a registry (`OwnedTasks`) with a `JoinHandle`:
    /// SCHEDULED, JOIN_INTEREST, and three references: the first queue entry,
    /// the `JoinHandle`, and the registry's (dropped when the task is unlinked
    /// from it). The same as [`State::new`]`(true)` plus one reference, written
    /// in the initial store instead of a later `ref_inc`.
    pub fn new_owned() -> Self {
        Self {
            val: AtomicU64::new(SCHEDULED | JOIN_INTEREST | (3 * REF_ONE)),
        }
    }

    /// A state word holding `raw`, for tests that start from a given state.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn from_raw(raw: u64) -> Self {
        Self {
            val: AtomicU64::new(raw),
        }
    }

    /// The current value.
    #[inline]
    pub fn load(&self) -> Snapshot {
        // Acquire: pairs with the Release half of every transition (see
        // `fetch_update_action`), so a JoinHandle that loads COMPLETE may read
        // the output the worker wrote before `transition_to_complete`.
        Snapshot(self.val.load(Ordering::Acquire))
    }

    /// One transition: run `f` on the current value until the CAS of the value
    /// it returns succeeds, or `f` declines to write (`None`).
    ///
    /// Orderings, for every transition built on this:
    /// - success AcqRel. Release publishes what the caller did to the task
    ///   before the transition (polled the future, wrote the output, wrote the
    ///   join waker) to the next thread whose RMW or load reads this value or a
    ///   later one in the word's release sequence; Acquire is that reading
    ///   side. The pairs: `transition_to_idle`/`transition_to_complete`
    ///   (Release) with the next `transition_to_running` and the JoinHandle's
    ///   `load`/`unset_join_interest`/`set_join_waker` (Acquire);
    ///   `set_join_waker` (Release) with `transition_to_complete` (Acquire)
    ///   before the waker cell is read; a waker's `transition_to_notified`
    ///   (Release) with the poller's next RMW (Acquire), which is what makes
    ///   the waker's own writes visible to the poll it caused.
    /// - failure and the first load Acquire, so a transition that declines to
    ///   write (COMPLETE seen) has still synchronized with the completion.
    #[inline]
    fn fetch_update_action<T>(&self, mut f: impl FnMut(Snapshot) -> (T, Option<Snapshot>)) -> T {
        let mut curr = self.load();
        loop {
            let (action, next) = f(curr);
            let Some(next) = next else { return action };
            match self.val.compare_exchange_weak(
                curr.0,
                next.0,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return action,
                Err(actual) => curr = Snapshot(actual),
            }
        }
    }

    /// A worker popped the task and is about to poll it: SCHEDULED -> RUNNING,
    /// clearing NOTIFIED (this poll will see whatever that wake published).
    ///
    /// Returns [`TransitionToRunning::Cancelled`] when cancellation is
    /// effective (CANCELLED and shield depth 0): drop the future instead.
    ///
    /// # Panics
    /// If the task is not SCHEDULED: a run-queue entry exists only for a
    /// SCHEDULED task, so this is a scheduler bug.
    pub fn transition_to_running(&self) -> TransitionToRunning {
        self.fetch_update_action(|curr| {
            assert!(
                curr.is_scheduled(),
                "transition_to_running: not SCHEDULED: {curr:?}"
            );
            let (next, cancelled) = curr.start_running();
            if cancelled {
                return (TransitionToRunning::Cancelled, Some(next));
            }
            (TransitionToRunning::Success, Some(next))
        })
    }

    /// The poll returned `Pending`: RUNNING -> IDLE, dropping the worker's
    /// reference in the same RMW.
    ///
    /// If NOTIFIED was set during the poll, goes to SCHEDULED instead and the
    /// worker's reference passes to the new queue entry
    /// ([`TransitionToIdle::OkNotified`]): the task is rescheduled exactly once
    /// however many wakes arrived. If cancellation became effective during the
    /// poll, nothing changes ([`TransitionToIdle::Cancelled`]).
    ///
    /// # Panics
    /// If the task is not RUNNING.
    pub fn transition_to_idle(&self) -> TransitionToIdle {
        match self.end_pending_poll("transition_to_idle", false) {
            TransitionToIdleKeepRef::Ok => TransitionToIdle::Ok,
            TransitionToIdleKeepRef::OkDealloc => TransitionToIdle::OkDealloc,
            TransitionToIdleKeepRef::OkNotified => TransitionToIdle::OkNotified,
            TransitionToIdleKeepRef::Cancelled => TransitionToIdle::Cancelled,
        }
    }

    /// `transition_to_idle` and `transition_to_idle_keep_ref`: the same RMW,
    /// except that with `keep_ref` a reschedule adds a reference for the new
    /// queue entry instead of passing it the worker's.
    #[inline]
    #[cfg_attr(magpie_broken = "idle_ignores_notified", allow(unused_variables))]
    fn end_pending_poll(&self, name: &str, keep_ref: bool) -> TransitionToIdleKeepRef {
        self.fetch_update_action(|curr| {
            assert!(curr.is_running(), "{name}: not RUNNING: {curr:?}");
            if curr.is_cancel_effective() {
                return (TransitionToIdleKeepRef::Cancelled, None);
            }
            #[cfg(not(magpie_broken = "idle_ignores_notified"))]
            if curr.is_notified() {
                let next = curr.with_lifecycle(SCHEDULED).unset(NOTIFIED);
                let next = if keep_ref { next.ref_inc() } else { next };
                return (TransitionToIdleKeepRef::OkNotified, Some(next));
            }
            // The worker's reference was the queue entry's; polling consumed
            // it. ref_count >= 1 while RUNNING (the worker holds one).
            curr.with_lifecycle(IDLE).unset(NOTIFIED).ref_dec_one(
                TransitionToIdleKeepRef::Ok,
                TransitionToIdleKeepRef::OkDealloc,
            )
        })
    }

    /// A waker fired (by reference; a by-value wake is this, then
    /// [`State::ref_dec`] for the waker's own reference).
    ///
    /// - IDLE -> SCHEDULED with one new reference: [`TransitionToNotified::Submit`],
    ///   the caller pushes the task and the queue entry owns the reference.
    /// - SCHEDULED or RUNNING: set NOTIFIED. This is a write even when the bit
    ///   is already set: the RMW puts the wake into the word's modification
    ///   order, so the worker's next RMW synchronizes with it (a plain load
    ///   here would let the poll miss the waker's data, a store-buffering race;
    ///   see the README).
    /// - COMPLETE: nothing.
    pub fn transition_to_notified(&self) -> TransitionToNotified {
        self.fetch_update_action(|curr| match curr.lifecycle() {
            Lifecycle::Idle => {
                let next = curr.with_lifecycle(SCHEDULED).ref_inc();
                (TransitionToNotified::Submit, Some(next))
            }
            #[cfg(not(magpie_broken = "wake_skips_write_when_queued"))]
            Lifecycle::Scheduled | Lifecycle::Running => {
                (TransitionToNotified::DoNothing, Some(curr.set(NOTIFIED)))
            }
            // broken: "already queued, nothing to do" without an RMW.
            #[cfg(magpie_broken = "wake_skips_write_when_queued")]
            Lifecycle::Scheduled => (TransitionToNotified::DoNothing, None),
            #[cfg(magpie_broken = "wake_skips_write_when_queued")]
            Lifecycle::Running => (TransitionToNotified::DoNothing, Some(curr.set(NOTIFIED))),
            Lifecycle::Complete => (TransitionToNotified::DoNothing, None),
        })
    }

    /// The poll returned `Ready`, or a cancelled task's future was dropped:
    /// RUNNING -> COMPLETE, clearing NOTIFIED. Returns the new value. The
    /// caller, who still holds its reference, then:
    /// 1. drops the output if [`Snapshot::has_join_interest`] is false;
    /// 2. otherwise, if [`Snapshot::has_join_waker`], wakes the waker in the
    ///    join-waker cell and calls [`State::unset_join_waker_after_complete`];
    /// 3. drops its reference with [`State::ref_dec`].
    ///
    /// The output must be written before this call (Release, see
    /// `fetch_update_action`).
    ///
    /// # Panics
    /// If the task is not RUNNING.
    #[must_use]
    pub fn transition_to_complete(&self) -> Snapshot {
        self.fetch_update_action(|curr| {
            assert!(
                curr.is_running(),
                "transition_to_complete: not RUNNING: {curr:?}"
            );
            let next = curr.with_lifecycle(COMPLETE).unset(NOTIFIED);
            (next, Some(next))
        })
    }

    /// `abort()`: set CANCELLED.
    ///
    /// An IDLE task is also moved to SCHEDULED with one new reference
    /// ([`TransitionToCancelled::Schedule`]): the caller must queue it, or a
    /// cancelled task that nobody wakes would never complete (seed 003's bug).
    /// A shielded IDLE task is scheduled too; its next poll runs normally and
    /// cancellation takes effect when its last shield exits.
    pub fn cancel(&self) -> TransitionToCancelled {
        self.fetch_update_action(|curr| match curr.lifecycle() {
            #[cfg(not(magpie_broken = "cancel_idle_no_schedule"))]
            Lifecycle::Idle => {
                let next = curr.with_lifecycle(SCHEDULED).set(CANCELLED).ref_inc();
                (TransitionToCancelled::Schedule, Some(next))
            }
            // broken: the flag is set but nobody will ever run the task.
            #[cfg(magpie_broken = "cancel_idle_no_schedule")]
            Lifecycle::Idle => (TransitionToCancelled::Scheduled, Some(curr.set(CANCELLED))),
            Lifecycle::Scheduled => (TransitionToCancelled::Scheduled, Some(curr.set(CANCELLED))),
            Lifecycle::Running => (TransitionToCancelled::Running, Some(curr.set(CANCELLED))),
            Lifecycle::Complete => (TransitionToCancelled::AlreadyComplete, None),
        })
    }

    /// Enter a cancellation shield: while the depth is above 0, CANCELLED does
    /// not take effect. Called by the task itself, during its poll.
    ///
    /// At depth [`SHIELD_MAX`] this returns [`ShieldError::Overflow`] and
    /// leaves the word unchanged: the check is inside the CAS, so the depth can
    /// never carry into the reference count above it.
    pub fn shield_enter(&self) -> Result<(), ShieldError> {
        #[cfg(magpie_broken = "shield_carry")]
        return self.shield_enter_unchecked();
        #[cfg(not(magpie_broken = "shield_carry"))]
        return self.fetch_update_action(|curr| {
            if curr.shield_depth() as u64 == SHIELD_MAX {
                (Err(ShieldError::Overflow), None)
            } else {
                (Ok(()), Some(Snapshot(curr.0 + SHIELD_ONE)))
            }
        });
    }

    /// broken: an unchecked add; at depth 255 it carries into the reference
    /// count.
    #[cfg(magpie_broken = "shield_carry")]
    fn shield_enter_unchecked(&self) -> Result<(), ShieldError> {
        // AcqRel: as in `fetch_update_action`.
        self.val.fetch_add(SHIELD_ONE, Ordering::AcqRel);
        Ok(())
    }

    /// Leave a cancellation shield. [`ShieldExit::CancelPending`] when this
    /// took the depth to 0 with CANCELLED set: cancellation is effective from
    /// now on. At depth 0 this returns [`ShieldError::Underflow`] and leaves the
    /// word unchanged (no borrow from the reference count).
    pub fn shield_exit(&self) -> Result<ShieldExit, ShieldError> {
        self.fetch_update_action(|curr| {
            if curr.shield_depth() == 0 {
                return (Err(ShieldError::Underflow), None);
            }
            let next = Snapshot(curr.0 - SHIELD_ONE);
            if next.is_cancel_effective() {
                (Ok(ShieldExit::CancelPending), Some(next))
            } else {
                (Ok(ShieldExit::Clear), Some(next))
            }
        })
    }

    /// CANCELLED is set and no shield defers it. A poll may check this between
    /// steps to stop early.
    #[inline]
    pub fn is_cancel_effective(&self) -> bool {
        self.load().is_cancel_effective()
    }

    /// One more reference (a waker clone, a new handle).
    ///
    /// Aborts the process if the count would pass [`REF_MAX`]: the count is
    /// the top field, so the wrapped add corrupted only the count itself, and
    /// continuing could free a task that is still referenced.
    #[inline]
    pub fn ref_inc(&self) {
        // Relaxed: a new reference is made from one the caller already holds,
        // so the task cannot be freed concurrently and nothing is published.
        let prev = Snapshot(self.val.fetch_add(REF_ONE, Ordering::Relaxed));
        if prev.ref_count() as u64 == REF_MAX {
            ref_overflow();
        }
        debug_assert!(prev.ref_count() > 0, "ref_inc on a freed task");
    }

    /// Drop one reference. `true` means this dropped the last one: the caller
    /// frees the task, and exactly one caller over the task's life sees `true`.
    #[inline]
    #[must_use]
    pub fn ref_dec(&self) -> bool {
        self.ref_dec_by(1)
    }

    /// Drop `n` references at once (for example a worker's reference and a
    /// waker's). `true` means these were the last ones.
    ///
    /// Aborts the process if the count was below `n` (a reference dropped
    /// twice: the task may already be freed).
    ///
    /// # Panics
    /// If `n` exceeds [`REF_MAX`] (no task can hold that many).
    #[inline]
    #[must_use]
    pub fn ref_dec_by(&self, n: u32) -> bool {
        assert!(
            u64::from(n) <= REF_MAX,
            "ref_dec_by({n}): more than REF_MAX"
        );
        if n == 0 {
            return false;
        }
        // Release: every access this thread made to the task happens before
        // the free, via the Acquire fence below in whichever thread drops the
        // last reference (Arc's pattern: one fence on the rare path instead of
        // Acquire on every decrement).
        let prev = Snapshot(
            self.val
                .fetch_sub(u64::from(n) << REF_SHIFT, Ordering::Release),
        );
        if prev.ref_count() < n {
            ref_underflow();
        }
        if prev.ref_count() != n {
            return false;
        }
        // Acquire: pairs with the Release decrement of every earlier reference
        // (they are all in this word's release sequence), so their accesses
        // to the task happen before the caller frees it.
        #[cfg(not(magpie_broken = "ref_dec_no_acquire_fence"))]
        fence(Ordering::Acquire);
        true
    }

    /// The `JoinHandle` is dropped: clear JOIN_INTEREST.
    ///
    /// - `Ok(next)`: not COMPLETE. JOIN_WAKER was cleared in the same RMW, so
    ///   the handle owns the join-waker cell again and drops any waker in it;
    ///   the task will drop its own output on completion.
    /// - `Err(next)`: already COMPLETE. The handle drops the output. If
    ///   `next.has_join_waker()`, the task side is still using the waker cell
    ///   and will drop the waker in `unset_join_waker_after_complete`;
    ///   otherwise the handle drops it.
    ///
    /// The handle still holds its reference; it drops it with `ref_dec` after.
    ///
    /// # Panics
    /// If JOIN_INTEREST is not set.
    pub fn unset_join_interest(&self) -> Result<Snapshot, Snapshot> {
        self.fetch_update_action(|curr| {
            assert!(
                curr.has_join_interest(),
                "unset_join_interest: no JOIN_INTEREST: {curr:?}"
            );
            if curr.is_complete() {
                let next = curr.unset(JOIN_INTEREST);
                (Err(next), Some(next))
            } else {
                let next = curr.unset(JOIN_INTEREST | JOIN_WAKER);
                (Ok(next), Some(next))
            }
        })
    }

    /// The `JoinHandle` wrote a waker into the join-waker cell and publishes
    /// it: set JOIN_WAKER. `Err(curr)` if the task is already COMPLETE (the
    /// word is unchanged): read the output now instead of waiting.
    ///
    /// The waker must be written BEFORE this call: the Release half of the
    /// RMW pairs with the Acquire half of `transition_to_complete`, after
    /// which the task side reads the cell.
    ///
    /// # Panics
    /// If JOIN_INTEREST is clear or JOIN_WAKER is already set.
    pub fn set_join_waker(&self) -> Result<Snapshot, Snapshot> {
        self.fetch_update_action(|curr| {
            assert!(
                curr.has_join_interest() && !curr.has_join_waker(),
                "set_join_waker: {curr:?}"
            );
            if curr.is_complete() {
                (Err(curr), None)
            } else {
                let next = curr.set(JOIN_WAKER);
                (Ok(next), Some(next))
            }
        })
    }

    /// The `JoinHandle` wants to replace its waker: clear JOIN_WAKER so it owns
    /// the cell again. `Err(curr)` if COMPLETE (unchanged): the task side may
    /// be reading the cell, leave it alone and read the output.
    ///
    /// COMPLETE is checked first: the handle saw JOIN_WAKER set, but once the
    /// task completes the task side may clear it at any moment
    /// (`unset_join_waker_after_complete`), so after COMPLETE the flag says
    /// nothing about the handle's mistake.
    ///
    /// # Panics
    /// If the task is not COMPLETE and JOIN_INTEREST or JOIN_WAKER is clear.
    pub fn unset_join_waker(&self) -> Result<Snapshot, Snapshot> {
        self.fetch_update_action(|curr| {
            // The broken variant restores the first version's order: the
            // precondition checked before COMPLETE, which the task side's
            // hand-back of the cell after completion trips.
            #[cfg(not(magpie_broken = "unset_join_waker_checks_flag_first"))]
            if curr.is_complete() {
                return (Err(curr), None);
            }
            assert!(
                curr.has_join_interest() && curr.has_join_waker(),
                "unset_join_waker: {curr:?}"
            );
            if curr.is_complete() {
                (Err(curr), None)
            } else {
                let next = curr.unset(JOIN_WAKER);
                (Ok(next), Some(next))
            }
        })
    }

    /// The task side has woken the join waker after completion and hands the
    /// cell back: clear JOIN_WAKER. If the returned value has no
    /// JOIN_INTEREST, the handle is gone and the caller drops the waker;
    /// otherwise the handle owns it now.
    ///
    /// # Panics
    /// If the task is not COMPLETE or JOIN_WAKER is clear.
    #[must_use]
    pub fn unset_join_waker_after_complete(&self) -> Snapshot {
        // AcqRel: Release so this side's read of the waker cell happens before
        // the handle's next access to it (the handle's Acquire in
        // `unset_join_interest` or `load`); Acquire so, if the handle has gone,
        // its accesses to the cell happen before this side drops the waker.
        let prev = Snapshot(self.val.fetch_and(!JOIN_WAKER, Ordering::AcqRel));
        assert!(
            prev.is_complete() && prev.has_join_waker(),
            "unset_join_waker_after_complete: {prev:?}"
        );
        prev.unset(JOIN_WAKER)
    }
}

// ---------------------------------------------------------------------------
// Transitions added for the raw task cell (core/src/task/README.md, "The task
// cell"): a by-value wake, a Pending poll that keeps the worker's reference
// across the reschedule, queue entries made stale by the shutdown sweep, the
// sweep's claim, and the JoinHandle's one-RMW drop.
// ---------------------------------------------------------------------------

impl State {
    /// [`State::transition_to_running`] for a worker that popped a queue
    /// entry which may be stale.
    ///
    /// - SCHEDULED: exactly as `transition_to_running` (`Poll` / `Cancel`).
    /// - RUNNING or COMPLETE with CANCELLED: the shutdown sweep claimed the
    ///   task while this entry was queued ([`State::transition_to_shutdown`]).
    ///   The entry's reference is dropped in the same RMW: `Stale`, or
    ///   `StaleDealloc` if it was the last.
    ///
    /// # Panics
    /// Anything else (IDLE, or RUNNING/COMPLETE without CANCELLED): an entry
    /// that shutdown did not make stale exists only for a SCHEDULED task, so
    /// this is a scheduler bug.
    pub fn transition_to_running_or_stale(&self) -> TransitionToRunningOrStale {
        self.fetch_update_action(|curr| {
            if !curr.is_scheduled() {
                assert!(
                    curr.is_cancelled() && !curr.is_idle(),
                    "transition_to_running_or_stale: not SCHEDULED and not claimed by shutdown: {curr:?}"
                );
                return curr.ref_dec_one(
                    TransitionToRunningOrStale::Stale,
                    TransitionToRunningOrStale::StaleDealloc,
                );
            }
            let (next, cancelled) = curr.start_running();
            if cancelled {
                return (TransitionToRunningOrStale::Cancel, Some(next));
            }
            (TransitionToRunningOrStale::Poll, Some(next))
        })
    }

    /// [`State::transition_to_idle`], except that `OkNotified` also adds one
    /// reference for the new queue entry: the worker keeps its own while it
    /// calls the scheduler (the call borrows the scheduler stored in the task,
    /// and the entry could be run and the task freed by another worker before
    /// the call returns), then drops it with [`State::ref_dec`].
    ///
    /// # Panics
    /// If the task is not RUNNING.
    pub fn transition_to_idle_keep_ref(&self) -> TransitionToIdleKeepRef {
        self.end_pending_poll("transition_to_idle_keep_ref", true)
    }

    /// A waker fired by value: [`State::transition_to_notified`] with the
    /// waker's own reference dropped in the same RMW when nothing is
    /// submitted.
    ///
    /// - IDLE -> SCHEDULED with one new reference: `Submit`. The waker keeps
    ///   its own reference across the scheduler call and drops it after.
    /// - SCHEDULED or RUNNING: set NOTIFIED (a write, as in
    ///   `transition_to_notified`) and drop the waker's reference: `DoNothing`.
    ///   The queue entry or the worker still holds one, so this is never the
    ///   last.
    /// - COMPLETE: drop the waker's reference: `DoNothing`, or `Dealloc` if it
    ///   was the last.
    pub fn transition_to_notified_by_val(&self) -> TransitionToNotifiedByVal {
        self.fetch_update_action(|curr| match curr.lifecycle() {
            Lifecycle::Idle => {
                let next = curr.with_lifecycle(SCHEDULED).ref_inc();
                (TransitionToNotifiedByVal::Submit, Some(next))
            }
            Lifecycle::Scheduled | Lifecycle::Running => {
                // I4: the entry's or the worker's reference, plus the waker's.
                assert!(
                    curr.ref_count() >= 2,
                    "transition_to_notified_by_val: {curr:?}"
                );
                let next = Snapshot(curr.set(NOTIFIED).0 - REF_ONE);
                (TransitionToNotifiedByVal::DoNothing, Some(next))
            }
            Lifecycle::Complete => curr.ref_dec_one(
                TransitionToNotifiedByVal::DoNothing,
                TransitionToNotifiedByVal::Dealloc,
            ),
        })
    }

    /// The shutdown sweep (or the dropper of a queue entry that will never
    /// run) claims the task so it can be cancelled from outside a worker.
    ///
    /// - IDLE or SCHEDULED -> RUNNING, with CANCELLED set and NOTIFIED
    ///   cleared: `Claimed`. The shield depth is ignored: a runtime that shuts
    ///   down cannot wait for a shield to exit. The caller now owns the future
    ///   and completes the task with a reference it already holds. If the task
    ///   was SCHEDULED, its queue entry is stale from now on.
    /// - RUNNING: set CANCELLED: `Running`.
    /// - COMPLETE: nothing: `Complete`.
    ///
    /// The reference count does not change.
    pub fn transition_to_shutdown(&self) -> TransitionToShutdown {
        #[cfg(magpie_broken = "shutdown_claim_not_atomic")]
        return self.transition_to_shutdown_load_store();
        #[cfg(not(magpie_broken = "shutdown_claim_not_atomic"))]
        return self.fetch_update_action(|curr| match curr.lifecycle() {
            Lifecycle::Idle | Lifecycle::Scheduled => {
                let next = curr.with_lifecycle(RUNNING).unset(NOTIFIED).set(CANCELLED);
                (TransitionToShutdown::Claimed, Some(next))
            }
            Lifecycle::Running => (TransitionToShutdown::Running, Some(curr.set(CANCELLED))),
            Lifecycle::Complete => (TransitionToShutdown::Complete, None),
        });
    }

    /// broken: the claim as a load and a separate store. A wake's RMW between
    /// them is overwritten: its reference and its queue entry are lost.
    #[cfg(magpie_broken = "shutdown_claim_not_atomic")]
    fn transition_to_shutdown_load_store(&self) -> TransitionToShutdown {
        let curr = self.load();
        let (action, next) = match curr.lifecycle() {
            Lifecycle::Idle | Lifecycle::Scheduled => (
                TransitionToShutdown::Claimed,
                curr.with_lifecycle(RUNNING).unset(NOTIFIED).set(CANCELLED),
            ),
            Lifecycle::Running => (TransitionToShutdown::Running, curr.set(CANCELLED)),
            Lifecycle::Complete => return TransitionToShutdown::Complete,
        };
        // Release: as the RMW it replaces.
        self.val.store(next.0, Ordering::Release);
        action
    }

    /// The `JoinHandle` is dropped and has nothing to hand over: clear
    /// JOIN_INTEREST and drop the handle's reference in ONE RMW. `Some(last)`
    /// on success (`last`: the caller frees the task); `None`, with the word
    /// unchanged, when the conditions below do not hold (then the caller takes
    /// the general path: [`State::unset_join_interest`], then `ref_dec`).
    ///
    /// Succeeds only if JOIN_WAKER is clear and the task is COMPLETE exactly
    /// when `complete` says so:
    /// - `complete == false`: the output will be the task's to drop, and the
    ///   join-waker cell is empty (the handle leaves a waker in the cell with
    ///   JOIN_WAKER clear only after seeing COMPLETE), so the handle has
    ///   nothing left to do after the RMW.
    /// - `complete == true`: the caller observed COMPLETE without JOIN_WAKER
    ///   and has ALREADY dropped the output and the waker (it owns both from
    ///   that observation on; COMPLETE is terminal and only the handle sets
    ///   JOIN_WAKER). Doing that before the RMW matters: after it, another
    ///   holder may free the task.
    ///
    /// # Panics
    /// If JOIN_INTEREST is clear.
    pub fn drop_join_handle_fast(&self, complete: bool) -> Option<bool> {
        self.fetch_update_action(|curr| {
            assert!(
                curr.has_join_interest(),
                "drop_join_handle_fast: no JOIN_INTEREST: {curr:?}"
            );
            if curr.has_join_waker() || curr.is_complete() != complete {
                return (None, None);
            }
            let (last, next) = curr.unset(JOIN_INTEREST).ref_dec_one(false, true);
            (Some(last), next)
        })
    }
}

impl fmt::Debug for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("State").field(&self.load()).finish()
    }
}

#[cold]
#[inline(never)]
fn ref_overflow() -> ! {
    // Aborting, not panicking: a wrapped count could free a live task, and
    // unwinding would run destructors that drop references.
    std::process::abort()
}

#[cold]
#[inline(never)]
fn ref_underflow() -> ! {
    // A reference was dropped twice; the task may already be freed.
    std::process::abort()
}

#[cfg(all(test, not(loom)))]
mod tests;
