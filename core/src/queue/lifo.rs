//! The LIFO slot: one task per worker, the newest one, run before the ring.
//!
//! Tasks may be up to ~128 bytes, too big for an atomic, so the task lives in
//! an `UnsafeCell` and a one-byte state word says who may touch it. Entering
//! the cell takes the `BUSY` bit with a CAS and leaving it is one Release
//! store: a tiny lock whose critical section is a single move of one `T` (no
//! allocation, no user code, cannot panic). `README.md`, "LIFO slot", gives
//! the states and transitions as numbered steps (L1-L5).

use core::fmt;
use core::mem::MaybeUninit;

use super::Backoff;
use crate::sync::atomic::{AtomicU8, Ordering};
use crate::sync::UnsafeCell;

/// The cell holds a task.
const OCCUPIED: u8 = 0b001;
/// A thread is inside the cell (moving a task in or out). While it is set no
/// other thread reads or writes the cell, and `TRANSITIONING_TO_PARK` does not
/// change.
const BUSY: u8 = 0b010;
/// The owner is on its way to park: pushes are refused so no task can land in
/// the slot of a worker that is about to sleep.
const TRANSITIONING_TO_PARK: u8 = 0b100;

/// One-task slot per worker: the newest task, run before the ring. Stealable
/// and remotely pushable, so every operation takes `&self` and is
/// thread-safe. Its state word also carries the owner's
/// `TRANSITIONING_TO_PARK` flag. `Send + Sync`.
pub struct LifoSlot<T> {
    state: AtomicU8,
    task: UnsafeCell<MaybeUninit<T>>,
}

// SAFETY: the slot moves `T` values between threads (`T: Send`). The cell is
// touched only by the thread holding `BUSY` (or by the owner during
// `begin_park`, see L4), so no `&T` is shared and `T: Sync` is not needed.
unsafe impl<T: Send> Send for LifoSlot<T> {}
// SAFETY: as above: all access to the cell is exclusive by the state protocol.
unsafe impl<T: Send> Sync for LifoSlot<T> {}

impl<T: Send> Default for LifoSlot<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Send> LifoSlot<T> {
    /// An empty slot whose owner is not parking.
    pub fn new() -> Self {
        LifoSlot {
            state: AtomicU8::new(0),
            task: UnsafeCell::new(MaybeUninit::uninit()),
        }
    }

    /// L1: takes `BUSY` from a state without it. Returns the state taken from.
    /// `accept` sees each candidate state and may refuse it (`Err`), which
    /// ends the attempt; `wait_if_busy` chooses between spinning and giving up
    /// when another thread is inside.
    #[inline]
    fn enter(&self, wait_if_busy: bool, accept: impl Fn(u8) -> bool) -> Result<u8, u8> {
        let mut backoff = Backoff::default();
        let mut state = self.state.load(Ordering::Relaxed);
        loop {
            if !accept(state) {
                return Err(state);
            }
            if state & BUSY != 0 {
                if !wait_if_busy {
                    return Err(state);
                }
                backoff.snooze();
                state = self.state.load(Ordering::Relaxed);
                continue;
            }
            // Acquire: pairs with the Release store that ended the previous
            // critical section (`leave`), so its move in or out of the cell
            // happens-before ours.
            match self.state.compare_exchange_weak(
                state,
                state | BUSY,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ok(state),
                Err(actual) => state = actual,
            }
        }
    }

    /// L3: leaves the critical section, publishing the cell's new contents.
    #[inline]
    fn leave(&self, state: u8) {
        debug_assert_eq!(state & BUSY, 0);
        // Release: pairs with the Acquire CAS in `enter` of the next thread to
        // enter the cell.
        self.state.store(state, Ordering::Release);
    }

    /// Moves the task out of the cell.
    ///
    /// # Safety
    ///
    /// The caller holds `BUSY` (or is the owner in `begin_park`, L4) and the
    /// state it entered from had `OCCUPIED` set.
    #[inline]
    unsafe fn read(&self) -> T {
        self.task.with(|cell| {
            // SAFETY: exclusive access and an initialised cell (above).
            unsafe { cell.read().assume_init() }
        })
    }

