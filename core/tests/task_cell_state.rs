//! The state-word transitions added for the task cell (`state.rs`, "Transitions
//! added for the raw task cell"), driven through the public API from every
//! lifecycle they accept.
#![cfg(not(loom))]

use magpie_core::task::state::{
    Lifecycle, State, TransitionToCancelled, TransitionToIdleKeepRef, TransitionToNotified,
    TransitionToNotifiedByVal, TransitionToRunning, TransitionToRunningOrStale,
    TransitionToShutdown,
};

fn owned_idle() -> State {
    // SCHEDULED, 3 refs -> RUNNING -> IDLE (the worker's ref dropped): 2 refs.
    let s = State::new_owned();
    assert_eq!(s.transition_to_running(), TransitionToRunning::Success);
    assert_eq!(s.transition_to_idle_keep_ref(), TransitionToIdleKeepRef::Ok);
    s
}

#[test]
fn new_owned_is_scheduled_with_entry_handle_and_registry_refs() {
    let s = State::new_owned().load();
    assert_eq!(s.lifecycle(), Lifecycle::Scheduled);
    assert!(s.has_join_interest() && !s.has_join_waker());
    assert!(!s.is_notified() && !s.is_cancelled());
    assert_eq!(s.ref_count(), 3);
    assert_eq!(s.shield_depth(), 0);
}

#[test]
fn running_or_stale_on_a_queued_task_is_running() {
    let s = State::new_owned();
    assert_eq!(
        s.transition_to_running_or_stale(),
        TransitionToRunningOrStale::Poll
    );
    assert!(s.load().is_running());
    assert_eq!(s.load().ref_count(), 3);

    let c = State::new_owned();
    assert_eq!(c.cancel(), TransitionToCancelled::Scheduled);
    assert_eq!(
        c.transition_to_running_or_stale(),
        TransitionToRunningOrStale::Cancel
    );
    assert!(c.load().is_running());
}

#[test]
fn running_or_stale_releases_an_entry_made_stale_by_shutdown() {
    let s = State::new_owned();
    // The sweep claims the queued task (it now holds the registry's ref as
    // the runner's), completes it, drops that ref.
    assert_eq!(s.transition_to_shutdown(), TransitionToShutdown::Claimed);
    let snap = s.load();
    assert!(snap.is_running() && snap.is_cancelled());
    // The stale entry, run while the sweep is still cancelling:
    assert_eq!(
        s.transition_to_running_or_stale(),
        TransitionToRunningOrStale::Stale
    );
    assert_eq!(s.load().ref_count(), 2);
    let _ = s.transition_to_complete();
    assert!(!s.ref_dec()); // the sweep's (registry's) reference
                           // The handle's is the last; had the stale entry come last:
    let t = State::new_owned();
    assert_eq!(t.transition_to_shutdown(), TransitionToShutdown::Claimed);
    let _ = t.transition_to_complete();
    assert!(!t.ref_dec_by(2)); // registry + handle
    assert_eq!(
        t.transition_to_running_or_stale(),
        TransitionToRunningOrStale::StaleDealloc
    );
    assert_eq!(t.load().ref_count(), 0);
}

#[test]
#[should_panic(expected = "not claimed by shutdown")]
fn running_or_stale_on_an_idle_task_panics() {
    let s = owned_idle();
    let _ = s.transition_to_running_or_stale();
}

#[test]
#[should_panic(expected = "not claimed by shutdown")]
fn running_or_stale_on_a_running_task_without_cancel_panics() {
    let s = State::new_owned();
    assert_eq!(s.transition_to_running(), TransitionToRunning::Success);
    let _ = s.transition_to_running_or_stale();
}

#[test]
fn idle_keep_ref_with_notified_adds_the_entrys_reference() {
    let s = State::new_owned();
    assert_eq!(s.transition_to_running(), TransitionToRunning::Success);
    assert_eq!(s.transition_to_notified(), TransitionToNotified::DoNothing);
    assert_eq!(
        s.transition_to_idle_keep_ref(),
        TransitionToIdleKeepRef::OkNotified
    );
    let snap = s.load();
    assert!(snap.is_scheduled() && !snap.is_notified());
    assert_eq!(
        snap.ref_count(),
        4,
        "worker keeps its ref, the entry gets one"
    );
    assert!(!s.ref_dec());
}

#[test]
fn idle_keep_ref_without_notified_drops_the_workers_reference() {
    let s = owned_idle();
    let snap = s.load();
    assert!(snap.is_idle());
    assert_eq!(snap.ref_count(), 2);
    // The last-reference case.
    let t = State::new(false);
    assert_eq!(t.transition_to_running(), TransitionToRunning::Success);
    assert_eq!(
        t.transition_to_idle_keep_ref(),
        TransitionToIdleKeepRef::OkDealloc
    );
}

#[test]
fn idle_keep_ref_with_effective_cancel_changes_nothing() {
    let s = State::new_owned();
    assert_eq!(s.transition_to_running(), TransitionToRunning::Success);
    assert_eq!(s.cancel(), TransitionToCancelled::Running);
    let before = s.load();
    assert_eq!(
        s.transition_to_idle_keep_ref(),
        TransitionToIdleKeepRef::Cancelled
    );
    assert_eq!(s.load(), before);
}

#[test]
#[should_panic(expected = "not RUNNING")]
fn idle_keep_ref_from_scheduled_panics() {
    let _ = State::new_owned().transition_to_idle_keep_ref();
}

