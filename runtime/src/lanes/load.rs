//! Loading a graph from a TOML or YAML file in seed 004's shape. A YAML
//! file is read into the same tree as a TOML file (mappings become tables),
//! so both go through one validation. In TOML:
//!
//! ```toml
//! [lanes.control]
//! type = "fixed_rate"
//! period_ms = 10
//! wall_clock_enabled = false
//! overrun_policy = "drop_tick"
//! max_ticks = 100
//!
//! [lanes.pool]
//! type = "thread_pool"
//! max_threads = 4
//! queue_capacity = 16
//! overflow = "drop_oldest"
//!
//! [[components]]
//! name = "camera"
//! kind = "camera"        # the factory registered under this name
//! lane = "control"
//! execution = { priority = "high", reentrant = false, budget_ms = 5 }
//!
//! [[edges]]
//! from = "camera.frame"
//! to = "detector.frame"
//! ```
//!
//! and the same in YAML:
//!
//! ```yaml
//! lanes:
//!   control: { type: fixed_rate, period_ms: 10, overrun_policy: drop_tick, max_ticks: 100 }
//!   pool: { type: thread_pool, max_threads: 4, queue_capacity: 16, overflow: drop_oldest }
//! components:
//!   - { name: camera, kind: camera, lane: control, execution: { priority: high } }
//! edges:
//!   - { from: camera.frame, to: detector.frame }
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use toml::{Table, Value};

use super::graph::{Component, Factory, Graph, GraphBuilder};
use super::spec::{
    AdvisoryFields, Execution, FixedRateSpec, LaneKind, LaneSpec, OverflowPolicy, Priority,
    SpecError, ThreadPoolSpec, DEFAULT_AGING_STEP,
};
use crate::time::OverrunPolicy;

/// Component factories by `kind`, for graphs loaded from files.
#[derive(Default)]
pub struct Registry {
    factories: BTreeMap<String, std::sync::Arc<dyn Fn() -> Box<dyn Component> + Send + Sync>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.factories.keys()).finish()
    }
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// Registers `factory` under `kind`.
    pub fn register<C, F>(&mut self, kind: &str, factory: F) -> &mut Self
    where
        C: Component,
        F: Fn() -> C + Send + Sync + 'static,
    {
        self.factories.insert(
            kind.to_string(),
            std::sync::Arc::new(move || Box::new(factory()) as Box<dyn Component>),
        );
        self
    }
}

/// Parses, validates and compiles a graph file in TOML. Advisory fields end
/// up in [`Graph::diagnostics`].
pub fn load_toml(text: &str, registry: &Registry) -> Result<Graph, SpecError> {
    let root: Table = text
        .parse::<Table>()
        .map_err(|e| SpecError::Toml(e.to_string()))?;
    load_table(&root, registry)
}

/// [`load_toml`] for a YAML file (one document; mappings with string keys,
/// no `null` values, anchors resolved by the YAML reader).
pub fn load_yaml(text: &str, registry: &Registry) -> Result<Graph, SpecError> {
    let docs =
        yaml_rust2::YamlLoader::load_from_str(text).map_err(|e| SpecError::Yaml(e.to_string()))?;
    let root = match docs.as_slice() {
        [] => Table::new(),
        [doc] => match yaml_to_toml(doc, "the file")? {
            Value::Table(t) => t,
            _ => return Err(SpecError::Yaml("the file must be a mapping".into())),
        },
        _ => return Err(SpecError::Yaml("one document per file".into())),
    };
    load_table(&root, registry)
}

/// [`load_yaml`] for `.yaml`/`.yml` files, [`load_toml`] otherwise.
pub fn load_file(path: &std::path::Path, registry: &Registry) -> Result<Graph, SpecError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| SpecError::Io(format!("{}: {e}", path.display())))?;
    match path.extension().and_then(|e| e.to_str()) {
        Some("yaml" | "yml") => load_yaml(&text, registry),
        _ => load_toml(&text, registry),
    }
}

/// A YAML node as the TOML value the loader reads.
fn yaml_to_toml(y: &yaml_rust2::Yaml, at: &str) -> Result<Value, SpecError> {
    use yaml_rust2::Yaml;
    Ok(match y {
        Yaml::String(s) => Value::String(s.clone()),
        Yaml::Integer(i) => Value::Integer(*i),
        Yaml::Real(_) => Value::Float(
            y.as_f64()
                .ok_or_else(|| SpecError::Yaml(format!("{at}: not a number")))?,
        ),
        Yaml::Boolean(b) => Value::Boolean(*b),
        Yaml::Array(items) => Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, v)| yaml_to_toml(v, &format!("{at}[{i}]")))
                .collect::<Result<_, _>>()?,
        ),
        Yaml::Hash(map) => {
            let mut t = Table::new();
            for (k, v) in map {
                let key = match k {
                    Yaml::String(s) => s.clone(),
                    Yaml::Integer(i) => i.to_string(),
                    _ => return Err(SpecError::Yaml(format!("{at}: keys must be strings"))),
                };
                let value = yaml_to_toml(v, &format!("{at}.{key}"))?;
                t.insert(key, value);
            }
            Value::Table(t)
        }
        Yaml::Null => return Err(SpecError::Yaml(format!("{at}: a value is missing (null)"))),
        Yaml::Alias(_) | Yaml::BadValue => {
            return Err(SpecError::Yaml(format!("{at}: not a plain value")))
        }
    })
}

