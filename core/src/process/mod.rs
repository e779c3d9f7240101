//! Processes: the lock-free parts of magpie's step-driven processes
//! (seed 002).
//!
//! A [`Mailbox`] is what every process has: its packed [`state`] word
//! (IDLE, BLOCKED, READY, RUNNING, COMPLETE plus the NOTIFIED and CANCELLED
//! flags), a lock-free multi-producer single-consumer event queue (a list
//! of blocks of [`BLOCK_CAP`] slots, recycled by the consumer), and an
//! admission word (a count of queued events plus a CLOSED bit) that bounds
//! the mailbox when asked to and refuses events once the process is done.
//!
//! - Producers (any thread) call [`Mailbox::send`]: admit, push, notify. The
//!   result says whether the caller must push the process to a run queue.
//! - The worker holding the process's one run-queue entry calls
//!   [`Mailbox::transition_to_running`] and gets a [`Stepping`] token: the
//!   only way to pop events (single consumer by construction), and the only
//!   way to end the step ([`Stepping::finish`] or [`Stepping::complete`]),
//!   both of which consume it.
//!
//! The protocol, with numbered steps and the argument for why no event and
//! no wakeup is lost, is in `README.md` beside this file; the loom models are
//! in `core/tests/loom_process.rs`.

mod mpsc;
pub mod state;

pub use mpsc::{BLOCK_CAP, RECYCLE_TRIES};

use core::fmt;

use crate::sync::atomic::{AtomicU64, Ordering};
use crate::sync::UnsafeCell;
use mpsc::{LazyQueue, Pop, Queue};
pub use state::{
    Lifecycle, Snapshot, State, TransitionToCancelled, TransitionToClaimed, TransitionToNotified,
    TransitionToRunning, TransitionToWaiting, Wait,
};

/// Bit 63 of the admission word: the process is finished; every later
/// [`Mailbox::send`] is refused with [`Refusal::Closed`].
pub const CLOSED: u64 = 1 << 63;
/// Bit 62 of the admission word: a throttled sender may be waiting for this
/// mailbox to drain (README.md, "Throttled senders", steps S1-S3, D1-D3).
/// Set by [`Mailbox::register_sender_wait`], cleared by the step whose
/// release finds the mailbox drained to [`SENDER_RESUME_DEPTH`].
pub const WAITERS: u64 = 1 << 62;
/// The queued-event count: bits 0..62 of the admission word.
pub const COUNT_MASK: u64 = WAITERS - 1;
const _: () = assert!(CLOSED & COUNT_MASK == 0 && WAITERS & COUNT_MASK == 0);
const _: () = assert!(CLOSED & WAITERS == 0 && CLOSED | WAITERS | COUNT_MASK == u64::MAX);

/// The depth a mailbox must drain to before the senders waiting on it are
/// woken (README.md, "Throttled senders"). The runtime's
/// `SEND_RESUME_DEPTH` is this value. 1 under loom, so a model drains past
/// it with two events.
#[cfg(not(loom))]
pub const SENDER_RESUME_DEPTH: u64 = 512;
/// The depth a mailbox must drain to before the senders waiting on it are
/// woken; 1 under loom (512 otherwise).
#[cfg(loom)]
pub const SENDER_RESUME_DEPTH: u64 = 1;

/// What [`Mailbox::register_sender_wait`] found (README.md, "Throttled
/// senders", step S2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use = "Wait means the sender may stop; anything else means it must not"]
pub enum SenderWait {
    /// The mailbox is deeper than [`SENDER_RESUME_DEPTH`] and open, and
    /// [`WAITERS`] is set: the step that drains it (or closes it) will wake
    /// every sender on its list. The sender may end its step as IDLE.
    Wait,
    /// Drained to [`SENDER_RESUME_DEPTH`] already: keep running.
    Drained,
    /// The process has finished: keep running (the pressure is gone).
    Closed,
}

/// A step's release found senders to wake (README.md, "Throttled senders",
/// steps D1-D3, and "Completion", step 1): the caller takes the list the
/// senders put themselves on and wakes each ([`Mailbox::wake`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use = "true means the senders on the list must be woken"]
pub struct WakeSenders(pub bool);

/// Why [`Mailbox::send`] gave the value back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The process has finished.
    Closed,
    /// The mailbox holds `bound` events already.
    Full,
}

