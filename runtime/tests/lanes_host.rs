//! The host: staged publication, region order, priorities, validation and
//! loading from TOML.
#![cfg(not(loom))]

mod lanes_util;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use lanes_util::*;
use magpie_runtime::lanes::{
    self, Execution, GraphBuilder, Input, LaneSpec, Priority, Registry, RunOptions, SpecError,
    StopReason, ADVISORY_LANE_FIELD_IGNORED,
};

fn opts(iterations: u64) -> RunOptions {
    RunOptions {
        max_iterations: Some(iterations),
        ..RunOptions::default()
    }
}

/// `src` (a `Source` with `invocations` per epoch) feeding `relay` (adds
/// `add`), both in `region` if given, run for `epochs` epochs.
fn source_relay(
    region: Option<&str>,
    invocations: usize,
    add: u64,
    epochs: u64,
) -> (lanes::RunResult, Log, Seen) {
    let rt = runtime(1);
    let (log, seen) = (log(), seen());
    let mut g = GraphBuilder::new();
    g.lane(LaneSpec::event_loop("main")).unwrap();
    let exec = Execution {
        invocations,
        ..Execution::default()
    };
    let l = log.clone();
    let src = move || Source {
        log: l.clone(),
        cost: Duration::ZERO,
    };
    let (l, s) = (log.clone(), seen.clone());
    let relay = move || Relay {
        add,
        log: l.clone(),
        seen: s.clone(),
    };
    match region {
        Some(r) => {
            g.component_in_region("src", "main", r, exec, src).unwrap();
            g.component_in_region("relay", "main", r, Execution::default(), relay)
                .unwrap();
        }
        None => {
            g.component("src", "main", exec, src).unwrap();
            g.component("relay", "main", Execution::default(), relay)
                .unwrap();
        }
    }
    g.connect("src.out", "relay.in").unwrap();
    let r = lanes::run(g.build().unwrap(), &rt, opts(epochs));
    (r, log, seen)
}

#[test]
fn publish_is_visible_downstream_after_the_barrier_within_the_same_epoch() {
    let (r, _, seen) = source_relay(None, 1, 1, 3);
    assert_eq!(r.stop_reason, StopReason::Completed);
    // The downstream region runs after the source's barrier, same epoch.
    assert_eq!(
        *seen.lock().unwrap(),
        vec![(1, vec![10]), (2, vec![20]), (3, vec![30])]
    );
}

#[test]
fn publish_within_one_region_is_visible_only_in_the_next_epoch() {
    let (r, _, seen) = source_relay(Some("r"), 1, 1, 3);
    assert_eq!(r.stop_reason, StopReason::Completed);
    // Epoch 1: nothing committed yet, so the relay is not triggered. Epoch
    // n+1 sees what epoch n staged: never a recursive, same-pass delivery.
    assert_eq!(*seen.lock().unwrap(), vec![(2, vec![10]), (3, vec![20])]);
}

#[test]
fn publish_stages_without_recursive_downstream_execute() {
    // A source with 3 invocations per epoch feeding a relay: the relay runs
    // once per epoch, after all three, and sees all three values.
    let (r, log, seen) = source_relay(None, 3, 0, 1);
    assert_eq!(r.epochs, 1);
    assert_eq!(names(&log), ["src", "src", "src", "relay"]);
    assert_eq!(*seen.lock().unwrap(), vec![(1, vec![10, 11, 12])]);
}

fn noop_graph(spec: &[(&str, Priority)], edges: &[(&str, &str)]) -> (lanes::Graph, Log) {
    // Components with an input and an output each so that any edge works;
    // a component with an unconnected input is still a source (see below).
    struct Node {
        log: Log,
    }
    impl lanes::Component for Node {
        fn ports(&self) -> Vec<lanes::PortDecl> {
            vec![IN.decl(), OUT.decl()]
        }
        fn execute(
            &mut self,
            inv: &lanes::Invocation,
            ctx: &mut lanes::GraphContext,
        ) -> Result<(), lanes::ComponentError> {
            self.log
                .lock()
                .unwrap()
                .push((inv.name().to_string(), inv.epoch(), inv.index()));
            ctx.publish(OUT, 1)
        }
    }
    let log = log();
    let mut g = GraphBuilder::new();
    g.lane(LaneSpec::event_loop("main")).unwrap();
    for &(name, p) in spec {
        let l = log.clone();
        g.component(name, "main", Execution::with_priority(p), move || Node {
            log: l.clone(),
        })
        .unwrap();
    }
    for &(from, to) in edges {
        g.connect(&format!("{from}.out"), &format!("{to}.in"))
            .unwrap();
    }
    (g.build().unwrap(), log)
}

