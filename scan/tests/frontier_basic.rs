//! The object frontier and its permits (seed 001's proofs): `try_acquire`
//! never blocks, a permit is released exactly once when the last reference
//! drops, a multi-chunk object holds its place until its last task is done,
//! concurrent completions all release, and the task types stay small.
//! Plus the wait list: a task parked on a full level or an empty pool is
//! always handed back once a place frees, never lost and never twice.
#![cfg(not(loom))]

use magpie_core::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::time::Duration;

use scan::pipeline::frontier::{ObjectDescriptor, ObjectEnd, ObjectFrontier, WaitKey, WaitList};
use scan::pipeline::{ObjectRef, Task};
use scan::report::ObjPath;
use scan::skip::SkipReason;

fn desc(name: &str, level: u8) -> ObjectDescriptor {
    ObjectDescriptor::new(ObjPath::from_file_bytes(name.as_bytes()), 0, level)
}

/// Runs `f` on a thread and fails (instead of hanging) if it does not finish:
/// a hang detector, not a speed check.
fn watchdog<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(120))
        .expect("blocked: try_acquire must return at once")
}

#[test]
fn task_fits_in_two_cache_lines() {
    assert!(
        std::mem::size_of::<Task>() <= 128,
        "Task is {} bytes",
        std::mem::size_of::<Task>()
    );
}

#[test]
fn object_descriptor_is_at_most_64_bytes_and_object_ref_one_pointer() {
    assert!(
        std::mem::size_of::<ObjectDescriptor>() <= 64,
        "ObjectDescriptor is {} bytes",
        std::mem::size_of::<ObjectDescriptor>()
    );
    assert_eq!(
        std::mem::size_of::<ObjectRef>(),
        std::mem::size_of::<usize>()
    );
}

#[test]
fn frontier_try_acquire_does_not_block() {
    let f = ObjectFrontier::with_capacity(2);
    let a = f.try_acquire_ctx(desc("a", 0)).expect("first place");
    let b = f.try_acquire_ctx(desc("b", 0)).expect("second place");
    let f2 = f.clone();
    let third = watchdog(move || f2.try_acquire_ctx(desc("c", 0)).is_none());
    assert!(third, "a full frontier must say no");
    assert_eq!(f.in_flight(0), 2);
    assert_eq!(f.available(0), 0);
    drop((a, b));
    assert_eq!(f.available(0), 2);
}

#[test]
fn object_ctx_releases_permit_on_drop() {
    let f = ObjectFrontier::with_capacity(1);
    let obj = f.try_acquire_ctx(desc("a", 0)).unwrap();
    assert_eq!(f.in_flight(0), 1);
    obj.set_end(ObjectEnd::Scanned);
    drop(obj);
    assert_eq!(f.in_flight(0), 0);
    let s = f.stats();
    assert_eq!((s.acquired_total(), s.ended(), s.scanned), (1, 1, 1));
    assert!(
        f.try_acquire_ctx(desc("b", 0)).is_some(),
        "the place is free"
    );
}

/// FetchSync(0) -> FetchSync(1) -> Scan(0) -> Scan(1), as the pipeline
/// clones and drops the reference: the place is held until the last drop,
/// and released once.
#[test]
fn permit_released_once_after_last_chunk() {
    let f = ObjectFrontier::with_capacity(4);
    let fetch0 = f.try_acquire_ctx(desc("big", 0)).unwrap();
    let fetch1 = ObjectRef::clone(&fetch0);
    let scan0 = ObjectRef::clone(&fetch0);
    drop(fetch0); // FetchSync(0) finished
    assert_eq!(f.in_flight(0), 1);
    let scan1 = ObjectRef::clone(&fetch1);
    fetch1.set_end(ObjectEnd::Scanned); // the last chunk was read
    drop(fetch1);
    assert_eq!(f.in_flight(0), 1);
    drop(scan0);
    assert_eq!(f.in_flight(0), 1, "a Scan still holds the object");
    drop(scan1);
    assert_eq!(f.in_flight(0), 0);
    let s = f.stats();
    assert_eq!(s.ended(), 1, "released exactly once");
    assert_eq!(s.scanned, 1);
}

