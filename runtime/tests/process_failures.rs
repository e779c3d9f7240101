//! Failures are contained: a panicking or failing step ends only its own
//! process, runs its close, and tells its links and monitors.

mod process_support;

use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::Duration;

use magpie_runtime::process::{Event, ExitReason, Pid, ProcessRuntime, Relation, StepOutput};
use process_support::{Script, GRACE};

/// Links to (or monitors) `target` in its first step, then reports every
/// exit notice; ends on Cancel.
fn watcher(target: Pid, link: bool, tx: mpsc::Sender<(Pid, Relation, ExitReason)>) -> Script<u64> {
    let mut first = true;
    Script::new(move |events, out: &mut StepOutput<'_, u64>| {
        if first {
            first = false;
            if link {
                out.link(target);
            } else {
                out.monitor(target);
            }
        }
        for ev in events {
            match ev {
                Event::Exit(n) => tx.send((n.pid, n.relation, n.reason)).unwrap(),
                Event::Cancel => return out.complete(None),
                _ => {}
            }
        }
        out.idle();
    })
}

/// Panics on the message 13, echoes the others to `tx`.
fn fragile(tx: mpsc::Sender<u64>) -> Script<u64> {
    Script::new(move |events, out: &mut StepOutput<'_, u64>| {
        for ev in events {
            match ev {
                Event::Message { msg: 13, .. } => panic!("unlucky message"),
                Event::Message { msg, .. } => tx.send(msg).unwrap(),
                Event::Cancel => return out.complete(None),
                _ => {}
            }
        }
        out.idle();
    })
}

#[test]
fn a_panicking_step_is_contained_its_links_are_told_and_others_run_on() {
    let rt = ProcessRuntime::<u64>::builder().workers(2).build().unwrap();
    let (echo_tx, echo_rx) = mpsc::channel();
    let victim = fragile(echo_tx.clone());
    let victim_closes = victim.closes();
    let victim_pid = rt.spawn(victim, "main", None).unwrap();
    let (exit_tx, exit_rx) = mpsc::channel();
    rt.spawn(watcher(victim_pid, true, exit_tx.clone()), "main", None)
        .unwrap();
    rt.spawn(watcher(victim_pid, false, exit_tx), "main", None)
        .unwrap();
    let bystander = rt.spawn(fragile(echo_tx), "main", None).unwrap();
    // Let the watchers link before the panic.
    while rt.metrics().steps < 4 {
        std::thread::yield_now();
    }
    rt.send(victim_pid, 1).unwrap();
    assert_eq!(echo_rx.recv().unwrap(), 1);
    rt.send(victim_pid, 13).unwrap();
    let mut notices = vec![
        exit_rx.recv_timeout(Duration::from_secs(20)).unwrap(),
        exit_rx.recv_timeout(Duration::from_secs(20)).unwrap(),
    ];
    notices.sort_by_key(|n| format!("{:?}", n.1));
    let reason = ExitReason::Panicked("unlucky message".into());
    assert_eq!(
        notices,
        vec![
            (victim_pid, Relation::Link, reason.clone()),
            (victim_pid, Relation::Monitor, reason),
        ]
    );
    assert_eq!(victim_closes.load(Ordering::SeqCst), 1);
    assert!(rt.send(victim_pid, 2).is_err());
    // Everyone else runs on.
    rt.send(bystander, 5).unwrap();
    assert_eq!(echo_rx.recv().unwrap(), 5);
    let report = rt.shutdown(GRACE);
    assert!(report.forced.is_empty());
    assert_eq!(report.metrics.panicked, 1);
    assert_eq!(report.metrics.failed, 1);
    assert_eq!(report.metrics.closed, 4);
}

#[test]
fn a_failed_step_closes_the_process_and_tells_its_monitor() {
    let rt = ProcessRuntime::<u64>::builder().workers(1).build().unwrap();
    let failing = Script::new(|events, out: &mut StepOutput<'_, u64>| {
        if events.count() > 0 {
            out.fail("bad input")
        } else {
            out.idle()
        }
    });
    let closes = failing.closes();
    let pid = rt.spawn(failing, "main", None).unwrap();
    let (tx, rx) = mpsc::channel();
    rt.spawn(watcher(pid, false, tx), "main", None).unwrap();
    while rt.metrics().steps < 2 {
        std::thread::yield_now();
    }
    rt.send(pid, 0).unwrap();
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(20)).unwrap(),
        (
            pid,
            Relation::Monitor,
            ExitReason::Failed("bad input".into())
        )
    );
    assert_eq!(closes.load(Ordering::SeqCst), 1);
    rt.shutdown(GRACE);
}

#[test]
fn linking_to_an_ended_pid_reports_at_once() {
    let rt = ProcessRuntime::<u64>::builder().workers(1).build().unwrap();
    let gone = Script::new(|_e, out: &mut StepOutput<'_, u64>| out.complete(None));
    let c = gone.closes();
    let dead = rt.spawn(gone, "main", None).unwrap();
    process_support::wait_until("close", || c.load(Ordering::SeqCst) == 1);
    let (tx, rx) = mpsc::channel();
    rt.spawn(watcher(dead, true, tx), "main", None).unwrap();
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(20)).unwrap(),
        (dead, Relation::Link, ExitReason::NoProcess)
    );
    rt.shutdown(GRACE);
}
