//! Yielded commands: sleep, custom handlers, calls, child spawns, and the
//! completion handle's rules.

mod process_support;

use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::Duration;

use magpie_runtime::process::{
    Command, CommandError, CompleteError, Completer, Event, ExitReason, Outcome, Pid,
    ProcessRuntime, Relation, StepOutput,
};
use process_support::{wait_until, Script, GRACE};

/// What the test processes report.
#[derive(Debug, PartialEq)]
enum Seen {
    Done(u64),
    Err(u64, CommandError),
    Reply(u64, u64),
    Spawned(u64),
    Value(u64, u64),
    Exit(Relation, ExitReason, Option<u64>),
}

fn report(tx: &mpsc::Sender<Seen>, ev: Event<u64>) {
    match ev {
        Event::Completion { tag, result } => {
            let seen = match result {
                Ok(Outcome::Done) => Seen::Done(tag),
                Ok(Outcome::Reply(r)) => Seen::Reply(tag, r),
                Ok(Outcome::Spawned(_)) => Seen::Spawned(tag),
                Ok(Outcome::Value(v)) => Seen::Value(tag, *v.downcast::<u64>().unwrap()),
                Err(e) => Seen::Err(tag, e),
            };
            tx.send(seen).unwrap();
        }
        Event::Exit(n) => tx.send(Seen::Exit(n.relation, n.reason, n.value)).unwrap(),
        _ => {}
    }
}

fn rt() -> ProcessRuntime<u64> {
    ProcessRuntime::builder().workers(2).build().unwrap()
}

/// Yields `commands` in its first step, then reports every event; ends on
/// Cancel.
fn yielder(tx: mpsc::Sender<Seen>, commands: Vec<(u64, Command<u64>)>) -> Script<u64> {
    let mut commands = Some(commands);
    Script::new(move |events, out: &mut StepOutput<'_, u64>| {
        if let Some(cmds) = commands.take() {
            for (tag, c) in cmds {
                out.yield_command(tag, c);
            }
            return out.block();
        }
        for ev in events {
            if matches!(ev, Event::Cancel) {
                return out.complete(None);
            }
            report(&tx, ev);
        }
        out.block();
    })
}

#[test]
fn sleep_completes_once_with_its_tag() {
    let rt = rt();
    let (tx, rx) = mpsc::channel();
    rt.spawn(
        yielder(
            tx,
            vec![
                (2, Command::Sleep(Duration::from_millis(20))),
                (1, Command::Sleep(Duration::from_millis(1))),
            ],
        ),
        "main",
        None,
    )
    .unwrap();
    let a = rx.recv_timeout(Duration::from_secs(20)).unwrap();
    let b = rx.recv_timeout(Duration::from_secs(20)).unwrap();
    assert_eq!((a, b), (Seen::Done(1), Seen::Done(2)));
    assert!(rx.recv_timeout(Duration::from_millis(50)).is_err());
    rt.shutdown(GRACE);
}

#[test]
fn custom_handler_completes_from_another_thread() {
    let rt = ProcessRuntime::<u64>::builder()
        .workers(2)
        .handler("double", |req| {
            std::thread::spawn(move || {
                let v = req.input * 2;
                req.completer
                    .complete(req.pid, req.tag, Ok(Outcome::Value(Box::new(v))))
                    .unwrap();
            });
        })
        .build()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let cmd = |n| Command::Custom {
        kind: "double".into(),
        input: n,
    };
    rt.spawn(
        yielder(tx, vec![(10, cmd(21)), (11, cmd(50))]),
        "main",
        None,
    )
    .unwrap();
    let mut got = vec![rx.recv().unwrap(), rx.recv().unwrap()];
    got.sort_by_key(|s| format!("{s:?}"));
    assert_eq!(got, vec![Seen::Value(10, 42), Seen::Value(11, 100)]);
    rt.shutdown(GRACE);
}

#[test]
fn a_second_completion_of_the_same_tag_is_an_error_not_an_event() {
    let kept: &'static Mutex<Option<(Completer<u64>, Pid, u64)>> =
        Box::leak(Box::new(Mutex::new(None)));
    let rt = ProcessRuntime::<u64>::builder()
        .workers(1)
        .handler("keep", move |req| {
            *kept.lock().unwrap() = Some((req.completer, req.pid, req.tag));
        })
        .build()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let cmd = Command::Custom {
        kind: "keep".into(),
        input: 0,
    };
    rt.spawn(yielder(tx, vec![(5, cmd)]), "main", None).unwrap();
    wait_until("the handler", || kept.lock().unwrap().is_some());
    let (c, pid, tag) = kept.lock().unwrap().take().unwrap();
    assert_eq!(c.complete(pid, tag, Ok(Outcome::Done)), Ok(()));
    assert_eq!(
        c.complete(pid, tag, Ok(Outcome::Done)),
        Err(CompleteError::NotPending)
    );
    assert_eq!(
        c.complete(pid, 999, Ok(Outcome::Done)),
        Err(CompleteError::NotPending)
    );
    assert_eq!(rx.recv().unwrap(), Seen::Done(5));
    assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
    rt.shutdown(GRACE);
    assert_eq!(
        c.complete(pid, tag, Ok(Outcome::Done)),
        Err(CompleteError::NoProcess)
    );
}

