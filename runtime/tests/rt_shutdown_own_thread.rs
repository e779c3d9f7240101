//! Dropping or shutting a runtime down from one of its own threads is
//! refused with a clear panic (it would wait for itself), and the runtime
//! still stops in the background; `shutdown_background` is allowed there.
#![cfg(not(loom))]

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use magpie_runtime::{JoinHandle, Runtime};

/// Hang guard: the longest a test waits for something that must happen.
const GUARD: Duration = Duration::from_secs(60);

fn rt(workers: usize) -> Runtime {
    Runtime::builder().worker_threads(workers).build().unwrap()
}

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// Waits (bounded) until `handle` is finished.
fn wait_finished<T>(handle: &JoinHandle<T>) {
    for _ in 0..60_000 {
        if handle.is_finished() {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    panic!("the task never finished");
}

/// Runs `op` on the runtime inside one of its tasks, with the runtime moved
/// in, and returns the panic message it raised (empty: no panic).
fn inside_a_task(rt: Runtime, op: fn(Runtime)) -> (String, JoinHandle<()>) {
    let forever = rt.spawn(std::future::pending::<()>());
    let slot = Arc::new(Mutex::new(Some(rt)));
    let (tx, rx) = mpsc::channel();
    let handle = slot.lock().unwrap().as_ref().unwrap().handle().clone();
    let slot2 = slot.clone();
    drop(handle.spawn(async move {
        let rt = slot2.lock().unwrap().take().unwrap();
        let result = catch_unwind(AssertUnwindSafe(|| op(rt)));
        let _ = tx.send(result.err().map(panic_message).unwrap_or_default());
    }));
    let msg = rx.recv_timeout(GUARD).expect("the task ran");
    (msg, forever)
}

#[test]
fn dropping_the_runtime_inside_its_own_task_is_refused_and_it_still_stops() {
    let (msg, forever) = inside_a_task(rt(2), drop);
    assert!(
        msg.contains("cannot be dropped or shut down from one of its own threads"),
        "unexpected message: {msg:?}"
    );
    // The refusal started a background shutdown: the never-ending task is
    // cancelled and its joiner released (the bug: it hung forever).
    wait_finished(&forever);
}

#[test]
fn shutdown_timeout_inside_its_own_task_is_refused() {
    let (msg, forever) = inside_a_task(rt(2), |rt| rt.shutdown_timeout(Duration::from_secs(1)));
    assert!(msg.contains("from one of its own threads"), "{msg:?}");
    wait_finished(&forever);
}

#[test]
fn shutdown_background_inside_its_own_task_is_allowed_and_stops_the_runtime() {
    let (msg, forever) = inside_a_task(rt(1), Runtime::shutdown_background);
    assert_eq!(msg, "", "shutdown_background must not panic");
    wait_finished(&forever);
}

#[test]
fn dropping_the_runtime_in_a_blocking_closure_is_refused() {
    let rt = rt(1);
    let handle = rt.handle().clone();
    let slot = Arc::new(Mutex::new(Some(rt)));
    let (tx, rx) = mpsc::channel();
    drop(handle.spawn_blocking(move || {
        let rt = slot.lock().unwrap().take().unwrap();
        let result = catch_unwind(AssertUnwindSafe(|| drop(rt)));
        let _ = tx.send(result.err().map(panic_message).unwrap_or_default());
    }));
    let msg = rx.recv_timeout(GUARD).expect("the closure ran");
    assert!(msg.contains("from one of its own threads"), "{msg:?}");
}

#[test]
fn dropping_a_runtime_from_another_runtimes_task_is_allowed() {
    let outer = rt(1);
    let inner = rt(1);
    let done = outer.block_on(async move {
        magpie_runtime::spawn(async move {
            drop(inner); // blocks this worker while `inner` stops: allowed
            true
        })
        .await
    });
    assert!(done.unwrap());
}
