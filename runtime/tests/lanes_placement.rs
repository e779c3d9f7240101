//! `thread_name` and `cpu_affinity` on a thread-pool lane: its invocations
//! run on workers of its own that carry the name and are restricted to the
//! CPUs, or a `lane_placement_not_applied` diagnostic says why not.
#![cfg(not(loom))]

mod lanes_util;

use std::sync::{Arc, Mutex};

use lanes_util::*;
use magpie_runtime::lanes::{
    self, Component, ComponentError, Diagnostic, Execution, GraphBuilder, GraphContext, Invocation,
    LaneSpec, RunOptions, StopReason, ThreadPoolSpec, ADVISORY_LANE_FIELD_IGNORED,
    LANE_PLACEMENT_NOT_APPLIED,
};

/// Where one invocation ran: the thread's name, its OS name (Linux), and
/// the CPUs it was allowed (Linux).
#[derive(Clone, Debug)]
struct Seat {
    name: String,
    os_name: Option<String>,
    cpus: Option<Vec<usize>>,
}

type Seats = Arc<Mutex<Vec<Seat>>>;

struct Where(Seats);

impl Component for Where {
    fn execute(&mut self, _: &Invocation, _: &mut GraphContext) -> Result<(), ComponentError> {
        let os_name = std::fs::read_to_string("/proc/thread-self/comm")
            .ok()
            .map(|s| s.trim_end().to_string());
        self.0.lock().unwrap().push(Seat {
            name: std::thread::current().name().unwrap_or("").to_string(),
            os_name,
            cpus: magpie_core::affinity::allowed_cpus().ok(),
        });
        Ok(())
    }
}

/// Runs a 2-wide thread-pool lane `lane` (set up by `set`) with a reentrant
/// component of 2 invocations per epoch for 3 epochs, beside a plain
/// thread-pool lane `shared`; returns the run and where each ran.
fn run_placed(set: impl FnOnce(&mut LaneSpec)) -> (lanes::RunResult, Vec<Seat>, Vec<Seat>) {
    let rt = runtime(2);
    let mut g = GraphBuilder::new();
    let wide = ThreadPoolSpec {
        max_threads: 2,
        ..ThreadPoolSpec::default()
    };
    let mut lane = LaneSpec::thread_pool("lane", wide.clone());
    set(&mut lane);
    g.lane(lane).unwrap();
    g.lane(LaneSpec::thread_pool("shared", wide)).unwrap();
    let (placed, shared): (Seats, Seats) = Default::default();
    let exec = || Execution {
        reentrant: true,
        invocations: 2,
        ..Execution::default()
    };
    let p = placed.clone();
    g.component("placed", "lane", exec(), move || Where(p.clone()))
        .unwrap();
    let s = shared.clone();
    g.component("plain", "shared", exec(), move || Where(s.clone()))
        .unwrap();
    let r = lanes::run(
        g.build().unwrap(),
        &rt,
        RunOptions {
            max_iterations: Some(3),
            ..RunOptions::default()
        },
    );
    assert_eq!(r.stop_reason, StopReason::Completed, "{:?}", r.error);
    assert_eq!(r.metrics.completed_count, 12, "every invocation ran");
    let placed = placed.lock().unwrap().clone();
    let shared = shared.lock().unwrap().clone();
    (r, placed, shared)
}

fn placement_diagnostics(r: &lanes::RunResult) -> Vec<&Diagnostic> {
    r.diagnostics
        .iter()
        .filter(|d| d.code == LANE_PLACEMENT_NOT_APPLIED)
        .collect()
}

#[test]
fn a_named_thread_pool_lane_runs_on_workers_that_carry_its_name() {
    let (r, placed, shared) = run_placed(|l| l.advisory.thread_name = Some("ctl".into()));
    assert_eq!(placed.len(), 6);
    for seat in &placed {
        assert!(
            ["ctl-0", "ctl-1"].contains(&seat.name.as_str()),
            "{placed:?}"
        );
        if cfg!(target_os = "linux") {
            // What the OS shows (ps, top, /proc/self/task/*/comm).
            assert_eq!(seat.os_name.as_deref(), Some(seat.name.as_str()));
        }
    }
    // The other lane still runs on the shared workers.
    assert!(
        shared
            .iter()
            .all(|s| s.name.starts_with("magpie-lane-worker-")),
        "{shared:?}"
    );
    // Enforced, so neither advisory nor a placement problem.
    assert!(r.diagnostics.is_empty(), "{:?}", r.diagnostics);
}

