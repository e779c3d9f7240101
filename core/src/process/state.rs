//! The packed process-state word: one `AtomicU64` per process.
//!
//! ```text
//!  63                5    4    3    2  0
//! +-------------------+----+----+------+
//! |   reserved (0)    | CA | NO | life |
//! +-------------------+----+----+------+
//!   CA = CANCELLED, NO = NOTIFIED,
//!   life = IDLE (0) | BLOCKED (1) | READY (2) | RUNNING (3) | COMPLETE (4)
//! ```
//!
//! Every transition is one read-modify-write of the word and returns a
//! `#[must_use]` value telling the caller what it must do (queue the process,
//! or nothing). The protocol, as numbered steps, is in `README.md` beside this
//! file; the loom models are in `core/tests/loom_process.rs`.

use core::fmt;

use crate::sync::atomic::{AtomicU64, Ordering};

/// Bits 0..3: the lifecycle. Exactly one of [`IDLE`], [`BLOCKED`], [`READY`],
/// [`RUNNING`], [`COMPLETE`].
pub const LIFECYCLE_MASK: u64 = 0b111;
/// Waiting for messages; in no run queue.
pub const IDLE: u64 = 0;
/// Waiting for the completions of commands it yielded; in no run queue.
pub const BLOCKED: u64 = 1;
/// Exactly one run-queue entry for the process exists (or is about to be
/// pushed by the thread whose transition wrote READY).
pub const READY: u64 = 2;
/// One worker is stepping the process; it holds the only
/// [`Stepping`](super::Stepping) token.
pub const RUNNING: u64 = 3;
/// Finished (completed, failed, panicked or force-closed). Terminal.
pub const COMPLETE: u64 = 4;

/// An event arrived while the process was READY or RUNNING. The transition
/// that ends a step ([`State::transition_to_waiting`]) reads it in the same
/// RMW, so an event that lands during a step re-queues the process instead of
/// being lost. Cleared by [`State::transition_to_running`] and by every
/// transition out of RUNNING.
pub const NOTIFIED: u64 = 1 << 3;
/// Cancellation was requested. Never cleared.
pub const CANCELLED: u64 = 1 << 4;
/// All flag bits.
pub const FLAGS_MASK: u64 = NOTIFIED | CANCELLED;

const _: () = assert!(LIFECYCLE_MASK & FLAGS_MASK == 0);
const _: () = assert!(COMPLETE & !LIFECYCLE_MASK == 0);
const _: () = assert!(NOTIFIED == 8 && CANCELLED == 16);

/// The lifecycle part of a [`Snapshot`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Lifecycle {
    /// [`IDLE`]
    Idle,
    /// [`BLOCKED`]
    Blocked,
    /// [`READY`]
    Ready,
    /// [`RUNNING`]
    Running,
    /// [`COMPLETE`]
    Complete,
}

/// One value of the state word.
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
            BLOCKED => Lifecycle::Blocked,
            READY => Lifecycle::Ready,
            RUNNING => Lifecycle::Running,
            _ => Lifecycle::Complete,
        }
    }

    /// [`NOTIFIED`] is set.
    #[inline]
    pub const fn is_notified(self) -> bool {
        self.0 & NOTIFIED != 0
    }

    /// [`CANCELLED`] is set.
    #[inline]
    pub const fn is_cancelled(self) -> bool {
        self.0 & CANCELLED != 0
    }

    /// Lifecycle is COMPLETE.
    #[inline]
    pub const fn is_complete(self) -> bool {
        self.0 & LIFECYCLE_MASK == COMPLETE
    }

    #[inline]
    const fn life(self) -> u64 {
        self.0 & LIFECYCLE_MASK
    }

    #[inline]
    const fn with_life(self, life: u64) -> u64 {
        (self.0 & !LIFECYCLE_MASK) | life
    }
}

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Snapshot")
            .field("lifecycle", &self.lifecycle())
            .field("notified", &self.is_notified())
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

/// What [`State::notify`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use = "Schedule means the caller must push the process to a run queue"]
pub enum TransitionToNotified {
    /// IDLE or BLOCKED -> READY: the caller must push the process to a run
    /// queue (it is now the one entry READY promises).
    Schedule,
    /// READY or RUNNING: NOTIFIED was set; the entry that exists, or the step
    /// in progress, will see the event.
    Noted,
    /// COMPLETE: nothing to wake.
    Complete,
}

