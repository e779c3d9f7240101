//! Unit tests of the task-state word: every transition from every lifecycle
//! state, the field limits, and a model-based check against a plain struct.
//! The concurrent properties are in `core/tests/loom_task_state.rs`.

use super::*;

const R: u64 = REF_ONE;
const S: u64 = SHIELD_ONE;

/// `n` references, as bits of the word.
const fn refs(n: u64) -> u64 {
    n * REF_ONE
}

/// Shield depth `n`, as bits of the word.
const fn shields(n: u64) -> u64 {
    n * SHIELD_ONE
}

fn st(raw: u64) -> State {
    State::from_raw(raw)
}

fn raw(s: &State) -> u64 {
    s.load().raw()
}

// ---------------------------------------------------------------------------
// Layout
// ---------------------------------------------------------------------------

#[test]
fn layout_fields_are_disjoint_and_where_the_readme_says() {
    assert_eq!(LIFECYCLE_MASK, 0b11);
    assert_eq!([IDLE, SCHEDULED, RUNNING, COMPLETE], [0, 1, 2, 3]);
    assert_eq!(
        [NOTIFIED, CANCELLED, JOIN_INTEREST, JOIN_WAKER],
        [4, 8, 16, 32]
    );
    assert_eq!(SHIELD_MASK, 0xFF << 32);
    assert_eq!(REF_MASK, 0xFF_FFFF << 40);
    // Every bit belongs to at most one field; bits 6..32 are reserved.
    let all = [LIFECYCLE_MASK, FLAGS_MASK, SHIELD_MASK, REF_MASK];
    for (i, a) in all.iter().enumerate() {
        for b in &all[i + 1..] {
            assert_eq!(a & b, 0);
        }
    }
    assert_eq!(
        all.iter().fold(0, |acc, m| acc | m),
        !((1u64 << 32) - (1 << 6))
    );
}

#[test]
fn snapshot_accessors_read_each_field() {
    let s = Snapshot(RUNNING | NOTIFIED | JOIN_WAKER | shields(7) | refs(1234));
    assert_eq!(s.lifecycle(), Lifecycle::Running);
    assert!(s.is_running() && !s.is_idle() && !s.is_scheduled() && !s.is_complete());
    assert!(s.is_notified() && !s.is_cancelled());
    assert!(!s.has_join_interest() && s.has_join_waker());
    assert_eq!(s.shield_depth(), 7);
    assert_eq!(s.ref_count(), 1234);
    let full = Snapshot(SHIELD_MASK | REF_MASK);
    assert_eq!(full.shield_depth(), 255);
    assert_eq!(full.ref_count() as u64, REF_MAX);
    assert!(format!("{:?}", st(SCHEDULED | R)).contains("Scheduled"));
}

#[test]
fn new_task_is_scheduled_with_one_ref_per_owner() {
    let with = State::new(true).load();
    assert_eq!(with.lifecycle(), Lifecycle::Scheduled);
    assert!(with.has_join_interest() && !with.has_join_waker());
    assert!(!with.is_notified() && !with.is_cancelled());
    assert_eq!((with.ref_count(), with.shield_depth()), (2, 0));
    let without = State::new(false).load();
    assert_eq!(without.raw(), SCHEDULED | R);
}

// ---------------------------------------------------------------------------
// transition_to_running
// ---------------------------------------------------------------------------

#[test]
fn running_from_scheduled_succeeds_and_clears_notified() {
    let s = st(SCHEDULED | NOTIFIED | JOIN_INTEREST | refs(2));
    assert_eq!(s.transition_to_running(), TransitionToRunning::Success);
    assert_eq!(raw(&s), RUNNING | JOIN_INTEREST | refs(2));
}

#[test]
fn running_with_effective_cancel_reports_cancelled() {
    let s = st(SCHEDULED | CANCELLED | R);
    assert_eq!(s.transition_to_running(), TransitionToRunning::Cancelled);
    assert_eq!(raw(&s), RUNNING | CANCELLED | R);
}

#[test]
fn running_with_shielded_cancel_polls() {
    let s = st(SCHEDULED | CANCELLED | S | R);
    assert_eq!(s.transition_to_running(), TransitionToRunning::Success);
    assert_eq!(raw(&s), RUNNING | CANCELLED | S | R);
}

