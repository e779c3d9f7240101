//! The object frontier: how many objects may be in flight, and the RAII
//! permit that proves an object holds one of those places.
//!
//! The frontier is a count budget per nesting **level**: level 0 holds files
//! found on disk, level `d` (1 ≤ d ≤ archive depth) the members of archives
//! at depth `d`. An object takes a place in its level when it is discovered
//! and gives it back exactly once, when the last [`ObjectRef`] to it drops
//! (the permit lives inside [`ObjectCtx`]). Why levels: an archive holds its
//! own place while it waits for places for its members; with one shared
//! budget, a frontier full of archives each waiting for a member place would
//! never move. With levels, an object only ever waits for a place one level
//! deeper, and the deepest level never waits, so every level drains
//! (README.md, "Why nothing waits forever").
//!
//! Two ways to take a place:
//!
//! - [`ObjectFrontier::try_acquire`] / [`ObjectFrontier::try_acquire_ctx`]
//!   never block: `None` at capacity. They are the only calls executor
//!   threads make; an Enumerate task that gets `None` parks itself on the
//!   [`WaitList`] and is re-spawned when a place frees.
//! - [`ObjectFrontier::acquire`] blocks until a place frees. It is for
//!   producers outside the executor only: a worker blocked on it could be the
//!   one whose tasks would free the place.
//!
//! ## Orderings
//!
//! `in_flight` of each level is changed only by read-modify-writes. The
//! decrement in [`ObjectPermit`]'s drop is SeqCst and is followed, in the same
//! task, by the executor-side check of the wait list (`fence(SeqCst)` then the
//! waiter count, in `run.rs`); a parking task publishes itself in the wait
//! list, fences, and re-reads `in_flight`. That is the store-buffering
//! pattern: at least one of the two sees the other, so a parked task is never
//! left behind (README.md, "Parking"). The blocking [`ObjectFrontier::acquire`]
//! uses the same pattern with its own sleeper count and a condition variable.

use std::fmt;

use magpie_core::sync::atomic::{fence, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use magpie_core::sync::{Arc, Condvar, Mutex};
use magpie_core::CachePadded;

use crate::report::ObjPath;
use crate::skip::SkipReason;

/// The most nesting levels a frontier has (level 0 plus archive depths up to
/// the CLI's maximum `--archive-depth` of 64).
pub const MAX_LEVELS: usize = 65;

/// Number of distinct skip labels (`SkipReason::LABELS`).
pub const SKIP_LABELS: usize = SkipReason::LABELS.len();

/// Index of `reason`'s label in [`SkipReason::LABELS`].
pub fn label_index(reason: &SkipReason) -> usize {
    let label = reason.label();
    SkipReason::LABELS
        .iter()
        .position(|l| *l == label)
        .expect("every label is listed in SkipReason::LABELS")
}

/// Everything known about an object when it is discovered. At most 64 bytes
/// (asserted in `frontier_basic.rs`): the path is the only heap part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectDescriptor {
    /// The file, plus one segment per archive level.
    pub path: ObjPath,
    /// Size from the listing or the archive header (0 when unknown); the
    /// real size is taken when the object is opened.
    pub size_hint: u64,
    /// Run-scoped id, assigned by the frontier when the place is taken (0
    /// before).
    pub id: u64,
    /// Frontier level: 0 for a file on disk, `d` for a member of an archive
    /// at depth `d`.
    pub level: u8,
    /// Open with symlinks followed in the last component (a path named on
    /// the command line, or `--follow-symlinks`).
    pub follow: bool,
    /// Read as a stream (standard input, a FIFO named on the command line):
    /// no size up front, no positional reads, no archive detection.
    pub stream: bool,
    /// The stream is standard input (`-`).
    pub stdin: bool,
    /// A blob of a git history (`scan git`): its id and the commit that
    /// introduced it. Archive members inside such a blob carry the same.
    pub git: Option<std::sync::Arc<crate::git::GitBlob>>,
}