/// What [`State::cancel`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use = "Schedule means the caller must push the process to a run queue"]
pub enum TransitionToCancelled {
    /// IDLE or BLOCKED -> READY with CANCELLED: push the process to a run queue.
    Schedule,
    /// READY or RUNNING: CANCELLED (and NOTIFIED) set; the next step sees it.
    Noted,
    /// CANCELLED was already set; nothing changed.
    AlreadyCancelled,
    /// COMPLETE: too late, nothing changed.
    Complete,
}

/// What [`State::transition_to_running`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use = "Success hands the caller the process; anything else means it must not step it"]
pub enum TransitionToRunning {
    /// READY -> RUNNING, NOTIFIED cleared. `cancelled`: CANCELLED is set.
    Success {
        /// CANCELLED was set at the transition.
        cancelled: bool,
    },
    /// Not READY (a stale queue entry: the process was claimed for a forced
    /// close, or completed); nothing changed.
    NotReady(Snapshot),
}

/// Where a step leaves a process that did not complete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Wait for messages ([`IDLE`]).
    Idle,
    /// Wait for yield completions ([`BLOCKED`]).
    Blocked,
    /// Run again after the others (READY, back of the queue): the step asked
    /// to keep running, or used up its event budget.
    Yield,
}

/// What [`State::transition_to_waiting`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use = "Requeue means the caller must push the process to a run queue"]
pub enum TransitionToWaiting {
    /// RUNNING -> IDLE or BLOCKED: the process sleeps until an event.
    Waiting,
    /// RUNNING -> READY: NOTIFIED was set (an event arrived during the step)
    /// or the step asked to yield. The caller must push the process to a run
    /// queue.
    Requeue,
}

/// What [`State::claim_for_close`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use = "Claimed hands the caller the process"]
pub enum TransitionToClaimed {
    /// IDLE, BLOCKED or READY -> RUNNING: the caller owns the process. A
    /// READY process's queue entry becomes stale (its `transition_to_running`
    /// will fail).
    Claimed,
    /// A worker is stepping it; nothing changed.
    Running,
    /// Already COMPLETE; nothing changed.
    Complete,
}

/// The state word of one process.
pub struct State {
    word: AtomicU64,
}

impl Default for State {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.load().fmt(f)
    }
}

impl State {
    /// A new process: READY, no flags. The spawner must push it to a run queue.
    pub fn new() -> Self {
        Self {
            word: AtomicU64::new(READY),
        }
    }

    /// The current value. Acquire: pairs with the AcqRel of every transition,
    /// so a caller that sees COMPLETE also sees what the completing worker
    /// wrote before it.
    #[inline]
    pub fn load(&self) -> Snapshot {
        Snapshot(self.word.load(Ordering::Acquire))
    }

    /// One CAS loop over the word. `f` returns the new value and the result,
    /// or `None` to leave the word as it is.
    ///
    /// AcqRel on success: every transition both publishes what the caller did
    /// before it (a producer's push into the event queue, a worker's step)
    /// and acquires what the previous writer published. The pairs are named
    /// at each caller. Acquire on failure: the retry reads the latest value.
    #[inline]
    fn transition<R>(&self, f: impl FnMut(Snapshot) -> (Option<u64>, R)) -> R {
        self.transition_ordered(Ordering::AcqRel, f)
    }

    /// [`State::transition`] with `success` as the CAS's ordering on
    /// success (only the broken variant `finish_without_release` passes
    /// anything but AcqRel).
    #[inline]
    fn transition_ordered<R>(
        &self,
        success: Ordering,
        mut f: impl FnMut(Snapshot) -> (Option<u64>, R),
    ) -> R {
        let mut cur = self.word.load(Ordering::Acquire);
        loop {
            let (next, out) = f(Snapshot(cur));
            let Some(next) = next else {
                return out;
            };
            match self
                .word
                .compare_exchange_weak(cur, next, success, Ordering::Acquire)
            {
                Ok(_) => return out,
                Err(actual) => cur = actual,
            }
        }
    }

