//! The per-process event queue: a multi-producer, single-consumer list of
//! blocks of [`BLOCK_CAP`] slots (the shape of tokio's `mpsc` list).
//!
//! ```text
//!  free_head        head (consumer)       block_tail (hint)
//!    |                |                     |
//!    v                v                     v
//!  [0..32) --next--> [32..64) --next--> [64..96) --next--> [96..128) --> null
//!  consumed,         index is here        tail (next slot to claim) is
//!  waiting to be                          somewhere at or after here;
//!  recycled                               later blocks are spares
//! ```
//!
//! A producer claims slot `index` with one `fetch_add` on `tail`, walks from
//! `block_tail` to the block that owns `index` (linking a new one with a CAS
//! when the list ends there), writes the value and sets the slot's ready bit
//! (Release). The consumer reads slots in index order, each after an Acquire
//! load of its ready bit, and recycles a block it has moved past once no
//! producer can still hold a pointer to it, by linking it again after the
//! newest block: steady traffic allocates nothing. The numbered protocol and
//! the argument for why no block is reused early are in `README.md`, "The
//! event queue".
//!
//! A slot that is claimed but not ready yet is [`Pop::Inconsistent`]: that
//! producer notifies the process only after its ready store (README,
//! "Producer", step 3), and that notify re-queues it.
//!
//! The consumer side is `pub(crate)` and `unsafe`: the only safe way to pop
//! is through a [`Stepping`](super::Stepping) token, which only the READY ->
//! RUNNING transition hands out.

use core::mem::MaybeUninit;
use core::ptr;

use crate::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use crate::sync::UnsafeCell;
use crate::CachePadded;

/// Slots per block: one allocation per `BLOCK_CAP` events at most, none in
/// steady state. 2 under `cfg(loom)`, so a model crosses blocks and
/// recycles them within a few sends (`block_capacity_is_2_under_loom`).
#[cfg(not(loom))]
pub const BLOCK_CAP: usize = 32;
/// Slots per block (2 under `cfg(loom)`; 32 otherwise).
#[cfg(loom)]
pub const BLOCK_CAP: usize = 2;

// The ready bits of a block are one `AtomicU64`.
const _: () = assert!(BLOCK_CAP.is_power_of_two() && BLOCK_CAP >= 2 && BLOCK_CAP <= 64);

/// `index & OFFSET_MASK` is the slot within its block.
const OFFSET_MASK: u64 = BLOCK_CAP as u64 - 1;

/// A block's ready word once every slot has been written.
const ALL_READY: u64 = u64::MAX >> (64 - BLOCK_CAP);

/// How many blocks a recycled block tries to be linked after (starting at
/// `block_tail`) before the consumer frees it instead (README, step R4).
pub const RECYCLE_TRIES: usize = 3;

struct Block<T> {
    /// The index of slot 0 (a multiple of `BLOCK_CAP`). Written only while
    /// the block is unreachable (allocation, or the consumer's recycling),
    /// then published by the Release CAS that links the block.
    start: UnsafeCell<u64>,
    /// The following block, or null. Set once per life of the block by a
    /// CAS from null (`grow` or `recycle`).
    next: AtomicPtr<Block<T>>,
    /// Bit `i`: slot `i` holds a value its producer finished writing.
    ready: AtomicU64,
    /// 0 while `block_tail` has not moved past this block; then the value
    /// of `tail` read (by an RMW) just after it moved: every producer that
    /// may hold this block claimed an index below it (README, R2).
    released: AtomicU64,
    slots: [UnsafeCell<MaybeUninit<T>>; BLOCK_CAP],
}

impl<T> Block<T> {
    fn alloc(start: u64) -> *mut Block<T> {
        Box::into_raw(Box::new(Block {
            start: UnsafeCell::new(start),
            next: AtomicPtr::new(ptr::null_mut()),
            ready: AtomicU64::new(0),
            released: AtomicU64::new(0),
            slots: core::array::from_fn(|_| UnsafeCell::new(MaybeUninit::uninit())),
        }))
    }