    /// Puts `task` in the slot.
    ///
    /// `Ok(evicted)` hands back the previous occupant, if any, which the
    /// caller pushes to the ring or the inject queue. `Err(task)` when the
    /// owner is transitioning to park: the caller must route the task to the
    /// inject queue and notify a worker.
    pub fn push(&self, task: T) -> Result<Option<T>, T> {
        // L2: refuse once the owner is parking; wait out anyone inside.
        let state = match self.enter(true, |s| s & TRANSITIONING_TO_PARK == 0) {
            Ok(state) => state,
            Err(_) => return Err(task),
        };
        let evicted = if state & OCCUPIED != 0 {
            // SAFETY: we hold BUSY and the cell was occupied.
            Some(unsafe { self.read() })
        } else {
            None
        };
        self.task.with_mut(|cell| {
            // SAFETY: we hold BUSY; the cell's old task (if any) was moved out.
            unsafe { cell.write(MaybeUninit::new(task)) }
        });
        // TRANSITIONING_TO_PARK was clear when we entered and does not change
        // while BUSY is held.
        self.leave(OCCUPIED);
        Ok(evicted)
    }

    /// Owner: takes the task, if any. Waits out a push or steal in progress.
    #[inline]
    pub fn take(&self) -> Option<T> {
        self.take_inner(true)
    }

    /// Any other thread: takes the task, if any. Gives up (`None`) rather than
    /// wait if another thread is inside the slot.
    pub fn steal(&self) -> Option<T> {
        self.take_inner(false)
    }

    #[cfg(not(magpie_broken = "lifo_steal_without_busy"))]
    #[inline]
    fn take_inner(&self, wait_if_busy: bool) -> Option<T> {
        // Fast path: an empty slot costs one load. Relaxed: a hint; `enter`
        // decides.
        if self.state.load(Ordering::Relaxed) & (OCCUPIED | BUSY) == 0 {
            return None;
        }
        // Accept only states that hold a task, or that are BUSY (the task may
        // be on its way in).
        let state = self
            .enter(wait_if_busy, |s| s & (OCCUPIED | BUSY) != 0)
            .ok()?;
        if state & OCCUPIED == 0 {
            // A thread inside took the task out before we entered.
            self.leave(state);
            return None;
        }
        // SAFETY: we hold BUSY and the cell was occupied.
        let task = unsafe { self.read() };
        self.leave(state & !OCCUPIED);
        Some(task)
    }

    /// Broken: empties the state word with one CAS and only then reads the
    /// cell, so a push can enter and overwrite the cell during the read.
    #[cfg(magpie_broken = "lifo_steal_without_busy")]
    fn take_inner(&self, wait_if_busy: bool) -> Option<T> {
        let _ = wait_if_busy;
        let mut state = self.state.load(Ordering::Relaxed);
        loop {
            if state & OCCUPIED == 0 || state & BUSY != 0 {
                return None;
            }
            match self.state.compare_exchange(
                state,
                state & !OCCUPIED,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                // SAFETY: none; this is the bug.
                Ok(_) => return Some(unsafe { self.read() }),
                Err(actual) => state = actual,
            }
        }
    }

