//! Graceful shutdown, forced close, close order, fairness, and bounded
//! mailboxes that cannot deadlock the runtime.

mod process_support;

use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use magpie_runtime::process::{
    Event, Outcome, Pid, ProcessRuntime, SendError, SpawnOptions, StepOutput,
};
use process_support::{wait_until, Script, GRACE};

type Log = Arc<Mutex<Vec<String>>>;

/// A tree node: spawns `children` children (each with `children - 1`),
/// links to each, and on Cancel ends after `linger` ticks of sleep (a
/// child that is "stopping" when its parent is asked to stop).
fn node(name: String, children: u32, log: Log) -> Script<u64> {
    let mut started = false;
    let close_log = log.clone();
    let close_name = name.clone();
    Script::new(move |events, out: &mut StepOutput<'_, u64>| {
        if !started {
            started = true;
            for i in 0..children {
                out.spawn_child(
                    u64::from(i),
                    node(format!("{name}.{i}"), children - 1, log.clone()),
                    "main",
                    None,
                );
            }
        }
        for ev in events {
            match ev {
                Event::Completion {
                    result: Ok(Outcome::Spawned(pid)),
                    ..
                } => out.link(pid),
                // Stop slowly: one short sleep, then complete.
                Event::Cancel => out.sleep(1000, Duration::from_millis(2)),
                Event::Completion { tag: 1000, .. } => return out.complete(None),
                _ => {}
            }
        }
        out.idle();
    })
    .on_close(move || close_log.lock().unwrap().push(close_name.clone()))
}

#[test]
fn shutdown_runs_every_close_children_before_parents() {
    let rt = ProcessRuntime::<u64>::builder().workers(2).build().unwrap();
    let log: Log = Arc::default();
    rt.spawn(node("root".into(), 3, log.clone()), "main", None)
        .unwrap();
    // 1 + 3 + 3*2 + 3*2*1 = 16 processes.
    wait_until("the tree to grow", || rt.metrics().spawned == 16);
    let report = rt.shutdown(GRACE);
    assert!(report.forced.is_empty(), "forced: {:?}", report.forced);
    assert!(report.stuck.is_empty());
    let log = log.lock().unwrap().clone();
    assert_eq!(log.len(), 16, "every close ran once: {log:?}");
    for (i, name) in log.iter().enumerate() {
        // Every descendant of `name` closed before it.
        let prefix = format!("{name}.");
        assert!(
            !log[i + 1..].iter().any(|later| later.starts_with(&prefix)),
            "{name} closed before a child: {log:?}"
        );
    }
    assert_eq!(report.metrics.closed, 16);
}

#[test]
fn shutdown_forces_what_ignores_cancel_children_first_and_reports_it() {
    let rt = ProcessRuntime::<u64>::builder().workers(2).build().unwrap();
    let log: Log = Arc::default();
    // Ignores Cancel; spawns one child that ignores it too.
    fn stubborn(name: &'static str, child: bool, log: Log) -> Script<u64> {
        let mut first = true;
        let l2 = log.clone();
        Script::new(move |_events, out: &mut StepOutput<'_, u64>| {
            if first && child {
                out.spawn_child(0, stubborn("child", false, log.clone()), "main", None);
            }
            first = false;
            out.idle();
        })
        .on_close(move || l2.lock().unwrap().push(name.to_string()))
    }
    let parent = rt
        .spawn(stubborn("parent", true, log.clone()), "main", None)
        .unwrap();
    wait_until("the child", || rt.metrics().spawned == 2);
    let report = rt.shutdown(Duration::from_millis(50));
    assert_eq!(report.forced.len(), 2);
    assert_eq!(report.forced[1], parent);
    assert_eq!(*log.lock().unwrap(), vec!["child", "parent"]);
    assert_eq!(report.metrics.forced, 2);
}

#[test]
fn spawn_after_shutdown_is_refused_before_init() {
    let rt = ProcessRuntime::<u64>::builder().workers(1).build().unwrap();
    let h = rt.handle().clone();
    rt.shutdown(GRACE);
    let p = Script::new(|_e, out: &mut StepOutput<'_, u64>| out.idle());
    let closes = p.closes();
    assert_eq!(
        h.spawn(p, "main", None),
        Err(magpie_runtime::process::SpawnError::ShuttingDown)
    );
    // Refused before `init`, so no `close` is owed.
    assert_eq!(closes.load(Ordering::SeqCst), 0);
}

/// Sends its partner `n` messages through a bounded mailbox, retrying (a
/// step never blocks) when the partner is full; counts what it receives.
fn chatter(n: u64, got: Arc<Mutex<u64>>) -> Script<u64> {
    let mut partner: Option<Pid> = None;
    let mut sent = 0;
    Script::new(move |events, out: &mut StepOutput<'_, u64>| {
        for ev in events {
            match ev {
                Event::Message {
                    msg, from: None, ..
                } => partner = Some(pid_at(msg)),
                Event::Message { .. } => *got.lock().unwrap() += 1,
                Event::Cancel => return out.complete(None),
                _ => {}
            }
        }
        let Some(p) = partner else { return out.idle() };
        while sent < n {
            match out.send(p, sent) {
                Ok(()) => sent += 1,
                Err(SendError::Full(_)) => return out.keep_running(),
                Err(e) => panic!("{e}"),
            }
        }
        out.idle();
    })
}

/// The partner PIDs travel from the test thread as indexes into `PIDS`.
fn pid_at(v: u64) -> Pid {
    PIDS.lock().unwrap()[v as usize]
}

