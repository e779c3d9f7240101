//! The timing wheel against a sorted model (`BTreeMap`) under random
//! insert / cancel / reset / advance sequences, with deadlines on every level
//! and far past the wheel's 2^36-tick span.
#![cfg(not(loom))]

use std::collections::{BTreeMap, BTreeSet};

use magpie_runtime::time::wheel::{EntryState, Key, Wheel, WHEEL_SPAN};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    /// A new entry due `delta` ticks after `elapsed` (0 = already due).
    Insert(u64),
    /// Remove the `n % live`-th live entry (scheduled or fired).
    Cancel(usize),
    /// Move the `n % live`-th live entry to `elapsed + delta`.
    Reset(usize, u64),
    /// Pop everything due by `elapsed + delta`.
    Advance(u64),
    /// Pop at most `limit` entries due by `elapsed + delta`, leaving a
    /// cascade half drained (as the driver does between batches of wakes),
    /// so later ops meet entries on the pending list.
    PartialAdvance(u64, usize),
    /// Use a key whose entry was removed: every lookup must miss.
    StaleKey(usize),
}

/// Deltas spread over every level: within a slot, level 0, 1, ... 5, the
/// overflow list and several wheel spans ahead.
fn delta() -> impl Strategy<Value = u64> {
    prop_oneof![
        0..4u64,
        0..70u64,
        0..5_000u64,
        0..300_000u64,
        0..(1u64 << 24),
        0..(1u64 << 31),
        (WHEEL_SPAN - 3)..(WHEEL_SPAN + 3),
        0..(WHEEL_SPAN * 5),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => delta().prop_map(Op::Insert),
        1 => any::<usize>().prop_map(Op::Cancel),
        2 => (any::<usize>(), delta()).prop_map(|(n, d)| Op::Reset(n, d)),
        3 => delta().prop_map(Op::Advance),
        2 => (delta(), 0..8usize).prop_map(|(d, n)| Op::PartialAdvance(d, n)),
        1 => any::<usize>().prop_map(Op::StaleKey),
    ]
}

/// The model: live entries by id, each scheduled (with a deadline) or fired.
#[derive(Default)]
struct Model {
    scheduled: BTreeMap<u64, u64>, // id -> deadline
    fired: BTreeSet<u64>,
    keys: BTreeMap<u64, Key>, // id -> key, live entries only
    dead: Vec<Key>,
    /// A `PartialAdvance` may have left a cascade open.
    half_drained: bool,
}

impl Model {
    fn nth_live(&self, n: usize) -> Option<u64> {
        let len = self.keys.len();
        (len > 0).then(|| *self.keys.keys().nth(n % len).unwrap())
    }
}

fn check(wheel: &Wheel<u64>, model: &Model) -> Result<(), TestCaseError> {
    prop_assert_eq!(wheel.len(), model.keys.len());
    let earliest = model.scheduled.values().min().copied();
    match (wheel.next_expiration(), earliest) {
        (None, None) => {}
        (Some(next), Some(earliest)) => {
            prop_assert!(
                next <= earliest,
                "hint {} after deadline {}",
                next,
                earliest
            );
            if model.half_drained {
                prop_assert!(next >= wheel.elapsed(), "hint {} in the past", next);
            } else {
                prop_assert!(next > wheel.elapsed(), "hint {} not in the future", next);
            }
        }
        (next, earliest) => prop_assert!(false, "hint {:?} vs earliest {:?}", next, earliest),
    }
    for (id, deadline) in &model.scheduled {
        let key = model.keys[id];
        prop_assert_eq!(wheel.state(key), Some(EntryState::Scheduled));
        prop_assert_eq!(wheel.deadline(key), Some(*deadline));
    }
    for id in &model.fired {
        prop_assert_eq!(wheel.state(model.keys[id]), Some(EntryState::Fired));
    }
    Ok(())
}

