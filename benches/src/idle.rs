//! How much CPU an idle pool burns: start it, let it run a burst of tasks so
//! every worker has been busy, let it settle, then measure the process's CPU
//! time over a window while nothing is submitted.

use std::io;
use std::thread;
use std::time::{Duration, Instant};

use crate::async_workloads::{AsyncRuntime, Countdown};
use crate::cb_executor::{CbConfig, CbExecutor, CbWorkerCtx};
use crate::cb_strong::{CbStrongConfig, CbStrongCtx, CbStrongExecutor};
use crate::proc_stats::{cpu_time_schedstat, cpu_time_stat};

/// Tasks in the warm-up burst.
const BURST: usize = 10_000;
/// Pause between the burst and the window, so spinning phases end.
const SETTLE: Duration = Duration::from_millis(100);

/// CPU time used during an idle window.
#[derive(Clone, Copy, Debug)]
pub struct IdleCpu {
    /// Wall-clock length of the window.
    pub wall: Duration,
    /// `utime + stime` delta from `/proc/self/stat` (10 ms resolution).
    pub stat_cpu: Duration,
    /// On-CPU delta summed over `/proc/self/task/*/schedstat` (ns resolution).
    pub sched_cpu: Duration,
}

impl IdleCpu {
    /// CPU time as a percentage of one core over the window (schedstat).
    pub fn percent_of_core(&self) -> f64 {
        100.0 * self.sched_cpu.as_secs_f64() / self.wall.as_secs_f64()
    }

    /// The same from `/proc/self/stat` (coarse).
    pub fn stat_percent_of_core(&self) -> f64 {
        100.0 * self.stat_cpu.as_secs_f64() / self.wall.as_secs_f64()
    }
}

/// Measures this process's CPU time over `window` of sleeping on the
/// calling thread.
pub fn measure_window(window: Duration) -> io::Result<IdleCpu> {
    let (stat0, sched0) = (cpu_time_stat()?, cpu_time_schedstat()?);
    let t0 = Instant::now();
    thread::sleep(window);
    let wall = t0.elapsed();
    let (stat1, sched1) = (cpu_time_stat()?, cpu_time_schedstat()?);
    Ok(IdleCpu {
        wall,
        stat_cpu: stat1.saturating_sub(stat0),
        sched_cpu: sched1.saturating_sub(sched0),
    })
}

/// The seed-000 crossbeam executor with `workers` workers, idle.
pub fn idle_cb(workers: usize, window: Duration) -> io::Result<IdleCpu> {
    let done = Countdown::new(BURST);
    let d = done.clone();
    let ex = CbExecutor::new(
        CbConfig::with_workers(workers),
        |_| (),
        move |_: u32, _: &mut CbWorkerCtx<u32, ()>| d.count_down(),
    );
    ex.spawn_external_batch((0..BURST as u32).collect())
        .expect("executor is open");
    done.wait();
    thread::sleep(SETTLE);
    let idle = measure_window(window);
    ex.join();
    idle
}

/// The strong crossbeam-deque peer with `workers` workers, idle after a
/// burst.
pub fn idle_cb_strong(workers: usize, window: Duration) -> io::Result<IdleCpu> {
    let done = Countdown::new(BURST);
    let d = done.clone();
    let ex = CbStrongExecutor::new(
        CbStrongConfig::with_workers(workers),
        |_| (),
        move |_: u32, _: &mut CbStrongCtx<u32, ()>| d.count_down(),
    );
    ex.spawn_external_batch((0..BURST as u32).collect())
        .expect("executor is open");
    done.wait();
    thread::sleep(SETTLE);
    let idle = measure_window(window);
    ex.join();
    idle
}

/// magpie's typed executor with `workers` workers, idle after a burst.
pub fn idle_magpie(workers: usize, window: Duration) -> io::Result<IdleCpu> {
    let done = Countdown::new(BURST);
    let d = done.clone();
    let cfg = magpie_runtime::ExecutorConfig {
        workers,
        pin_threads: false,
        ..magpie_runtime::ExecutorConfig::default()
    };
    let ex = magpie_runtime::Executor::new(
        cfg,
        |_| (),
        move |_: u32, _: &mut magpie_runtime::WorkerCtx<u32, ()>| d.count_down(),
    );
    ex.spawn_external_batch((0..BURST as u32).collect())
        .expect("executor is open");
    done.wait();
    thread::sleep(SETTLE);
    let idle = measure_window(window);
    ex.join();
    idle
}

/// An async runtime (`TokioRt`, `MagpieRt`) with `workers` workers, idle
/// after a burst.
pub fn idle_async<R: AsyncRuntime>(workers: usize, window: Duration) -> io::Result<IdleCpu> {
    let rt = R::with_workers(workers);
    let done = Countdown::new(BURST);
    for _ in 0..BURST {
        let d = done.clone();
        drop(rt.spawn(async move { d.count_down() }));
    }
    done.wait();
    thread::sleep(SETTLE);
    measure_window(window)
}