#[test]
fn concurrent_object_completion() {
    const THREADS: usize = 10;
    let f = ObjectFrontier::with_capacity(THREADS);
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|i| {
            let f = f.clone();
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                let obj = f
                    .try_acquire_ctx(desc(&format!("obj{i}"), 0))
                    .expect("ten places for ten objects");
                let clones: Vec<ObjectRef> = (0..3).map(|_| ObjectRef::clone(&obj)).collect();
                obj.set_end(if i % 2 == 0 {
                    ObjectEnd::Scanned
                } else {
                    ObjectEnd::Skipped(SkipReason::Vanished)
                });
                barrier.wait();
                drop(obj);
                drop(clones);
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let s = f.stats();
    assert_eq!(f.in_flight(0), 0);
    assert_eq!(s.acquired_total(), THREADS as u64);
    assert_eq!(s.ended(), THREADS as u64);
    assert_eq!(s.scanned, 5);
    let vanished = SkipReason::LABELS
        .iter()
        .position(|l| *l == "vanished")
        .unwrap();
    assert_eq!(s.skipped[vanished], 5);
    assert_eq!(s.abandoned, 0);
}

#[test]
fn an_object_dropped_without_an_end_counts_as_abandoned() {
    let f = ObjectFrontier::with_capacity(1);
    drop(f.try_acquire_ctx(desc("a", 0)).unwrap());
    assert_eq!(f.stats().abandoned, 1);
    assert_eq!(f.in_flight(0), 0, "still released");
}

#[test]
fn levels_are_separate_budgets() {
    let f = ObjectFrontier::new(&[1, 2]);
    let archive = f.try_acquire_ctx(desc("a.zip", 0)).unwrap();
    assert!(f.try_acquire_ctx(desc("b", 0)).is_none(), "level 0 is full");
    let m1 = f
        .try_acquire_ctx(desc("a.zip!1", 1))
        .expect("level 1 has room");
    let m2 = f
        .try_acquire_ctx(desc("a.zip!2", 1))
        .expect("level 1 has room");
    assert!(f.try_acquire_ctx(desc("a.zip!3", 1)).is_none());
    assert_eq!(m1.desc().level, 1);
    drop((archive, m1, m2));
    assert_eq!((f.in_flight(0), f.in_flight(1)), (0, 0));
    assert_eq!(f.stats().acquired, vec![1, 2]);
}

#[test]
fn blocking_acquire_waits_for_a_release() {
    let f = ObjectFrontier::with_capacity(1);
    let held = f.try_acquire_ctx(desc("a", 0)).unwrap();
    let f2 = f.clone();
    let (tx, rx) = mpsc::channel();
    let producer = std::thread::spawn(move || {
        let obj = f2.acquire(desc("b", 0));
        tx.send(obj.path().to_string()).unwrap();
    });
    // The producer cannot have a place while `held` lives.
    assert!(rx.recv_timeout(Duration::from_millis(50)).is_err());
    drop(held);
    let got = rx
        .recv_timeout(Duration::from_secs(120))
        .expect("the release wakes the blocked producer");
    assert_eq!(got, "b");
    producer.join().unwrap();
    assert_eq!(f.in_flight(0), 0);
}

#[test]
fn a_parked_task_is_handed_back_when_a_place_frees() {
    let f = ObjectFrontier::with_capacity(1);
    let list: WaitList<&'static str> = WaitList::new();
    let held = f.try_acquire_ctx(desc("a", 0)).unwrap();
    let ready = |k: WaitKey| matches!(k, WaitKey::Level(l) if f.available(usize::from(l)) > 0);
    assert!(
        list.park(WaitKey::Level(0), "walk", ready).is_empty(),
        "level full: stays parked"
    );
    assert_eq!(list.len(), 1);
    assert!(list.wake(ready).is_empty(), "nothing freed yet");
    drop(held);
    assert_eq!(list.wake(ready), vec!["walk"]);
    assert!(list.is_empty());
    assert!(list.wake(ready).is_empty(), "handed back once");
}

#[test]
fn parking_after_the_release_hands_the_task_straight_back() {
    let f = ObjectFrontier::with_capacity(1);
    let list: WaitList<u32> = WaitList::new();
    let ready = |k: WaitKey| matches!(k, WaitKey::Level(l) if f.available(usize::from(l)) > 0);
    // The task saw a full level, but the place freed before it parked.
    assert_eq!(list.park(WaitKey::Level(0), 7, ready), vec![7]);
    assert!(list.is_empty());
}

/// Workers race: each takes a place or parks a token; each releaser wakes
/// what is ready. Every token is handed back exactly once, none is left
/// parked, and every place is released (conservation: parked == handed
/// back, acquired == released).
#[test]
fn racing_parks_and_releases_lose_no_task() {
    const THREADS: usize = 4;
    const ROUNDS: usize = if cfg!(miri) { 50 } else { 20_000 };
    let f = ObjectFrontier::with_capacity(2);
    let list = Arc::new(WaitList::<usize>::new());
    let parked = Arc::new(AtomicUsize::new(0));
    let handed_back = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (f, list) = (f.clone(), Arc::clone(&list));
            let (parked, handed_back) = (Arc::clone(&parked), Arc::clone(&handed_back));
            std::thread::spawn(move || {
                let ready =
                    |k: WaitKey| matches!(k, WaitKey::Level(l) if f.available(usize::from(l)) > 0);
                let mut seen = Vec::new();
                for r in 0..ROUNDS {
                    match f.try_acquire_ctx(desc("x", 0)) {
                        Some(obj) => {
                            obj.set_end(ObjectEnd::Scanned);
                            drop(obj);
                            seen.extend(list.wake(ready));
                        }
                        None => {
                            parked.fetch_add(1, Ordering::Relaxed);
                            seen.extend(list.park(WaitKey::Level(0), t * ROUNDS + r, ready));
                        }
                    }
                }
                handed_back.fetch_add(seen.len(), Ordering::Relaxed);
                seen
            })
        })
        .collect();
    let mut all: Vec<usize> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    // Every park was followed by a re-check, and every release by a wake:
    // nothing may be left behind once all places are free.
    assert_eq!(list.len(), 0, "a parked token was left behind");
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), n, "a token was handed back twice");
    assert_eq!(n, parked.load(Ordering::Relaxed), "a parked token was lost");
    assert_eq!(f.in_flight(0), 0);
    let s = f.stats();
    assert_eq!(s.acquired_total(), s.ended());
    assert!(handed_back.load(Ordering::Relaxed) <= n);
}