#[test]
#[should_panic(expected = "not SCHEDULED")]
fn running_from_idle_panics() {
    let _ = st(IDLE | R).transition_to_running();
}

#[test]
#[should_panic(expected = "not SCHEDULED")]
fn running_from_running_panics() {
    let _ = st(RUNNING | R).transition_to_running();
}

#[test]
#[should_panic(expected = "not SCHEDULED")]
fn running_from_complete_panics() {
    let _ = st(COMPLETE | R).transition_to_running();
}

// ---------------------------------------------------------------------------
// transition_to_idle
// ---------------------------------------------------------------------------

#[test]
fn idle_without_notified_drops_the_worker_ref() {
    let s = st(RUNNING | JOIN_INTEREST | refs(2));
    assert_eq!(s.transition_to_idle(), TransitionToIdle::Ok);
    assert_eq!(raw(&s), IDLE | JOIN_INTEREST | R);
}

#[test]
fn idle_with_the_last_ref_reports_dealloc() {
    let s = st(RUNNING | R);
    assert_eq!(s.transition_to_idle(), TransitionToIdle::OkDealloc);
    assert_eq!(raw(&s), IDLE);
}

#[test]
fn idle_with_notified_reschedules_and_keeps_the_ref() {
    let s = st(RUNNING | NOTIFIED | R);
    assert_eq!(s.transition_to_idle(), TransitionToIdle::OkNotified);
    assert_eq!(raw(&s), SCHEDULED | R);
}

#[test]
fn idle_with_effective_cancel_changes_nothing() {
    for extra in [0, NOTIFIED] {
        let before = RUNNING | CANCELLED | extra | refs(3);
        let s = st(before);
        assert_eq!(s.transition_to_idle(), TransitionToIdle::Cancelled);
        assert_eq!(raw(&s), before);
    }
}

#[test]
fn idle_with_shielded_cancel_goes_idle() {
    let s = st(RUNNING | CANCELLED | shields(2) | refs(2));
    assert_eq!(s.transition_to_idle(), TransitionToIdle::Ok);
    assert_eq!(raw(&s), IDLE | CANCELLED | shields(2) | R);
}

#[test]
#[should_panic(expected = "not RUNNING")]
fn idle_from_idle_panics() {
    let _ = st(IDLE | R).transition_to_idle();
}

#[test]
#[should_panic(expected = "not RUNNING")]
fn idle_from_scheduled_panics() {
    let _ = st(SCHEDULED | R).transition_to_idle();
}

#[test]
#[should_panic(expected = "not RUNNING")]
fn idle_from_complete_panics() {
    let _ = st(COMPLETE | R).transition_to_idle();
}

// ---------------------------------------------------------------------------
// transition_to_notified
// ---------------------------------------------------------------------------

#[test]
fn notified_from_idle_submits_with_a_new_ref() {
    let s = st(IDLE | JOIN_INTEREST | R);
    assert_eq!(s.transition_to_notified(), TransitionToNotified::Submit);
    assert_eq!(raw(&s), SCHEDULED | JOIN_INTEREST | refs(2));
}

#[test]
fn notified_from_scheduled_or_running_sets_notified_only() {
    for life in [SCHEDULED, RUNNING] {
        let s = st(life | CANCELLED | S | refs(2));
        assert_eq!(s.transition_to_notified(), TransitionToNotified::DoNothing);
        assert_eq!(raw(&s), life | NOTIFIED | CANCELLED | S | refs(2));
        // A second wake changes nothing more: one reschedule per poll.
        assert_eq!(s.transition_to_notified(), TransitionToNotified::DoNothing);
        assert_eq!(raw(&s), life | NOTIFIED | CANCELLED | S | refs(2));
    }
}

#[test]
fn notified_from_complete_changes_nothing() {
    let s = st(COMPLETE | JOIN_INTEREST | R);
    assert_eq!(s.transition_to_notified(), TransitionToNotified::DoNothing);
    assert_eq!(raw(&s), COMPLETE | JOIN_INTEREST | R);
}

// ---------------------------------------------------------------------------
// transition_to_complete
// ---------------------------------------------------------------------------

