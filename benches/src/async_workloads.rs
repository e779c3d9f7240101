//! tokio's `rt_multi_threaded` benchmarks and skynet, written once over a
//! small runtime trait so tokio and (later) magpie run identical code.
//!
//! The workloads and their parameters follow tokio's
//! `benches/rt_multi_threaded.rs`: 10 000 spawns, 200 tasks x 1 000 yields,
//! 1 000 ping-pongs, a chain of 1 000 spawns, and `2 x workers` background
//! tasks that yield and stall 10 µs for `spawn_many_remote_busy1`. One change:
//! tokio's file uses 4 workers; here every runtime gets [`WORKERS`] (2), the
//! machine's core count.
//!
//! Synchronisation that tokio's file takes from std or tokio is replaced by
//! runtime-agnostic helpers written here: [`oneshot`] (for `tokio::sync::
//! oneshot`) and [`Countdown`] (for the `AtomicUsize` + `mpsc` "last task
//! reports done" pattern). Both runtimes pay for the same helpers.

use std::fmt;
use std::future::Future;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use magpie_core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Worker threads for every runtime.
pub const WORKERS: usize = 2;
/// Tasks spawned by the `spawn_many_*` workloads.
pub const NUM_SPAWN: usize = 10_000;
/// Yields per task in `yield_many`.
pub const NUM_YIELD: usize = 1_000;
/// Tasks in `yield_many`.
pub const YIELD_TASKS: usize = 200;
/// Ping-pong pairs in `ping_pong`.
pub const NUM_PINGS: usize = 1_000;
/// Length of the spawn chain in `chained_spawn`.
pub const CHAIN_LEN: usize = 1_000;
/// CPU time a busy background task burns between yields.
pub const STALL: Duration = Duration::from_micros(10);
/// Leaves of the skynet tree.
pub const SKYNET_LEAVES: u64 = 1_000_000;
/// Children per skynet node.
pub const SKYNET_FANOUT: u64 = 10;

/// What a workload needs from a multi-thread async runtime.
pub trait AsyncRuntime: Send + Sync + Sized + 'static {
    /// Short name for reports.
    const NAME: &'static str;
    /// Why a task did not produce its output (panicked, cancelled).
    type JoinError: fmt::Debug + Send + 'static;
    /// Awaits a spawned task's output.
    type JoinHandle<T: Send + 'static>: Future<Output = Result<T, Self::JoinError>> + Send + 'static;

    /// A runtime with `workers` worker threads.
    fn with_workers(workers: usize) -> Self;
    /// Runs `fut` to completion on the calling thread.
    fn block_on<F: Future>(&self, fut: F) -> F::Output;
    /// Spawns from outside the runtime (`rt.spawn`).
    fn spawn<F>(&self, fut: F) -> Self::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static;
    /// Spawns from inside the runtime: a task or `block_on` (`tokio::spawn`).
    fn spawn_here<F>(fut: F) -> Self::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static;
    /// Yields once to the scheduler.
    fn yield_now() -> impl Future<Output = ()> + Send;
}

/// tokio's multi-thread runtime, built as tokio's benchmark builds it
/// (`enable_all`).
pub struct TokioRt(pub tokio::runtime::Runtime);

impl fmt::Debug for TokioRt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("TokioRt").finish()
    }
}

impl AsyncRuntime for TokioRt {
    const NAME: &'static str = "tokio";
    type JoinError = tokio::task::JoinError;
    type JoinHandle<T: Send + 'static> = tokio::task::JoinHandle<T>;

    fn with_workers(workers: usize) -> Self {
        Self(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(workers)
                .enable_all()
                .build()
                .expect("failed to build the tokio runtime"),
        )
    }

    fn block_on<F: Future>(&self, fut: F) -> F::Output {
        self.0.block_on(fut)
    }

    fn spawn<F>(&self, fut: F) -> Self::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.0.spawn(fut)
    }

    fn spawn_here<F>(fut: F) -> Self::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        tokio::spawn(fut)
    }

    fn yield_now() -> impl Future<Output = ()> + Send {
        tokio::task::yield_now()
    }
}

/// magpie's async runtime.
#[derive(Debug)]
pub struct MagpieRt(magpie_runtime::Runtime);

