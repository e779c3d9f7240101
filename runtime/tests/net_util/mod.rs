//! Shared by the `net_*` tests: a watchdog that turns a hang into a test
//! failure, and small polling helpers.
#![allow(dead_code)] // each test file uses a different part

use std::future::Future;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::task::{Context, Poll};
use std::thread;
use std::time::{Duration, Instant};

use futures_util::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use magpie_runtime::Runtime;

/// How long a test may run before the watchdog calls it a hang. Not a speed
/// claim: it only bounds every loop in time, far above a loaded run.
pub const HANG: Duration = Duration::from_secs(120);

pub fn rt(workers: usize) -> Runtime {
    Runtime::builder().worker_threads(workers).build().unwrap()
}

/// Runs `f` on a thread and returns its result, failing the test if it has
/// not returned within `HANG` (a hang) and re-raising its panic.
pub fn watchdog<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let t = thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(HANG) {
        Ok(v) => {
            t.join().unwrap();
            v
        }
        Err(RecvTimeoutError::Timeout) => panic!("{what}: no result within {HANG:?} (a hang)"),
        Err(RecvTimeoutError::Disconnected) => match t.join() {
            Err(p) => std::panic::resume_unwind(p),
            Ok(()) => unreachable!("the thread sends before it ends"),
        },
    }
}

/// Waits (bounded by `HANG`, polling every millisecond) until `cond` holds.
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < HANG, "{what}: never happened");
        thread::sleep(Duration::from_millis(1));
    }
}

/// Polls `fut` once with the task's own waker.
pub async fn poll_once<F: Future>(fut: F) -> Poll<F::Output> {
    let mut fut = std::pin::pin!(fut);
    std::future::poll_fn(|cx: &mut Context<'_>| Poll::Ready(fut.as_mut().poll(cx))).await
}

/// The bytes of message `m` on connection `c`: its length and content
/// depend on both, so a byte crossed between connections or messages shows.
pub fn message(c: usize, m: usize) -> Vec<u8> {
    let len = 1 + (c * 31 + m * 17) % 200;
    (0..len).map(|i| (c * 7 + m * 13 + i) as u8).collect()
}

/// Echoes every byte back until the peer closes.
pub async fn echo_server_side<S: AsyncRead + AsyncWrite + Unpin>(mut s: S) {
    let mut buf = [0u8; 1024];
    loop {
        let n = s.read(&mut buf).await.unwrap();
        if n == 0 {
            return;
        }
        s.write_all(&buf[..n]).await.unwrap();
    }
}

/// Sends `messages` messages of connection `c` one at a time, checks each
/// echo byte for byte, and returns the bytes checked.
pub async fn echo_client_side<S: AsyncRead + AsyncWrite + Unpin>(
    mut s: S,
    c: usize,
    messages: usize,
) -> usize {
    let mut checked = 0;
    for m in 0..messages {
        let msg = message(c, m);
        s.write_all(&msg).await.unwrap();
        let mut back = vec![0u8; msg.len()];
        s.read_exact(&mut back).await.unwrap();
        assert_eq!(back, msg, "connection {c}, message {m}");
        checked += back.len();
    }
    checked
}

/// The bytes `connections` × `messages` echo clients check in all.
pub fn echo_bytes(connections: usize, messages: usize) -> usize {
    (0..connections)
        .flat_map(|c| (0..messages).map(move |m| message(c, m).len()))
        .sum()
}
