//! `future_handler`: a custom command run as a future on the async runtime,
//! completing the process's yield with its output, and with an error when the
//! future panics or its runtime drops it.

mod process_support;

use std::sync::mpsc;
use std::time::Duration;

use magpie_runtime::process::{
    future_handler, Command, CommandError, Event, Outcome, ProcessRuntime, StepOutput,
};
use magpie_runtime::Runtime;
use process_support::{Script, GRACE};

/// What the yielding process saw for its one command.
#[derive(Debug, PartialEq)]
enum Seen {
    Value(u64),
    Failed(String),
}

/// Yields one `kind` command with `input` in its first step, reports the
/// completion, and ends.
fn yield_once(tx: mpsc::Sender<Seen>, kind: &'static str, input: u64) -> Script<u64> {
    let mut first = true;
    Script::new(move |events, out: &mut StepOutput<'_, u64>| {
        if std::mem::take(&mut first) {
            out.yield_command(
                7,
                Command::Custom {
                    kind: kind.into(),
                    input,
                },
            );
            return out.block();
        }
        for ev in events {
            if let Event::Completion { tag: 7, result } = ev {
                let seen = match result {
                    Ok(Outcome::Value(v)) => Seen::Value(*v.downcast::<u64>().unwrap()),
                    Err(CommandError::Failed(why)) => Seen::Failed(why),
                    other => panic!("unexpected completion {other:?}"),
                };
                tx.send(seen).unwrap();
                return out.complete(None);
            }
        }
        out.block();
    })
}

fn async_rt() -> Runtime {
    Runtime::builder().worker_threads(1).build().unwrap()
}

#[test]
fn a_future_handler_completes_the_yield_with_the_futures_output() {
    let rt = async_rt();
    let processes = ProcessRuntime::<u64>::builder()
        .workers(2)
        .handler(
            "double_later",
            future_handler(rt.handle().clone(), |n: u64| async move {
                // A real wait on the async runtime's timer, not a ready future.
                magpie_runtime::time::sleep(Duration::from_millis(2)).await;
                Ok(Outcome::Value(Box::new(n * 2)))
            }),
        )
        .build()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    for n in [1u64, 21, 50] {
        processes
            .spawn(yield_once(tx.clone(), "double_later", n), "main", None)
            .unwrap();
    }
    let mut got: Vec<Seen> = (0..3)
        .map(|_| rx.recv_timeout(Duration::from_secs(20)).unwrap())
        .collect();
    got.sort_by_key(|s| format!("{s:?}"));
    assert_eq!(got, vec![Seen::Value(100), Seen::Value(2), Seen::Value(42)]);
    processes.shutdown(GRACE);
}

#[test]
fn a_panicking_future_fails_the_yield_instead_of_leaving_it_pending() {
    let rt = async_rt();
    let processes = ProcessRuntime::<u64>::builder()
        .workers(1)
        .handler(
            "boom",
            future_handler(rt.handle().clone(), |_: u64| async move {
                magpie_runtime::yield_now().await;
                panic!("handler future failed");
            }),
        )
        .build()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    processes
        .spawn(yield_once(tx, "boom", 0), "main", None)
        .unwrap();
    let seen = rx.recv_timeout(Duration::from_secs(20)).unwrap();
    assert_eq!(seen, Seen::Failed("the command's future panicked".into()));
    processes.shutdown(GRACE);
}

#[test]
fn a_future_dropped_by_its_runtimes_shutdown_fails_the_yield() {
    let rt = async_rt();
    let (started_tx, started_rx) = mpsc::channel::<()>();
    let started_tx = std::sync::Mutex::new(started_tx);
    let processes = ProcessRuntime::<u64>::builder()
        .workers(1)
        .handler(
            "forever",
            future_handler(rt.handle().clone(), move |_: u64| {
                let started = started_tx.lock().unwrap().clone();
                async move {
                    started.send(()).unwrap();
                    std::future::pending::<Result<Outcome<u64>, CommandError>>().await
                }
            }),
        )
        .build()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    processes
        .spawn(yield_once(tx, "forever", 0), "main", None)
        .unwrap();
    started_rx.recv_timeout(Duration::from_secs(20)).unwrap();
    // The async runtime goes away with the command's future still pending.
    drop(rt);
    let seen = rx.recv_timeout(Duration::from_secs(20)).unwrap();
    assert_eq!(
        seen,
        Seen::Failed("the command's future was dropped unfinished (its runtime shut down)".into())
    );
    processes.shutdown(GRACE);
}