/// A value [`Mailbox::send`] did not accept, and why.
#[derive(PartialEq, Eq)]
pub struct Refused<T> {
    /// The value, handed back.
    pub value: T,
    /// Why.
    pub reason: Refusal,
}

impl<T> fmt::Debug for Refused<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Refused")
            .field("reason", &self.reason)
            .finish_non_exhaustive()
    }
}

/// A value [`Mailbox::send`] accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use = "schedule == true means the caller must push the process to a run queue"]
pub struct Sent {
    /// The process went from IDLE/BLOCKED to READY: the caller must push it
    /// to a run queue (it now owns the one entry READY promises).
    pub schedule: bool,
    /// Events queued right after this one was admitted (for a high-water
    /// mark).
    pub depth: u64,
}

/// A process's state word, event queue and admission word, and its body:
/// what only the holder of its [`Stepping`] token may touch (the runtime
/// keeps the process itself there; README.md, "The body").
pub struct Mailbox<T, B = ()> {
    state: State,
    /// [`CLOSED`] | count of admitted events not yet popped.
    admission: AtomicU64,
    queue: LazyQueue<T>,
    /// Reached only through [`Stepping::body`].
    body: UnsafeCell<B>,
}

// SAFETY: events move from producer threads to the stepping thread
// (T: Send), and the body moves from one token holder's thread to the
// next (B: Send); `body` is touched only through the one `Stepping` token,
// whose transitions order one holder's accesses before the next's
// (README.md, "The body"); every other field is atomic or the event
// queue, which is `Sync` for `T: Send`.
unsafe impl<T: Send, B: Send> Sync for Mailbox<T, B> {}

impl<T, B> fmt::Debug for Mailbox<T, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let a = self.admission.load(Ordering::Relaxed);
        f.debug_struct("Mailbox")
            .field("state", &self.state.load())
            .field("queued", &(a & COUNT_MASK))
            .field("closed", &(a & CLOSED != 0))
            .finish()
    }
}

impl<T: Send> Default for Mailbox<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Send> Mailbox<T> {
    /// A new process's mailbox with no body: READY (the spawner pushes it
    /// to a run queue), empty, open.
    pub fn new() -> Self {
        Self::with_body(())
    }
}

impl<T: Send, B> Mailbox<T, B> {
    /// A new process's mailbox holding `body`: READY (the spawner pushes it
    /// to a run queue), empty, open.
    pub fn with_body(body: B) -> Self {
        Self {
            state: State::new(),
            admission: AtomicU64::new(0),
            queue: LazyQueue::new(),
            body: UnsafeCell::new(body),
        }
    }

    /// The state word's current value.
    pub fn snapshot(&self) -> Snapshot {
        self.state.load()
    }

    /// Events admitted and not yet popped (a hint: it moves under you).
    pub fn len(&self) -> usize {
        (self.admission.load(Ordering::Relaxed) & COUNT_MASK) as usize
    }

    /// Whether [`Mailbox::len`] is 0.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the process has finished and refuses events.
    pub fn is_closed(&self) -> bool {
        // Acquire: pairs with the Release of `close` in `Stepping::complete`.
        self.admission.load(Ordering::Acquire) & CLOSED != 0
    }

    /// Producer protocol (README.md, "Producer"): 1. admit (refused if
    /// closed, or if `bound` is given and that many events are queued);
    /// 2. push; 3. notify. Any thread.
    ///
    /// Inline: it is most of a send from a step, and the call moved the
    /// value and the result through memory (about 20 instructions a
    /// message by callgrind).
    #[inline(always)]
    pub fn send(&self, value: T, bound: Option<usize>) -> Result<Sent, Refused<T>> {
        let depth = match self.admit(bound) {
            Ok(depth) => depth,
            Err(reason) => return Err(Refused { value, reason }),
        };
        self.queue.push(value);
        // The push's ready bit is set before this RMW; its Release makes the event
        // visible to the step that reads the value it writes (README,
        // "Why no event is lost").
        let schedule = self.state.notify() == TransitionToNotified::Schedule;
        Ok(Sent { schedule, depth })
    }