fn load_table(root: &Table, registry: &Registry) -> Result<Graph, SpecError> {
    check_keys(root, "the file", &["lanes", "components", "edges"])?;
    let mut b = GraphBuilder::new();
    if let Some(lanes) = root.get("lanes") {
        let lanes = as_table(lanes, "the file", "lanes")?;
        for (name, lane) in lanes {
            let lane = as_table(lane, &format!("lane `{name}`"), name)?;
            b.lane(parse_lane(name, lane)?)?;
        }
    }
    if let Some(comps) = root.get("components") {
        let Value::Array(comps) = comps else {
            return Err(bad("the file", "components", "must be an array of tables"));
        };
        for (i, comp) in comps.iter().enumerate() {
            let comp = as_table(comp, &format!("component #{i}"), "components")?;
            let name = req_str(comp, &format!("component #{i}"), "name")?;
            let at = format!("component `{name}`");
            check_keys(comp, &at, &["name", "kind", "lane", "region", "execution"])?;
            let kind = req_str(comp, &at, "kind")?;
            let lane = req_str(comp, &at, "lane")?;
            let region = opt_str(comp, &at, "region")?;
            let exec = match comp.get("execution") {
                Some(e) => parse_execution(as_table(e, &at, "execution")?, &at)?,
                None => Execution::default(),
            };
            let factory = registry
                .factories
                .get(kind)
                .cloned()
                .ok_or_else(|| SpecError::UnknownKind(kind.to_string()))?;
            let factory: Factory = Box::new(move || factory());
            b.component_boxed(name, lane, exec, region.map(str::to_string), factory)?;
        }
    }
    if let Some(edges) = root.get("edges") {
        let Value::Array(edges) = edges else {
            return Err(bad("the file", "edges", "must be an array of tables"));
        };
        for (i, edge) in edges.iter().enumerate() {
            let at = format!("edge #{i}");
            let edge = as_table(edge, &at, "edges")?;
            check_keys(edge, &at, &["from", "to"])?;
            let from = req_str(edge, &at, "from")?;
            let to = req_str(edge, &at, "to")?;
            b.connect(from, to)?;
        }
    }
    b.build()
}

fn parse_lane(name: &str, t: &Table) -> Result<LaneSpec, SpecError> {
    let at = format!("lane `{name}`");
    let ty = req_str(t, &at, "type")?;
    const ADVISORY: &[&str] = &[
        "priority",
        "thread_name",
        "cpu_affinity",
        "nice_priority",
        "rt_policy",
        "rt_priority",
        "isolation_intent",
    ];
    let (kind, own): (LaneKind, &[&str]) = match ty {
        "event_loop" => (LaneKind::EventLoop, &["wall_clock_enabled"]),
        "fixed_rate" => {
            let period = match (opt_f64(t, &at, "period_ms")?, opt_f64(t, &at, "hz")?) {
                (Some(ms), _) if ms > 0.0 => Duration::from_secs_f64(ms / 1e3),
                (_, Some(hz)) if hz > 0.0 => Duration::from_secs_f64(1.0 / hz),
                _ => {
                    return Err(bad(
                        &at,
                        "period_ms",
                        "a fixed_rate lane needs a positive period_ms or hz",
                    ))
                }
            };
            let tick_budget = opt_f64(t, &at, "tick_budget_ms")?
                .filter(|ms| *ms > 0.0)
                .map(|ms| Duration::from_secs_f64(ms / 1e3));
            let overrun_policy = match opt_str(t, &at, "overrun_policy")? {
                Some(p) => OverrunPolicy::from_name(p)
                    .ok_or_else(|| SpecError::UnknownOverrunPolicy(p.to_string()))?,
                None => OverrunPolicy::default(),
            };
            let spec = FixedRateSpec {
                period,
                tick_budget,
                wall_clock: opt_bool(t, &at, "wall_clock_enabled")?.unwrap_or(false),
                overrun_policy,
                max_ticks: opt_u64(t, &at, "max_ticks")?,
            };
            (
                LaneKind::FixedRate(spec),
                &[
                    "period_ms",
                    "hz",
                    "tick_budget_ms",
                    "overrun_policy",
                    "wall_clock_enabled",
                    "max_ticks",
                ],
            )
        }
        "thread_pool" => {
            let spec = ThreadPoolSpec {
                max_threads: opt_u64(t, &at, "max_threads")?.unwrap_or(1) as usize,
                queue_capacity: opt_u64(t, &at, "queue_capacity")?.map(|c| c as usize),
                overflow: match opt_str(t, &at, "overflow")? {
                    Some(o) => OverflowPolicy::parse(o)?,
                    None => OverflowPolicy::default(),
                },
                aging_step: opt_u64(t, &at, "aging_step")?.unwrap_or(DEFAULT_AGING_STEP),
            };
            (
                LaneKind::ThreadPool(spec),
                &[
                    "max_threads",
                    "queue_capacity",
                    "overflow",
                    "aging_step",
                    "wall_clock_enabled",
                ],
            )
        }
        other => {
            return Err(SpecError::UnknownLaneType {
                lane: name.to_string(),
                found: other.to_string(),
            })
        }
    };
    for key in t.keys() {
        if key != "type" && !own.contains(&key.as_str()) && !ADVISORY.contains(&key.as_str()) {
            return Err(SpecError::UnknownField {
                at,
                field: key.clone(),
            });
        }
    }
    let advisory = AdvisoryFields {
        priority: opt_str(t, &at, "priority")?.map(str::to_string),
        thread_name: opt_str(t, &at, "thread_name")?.map(str::to_string),
        cpu_affinity: match t.get("cpu_affinity") {
            Some(Value::Array(a)) => Some(
                a.iter()
                    .map(|v| {
                        v.as_integer()
                            .ok_or_else(|| bad(&at, "cpu_affinity", "must list integers"))
                    })
                    .collect::<Result<_, _>>()?,
            ),
            Some(Value::Integer(i)) => Some(vec![*i]),
            Some(_) => {
                return Err(bad(
                    &at,
                    "cpu_affinity",
                    "must be an integer or a list of them",
                ))
            }
            None => None,
        },
        nice_priority: opt_i64(t, &at, "nice_priority")?,
        rt_policy: opt_str(t, &at, "rt_policy")?.map(str::to_string),
        rt_priority: opt_i64(t, &at, "rt_priority")?,
        isolation_intent: opt_str(t, &at, "isolation_intent")?.map(str::to_string),
        wall_clock_enabled: match kind {
            LaneKind::FixedRate(_) => None,
            _ => opt_bool(t, &at, "wall_clock_enabled")?,
        },
    };
    Ok(LaneSpec {
        name: name.to_string(),
        kind,
        advisory,
    })
}

