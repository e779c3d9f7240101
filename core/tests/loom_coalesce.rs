//! Loom models of `magpie_core::coalesce` (`core/src/coalesce/README.md`):
//! no request is lost, and no two runs overlap.
//!
//! RUSTFLAGS="--cfg loom -C debug-assertions" LOOM_MAX_PREEMPTIONS=2 \
//!   CARGO_TARGET_DIR=target/loom cargo test -p magpie-core --release --test loom_coalesce
#![cfg(loom)]

use magpie_core::coalesce::Coalesce;
use magpie_core::sync::atomic::{AtomicUsize, Ordering};
use magpie_core::sync::{thread, Arc};

/// Two threads each publish a value (Relaxed) and request a run that reads
/// both values; after both return, the runs together must have seen both.
/// A request answered by no run (or by a run that began before it) leaves
/// its value unseen.
// protocol: coalesce C1 C2 C4
// broken-variant: coalesce_release_by_store; class: lost wakeup; expects: a request was answered by no run
#[test]
fn every_request_is_answered_by_a_later_run() {
    loom::model(|| {
        let c = Arc::new(Coalesce::new());
        let values = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
        let seen = Arc::new(AtomicUsize::new(0));
        let requester = |i: usize| {
            let (c, values, seen) = (c.clone(), values.clone(), seen.clone());
            move || {
                values[i].store(1, Ordering::Relaxed);
                c.request(|| {
                    let both =
                        values[0].load(Ordering::Relaxed) + values[1].load(Ordering::Relaxed);
                    seen.fetch_max(both, Ordering::Relaxed);
                });
            }
        };
        let t = thread::spawn(requester(1));
        requester(0)();
        t.join().unwrap();
        assert_eq!(
            seen.load(Ordering::Relaxed),
            2,
            "a request was answered by no run"
        );
        assert!(!c.is_running());
    });
}

/// Three requesters; each run raises an in-run count and checks it was zero.
// protocol: coalesce C2 C4
#[test]
fn runs_never_overlap() {
    loom::model(|| {
        let c = Arc::new(Coalesce::new());
        let inside = Arc::new(AtomicUsize::new(0));
        let runs = Arc::new(AtomicUsize::new(0));
        let requester = || {
            let (c, inside, runs) = (c.clone(), inside.clone(), runs.clone());
            move || {
                c.request(|| {
                    assert_eq!(
                        inside.fetch_add(1, Ordering::Relaxed),
                        0,
                        "two runs overlap"
                    );
                    runs.fetch_add(1, Ordering::Relaxed);
                    inside.fetch_sub(1, Ordering::Relaxed);
                });
            }
        };
        let a = thread::spawn(requester());
        let b = thread::spawn(requester());
        requester()();
        a.join().unwrap();
        b.join().unwrap();
        let runs = runs.load(Ordering::Relaxed);
        assert!((1..=3).contains(&runs), "{runs} runs for three requests");
    });
}