#[test]
fn complete_from_running_keeps_refs_and_flags_and_clears_notified() {
    let s = st(RUNNING | NOTIFIED | CANCELLED | JOIN_INTEREST | JOIN_WAKER | refs(3));
    let after = s.transition_to_complete();
    assert_eq!(
        after.raw(),
        COMPLETE | CANCELLED | JOIN_INTEREST | JOIN_WAKER | refs(3)
    );
    assert_eq!(raw(&s), after.raw());
}

#[test]
#[should_panic(expected = "not RUNNING")]
fn complete_from_idle_panics() {
    let _ = st(IDLE | R).transition_to_complete();
}

#[test]
#[should_panic(expected = "not RUNNING")]
fn complete_from_scheduled_panics() {
    let _ = st(SCHEDULED | R).transition_to_complete();
}

#[test]
#[should_panic(expected = "not RUNNING")]
fn complete_from_complete_panics() {
    let _ = st(COMPLETE | R).transition_to_complete();
}

// ---------------------------------------------------------------------------
// cancel
// ---------------------------------------------------------------------------

#[test]
fn cancel_from_each_lifecycle() {
    let cases = [
        (
            IDLE,
            TransitionToCancelled::Schedule,
            SCHEDULED | CANCELLED | refs(2),
        ),
        (
            SCHEDULED,
            TransitionToCancelled::Scheduled,
            SCHEDULED | CANCELLED | R,
        ),
        (
            RUNNING,
            TransitionToCancelled::Running,
            RUNNING | CANCELLED | R,
        ),
        (
            COMPLETE,
            TransitionToCancelled::AlreadyComplete,
            COMPLETE | R,
        ),
    ];
    for (life, action, after) in cases {
        let s = st(life | R);
        assert_eq!(s.cancel(), action, "from {life}");
        assert_eq!(raw(&s), after, "from {life}");
    }
}

#[test]
fn cancel_of_a_shielded_idle_task_still_schedules_it() {
    let s = st(IDLE | S | R);
    assert_eq!(s.cancel(), TransitionToCancelled::Schedule);
    assert_eq!(raw(&s), SCHEDULED | CANCELLED | S | refs(2));
    assert!(!s.is_cancel_effective());
    // Its poll runs normally, because the shield still defers the cancel.
    assert_eq!(s.transition_to_running(), TransitionToRunning::Success);
}

#[test]
fn second_cancel_of_an_idle_shielded_task_schedules_again() {
    let s = st(IDLE | CANCELLED | S | R);
    assert_eq!(s.cancel(), TransitionToCancelled::Schedule);
    assert_eq!(raw(&s), SCHEDULED | CANCELLED | S | refs(2));
}

// ---------------------------------------------------------------------------
// Shields
// ---------------------------------------------------------------------------

#[test]
fn shield_nests_and_cancel_takes_effect_at_depth_zero() {
    let s = st(RUNNING | R);
    s.shield_enter().unwrap();
    s.shield_enter().unwrap();
    assert_eq!(s.cancel(), TransitionToCancelled::Running);
    assert!(!s.is_cancel_effective());
    assert_eq!(s.shield_exit(), Ok(ShieldExit::Clear));
    assert!(!s.is_cancel_effective());
    assert_eq!(s.shield_exit(), Ok(ShieldExit::CancelPending));
    assert!(s.is_cancel_effective());
    assert_eq!(s.transition_to_idle(), TransitionToIdle::Cancelled);
}

#[test]
fn shield_exit_without_cancel_is_clear() {
    let s = st(RUNNING | R);
    s.shield_enter().unwrap();
    assert_eq!(s.shield_exit(), Ok(ShieldExit::Clear));
    assert_eq!(raw(&s), RUNNING | R);
}