#[test]
fn duplicate_pending_tag_and_unknown_kind_complete_with_errors() {
    let rt = rt();
    let (tx, rx) = mpsc::channel();
    rt.spawn(
        yielder(
            tx,
            vec![
                (1, Command::Sleep(Duration::from_millis(5))),
                (1, Command::Sleep(Duration::from_millis(5))),
                (
                    2,
                    Command::Custom {
                        kind: "nope".into(),
                        input: 0,
                    },
                ),
            ],
        ),
        "main",
        None,
    )
    .unwrap();
    let mut got: Vec<Seen> = (0..3).map(|_| rx.recv().unwrap()).collect();
    got.sort_by_key(|s| format!("{s:?}"));
    assert_eq!(
        got,
        vec![
            Seen::Done(1),
            Seen::Err(1, CommandError::DuplicateTag),
            Seen::Err(2, CommandError::UnknownKind("nope".into())),
        ]
    );
    rt.shutdown(GRACE);
}

/// Answers every call with the request plus 1000; ends on Cancel.
fn server() -> Script<u64> {
    Script::new(|events, out: &mut StepOutput<'_, u64>| {
        for ev in events {
            match ev {
                Event::Message {
                    msg,
                    reply: Some(r),
                    ..
                } => r.reply(msg + 1000).unwrap(),
                Event::Cancel => return out.complete(None),
                _ => {}
            }
        }
        out.idle();
    })
}

#[test]
fn call_gets_its_reply_matched_by_tag() {
    let rt = rt();
    let srv = rt.spawn(server(), "main", None).unwrap();
    let (tx, rx) = mpsc::channel();
    rt.spawn(
        yielder(
            tx,
            vec![
                (7, Command::Call { to: srv, msg: 1 }),
                (8, Command::Call { to: srv, msg: 2 }),
            ],
        ),
        "main",
        None,
    )
    .unwrap();
    let mut got = vec![rx.recv().unwrap(), rx.recv().unwrap()];
    got.sort_by_key(|s| format!("{s:?}"));
    assert_eq!(got, vec![Seen::Reply(7, 1001), Seen::Reply(8, 1002)]);
    rt.shutdown(GRACE);
}

#[test]
fn call_to_an_exited_pid_fails_at_once() {
    let rt = rt();
    let gone = Script::new(|_e, out: &mut StepOutput<'_, u64>| out.complete(None));
    let c = gone.closes();
    let dead = rt.spawn(gone, "main", None).unwrap();
    wait_until("the callee to close", || c.load(Ordering::SeqCst) == 1);
    let (tx, rx) = mpsc::channel();
    rt.spawn(
        yielder(tx, vec![(3, Command::Call { to: dead, msg: 0 })]),
        "main",
        None,
    )
    .unwrap();
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(20)).unwrap(),
        Seen::Err(3, CommandError::NoProcess)
    );
    rt.shutdown(GRACE);
}

#[test]
fn callee_that_ends_without_replying_fails_the_call() {
    let rt = rt();
    // Takes the request and completes without answering it.
    let rude = Script::new(|events, out: &mut StepOutput<'_, u64>| {
        let got_call = events
            .into_iter()
            .any(|e| matches!(e, Event::Message { .. }));
        if got_call {
            out.complete(None)
        } else {
            out.idle()
        }
    });
    let srv = rt.spawn(rude, "main", None).unwrap();
    let (tx, rx) = mpsc::channel();
    rt.spawn(
        yielder(tx, vec![(4, Command::Call { to: srv, msg: 0 })]),
        "main",
        None,
    )
    .unwrap();
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(20)).unwrap(),
        Seen::Err(4, CommandError::NoReply)
    );
    rt.shutdown(GRACE);
}

#[test]
fn spawned_child_reports_its_pid_and_its_exit_value_to_the_parent() {
    let rt = rt();
    let (tx, rx) = mpsc::channel();
    let child = Script::new(|_e, out: &mut StepOutput<'_, u64>| out.complete(Some(77)));
    rt.spawn(
        yielder(
            tx,
            vec![(
                9,
                Command::Spawn {
                    process: Box::new(child),
                    method: "main".into(),
                    input: None,
                    mailbox_bound: None,
                },
            )],
        ),
        "main",
        None,
    )
    .unwrap();
    let mut got = vec![rx.recv().unwrap(), rx.recv().unwrap()];
    got.sort_by_key(|s| format!("{s:?}"));
    assert_eq!(
        got,
        vec![
            Seen::Exit(Relation::Child, ExitReason::Completed, Some(77)),
            Seen::Spawned(9),
        ]
    );
    rt.shutdown(GRACE);
}