impl ObjectDescriptor {
    /// A descriptor for `path` at `level`.
    pub fn new(path: ObjPath, size_hint: u64, level: u8) -> Self {
        Self {
            path,
            size_hint,
            id: 0,
            level,
            follow: false,
            stream: false,
            stdin: false,
            git: None,
        }
    }
}

/// How an object's life ended. Every object ends exactly one way; the
/// frontier counts the ends when the object's last reference drops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObjectEnd {
    /// Its bytes were read and scanned to the end.
    Scanned,
    /// It was an archive and was opened: its members are objects of their
    /// own.
    Expanded,
    /// Not (completely) scanned, for this reason. Bytes scanned before a
    /// mid-object error still count in `bytes_scanned`.
    Skipped(SkipReason),
}

const END_PENDING: u8 = 0;
const END_SCANNED: u8 = 1;
const END_EXPANDED: u8 = 2;
/// `END_SKIPPED_BASE + i`: skipped with label `SkipReason::LABELS[i]`.
const END_SKIPPED_BASE: u8 = 3;
const _: () = assert!((END_SKIPPED_BASE as usize) + SKIP_LABELS <= u8::MAX as usize);

struct Level {
    capacity: usize,
    in_flight: CachePadded<AtomicUsize>,
    /// Places ever taken at this level (also the source of object ids).
    acquired: AtomicU64,
    /// Highest `in_flight` seen.
    peak: AtomicUsize,
}

/// Totals of ended objects (bumped when an object's context drops).
#[derive(Default)]
struct Ends {
    scanned: AtomicU64,
    expanded: AtomicU64,
    /// Dropped with no end recorded: only when a run is aborted (or a bug).
    abandoned: AtomicU64,
    skipped: [AtomicU64; SKIP_LABELS],
}

struct Inner {
    levels: Box<[Level]>,
    ends: Ends,
    /// Run-wide id source.
    next_id: AtomicU64,
    /// Outside producers blocked in `acquire`.
    sleepers: AtomicUsize,
    sleep_lock: Mutex<()>,
    sleep_cv: Condvar,
}

/// A per-level count budget of in-flight objects. Cloning shares it.
#[derive(Clone)]
pub struct ObjectFrontier {
    inner: Arc<Inner>,
}

impl fmt::Debug for ObjectFrontier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let levels: Vec<(usize, usize)> = (0..self.levels())
            .map(|l| (self.in_flight(l), self.capacity(l)))
            .collect();
        f.debug_struct("ObjectFrontier")
            .field("in_flight/capacity", &levels)
            .finish()
    }
}

/// The counts of a frontier at one moment (each read is atomic; the set is
/// exact once nothing is in flight).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FrontierStats {
    /// Places taken, per level.
    pub acquired: Vec<u64>,
    /// Places held now, per level.
    pub in_flight: Vec<usize>,
    /// Highest number of places held at once, per level.
    pub peak: Vec<usize>,
    /// Objects that ended scanned.
    pub scanned: u64,
    /// Objects that ended opened as archives.
    pub expanded: u64,
    /// Objects that ended with no end recorded (an aborted run).
    pub abandoned: u64,
    /// Objects that ended skipped, by index into `SkipReason::LABELS`.
    pub skipped: [u64; SKIP_LABELS],
}

impl FrontierStats {
    /// Places taken over all levels.
    pub fn acquired_total(&self) -> u64 {
        self.acquired.iter().sum()
    }

    /// Objects that ended (released their place), any way.
    pub fn ended(&self) -> u64 {
        self.scanned + self.expanded + self.abandoned + self.skipped.iter().sum::<u64>()
    }
}

impl ObjectFrontier {
    /// A frontier with one level per entry of `capacities` (each at least 1,
    /// at most [`MAX_LEVELS`] levels).
    pub fn new(capacities: &[usize]) -> Self {
        assert!(
            !capacities.is_empty() && capacities.len() <= MAX_LEVELS,
            "a frontier has 1..={MAX_LEVELS} levels"
        );
        assert!(
            capacities.iter().all(|&c| c > 0),
            "every level needs a place"
        );
        let levels = capacities
            .iter()
            .map(|&capacity| Level {
                capacity,
                in_flight: CachePadded::new(AtomicUsize::new(0)),
                acquired: AtomicU64::new(0),
                peak: AtomicUsize::new(0),
            })
            .collect();
        Self {
            inner: Arc::new(Inner {
                levels,
                ends: Ends::default(),
                next_id: AtomicU64::new(1),
                sleepers: AtomicUsize::new(0),
                sleep_lock: Mutex::new(()),
                sleep_cv: Condvar::new(),
            }),
        }
    }