#[test]
fn independent_regions_run_by_highest_priority_and_ties_keep_definition_order() {
    let (g, _) = noop_graph(
        &[
            ("bg", Priority::Background),
            ("n1", Priority::Normal),
            ("low", Priority::Low),
            ("hi", Priority::High),
            ("n2", Priority::Normal),
        ],
        &[],
    );
    assert_eq!(g.component_order(), ["hi", "n1", "n2", "low", "bg"]);
}

#[test]
fn priority_never_bypasses_an_edge() {
    // `hi` consumes `low`'s output: it must wait for `low` even though an
    // independent `normal` region could run before `low`.
    let (g, log) = noop_graph(
        &[
            ("low", Priority::Low),
            ("hi", Priority::High),
            ("norm", Priority::Normal),
        ],
        &[("low", "hi")],
    );
    assert_eq!(g.component_order(), ["norm", "low", "hi"]);
    let rt = runtime(1);
    let r = lanes::run(g, &rt, opts(1));
    assert_eq!(r.stop_reason, StopReason::Completed);
    assert_eq!(names(&log), ["norm", "low", "hi"]);
}

#[test]
fn runtime_priority_orders_independent_ready_components_and_does_not_starve_low_priority() {
    let (g, log) = noop_graph(
        &[
            ("bg", Priority::Background),
            ("low", Priority::Low),
            ("hi", Priority::High),
        ],
        &[],
    );
    let rt = runtime(1);
    let r = lanes::run(g, &rt, opts(4));
    let names = names(&log);
    assert_eq!(names.len(), 12, "every component runs every epoch");
    for epoch in names.chunks(3) {
        assert_eq!(epoch, ["hi", "low", "bg"]);
    }
    assert_eq!(r.metrics.priority_high_count, 4);
    assert_eq!(r.metrics.priority_low_count, 4);
    assert_eq!(r.metrics.priority_background_count, 4);
}

#[test]
fn edges_between_different_types_are_rejected() {
    struct Text;
    const TEXT_IN: Input<String> = Input::new("in");
    impl lanes::Component for Text {
        fn ports(&self) -> Vec<lanes::PortDecl> {
            vec![TEXT_IN.decl()]
        }
        fn execute(
            &mut self,
            _: &lanes::Invocation,
            _: &mut lanes::GraphContext,
        ) -> Result<(), lanes::ComponentError> {
            Ok(())
        }
    }
    let mut g = GraphBuilder::new();
    g.lane(LaneSpec::event_loop("main")).unwrap();
    let l = log();
    g.component("src", "main", Execution::default(), move || Source {
        log: l.clone(),
        cost: Duration::ZERO,
    })
    .unwrap();
    g.component("text", "main", Execution::default(), || Text)
        .unwrap();
    let err = g.connect("src.out", "text.in").unwrap_err();
    assert!(matches!(err, SpecError::TypeMismatch { .. }), "{err}");
    assert!(err.to_string().contains("u64") && err.to_string().contains("String"));
    let err = g.connect("src.nope", "text.in").unwrap_err();
    assert_eq!(err, SpecError::UnknownPort("src.nope".into()));
}

#[test]
fn a_cycle_between_regions_is_a_validation_error() {
    let mut g = GraphBuilder::new();
    g.lane(LaneSpec::event_loop("main")).unwrap();
    let (l, s) = (log(), Arc::new(Mutex::new(Vec::new())));
    for name in ["a", "b"] {
        let (l, s) = (l.clone(), s.clone());
        g.component(name, "main", Execution::default(), move || Relay {
            add: 0,
            log: l.clone(),
            seen: s.clone(),
        })
        .unwrap();
    }
    g.connect("a.out", "b.in").unwrap();
    g.connect("b.out", "a.in").unwrap();
    assert!(matches!(g.build(), Err(SpecError::Cycle(_))));
}

const GRAPH: &str = r#"
[lanes.main]
type = "event_loop"

[[components]]
name = "src"
kind = "source"
lane = "main"
execution = { priority = "high" }

[[components]]
name = "relay"
kind = "relay"
lane = "main"

[[edges]]
from = "src.out"
to = "relay.in"
"#;

fn registry(log: &Log, seen: &Seen) -> Registry {
    let mut reg = Registry::new();
    let l = log.clone();
    reg.register("source", move || Source {
        log: l.clone(),
        cost: Duration::ZERO,
    });
    let (l, s) = (log.clone(), seen.clone());
    reg.register("relay", move || Relay {
        add: 1,
        log: l.clone(),
        seen: s.clone(),
    });
    reg
}

