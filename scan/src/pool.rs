//! A fixed pool of chunk buffers that never blocks.
//!
//! The pipeline makes one pool of `4 × workers` buffers of
//! `CHUNK_SIZE + overlap` bytes when it starts; after that no chunk buffer is
//! allocated. A FetchSync task takes a buffer with [`BufferPool::try_get`];
//! when the pool is empty it gets `None` at once and parks itself on the
//! wait list (re-spawned when a buffer comes back), so an
//! executor thread never waits for another to finish a Scan. The buffer goes
//! back to the pool when its [`PooledBuf`] is dropped, exactly once (the Scan
//! task drops it when it is done).
//!
//! ## Protocol
//!
//! The pool is a bitmap of free slots (`free`, one bit per slot, 1 = free) and
//! one `Mutex<Option<Box<[u8]>>>` per slot holding the buffer while it is free.
//!
//! 1. **Take.** `try_get` loads a bitmap word, picks its lowest set bit and
//!    clears it with a CAS. Winning the CAS makes the caller the slot's only
//!    owner; losing it means another taker or returner changed the word, so it
//!    reloads (lock-free: some thread made progress). A zero word moves on to
//!    the next; all zero is `None`.
//! 2. **Unpark the buffer.** The owner locks the slot's mutex and takes the
//!    buffer out. Nobody else touches a slot whose bit is clear, so the lock
//!    is uncontended and never waits.
//! 3. **Return.** Dropping the `PooledBuf` puts the buffer back into its slot's
//!    mutex, unlocks it, and only then sets the slot's bit with a Release RMW.
//! 4. The taker's CAS in step 1 is Acquire, so when it sees the bit that step
//!    3 set, the returner's unlock happens-before the taker's lock: the taker
//!    finds the buffer. Setting the bit before storing the buffer (the broken
//!    variant `pool_publish_before_return`) lets a taker claim a slot that is
//!    still empty; the concurrency test below catches that.
//!
//! A `PooledBuf` cannot be cloned and its drop runs once, so each buffer is
//! returned exactly once; `take_and_return_conserve_buffers` checks the count.

use std::ops::{Deref, DerefMut};

use magpie_core::sync::atomic::{AtomicU64, Ordering};
use magpie_core::sync::{Arc, Mutex};

const WORD_BITS: usize = 64;

/// Where a free buffer waits: `None` while the buffer is out.
type Slot = Mutex<Option<Box<[u8]>>>;

struct Shared {
    capacity: usize,
    count: usize,
    /// Bit `i % 64` of word `i / 64` is set while slot `i` is free.
    free: Box<[AtomicU64]>,
    slots: Box<[Slot]>,
}

/// A fixed pool of byte buffers. Cloning shares the same pool.
#[derive(Clone)]
pub struct BufferPool {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for BufferPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BufferPool")
            .field("count", &self.shared.count)
            .field("capacity", &self.shared.capacity)
            .field("available", &self.available())
            .finish()
    }
}

impl BufferPool {
    /// A pool of `count` buffers of `capacity` bytes each, all allocated now.
    pub fn new(count: usize, capacity: usize) -> Self {
        let words = count.div_ceil(WORD_BITS);
        let free: Box<[AtomicU64]> = (0..words)
            .map(|w| {
                let in_word = (count - w * WORD_BITS).min(WORD_BITS);
                let bits = if in_word == WORD_BITS {
                    u64::MAX
                } else {
                    (1u64 << in_word) - 1
                };
                AtomicU64::new(bits)
            })
            .collect();
        let slots = (0..count)
            .map(|_| Mutex::new(Some(vec![0u8; capacity].into_boxed_slice())))
            .collect();
        BufferPool {
            shared: Arc::new(Shared {
                capacity,
                count,
                free,
                slots,
            }),
        }
    }

    /// Takes a free buffer (length 0), or `None` at once if all are in use.
    /// Never blocks.
    pub fn try_get(&self) -> Option<PooledBuf> {
        let shared = &self.shared;
        for (w, word) in shared.free.iter().enumerate() {
            let mut cur = word.load(Ordering::Relaxed);
            while cur != 0 {
                let bit = cur.trailing_zeros() as usize;
                let next = cur & !(1u64 << bit);
                // Acquire: pairs with the Release fetch_or in PooledBuf::drop,
                // so the returner's unlock of the slot happens-before our lock.
                match word.compare_exchange_weak(cur, next, Ordering::Acquire, Ordering::Relaxed) {
                    Ok(_) => {
                        let slot = w * WORD_BITS + bit;
                        let buf = lock(&shared.slots[slot])
                            .take()
                            .expect("pool protocol broken: claimed a free slot with no buffer");
                        return Some(PooledBuf {
                            shared: Arc::clone(shared),
                            slot,
                            buf: Some(buf),
                            len: 0,
                        });
                    }
                    Err(actual) => cur = actual,
                }
            }
        }
        None
    }