// The broken variant `shield_carry` (an unchecked add) fails this test, and the
// loom model `shield_overflow_racing_ref_drop_frees_once`.
#[test]
fn shield_depth_255_then_overflow_is_an_error_and_leaves_refs_untouched() {
    let s = st(RUNNING | JOIN_INTEREST | refs(2));
    for depth in 1..=SHIELD_MAX {
        s.shield_enter().unwrap();
        assert_eq!(s.load().shield_depth() as u64, depth);
    }
    let at_max = raw(&s);
    assert_eq!(at_max, RUNNING | JOIN_INTEREST | SHIELD_MASK | refs(2));
    let overflow = s.shield_enter();
    assert_eq!(
        s.load().ref_count(),
        2,
        "the shield depth carried into the reference count"
    );
    assert_eq!(raw(&s), at_max, "a failed shield_enter wrote the word");
    assert_eq!(overflow, Err(ShieldError::Overflow));
    // Unwinding still works from the top.
    for _ in 0..SHIELD_MAX {
        assert_eq!(s.shield_exit(), Ok(ShieldExit::Clear));
    }
    assert_eq!(raw(&s), RUNNING | JOIN_INTEREST | refs(2));
}

#[test]
fn shield_exit_at_depth_zero_is_underflow_and_leaves_refs_untouched() {
    let s = st(RUNNING | CANCELLED | refs(5));
    assert_eq!(s.shield_exit(), Err(ShieldError::Underflow));
    assert_eq!(raw(&s), RUNNING | CANCELLED | refs(5));
    assert!(ShieldError::Underflow.to_string().contains("exited"));
    assert!(ShieldError::Overflow.to_string().contains("255"));
}

// ---------------------------------------------------------------------------
// Reference count
// ---------------------------------------------------------------------------

#[test]
fn ref_count_reaches_the_24_bit_limit_and_back_without_touching_other_fields() {
    let others = RUNNING | CANCELLED | JOIN_INTEREST | SHIELD_MASK;
    let s = st(others | refs(REF_MAX - 2));
    s.ref_inc();
    s.ref_inc();
    assert_eq!(s.load().ref_count() as u64, REF_MAX);
    assert_eq!(raw(&s) & !REF_MASK, others);
    assert!(!s.ref_dec());
    assert!(!s.ref_dec_by(REF_MAX as u32 - 2));
    assert_eq!(s.load().ref_count(), 1);
    assert!(s.ref_dec());
    assert_eq!(raw(&s), others);
}

#[test]
fn ref_dec_by_all_refs_at_the_limit_reports_last() {
    let s = st(COMPLETE | refs(REF_MAX));
    assert!(s.ref_dec_by(REF_MAX as u32));
    assert_eq!(raw(&s), COMPLETE);
}

#[test]
fn ref_dec_reports_the_last_reference_exactly_once() {
    let s = State::new(true);
    s.ref_inc(); // a waker
    let lasts = [s.ref_dec(), s.ref_dec(), s.ref_dec()];
    assert_eq!(lasts, [false, false, true]);
}

#[test]
fn ref_dec_by_zero_changes_nothing() {
    let s = st(IDLE | R);
    assert!(!s.ref_dec_by(0));
    assert_eq!(raw(&s), IDLE | R);
}

#[test]
#[should_panic(expected = "more than REF_MAX")]
fn ref_dec_by_more_than_the_limit_panics() {
    let _ = st(IDLE | R).ref_dec_by(1 << 24);
}

/// Runs the test `name` of this binary in a child process with `MAGPIE_CHILD`
/// set, and checks that the child died of SIGABRT.
#[cfg(target_os = "linux")]
fn assert_child_aborts(name: &str) {
    use std::os::unix::process::ExitStatusExt;
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--test-threads=1", "--nocapture"])
        .env("MAGPIE_CHILD", "1")
        .output()
        .unwrap();
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGABRT),
        "child {name} did not abort: {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout)
    );
}

fn in_child() -> bool {
    std::env::var_os("MAGPIE_CHILD").is_some()
}

#[test]
#[cfg(target_os = "linux")]
#[cfg_attr(miri, ignore = "spawns a child process")]
fn ref_inc_past_the_24_bit_limit_aborts_the_process() {
    if in_child() {
        st(RUNNING | refs(REF_MAX)).ref_inc();
        return; // not reached if the overflow aborts
    }
    assert_child_aborts("task::state::tests::ref_inc_past_the_24_bit_limit_aborts_the_process");
}

#[test]
#[cfg(target_os = "linux")]
#[cfg_attr(miri, ignore = "spawns a child process")]
fn wake_of_an_idle_task_at_the_ref_limit_aborts_the_process() {
    if in_child() {
        let _ = st(IDLE | refs(REF_MAX)).transition_to_notified();
        return;
    }
    assert_child_aborts(
        "task::state::tests::wake_of_an_idle_task_at_the_ref_limit_aborts_the_process",
    );
}

