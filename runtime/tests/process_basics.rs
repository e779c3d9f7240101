//! Spawning, messages, PIDs, names, bounded mailboxes, metrics.

mod process_support;

use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use magpie_runtime::process::{
    Event, InitError, ProcessRuntime, RegisterError, SendError, SpawnError, SpawnOptions,
    StepOutput,
};
use process_support::{wait_until, Script, GRACE};

fn rt(workers: usize) -> ProcessRuntime<u64> {
    ProcessRuntime::builder().workers(workers).build().unwrap()
}

/// A process that forwards every message to `tx` and completes on Cancel.
fn recorder(tx: mpsc::Sender<u64>) -> Script<u64> {
    Script::new(move |events, out| {
        for ev in events {
            match ev {
                Event::Message { msg, .. } => tx.send(msg).unwrap(),
                Event::Cancel => return out.complete(None),
                _ => {}
            }
        }
        out.idle();
    })
}

#[test]
fn unknown_method_is_a_clear_spawn_error_and_close_is_not_called() {
    let rt = rt(1);
    let (tx, _rx) = mpsc::channel();
    let p = recorder(tx);
    let closes = p.closes();
    let err = rt.spawn(p, "no_such_entry", None).unwrap_err();
    assert_eq!(
        err,
        SpawnError::Init(InitError::UnknownMethod("no_such_entry".into()))
    );
    assert!(err.to_string().contains("no_such_entry"));
    rt.shutdown(GRACE);
    assert_eq!(closes.load(Ordering::SeqCst), 0);
}

#[test]
fn messages_from_one_sender_arrive_in_order_and_close_runs_once() {
    let rt = rt(2);
    let (tx, rx) = mpsc::channel();
    let p = recorder(tx);
    let closes = p.closes();
    let pid = rt.spawn(p, "main", None).unwrap();
    for i in 0..10_000 {
        rt.send(pid, i).unwrap();
    }
    let got: Vec<u64> = (0..10_000).map(|_| rx.recv().unwrap()).collect();
    assert_eq!(got, (0..10_000).collect::<Vec<_>>());
    let report = rt.shutdown(GRACE);
    assert!(report.forced.is_empty());
    assert_eq!(closes.load(Ordering::SeqCst), 1);
    assert_eq!(report.metrics.spawned, 1);
    assert_eq!(report.metrics.closed, 1);
    assert_eq!(report.metrics.sent, 10_000);
    assert!(report.metrics.steps >= 2);
    assert!(report.metrics.events >= 10_001);
    assert!(report.metrics.mailbox_high_water >= 1);
}