#[test]
fn a_lane_cpu_affinity_restricts_its_workers_or_a_diagnostic_says_why() {
    let target = magpie_core::affinity::allowed_cpus()
        .ok()
        .and_then(|c| c.last().copied())
        .unwrap_or(0);
    let (r, placed, shared) = run_placed(|l| l.advisory.cpu_affinity = Some(vec![target as i64]));
    let diags = placement_diagnostics(&r);
    if cfg!(target_os = "linux") {
        // A CPU this process may use can always be asked for on Linux.
        assert!(diags.is_empty(), "{diags:?}");
        for seat in &placed {
            assert_eq!(seat.cpus.as_deref(), Some(&[target][..]), "{placed:?}");
        }
        // The shared workers are not restricted by it.
        let mine = magpie_core::affinity::allowed_cpus().unwrap();
        assert!(shared.iter().all(|s| s.cpus.as_ref() == Some(&mine)));
    } else {
        // Elsewhere the OS cannot apply it, and the run says so.
        assert!(!diags.is_empty());
        assert!(diags
            .iter()
            .all(|d| d.field == "cpu_affinity" && d.lane == "lane"));
    }
    assert!(!r
        .diagnostics
        .iter()
        .any(|d| d.code == ADVISORY_LANE_FIELD_IGNORED));
}

#[test]
fn a_cpu_the_process_may_not_use_gives_a_placement_diagnostic_and_the_lane_still_runs() {
    let (r, placed, _) = run_placed(|l| l.advisory.cpu_affinity = Some(vec![1 << 20]));
    assert_eq!(placed.len(), 6);
    let diags = placement_diagnostics(&r);
    // One per worker of the lane, each with the OS's reason.
    assert_eq!(diags.len(), 2, "{diags:?}");
    for d in diags {
        assert_eq!((d.lane.as_str(), d.field), ("lane", "cpu_affinity"));
        if cfg!(target_os = "linux") {
            assert!(d.message.contains("1048576"), "{}", d.message);
        }
    }
}

#[test]
fn a_negative_cpu_number_is_reported_and_not_applied() {
    let (r, placed, _) = run_placed(|l| l.advisory.cpu_affinity = Some(vec![-1]));
    let diags = placement_diagnostics(&r);
    assert_eq!(diags.len(), 1, "{diags:?}");
    assert!(diags[0].message.contains("negative"));
    let mine = magpie_core::affinity::allowed_cpus().ok();
    assert!(placed.iter().all(|s| s.cpus == mine), "unrestricted");
}

#[cfg(target_os = "linux")]
#[test]
fn a_thread_name_longer_than_the_os_shows_is_reported_as_truncated() {
    let long = "a-very-long-lane-name";
    let (r, placed, _) = run_placed(|l| l.advisory.thread_name = Some(long.into()));
    let diags = placement_diagnostics(&r);
    assert_eq!(diags.len(), 1, "{diags:?}");
    assert_eq!(diags[0].field, "thread_name");
    for seat in &placed {
        assert!(seat.name.starts_with(long), "the full name in Rust");
        let os = seat.os_name.as_deref().unwrap();
        assert_eq!(os.len(), 15, "{os}");
        assert!(long.starts_with(os));
    }
}

#[test]
fn thread_name_and_cpu_affinity_stay_advisory_on_lanes_that_run_on_the_callers_thread() {
    let mut lane = LaneSpec::event_loop("main");
    lane.advisory.thread_name = Some("ctl".into());
    lane.advisory.cpu_affinity = Some(vec![0]);
    let fields: Vec<&str> = lane.diagnostics().iter().map(|d| d.field).collect();
    assert_eq!(fields, ["thread_name", "cpu_affinity"]);
    let mut pool = LaneSpec::thread_pool("pool", ThreadPoolSpec::default());
    pool.advisory = lane.advisory.clone();
    assert!(pool.diagnostics().is_empty());
}
