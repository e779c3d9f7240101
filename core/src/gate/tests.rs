//! Unit tests of the gate word. The races are in `core/tests/loom_gate.rs`;
//! the threaded stress test is in `core/tests/stress_task_gate.rs`.

use super::*;

#[test]
fn layout_is_accepting_bit_then_count() {
    assert_eq!((ACCEPTING, COUNT_ONE, COUNT_SHIFT), (1, 2, 1));
    assert_eq!(COUNT_MAX, (1 << 63) - 1);
    let g = Gate::new();
    assert_eq!(g.load().raw(), ACCEPTING);
    assert!(g.is_accepting() && !g.is_terminated());
    assert_eq!(g.in_flight(), 0);
    assert_eq!(Gate::default().load(), g.load());
    assert!(format!("{g:?}").contains("accepting: true"));
}

#[test]
fn gate_word_is_alone_on_its_cache_line() {
    assert_eq!(
        core::mem::align_of::<Gate>(),
        crate::cache_padded::CACHE_LINE
    );
}

#[test]
fn spawns_count_while_open_and_fail_once_closed() {
    let g = Gate::new();
    assert!(g.try_spawn(1));
    assert!(g.try_spawn(1024));
    g.spawn_internal(3);
    assert_eq!(g.in_flight(), 1028);
    assert!(!g.close());
    assert!(!g.is_accepting());
    assert!(!g.try_spawn(1), "a spawn after close succeeded");
    assert!(!g.try_spawn(7), "a batch after close succeeded");
    assert_eq!(g.in_flight(), 1028, "a failed batch changed the count");
    assert!(!g.complete(1000));
    assert!(!g.complete(27));
    assert!(!g.is_terminated());
    assert!(g.complete(1), "the last completion after close is the end");
    assert!(g.is_terminated());
}

#[test]
fn close_of_an_idle_gate_is_the_terminal_transition() {
    let g = Gate::new();
    assert!(g.close());
    assert!(g.is_terminated());
    assert!(!g.close(), "a second close reported the end again");
    assert!(!g.try_enter());
    assert!(!g.try_spawn(1));
}

#[test]
fn count_reaching_zero_while_open_is_not_the_end() {
    let g = Gate::new();
    assert!(g.try_spawn(2));
    assert!(!g.complete(2));
    assert!(g.is_accepting() && !g.is_terminated());
    assert!(g.close());
}

#[test]
fn try_enter_succeeds_while_open_or_draining_and_never_after_the_end() {
    let g = Gate::new();
    assert!(g.try_enter(), "open gate, nothing in flight");
    assert!(!g.close());
    assert!(
        g.try_enter(),
        "closed but draining: a second worker may wake"
    );
    assert_eq!(g.in_flight(), 2);
    assert!(!g.complete(1));
    assert!(g.complete(1));
    assert!(!g.try_enter(), "a terminated gate was re-entered");
    assert_eq!(g.load().raw(), 0);
}

#[test]
#[should_panic(expected = "complete(0)")]
fn complete_of_zero_counts_panics() {
    let g = Gate::new();
    assert!(g.close());
    let _ = g.complete(0);
}

#[test]
#[should_panic(expected = "with")]
fn complete_of_more_than_in_flight_panics() {
    let g = Gate::new();
    assert!(g.try_spawn(1));
    let _ = g.complete(2);
}

#[test]
#[should_panic(expected = "overflow")]
fn try_spawn_past_the_count_limit_panics() {
    let g = Gate::new();
    assert!(g.try_spawn(COUNT_MAX));
    let _ = g.try_spawn(1);
}