impl AsyncRuntime for MagpieRt {
    const NAME: &'static str = "magpie";
    type JoinError = magpie_runtime::JoinError;
    type JoinHandle<T: Send + 'static> = magpie_runtime::JoinHandle<T>;

    fn with_workers(workers: usize) -> Self {
        Self(
            magpie_runtime::Runtime::builder()
                .worker_threads(workers)
                .build()
                .expect("failed to build the magpie runtime"),
        )
    }

    fn block_on<F: Future>(&self, fut: F) -> F::Output {
        self.0.block_on(fut)
    }

    fn spawn<F>(&self, fut: F) -> Self::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.0.spawn(fut)
    }

    fn spawn_here<F>(fut: F) -> Self::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        magpie_runtime::spawn(fut)
    }

    fn yield_now() -> impl Future<Output = ()> + Send {
        magpie_runtime::yield_now()
    }
}

/// A single-use channel carrying one value from one task to another.
pub mod oneshot {
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::{Arc, Mutex};
    use std::task::{Context, Poll, Waker};

    struct State<T> {
        value: Option<T>,
        waker: Option<Waker>,
        sender_gone: bool,
        receiver_gone: bool,
    }

    type Shared<T> = Arc<Mutex<State<T>>>;

    /// Sends the value.
    pub struct Sender<T>(Shared<T>);
    /// Awaits the value.
    pub struct Receiver<T>(Shared<T>);

    /// The sender was dropped without sending.
    #[derive(Debug, PartialEq, Eq)]
    pub struct RecvError;

    impl<T> std::fmt::Debug for Sender<T> {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("oneshot::Sender")
        }
    }

    impl<T> std::fmt::Debug for Receiver<T> {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("oneshot::Receiver")
        }
    }

    /// A connected sender and receiver.
    pub fn channel<T>() -> (Sender<T>, Receiver<T>) {
        let s = Arc::new(Mutex::new(State {
            value: None,
            waker: None,
            sender_gone: false,
            receiver_gone: false,
        }));
        (Sender(s.clone()), Receiver(s))
    }

    fn lock<T>(s: &Shared<T>) -> std::sync::MutexGuard<'_, State<T>> {
        s.lock().unwrap_or_else(|e| e.into_inner())
    }

    impl<T> Sender<T> {
        /// Delivers `value`, or gives it back if the receiver is gone.
        pub fn send(self, value: T) -> Result<(), T> {
            let waker = {
                let mut st = lock(&self.0);
                if st.receiver_gone {
                    return Err(value);
                }
                st.value = Some(value);
                st.waker.take()
            };
            // Wake outside the lock: the woken task may run at once.
            if let Some(w) = waker {
                w.wake();
            }
            Ok(())
        }
    }

    impl<T> Drop for Sender<T> {
        fn drop(&mut self) {
            let waker = {
                let mut st = lock(&self.0);
                st.sender_gone = true;
                st.waker.take()
            };
            if let Some(w) = waker {
                w.wake();
            }
        }
    }

    impl<T> Future for Receiver<T> {
        type Output = Result<T, RecvError>;

        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
            let mut st = lock(&self.0);
            if let Some(v) = st.value.take() {
                return Poll::Ready(Ok(v));
            }
            if st.sender_gone {
                return Poll::Ready(Err(RecvError));
            }
            match &mut st.waker {
                Some(w) if w.will_wake(cx.waker()) => {}
                slot => *slot = Some(cx.waker().clone()),
            }
            Poll::Pending
        }
    }

    impl<T> Drop for Receiver<T> {
        fn drop(&mut self) {
            lock(&self.0).receiver_gone = true;
        }
    }
}

/// Counts down from `n`; [`Countdown::wait`] blocks the calling (non-worker)
/// thread until the count reaches zero.
#[derive(Debug)]
pub struct Countdown {
    remaining: AtomicUsize,
    done: Mutex<bool>,
    cv: Condvar,
}

impl Countdown {
    /// A countdown from `n`.
    pub fn new(n: usize) -> Arc<Self> {
        Arc::new(Self {
            remaining: AtomicUsize::new(n),
            done: Mutex::new(n == 0),
            cv: Condvar::new(),
        })
    }