#[test]
#[cfg(target_os = "linux")]
#[cfg_attr(miri, ignore = "spawns a child process")]
fn ref_dec_below_zero_aborts_the_process() {
    if in_child() {
        let _ = st(IDLE | R).ref_dec_by(2);
        return;
    }
    assert_child_aborts("task::state::tests::ref_dec_below_zero_aborts_the_process");
}

// ---------------------------------------------------------------------------
// Join handle
// ---------------------------------------------------------------------------

#[test]
fn unset_join_interest_before_complete_takes_back_the_waker_cell() {
    for life in [IDLE, SCHEDULED, RUNNING] {
        let s = st(life | JOIN_INTEREST | JOIN_WAKER | refs(2));
        let next = s.unset_join_interest().unwrap();
        assert_eq!(next.raw(), life | refs(2), "from {life}");
        assert_eq!(raw(&s), life | refs(2));
    }
}

#[test]
fn unset_join_interest_after_complete_leaves_the_output_to_the_handle() {
    for waker in [0, JOIN_WAKER] {
        let s = st(COMPLETE | JOIN_INTEREST | waker | R);
        let next = s.unset_join_interest().unwrap_err();
        // JOIN_WAKER stays: the task side still owns the cell if it is set.
        assert_eq!(next.raw(), COMPLETE | waker | R);
        assert_eq!(raw(&s), COMPLETE | waker | R);
    }
}

#[test]
#[should_panic(expected = "no JOIN_INTEREST")]
fn unset_join_interest_twice_panics() {
    let s = st(RUNNING | JOIN_INTEREST | R);
    let _ = s.unset_join_interest();
    let _ = s.unset_join_interest();
}

#[test]
fn set_join_waker_succeeds_until_complete() {
    for life in [IDLE, SCHEDULED, RUNNING] {
        let s = st(life | JOIN_INTEREST | refs(2));
        let next = s.set_join_waker().unwrap();
        assert_eq!(next.raw(), life | JOIN_INTEREST | JOIN_WAKER | refs(2));
        assert_eq!(raw(&s), next.raw());
    }
    let s = st(COMPLETE | JOIN_INTEREST | R);
    assert_eq!(
        s.set_join_waker().unwrap_err().raw(),
        COMPLETE | JOIN_INTEREST | R
    );
    assert_eq!(raw(&s), COMPLETE | JOIN_INTEREST | R);
}

#[test]
#[should_panic(expected = "set_join_waker")]
fn set_join_waker_twice_panics() {
    let s = st(RUNNING | JOIN_INTEREST | R);
    let _ = s.set_join_waker();
    let _ = s.set_join_waker();
}

#[test]
fn unset_join_waker_succeeds_until_complete() {
    for life in [IDLE, SCHEDULED, RUNNING] {
        let s = st(life | JOIN_INTEREST | JOIN_WAKER | refs(2));
        let next = s.unset_join_waker().unwrap();
        assert_eq!(next.raw(), life | JOIN_INTEREST | refs(2));
    }
    let before = COMPLETE | JOIN_INTEREST | JOIN_WAKER | R;
    let s = st(before);
    assert_eq!(s.unset_join_waker().unwrap_err().raw(), before);
    assert_eq!(raw(&s), before);
}

#[test]
fn unset_join_waker_after_complete_reports_whether_the_handle_is_gone() {
    let s = st(COMPLETE | JOIN_INTEREST | JOIN_WAKER | refs(2));
    assert!(s.unset_join_waker_after_complete().has_join_interest());
    assert_eq!(raw(&s), COMPLETE | JOIN_INTEREST | refs(2));
    let s = st(COMPLETE | JOIN_WAKER | R);
    assert!(!s.unset_join_waker_after_complete().has_join_interest());
    assert_eq!(raw(&s), COMPLETE | R);
}

#[test]
#[should_panic(expected = "unset_join_waker_after_complete")]
fn unset_join_waker_after_complete_before_complete_panics() {
    let _ = st(RUNNING | JOIN_INTEREST | JOIN_WAKER | R).unset_join_waker_after_complete();
}

