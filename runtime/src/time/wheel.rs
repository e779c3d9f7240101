//! The bare hierarchical timing wheel: no clock, no lock, no wakers.
//!
//! [`Driver`](super::Driver) wraps a `Wheel<Option<Waker>>` in a mutex; the
//! wheel itself is a plain data structure over integer **ticks** (1 tick =
//! 1 ms in the driver), public so the model test and a deterministic simulator
//! can drive it with virtual time. `time/README.md` ("The wheel") walks
//! through the layout with pictures; this header states the invariants the
//! code relies on.
//!
//! # Layout
//!
//! [`LEVELS`] = 6 levels of [`SLOTS`] = 64 slots. A slot at level `L` covers
//! `64^L` ticks, so level `L` spans `64^(L+1)` ticks and the whole wheel spans
//! [`WHEEL_SPAN`] = `64^6 = 2^36` ticks (about 795 days at 1 ms). Deadlines
//! beyond the current `2^36` block wait in one **overflow** list. Each slot is
//! the head of a doubly linked list threaded through a slab (`Vec` plus free
//! list) by `u32` indices, and each level keeps a 64-bit occupancy word, so
//! insert, cancel and "find the next non-empty slot" are O(1).
//!
//! # Invariants
//!
//! `elapsed` is the last tick processed: every entry whose deadline is
//! `<= elapsed` has fired. For every scheduled entry with deadline `t`:
//!
//! 1. `t > elapsed`.
//! 2. In level `L` slot `s`: `t` and `elapsed` agree on every bit above the
//!    level's digit (`t >> 6(L+1) == elapsed >> 6(L+1)`), `t`'s level-`L` digit
//!    is `s`, and `s` is *greater* than `elapsed`'s level-`L` digit. This
//!    follows from choosing `L` as the 6-bit group of the highest bit in which
//!    `t` and `elapsed` differ.
//! 3. In the overflow list: `t >> 36 > elapsed >> 36`.
//!
//! So every entry of level `L` expires before every entry of level `L + 1`
//! (whose slot lies past the current level-`L + 1` slot), and the earliest
//! deadline lies in the lowest occupied level, in its first occupied slot
//! after `elapsed`'s digit. That slot's start ([`Wheel::next_expiration`]) is
//! never later than the earliest deadline, and equal to it at level 0.
//!
//! # Processing
//!
//! [`Wheel::pop_expired`]`(now)` repeats: if the **pending** list is non-empty,
//! take one entry and either fire it (`deadline == elapsed`) or re-link it
//! relative to the new `elapsed`, which puts it in a lower level (the
//! *cascade*); otherwise find the next slot start `exp`; if `exp <= now`, set
//! `elapsed = exp` and move that whole slot to the pending list. When no slot
//! starts at or before `now`, set `elapsed = now` (no invariant breaks: an
//! entry whose slot starts after `now` still satisfies 2 and 3 for `now`) and
//! return `None`. Entries therefore fire in non-decreasing deadline order.
//! The pending list is what lets the driver drop its lock between batches of
//! wakes in the middle of a slot: pending entries are still owned by the wheel
//! and can still be cancelled in O(1).

use std::fmt;

/// Levels in the wheel.
pub const LEVELS: usize = 6;
/// Slots per level (one bit each in a `u64` occupancy word).
pub const SLOTS: usize = 64;
/// log2 of [`SLOTS`]: the width of one level's digit in a tick.
const SLOT_BITS: u32 = 6;
/// Ticks covered by the whole wheel: `64^6 = 2^36`. A deadline in a later
/// `WHEEL_SPAN`-aligned block than `elapsed` waits in the overflow list.
pub const WHEEL_SPAN: u64 = 1 << (SLOT_BITS * LEVELS as u32);
/// The largest tick the wheel stores; later deadlines and `now`s are clamped
/// to it, so block arithmetic (`(elapsed >> 36) + 1) << 36`) cannot overflow.
/// At 1 ms per tick this is about 146 million years.
pub const MAX_TICK: u64 = u64::MAX >> 2;

const _: () = assert!(SLOTS == 1 << SLOT_BITS);
const _: () = assert!(SLOTS == u64::BITS as usize, "one occupancy bit per slot");
const _: () = assert!(WHEEL_SPAN == 1 << 36);

/// "No entry" in the `u32` links.
const NIL: u32 = u32::MAX;

/// Names one entry of a [`Wheel`]. The generation makes a key to a freed and
/// reused index fail every lookup instead of reaching the new occupant.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Key {
    index: u32,
    generation: u32,
}

/// Where a live entry stands, as seen from outside.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum EntryState {
    /// Waiting in a slot, the overflow list or the pending list.
    Scheduled,
    /// Its deadline passed (returned by `pop_expired`, or inserted or
    /// rescheduled at a tick `<= elapsed`); it stays until `remove`.
    Fired,
}