    /// Buffers free right now (a snapshot; it may change at once).
    pub fn available(&self) -> usize {
        self.shared
            .free
            .iter()
            .map(|w| w.load(Ordering::Relaxed).count_ones() as usize)
            .sum()
    }

    /// How many buffers the pool owns.
    pub fn count(&self) -> usize {
        self.shared.count
    }

    /// The size of each buffer in bytes.
    pub fn capacity(&self) -> usize {
        self.shared.capacity
    }
}

fn lock(m: &Slot) -> magpie_core::sync::MutexGuard<'_, Option<Box<[u8]>>> {
    // A panic cannot happen while a slot is locked (only `take`/`replace` run
    // under it), but recover from poisoning rather than lose a buffer.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A buffer taken from a [`BufferPool`]: derefs to its first `len()` bytes and
/// goes back to the pool when dropped.
pub struct PooledBuf {
    shared: Arc<Shared>,
    slot: usize,
    /// Always `Some` until `drop` moves it back into the slot.
    buf: Option<Box<[u8]>>,
    len: usize,
}

impl std::fmt::Debug for PooledBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PooledBuf")
            .field("slot", &self.slot)
            .field("len", &self.len)
            .field("capacity", &self.capacity())
            .finish()
    }
}

impl PooledBuf {
    fn raw(&self) -> &[u8] {
        self.buf.as_deref().expect("buffer present until drop")
    }

    fn raw_mut(&mut self) -> &mut [u8] {
        self.buf.as_deref_mut().expect("buffer present until drop")
    }

    /// The whole buffer, `capacity()` bytes, to read into; follow with
    /// [`PooledBuf::set_len`].
    pub fn full_mut(&mut self) -> &mut [u8] {
        self.raw_mut()
    }

    /// Sets how many bytes are valid. Panics if `len > capacity()`.
    pub fn set_len(&mut self, len: usize) {
        assert!(len <= self.capacity(), "len {len} over capacity");
        self.len = len;
    }

    /// Valid bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no byte is valid.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Total size of the buffer.
    pub fn capacity(&self) -> usize {
        self.raw().len()
    }

    /// Which slot of the pool this buffer came from (for tests and traces).
    pub fn slot(&self) -> usize {
        self.slot
    }
}

impl Deref for PooledBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.raw()[..self.len]
    }
}

impl DerefMut for PooledBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        let len = self.len;
        &mut self.raw_mut()[..len]
    }
}