#[test]
fn notified_by_val_on_idle_submits_and_the_waker_keeps_its_reference() {
    let s = owned_idle();
    s.ref_inc(); // a waker
    assert_eq!(
        s.transition_to_notified_by_val(),
        TransitionToNotifiedByVal::Submit
    );
    let snap = s.load();
    assert!(snap.is_scheduled());
    assert_eq!(snap.ref_count(), 4, "entry + handle + registry + waker");
    assert!(!s.ref_dec()); // the waker, after the scheduler call
}

#[test]
fn notified_by_val_on_queued_or_running_sets_notified_and_drops_the_wakers_reference() {
    let s = State::new_owned();
    s.ref_inc();
    assert_eq!(
        s.transition_to_notified_by_val(),
        TransitionToNotifiedByVal::DoNothing
    );
    assert!(s.load().is_notified() && s.load().is_scheduled());
    assert_eq!(s.load().ref_count(), 3);
    assert_eq!(s.transition_to_running(), TransitionToRunning::Success);
    s.ref_inc();
    assert_eq!(
        s.transition_to_notified_by_val(),
        TransitionToNotifiedByVal::DoNothing
    );
    assert!(s.load().is_notified() && s.load().is_running());
    assert_eq!(s.load().ref_count(), 3);
}

#[test]
fn notified_by_val_on_complete_drops_the_reference_and_frees_on_the_last() {
    let s = State::new(false);
    assert_eq!(s.transition_to_running(), TransitionToRunning::Success);
    s.ref_inc(); // a waker
    let _ = s.transition_to_complete();
    assert!(!s.ref_dec()); // the worker
    assert_eq!(
        s.transition_to_notified_by_val(),
        TransitionToNotifiedByVal::Dealloc
    );
    assert_eq!(s.load().ref_count(), 0);
    assert!(!s.load().is_notified());
}

#[test]
fn shutdown_claims_idle_and_scheduled_marks_running_and_skips_complete() {
    let idle = owned_idle();
    assert_eq!(idle.transition_to_shutdown(), TransitionToShutdown::Claimed);
    let snap = idle.load();
    assert!(snap.is_running() && snap.is_cancelled());
    assert_eq!(snap.ref_count(), 2, "no reference change");

    let queued = State::new_owned();
    assert_eq!(
        queued.transition_to_notified(),
        TransitionToNotified::DoNothing
    );
    assert_eq!(
        queued.transition_to_shutdown(),
        TransitionToShutdown::Claimed
    );
    assert!(!queued.load().is_notified());

    let running = State::new_owned();
    assert_eq!(
        running.transition_to_running(),
        TransitionToRunning::Success
    );
    assert_eq!(
        running.transition_to_shutdown(),
        TransitionToShutdown::Running
    );
    let snap = running.load();
    assert!(snap.is_running() && snap.is_cancelled());

    let done = State::new_owned();
    assert_eq!(done.transition_to_running(), TransitionToRunning::Success);
    let _ = done.transition_to_complete();
    let before = done.load();
    assert_eq!(
        done.transition_to_shutdown(),
        TransitionToShutdown::Complete
    );
    assert_eq!(done.load(), before);
}

#[test]
fn shutdown_claims_a_shielded_idle_task_anyway() {
    let s = State::new_owned();
    assert_eq!(s.transition_to_running(), TransitionToRunning::Success);
    s.shield_enter().unwrap();
    assert_eq!(s.transition_to_idle_keep_ref(), TransitionToIdleKeepRef::Ok);
    assert_eq!(s.transition_to_shutdown(), TransitionToShutdown::Claimed);
    assert!(s.load().is_running());
}

#[test]
fn drop_join_handle_fast_before_completion_leaves_the_output_to_the_task() {
    let s = State::new_owned();
    assert_eq!(s.drop_join_handle_fast(false), Some(false));
    let snap = s.load();
    assert!(!snap.has_join_interest());
    assert_eq!(snap.ref_count(), 2);
}

#[test]
fn drop_join_handle_fast_refuses_when_the_premise_changed() {
    // The handle thought the task was running, but it completed.
    let s = State::new_owned();
    assert_eq!(s.transition_to_running(), TransitionToRunning::Success);
    let _ = s.transition_to_complete();
    let before = s.load();
    assert_eq!(s.drop_join_handle_fast(false), None);
    assert_eq!(s.load(), before);
    // A registered join waker always takes the general path.
    let w = State::new_owned();
    w.set_join_waker().unwrap();
    assert_eq!(w.drop_join_handle_fast(false), None);
    assert_eq!(w.drop_join_handle_fast(true), None);
}

#[test]
fn drop_join_handle_fast_after_completion_reports_the_last_reference() {
    let s = State::new(true);
    assert_eq!(s.transition_to_running(), TransitionToRunning::Success);
    let _ = s.transition_to_complete();
    assert!(!s.ref_dec()); // the worker
    assert_eq!(s.drop_join_handle_fast(true), Some(true));
    assert_eq!(s.load().ref_count(), 0);
}

#[test]
fn unset_join_waker_after_the_task_side_handed_the_cell_back_reports_complete() {
    // The handle saw JOIN_WAKER set and wants to replace its waker; meanwhile
    // the task completed and cleared JOIN_WAKER (P5.2). Not a handle bug:
    // report COMPLETE, unchanged.
    let s = State::new_owned();
    s.set_join_waker().unwrap();
    assert_eq!(s.transition_to_running(), TransitionToRunning::Success);
    let _ = s.transition_to_complete();
    let after = s.unset_join_waker_after_complete();
    assert!(after.has_join_interest() && !after.has_join_waker());
    let err = s.unset_join_waker().unwrap_err();
    assert_eq!(err, after);
    assert_eq!(s.load(), after);
}
