//! The three run queues of a worker: the local ring, the LIFO slot and the
//! global inject queue.
//!
//! | type | who uses it | what it is |
//! | --- | --- | --- |
//! | [`Local`] / [`Steal`] | the owning worker / every other worker | a fixed ring of [`LOCAL_QUEUE_CAPACITY`] slots with a two-half `head` (`{steal, real}`) and an owner-written `tail` |
//! | [`LifoSlot`] | owner, stealers, remote pushers | one slot holding the newest task, plus the owner's `TRANSITIONING_TO_PARK` flag |
//! | [`Inject`] | everyone | a lock-free ring of [`INJECT_RING_CAPACITY`] slots for lone pushes, in front of a mutex-guarded backlog; a lock-free length and a closed flag |
//!
//! The protocols (each a list of numbered steps, with the reason for every
//! ordering) are in `README.md` beside this file. The loom models that check
//! them are in `core/tests/loom_queue.rs`.
//!
//! ```
//! use magpie_core::queue::{self, Inject};
//!
//! let inject = Inject::new();
//! let (mut owner, stealer) = queue::local::<u32>();
//! for task in 0..10 {
//!     assert_eq!(owner.push_back_or_overflow(task, &inject), 0);
//! }
//! assert_eq!(owner.pop(), Some(0));
//!
//! // Another worker steals half of the nine left (rounded up) and runs one.
//! let (mut thief, _) = queue::local::<u32>();
//! assert_eq!(stealer.steal_into(&mut thief), Some(1));
//! assert_eq!(thief.len(), 4);
//! assert_eq!(owner.len(), 4);
//! ```

mod inject;
mod inject_ring;
mod lifo;
mod local;

pub use inject::Inject;
pub use inject_ring::INJECT_RING_CAPACITY;
pub use lifo::LifoSlot;
pub use local::{local, Local, Steal};

/// Slots in a [`Local`] ring: 256, or 4 under `cfg(loom)` so the model
/// checker reaches "full" and "wrapped around" in a handful of steps.
///
/// Must be a power of two (slot index = position & (capacity - 1)) and even
/// (overflow and steal move half of it). Pinned by the tests
/// `local_queue_capacity_is_256` and `local_queue_capacity_is_4_under_loom`.
#[cfg(not(loom))]
pub const LOCAL_QUEUE_CAPACITY: usize = 256;

/// Slots in a [`Local`] ring: 256, or 4 under `cfg(loom)` so the model
/// checker reaches "full" and "wrapped around" in a handful of steps.
///
/// Must be a power of two (slot index = position & (capacity - 1)) and even
/// (overflow and steal move half of it). Pinned by the tests
/// `local_queue_capacity_is_256` and `local_queue_capacity_is_4_under_loom`.
#[cfg(loom)]
pub const LOCAL_QUEUE_CAPACITY: usize = 4;

/// Upper bound on the tasks [`Inject::pop_batch_into`] moves under one lock.
pub const MAX_GLOBAL_BATCH: usize = 64;

const _: () = assert!(LOCAL_QUEUE_CAPACITY.is_power_of_two());
const _: () = assert!(LOCAL_QUEUE_CAPACITY >= 2);
// Positions are u32 and compared with wrapping subtraction, which is only
// unambiguous while the ring is far smaller than the position space.
const _: () = assert!(LOCAL_QUEUE_CAPACITY <= 1 << 16);

/// Bounded wait used by the LIFO slot's short critical sections.
///
/// Spins with the CPU hint first, then yields the thread so a preempted holder
/// can run (on a machine with fewer cores than workers spinning alone could
/// burn a whole time slice). Under loom both calls are loom's, which yield to
/// the model scheduler, so spin loops terminate in the model.
#[derive(Debug, Default)]
pub(crate) struct Backoff {
    step: u32,
}

impl Backoff {
    const SPIN_LIMIT: u32 = 6;

    #[inline]
    pub(crate) fn snooze(&mut self) {
        // Under loom one yield is one scheduling point; more would only
        // multiply the interleavings the model explores.
        if cfg!(loom) {
            crate::sync::thread::yield_now();
        } else if self.step < Self::SPIN_LIMIT {
            for _ in 0..(1u32 << self.step) {
                crate::sync::hint::spin_loop();
            }
            self.step += 1;
        } else {
            crate::sync::thread::yield_now();
        }
    }
}

/// Test helper: a task that counts its drops.
#[cfg(all(test, not(loom)))]
pub(crate) mod counted {
    use crate::sync::atomic::{AtomicUsize, Ordering};
    use crate::sync::Arc;

    /// Drops of every `Counted` made from one counter.
    #[derive(Debug, Default, Clone)]
    pub(crate) struct Drops(Arc<AtomicUsize>);

    impl Drops {
        pub(crate) fn task(&self, id: u32) -> Counted {
            Counted {
                id,
                drops: self.clone(),
            }
        }

        pub(crate) fn count(&self) -> usize {
            self.0.load(Ordering::SeqCst)
        }
    }

    /// A task whose drop is counted.
    #[derive(Debug)]
    pub(crate) struct Counted {
        pub(crate) id: u32,
        drops: Drops,
    }

    impl Drop for Counted {
        fn drop(&mut self) {
            self.drops.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn local_queue_capacity_is_256() {
        assert_eq!(LOCAL_QUEUE_CAPACITY, 256);
    }

    #[test]
    fn inject_ring_capacity_is_4096() {
        // 256 under Miri, which pays for every slot of every test's ring.
        assert_eq!(INJECT_RING_CAPACITY, if cfg!(miri) { 256 } else { 4096 });
    }

    #[test]
    fn max_global_batch_is_64() {
        assert_eq!(MAX_GLOBAL_BATCH, 64);
    }
}
