//! Admission throughput (issue 16): empty invocations submitted one at a
//! time from one outside thread through a 2-wide thread-pool lane, until all
//! have run. Peers in the same process, alternating by round: a mutex +
//! condvar pool of 2 threads (a stand-in for the crossbeam-channel
//! pool, which is not a dependency here) and tokio `spawn` on 2 workers.
//!
//! `cargo run --release -p magpie-benches --example lanes_admission [rounds] [jobs]`
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use magpie_core::sync::atomic::{AtomicU64, Ordering};
use magpie_runtime::lanes::{Job, PoolLane, Priority, ThreadPoolSpec};
use magpie_runtime::Runtime;

const WORKERS: usize = 2;

fn lane(pool: &PoolLane, n: u64) -> Duration {
    let done = Arc::new(AtomicU64::new(0));
    let t = Instant::now();
    for i in 0..n {
        let d = done.clone();
        let _ = pool.submit(Job {
            component: (i % 8) as usize,
            index: 0,
            priority: Priority::Normal,
            reentrant: true,
            run: Box::new(move |_| {
                d.fetch_add(1, Ordering::Relaxed);
                None
            }),
        });
    }
    pool.wait_idle();
    let el = t.elapsed();
    assert_eq!(done.load(Ordering::Relaxed), n);
    el
}

type Task = Box<dyn FnOnce() + Send>;

/// (queue, running, closed), "work arrived", "all done".
type Shared = Arc<(Mutex<(VecDeque<Task>, usize, bool)>, Condvar, Condvar)>;

struct MutexPool {
    q: Shared,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl MutexPool {
    fn new() -> MutexPool {
        let q: Shared = Arc::default();
        let threads = (0..WORKERS)
            .map(|_| {
                let q = q.clone();
                std::thread::spawn(move || loop {
                    let task = {
                        let mut s = q.0.lock().unwrap();
                        loop {
                            if let Some(t) = s.0.pop_front() {
                                s.1 += 1;
                                break t;
                            }
                            if s.2 {
                                return;
                            }
                            s = q.1.wait(s).unwrap();
                        }
                    };
                    task();
                    let mut s = q.0.lock().unwrap();
                    s.1 -= 1;
                    if s.1 == 0 && s.0.is_empty() {
                        q.2.notify_all();
                    }
                })
            })
            .collect();
        MutexPool { q, threads }
    }

    fn run(&self, n: u64) -> Duration {
        let done = Arc::new(AtomicU64::new(0));
        let t = Instant::now();
        for _ in 0..n {
            let d = done.clone();
            self.q.0.lock().unwrap().0.push_back(Box::new(move || {
                d.fetch_add(1, Ordering::Relaxed);
            }));
            self.q.1.notify_one();
        }
        let mut s = self.q.0.lock().unwrap();
        while s.1 > 0 || !s.0.is_empty() {
            s = self.q.2.wait(s).unwrap();
        }
        drop(s);
        let el = t.elapsed();
        assert_eq!(done.load(Ordering::Relaxed), n);
        el
    }
}

impl Drop for MutexPool {
    fn drop(&mut self) {
        self.q.0.lock().unwrap().2 = true;
        self.q.1.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn tokio_spawn(rt: &tokio::runtime::Runtime, n: u64) -> Duration {
    let done = Arc::new(AtomicU64::new(0));
    let t = Instant::now();
    for _ in 0..n {
        let d = done.clone();
        drop(rt.spawn(async move {
            d.fetch_add(1, Ordering::Relaxed);
        }));
    }
    while done.load(Ordering::Relaxed) < n {
        std::thread::yield_now();
    }
    t.elapsed()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(3);
    let n: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let rt = Runtime::builder().worker_threads(WORKERS).build().unwrap();
    let pool = PoolLane::new(
        &ThreadPoolSpec {
            max_threads: WORKERS,
            ..ThreadPoolSpec::default()
        },
        rt.handle().clone(),
    );
    let mp = MutexPool::new();
    let trt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .build()
        .unwrap();
    println!(
        "admission throughput: {n} empty invocations from one outside thread, {WORKERS} wide, M/s"
    );
    let names = ["magpie-lane", "mutex-pool", "tokio-spawn"];
    let mut rates = vec![Vec::new(); 3];
    for r in 0..rounds {
        for k in 0..3 {
            let i = (k + r) % 3;
            let el = match i {
                0 => lane(&pool, n),
                1 => mp.run(n),
                _ => tokio_spawn(&trt, n),
            };
            let rate = n as f64 / el.as_secs_f64() / 1e6;
            println!("{:<12} round {r}: {rate:.2}", names[i]);
            rates[i].push(rate);
        }
    }
    for (i, v) in rates.iter_mut().enumerate() {
        v.sort_by(f64::total_cmp);
        println!("median {:<12} {:.2} M/s", names[i], v[v.len() / 2]);
    }
}