    /// An event was pushed into the process's queue (step 2 of the
    /// producer's protocol in README.md). IDLE/BLOCKED -> READY
    /// ([`Schedule`](TransitionToNotified::Schedule)); READY/RUNNING -> set
    /// NOTIFIED. READY also writes: the write is what makes the push visible
    /// to the worker whose `transition_to_running` reads it (Release here
    /// pairs with the Acquire there).
    pub fn notify(&self) -> TransitionToNotified {
        self.transition(|s| match s.life() {
            #[cfg(not(magpie_broken = "notify_leaves_idle_asleep"))]
            IDLE | BLOCKED => (
                Some(s.with_life(READY) & !NOTIFIED),
                TransitionToNotified::Schedule,
            ),
            // broken: an IDLE process only gets the flag, which nobody reads
            // until its next step, which never comes.
            #[cfg(magpie_broken = "notify_leaves_idle_asleep")]
            BLOCKED => (
                Some(s.with_life(READY) & !NOTIFIED),
                TransitionToNotified::Schedule,
            ),
            #[cfg(magpie_broken = "notify_leaves_idle_asleep")]
            IDLE => (Some(s.raw() | NOTIFIED), TransitionToNotified::Noted),
            // broken: a READY process is queued a second time.
            #[cfg(magpie_broken = "notify_schedules_ready")]
            READY => (Some(s.raw() | NOTIFIED), TransitionToNotified::Schedule),
            COMPLETE => (None, TransitionToNotified::Complete),
            _ => (Some(s.raw() | NOTIFIED), TransitionToNotified::Noted),
        })
    }

    /// Requests cancellation: sets CANCELLED and wakes the process like an
    /// event would. Idempotent; refused on COMPLETE.
    pub fn cancel(&self) -> TransitionToCancelled {
        self.transition(|s| {
            #[cfg(not(magpie_broken = "cancel_revives_complete"))]
            if s.is_complete() {
                return (None, TransitionToCancelled::Complete);
            }
            if s.is_cancelled() {
                return (None, TransitionToCancelled::AlreadyCancelled);
            }
            match s.life() {
                // broken variant `cancel_revives_complete` falls through here
                // for COMPLETE too: a finished process is made READY again.
                IDLE | BLOCKED | COMPLETE => (
                    Some((s.with_life(READY) & !NOTIFIED) | CANCELLED),
                    TransitionToCancelled::Schedule,
                ),
                _ => (
                    Some(s.raw() | CANCELLED | NOTIFIED),
                    TransitionToCancelled::Noted,
                ),
            }
        })
    }

    /// The holder of the process's queue entry starts a step: READY ->
    /// RUNNING, NOTIFIED cleared (the step will drain the queue, which holds
    /// every event whose notify came before this RMW). Acquire pairs with the
    /// Release of the `notify`/`cancel` that wrote READY or NOTIFIED.
    pub fn transition_to_running(&self) -> TransitionToRunning {
        self.transition(|s| {
            if s.life() != READY {
                return (None, TransitionToRunning::NotReady(s));
            }
            (
                Some(s.with_life(RUNNING) & !NOTIFIED),
                TransitionToRunning::Success {
                    cancelled: s.is_cancelled(),
                },
            )
        })
    }

    /// A step ends without completing. If NOTIFIED is set (an event's
    /// `notify` landed during the step) or `wait` is [`Wait::Yield`], the
    /// process goes back to READY and the caller re-queues it; else it
    /// sleeps in IDLE or BLOCKED. One CAS: a `notify` either lands before it
    /// (seen here as NOTIFIED) or after it (sees IDLE/BLOCKED and schedules).
    ///
    /// Its Release also hands the process's body over: the next token
    /// holder's transition reads this write or a later RMW of its release
    /// sequence (README.md, "The body").
    pub fn transition_to_waiting(&self, wait: Wait) -> TransitionToWaiting {
        #[cfg(not(magpie_broken = "finish_without_release"))]
        let success = Ordering::AcqRel;
        // broken: the end of a step publishes nothing, so the next token
        // holder may touch the body before this step's writes to it.
        #[cfg(magpie_broken = "finish_without_release")]
        let success = Ordering::Acquire;
        self.transition_ordered(success, |s| {
            debug_assert_eq!(s.life(), RUNNING, "only the stepping worker ends a step");
            #[cfg(not(magpie_broken = "waiting_ignores_notified"))]
            let requeue = s.is_notified() || wait == Wait::Yield;
            // broken: an event that arrived during the step is forgotten.
            #[cfg(magpie_broken = "waiting_ignores_notified")]
            let requeue = wait == Wait::Yield;
            if requeue {
                return (
                    Some(s.with_life(READY) & !NOTIFIED),
                    TransitionToWaiting::Requeue,
                );
            }
            let life = if wait == Wait::Idle { IDLE } else { BLOCKED };
            (Some(s.with_life(life)), TransitionToWaiting::Waiting)
        })
    }

    /// The stepping worker (or a forced close) finishes the process:
    /// RUNNING -> COMPLETE. Returns the value before. Release pairs with the
    /// Acquire of [`State::load`] and of every later transition that reads
    /// COMPLETE.
    pub fn transition_to_complete(&self) -> Snapshot {
        self.transition(|s| {
            debug_assert_eq!(s.life(), RUNNING, "only the token holder completes");
            (Some(s.with_life(COMPLETE) & !NOTIFIED), s)
        })
    }