static PIDS: Mutex<Vec<Pid>> = Mutex::new(Vec::new());

#[test]
fn full_bounded_mailboxes_sending_to_each_other_do_not_deadlock() {
    let rt = ProcessRuntime::<u64>::builder().workers(2).build().unwrap();
    let (ga, gb) = (Arc::new(Mutex::new(0)), Arc::new(Mutex::new(0)));
    let opts = SpawnOptions {
        mailbox_bound: Some(2),
        ..Default::default()
    };
    let a = rt
        .spawn_with(opts.clone(), chatter(5_000, ga.clone()), "main", None)
        .unwrap();
    let b = rt
        .spawn_with(opts, chatter(5_000, gb.clone()), "main", None)
        .unwrap();
    let (ia, ib) = {
        let mut pids = PIDS.lock().unwrap();
        pids.push(b);
        pids.push(a);
        (pids.len() as u64 - 2, pids.len() as u64 - 1)
    };
    // Each learns its partner (from outside: `from: None`).
    wait_until("a to take the intro", || rt.send(a, ia).is_ok());
    wait_until("b to take the intro", || rt.send(b, ib).is_ok());
    // An unrelated process keeps running meanwhile.
    let (tx, rx) = mpsc::channel();
    let other = Script::new(move |events, out: &mut StepOutput<'_, u64>| {
        for e in events {
            if let Event::Message { msg, .. } = e {
                tx.send(msg).unwrap();
            }
            if let Event::Cancel = e {
                return out.complete(None);
            }
        }
        out.idle();
    });
    let o = rt.spawn(other, "main", None).unwrap();
    rt.send(o, 1).unwrap();
    assert_eq!(rx.recv_timeout(Duration::from_secs(20)).unwrap(), 1);
    wait_until("both to receive everything", || {
        *ga.lock().unwrap() == 5_000 && *gb.lock().unwrap() == 5_000
    });
    let report = rt.shutdown(GRACE);
    assert!(report.forced.is_empty());
    assert!(report.metrics.refused > 0, "the mailboxes were never full");
    assert!(report.metrics.mailbox_high_water <= 2 + 1);
}

#[test]
fn a_flood_to_one_process_does_not_starve_another() {
    // One worker; the budget is 64 events per step.
    let rt = ProcessRuntime::<u64>::builder()
        .workers(1)
        .event_budget(64)
        .build()
        .unwrap();
    const FLOOD: u64 = 10_000;
    let consumed = Arc::new(Mutex::new(0u64));
    let max_batch = Arc::new(Mutex::new(0usize));
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let go_rx = Mutex::new(go_rx);
    let mut first = true;
    let (c2, m2) = (consumed.clone(), max_batch.clone());
    let flooded = Script::new(move |events, out: &mut StepOutput<'_, u64>| {
        if first {
            first = false;
            go_rx.lock().unwrap().recv().unwrap();
        }
        let mut n = 0;
        for e in events {
            if let Event::Cancel = e {
                return out.complete(None);
            }
            n += 1;
        }
        *c2.lock().unwrap() += n as u64;
        let mut m = m2.lock().unwrap();
        *m = (*m).max(n);
        out.idle();
    });
    let (tx, rx) = mpsc::channel();
    let c3 = consumed.clone();
    let other = Script::new(move |events, out: &mut StepOutput<'_, u64>| {
        for e in events {
            if let Event::Message { .. } = e {
                tx.send(*c3.lock().unwrap()).unwrap();
            }
            if let Event::Cancel = e {
                return out.complete(None);
            }
        }
        out.idle();
    });
    let other = rt.spawn(other, "main", None).unwrap();
    wait_until("the other process's first step", || rt.metrics().steps == 1);
    let flooded = rt.spawn(flooded, "main", None).unwrap();
    wait_until("the flooded process's first step", || {
        rt.metrics().steps == 2
    });
    for i in 0..FLOOD {
        rt.send(flooded, i).unwrap();
    }
    rt.send(other, 0).unwrap();
    go_tx.send(()).unwrap();
    let seen = rx.recv_timeout(Duration::from_secs(20)).unwrap();
    assert!(seen < FLOOD, "the other process waited for the whole flood");
    wait_until("the flood to drain", || *consumed.lock().unwrap() == FLOOD);
    assert!(*max_batch.lock().unwrap() <= 64);
    rt.shutdown(GRACE);
}

#[test]
fn send_wait_waits_for_room_in_a_bounded_mailbox() {
    let rt = ProcessRuntime::<u64>::builder().workers(1).build().unwrap();
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    let slow = Script::new(move |events, out: &mut StepOutput<'_, u64>| {
        for e in events {
            match e {
                Event::Message { msg, .. } => g.lock().unwrap().push(msg),
                Event::Cancel => return out.complete(None),
                _ => {}
            }
        }
        out.idle();
    });
    let pid = rt
        .spawn_with(
            SpawnOptions {
                mailbox_bound: Some(1),
                ..Default::default()
            },
            slow,
            "main",
            None,
        )
        .unwrap();
    let h = rt.handle().clone();
    let futures_rt = magpie_runtime::Runtime::builder()
        .worker_threads(1)
        .build()
        .unwrap();
    futures_rt.block_on(async move {
        for i in 0..200 {
            h.send_wait(pid, i).await.unwrap();
        }
    });
    wait_until("all 200", || got.lock().unwrap().len() == 200);
    assert_eq!(*got.lock().unwrap(), (0..200).collect::<Vec<_>>());
    rt.shutdown(GRACE);
}
