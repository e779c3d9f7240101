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

/// A process that, from its first event on, floods `to` with `n` messages
/// through [`flood`], keeping running until all are sent.
fn spawn_flooder(rt: &ProcessRuntime<u64>, to: Pid, n: u64) -> Pid {
    let (mut sent, mut started) = (0u64, false);
    rt.spawn(
        Script::new(move |events, out: &mut StepOutput<'_, u64>| {
            started |= events.count() > 0;
            if started && !flood(out, to, &mut sent, n) {
                return out.keep_running();
            }
            out.idle();
        }),
        "main",
        None,
    )
    .unwrap()
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
    let sender = spawn_flooder(&rt, counter, n);
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

/// A sender floods a counter with `16 * T` messages, looping while
/// `!should_yield()`; returns how many messages each of its steps sent.
fn sends_per_step(workers: usize) -> Vec<u64> {
    let n = 16 * T;
    let rt = rt(workers);
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
    steps
}

#[test]
fn a_throttled_sender_is_not_stepped_until_the_resume_depth() {
    // One worker, so the counts are exact: the counter takes 64 events a
    // step; the sender, parked on it (step 6), is woken only once the
    // counter is down to SEND_RESUME_DEPTH, and then fills it past the
    // threshold in one step. No step of the sender sends nothing (before
    // step 6 about 8 of them did per burst: the counter's 512 events over
    // its 64 a step).
    let steps = sends_per_step(1);
    assert_eq!(steps[0], T + 1, "the first step fills past the threshold");
    let (last, full) = steps.split_last().unwrap();
    let least = T + 1 - SEND_RESUME_DEPTH as u64;
    assert!(
        full.iter().all(|&k| k >= least),
        "every step sends at least {least}: {steps:?}"
    );
    assert!(*last > 0, "{steps:?}");
}

#[test]
fn a_throttled_sender_on_two_workers_does_not_spin_through_empty_steps() {
    // Two workers: the sender is parked while the counter drains instead of
    // running empty steps on the other worker. An empty step comes only
    // from a spare wake (a list entry left by a registration that found the
    // counter drained already, or a second entry of the same sender): at
    // most two per burst.
    let steps = sends_per_step(2);
    let bursts = steps.iter().filter(|&&k| k > 0).count();
    let empty = steps.len() - bursts;
    assert!(
        empty <= 2 * bursts,
        "{empty} empty steps for {bursts} bursts: {steps:?}"
    );
}

/// `k` senders flood one counter with `n` messages each on `workers`
/// workers; the counter checks each sender's order. Every sender must
/// finish: none may wait for a drain that woke only some of them.
fn many_senders(workers: usize, k: usize, n: u64) {
    let rt = rt(workers);
    let (tx, rx) = mpsc::channel();
    let mut next: std::collections::HashMap<Pid, u64> = Default::default();
    let mut in_order = true;
    let total = k as u64 * n;
    let mut got = 0;
    let counter = rt
        .spawn(
            Script::new(move |events, out: &mut StepOutput<'_, u64>| {
                for e in events {
                    if let Event::Message {
                        from: Some(from),
                        msg,
                        ..
                    } = e
                    {
                        let want = next.entry(from).or_insert(0);
                        in_order &= msg == *want;
                        *want += 1;
                        got += 1;
                        if got == total {
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
    let mut senders = Vec::new();
    for _ in 0..k {
        senders.push(spawn_flooder(&rt, counter, n));
    }
    for pid in senders {
        rt.send(pid, 0).unwrap();
    }
    assert!(rx.recv_timeout(HANG).unwrap(), "per-sender FIFO order");
    let m = rt.shutdown(SHUTDOWN).metrics;
    assert!(
        m.mailbox_high_water > T,
        "the senders were throttled: {m:?}"
    );
}

#[test]
fn every_sender_throttled_on_one_receiver_is_woken_on_one_worker() {
    many_senders(1, 4, 4 * T);
}

#[test]
fn every_sender_throttled_on_one_receiver_is_woken_on_two_workers() {
    many_senders(2, 4, 4 * T);
}

#[test]
fn senders_throttled_on_a_receiver_that_panics_are_woken() {
    // Two workers. The receiver's first step holds its worker until every
    // sender has ended a flooding step throttled (so each is parked on the
    // receiver's deep mailbox, which nothing drains), then panics. Its end
    // must wake them: each then learns the receiver is gone (a send
    // refused) and says so. Without that wake they would wait forever.
    const K: usize = 3;
    let rt = rt(2);
    let (tx, rx) = mpsc::channel();
    let (throttled_tx, throttled_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let receiver = rt
        .spawn(
            Script::new(move |events, out: &mut StepOutput<'_, u64>| {
                if events.count() > 0 {
                    let _ = go_rx.recv_timeout(HANG);
                    panic!("the receiver fails with senders waiting on it");
                }
                out.idle();
            }),
            "main",
            None,
        )
        .unwrap();
    for i in 0..K {
        let (tx, throttled_tx) = (tx.clone(), throttled_tx.clone());
        let (mut steps, mut started) = (0u32, false);
        let pid = rt
            .spawn(
                Script::new(move |events, out: &mut StepOutput<'_, u64>| {
                    started |= events.count() > 0;
                    if !started {
                        return out.idle();
                    }
                    steps += 1;
                    while !out.should_yield() {
                        if out.send(receiver, 0).is_err() {
                            tx.send((i, steps)).unwrap();
                            return out.complete(None);
                        }
                    }
                    if steps == 1 {
                        throttled_tx.send(i).unwrap();
                    }
                    out.keep_running();
                }),
                "main",
                None,
            )
            .unwrap();
        rt.send(pid, 0).unwrap();
    }
    for _ in 0..K {
        throttled_rx.recv_timeout(HANG).unwrap();
    }
    go_tx.send(()).unwrap();
    let mut told: Vec<(usize, u32)> = (0..K).map(|_| rx.recv_timeout(HANG).unwrap()).collect();
    told.sort();
    let who: Vec<usize> = told.iter().map(|t| t.0).collect();
    assert_eq!(who, (0..K).collect::<Vec<_>>());
    assert!(told.iter().all(|t| t.1 >= 2), "{told:?}");
    let m = rt.shutdown(SHUTDOWN).metrics;
    assert_eq!(m.panicked, 1, "{m:?}");
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
