//! Single-threaded tests of the idle state at the worker counts where a
//! one-word bitmap would break (past 64), plus the sequential rules of the
//! protocol. Races are the loom models' job (`core/tests/loom_idle.rs`) and
//! the stress test's (`core/tests/stress_park_idle.rs`).

use super::{Idle, MAX_WORKERS};
use crate::rng::XorShift64;

const SIZES: [usize; 7] = [1, 2, 63, 64, 65, 130, 300];

/// Parks `ids` in the given order, each not searching.
fn park_all(idle: &Idle, ids: &[usize]) {
    for &id in ids {
        assert!(!idle.transition_to_parked(id, false), "not a searcher");
        assert!(idle.is_parked(id));
    }
}

/// A Fisher-Yates shuffle of `0..n` with the crate's own generator.
fn shuffled(n: usize, seed: u64) -> Vec<usize> {
    let mut rng = XorShift64::new(seed);
    let mut ids: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        ids.swap(i, rng.next_usize(i + 1));
    }
    ids
}

#[test]
fn every_worker_parks_and_is_unparked_once_lowest_first() {
    for n in SIZES {
        let idle = Idle::new(n);
        park_all(&idle, &shuffled(n, n as u64));
        assert_eq!(idle.num_parked(), n);
        for expected in 0..n {
            // Nobody searches, so the notifier claims the lowest parked worker.
            assert_eq!(idle.unpark_one(), Some(expected), "n = {n}");
            assert!(!idle.is_parked(expected));
            assert_eq!(idle.num_searching(), 1);
            // A second notifier wakes nobody while that one searches.
            assert_eq!(idle.unpark_one(), None);
            // The woken worker finds work: it was the last searcher.
            assert!(idle.transition_from_searching());
            // It cannot leave the parked set a second time.
            assert!(!idle.unpark(expected));
        }
        assert_eq!(idle.unpark_one(), None, "nobody is parked");
        assert_eq!((idle.num_parked(), idle.num_searching()), (0, 0));
    }
}

#[test]
fn searcher_limit_is_half_the_workers_rounded_up() {
    for n in SIZES {
        let idle = Idle::new(n);
        let admitted = (0..n)
            .filter(|_| idle.try_transition_to_searching())
            .count();
        assert_eq!(admitted, n.div_ceil(2), "n = {n}");
        assert_eq!(idle.num_searching(), admitted);
        // One leaves (the last one only when the limit is one); exactly one
        // more gets in.
        assert_eq!(idle.transition_from_searching(), admitted == 1);
        assert!(idle.try_transition_to_searching());
        assert!(!idle.try_transition_to_searching());
    }
}

#[test]
fn unpark_one_wakes_nobody_while_a_searcher_is_awake() {
    let idle = Idle::new(4);
    park_all(&idle, &[0, 1]);
    assert!(idle.try_transition_to_searching());
    assert_eq!(idle.unpark_one(), None);
    assert!(idle.is_parked(0) && idle.is_parked(1));
    assert!(idle.transition_from_searching(), "the only searcher");
    assert_eq!(idle.unpark_one(), Some(0));
}

#[test]
fn would_unpark_agrees_with_unpark_one_when_nothing_races() {
    let idle = Idle::new(4);
    assert!(!idle.would_unpark(), "nobody parked");
    park_all(&idle, &[2]);
    assert!(idle.would_unpark());
    assert!(idle.try_transition_to_searching());
    assert!(!idle.would_unpark(), "a searcher is awake");
    assert_eq!(idle.unpark_one(), None);
    assert!(idle.transition_from_searching());
    assert!(idle.would_unpark());
    assert_eq!(idle.unpark_one(), Some(2));
    assert!(!idle.would_unpark(), "the parked worker was claimed");
}

#[test]
fn transition_to_parked_reports_only_the_last_searcher() {
    let idle = Idle::new(4);
    assert!(idle.try_transition_to_searching());
    assert!(idle.try_transition_to_searching());
    assert!(!idle.transition_to_parked(3, false), "not searching");
    assert!(!idle.transition_to_parked(0, true), "one searcher is left");
    assert!(idle.transition_to_parked(1, true), "the last searcher");
    assert_eq!((idle.num_parked(), idle.num_searching()), (3, 0));
}

#[test]
fn self_unpark_and_unpark_one_never_both_claim_a_worker() {
    for n in [3, 65, 300] {
        let idle = Idle::new(n);
        let last = n - 1;
        park_all(&idle, &[0, 1, last]);
        assert!(idle.unpark(1), "its park timed out: it clears its own bit");
        assert!(!idle.unpark(1), "and only once");
        assert_eq!(idle.num_parked(), 2);
        assert_eq!(idle.unpark_one(), Some(0));
        assert!(!idle.unpark(0), "a notifier already claimed it");
        assert!(idle.transition_from_searching());
        assert_eq!(idle.unpark_one(), Some(last));
        assert!(!idle.unpark(last));
        assert!(idle.transition_from_searching());
        assert_eq!((idle.num_parked(), idle.num_searching()), (0, 0));
    }
}