fn parse_execution(t: &Table, at: &str) -> Result<Execution, SpecError> {
    check_keys(
        t,
        at,
        &["priority", "reentrant", "budget_ms", "invocations"],
    )?;
    Ok(Execution {
        priority: match opt_str(t, at, "priority")? {
            Some(p) => Priority::parse(p)?,
            None => Priority::Normal,
        },
        reentrant: opt_bool(t, at, "reentrant")?.unwrap_or(false),
        budget: opt_f64(t, at, "budget_ms")?
            .filter(|ms| *ms > 0.0)
            .map(|ms| Duration::from_secs_f64(ms / 1e3)),
        invocations: opt_u64(t, at, "invocations")?.unwrap_or(1) as usize,
    })
}

fn bad(at: &str, field: &str, why: &str) -> SpecError {
    SpecError::BadValue {
        at: at.to_string(),
        field: field.to_string(),
        why: why.to_string(),
    }
}

fn check_keys(t: &Table, at: &str, allowed: &[&str]) -> Result<(), SpecError> {
    match t.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(SpecError::UnknownField {
            at: at.to_string(),
            field: k.clone(),
        }),
        None => Ok(()),
    }
}

fn as_table<'t>(v: &'t Value, at: &str, field: &str) -> Result<&'t Table, SpecError> {
    v.as_table()
        .ok_or_else(|| bad(at, field, "must be a table"))
}

fn opt_str<'t>(t: &'t Table, at: &str, field: &str) -> Result<Option<&'t str>, SpecError> {
    match t.get(field) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(bad(at, field, "must be a string")),
    }
}

fn req_str<'t>(t: &'t Table, at: &str, field: &str) -> Result<&'t str, SpecError> {
    opt_str(t, at, field)?.ok_or_else(|| bad(at, field, "is required"))
}

fn opt_bool(t: &Table, at: &str, field: &str) -> Result<Option<bool>, SpecError> {
    match t.get(field) {
        None => Ok(None),
        Some(Value::Boolean(b)) => Ok(Some(*b)),
        Some(_) => Err(bad(at, field, "must be true or false")),
    }
}

fn opt_i64(t: &Table, at: &str, field: &str) -> Result<Option<i64>, SpecError> {
    match t.get(field) {
        None => Ok(None),
        Some(Value::Integer(i)) => Ok(Some(*i)),
        Some(_) => Err(bad(at, field, "must be an integer")),
    }
}

fn opt_u64(t: &Table, at: &str, field: &str) -> Result<Option<u64>, SpecError> {
    match opt_i64(t, at, field)? {
        None => Ok(None),
        Some(i) => u64::try_from(i)
            .map(Some)
            .map_err(|_| bad(at, field, "must not be negative")),
    }
}

fn opt_f64(t: &Table, at: &str, field: &str) -> Result<Option<f64>, SpecError> {
    match t.get(field) {
        None => Ok(None),
        Some(Value::Integer(i)) => Ok(Some(*i as f64)),
        Some(Value::Float(f)) if f.is_finite() => Ok(Some(*f)),
        Some(_) => Err(bad(at, field, "must be a number")),
    }
}