    /// One step down; the step that reaches zero releases the waiters.
    ///
    /// # Panics
    /// If called more than `n` times.
    pub fn count_down(&self) {
        // AcqRel: the last step acquires every earlier step's effects (the
        // decrements form a release sequence) and publishes them through the
        // mutex to `wait`.
        let prev = self.remaining.fetch_sub(1, Ordering::AcqRel);
        assert!(prev > 0, "count_down called more often than the count");
        if prev == 1 {
            *self.done.lock().unwrap_or_else(|e| e.into_inner()) = true;
            self.cv.notify_all();
        }
    }

    /// Blocks until the count is zero.
    pub fn wait(&self) {
        let mut done = self.done.lock().unwrap_or_else(|e| e.into_inner());
        while !*done {
            done = self.cv.wait(done).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Steps still to go.
    pub fn remaining(&self) -> usize {
        self.remaining.load(Ordering::Acquire)
    }
}

/// Burns [`STALL`] of CPU, yielding the thread in between, as tokio's
/// benchmark does.
pub fn stall() {
    let t0 = Instant::now();
    while t0.elapsed() < STALL {
        std::thread::yield_now();
    }
}

/// `spawn_many_local`: from inside `block_on`, spawn [`NUM_SPAWN`] empty
/// tasks; the last one to run releases the blocked caller.
pub fn spawn_many_local<R: AsyncRuntime>(rt: &R) {
    let rem = Countdown::new(NUM_SPAWN);
    rt.block_on(async {
        for _ in 0..NUM_SPAWN {
            let rem = rem.clone();
            drop(R::spawn_here(async move { rem.count_down() }));
        }
        rem.wait();
    });
}

/// `spawn_many_remote_*`: spawn [`NUM_SPAWN`] empty tasks from outside the
/// runtime, then await every handle in `block_on`. `handles` is reused
/// across iterations, as in tokio's benchmark.
pub fn spawn_many_remote<R: AsyncRuntime>(rt: &R, handles: &mut Vec<R::JoinHandle<()>>) {
    for _ in 0..NUM_SPAWN {
        handles.push(rt.spawn(async {}));
    }
    rt.block_on(async {
        for h in handles.drain(..) {
            h.await.expect("empty task failed");
        }
    });
}

/// Background load for `spawn_many_remote_busy1`: `2 x workers` tasks that
/// yield, stall [`STALL`], and repeat until stopped.
#[derive(Debug)]
pub struct Busy1<R: AsyncRuntime> {
    flag: Arc<AtomicBool>,
    handles: Vec<R::JoinHandle<()>>,
}

impl<R: AsyncRuntime> Busy1<R> {
    /// Starts the background tasks.
    pub fn start(rt: &R, workers: usize) -> Self {
        let flag = Arc::new(AtomicBool::new(true));
        let handles = (0..2 * workers)
            .map(|_| {
                let flag = flag.clone();
                rt.spawn(async move {
                    while flag.load(Ordering::Relaxed) {
                        R::yield_now().await;
                        stall();
                    }
                })
            })
            .collect();
        Self { flag, handles }
    }

    /// Stops the background tasks and waits for them to finish.
    pub fn stop(self, rt: &R) {
        self.flag.store(false, Ordering::Relaxed);
        rt.block_on(async {
            for h in self.handles {
                h.await.expect("busy task failed");
            }
        });
    }
}

/// `yield_many`: [`YIELD_TASKS`] tasks spawned from outside each yield
/// [`NUM_YIELD`] times; the caller blocks until all are done.
pub fn yield_many<R: AsyncRuntime>(rt: &R) {
    let done = Countdown::new(YIELD_TASKS);
    for _ in 0..YIELD_TASKS {
        let done = done.clone();
        drop(rt.spawn(async move {
            for _ in 0..NUM_YIELD {
                R::yield_now().await;
            }
            done.count_down();
        }));
    }
    done.wait();
}

/// `ping_pong`: one task spawns [`NUM_PINGS`] tasks; each spawns a partner
/// and they exchange a message each way over [`oneshot`] channels.
pub fn ping_pong<R: AsyncRuntime>(rt: &R) {
    let rem = Countdown::new(NUM_PINGS);
    rt.block_on(async {
        let spawner_rem = rem.clone();
        drop(R::spawn_here(async move {
            for _ in 0..NUM_PINGS {
                let rem = spawner_rem.clone();
                drop(R::spawn_here(async move {
                    let (tx1, rx1) = oneshot::channel::<()>();
                    let (tx2, rx2) = oneshot::channel::<()>();
                    drop(R::spawn_here(async move {
                        rx1.await.expect("ping lost");
                        tx2.send(()).expect("pong receiver gone");
                    }));
                    tx1.send(()).expect("ping receiver gone");
                    rx2.await.expect("pong lost");
                    rem.count_down();
                }));
            }
        }));
        rem.wait();
    });
}

fn chain<R: AsyncRuntime>(done: Arc<Countdown>, n: usize) {
    if n == 0 {
        done.count_down();
    } else {
        drop(R::spawn_here(async move { chain::<R>(done, n - 1) }));
    }
}

/// `chained_spawn`: each task spawns the next, [`CHAIN_LEN`] deep.
pub fn chained_spawn<R: AsyncRuntime>(rt: &R) {
    let done = Countdown::new(1);
    rt.block_on(async {
        let d = done.clone();
        drop(R::spawn_here(async move { chain::<R>(d, CHAIN_LEN) }));
        done.wait();
    });
}

/// One skynet node: a leaf returns its number; an inner node spawns its
/// [`SKYNET_FANOUT`] children, awaits their handles in order and sums.
// Not an `async fn`: the explicit `+ Send` in the signature is what lets the
// node spawn copies of itself; with an `async fn` the compiler would have to
// prove the future `Send` while still inferring it (E0283).
#[allow(clippy::manual_async_fn)]
pub fn skynet_node<R: AsyncRuntime>(num: u64, size: u64) -> impl Future<Output = u64> + Send {
    async move {
        if size == 1 {
            return num;
        }
        let sub = size / SKYNET_FANOUT;
        let mut children = Vec::with_capacity(SKYNET_FANOUT as usize);
        for i in 0..SKYNET_FANOUT {
            children.push(R::spawn_here(skynet_node::<R>(num + i * sub, sub)));
        }
        let mut sum = 0;
        for c in children {
            sum += c.await.expect("skynet child failed");
        }
        sum
    }
}

/// Skynet over `leaves` leaves (a power of [`SKYNET_FANOUT`]); returns the
/// sum of `0..leaves`, which proves every leaf ran exactly once.
pub fn skynet<R: AsyncRuntime>(rt: &R, leaves: u64) -> u64 {
    rt.block_on(async move {
        R::spawn_here(skynet_node::<R>(0, leaves))
            .await
            .expect("skynet root failed")
    })
}

/// Runs skynet with [`SKYNET_LEAVES`] leaves once on a fresh `R` with
/// `workers` workers; returns the sum and the time `skynet` took (runtime
/// start-up excluded).
pub fn skynet_once<R: AsyncRuntime>(workers: usize) -> (u64, Duration) {
    let rt = R::with_workers(workers);
    let t0 = Instant::now();
    let sum = skynet(&rt, SKYNET_LEAVES);
    (sum, t0.elapsed())
}

/// The workloads [`time_workload`] knows, in the order the benches run them.
pub const WORKLOADS: [&str; 7] = [
    "spawn_many_local",
    "spawn_many_remote_idle",
    "spawn_many_remote_busy1",
    "ping_pong",
    "yield_many",
    "chained_spawn",
    "skynet",
];

/// Timed iterations per `spawn_many_remote_busy1` turn (after one untimed).
pub const BUSY1_BLOCK: u32 = 5;

/// One alternating turn of `workload` on `rt`: the time of one iteration.
///
/// For `spawn_many_remote_busy1` the background load starts before the turn
/// and stops after it, so it never loads the other runtime's turn. As in
/// tokio's bench, the measured spawns run against a load that is already
/// running: the turn runs one untimed iteration first and returns the mean
/// of the next [`BUSY1_BLOCK`].
pub fn time_workload<R: AsyncRuntime>(
    rt: &R,
    workload: &str,
    handles: &mut Vec<R::JoinHandle<()>>,
    skynet_leaves: u64,
) -> Duration {
    if workload == "spawn_many_remote_busy1" {
        let busy = Busy1::start(rt, WORKERS);
        spawn_many_remote(rt, handles);
        let t0 = Instant::now();
        for _ in 0..BUSY1_BLOCK {
            spawn_many_remote(rt, handles);
        }
        let t = t0.elapsed() / BUSY1_BLOCK;
        busy.stop(rt);
        return t;
    }
    let t0 = Instant::now();
    match workload {
        "spawn_many_local" => spawn_many_local(rt),
        "spawn_many_remote_idle" => spawn_many_remote(rt, handles),
        "ping_pong" => ping_pong(rt),
        "yield_many" => yield_many(rt),
        "chained_spawn" => chained_spawn(rt),
        "skynet" => {
            let expected = skynet_leaves * (skynet_leaves - 1) / 2;
            assert_eq!(skynet(rt, skynet_leaves), expected, "skynet/{}", R::NAME);
        }
        other => unreachable!("unknown workload {other}"),
    }
    t0.elapsed()
}

/// Tasks skynet spawns for `leaves` leaves (every node, root included).
pub fn skynet_tasks(leaves: u64) -> u64 {
    let mut total = 0;
    let mut level = 1;
    while level <= leaves {
        total += level;
        level *= SKYNET_FANOUT;
    }
    total
}

#[cfg(all(test, not(miri)))]
mod tests {
    use super::*;
    use std::thread;

    #[test]
    fn oneshot_delivers_across_threads_and_wakes_the_receiver() {
        let rt = TokioRt::with_workers(WORKERS);
        for _ in 0..200 {
            let (tx, rx) = oneshot::channel();
            let h = rt.spawn(rx);
            thread::yield_now();
            tx.send(7u32).unwrap();
            assert_eq!(rt.block_on(h).unwrap(), Ok(7));
        }
    }

    #[test]
    fn oneshot_receiver_sees_a_dropped_sender() {
        let rt = TokioRt::with_workers(1);
        let (tx, rx) = oneshot::channel::<u8>();
        let h = rt.spawn(rx);
        drop(tx);
        assert_eq!(rt.block_on(h).unwrap(), Err(oneshot::RecvError));
    }

    #[test]
    fn oneshot_send_to_a_dropped_receiver_returns_the_value() {
        let (tx, rx) = oneshot::channel::<String>();
        drop(rx);
        assert_eq!(tx.send("x".into()), Err("x".to_string()));
    }

    #[test]
    fn countdown_releases_the_waiter_only_at_zero() {
        let cd = Countdown::new(4);
        let hs: Vec<_> = (0..4)
            .map(|_| {
                let cd = cd.clone();
                thread::spawn(move || cd.count_down())
            })
            .collect();
        cd.wait();
        assert_eq!(cd.remaining(), 0);
        hs.into_iter().for_each(|h| h.join().unwrap());
    }

    #[test]
    #[should_panic(expected = "more often than the count")]
    fn countdown_rejects_an_extra_step() {
        let cd = Countdown::new(1);
        cd.count_down();
        cd.count_down();
    }

    #[test]
    fn skynet_sums_every_leaf_once() {
        let rt = TokioRt::with_workers(WORKERS);
        for leaves in [1u64, 10, 10_000] {
            let expected = leaves * (leaves - 1) / 2;
            assert_eq!(skynet(&rt, leaves), expected, "{leaves} leaves");
        }
        assert_eq!(skynet_tasks(1_000_000), 1_111_111);
    }

    #[test]
    fn tokio_runs_every_rt_multi_threaded_workload_to_completion() {
        let rt = TokioRt::with_workers(WORKERS);
        spawn_many_local(&rt);
        let mut handles = Vec::new();
        spawn_many_remote(&rt, &mut handles);
        assert!(handles.is_empty());
        let busy = Busy1::start(&rt, WORKERS);
        spawn_many_remote(&rt, &mut handles);
        busy.stop(&rt);
        yield_many(&rt);
        ping_pong(&rt);
        chained_spawn(&rt);
    }
}