    /// A single-level frontier of `capacity` places.
    pub fn with_capacity(capacity: usize) -> Self {
        Self::new(&[capacity])
    }

    /// Number of levels.
    pub fn levels(&self) -> usize {
        self.inner.levels.len()
    }

    /// Places at `level`.
    pub fn capacity(&self, level: usize) -> usize {
        self.inner.levels[level].capacity
    }

    /// Places held at `level` now. SeqCst: the re-check of a parking task
    /// (README.md, "Parking", step 3) pairs with the SeqCst decrement in
    /// [`ObjectPermit`]'s drop.
    pub fn in_flight(&self, level: usize) -> usize {
        self.inner.levels[level].in_flight.load(Ordering::SeqCst)
    }

    /// Free places at `level` now.
    pub fn available(&self, level: usize) -> usize {
        self.capacity(level).saturating_sub(self.in_flight(level))
    }

    /// Takes a place at `level`, or `None` at once if the level is full.
    /// Never blocks.
    pub fn try_acquire(&self, level: u8) -> Option<ObjectPermit> {
        let lv = &self.inner.levels[usize::from(level)];
        // Relaxed: taking a place publishes nothing (the object context is
        // built afterwards by the same thread); the decrement's SeqCst side
        // is what the parking protocol needs.
        let prev = lv
            .in_flight
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < lv.capacity).then_some(n + 1)
            })
            .ok()?;
        // Relaxed: statistics.
        lv.acquired.fetch_add(1, Ordering::Relaxed);
        lv.peak.fetch_max(prev + 1, Ordering::Relaxed);
        Some(ObjectPermit {
            frontier: Arc::clone(&self.inner),
            level,
        })
    }

    /// Takes a place for `desc` and wraps both in a new [`ObjectRef`], or
    /// `None` at once if `desc.level` is full. Never blocks: this is the call
    /// executor threads use.
    pub fn try_acquire_ctx(&self, desc: ObjectDescriptor) -> Option<ObjectRef> {
        let permit = self.try_acquire(desc.level)?;
        Some(ObjectCtx::new(desc, permit))
    }

    /// Takes a place for `desc`, waiting for one to free if the level is
    /// full. **Blocks**: only for producers outside the executor.
    pub fn acquire(&self, desc: ObjectDescriptor) -> ObjectRef {
        if let Some(obj) = self.try_acquire_ctx(desc.clone()) {
            return obj;
        }
        let inner = &*self.inner;
        let mut guard = inner
            .sleep_lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // SeqCst: pairs with the SeqCst decrement and sleeper load in
        // ObjectPermit::drop: either the releaser sees this sleeper and
        // notifies (under the lock, so not before we wait), or our retry
        // below sees its decrement.
        inner.sleepers.fetch_add(1, Ordering::SeqCst);
        let obj = loop {
            fence(Ordering::SeqCst);
            if let Some(obj) = self.try_acquire_ctx(desc.clone()) {
                break obj;
            }
            guard = inner
                .sleep_cv
                .wait(guard)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        };
        inner.sleepers.fetch_sub(1, Ordering::SeqCst);
        drop(guard);
        obj
    }

    /// A snapshot of the counts.
    pub fn stats(&self) -> FrontierStats {
        let inner = &*self.inner;
        // Relaxed: statistics, read after the run (or as a moment's view).
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let mut skipped = [0u64; SKIP_LABELS];
        for (s, a) in skipped.iter_mut().zip(&inner.ends.skipped) {
            *s = load(a);
        }
        FrontierStats {
            acquired: inner.levels.iter().map(|l| load(&l.acquired)).collect(),
            in_flight: inner
                .levels
                .iter()
                .map(|l| l.in_flight.load(Ordering::SeqCst))
                .collect(),
            peak: inner
                .levels
                .iter()
                .map(|l| l.peak.load(Ordering::Relaxed))
                .collect(),
            scanned: load(&inner.ends.scanned),
            expanded: load(&inner.ends.expanded),
            abandoned: load(&inner.ends.abandoned),
            skipped,
        }
    }
}

