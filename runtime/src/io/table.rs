//! The registration table: which `ScheduledIo` an event's token names
//! (README.md, steps T1-T3). A slab of slots under one lock; a token is the
//! slot's index plus the slot's generation, so an event for a registration
//! that is gone, whose slot now holds another one, names nobody.

use std::io;

use magpie_core::sync::atomic::{AtomicUsize, Ordering};
use magpie_core::sync::{Arc, Mutex};

use super::scheduled_io::ScheduledIo;

/// Bits of a token that hold the slot index; the generation is above them.
pub(crate) const INDEX_BITS: u32 = 24;
const INDEX_MASK: usize = (1 << INDEX_BITS) - 1;
/// Slots the table will hand out. The all-ones index is never used, so no
/// token equals [`WAKE_TOKEN`](super::driver::WAKE_TOKEN) (`usize::MAX`).
pub(crate) const MAX_REGISTRATIONS: usize = INDEX_MASK;
/// Generations wrap within the bits above the index.
const GENERATION_MASK: usize = usize::MAX >> INDEX_BITS;
// The largest token a slot can have is not the wake token.
const _: () = assert!((GENERATION_MASK << INDEX_BITS) | (MAX_REGISTRATIONS - 1) != usize::MAX);

struct Slot {
    generation: usize,
    io: Option<Arc<ScheduledIo>>,
}

#[derive(Default)]
struct Slab {
    slots: Vec<Slot>,
    free: Vec<usize>,
    shutdown: bool,
}

/// The table. Cloning the `Arc<ScheduledIo>` out of it is how dispatch
/// reaches a resource without holding the lock while it wakes tasks.
pub(crate) struct Table {
    slab: Mutex<Slab>,
    /// Live registrations, written under the lock, read without it (by the
    /// zero-timeout polls, which a runtime without sockets skips). Relaxed: a
    /// hint; a poll skipped on a stale zero only delays an event to the next
    /// poll, the kernel keeps it.
    live: AtomicUsize,
}

#[inline]
fn token_of(index: usize, generation: usize) -> usize {
    (generation << INDEX_BITS) | index
}

impl Table {
    pub(crate) fn new() -> Self {
        Self {
            slab: Mutex::new(Slab::default()),
            live: AtomicUsize::new(0),
        }
    }

    /// T1: a fresh `ScheduledIo` in a free slot, and its token. Refused once
    /// the table is shut down, or when every slot is taken.
    pub(crate) fn insert(&self) -> io::Result<(usize, Arc<ScheduledIo>)> {
        let io = Arc::new(ScheduledIo::new());
        let mut slab = self.slab.lock().unwrap_or_else(|e| e.into_inner());
        if slab.shutdown {
            return Err(shutdown_error());
        }
        let index = match slab.free.pop() {
            Some(i) => i,
            None if slab.slots.len() < MAX_REGISTRATIONS => {
                slab.slots.push(Slot {
                    generation: 0,
                    io: None,
                });
                slab.slots.len() - 1
            }
            None => {
                return Err(io::Error::other(
                    "magpie I/O driver: too many registrations (16,777,215)",
                ))
            }
        };
        let slot = &mut slab.slots[index];
        debug_assert!(slot.io.is_none());
        slot.io = Some(Arc::clone(&io));
        let token = token_of(index, slot.generation);
        self.live
            .store(slab.slots.len() - slab.free.len(), Ordering::Relaxed);
        Ok((token, io))
    }

    /// T2: the registration behind `token`, if it is still the one the
    /// token was made for.
    pub(crate) fn get(&self, token: usize) -> Option<Arc<ScheduledIo>> {
        let index = token & INDEX_MASK;
        let slab = self.slab.lock().unwrap_or_else(|e| e.into_inner());
        let slot = slab.slots.get(index)?;
        // broken: the slot alone names the registration; a stale event for
        // a slot that was reused reaches the new registration.
        #[cfg(not(magpie_broken = "token_without_generation"))]
        if token_of(index, slot.generation) != token {
            return None;
        }
        slot.io.clone()
    }

    /// T3: frees `token`'s slot and moves its generation on, so the token
    /// (and any event still carrying it) names nobody from now on.
    pub(crate) fn remove(&self, token: usize) {
        let index = token & INDEX_MASK;
        let mut slab = self.slab.lock().unwrap_or_else(|e| e.into_inner());
        let Some(slot) = slab.slots.get_mut(index) else {
            return;
        };
        if token_of(index, slot.generation) != token || slot.io.is_none() {
            return;
        }
        slot.io = None;
        slot.generation = (slot.generation + 1) & GENERATION_MASK;
        slab.free.push(index);
        self.live
            .store(slab.slots.len() - slab.free.len(), Ordering::Relaxed);
    }

    /// Closes the table and hands back every live registration, for the
    /// driver's shutdown to mark and wake.
    pub(crate) fn shutdown(&self) -> Vec<Arc<ScheduledIo>> {
        let mut slab = self.slab.lock().unwrap_or_else(|e| e.into_inner());
        slab.shutdown = true;
        slab.slots.iter().filter_map(|s| s.io.clone()).collect()
    }

    /// Live registrations (a snapshot).
    pub(crate) fn len(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }
}

/// The error every I/O operation on a shut-down runtime's resource returns.
pub(crate) fn shutdown_error() -> io::Error {
    io::Error::other("runtime shut down: the magpie I/O driver is gone")
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_reused_slot_gets_a_new_token_and_the_old_one_names_nobody() {
        let t = Table::new();
        let (a, io_a) = t.insert().unwrap();
        t.remove(a);
        let (b, io_b) = t.insert().unwrap();
        assert_eq!(a & INDEX_MASK, b & INDEX_MASK, "the slot was reused");
        assert_ne!(a, b);
        assert!(t.get(a).is_none());
        assert!(Arc::ptr_eq(&t.get(b).unwrap(), &io_b));
        assert!(!Arc::ptr_eq(&io_a, &io_b));
        // Removing by the stale token does not free the new registration.
        t.remove(a);
        assert_eq!(t.len(), 1);
        assert!(t.get(b).is_some());
    }

    #[test]
    fn a_shut_down_table_refuses_new_registrations() {
        let t = Table::new();
        let (_a, _io) = t.insert().unwrap();
        assert_eq!(t.shutdown().len(), 1);
        assert!(t.insert().is_err());
    }
}