    /// The producer protocol for several values at once (README.md,
    /// "Batches"): 1. one admit of `values.len()` events, ignoring any
    /// bound; 2. one batch push (steps B1-B4); 3. one notify. Any thread.
    /// Refused `Closed` as a whole, with the values left in `values`; else
    /// `values` is left empty.
    pub fn send_batch(&self, values: &mut Vec<T>) -> Result<Sent, Refusal> {
        let n = values.len() as u64;
        let depth = self.admit_unbounded(n)?;
        if n == 0 {
            return Ok(Sent {
                schedule: false,
                depth,
            });
        }
        self.queue.push_batch(values);
        // After the last ready store of the batch (B4), as in `send`.
        let schedule = self.state.notify() == TransitionToNotified::Schedule;
        Ok(Sent { schedule, depth })
    }

    /// Admits `n` events whatever the bound; the queue's depth after them.
    fn admit_unbounded(&self, n: u64) -> Result<u64, Refusal> {
        // Relaxed would do for the count; AcqRel orders this admit against
        // `close` (its Release/Acquire pair is the CLOSED bit itself:
        // whichever RMW comes second sees the other).
        let prev = self.admission.fetch_add(n, Ordering::AcqRel);
        // broken variant `admit_ignores_closed`: this check is gone.
        #[cfg(not(magpie_broken = "admit_ignores_closed"))]
        if prev & CLOSED != 0 {
            // Nothing to undo: the count is meaningless once closed.
            return Err(Refusal::Closed);
        }
        Ok((prev & COUNT_MASK) + n)
    }

    fn admit(&self, bound: Option<usize>) -> Result<u64, Refusal> {
        match bound {
            None => self.admit_unbounded(1),
            Some(bound) => {
                let bound = bound as u64;
                // AcqRel: as above.
                let r = self
                    .admission
                    .fetch_update(Ordering::AcqRel, Ordering::Acquire, |a| {
                        #[cfg(not(magpie_broken = "admit_ignores_closed"))]
                        let closed = a & CLOSED != 0;
                        // broken: CLOSED is not looked at.
                        #[cfg(magpie_broken = "admit_ignores_closed")]
                        let closed = false;
                        if closed || a & COUNT_MASK >= bound {
                            None
                        } else {
                            Some(a + 1)
                        }
                    });
                match r {
                    Ok(prev) => Ok((prev & COUNT_MASK) + 1),
                    Err(a) if a & CLOSED != 0 => Err(Refusal::Closed),
                    Err(_) => Err(Refusal::Full),
                }
            }
        }
    }

    /// A wake without an event (README.md, "Throttled senders", step D3):
    /// the notify of the producer protocol (step P3) with nothing pushed.
    /// `Schedule` means the caller must push the process to a run queue; a
    /// READY or RUNNING process gets `NOTIFIED` and runs again after its
    /// step.
    pub fn wake(&self) -> TransitionToNotified {
        self.state.notify()
    }

    /// Throttled-sender protocol, step S2 (README.md, "Throttled
    /// senders"), on the *receiver's* mailbox, after the sender has put
    /// itself on the receiver's list (step S1): sets [`WAITERS`] with one
    /// RMW and reads the depth in the same RMW.
    pub fn register_sender_wait(&self) -> SenderWait {
        // broken variant `sender_wait_checks_before_registering`: the depth
        // is read by a load before the bit is set, so a drain between the
        // two sees no WAITERS and wakes nobody.
        #[cfg(magpie_broken = "sender_wait_checks_before_registering")]
        let prev = {
            let a = self.admission.load(Ordering::Acquire);
            self.admission.fetch_or(WAITERS, Ordering::AcqRel);
            a
        };
        // AcqRel: Release pairs with the Acquire of the drain's `fetch_sub`
        // (D1) and of `complete`'s `fetch_or(CLOSED)`, so the step that
        // sees WAITERS also sees the sender's entry on the list (S1);
        // Acquire pairs with their Release, so a sender that reads a
        // drained or closed word sees what that step did. One RMW: the
        // depth read and the bit set cannot be split by a drain.
        #[cfg(not(magpie_broken = "sender_wait_checks_before_registering"))]
        let prev = self.admission.fetch_or(WAITERS, Ordering::AcqRel);
        if prev & CLOSED != 0 {
            SenderWait::Closed
        } else if prev & COUNT_MASK <= SENDER_RESUME_DEPTH {
            SenderWait::Drained
        } else {
            SenderWait::Wait
        }
    }

    /// Requests cancellation (README.md, "Cancellation"). `Schedule` means
    /// the caller must push the process to a run queue.
    pub fn cancel(&self) -> TransitionToCancelled {
        self.state.cancel()
    }