    /// The block's first index.
    ///
    /// # Safety
    /// `block` is live and the write of its `start` happens-before this
    /// read (it was reached through an Acquire load of the pointer that
    /// the linking CAS published, or the caller is the consumer that wrote
    /// it).
    unsafe fn start(block: *const Block<T>) -> u64 {
        // SAFETY: the caller's contract.
        unsafe { (*block).start.with(|s| *s) }
    }
}

/// What one pop found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Pop<T> {
    /// The oldest event.
    Data(T),
    /// Nothing queued.
    Empty,
    /// The next slot is claimed but not ready: its producer is between its
    /// claim and its ready store, and its notify will follow.
    Inconsistent,
}

/// The consumer's half: touched only by the single consumer (the `pop`
/// contract) and by `drop`.
struct Rx<T> {
    /// The block holding `index` (or the one before it, when `index` is the
    /// first slot of a block not linked yet).
    head: *mut Block<T>,
    /// The oldest block still in the list: `free_head..head` are consumed
    /// and wait to be recycled.
    free_head: *mut Block<T>,
    /// The next index to pop.
    index: u64,
    /// The last value of `head.ready` the consumer loaded (0 after moving
    /// to a new block): slots whose bit it has are ready and published to
    /// the consumer already, so their pops need no load of the word
    /// producers keep writing (README, C2).
    ready: u64,
}

/// A multi-producer, single-consumer FIFO queue.
pub(crate) struct Queue<T> {
    /// The next index to claim. Producers `fetch_add` it.
    tail: AtomicU64,
    /// A block at or before the one owning the newest claim: where
    /// producers start walking. It only moves forward, one block per CAS.
    block_tail: AtomicPtr<Block<T>>,
    /// On a cache line of its own: the consumer writes `index` on every
    /// pop, and on the line of `tail` that write would cost each producer's
    /// claim (and each pop) a line transfer while both run.
    rx: CachePadded<UnsafeCell<Rx<T>>>,
    /// Blocks allocated by producers (unit tests check steady state
    /// allocates none).
    #[cfg(all(test, not(loom)))]
    pub(super) grown: crate::sync::atomic::AtomicUsize,
}

// SAFETY: values move from producer threads to the consumer thread (T: Send);
// `rx` is touched only by the single consumer (the `pop` contract), slots
// are handed over by their ready bits, and every other field is atomic.
unsafe impl<T: Send> Send for Queue<T> {}
// SAFETY: as above; `push` from many threads at once is the point of the type.
unsafe impl<T: Send> Sync for Queue<T> {}