    /// Shutdown takes a process that no worker is stepping: IDLE, BLOCKED or
    /// READY -> RUNNING, so it can close it with the same token a worker
    /// would hold.
    pub fn claim_for_close(&self) -> TransitionToClaimed {
        self.transition(|s| match s.life() {
            #[cfg(not(magpie_broken = "claim_takes_running"))]
            RUNNING => (None, TransitionToClaimed::Running),
            COMPLETE => (None, TransitionToClaimed::Complete),
            // broken variant `claim_takes_running`: a process in the middle
            // of its step is claimed too.
            _ => (
                Some(s.with_life(RUNNING) & !NOTIFIED),
                TransitionToClaimed::Claimed,
            ),
        })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn layout_constants_are_where_the_readme_says() {
        assert_eq!(LIFECYCLE_MASK, 0b111);
        assert_eq!((IDLE, BLOCKED, READY, RUNNING, COMPLETE), (0, 1, 2, 3, 4));
        assert_eq!(NOTIFIED, 1 << 3);
        assert_eq!(CANCELLED, 1 << 4);
    }

    #[test]
    fn new_process_is_ready_and_runs_once() {
        let s = State::new();
        assert_eq!(s.load().lifecycle(), Lifecycle::Ready);
        assert_eq!(
            s.transition_to_running(),
            TransitionToRunning::Success { cancelled: false }
        );
        assert!(matches!(
            s.transition_to_running(),
            TransitionToRunning::NotReady(_)
        ));
    }

    #[test]
    fn notify_during_step_requeues_instead_of_sleeping() {
        let s = State::new();
        let _ = s.transition_to_running();
        assert_eq!(s.notify(), TransitionToNotified::Noted);
        assert_eq!(
            s.transition_to_waiting(Wait::Idle),
            TransitionToWaiting::Requeue
        );
        assert_eq!(s.load().lifecycle(), Lifecycle::Ready);
        assert!(!s.load().is_notified());
    }

    #[test]
    fn notify_of_idle_or_blocked_schedules_once() {
        for wait in [Wait::Idle, Wait::Blocked] {
            let s = State::new();
            let _ = s.transition_to_running();
            assert_eq!(s.transition_to_waiting(wait), TransitionToWaiting::Waiting);
            assert_eq!(s.notify(), TransitionToNotified::Schedule);
            assert_eq!(s.notify(), TransitionToNotified::Noted);
            assert!(matches!(
                s.transition_to_running(),
                TransitionToRunning::Success { .. }
            ));
        }
    }

    #[test]
    fn yield_always_requeues() {
        let s = State::new();
        let _ = s.transition_to_running();
        assert_eq!(
            s.transition_to_waiting(Wait::Yield),
            TransitionToWaiting::Requeue
        );
    }

    #[test]
    fn complete_is_terminal_for_notify_cancel_and_claim() {
        let s = State::new();
        let _ = s.transition_to_running();
        let before = s.transition_to_complete();
        assert_eq!(before.lifecycle(), Lifecycle::Running);
        assert_eq!(s.notify(), TransitionToNotified::Complete);
        assert_eq!(s.cancel(), TransitionToCancelled::Complete);
        assert_eq!(s.claim_for_close(), TransitionToClaimed::Complete);
        assert!(matches!(
            s.transition_to_running(),
            TransitionToRunning::NotReady(_)
        ));
    }

    #[test]
    fn cancel_from_each_lifecycle() {
        let s = State::new();
        assert_eq!(s.cancel(), TransitionToCancelled::Noted);
        assert_eq!(s.cancel(), TransitionToCancelled::AlreadyCancelled);
        assert_eq!(
            s.transition_to_running(),
            TransitionToRunning::Success { cancelled: true }
        );

        let s = State::new();
        let _ = s.transition_to_running();
        let _ = s.transition_to_waiting(Wait::Blocked);
        assert_eq!(s.cancel(), TransitionToCancelled::Schedule);
        assert!(s.load().is_cancelled());
        assert_eq!(s.load().lifecycle(), Lifecycle::Ready);
    }

    #[test]
    fn claim_refuses_a_running_process_and_takes_a_waiting_one() {
        let s = State::new();
        let _ = s.transition_to_running();
        assert_eq!(s.claim_for_close(), TransitionToClaimed::Running);
        let _ = s.transition_to_waiting(Wait::Idle);
        assert_eq!(s.claim_for_close(), TransitionToClaimed::Claimed);
        assert_eq!(s.load().lifecycle(), Lifecycle::Running);
    }
}