    /// The holder of the process's run-queue entry starts a step. `None`
    /// means the entry was stale (the process was claimed for close or has
    /// completed): drop it.
    pub fn transition_to_running(&self) -> Option<Stepping<'_, T, B>> {
        match self.state.transition_to_running() {
            TransitionToRunning::Success { cancelled } => Some(Stepping {
                mailbox: self,
                queue: None,
                cancelled,
                popped: 0,
                wake_senders: false,
            }),
            TransitionToRunning::NotReady(_) => None,
        }
    }

    /// Shutdown takes a process no worker is stepping, to close it. `Err`
    /// says why not (a worker is stepping it, or it is complete).
    pub fn claim_for_close(&self) -> Result<Stepping<'_, T, B>, TransitionToClaimed> {
        match self.state.claim_for_close() {
            TransitionToClaimed::Claimed => Ok(Stepping {
                mailbox: self,
                queue: None,
                cancelled: self.state.load().is_cancelled(),
                popped: 0,
                wake_senders: false,
            }),
            other => Err(other),
        }
    }
}

/// Proof that the holder is stepping the process (it made the READY ->
/// RUNNING transition, or claimed it for close). There is at most one per
/// mailbox at any time, so its [`pop`](Stepping::pop) is the single consumer
/// the event queue needs. It ends only by [`finish`](Stepping::finish) or
/// [`complete`](Stepping::complete); dropping it leaves the process RUNNING
/// forever (nothing is freed wrongly, but the process never runs again).
#[must_use = "a step must end with finish or complete"]
pub struct Stepping<'a, T, B = ()> {
    mailbox: &'a Mailbox<T, B>,
    /// The event queue once a pop found it built (step L2), kept for the
    /// rest of the step.
    queue: Option<&'a Queue<T>>,
    cancelled: bool,
    popped: u64,
    /// A release found [`WAITERS`] set and the mailbox drained (step D2
    /// done): the senders on the list must be woken.
    wake_senders: bool,
}

impl<T, B> fmt::Debug for Stepping<'_, T, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stepping")
            .field("cancelled", &self.cancelled)
            .field("popped", &self.popped)
            .finish_non_exhaustive()
    }
}