#[test]
fn unpark_all_returns_every_parked_worker_once() {
    for n in SIZES {
        let idle = Idle::new(n);
        let parked: Vec<usize> = (0..n).filter(|id| id % 3 != 1).collect();
        park_all(&idle, &parked);
        assert_eq!(idle.unpark_all(), parked, "n = {n}");
        assert!((0..n).all(|id| !idle.is_parked(id)));
        assert_eq!((idle.num_parked(), idle.num_searching()), (0, 0));
        assert!(parked.iter().all(|&id| !idle.unpark(id)));
        assert_eq!(idle.unpark_all(), Vec::<usize>::new());
        // Counts are back where they started: everyone may park again.
        park_all(&idle, &parked);
        assert_eq!(idle.num_parked(), parked.len());
    }
}

#[test]
#[should_panic(expected = "workers must be in")]
fn zero_workers_is_rejected() {
    let _ = Idle::new(0);
}

#[test]
#[should_panic(expected = "workers must be in")]
fn more_workers_than_the_counts_hold_is_rejected() {
    let _ = Idle::new(MAX_WORKERS + 1);
}

#[test]
#[should_panic(expected = "out of 0..65")]
fn a_worker_id_past_the_count_is_rejected() {
    let idle = Idle::new(65);
    let _ = idle.transition_to_parked(65, false);
}

#[test]
fn idle_is_send_and_sync() {
    fn shared<T: Send + Sync>() {}
    shared::<Idle>();
}

#[test]
fn state_word_has_a_cache_line_of_its_own() {
    let idle = Idle::new(1);
    let addr = &*idle.state as *const _ as usize;
    assert_eq!(addr % crate::cache_padded::CACHE_LINE, 0);
}

/// A worker as the model sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Model {
    Running {
        searching: bool,
    },
    Parked,
    /// Its bit was cleared by a notifier (`searching`) or by `unpark_all`; the
    /// worker has not yet called `unpark` to find out.
    Claimed {
        searching: bool,
    },
}

/// Workers counted as searching: running searchers, and claimed workers
/// that a notifier woke as searchers.
fn searchers(model: &[Model]) -> usize {
    model
        .iter()
        .filter(|m| {
            matches!(
                m,
                Model::Running { searching: true } | Model::Claimed { searching: true }
            )
        })
        .count()
}

/// Plays random operations, each one a worker or notifier may legally do in
/// the current state, against `Idle` and a plain model, and compares
/// everything observable after each.
fn play(n: usize, ops: &[(u8, u16)]) {
    let idle = Idle::new(n);
    let mut model = vec![Model::Running { searching: false }; n];
    for &(op, who) in ops {
        let id = usize::from(who) % n;
        match (op % 6, model[id]) {
            (0, Model::Running { searching: false }) => {
                let searching = searchers(&model);
                let ok = idle.try_transition_to_searching();
                assert_eq!(ok, 2 * searching < n);
                model[id] = Model::Running { searching: ok };
            }
            (1, Model::Running { searching: true }) => {
                let others = searchers(&model) - 1;
                assert_eq!(idle.transition_from_searching(), others == 0);
                model[id] = Model::Running { searching: false };
            }
            (2, Model::Running { searching }) => {
                let others = searchers(&model) - usize::from(searching);
                assert_eq!(
                    idle.transition_to_parked(id, searching),
                    searching && others == 0
                );
                model[id] = Model::Parked;
            }
            (3, _) => {
                let searching = searchers(&model) > 0;
                let lowest = model.iter().position(|m| *m == Model::Parked);
                let expected = if searching { None } else { lowest };
                assert_eq!(idle.unpark_one(), expected);
                if let Some(w) = expected {
                    model[w] = Model::Claimed { searching: true };
                }
            }
            (4, Model::Parked) => {
                assert!(idle.unpark(id));
                model[id] = Model::Running { searching: false };
            }
            (4, Model::Claimed { searching }) => {
                assert!(!idle.unpark(id));
                model[id] = Model::Running { searching };
            }
            (5, _) => {
                let parked: Vec<usize> = (0..n).filter(|&w| model[w] == Model::Parked).collect();
                assert_eq!(idle.unpark_all(), parked);
                for w in parked {
                    model[w] = Model::Claimed { searching: false };
                }
            }
            _ => continue, // not legal for this worker now
        }
        for (w, m) in model.iter().enumerate() {
            assert_eq!(idle.is_parked(w), *m == Model::Parked, "worker {w}: {m:?}");
        }
        let parked = model.iter().filter(|m| **m == Model::Parked).count();
        let searching = searchers(&model);
        assert_eq!(
            (idle.num_parked(), idle.num_searching()),
            (parked, searching)
        );
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: if cfg!(miri) { 4 } else { 256 },
        // No regression file: Miri's isolation forbids the filesystem.
        failure_persistence: None,
        ..Default::default()
    })]

    /// `Idle` agrees with a model of who is parked, claimed and searching
    /// after every legal operation, at worker counts on both sides of the
    /// 64-bit word boundary.
    #[test]
    fn idle_matches_a_sequential_model(
        n in proptest::prop_oneof![1usize..=4, 60usize..=70, 127usize..=130],
        // Miri runs 4 cases of at most 60 operations (about 8 s, against
        // 39 s at 300): enough to cross the word boundary with parks and
        // claims; the 256 full cases run natively.
        ops in proptest::collection::vec((0u8..6, 0u16..200), 1..if cfg!(miri) { 60 } else { 300 }),
    ) {
        play(n, &ops);
    }
}
