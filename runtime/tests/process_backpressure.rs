//! Back-pressure on a fast sender (README.md "Back-pressure" beside
//! `runtime/src/process/runtime.rs`): a send that leaves its receiver's
//! mailbox holding more than `SEND_PUNISH_THRESHOLD` messages spends the
//! sender's step budget, so a sender that loops while `!should_yield()`
//! stops, keeps running after the others, and its receiver drains. Never a
//! refusal, a wait or a reordering; a process flooding itself or a cycle of
//! them finishes.
//!
//! Every bound here is counted (the runtime's mailbox high-water mark), not
//! timed; the waits are hang detectors.

mod process_support;

use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use magpie_runtime::process::{
    Event, Pid, ProcessRuntime, StepOutput, DEFAULT_EVENT_BUDGET, SEND_PUNISH_THRESHOLD,
    SEND_RESUME_DEPTH,
};
use process_support::Script;

const T: u64 = SEND_PUNISH_THRESHOLD as u64;
/// A hang detector for the answers the tests wait for.
const HANG: Duration = Duration::from_secs(20);
/// The processes here ignore `Cancel`: shutdown closes them by force after
/// this (the tests read only the metrics of the report).
const SHUTDOWN: Duration = Duration::from_millis(50);

fn rt(workers: usize) -> ProcessRuntime<u64> {
    ProcessRuntime::builder().workers(workers).build().unwrap()
}

/// Sends `to` the messages `*sent..n` while the step's budget lasts;
/// returns whether all `n` are sent.
fn flood(out: &mut StepOutput<'_, u64>, to: Pid, sent: &mut u64, n: u64) -> bool {
    while *sent < n && !out.should_yield() {
        out.send(to, *sent).unwrap();
        *sent += 1;
    }
    *sent == n
}

#[test]
fn should_yield_turns_true_just_past_the_threshold() {
    // One worker: the receiver cannot run during the sender's step, so the
    // depth each send leaves is exact.
    let rt = rt(1);
    let receiver = rt
        .spawn(
            Script::new(|_e, out: &mut StepOutput<'_, u64>| out.idle()),
            "main",
            None,
        )
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let sender = rt
        .spawn(
            Script::new(move |events, out: &mut StepOutput<'_, u64>| {
                let go = events
                    .filter(|e| matches!(e, Event::Message { .. }))
                    .count();
                if go == 1 {
                    // One event taken: one reduction used.
                    let before = (out.should_yield(), out.budget_left());
                    for i in 0..T {
                        out.send(receiver, i).unwrap();
                    }
                    let at = (out.should_yield(), out.budget_left());
                    out.send(receiver, T).unwrap();
                    let past = (out.should_yield(), out.budget_left());
                    tx.send((before, at, past)).unwrap();
                }
                out.idle();
            }),
            "main",
            None,
        )
        .unwrap();
    rt.send(sender, 0).unwrap();
    let (before, at, past) = rx.recv_timeout(HANG).unwrap();
    assert_eq!(before, (false, DEFAULT_EVENT_BUDGET - 1));
    assert_eq!(
        at,
        (false, DEFAULT_EVENT_BUDGET - 1),
        "{T} queued: not past"
    );
    assert_eq!(past, (true, 0), "{} queued: past the threshold", T + 1);
    let report = rt.shutdown(SHUTDOWN);
    assert_eq!(report.metrics.mailbox_high_water, T + 1);
    assert_eq!(report.metrics.refused, 0);
}

/// A sender floods a counter with `16 * T` messages, looping while
/// `!should_yield()`; the counter checks their order.
fn flooding_sender(workers: usize) {
    let n = 16 * T;
    let rt = rt(workers);
    let (tx, rx) = mpsc::channel();
    let (mut got, mut in_order) = (0u64, true);
    let counter = rt
        .spawn(
            Script::new(move |events, out: &mut StepOutput<'_, u64>| {
                for e in events {
                    if let Event::Message { msg, .. } = e {
                        in_order &= msg == got;
                        got += 1;
                        if got == n {
                            tx.send(in_order).unwrap();
                        }
                    }
                }
                out.idle();
            }),
            "main",
            None,
        )
        .unwrap();
    let mut sent = 0;
    let mut started = false;
    let sender = rt
        .spawn(
            Script::new(move |events, out: &mut StepOutput<'_, u64>| {
                started |= events.count() > 0;
                if started && !flood(out, counter, &mut sent, n) {
                    return out.keep_running();
                }
                out.idle();
            }),
            "main",
            None,
        )
        .unwrap();
    rt.send(sender, 0).unwrap();
    assert!(rx.recv_timeout(HANG).unwrap(), "per-sender FIFO order");
    let m = rt.shutdown(SHUTDOWN).metrics;
    // One sender: it stops at the first send past the threshold, and what it
    // kept back counts in the depth it compares, so its receiver never holds
    // more than the threshold plus that one message.
    assert!(m.mailbox_high_water <= T + 1, "{workers} workers: {m:?}");
    if workers == 1 {
        // The receiver runs only when the sender yields: the sender did reach
        // the threshold (the bound above is not vacuous).
        assert_eq!(m.mailbox_high_water, T + 1, "{m:?}");
    }
    assert_eq!(m.refused, 0);
}

#[test]
fn a_flooding_sender_s_receiver_stays_within_the_threshold_on_one_worker() {
    flooding_sender(1);
}

#[test]
fn a_flooding_sender_s_receiver_stays_within_the_threshold_on_two_workers() {
    flooding_sender(2);
}