#[test]
fn send_to_an_exited_pid_fails_at_once_with_the_message() {
    let rt = rt(2);
    let p = Script::new(|_events, out: &mut StepOutput<'_, u64>| out.complete(None));
    let c = p.closes();
    let pid = rt.spawn(p, "main", None).unwrap();
    wait_until("the process to close", || c.load(Ordering::SeqCst) == 1);
    match rt.send(pid, 7) {
        Err(SendError::NoProcess(7)) => {}
        other => panic!("expected NoProcess(7), got {other:?}"),
    }
    assert!(!rt.handle().is_alive(pid));
    assert!(!rt.handle().cancel(pid));
    let m = rt.shutdown(GRACE).metrics;
    assert_eq!(m.refused, 1);
    assert_eq!(m.completed, 1);
}

#[test]
fn a_reused_slot_never_receives_the_old_pids_messages() {
    let rt = rt(1);
    let first = Script::new(|_e, out: &mut StepOutput<'_, u64>| out.complete(None));
    let c = first.closes();
    let old = rt.spawn(first, "main", None).unwrap();
    wait_until("the first process to close", || {
        c.load(Ordering::SeqCst) == 1
    });
    let (tx, rx) = mpsc::channel();
    let new = rt.spawn(recorder(tx), "main", None).unwrap();
    assert_eq!(old.index(), new.index(), "the slot is reused");
    assert_ne!(old.generation(), new.generation());
    assert!(matches!(rt.send(old, 1), Err(SendError::NoProcess(1))));
    rt.send(new, 2).unwrap();
    assert_eq!(rx.recv().unwrap(), 2);
    assert!(rx.try_recv().is_err());
    rt.shutdown(GRACE);
}

#[test]
fn names_register_resolve_and_unregister() {
    let rt = rt(1);
    let (tx, rx) = mpsc::channel();
    let h = rt.handle().clone();
    let pid = rt
        .spawn_with(
            SpawnOptions {
                name: Some("logger".into()),
                ..Default::default()
            },
            recorder(tx.clone()),
            "main",
            None,
        )
        .unwrap();
    assert_eq!(h.whereis("logger"), Some(pid));
    let other = rt.spawn(recorder(tx), "main", None).unwrap();
    assert_eq!(h.register("logger", other), Err(RegisterError::Taken));
    let err = rt
        .spawn_with(
            SpawnOptions {
                name: Some("logger".into()),
                ..Default::default()
            },
            recorder(mpsc::channel().0),
            "main",
            None,
        )
        .unwrap_err();
    assert_eq!(err, SpawnError::NameTaken("logger".into()));
    h.register("audit", other).unwrap();
    rt.send(h.whereis("audit").unwrap(), 5).unwrap();
    assert_eq!(rx.recv().unwrap(), 5);
    assert_eq!(h.unregister("logger"), Some(pid));
    assert_eq!(h.whereis("logger"), None);
    // A name dies with its process.
    assert!(h.cancel(other));
    wait_until("audit to end", || h.whereis("audit").is_none());
    rt.shutdown(GRACE);
}

#[test]
fn bounded_try_send_gives_the_message_back_when_full() {
    let rt = rt(1);
    let (gate_tx, gate_rx) = mpsc::channel::<()>();
    let gate_rx = Mutex::new(gate_rx);
    let (tx, rx) = mpsc::channel();
    let mut first = true;
    // The first step holds the worker until the test has filled the
    // mailbox, so nothing is consumed meanwhile.
    let p = Script::new(move |events, out| {
        if first {
            first = false;
            gate_rx.lock().unwrap().recv().unwrap();
        }
        for ev in events {
            match ev {
                Event::Message { msg, .. } => tx.send(msg).unwrap(),
                Event::Cancel => return out.complete(None),
                _ => {}
            }
        }
        out.idle();
    });
    let pid = rt
        .spawn_with(
            SpawnOptions {
                mailbox_bound: Some(3),
                ..Default::default()
            },
            p,
            "main",
            None,
        )
        .unwrap();
    wait_until("the first step to start", || rt.metrics().steps == 1);
    for i in 0..3 {
        rt.try_send(pid, i).unwrap();
    }
    match rt.try_send(pid, 99) {
        Err(SendError::Full(99)) => {}
        other => panic!("expected Full(99), got {other:?}"),
    }
    gate_tx.send(()).unwrap();
    let got: Vec<u64> = (0..3).map(|_| rx.recv().unwrap()).collect();
    assert_eq!(got, vec![0, 1, 2]);
    wait_until("room", || rt.try_send(pid, 3).is_ok());
    assert_eq!(rx.recv().unwrap(), 3);
    let m = rt.shutdown(GRACE).metrics;
    assert!(m.refused >= 1);
    // Three messages; cancellation is a flag in the state word, not a
    // queued event.
    assert_eq!(m.mailbox_high_water, 3);
}

#[test]
fn a_conversation_stays_on_the_worker_it_started_on() {
    // Two processes answering each other: each message wakes the other,
    // which the step hands over to run next on the same worker (and, after
    // MAX_HANDOFFS = 128 hand-offs in a row, through the worker's own LIFO
    // slot). Neither run-queue path lets the other worker take it, so once
    // both have settled every step of the pair runs on one worker.
    const ROUNDS: u64 = 2_000;
    const SETTLED: u64 = 20;
    let rt = rt(2);
    let seen: Arc<Mutex<Vec<Option<usize>>>> = Arc::default();
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let pong_seen = seen.clone();
    let pong = rt
        .spawn(
            Script::new(move |events, out: &mut StepOutput<'_, u64>| {
                for ev in events {
                    if let Event::Message {
                        from: Some(f), msg, ..
                    } = ev
                    {
                        if msg >= SETTLED {
                            pong_seen
                                .lock()
                                .unwrap()
                                .push(magpie_runtime::current_worker_id());
                        }
                        out.send(f, msg + 1).unwrap();
                    }
                }
                out.idle();
            }),
            "main",
            None,
        )
        .unwrap();
    let ping_seen = seen.clone();
    let ping = rt
        .spawn(
            Script::new(move |events, out: &mut StepOutput<'_, u64>| {
                for ev in events {
                    if let Event::Message { msg, .. } = ev {
                        if msg >= SETTLED {
                            ping_seen
                                .lock()
                                .unwrap()
                                .push(magpie_runtime::current_worker_id());
                        }
                        if msg >= ROUNDS {
                            tx.lock().unwrap().send(msg).unwrap();
                        } else {
                            out.send(pong, msg + 1).unwrap();
                        }
                    }
                }
                out.idle();
            }),
            "main",
            None,
        )
        .unwrap();
    rt.send(ping, 0).unwrap();
    assert_eq!(rx.recv().unwrap(), ROUNDS);
    rt.shutdown(GRACE);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len() as u64, ROUNDS - SETTLED + 1);
    assert!(seen[0].is_some(), "steps run on workers");
    assert!(
        seen.iter().all(|w| *w == seen[0]),
        "the pair moved between workers: {:?}",
        seen.iter().filter(|w| **w != seen[0]).count()
    );
}