/// Which list an entry is threaded on, if any.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Loc {
    Free,
    Slot { level: u8, slot: u8 },
    Overflow,
    Pending,
    Fired,
}

struct Entry<T> {
    generation: u32,
    deadline: u64,
    loc: Loc,
    prev: u32,
    /// Next in its list; for a free entry, the next free index.
    next: u32,
    value: Option<T>,
}

/// Where the next expiration comes from.
#[derive(Clone, Copy)]
enum Source {
    Pending,
    Slot { level: usize, slot: usize },
    Overflow,
}

/// A hierarchical timing wheel of `T` values keyed by integer deadlines.
/// See the [module docs](self) for the layout and invariants.
pub struct Wheel<T> {
    entries: Vec<Entry<T>>,
    free_head: u32,
    live: usize,
    elapsed: u64,
    heads: [[u32; SLOTS]; LEVELS],
    occupied: [u64; LEVELS],
    overflow: u32,
    pending: u32,
}

impl<T> Default for Wheel<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> fmt::Debug for Wheel<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Wheel")
            .field("elapsed", &self.elapsed)
            .field("live", &self.live)
            .field("capacity", &self.entries.len())
            .field("next_expiration", &self.next_expiration())
            .finish()
    }
}

impl<T> Wheel<T> {
    /// An empty wheel at tick 0 (tick 0 counts as processed).
    pub fn new() -> Self {
        Self {
            entries: Vec::new(),
            free_head: NIL,
            live: 0,
            elapsed: 0,
            heads: [[NIL; SLOTS]; LEVELS],
            occupied: [0; LEVELS],
            overflow: NIL,
            pending: NIL,
        }
    }

    /// The last tick processed: every deadline `<= elapsed` has fired.
    pub fn elapsed(&self) -> u64 {
        self.elapsed
    }

    /// Live entries, scheduled or fired (fired ones stay until `remove`).
    pub fn len(&self) -> usize {
        self.live
    }

    /// No live entry.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Slab capacity: live plus free entries. It never shrinks; a burst of
    /// `n` concurrent timers leaves `n` entries for reuse.
    pub fn capacity(&self) -> usize {
        self.entries.len()
    }

    /// Adds an entry due at `deadline` (clamped to [`MAX_TICK`]). A deadline
    /// `<= elapsed` is stored already [`EntryState::Fired`].
    pub fn insert(&mut self, deadline: u64, value: T) -> (Key, EntryState) {
        let index = self.alloc(deadline.min(MAX_TICK), value);
        let state = self.place(index);
        (self.key(index), state)
    }

    /// Moves a live entry to a new deadline in place (same slab index, same
    /// key, value kept), whether it was scheduled or fired. Returns its new
    /// state, or `None` for a stale key.
    pub fn reschedule(&mut self, key: Key, deadline: u64) -> Option<EntryState> {
        let index = self.index_of(key)?;
        self.unlink(index);
        self.entries[index as usize].deadline = deadline.min(MAX_TICK);
        Some(self.place(index))
    }

    /// Marks a live entry fired now, whatever its deadline (the driver uses
    /// it when the clock shows a deadline passed before the wheel caught up).
    /// Returns `false` for a stale key.
    pub fn fire(&mut self, key: Key) -> bool {
        let Some(index) = self.index_of(key) else {
            return false;
        };
        self.unlink(index);
        self.entries[index as usize].loc = Loc::Fired;
        true
    }

    /// Removes an entry, scheduled (cancel) or fired, and returns its value;
    /// `None` for a stale key. O(1). The key is dead afterwards.
    pub fn remove(&mut self, key: Key) -> Option<T> {
        let index = self.index_of(key)?;
        self.unlink(index);
        Some(self.release(index))
    }

    /// The state of a live entry; `None` for a stale key.
    pub fn state(&self, key: Key) -> Option<EntryState> {
        let index = self.index_of(key)?;
        Some(match self.entries[index as usize].loc {
            Loc::Fired => EntryState::Fired,
            _ => EntryState::Scheduled,
        })
    }

    /// The deadline of a live entry (after clamping); `None` for a stale key.
    pub fn deadline(&self, key: Key) -> Option<u64> {
        let index = self.index_of(key)?;
        Some(self.entries[index as usize].deadline)
    }

    /// The value of a live entry; `None` for a stale key.
    pub fn get_mut(&mut self, key: Key) -> Option<&mut T> {
        let index = self.index_of(key)?;
        self.entries[index as usize].value.as_mut()
    }