    /// Owner, at the start of its park sequence: sets `TRANSITIONING_TO_PARK`
    /// and takes the occupant in the same atomic step (L4), so no push can
    /// land unseen after this. The caller runs the returned task or requeues
    /// it before parking.
    #[cfg(not(magpie_broken = "begin_park_two_steps"))]
    pub fn begin_park(&self) -> Option<T> {
        let mut backoff = Backoff::default();
        let mut state = self.state.load(Ordering::Relaxed);
        loop {
            debug_assert_eq!(
                state & TRANSITIONING_TO_PARK,
                0,
                "begin_park twice without end_park"
            );
            if state & BUSY != 0 {
                backoff.snooze();
                state = self.state.load(Ordering::Relaxed);
                continue;
            }
            let occupied = state & OCCUPIED != 0;
            // One CAS: the flag goes up and the task (if any) becomes ours.
            // While the flag is up no push enters and the state holds no task,
            // so neither take nor steal enters either: the cell is ours
            // without BUSY. Acquire: pairs with the Release store of the last
            // critical section (`leave`) that wrote the cell.
            match self.state.compare_exchange_weak(
                state,
                TRANSITIONING_TO_PARK,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) if occupied => {
                    // SAFETY: the cell was occupied and the CAS made it ours
                    // alone (above).
                    let task = unsafe { self.read() };
                    // Release: orders our read of the cell before the next
                    // push's write. `end_park` is a RMW and continues this
                    // release sequence, which ends at that push's Acquire CAS.
                    self.state.store(TRANSITIONING_TO_PARK, Ordering::Release);
                    return Some(task);
                }
                Ok(_) => return None,
                Err(actual) => state = actual,
            }
        }
    }

    /// Broken: takes the task, then raises the flag in a second step. A push
    /// landing between the two is stranded in the slot of a parked worker.
    #[cfg(magpie_broken = "begin_park_two_steps")]
    pub fn begin_park(&self) -> Option<T> {
        let task = self.take();
        self.state.fetch_or(TRANSITIONING_TO_PARK, Ordering::AcqRel);
        task
    }

    /// Owner, after waking: pushes are accepted again (L5).
    pub fn end_park(&self) {
        // Relaxed: clearing the flag publishes nothing. The cell is empty and
        // no one is inside (L4), and as an RMW this continues the release
        // sequence of `begin_park`'s store for the next push's Acquire.
        let prev = self
            .state
            .fetch_and(!TRANSITIONING_TO_PARK, Ordering::Relaxed);
        debug_assert_eq!(prev & BUSY, 0, "end_park while someone is inside");
    }

    /// Whether the slot looks empty (no task, no take in progress). A hint
    /// for the last searcher's re-check; `take`/`steal` decide atomically.
    pub fn is_empty(&self) -> bool {
        // Acquire: pairs with the Release store that filled the slot, so a
        // caller that sees it full and then steals finds the task (a hint
        // either way: the slot can change right after).
        self.state.load(Ordering::Acquire) & (OCCUPIED | BUSY) == 0
    }

    /// Whether the owner is between `begin_park` and `end_park`. A hint:
    /// `push` itself decides atomically.
    pub fn is_transitioning(&self) -> bool {
        // Relaxed: a hint; `push` re-reads the flag in its CAS.
        self.state.load(Ordering::Relaxed) & TRANSITIONING_TO_PARK != 0
    }
}

impl<T> Drop for LifoSlot<T> {
    fn drop(&mut self) {
        // Relaxed: `&mut self`, no other thread can be inside.
        if self.state.load(Ordering::Relaxed) & OCCUPIED != 0 {
            self.task.with_mut(|cell| {
                // SAFETY: the cell is occupied and we have `&mut self`.
                unsafe { (*cell).assume_init_drop() }
            });
        }
    }
}

impl<T> fmt::Debug for LifoSlot<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state.load(Ordering::Relaxed);
        f.debug_struct("LifoSlot")
            .field("occupied", &(state & OCCUPIED != 0))
            .field("busy", &(state & BUSY != 0))
            .field(
                "transitioning_to_park",
                &(state & TRANSITIONING_TO_PARK != 0),
            )
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::queue::counted::Drops;

    #[test]
    fn push_into_empty_slot_then_take() {
        let slot = LifoSlot::new();
        assert_eq!(slot.take(), None);
        assert_eq!(slot.push(1u32), Ok(None));
        assert_eq!(slot.take(), Some(1));
        assert_eq!(slot.take(), None);
    }

    #[test]
    fn push_evicts_the_previous_occupant() {
        let slot = LifoSlot::new();
        assert_eq!(slot.push(1u32), Ok(None));
        assert_eq!(slot.push(2), Ok(Some(1)));
        assert_eq!(slot.steal(), Some(2));
        assert_eq!(slot.steal(), None);
    }

    #[test]
    fn begin_park_takes_the_occupant_and_refuses_pushes_until_end_park() {
        let slot = LifoSlot::new();
        slot.push(1u32).unwrap();
        assert!(!slot.is_transitioning());
        assert_eq!(slot.begin_park(), Some(1));
        assert!(slot.is_transitioning());
        assert_eq!(slot.push(2), Err(2));
        assert_eq!(slot.take(), None);
        assert_eq!(slot.steal(), None);
        slot.end_park();
        assert!(!slot.is_transitioning());
        assert_eq!(slot.push(3), Ok(None));
        assert_eq!(slot.begin_park(), Some(3));
        slot.end_park();
        assert_eq!(slot.begin_park(), None);
    }

    #[test]
    fn dropping_the_slot_drops_its_occupant_once() {
        let drops = Drops::default();
        let slot = LifoSlot::new();
        slot.push(drops.task(0)).unwrap();
        let evicted = slot.push(drops.task(1)).unwrap().unwrap();
        assert_eq!(evicted.id, 0);
        drop(evicted);
        assert_eq!(drops.count(), 1);
        drop(slot);
        assert_eq!(drops.count(), 2);
    }

    #[test]
    fn lifo_slot_is_send_and_sync() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<LifoSlot<Vec<u8>>>();
    }
}
