//! `--trace`: the Chrome trace file parses, has the fields Perfetto needs,
//! keeps every worker's events, and is bounded.
#![cfg(not(loom))]

use std::collections::{BTreeMap, BTreeSet};

use magpie_core::sync::{thread, Arc};
use scan::trace::{TaskKind, TraceRecorder, TraceSink};
use serde_json::Value;

fn written(sink: &TraceSink) -> (Value, scan::trace::TraceStats) {
    let mut out = Vec::new();
    let stats = sink.write_chrome(&mut out).unwrap();
    let v: Value = serde_json::from_slice(&out).expect("trace is JSON");
    (v, stats)
}

fn complete_events(v: &Value) -> Vec<&Value> {
    v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X")
        .collect()
}

#[test]
fn every_task_of_every_worker_is_a_complete_event_with_required_fields() {
    const WORKERS: usize = 3;
    const PER_WORKER: u64 = if cfg!(miri) { 5 } else { 200 };
    let sink = TraceSink::new(WORKERS, 100_000);
    let handles: Vec<_> = (0..WORKERS)
        .map(|w| {
            let mut rec = sink.recorder(w);
            thread::spawn(move || {
                for i in 0..PER_WORKER {
                    let kind =
                        [TaskKind::Enumerate, TaskKind::FetchSync, TaskKind::Scan][i as usize % 3];
                    let s = rec.start();
                    rec.finish(s, kind, format_args!("dir/f{w}-{i}.txt"), i * 4096, 4096);
                }
                // The recorder hands its events in when the worker drops it.
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let (v, stats) = written(&sink);
    assert_eq!(stats.events, WORKERS as u64 * PER_WORKER);
    assert_eq!(stats.dropped, 0);

    let events = complete_events(&v);
    assert_eq!(events.len() as u64, WORKERS as u64 * PER_WORKER);
    let mut per_tid: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
    for e in &events {
        assert!(["Enumerate", "FetchSync", "Scan"].contains(&e["name"].as_str().unwrap()));
        assert!(e["pid"].is_u64());
        let ts = e["ts"].as_f64().expect("ts");
        assert!(e["dur"].as_f64().expect("dur") >= 0.0);
        let args = &e["args"];
        assert!(args["path"].as_str().unwrap().starts_with("dir/f"));
        assert!(args["offset"].is_u64() && args["bytes"] == 4096);
        per_tid
            .entry(e["tid"].as_u64().unwrap())
            .or_default()
            .push(ts);
    }
    assert_eq!(per_tid.keys().copied().collect::<Vec<_>>(), vec![0, 1, 2]);
    for ts in per_tid.values() {
        assert!(
            ts.windows(2).all(|w| w[0] <= w[1]),
            "events of a worker are in time order"
        );
    }

    let named: BTreeSet<u64> = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .map(|e| {
            assert!(e["args"]["name"].as_str().unwrap().starts_with("worker "));
            e["tid"].as_u64().unwrap()
        })
        .collect();
    assert_eq!(named, (0..WORKERS as u64).collect());
    assert_eq!(v["displayTimeUnit"], "ms");
}

#[test]
fn a_full_recorder_drops_and_counts_instead_of_growing() {
    // 10 events over 2 workers: 5 each.
    let sink = TraceSink::new(2, 10);
    let mut rec = sink.recorder(0);
    for i in 0..12u64 {
        let s = rec.start();
        rec.finish(s, TaskKind::Scan, "x", i, 1);
    }
    assert_eq!((rec.len(), rec.dropped()), (5, 7));
    drop(rec);
    let (v, stats) = written(&sink);
    assert_eq!((stats.events, stats.dropped), (5, 7));
    assert_eq!(v["otherData"]["dropped_events"], 7);
    assert_eq!(complete_events(&v).len(), 5);
}

#[test]
fn disabled_recorder_records_nothing() {
    let mut rec = TraceRecorder::disabled();
    assert!(!rec.is_enabled());
    let s = rec.start();
    rec.finish(s, TaskKind::Scan, "x", 0, 1);
    assert!(rec.is_empty());
    assert_eq!(rec.dropped(), 0);
}

#[test]
fn paths_are_escaped_as_json_strings() {
    let sink = TraceSink::new(1, 10);
    let mut rec = sink.recorder(0);
    let s = rec.start();
    rec.finish(s, TaskKind::Enumerate, "a \"quoted\"\\path\n", 0, 0);
    drop(rec);
    let (v, _) = written(&sink);
    assert_eq!(
        complete_events(&v)[0]["args"]["path"],
        "a \"quoted\"\\path\n"
    );
}

#[test]
fn trace_file_is_written_to_disk() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.json");
    let sink: Arc<TraceSink> = TraceSink::new(1, 10);
    let mut rec = sink.recorder(0);
    let s = rec.start();
    rec.finish(s, TaskKind::FetchSync, "f", 0, 10);
    drop(rec);
    let stats = sink.write_to_file(&path).unwrap();
    assert_eq!(stats.events, 1);
    let v: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert!(v["traceEvents"].is_array());
    let bad = sink.write_to_file(&dir.path().join("no/such/dir/t.json"));
    assert!(matches!(bad, Err(scan::report::ScanError::Output { .. })));
}