#[test]
fn a_graph_loaded_from_toml_runs_like_the_same_graph_built_in_code() {
    let (log, seen) = (log(), Arc::new(Mutex::new(Vec::new())));
    let g = lanes::load_toml(GRAPH, &registry(&log, &seen)).unwrap();
    assert!(g.diagnostics().is_empty());
    let rt = runtime(1);
    let r = lanes::run(g, &rt, opts(2));
    assert_eq!(r.stop_reason, StopReason::Completed);
    assert_eq!(*seen.lock().unwrap(), vec![(1, vec![10]), (2, vec![20])]);
    assert_eq!(r.metrics.priority_high_count, 2);
    assert_eq!(r.metrics.priority_normal_count, 2);
}

#[test]
fn unknown_priority_lane_type_and_fields_are_clear_errors() {
    let (log, seen) = (log(), Arc::new(Mutex::new(Vec::new())));
    let reg = registry(&log, &seen);
    let err = lanes::load_toml(&GRAPH.replace("\"high\"", "\"urgent\""), &reg).unwrap_err();
    assert_eq!(err, SpecError::UnknownPriority("urgent".into()));
    assert!(err.to_string().contains("high, normal, low or background"));

    let err = lanes::load_toml(&GRAPH.replace("event_loop", "isolated_thread"), &reg).unwrap_err();
    assert!(matches!(&err, SpecError::UnknownLaneType { found, .. } if found == "isolated_thread"));
    assert!(err.to_string().contains("not supported"));

    let err = lanes::load_toml(
        &GRAPH.replace("type = \"event_loop\"", "type = \"event_loop\"\nspeed = 3"),
        &reg,
    )
    .unwrap_err();
    assert!(matches!(&err, SpecError::UnknownField { field, .. } if field == "speed"));

    let err = lanes::load_toml(
        "[lanes.p]\ntype = \"thread_pool\"\noverflow = \"sometimes\"\n",
        &reg,
    )
    .unwrap_err();
    assert_eq!(err, SpecError::UnknownOverflow("sometimes".into()));

    let err = lanes::load_toml(
        "[lanes.c]\ntype = \"fixed_rate\"\nperiod_ms = 5\noverrun_policy = \"burst\"\n",
        &reg,
    )
    .unwrap_err();
    assert_eq!(err, SpecError::UnknownOverrunPolicy("burst".into()));
}

#[test]
fn advisory_fields_validate_with_advisory_lane_field_ignored_diagnostics() {
    let text = r#"
[lanes.control]
type = "fixed_rate"
hz = 100
priority = "high"
cpu_affinity = [0, 1]
nice_priority = -5
rt_policy = "fifo"
rt_priority = 50
isolation_intent = "dedicated"
thread_name = "ctl"

[lanes.main]
type = "event_loop"
wall_clock_enabled = true

[lanes.quiet]
type = "thread_pool"
nice_priority = 0
rt_policy = "other"
"#;
    let g = lanes::load_toml(text, &Registry::new()).unwrap();
    let got: Vec<(&str, &str)> = g
        .diagnostics()
        .iter()
        .map(|d| {
            assert_eq!(d.code, ADVISORY_LANE_FIELD_IGNORED);
            assert!(d.message.contains(d.field));
            (d.lane.as_str(), d.field)
        })
        .collect();
    assert_eq!(
        got,
        [
            ("control", "cpu_affinity"),
            ("control", "isolation_intent"),
            ("control", "nice_priority"),
            ("control", "priority"),
            ("control", "rt_policy"),
            ("control", "rt_priority"),
            ("control", "thread_name"),
            ("main", "wall_clock_enabled"),
        ]
    );
    // The run reports them too.
    let rt = runtime(1);
    let r = lanes::run(
        g,
        &rt,
        RunOptions {
            max_iterations: Some(1),
            ..RunOptions::default()
        },
    );
    assert_eq!(r.diagnostics.len(), 8);
}

/// `GRAPH` in YAML, in the seed's shape (`lanes: main: type: ...`).
const GRAPH_YAML: &str = "
lanes:
  main:
    type: event_loop
components:
  - name: src
    kind: source
    lane: main
    execution:
      priority: high
  - { name: relay, kind: relay, lane: main }
edges:
  - from: src.out
    to: relay.in
";