#[test]
fn a_throttled_sender_waits_for_the_resume_depth() {
    // One worker, so the counts are exact: the counter takes 64 events a
    // step; the sender's steps send nothing until the counter is down to
    // SEND_RESUME_DEPTH, then fill it past the threshold in one step.
    let n = 16 * T;
    let rt = rt(1);
    let (tx, rx) = mpsc::channel();
    let mut got = 0u64;
    let counter = rt
        .spawn(
            Script::new(move |events, out: &mut StepOutput<'_, u64>| {
                got += events.count() as u64;
                if got == n {
                    tx.send(()).unwrap();
                }
                out.idle();
            }),
            "main",
            None,
        )
        .unwrap();
    let per_step: Arc<Mutex<Vec<u64>>> = Arc::default();
    let log = per_step.clone();
    let (mut sent, mut started) = (0u64, false);
    let sender = rt
        .spawn(
            Script::new(move |events, out: &mut StepOutput<'_, u64>| {
                started |= events.count() > 0;
                if started && sent < n {
                    let before = sent;
                    flood(out, counter, &mut sent, n);
                    log.lock().unwrap().push(sent - before);
                    if sent < n {
                        return out.keep_running();
                    }
                }
                out.idle();
            }),
            "main",
            None,
        )
        .unwrap();
    rt.send(sender, 0).unwrap();
    rx.recv_timeout(HANG).unwrap();
    rt.shutdown(SHUTDOWN);
    let steps = per_step.lock().unwrap().clone();
    assert_eq!(steps.iter().sum::<u64>(), n);
    assert_eq!(steps[0], T + 1, "the first step fills past the threshold");
    let bursts: Vec<u64> = steps.iter().copied().filter(|&k| k > 0).collect();
    let (last, full) = bursts.split_last().unwrap();
    let least = T + 1 - SEND_RESUME_DEPTH as u64;
    assert!(
        full.iter().all(|&k| k >= least),
        "a step that sends sends at least {least}: {bursts:?}"
    );
    assert!(*last > 0);
    let throttled = steps.iter().filter(|&&k| k == 0).count();
    assert!(
        throttled >= bursts.len() - 1,
        "steps waiting for the drain: {throttled} for {} bursts",
        bursts.len()
    );
}

#[test]
fn a_process_flooding_itself_gets_every_message_in_order() {
    let n = 4 * T;
    let rt = rt(2);
    let (tx, rx) = mpsc::channel();
    let (mut sent, mut got, mut in_order, mut started) = (0u64, 0u64, true, false);
    let me = rt
        .spawn(
            Script::new(move |events, out: &mut StepOutput<'_, u64>| {
                for e in events {
                    match e {
                        Event::Message { from: None, .. } => started = true,
                        Event::Message { msg, .. } => {
                            in_order &= msg == got;
                            got += 1;
                        }
                        _ => {}
                    }
                }
                let me = out.pid();
                let done = !started || flood(out, me, &mut sent, n);
                if got == n {
                    tx.send(in_order).unwrap();
                    return out.complete(None);
                }
                if done {
                    out.idle()
                } else {
                    out.keep_running()
                }
            }),
            "main",
            None,
        )
        .unwrap();
    rt.send(me, 0).unwrap();
    assert!(rx.recv_timeout(HANG).unwrap(), "its own messages in order");
    let m = rt.shutdown(SHUTDOWN).metrics;
    assert!(m.mailbox_high_water <= T + 1, "{m:?}");
    assert!(m.mailbox_high_water > T, "it reached the threshold: {m:?}");
}

#[test]
fn a_cycle_of_flooding_processes_finishes_in_order() {
    const K: usize = 3;
    let n = 4 * T;
    let rt = rt(2);
    let (tx, rx) = mpsc::channel();
    let pids: Arc<OnceLock<Vec<Pid>>> = Arc::new(OnceLock::new());
    let mut all = Vec::new();
    for i in 0..K {
        let pids = pids.clone();
        let tx = tx.clone();
        let (mut sent, mut got, mut in_order, mut started) = (0u64, 0u64, true, false);
        let pid = rt
            .spawn(
                Script::new(move |events, out: &mut StepOutput<'_, u64>| {
                    for e in events {
                        match e {
                            Event::Message { from: None, .. } => started = true,
                            Event::Message { msg, .. } => {
                                in_order &= msg == got;
                                got += 1;
                            }
                            _ => {}
                        }
                    }
                    let done = !started || {
                        let next = pids.get().expect("pids set")[(i + 1) % K];
                        flood(out, next, &mut sent, n)
                    };
                    if got == n && sent == n {
                        tx.send((i, in_order)).unwrap();
                        return out.complete(None);
                    }
                    if done {
                        out.idle()
                    } else {
                        out.keep_running()
                    }
                }),
                "main",
                None,
            )
            .unwrap();
        all.push(pid);
    }
    pids.set(all.clone()).unwrap();
    for pid in all {
        rt.send(pid, 0).unwrap();
    }
    let mut finished = Vec::new();
    for _ in 0..K {
        let (i, in_order) = rx.recv_timeout(HANG).unwrap();
        assert!(in_order, "process {i}: its predecessor's messages in order");
        finished.push(i);
    }
    finished.sort();
    assert_eq!(finished, (0..K).collect::<Vec<_>>());
    let m = rt.shutdown(SHUTDOWN).metrics;
    assert!(m.mailbox_high_water <= T + 1, "{m:?}");
}