    /// The tick at which [`pop_expired`](Self::pop_expired) next has work:
    /// the start of the earliest occupied slot (or overflow block), or
    /// `elapsed` while a cascade is half drained. Never later than the
    /// earliest scheduled deadline; equal to it when that entry sits in
    /// level 0. `None` when nothing is scheduled.
    pub fn next_expiration(&self) -> Option<u64> {
        self.next_source().map(|(tick, _)| tick)
    }

    /// Fires the next entry with deadline `<= now` and returns its key, or
    /// returns `None` once there is none (and `elapsed` has moved to `now`,
    /// if `now` was later). Successive calls return entries in
    /// non-decreasing deadline order. A fired entry stays in the slab until
    /// [`remove`](Self::remove).
    pub fn pop_expired(&mut self, now: u64) -> Option<Key> {
        let now = now.min(MAX_TICK);
        loop {
            if self.pending != NIL && self.elapsed <= now {
                let index = self.pending;
                self.unlink(index);
                if self.place(index) == EntryState::Fired {
                    return Some(self.key(index));
                }
                // Re-linked one or more levels lower: the cascade.
                continue;
            }
            match self.next_source() {
                Some((tick, source)) if tick <= now => self.open(tick, source),
                _ => {
                    self.elapsed = self.elapsed.max(now);
                    return None;
                }
            }
        }
    }

    // ----- internals -----

    fn key(&self, index: u32) -> Key {
        Key {
            index,
            generation: self.entries[index as usize].generation,
        }
    }

    fn index_of(&self, key: Key) -> Option<u32> {
        let entry = self.entries.get(key.index as usize)?;
        (entry.generation == key.generation && entry.loc != Loc::Free).then_some(key.index)
    }

    fn alloc(&mut self, deadline: u64, value: T) -> u32 {
        self.live += 1;
        if self.free_head != NIL {
            let index = self.free_head;
            let entry = &mut self.entries[index as usize];
            self.free_head = entry.next;
            entry.deadline = deadline;
            entry.loc = Loc::Fired; // placeholder until `place`; on no list
            entry.prev = NIL;
            entry.next = NIL;
            entry.value = Some(value);
            return index;
        }
        let index = u32::try_from(self.entries.len())
            .ok()
            .filter(|&i| i != NIL)
            .expect("timer wheel: more than u32::MAX - 1 concurrent timers");
        self.entries.push(Entry {
            generation: 0,
            deadline,
            loc: Loc::Fired,
            prev: NIL,
            next: NIL,
            value: Some(value),
        });
        index
    }

    /// Frees an unlinked entry and returns its value. Bumping the generation
    /// kills every outstanding key to it.
    fn release(&mut self, index: u32) -> T {
        self.live -= 1;
        let entry = &mut self.entries[index as usize];
        entry.generation = entry.generation.wrapping_add(1);
        entry.loc = Loc::Free;
        entry.prev = NIL;
        entry.next = self.free_head;
        self.free_head = index;
        entry.value.take().expect("a live entry holds its value")
    }

    /// Links an unlinked entry where its deadline belongs relative to
    /// `elapsed`, or marks it fired if that deadline has passed.
    fn place(&mut self, index: u32) -> EntryState {
        let deadline = self.entries[index as usize].deadline;
        if deadline <= self.elapsed {
            self.entries[index as usize].loc = Loc::Fired;
            return EntryState::Fired;
        }
        // The level is the 6-bit group holding the highest bit in which the
        // deadline differs from `elapsed` (invariant 2); `| (SLOTS - 1)`
        // makes a difference confined to the lowest group land in level 0.
        let masked = (self.elapsed ^ deadline) | (SLOTS as u64 - 1);
        let level = ((u64::BITS - 1 - masked.leading_zeros()) / SLOT_BITS) as usize;
        let loc = if level < LEVELS {
            let slot = (deadline >> (SLOT_BITS * level as u32)) as usize % SLOTS;
            Loc::Slot {
                level: level as u8,
                slot: slot as u8,
            }
        } else {
            Loc::Overflow
        };
        self.link(index, loc);
        EntryState::Scheduled
    }

    fn head_mut(&mut self, loc: Loc) -> &mut u32 {
        match loc {
            Loc::Slot { level, slot } => &mut self.heads[level as usize][slot as usize],
            Loc::Overflow => &mut self.overflow,
            Loc::Pending => &mut self.pending,
            Loc::Free | Loc::Fired => unreachable!("{loc:?} is on no list"),
        }
    }

    /// Pushes an unlinked entry on the front of `loc`'s list.
    fn link(&mut self, index: u32, loc: Loc) {
        let head = *self.head_mut(loc);
        if head != NIL {
            self.entries[head as usize].prev = index;
        }
        let entry = &mut self.entries[index as usize];
        entry.loc = loc;
        entry.prev = NIL;
        entry.next = head;
        *self.head_mut(loc) = index;
        if let Loc::Slot { level, slot } = loc {
            self.occupied[level as usize] |= 1 << slot;
        }
    }