#[test]
fn a_graph_loaded_from_yaml_runs_like_the_same_graph_loaded_from_toml() {
    let mut runs = Vec::new();
    for yaml in [false, true] {
        let (log, seen) = (log(), Arc::new(Mutex::new(Vec::new())));
        let reg = registry(&log, &seen);
        let g = if yaml {
            lanes::load_yaml(GRAPH_YAML, &reg).unwrap()
        } else {
            lanes::load_toml(GRAPH, &reg).unwrap()
        };
        assert!(g.diagnostics().is_empty());
        let rt = runtime(1);
        let r = lanes::run(g, &rt, opts(2));
        assert_eq!(r.stop_reason, StopReason::Completed);
        let seen = seen.lock().unwrap().clone();
        runs.push((
            seen,
            r.metrics.priority_high_count,
            r.metrics.priority_normal_count,
        ));
    }
    assert_eq!(runs[0], (vec![(1, vec![10]), (2, vec![20])], 2, 2));
    assert_eq!(runs[0], runs[1]);
}

#[test]
fn yaml_graphs_get_the_same_validation_and_clear_errors_for_what_yaml_adds() {
    let (log, seen) = (log(), Arc::new(Mutex::new(Vec::new())));
    let reg = registry(&log, &seen);
    // The same checks as TOML: they run on one tree.
    let err = lanes::load_yaml(&GRAPH_YAML.replace("high", "urgent"), &reg).unwrap_err();
    assert_eq!(err, SpecError::UnknownPriority("urgent".into()));
    let err =
        lanes::load_yaml(&GRAPH_YAML.replace("event_loop", "isolated_thread"), &reg).unwrap_err();
    assert!(matches!(&err, SpecError::UnknownLaneType { found, .. } if found == "isolated_thread"));
    // What only YAML can say.
    let err = lanes::load_yaml("lanes:\n  main:\n    type:\n", &reg).unwrap_err();
    assert!(
        matches!(&err, SpecError::Yaml(m) if m.contains("lanes.main.type") && m.contains("null")),
        "{err}"
    );
    let err = lanes::load_yaml("lanes: {}\n---\nlanes: {}\n", &reg).unwrap_err();
    assert!(
        matches!(&err, SpecError::Yaml(m) if m.contains("one document")),
        "{err}"
    );
    let err = lanes::load_yaml("- a\n- b\n", &reg).unwrap_err();
    assert!(
        matches!(&err, SpecError::Yaml(m) if m.contains("mapping")),
        "{err}"
    );
    let err = lanes::load_yaml("lanes: [unclosed\n", &reg).unwrap_err();
    assert!(matches!(&err, SpecError::Yaml(_)), "{err}");
    assert!(err.to_string().starts_with("invalid YAML graph"));
}

#[test]
fn advisory_diagnostics_are_the_same_from_yaml_and_toml() {
    let toml = "
[lanes.control]
type = \"fixed_rate\"
hz = 100
priority = \"high\"
cpu_affinity = [0, 1]
rt_policy = \"fifo\"
thread_name = \"ctl\"
";
    let yaml = "
lanes:
  control:
    type: fixed_rate
    hz: 100
    priority: high
    cpu_affinity: [0, 1]
    rt_policy: fifo
    thread_name: ctl
";
    let fields = |g: &lanes::Graph| -> Vec<(String, &'static str)> {
        g.diagnostics()
            .iter()
            .map(|d| (d.lane.clone(), d.field))
            .collect()
    };
    let a = lanes::load_toml(toml, &Registry::new()).unwrap();
    let b = lanes::load_yaml(yaml, &Registry::new()).unwrap();
    assert_eq!(fields(&a).len(), 4, "{:?}", fields(&a));
    assert_eq!(fields(&a), fields(&b));
}

#[test]
fn load_file_reads_yaml_or_toml_by_extension() {
    let dir = std::env::temp_dir().join(format!("magpie-lanes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (log, seen) = (log(), Arc::new(Mutex::new(Vec::new())));
    let reg = registry(&log, &seen);
    for (name, text) in [
        ("g.yaml", GRAPH_YAML),
        ("g.yml", GRAPH_YAML),
        ("g.toml", GRAPH),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        let g = lanes::load_file(&path, &reg).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(g.diagnostics().is_empty(), "{name}");
    }
    // YAML text under a .toml name is read as TOML, and fails as TOML.
    let path = dir.join("wrong.toml");
    std::fs::write(&path, GRAPH_YAML).unwrap();
    assert!(matches!(
        lanes::load_file(&path, &reg),
        Err(SpecError::Toml(_))
    ));
    let missing = dir.join("missing.yaml");
    assert!(matches!(
        lanes::load_file(&missing, &reg),
        Err(SpecError::Io(m)) if m.contains("missing.yaml")
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}