/// Proof of one place in a frontier level. Not `Clone`: it is released
/// exactly once, by its drop.
pub struct ObjectPermit {
    frontier: Arc<Inner>,
    level: u8,
}

impl fmt::Debug for ObjectPermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectPermit")
            .field("level", &self.level)
            .finish()
    }
}

impl ObjectPermit {
    /// The level whose place this is.
    pub fn level(&self) -> u8 {
        self.level
    }
}

impl Drop for ObjectPermit {
    fn drop(&mut self) {
        let inner = &*self.frontier;
        // SeqCst: pairs with the SeqCst re-check of a parking task (README.md,
        // "Parking") and with the sleeper registration in `acquire`; see the
        // module docs.
        let prev = inner.levels[usize::from(self.level)]
            .in_flight
            .fetch_sub(1, Ordering::SeqCst);
        debug_assert!(prev > 0, "a permit was released twice");
        // SeqCst: the other half of `acquire`'s store-buffering pair.
        if inner.sleepers.load(Ordering::SeqCst) > 0 {
            // Taking the lock orders the notify after a sleeper's check.
            let _g = inner
                .sleep_lock
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            inner.sleep_cv.notify_all();
        }
    }
}

/// An object in flight: its descriptor, how it ended (once known) and its
/// frontier place. Shared by every task working on the object through
/// [`ObjectRef`]; when the last one drops, the end is counted and then the
/// place is released.
pub struct ObjectCtx {
    desc: ObjectDescriptor,
    end: AtomicU8,
    // Declared last: dropped after `Drop::drop` has counted the end.
    permit: ObjectPermit,
}

/// A shared reference to an in-flight object (one pointer).
pub type ObjectRef = Arc<ObjectCtx>;

impl fmt::Debug for ObjectCtx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectCtx")
            .field("desc", &self.desc)
            .field("end", &self.end())
            .field("level", &self.permit.level)
            .finish()
    }
}

impl ObjectCtx {
    /// Wraps `desc` and its place. The descriptor's level is the permit's.
    pub fn new(mut desc: ObjectDescriptor, permit: ObjectPermit) -> ObjectRef {
        desc.level = permit.level;
        // Relaxed: an id only needs to be unique.
        desc.id = permit.frontier.next_id.fetch_add(1, Ordering::Relaxed);
        Arc::new(ObjectCtx {
            desc,
            end: AtomicU8::new(END_PENDING),
            permit,
        })
    }

    /// What was known at discovery.
    pub fn desc(&self) -> &ObjectDescriptor {
        &self.desc
    }

    /// The object's path.
    pub fn path(&self) -> &ObjPath {
        &self.desc.path
    }

    /// Records how the object ended. The first call wins; later calls are
    /// ignored (and are a bug in debug builds).
    pub fn set_end(&self, end: ObjectEnd) {
        let code = match end {
            ObjectEnd::Scanned => END_SCANNED,
            ObjectEnd::Expanded => END_EXPANDED,
            ObjectEnd::Skipped(r) => END_SKIPPED_BASE + label_index(&r) as u8,
        };
        // Relaxed: read only by the drop of the last reference, which the
        // Arc's own Release/Acquire on its count orders after this store.
        let prev =
            self.end
                .compare_exchange(END_PENDING, code, Ordering::Relaxed, Ordering::Relaxed);
        debug_assert!(prev.is_ok(), "{:?} ended twice", self.desc.path);
    }

    /// The end recorded so far (`None` while pending).
    pub fn end(&self) -> Option<&'static str> {
        // Relaxed: diagnostics.
        match self.end.load(Ordering::Relaxed) {
            END_PENDING => None,
            END_SCANNED => Some("scanned"),
            END_EXPANDED => Some("expanded"),
            c => Some(SkipReason::LABELS[usize::from(c - END_SKIPPED_BASE)]),
        }
    }
}