impl Drop for PooledBuf {
    fn drop(&mut self) {
        let Some(buf) = self.buf.take() else { return };
        let word = &self.shared.free[self.slot / WORD_BITS];
        let bit = 1u64 << (self.slot % WORD_BITS);
        #[cfg(magpie_broken = "pool_publish_before_return")]
        word.fetch_or(bit, Ordering::Release);
        *lock(&self.shared.slots[self.slot]) = Some(buf);
        // Release: pairs with the Acquire CAS in try_get; the buffer is back
        // in the slot (and the slot unlocked) before the bit says "free".
        #[cfg(not(magpie_broken = "pool_publish_before_return"))]
        word.fetch_or(bit, Ordering::Release);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn empty_pool_returns_none_at_once() {
        let pool = BufferPool::new(2, 16);
        let a = pool.try_get().expect("first");
        let b = pool.try_get().expect("second");
        assert!(pool.try_get().is_none());
        assert_ne!(a.slot(), b.slot());
        drop(a);
        assert!(pool.try_get().is_some());
    }

    #[test]
    fn buffer_derefs_to_its_length_and_capacity_is_fixed() {
        let pool = BufferPool::new(1, 32);
        let mut b = pool.try_get().unwrap();
        assert!(b.is_empty());
        assert_eq!(b.capacity(), 32);
        b.full_mut()[..3].copy_from_slice(b"abc");
        b.set_len(3);
        assert_eq!(&*b, b"abc");
        b[0] = b'x';
        assert_eq!(&*b, b"xbc");
        drop(b);
        let b = pool.try_get().unwrap();
        assert_eq!(b.len(), 0, "a returned buffer comes back empty");
    }

    #[test]
    #[should_panic(expected = "over capacity")]
    fn set_len_past_capacity_panics() {
        let pool = BufferPool::new(1, 8);
        pool.try_get().unwrap().set_len(9);
    }

    #[test]
    fn pools_past_one_bitmap_word_hand_out_every_slot_once() {
        for count in [1, 63, 64, 65, 130] {
            let pool = BufferPool::new(count, 4);
            let held: Vec<PooledBuf> = (0..count).map(|_| pool.try_get().unwrap()).collect();
            assert!(pool.try_get().is_none(), "count {count}");
            let slots: HashSet<usize> = held.iter().map(|b| b.slot()).collect();
            assert_eq!(slots.len(), count);
            assert_eq!(pool.available(), 0);
            drop(held);
            assert_eq!(pool.available(), count);
        }
    }

    /// Threads take and return buffers as fast as they can. Each writes its
    /// id into the whole buffer and checks it is still there before returning
    /// it: two holders of one buffer would overwrite each other. At the end
    /// every buffer is back: taken == returned, none lost or duplicated.
    #[test]
    fn take_and_return_conserve_buffers() {
        const THREADS: usize = 4;
        const ROUNDS: usize = if cfg!(miri) { 200 } else { 20_000 };
        const COUNT: usize = 6;
        let pool = BufferPool::new(COUNT, 64);
        let taken = std::sync::Arc::new(AtomicU64::new(0));
        let misses = std::sync::Arc::new(AtomicU64::new(0));
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let pool = pool.clone();
                let taken = taken.clone();
                let misses = misses.clone();
                std::thread::spawn(move || {
                    let mut mine = Vec::new();
                    for round in 0..ROUNDS {
                        match pool.try_get() {
                            Some(mut b) => {
                                taken.fetch_add(1, Ordering::Relaxed);
                                let mark = (t * 31 + round) as u8;
                                b.full_mut().fill(mark);
                                b.set_len(b.capacity());
                                mine.push((b, mark));
                            }
                            None => {
                                misses.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        if mine.len() > 1 || round % 3 == 0 {
                            if let Some((b, mark)) = mine.pop() {
                                assert!(b.iter().all(|x| *x == mark), "buffer shared");
                            }
                        }
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(pool.available(), COUNT, "every buffer returned");
        let all: Vec<PooledBuf> = (0..COUNT).map(|_| pool.try_get().unwrap()).collect();
        assert!(pool.try_get().is_none(), "no buffer returned twice");
        assert_eq!(
            all.iter().map(|b| b.slot()).collect::<HashSet<_>>().len(),
            COUNT
        );
        assert!(taken.load(Ordering::Relaxed) > 0);
    }
}

/// Loom model of the take/return protocol (run with
/// `RUSTFLAGS="--cfg loom -C debug-assertions" LOOM_MAX_PREEMPTIONS=2
/// CARGO_TARGET_DIR=target/loom cargo test -p scan --release --lib pool::loom`).
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;

    /// One buffer; the main thread returns it while another thread tries to
    /// take it. The taker either finds the pool empty or gets the buffer,
    /// never an empty slot; at the end the buffer is back exactly once.
    // protocol: pool 1 3 4
    // broken-variant: pool_publish_before_return; class: publish before write; expects: claimed a free slot with no buffer
    #[test]
    fn returned_buffer_is_taken_whole_or_not_at_all() {
        loom::model(|| {
            let pool = BufferPool::new(1, 4);
            let mut held = pool.try_get().unwrap();
            held.full_mut()[0] = 7;
            let other = pool.clone();
            let taker = loom::thread::spawn(move || match other.try_get() {
                Some(b) => {
                    assert_eq!(b.capacity(), 4);
                    1
                }
                None => 0,
            });
            drop(held);
            let taken = taker.join().unwrap();
            assert!(taken <= 1);
            assert_eq!(pool.available(), 1, "the buffer is back exactly once");
            let again = pool.try_get().expect("buffer back in its slot");
            assert!(pool.try_get().is_none());
            drop(again);
        });
    }

    /// Two takers race for two buffers while one is returned: every buffer is
    /// handed to at most one holder at a time and all come back.
    // protocol: pool 1 2
    #[test]
    fn racing_takers_never_share_a_buffer() {
        loom::model(|| {
            let pool = BufferPool::new(2, 1);
            let first = pool.try_get().unwrap();
            let handles: Vec<_> = (0..2)
                .map(|_| {
                    let p = pool.clone();
                    // The buffer is moved out, so it is still held when the
                    // main thread compares slots.
                    loom::thread::spawn(move || p.try_get())
                })
                .collect();
            drop(first);
            let held: Vec<PooledBuf> = handles
                .into_iter()
                .filter_map(|h| h.join().unwrap())
                .collect();
            if let [a, b] = &held[..] {
                assert_ne!(a.slot(), b.slot(), "one buffer, two holders");
            }
            assert_eq!(pool.available(), 2 - held.len());
            drop(held);
            assert_eq!(pool.available(), 2);
        });
    }
}