// ---------------------------------------------------------------------------
// Whole lives
// ---------------------------------------------------------------------------

#[test]
fn a_task_woken_twice_during_one_poll_runs_twice_and_is_freed_once() {
    let s = State::new(true);
    s.ref_inc(); // the waker
    assert_eq!(s.transition_to_running(), TransitionToRunning::Success);
    assert_eq!(s.transition_to_notified(), TransitionToNotified::DoNothing);
    assert_eq!(s.transition_to_notified(), TransitionToNotified::DoNothing);
    assert_eq!(s.transition_to_idle(), TransitionToIdle::OkNotified);
    assert_eq!(s.transition_to_running(), TransitionToRunning::Success);
    let done = s.transition_to_complete();
    assert!(done.has_join_interest() && !done.has_join_waker());
    assert_eq!(done.ref_count(), 3);
    assert!(!s.ref_dec()); // the worker
    assert!(!s.ref_dec()); // the waker
    assert!(s.unset_join_interest().is_err());
    assert!(s.ref_dec()); // the join handle
}

// ---------------------------------------------------------------------------
// Model-based: random operation sequences against a plain struct
// ---------------------------------------------------------------------------

mod model {
    use super::*;
    use proptest::prelude::*;

    /// The same state as plain fields, with the protocol written naively.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    struct Model {
        life: Lifecycle,
        notified: bool,
        cancelled: bool,
        join_interest: bool,
        join_waker: bool,
        depth: u32,
        refs: u32,
    }

    impl Model {
        fn of(s: Snapshot) -> Self {
            Model {
                life: s.lifecycle(),
                notified: s.is_notified(),
                cancelled: s.is_cancelled(),
                join_interest: s.has_join_interest(),
                join_waker: s.has_join_waker(),
                depth: s.shield_depth(),
                refs: s.ref_count(),
            }
        }
        fn effective(&self) -> bool {
            self.cancelled && self.depth == 0
        }
    }

    #[derive(Clone, Copy, Debug)]
    enum Op {
        Running,
        Idle,
        Notified,
        Complete,
        Cancel,
        ShieldEnter,
        ShieldExit,
        RefInc,
        RefDec,
        UnsetJoinInterest,
        SetJoinWaker,
        UnsetJoinWaker,
        UnsetJoinWakerAfterComplete,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            Just(Op::Running),
            Just(Op::Idle),
            Just(Op::Notified),
            Just(Op::Complete),
            Just(Op::Cancel),
            Just(Op::ShieldEnter),
            Just(Op::ShieldExit),
            Just(Op::RefInc),
            Just(Op::RefDec),
            Just(Op::UnsetJoinInterest),
            Just(Op::SetJoinWaker),
            Just(Op::UnsetJoinWaker),
            Just(Op::UnsetJoinWakerAfterComplete),
        ]
    }

    /// Applies `op` to both when its precondition holds in the model, and
    /// checks that they agree on the outcome.
    fn step(s: &State, m: &mut Model, op: Op) {
        use Lifecycle::*;
        match op {
            Op::Running if m.life == Scheduled => {
                let want = if m.effective() {
                    TransitionToRunning::Cancelled
                } else {
                    TransitionToRunning::Success
                };
                assert_eq!(s.transition_to_running(), want);
                m.life = Running;
                m.notified = false;
            }
            Op::Idle if m.life == Running => {
                let got = s.transition_to_idle();
                if m.effective() {
                    assert_eq!(got, TransitionToIdle::Cancelled);
                } else if m.notified {
                    assert_eq!(got, TransitionToIdle::OkNotified);
                    m.life = Scheduled;
                    m.notified = false;
                } else {
                    m.life = Idle;
                    m.refs -= 1;
                    let want = if m.refs == 0 {
                        TransitionToIdle::OkDealloc
                    } else {
                        TransitionToIdle::Ok
                    };
                    assert_eq!(got, want);
                }
            }
            Op::Notified if m.refs > 0 => {
                let got = s.transition_to_notified();
                match m.life {
                    Idle => {
                        assert_eq!(got, TransitionToNotified::Submit);
                        m.life = Scheduled;
                        m.refs += 1;
                    }
                    Scheduled | Running => {
                        assert_eq!(got, TransitionToNotified::DoNothing);
                        m.notified = true;
                    }
                    Complete => assert_eq!(got, TransitionToNotified::DoNothing),
                }
            }
            Op::Complete if m.life == Running => {
                m.life = Complete;
                m.notified = false;
                assert_eq!(Model::of(s.transition_to_complete()), *m);
            }
            Op::Cancel if m.refs > 0 => {
                let got = s.cancel();
                let want = match m.life {
                    Idle => {
                        m.life = Scheduled;
                        m.refs += 1;
                        TransitionToCancelled::Schedule
                    }
                    Scheduled => TransitionToCancelled::Scheduled,
                    Running => TransitionToCancelled::Running,
                    Complete => TransitionToCancelled::AlreadyComplete,
                };
                if m.life != Complete {
                    m.cancelled = true;
                }
                assert_eq!(got, want);
            }
            Op::ShieldEnter => {
                if m.depth == 255 {
                    assert_eq!(s.shield_enter(), Err(ShieldError::Overflow));
                } else {
                    assert_eq!(s.shield_enter(), Ok(()));
                    m.depth += 1;
                }
            }
            Op::ShieldExit => {
                if m.depth == 0 {
                    assert_eq!(s.shield_exit(), Err(ShieldError::Underflow));
                } else {
                    m.depth -= 1;
                    let want = if m.effective() {
                        ShieldExit::CancelPending
                    } else {
                        ShieldExit::Clear
                    };
                    assert_eq!(s.shield_exit(), Ok(want));
                }
            }
            Op::RefInc if m.refs > 0 && (m.refs as u64) < REF_MAX => {
                s.ref_inc();
                m.refs += 1;
            }
            // Keep one reference for the RUNNING worker or a queue entry.
            Op::RefDec if m.refs > 1 || (m.refs == 1 && matches!(m.life, Idle | Complete)) => {
                m.refs -= 1;
                assert_eq!(s.ref_dec(), m.refs == 0);
            }
            Op::UnsetJoinInterest if m.join_interest => {
                let got = s.unset_join_interest();
                m.join_interest = false;
                if m.life == Complete {
                    assert_eq!(got.map_err(Model::of), Err(*m));
                } else {
                    m.join_waker = false;
                    assert_eq!(got.map(Model::of), Ok(*m));
                }
            }
            Op::SetJoinWaker if m.join_interest && !m.join_waker => {
                let got = s.set_join_waker();
                if m.life == Complete {
                    assert!(got.is_err());
                } else {
                    m.join_waker = true;
                    assert!(got.is_ok());
                }
            }
            Op::UnsetJoinWaker if m.join_interest && m.join_waker => {
                let got = s.unset_join_waker();
                if m.life == Complete {
                    assert!(got.is_err());
                } else {
                    m.join_waker = false;
                    assert!(got.is_ok());
                }
            }
            Op::UnsetJoinWakerAfterComplete if m.life == Complete && m.join_waker => {
                m.join_waker = false;
                assert_eq!(Model::of(s.unset_join_waker_after_complete()), *m);
            }
            _ => return, // precondition does not hold: skip
        }
        assert_eq!(Model::of(s.load()), *m, "after {op:?}");
        // The protocol's invariants.
        assert!(!m.notified || matches!(m.life, Scheduled | Running));
        assert_eq!(
            raw(s) & !(LIFECYCLE_MASK | FLAGS_MASK | SHIELD_MASK | REF_MASK),
            0
        );
    }

    proptest! {
        // Under Miri: few cases, and no regression file (Miri's isolation
        // forbids the current-directory lookup it needs).
        #![proptest_config(ProptestConfig {
            cases: if cfg!(miri) { 4 } else { 256 },
            failure_persistence: if cfg!(miri) {
                None
            } else {
                ProptestConfig::default().failure_persistence
            },
            ..ProptestConfig::default()
        })]

        #[test]
        fn every_op_sequence_matches_the_plain_model(
            join in any::<bool>(),
            ops in proptest::collection::vec(op(), 0..if cfg!(miri) { 40 } else { 200 }),
        ) {
            let s = State::new(join);
            let mut m = Model::of(s.load());
            for op in ops {
                step(&s, &mut m, op);
            }
        }
    }
}