impl<T> Queue<T> {
    pub(crate) fn new() -> Self {
        let first = Block::alloc(0);
        Self {
            tail: AtomicU64::new(0),
            block_tail: AtomicPtr::new(first),
            rx: CachePadded::new(UnsafeCell::new(Rx {
                head: first,
                free_head: first,
                index: 0,
                ready: 0,
            })),
            #[cfg(all(test, not(loom)))]
            grown: crate::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// Appends `value` (README, steps Q1-Q4). Any thread, any time; never
    /// blocks; allocates only when it reaches the end of the list.
    pub(crate) fn push(&self, value: T) {
        // Q1. Acquire: pairs with the Release `fetch_add(0)` in
        // `advance_block_tail`: a claim after it in `tail`'s order reads from
        // its release sequence, so this producer's `block_tail` load (Q2)
        // sees the CAS before it (README, "Why no block is reused early").
        let index = self.tail.fetch_add(1, Ordering::Acquire);
        // Q2.
        let block = self.find_block(index, false);
        let offset = (index & OFFSET_MASK) as usize;
        // Q3. SAFETY: 1. `block` is live: it owns slot `index`, which the
        // consumer has not read (its ready bit is not set), and the consumer
        // recycles only blocks it has read to the end. 2. This call alone
        // claimed `index`, and the consumer reads the slot only after the
        // ready bit below.
        unsafe {
            (*block).slots[offset].with_mut(|s| {
                (*s).write(value);
            });
        }
        // Q4. Release: pairs with the Acquire load of `ready` in `pop`: the
        // consumer that sees the bit sees the value. This is the producer's
        // last access to any block.
        #[cfg(not(magpie_broken = "mpsc_ready_relaxed"))]
        let order = Ordering::Release;
        // broken: the ready bit does not publish the value.
        #[cfg(magpie_broken = "mpsc_ready_relaxed")]
        let order = Ordering::Relaxed;
        // SAFETY: as in Q3.
        unsafe {
            (*block).ready.fetch_or(1 << offset, order);
        }
    }

    /// Appends every value of `values`, in order, with one claim (README,
    /// steps B1-B4): one `fetch_add` of `tail` for the whole batch and one
    /// Release `fetch_or` of the ready bits per block it writes, where
    /// [`push`](Queue::push) takes one of each per value. `values` is left
    /// empty. Writing a slot cannot fail, so every claimed slot is written
    /// (the consumer and `drop` rely on it).
    pub(crate) fn push_batch(&self, values: &mut Vec<T>) {
        let n = values.len() as u64;
        if n == 0 {
            return;
        }
        // B1. Q1 for `n` slots at once. Acquire: as in `push` (pairs with
        // the Release `fetch_add(0)` of `advance_block_tail`).
        let first = self.tail.fetch_add(n, Ordering::Acquire);
        // B2. Q2 for the first slot; a batch moves a lagging `block_tail` on
        // whatever its offset (one producer sending batches would otherwise
        // leave it up to `BLOCK_CAP` blocks behind).
        let mut block = self.find_block(first, true);
        let mut offset = (first & OFFSET_MASK) as usize;
        let mut mask = 0u64;
        for value in values.drain(..) {
            if offset == BLOCK_CAP {
                // The block is written to its end: reach the next one
                // (linking it if needed) before publishing this one, after
                // which this producer never touches it again (README, "Why
                // no block is reused early": every block of the batch stays
                // live until the consumer has popped the whole batch).
                let next = self.next_block(block);
                self.publish(block, mask);
                // R1-R2 for the block just finished, if `block_tail` is
                // there and every slot is ready, so that `block_tail`
                // follows the batch (a block behind it is never released,
                // so never recycled: `steady_batches_recycle_blocks_and_
                // allocate_nothing`). `block` is still live: it is released
                // only here or by another producer's R2, whose `observed`
                // is at or past this whole batch (its R1 read this batch's
                // bits), so the consumer recycles it only after the
                // batch's last B4.
                self.advance_block_tail(block, next);
                block = next;
                offset = 0;
                mask = 0;
            }
            // B3. SAFETY: as Q3 in `push`: 1. `block` is live: it owns a
            // slot of this batch, which the consumer has not read (its ready
            // bit is not set), and no block holding a claimed, unpopped slot
            // is recycled. 2. This call alone claimed the slot, and the
            // consumer reads it only after the ready bit.
            unsafe {
                (*block).slots[offset].with_mut(|s| {
                    (*s).write(value);
                });
            }
            mask |= 1 << offset;
            offset += 1;
        }
        // B4 for the last block: the batch's last access to any block.
        self.publish(block, mask);
    }

    /// B4: sets the ready bits `mask` of `block` (Q4 for several slots).
    fn publish(&self, block: *mut Block<T>, mask: u64) {
        // Release: pairs with the Acquire load of `ready` in `pop` (C2): the
        // consumer that sees a bit sees its slot's value.
        #[cfg(not(magpie_broken = "batch_ready_relaxed"))]
        let order = Ordering::Release;
        // broken: the batch's ready bits do not publish its values.
        #[cfg(magpie_broken = "batch_ready_relaxed")]
        let order = Ordering::Relaxed;
        // SAFETY: `block` holds slots of the caller's batch that are not
        // ready yet, so it is live (as in B3).
        unsafe {
            (*block).ready.fetch_or(mask, order);
        }
    }

    /// The block after `block`, linking a new one if the list ends there
    /// (Q2's step, for a batch that runs past the end of its block).
    fn next_block(&self, block: *mut Block<T>) -> *mut Block<T> {
        // Acquire: pairs with the Release CAS that linked `next` (`grow` or
        // `recycle`): its start and reset header are visible.
        // SAFETY: `block` holds slots of the caller's batch that are not
        // ready yet, so it is live; its start was published to this thread
        // when it reached it.
        let next = unsafe { (*block).next.load(Ordering::Acquire) };
        if next.is_null() {
            // SAFETY: as above.
            let start = unsafe { Block::start(block) };
            self.grow(block, start)
        } else {
            next
        }
    }

    /// Q2: the block owning `index`, walking from `block_tail` and linking
    /// new blocks where the list ends. `eager`: move a lagging `block_tail`
    /// on whatever the offset of `index` (a batch); else only by tokio's
    /// rule below.
    fn find_block(&self, index: u64, eager: bool) -> *mut Block<T> {
        let target = index & !OFFSET_MASK;
        // Acquire: pairs with the Release CAS in `advance_block_tail` (and,
        // through it, with the CAS that linked the block): its `start` is
        // visible.
        let mut block = self.block_tail.load(Ordering::Acquire);
        // SAFETY: a block `block_tail` points to is not released, so not
        // recycled; any block this producer loads from `block_tail` stays
        // live until the consumer pops this producer's slot (README, R2),
        // which needs Q4, after this walk. Its start is published (above).
        let first = unsafe { Block::start(block) };
        // Tokio's rule: only a producer whose block is further ahead (in
        // blocks) than its offset moves `block_tail`, so the producers of
        // the first slots of a new block do it and the others just walk.
        debug_assert!(first <= target, "block_tail is past index {index}");
        let lag = (target - first) / BLOCK_CAP as u64;
        let mut advance = if eager {
            lag > 0
        } else {
            lag > (index & OFFSET_MASK)
        };
        loop {
            // SAFETY: as for `first`; later blocks were reached through
            // Acquire loads of `next`.
            let start = unsafe { Block::start(block) };
            if start == target {
                return block;
            }
            debug_assert!(start < target, "block {start} is past index {index}");
            // Acquire: pairs with the Release CAS that linked `next` (`grow`
            // or `recycle`): its start and reset header are visible.
            // SAFETY: `block` is live (above).
            let mut next = unsafe { (*block).next.load(Ordering::Acquire) };
            if next.is_null() {
                next = self.grow(block, start);
            }
            if advance {
                advance = self.advance_block_tail(block, next);
            }
            block = next;
        }
    }

    /// Q2.3: links a new block after `block` (whose start is `start`), or
    /// returns the one another thread linked first.
    #[cold]
    fn grow(&self, block: *mut Block<T>, start: u64) -> *mut Block<T> {
        #[cfg(not(magpie_broken = "grow_writes_start_after_link"))]
        let new = Block::alloc(start + BLOCK_CAP as u64);
        // broken: the new block's start is written after the CAS that
        // publishes it.
        #[cfg(magpie_broken = "grow_writes_start_after_link")]
        let new = Block::alloc(0);
        #[cfg(all(test, not(loom)))]
        self.grown.fetch_add(1, Ordering::Relaxed);
        // Release on success: pairs with the Acquire loads of `next` in
        // `find_block` and `pop`: whoever reaches `new` sees its start and
        // empty header. Acquire on failure: pairs with the winner's Release,
        // so this producer may read the winner's start.
        // SAFETY: `block` is live (the caller's walk).
        let linked = unsafe {
            (*block).next.compare_exchange(
                ptr::null_mut(),
                new,
                Ordering::Release,
                Ordering::Acquire,
            )
        };
        match linked {
            Ok(_) => {
                // SAFETY: broken variant only: a write after publication.
                #[cfg(magpie_broken = "grow_writes_start_after_link")]
                unsafe {
                    (*new).start.with_mut(|s| *s = start + BLOCK_CAP as u64);
                }
                new
            }
            Err(actual) => {
                // SAFETY: `new` was never shared.
                drop(unsafe { Box::from_raw(new) });
                actual
            }
        }
    }

    /// R1-R2: moves `block_tail` from `block` to `next`, then releases
    /// `block` with the tail position read by an RMW. `false`: `block` is
    /// not full yet, or another producer moved it first; stop trying.
    fn advance_block_tail(&self, block: *mut Block<T>, next: *mut Block<T>) -> bool {
        // R1. Only past a block whose slots are all written. Acquire: pairs
        // with the Release `fetch_or` (Q4) of each of its producers: they
        // finished their walks (Q2) before, so none of them can load a
        // `block_tail` past its own block.
        // SAFETY: `block` is live (the caller's walk).
        if unsafe { (*block).ready.load(Ordering::Acquire) } != ALL_READY {
            return false;
        }
        // Release: pairs with the Acquire load of `block_tail` in
        // `find_block` and `recycle`: `next`'s start (which this producer
        // acquired when it read `next`) is visible to whoever loads it.
        if self
            .block_tail
            .compare_exchange(block, next, Ordering::Release, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        // R2. An RMW reads the newest claim. Release: heads a release
        // sequence on `tail` that every later claim (Acquire, Q1) reads
        // from, so a producer that claims after this point sees R1 and
        // never loads `block` from `block_tail`.
        #[cfg(not(magpie_broken = "observed_tail_by_load"))]
        let observed = self.tail.fetch_add(0, Ordering::Release);
        // broken: a plain load may miss a claim whose producer still loads
        // the old `block_tail` (store buffering).
        #[cfg(magpie_broken = "observed_tail_by_load")]
        let observed = self.tail.load(Ordering::Acquire);
        // Release: pairs with the Acquire load of `released` in `reclaim`.
        // SAFETY: `block` is live: this producer's own claim is below
        // `observed`, and the consumer has not popped it (Q4 comes later).
        unsafe {
            (*block).released.store(observed, Ordering::Release);
        }
        true
    }

    /// Takes the oldest value (README, steps C1-C3).
    ///
    /// # Safety
    /// At most one thread calls `pop` at a time, and every call
    /// happens-after the previous one (the caller holds the process's
    /// [`Stepping`](super::Stepping) token, whose transitions order the
    /// steps).
    pub(crate) unsafe fn pop(&self) -> Pop<T> {
        // SAFETY: the single consumer (the contract) is the only user of
        // `rx`, and its calls are ordered.
        self.rx.with_mut(|rx| unsafe { self.pop_rx(&mut *rx) })
    }

    /// # Safety
    /// `pop`'s contract; `rx` is this queue's.
    unsafe fn pop_rx(&self, rx: &mut Rx<T>) -> Pop<T> {
        let target = rx.index & !OFFSET_MASK;
        let mut head = rx.head;
        // C1. SAFETY: `head` is live: the consumer recycles only blocks
        // before it; it wrote or acquired its start when it moved here.
        if unsafe { Block::start(head) } != target {
            // `index` is the first slot of the next block.
            // Acquire: pairs with the Release CAS that linked it (`grow` or
            // `recycle`): its start and reset header are visible.
            // SAFETY: `head` is live.
            let next = unsafe { (*head).next.load(Ordering::Acquire) };
            if next.is_null() {
                return self.nothing(rx.index);
            }
            head = next;
            rx.head = next;
            // broken: the old block's snapshot is kept, so its bits claim
            // slots of the new block ready before their producers wrote them.
            #[cfg(not(magpie_broken = "ready_snapshot_kept_across_blocks"))]
            {
                rx.ready = 0;
            }
            // SAFETY: published by the Acquire above.
            debug_assert_eq!(unsafe { Block::start(head) }, target);
        }
        let offset = (rx.index & OFFSET_MASK) as usize;
        // C2. The snapshot first: a bit in it was read by an earlier
        // Acquire load of this block's `ready`, which synchronised with
        // that slot's producer (every write of `ready` while the block is
        // in use is an RMW, so the value read heads back through a release
        // sequence to each `fetch_or` it includes).
        if rx.ready & (1 << offset) == 0 {
            // Acquire: pairs with the Release `fetch_or` in `push` (Q4).
            // SAFETY: `head` is live.
            rx.ready = unsafe { (*head).ready.load(Ordering::Acquire) };
            if rx.ready & (1 << offset) == 0 {
                return self.nothing(rx.index);
            }
        }
        // SAFETY: the ready bit says the producer's write is complete and
        // visible (Acquire above); `index` moves past the slot, so it is read
        // once, and nobody writes it again before the block is recycled.
        let value = unsafe { (*head).slots[offset].with(|s| ptr::read(s).assume_init()) };
        rx.index += 1;
        // C3.
        if rx.free_head != rx.head {
            // SAFETY: the consumer (the contract).
            unsafe { self.reclaim(rx) };
        }
        Pop::Data(value)
    }

    /// Nothing to pop at `index`: `Empty` if nothing is claimed there,
    /// `Inconsistent` if a producer is mid-push. Both mean "not now".
    fn nothing(&self, index: u64) -> Pop<T> {
        // Relaxed: a hint only; the caller treats both answers alike.
        if self.tail.load(Ordering::Relaxed) <= index {
            Pop::Empty
        } else {
            Pop::Inconsistent
        }
    }

    /// R3: recycles the blocks before `head` that no producer can hold.
    ///
    /// # Safety
    /// The single consumer, with its `rx`.
    unsafe fn reclaim(&self, rx: &mut Rx<T>) {
        while rx.free_head != rx.head {
            let block = rx.free_head;
            // Acquire: pairs with the Release store of `released` in
            // `advance_block_tail` (R2).
            // SAFETY: blocks from `free_head` on are live (not yet recycled).
            let observed = unsafe { (*block).released.load(Ordering::Acquire) };
            // Every producer that may hold `block` claimed an index below
            // `observed`; they are done with it once those slots are popped
            // (their ready store, Q4, is their last access and the pops
            // acquired it).
            #[cfg(not(magpie_broken = "recycle_ignores_observed_tail"))]
            let safe = observed != 0 && observed <= rx.index;
            // broken: recycled as soon as `block_tail` has moved past it,
            // while a producer that loaded it earlier may still be walking.
            #[cfg(magpie_broken = "recycle_ignores_observed_tail")]
            let safe = observed != 0;
            if !safe {
                return;
            }
            // Relaxed: the consumer acquired this link when it moved `head`
            // past the block (C1).
            // SAFETY: `block` is live.
            rx.free_head = unsafe { (*block).next.load(Ordering::Relaxed) };
            // SAFETY: no producer holds `block` (above), and the consumer
            // has read all its slots (it is before `head`).
            unsafe { self.recycle(block) };
        }
    }

    /// R4: resets `block` and links it after the newest block, so the next
    /// producer to reach the end finds it instead of allocating; after
    /// [`RECYCLE_TRIES`] lost CASes it is freed instead.
    ///
    /// # Safety
    /// The consumer owns `block`: no producer holds it and its slots are
    /// all read.
    unsafe fn recycle(&self, block: *mut Block<T>) {
        // Relaxed: published by the Release CAS below.
        // SAFETY: owned (the contract).
        unsafe {
            (*block).next.store(ptr::null_mut(), Ordering::Relaxed);
            (*block).ready.store(0, Ordering::Relaxed);
            (*block).released.store(0, Ordering::Relaxed);
        }
        // Acquire: pairs with the Release CAS of `advance_block_tail`: its
        // block's start is visible. That block is not released, so not
        // recycled, and neither is any block after it.
        let mut curr = self.block_tail.load(Ordering::Acquire);
        for _ in 0..RECYCLE_TRIES {
            // SAFETY: `curr` is live (above) and its start published.
            let start = unsafe { Block::start(curr) } + BLOCK_CAP as u64;
            // SAFETY: owned and unreachable until the CAS succeeds.
            unsafe { (*block).start.with_mut(|s| *s = start) };
            // Release on success: pairs with the Acquire loads of `next` in
            // `find_block` and `pop`: the reset header and new start are
            // visible to whoever reaches the block. Acquire on failure:
            // pairs with the winner's Release; its start is read next.
            // SAFETY: `curr` is live.
            let linked = unsafe {
                (*curr).next.compare_exchange(
                    ptr::null_mut(),
                    block,
                    Ordering::Release,
                    Ordering::Acquire,
                )
            };
            match linked {
                Ok(_) => return,
                Err(actual) => curr = actual,
            }
        }
        // SAFETY: owned, never published again, allocated by `Block::alloc`.
        drop(unsafe { Box::from_raw(block) });
    }
}

impl<T> Drop for Queue<T> {
    fn drop(&mut self) {
        // `&mut self`: no producer or consumer is left, so every claimed slot
        // was written (a push cannot stop between Q1 and Q4).
        let tail = self.tail.load(Ordering::Relaxed);
        self.rx.with_mut(|rx| {
            // SAFETY: exclusive access.
            let rx = unsafe { &mut *rx };
            let mut block = rx.head;
            let mut i = rx.index;
            while i < tail && !block.is_null() {
                // SAFETY: every block from `free_head` on is live and owned.
                if unsafe { Block::start(block) } != i & !OFFSET_MASK {
                    // SAFETY: as above.
                    block = unsafe { (*block).next.load(Ordering::Relaxed) };
                    continue;
                }
                let offset = (i & OFFSET_MASK) as usize;
                // SAFETY: as above; a ready slot holds a value nobody popped
                // (it is at or after `index`), dropped once here.
                unsafe {
                    if (*block).ready.load(Ordering::Relaxed) & (1 << offset) != 0 {
                        (*block).slots[offset].with_mut(|s| ptr::drop_in_place((*s).as_mut_ptr()));
                    }
                }
                i += 1;
            }
            let mut cur = rx.free_head;
            while !cur.is_null() {
                // SAFETY: every block in the list was allocated by
                // `Block::alloc` and is owned by the queue; each is freed once
                // as we walk past (recycled blocks are relinked, never also
                // kept elsewhere).
                let b = unsafe { Box::from_raw(cur) };
                cur = b.next.load(Ordering::Relaxed);
                drop(b);
            }
        });
    }
}

/// A [`Queue`] allocated by the first push (README, "The event queue",
/// step L): an idle process that was never sent anything holds one null
/// pointer instead of a queue and its first block of [`BLOCK_CAP`] slots
/// (about 2 KiB for the runtime's events; issue 15 allows 256 B per idle
/// process, `benches/examples/process_idle_mem.rs`).
///
/// L1. A producer loads the pointer (Acquire); if it is null it builds a
///     queue and CASes it in (AcqRel); the loser of a race drops its own and
///     uses the winner's. L2. The consumer loads the pointer (Acquire): null
///     means nothing was ever pushed, [`Pop::Empty`]; a producer that has not
///     installed the queue yet has not set a ready bit either, and notifies
///     only after it has (the queue's own contract).
pub(crate) struct LazyQueue<T> {
    queue: AtomicPtr<Queue<T>>,
}

impl<T> LazyQueue<T> {
    pub(crate) fn new() -> Self {
        Self {
            queue: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// L1. The load inline, the construction out of line: every send
    /// after a process's first takes the load alone (out of line, the
    /// call was about 15 instructions a message on ping-pong by callgrind).
    #[inline(always)]
    fn get_or_init(&self) -> &Queue<T> {
        // Acquire: pairs with the AcqRel CAS in `init_slow`, so the queue's
        // construction (its first block, its fields) is visible.
        let q = self.queue.load(Ordering::Acquire);
        if !q.is_null() {
            // SAFETY: a non-null pointer was installed by the CAS in
            // `init_slow` and is freed only by `drop`, which has `&mut self`.
            return unsafe { &*q };
        }
        self.init_slow()
    }

    /// L1 for the first push: build a queue and install it with a CAS, or
    /// use the winner's.
    #[cold]
    #[inline(never)]
    fn init_slow(&self) -> &Queue<T> {
        let new = Box::into_raw(Box::new(Queue::new()));
        // broken: the queue's construction is not published with it.
        #[cfg(magpie_broken = "lazy_queue_relaxed")]
        let (success, failure) = (Ordering::Relaxed, Ordering::Relaxed);
        // AcqRel on success: Release publishes the construction to the loads
        // in `get_or_init` and `get`; Acquire on failure: pairs with the winner's
        // Release, so its queue is visible.
        #[cfg(not(magpie_broken = "lazy_queue_relaxed"))]
        let (success, failure) = (Ordering::AcqRel, Ordering::Acquire);
        match self
            .queue
            .compare_exchange(ptr::null_mut(), new, success, failure)
        {
            // SAFETY: `new` is installed: live until `drop`.
            Ok(_) => unsafe { &*new },
            Err(winner) => {
                // SAFETY: `new` was never shared; `winner` is installed.
                unsafe {
                    drop(Box::from_raw(new));
                    &*winner
                }
            }
        }
    }

    /// [`Queue::push`], building the queue first if this is the first push.
    pub(crate) fn push(&self, value: T) {
        self.get_or_init().push(value);
    }

    /// [`Queue::push_batch`], building the queue first if need be.
    pub(crate) fn push_batch(&self, values: &mut Vec<T>) {
        self.get_or_init().push_batch(values);
    }

    /// L2: the queue, or `None` if nothing was ever pushed ([`Pop::Empty`]
    /// for the consumer). Once `Some`, it stays the same queue until the
    /// mailbox is dropped, so the consumer may keep the reference for a
    /// step instead of loading the pointer per pop (the pointer shares a
    /// cache line with the admission and state words, which producers write
    /// on every send).
    pub(crate) fn get(&self) -> Option<&Queue<T>> {
        // Acquire: pairs with the AcqRel CAS in `get_or_init`.
        #[cfg(not(magpie_broken = "lazy_queue_relaxed"))]
        let q = self.queue.load(Ordering::Acquire);
        #[cfg(magpie_broken = "lazy_queue_relaxed")]
        let q = self.queue.load(Ordering::Relaxed);
        if q.is_null() {
            return None;
        }
        // SAFETY: a non-null pointer was installed by `get_or_init`'s CAS
        // and is freed only by `drop`, which has `&mut self`; the Acquire
        // above makes its construction visible.
        Some(unsafe { &*q })
    }
}

impl<T> Drop for LazyQueue<T> {
    fn drop(&mut self) {
        // Acquire: `&mut self` already orders every use before this; the
        // pair is the CAS that installed the queue (a thread that drops a
        // mailbox it never pushed to still sees the construction).
        let q = self.queue.load(Ordering::Acquire);
        if !q.is_null() {
            // SAFETY: `&mut self`: nobody else holds the queue; it was made
            // by `Box::into_raw` and is freed once, here.
            drop(unsafe { Box::from_raw(q) });
        }
    }
}