/// Pops up to `limit` entries due by `now` and checks them against the
/// model: each popped entry is a scheduled one due by `now`, they come in
/// non-decreasing deadline order, each is at least as early as every entry
/// left due, and a full pop takes exactly the due set. Returns whether the
/// limit stopped it.
fn advance(
    wheel: &mut Wheel<u64>,
    model: &mut Model,
    now: u64,
    limit: usize,
) -> Result<bool, TestCaseError> {
    let mut popped = Vec::new();
    while popped.len() < limit {
        let Some(key) = wheel.pop_expired(now) else {
            break;
        };
        let id = *wheel.get_mut(key).unwrap();
        prop_assert_eq!(model.keys.get(&id), Some(&key));
        let deadline = model.scheduled.remove(&id);
        prop_assert!(deadline.is_some(), "popped {} twice or unscheduled", id);
        let deadline = deadline.unwrap();
        prop_assert!(
            deadline <= now,
            "popped {} due at {} by {}",
            id,
            deadline,
            now
        );
        if let Some(&(prev, _)) = popped.last() {
            prop_assert!(prev <= deadline, "out of order: {} then {}", prev, deadline);
        }
        model.fired.insert(id);
        popped.push((deadline, id));
    }
    // With the order check above: every popped entry is due no later than
    // every entry left scheduled.
    let left_min = model.scheduled.values().min().copied().unwrap_or(u64::MAX);
    if let Some(&(last, _)) = popped.last() {
        prop_assert!(last <= left_min, "popped {} before {}", last, left_min);
    }
    let stopped = popped.len() == limit;
    if !stopped {
        let still_due = model.scheduled.values().filter(|&&d| d <= now).count();
        prop_assert_eq!(still_due, 0, "entries due by {} were not popped", now);
    }
    Ok(stopped)
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut wheel: Wheel<u64> = Wheel::new();
    let mut model = Model::default();
    let mut next_id = 0u64;
    for op in ops {
        let elapsed = wheel.elapsed();
        match op {
            Op::Insert(delta) => {
                let id = next_id;
                next_id += 1;
                let deadline = elapsed + delta;
                let (key, state) = wheel.insert(deadline, id);
                model.keys.insert(id, key);
                if deadline <= elapsed {
                    prop_assert_eq!(state, EntryState::Fired);
                    model.fired.insert(id);
                } else {
                    prop_assert_eq!(state, EntryState::Scheduled);
                    model.scheduled.insert(id, deadline);
                }
            }
            Op::Cancel(n) => {
                let Some(id) = model.nth_live(n) else {
                    continue;
                };
                let key = model.keys.remove(&id).unwrap();
                prop_assert_eq!(wheel.remove(key), Some(id));
                model.scheduled.remove(&id);
                model.fired.remove(&id);
                model.dead.push(key);
            }
            Op::Reset(n, delta) => {
                let Some(id) = model.nth_live(n) else {
                    continue;
                };
                let key = model.keys[&id];
                let deadline = elapsed + delta;
                let state = wheel.reschedule(key, deadline);
                model.scheduled.remove(&id);
                model.fired.remove(&id);
                if deadline <= elapsed {
                    prop_assert_eq!(state, Some(EntryState::Fired));
                    model.fired.insert(id);
                } else {
                    prop_assert_eq!(state, Some(EntryState::Scheduled));
                    model.scheduled.insert(id, deadline);
                }
            }
            Op::Advance(delta) => {
                let now = elapsed + delta;
                advance(&mut wheel, &mut model, now, usize::MAX)?;
                prop_assert_eq!(wheel.elapsed(), now);
                model.half_drained = false;
            }
            Op::PartialAdvance(delta, limit) => {
                let now = elapsed + delta;
                if advance(&mut wheel, &mut model, now, limit)? {
                    prop_assert!(wheel.elapsed() <= now);
                    model.half_drained = true;
                } else {
                    prop_assert_eq!(wheel.elapsed(), now);
                    model.half_drained = false;
                }
            }
            Op::StaleKey(n) => {
                if model.dead.is_empty() {
                    continue;
                }
                let key = model.dead[n % model.dead.len()];
                prop_assert_eq!(wheel.state(key), None);
                prop_assert_eq!(wheel.remove(key), None);
                prop_assert_eq!(wheel.reschedule(key, elapsed + 1), None);
                prop_assert!(!wheel.fire(key));
                prop_assert_eq!(wheel.get_mut(key), None);
            }
        }
        check(&wheel, &model)?;
    }
    Ok(())
}

/// Ops per sequence (fewer under Miri, which runs this test ~1000x slower).
const MAX_OPS: usize = if cfg!(miri) { 40 } else { 300 };

proptest! {
    #![proptest_config(ProptestConfig {
        cases: if cfg!(miri) { 4 } else { 256 },
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn wheel_matches_a_sorted_model(ops in prop::collection::vec(op(), 1..MAX_OPS)) {
        run(ops)?;
    }
}

/// A hand-written sequence that walks one entry down every level of a
/// cascade and across an overflow boundary, checked against the same model.
#[test]
fn cascade_through_every_level_and_the_overflow_matches_the_model() {
    let mut ops = Vec::new();
    for k in 0..=7u32 {
        ops.push(Op::Insert(64u64.pow(k) + 1));
        ops.push(Op::Insert(64u64.pow(k)));
    }
    ops.push(Op::Insert(3 * WHEEL_SPAN + 77));
    for _ in 0..40 {
        ops.push(Op::Advance(WHEEL_SPAN / 3));
    }
    ops.push(Op::Advance(64u64.pow(7)));
    run(ops).unwrap();
}
