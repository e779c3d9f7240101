//! CPU cost of an idle wall-clock fixed-rate lane (issue 16's target: at most
//! 5% of one core for a 1 kHz lane with an empty body): CPU time of the
//! whole process (runtime workers and the runner thread) per second of wall
//! time, for `secs` seconds, next to a thread sleeping until each deadline.
//!
//! `cargo run --release -p magpie-benches --example lanes_idle_cpu [hz] [secs]`
//! (`LANE_SPIN_ITERS=n`: the lane workers' idle spin, an experiment knob)
use std::time::{Duration, Instant};

use magpie_benches::proc_stats::cpu_time_schedstat;
use magpie_runtime::lanes::{
    self, Component, ComponentError, Execution, FixedRateSpec, GraphBuilder, GraphContext,
    Invocation, LaneRuntime, LaneSpec, RunOptions,
};

struct Empty;

impl Component for Empty {
    fn execute(&mut self, _: &Invocation, _: &mut GraphContext) -> Result<(), ComponentError> {
        Ok(())
    }
}

/// CPU time per wall second of `f`, in percent of one core.
fn cpu_share(f: impl FnOnce()) -> f64 {
    let (c0, t0) = (cpu_time_schedstat().unwrap(), Instant::now());
    f();
    let (c1, wall) = (cpu_time_schedstat().unwrap(), t0.elapsed());
    (c1.saturating_sub(c0)).as_secs_f64() / wall.as_secs_f64() * 100.0
}

fn main() {
    let mut args = std::env::args().skip(1);
    let hz: f64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1_000.0);
    let secs: f64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(3.0);
    let period = Duration::from_secs_f64(1.0 / hz);
    let ticks = (secs * hz) as u64;
    // `LANE_SPIN_ITERS`: empty rounds an idle lane worker spins before it
    // yields and parks (an experiment knob; default the builder's).
    let mut builder = LaneRuntime::builder().workers(2);
    if let Some(n) = std::env::var("LANE_SPIN_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        builder = builder.spin_iters(n);
    }
    let rt = builder.build().unwrap();
    std::thread::sleep(Duration::from_millis(200)); // let the workers park
    let idle = cpu_share(|| std::thread::sleep(Duration::from_secs_f64(secs)));
    let lane = cpu_share(|| {
        let mut g = GraphBuilder::new();
        let spec = FixedRateSpec {
            wall_clock: true,
            max_ticks: Some(ticks),
            ..FixedRateSpec::every(period)
        };
        g.lane(LaneSpec::fixed_rate("c", spec)).unwrap();
        g.component("empty", "c", Execution::default(), || Empty)
            .unwrap();
        let opts = RunOptions {
            trace: false,
            ..RunOptions::default()
        };
        let r = lanes::run(g.build().unwrap(), &rt, opts);
        assert_eq!(r.metrics.tick_count, ticks);
    });
    let thread = cpu_share(|| {
        let start = Instant::now();
        for k in 0..ticks {
            let due = start + period.mul_f64(k as f64);
            if let Some(d) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(d);
            }
        }
    });
    println!("CPU per wall second, % of one core, {hz} Hz for {secs} s (process-wide):");
    println!("  idle runtime, no lane      {idle:6.2}");
    println!("  magpie fixed_rate lane     {lane:6.2}");
    println!("  sleeping thread            {thread:6.2}");
}