impl Drop for ObjectCtx {
    fn drop(&mut self) {
        let ends = &self.permit.frontier.ends;
        // Relaxed: statistics, read after the executor has been joined.
        let counter = match self.end.load(Ordering::Relaxed) {
            END_PENDING => &ends.abandoned,
            END_SCANNED => &ends.scanned,
            END_EXPANDED => &ends.expanded,
            c => &ends.skipped[usize::from(c - END_SKIPPED_BASE)],
        };
        counter.fetch_add(1, Ordering::Relaxed);
        // `self.permit` drops next and releases the place.
    }
}

/// What a parked task waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitKey {
    /// A free place at this frontier level.
    Level(u8),
    /// A free chunk buffer in the pool.
    Buffer,
}

/// Tasks that could not go on (frontier level full, buffer pool empty),
/// parked until a place or buffer frees. Executor threads never block on
/// it: a task parks itself and returns; whoever frees a place or buffer
/// re-spawns it (README.md, "Parking").
pub struct WaitList<T> {
    waiting: CachePadded<AtomicUsize>,
    list: Mutex<Vec<(WaitKey, T)>>,
    /// Parks over the run (statistics).
    parks: AtomicU64,
}

impl<T> fmt::Debug for WaitList<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WaitList")
            .field("waiting", &self.len())
            .finish()
    }
}

impl<T> Default for WaitList<T> {
    fn default() -> Self {
        Self {
            waiting: CachePadded::new(AtomicUsize::new(0)),
            list: Mutex::new(Vec::new()),
            parks: AtomicU64::new(0),
        }
    }
}

impl<T> WaitList<T> {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> magpie_core::sync::MutexGuard<'_, Vec<(WaitKey, T)>> {
        self.list
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Parked tasks right now. Callers that must not miss a park run
    /// `fence(SeqCst)` first (see [`WaitList::wake`]).
    pub fn len(&self) -> usize {
        // Relaxed: ordered by the caller's SeqCst fence.
        self.waiting.load(Ordering::Relaxed)
    }

    /// Whether nothing is parked.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Times a task parked, over the run.
    pub fn parks(&self) -> u64 {
        // Relaxed: statistics.
        self.parks.load(Ordering::Relaxed)
    }

    /// Parks `task` until `key` is ready, then re-checks: returns every parked
    /// task whose key `ready` now says is ready (possibly `task` itself),
    /// for the caller to spawn. Steps 1-3 of "Parking" in README.md.
    #[must_use = "the returned tasks must be spawned"]
    pub fn park(&self, key: WaitKey, task: T, ready: impl Fn(WaitKey) -> bool) -> Vec<T> {
        {
            let mut list = self.lock();
            list.push((key, task));
            // Relaxed: the fence below orders it before our re-check.
            self.waiting.fetch_add(1, Ordering::Relaxed);
        }
        // Relaxed: statistics.
        self.parks.fetch_add(1, Ordering::Relaxed);
        self.wake(ready)
    }

    /// The releaser's side (step 4): after freeing places or buffers, take
    /// every parked task whose key is ready, for the caller to spawn.
    #[must_use = "the returned tasks must be spawned"]
    pub fn wake(&self, ready: impl Fn(WaitKey) -> bool) -> Vec<T> {
        // SeqCst fence: pairs with the other side's fence. A parker's
        // increment of `waiting` comes before its fence and its re-check of
        // the budget after it; a releaser's decrement of the budget comes
        // before its fence and its load of `waiting` after it. Whichever
        // fence is first in the single SeqCst order, the other side's load
        // sees the first side's write: no park is missed.
        #[cfg(not(magpie_broken = "waitlist_no_fence"))]
        fence(Ordering::SeqCst);
        if self.is_empty() {
            return Vec::new();
        }
        let mut list = self.lock();
        let mut out = Vec::new();
        let mut i = 0;
        while i < list.len() {
            if ready(list[i].0) {
                out.push(list.swap_remove(i).1);
            } else {
                i += 1;
            }
        }
        if !out.is_empty() {
            // Relaxed: under the lock; readers order themselves by fences.
            self.waiting.fetch_sub(out.len(), Ordering::Relaxed);
        }
        out
    }