impl<'a, T: Send, B> Stepping<'a, T, B> {
    /// CANCELLED was set when the step began.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled
    }

    /// The process's body (README.md, "The body"): only the holder of the
    /// token reaches it, so no lock is needed.
    pub fn body(&mut self) -> &mut B {
        // SAFETY: 1. This token is the only one for this mailbox (READY ->
        // RUNNING and claim_for_close hand out at most one, and the next
        // requires leaving RUNNING, which consumes this one), and `&mut
        // self` makes this borrow the only one from it. 2. The previous
        // holder's accesses happen before this one: its `finish` (Release
        // RMW) heads a release sequence on the state word that every later
        // RMW (notifies, cancels) continues, and the transition that
        // handed out this token is an Acquire RMW reading from it (or the
        // holder's own Requeue); a token holder never touches the body
        // after consuming its token.
        self.mailbox.body.with_mut(|b| unsafe { &mut *b })
    }

    /// The oldest queued event, or `None` if the queue is empty (or a
    /// producer is mid-push: its notify will re-queue the process).
    pub fn pop(&mut self) -> Option<T> {
        let queue = match self.queue {
            Some(queue) => queue,
            None => {
                // L2: nothing pushed yet means nothing to pop.
                let queue = self.mailbox.queue.get()?;
                self.queue = Some(queue);
                queue
            }
        };
        // SAFETY: this token is the only one for this mailbox (READY ->
        // RUNNING and claim_for_close hand out at most one, and the next
        // requires leaving RUNNING, which consumes it), so this is the single
        // consumer; the transitions' AcqRel order one step's pops before the
        // next's.
        match unsafe { queue.pop() } {
            Pop::Data(v) => {
                self.popped += 1;
                Some(v)
            }
            Pop::Empty | Pop::Inconsistent => None,
        }
    }

    /// Gives back the admission count of the events popped so far, so
    /// bounded senders see the room at once rather than at the step's end.
    /// Throttled-sender steps D1-D2 (README.md, "Throttled senders"): if
    /// [`WAITERS`] was set and the mailbox is now at most
    /// [`SENDER_RESUME_DEPTH`] deep, the bit is cleared and the step owes
    /// the senders on the list a wake ([`Stepping::take_wake_senders`],
    /// [`Stepping::finish_waking`]).
    pub fn release_popped(&mut self) {
        if self.popped > 0 {
            let n = std::mem::take(&mut self.popped);
            // D1. AcqRel: Acquire pairs with the Release of a sender's
            // `register_sender_wait` (S2), so seeing WAITERS here means
            // seeing that sender's entry on the list (S1); Release pairs
            // with its Acquire, so a sender that reads the drained count
            // sees the pops. The count itself needs no order: the events
            // travel through the queue's Release/Acquire, and a bounded
            // sender that reads a stale (higher) count is refused `Full`
            // and retries later.
            let prev = self.mailbox.admission.fetch_sub(n, Ordering::AcqRel);
            if prev & WAITERS != 0 {
                self.release_waiters_slow((prev & COUNT_MASK).saturating_sub(n));
            }
        }
    }

    /// Step D2 for a release that found WAITERS set and left `now` events.
    #[cold]
    fn release_waiters_slow(&mut self, now: u64) {
        // Any release that leaves the mailbox at or below the depth wakes,
        // not only the one that crosses it: a sender may have registered
        // (S2, reading a deep count) just before a later release.
        if now <= SENDER_RESUME_DEPTH {
            // D2. AcqRel: Acquire pairs with the Release of every
            // `register_sender_wait` before it, so their list entries are
            // seen by the take in D3; a register after it sets the bit
            // again and reads the drained count (Drained) or, if the
            // mailbox filled again, waits for a later D1.
            self.mailbox.admission.fetch_and(!WAITERS, Ordering::AcqRel);
            self.wake_senders = true;
        }
    }

    /// Whether a release of this step found senders to wake (steps
    /// D1-D2), and forget it: the caller takes the list and wakes each
    /// (D3).
    pub fn take_wake_senders(&mut self) -> WakeSenders {
        WakeSenders(std::mem::take(&mut self.wake_senders))
    }

    /// Ends the step without completing (README.md, "Worker", step 4).
    /// `Requeue`: the caller must push the process to a run queue. For a
    /// mailbox that senders may wait on, use
    /// [`finish_waking`](Self::finish_waking): this one forgets the wake.
    pub fn finish(self, wait: Wait) -> TransitionToWaiting {
        self.finish_waking(wait).0
    }

    /// [`finish`](Self::finish), and whether the senders waiting on this
    /// mailbox must be woken (steps D1-D3, by this release or an earlier
    /// one of the step not yet taken).
    pub fn finish_waking(mut self, wait: Wait) -> (TransitionToWaiting, WakeSenders) {
        self.release_popped();
        let wake = self.take_wake_senders();
        (self.mailbox.state.transition_to_waiting(wait), wake)
    }

    /// Ends the process (README.md, "Completion"): 1. CLOSED on the
    /// admission word, so later sends are refused; 2. COMPLETE on the state
    /// word, so notifies stop scheduling it; 3. every event still queued is
    /// handed to `leftover`. Events a producer admitted before step 1 but
    /// makes ready after step 3 stay in the queue and are dropped with the
    /// mailbox.
    ///
    /// The result says whether senders may be waiting on this mailbox
    /// (README.md, "Throttled senders"): [`WAITERS`] was set, or a release
    /// of this step owed them a wake. The caller takes the list and wakes
    /// each, so none waits for a mailbox that will never drain.
    pub fn complete(mut self, mut leftover: impl FnMut(T)) -> WakeSenders {
        // Release: pairs with the Acquire of `is_closed` and of a refused
        // admit, so a sender refused `Closed` sees everything the process
        // did; AcqRel because it is an RMW ordered against every admit and
        // every `register_sender_wait` (whichever comes second sees the
        // other: WAITERS here, or CLOSED there).
        let prev = self.mailbox.admission.fetch_or(CLOSED, Ordering::AcqRel);
        let _ = self.mailbox.state.transition_to_complete();
        while let Some(v) = self.pop() {
            leftover(v);
        }
        // broken variant `complete_ignores_waiters`: the end wakes only
        // what a release of this step owed, so a sender registered on the
        // deep mailbox waits for a drain that will never come.
        #[cfg(magpie_broken = "complete_ignores_waiters")]
        let prev = prev & !WAITERS;
        WakeSenders(prev & WAITERS != 0 || self.wake_senders)
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