/// A step's messages to one process after the first are kept back and
/// published in batches (README.md, "Batched sends"). Interleaved with
/// sends to a second process, every message arrives once and in order, and
/// exactly the messages after the first of each run to one process were
/// batched.
#[test]
fn a_step_s_messages_to_one_process_arrive_in_order_in_batches() {
    const RUNS: u64 = 10;
    const RUN: u64 = 100;
    let rt = rt(2);
    let (tx_a, rx_a) = mpsc::channel();
    let (tx_b, rx_b) = mpsc::channel();
    let a = rt.spawn(recorder(tx_a), "main", None).unwrap();
    let b = rt.spawn(recorder(tx_b), "main", None).unwrap();
    let sender = Script::new(move |events, out: &mut StepOutput<'_, u64>| {
        for ev in events {
            match ev {
                Event::Message { .. } => {
                    for i in 0..RUNS * RUN {
                        out.send(a, i).unwrap();
                        if i % RUN == RUN - 1 {
                            out.send(b, i).unwrap();
                        }
                    }
                }
                Event::Cancel => return out.complete(None),
                _ => {}
            }
        }
        out.idle();
    });
    let s = rt.spawn(sender, "main", None).unwrap();
    rt.send(s, 0).unwrap();
    let wait = std::time::Duration::from_secs(10);
    let got_a: Vec<u64> = (0..RUNS * RUN)
        .map(|_| rx_a.recv_timeout(wait).unwrap())
        .collect();
    assert_eq!(got_a, (0..RUNS * RUN).collect::<Vec<_>>());
    let got_b: Vec<u64> = (0..RUNS)
        .map(|_| rx_b.recv_timeout(wait).unwrap())
        .collect();
    assert_eq!(
        got_b,
        (0..RUNS).map(|k| k * RUN + RUN - 1).collect::<Vec<_>>()
    );
    let report = rt.shutdown(GRACE);
    assert!(report.forced.is_empty());
    assert_eq!(report.metrics.sent, RUNS * RUN + RUNS + 1);
    // Each run to `a` opens with a send delivered at once (the one before
    // went to `b`); the other RUN - 1 wait in a batch. `b` gets one per run.
    assert_eq!(report.metrics.batched, RUNS * (RUN - 1));
}