    /// Takes every parked task (run abort, end of run).
    pub fn drain(&self) -> Vec<T> {
        let mut list = self.lock();
        let out: Vec<T> = list.drain(..).map(|(_, t)| t).collect();
        // Relaxed: under the lock.
        self.waiting.fetch_sub(out.len(), Ordering::Relaxed);
        out
    }
}

/// Loom model of the parking protocol (run with `RUSTFLAGS="--cfg loom -C
/// debug-assertions" LOOM_MAX_PREEMPTIONS=2 CARGO_TARGET_DIR=target/loom
/// cargo test -p scan --release --lib pipeline::frontier::loom_tests`).
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;

    fn desc() -> ObjectDescriptor {
        ObjectDescriptor::new(ObjPath::from_file_bytes(b"x"), 0, 0)
    }

    /// One place, held. A task finds the level full and parks while the
    /// holder releases the place and wakes what is ready: the task is handed
    /// back exactly once (by its own re-check or by the releaser's wake), and
    /// nothing is left parked. Conservation: parked == handed back.
    // protocol: waitlist 1 2 3 4
    // broken-variant: waitlist_no_fence; class: store buffering; expects: a parked task was lost or doubled
    #[test]
    fn parked_task_is_handed_back_exactly_once() {
        loom::model(|| {
            let frontier = ObjectFrontier::with_capacity(1);
            let list = Arc::new(WaitList::<u32>::new());
            let held = frontier.try_acquire_ctx(desc()).unwrap();
            let (f2, l2) = (frontier.clone(), Arc::clone(&list));
            let parker = loom::thread::spawn(move || {
                let ready =
                    |k: WaitKey| matches!(k, WaitKey::Level(l) if f2.available(usize::from(l)) > 0);
                match f2.try_acquire(0) {
                    // The place freed first: no need to park.
                    Some(_permit) => (0, 0),
                    None => (1, l2.park(WaitKey::Level(0), 7, ready).len()),
                }
            });
            held.set_end(ObjectEnd::Scanned);
            drop(held);
            let ready = |k: WaitKey| matches!(k, WaitKey::Level(l) if frontier.available(usize::from(l)) > 0);
            let woken = list.wake(ready).len();
            let (parked, self_woken) = parker.join().unwrap();
            assert_eq!(
                parked,
                woken + self_woken,
                "a parked task was lost or doubled"
            );
            assert_eq!(list.len(), 0, "left behind");
        });
    }

    /// The same protocol against the buffer pool, whose return is a Release
    /// `fetch_or` (not SeqCst): the fences alone must order it against the
    /// parker's re-check. One buffer, held; a FetchSync finds the pool empty
    /// and parks while the Scan holding the buffer drops it and wakes.
    // protocol: waitlist 1 2 3 4
    // broken-variant: waitlist_no_fence; class: store buffering; expects: a parked task was lost or doubled
    #[test]
    fn task_parked_on_the_pool_is_handed_back_exactly_once() {
        loom::model(|| {
            let pool = crate::pool::BufferPool::new(1, 1);
            let list = Arc::new(WaitList::<u32>::new());
            let held = pool.try_get().unwrap();
            let (p2, l2) = (pool.clone(), Arc::clone(&list));
            let parker = loom::thread::spawn(move || match p2.try_get() {
                Some(_buf) => (0, 0),
                None => {
                    let ready = |_k: WaitKey| p2.available() > 0;
                    (1, l2.park(WaitKey::Buffer, 7, ready).len())
                }
            });
            drop(held);
            let woken = list.wake(|_k| pool.available() > 0).len();
            let (parked, self_woken) = parker.join().unwrap();
            assert_eq!(
                parked,
                woken + self_woken,
                "a parked task was lost or doubled"
            );
            assert_eq!(list.len(), 0, "left behind");
        });
    }
}