    /// Takes an entry off whatever list it is on (no-op for a fired entry).
    fn unlink(&mut self, index: u32) {
        let Entry {
            loc, prev, next, ..
        } = self.entries[index as usize];
        if matches!(loc, Loc::Free | Loc::Fired) {
            return;
        }
        if prev == NIL {
            *self.head_mut(loc) = next;
        } else {
            self.entries[prev as usize].next = next;
        }
        if next != NIL {
            self.entries[next as usize].prev = prev;
        }
        if let Loc::Slot { level, slot } = loc {
            if self.heads[level as usize][slot as usize] == NIL {
                self.occupied[level as usize] &= !(1 << slot);
            }
        }
        let entry = &mut self.entries[index as usize];
        entry.prev = NIL;
        entry.next = NIL;
        entry.loc = Loc::Fired; // on no list; the caller decides what it is
    }

    fn next_source(&self) -> Option<(u64, Source)> {
        if self.pending != NIL {
            return Some((self.elapsed, Source::Pending));
        }
        for level in 0..LEVELS {
            let shift = SLOT_BITS * level as u32;
            let digit = (self.elapsed >> shift) % SLOTS as u64;
            // Slots strictly after elapsed's digit (invariant 2).
            let after = u64::MAX.checked_shl(digit as u32 + 1).unwrap_or(0);
            let candidates = self.occupied[level] & after;
            if candidates != 0 {
                let slot = u64::from(candidates.trailing_zeros());
                let block = self.elapsed & !((1u64 << (shift + SLOT_BITS)) - 1);
                return Some((
                    block | (slot << shift),
                    Source::Slot {
                        level,
                        slot: slot as usize,
                    },
                ));
            }
        }
        (self.overflow != NIL).then(|| {
            let next_block = ((self.elapsed / WHEEL_SPAN) + 1) * WHEEL_SPAN;
            (next_block, Source::Overflow)
        })
    }

    /// Advances `elapsed` to `tick` and moves `source`'s list to pending.
    fn open(&mut self, tick: u64, source: Source) {
        debug_assert!(self.pending == NIL, "a cascade is already open");
        debug_assert!(tick > self.elapsed);
        let head = match source {
            Source::Pending => unreachable!("pending is drained before opening a slot"),
            Source::Slot { level, slot } => {
                self.occupied[level] &= !(1 << slot);
                std::mem::replace(&mut self.heads[level][slot], NIL)
            }
            Source::Overflow => std::mem::replace(&mut self.overflow, NIL),
        };
        self.elapsed = tick;
        self.pending = head;
        let mut cursor = head;
        while cursor != NIL {
            let entry = &mut self.entries[cursor as usize];
            entry.loc = Loc::Pending;
            cursor = entry.next;
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn level_digits_follow_the_highest_differing_bit() {
        let mut wheel = Wheel::new();
        let cases = [
            (1, Loc::Slot { level: 0, slot: 1 }),
            (63, Loc::Slot { level: 0, slot: 63 }),
            (64, Loc::Slot { level: 1, slot: 1 }),
            (4095, Loc::Slot { level: 1, slot: 63 }),
            (4096, Loc::Slot { level: 2, slot: 1 }),
            (WHEEL_SPAN - 1, Loc::Slot { level: 5, slot: 63 }),
            (WHEEL_SPAN, Loc::Overflow),
        ];
        for (deadline, want) in cases {
            let (key, _) = wheel.insert(deadline, ());
            assert_eq!(wheel.entries[key.index as usize].loc, want, "{deadline}");
        }
    }

    #[test]
    fn next_expiration_is_the_slot_start_never_after_the_deadline() {
        let mut wheel = Wheel::new();
        wheel.insert(64 * 5 + 17, ());
        assert_eq!(wheel.next_expiration(), Some(64 * 5));
        assert_eq!(wheel.pop_expired(64 * 5), None, "cascade only");
        assert_eq!(wheel.next_expiration(), Some(64 * 5 + 17));
    }

    #[test]
    fn a_waker_entry_takes_forty_eight_bytes() {
        // The README's per-timer cost.
        assert_eq!(std::mem::size_of::<Entry<Option<std::task::Waker>>>(), 48);
    }

    #[test]
    fn stale_key_reaches_nothing_after_reuse() {
        let mut wheel = Wheel::new();
        let (old, _) = wheel.insert(10, 'a');
        assert_eq!(wheel.remove(old), Some('a'));
        let (new, _) = wheel.insert(20, 'b');
        assert_eq!(new.index, old.index, "the free list reuses the index");
        assert_eq!(wheel.remove(old), None);
        assert_eq!(wheel.get_mut(old), None);
        assert_eq!(wheel.remove(new), Some('b'));
    }
}
