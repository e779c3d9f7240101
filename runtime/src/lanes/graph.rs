//! The host: components, typed ports and edges, staged publication, and the
//! compiled region order.

use std::any::{Any, TypeId};
use std::collections::{BTreeMap, BinaryHeap};
use std::fmt;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::spec::{Diagnostic, Execution, LaneKind, LaneSpec, Priority, SpecError};
use super::stop::StopToken;
use super::tracelog::InvMarks;

/// A value travelling on an edge: shared by every consumer of a fan-out.
pub(crate) type Value = Arc<dyn Any + Send + Sync>;

/// A component's failure, reported as a structured [`RunError`](super::RunError).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ComponentError {
    /// What went wrong.
    pub message: String,
}

impl ComponentError {
    /// An error with `message`.
    pub fn new(message: impl Into<String>) -> ComponentError {
        ComponentError {
            message: message.into(),
        }
    }
}

impl fmt::Display for ComponentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ComponentError {}

/// One node of the graph. `execute` is called once per invocation; it reads
/// the inputs committed before its region ran and stages outputs with
/// [`GraphContext::publish`].
pub trait Component: Send + 'static {
    /// The ports it has; edges are checked against them (name and type).
    fn ports(&self) -> Vec<PortDecl> {
        Vec::new()
    }

    /// Called once, in startup (compiled) order, before the first epoch.
    fn activate(&mut self) -> Result<(), ComponentError> {
        Ok(())
    }

    /// One invocation.
    fn execute(&mut self, inv: &Invocation, ctx: &mut GraphContext) -> Result<(), ComponentError>;

    /// Called once after the last epoch, in reverse startup order, for every
    /// component whose `activate` succeeded; also after an error or a stop.
    fn deactivate(&mut self) {}
}

/// Whether a port is an output or an input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Published by the component.
    Output,
    /// Read by the component.
    Input,
}

/// A declared port: name, direction and value type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortDecl {
    /// Unique among the component's ports of the same direction.
    pub name: &'static str,
    /// Output or input.
    pub direction: Direction,
    type_id: TypeId,
    type_name: &'static str,
}

/// A typed output port, named within its component:
/// `const OUT: Output<u64> = Output::new("out");`.
pub struct Output<T> {
    name: &'static str,
    _t: PhantomData<fn(T)>,
}

/// A typed input port: `const IN: Input<u64> = Input::new("in");`.
pub struct Input<T> {
    name: &'static str,
    _t: PhantomData<fn() -> T>,
}

macro_rules! port_impls {
    ($ty:ident, $dir:expr) => {
        impl<T: Send + Sync + 'static> $ty<T> {
            /// The port called `name`.
            pub const fn new(name: &'static str) -> Self {
                Self {
                    name,
                    _t: PhantomData,
                }
            }

            /// Its declaration, for [`Component::ports`].
            pub fn decl(&self) -> PortDecl {
                PortDecl {
                    name: self.name,
                    direction: $dir,
                    type_id: TypeId::of::<T>(),
                    type_name: std::any::type_name::<T>(),
                }
            }

            /// Its name.
            pub fn name(&self) -> &'static str {
                self.name
            }
        }

        impl<T> Clone for $ty<T> {
            fn clone(&self) -> Self {
                *self
            }
        }

        impl<T> Copy for $ty<T> {}

        impl<T> fmt::Debug for $ty<T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", stringify!($ty), self.name)
            }
        }
    };
}

port_impls!(Output, Direction::Output);
port_impls!(Input, Direction::Input);

/// A component's index in its graph (its `component id`: the last admission
/// tie-break).
pub type ComponentId = usize;

/// What one invocation knows about itself. Passed to `execute`.
#[derive(Debug)]
pub struct Invocation {
    pub(crate) component: ComponentId,
    pub(crate) name: Arc<str>,
    pub(crate) lane: Arc<str>,
    pub(crate) index: usize,
    pub(crate) count: usize,
    pub(crate) epoch: u64,
    pub(crate) tick: Option<u64>,
    pub(crate) release_lateness: Option<Duration>,
    pub(crate) priority: Priority,
    pub(crate) worker_id: Option<usize>,
    pub(crate) budget: Option<Duration>,
    pub(crate) stop: StopToken,
}

impl Invocation {
    /// The component's id.
    pub fn component(&self) -> ComponentId {
        self.component
    }

    /// The component's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The lane it runs on.
    pub fn lane(&self) -> &str {
        &self.lane
    }

    /// Which of this epoch's invocations of the component this is (0-based).
    pub fn index(&self) -> usize {
        self.index
    }

    /// How many invocations the component has this epoch.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The epoch (1-based).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The fixed-rate tick (1-based) this invocation belongs to, if its lane
    /// is `fixed_rate`.
    pub fn tick(&self) -> Option<u64> {
        self.tick
    }

    /// How late its fixed-rate tick was released against the tick's grid
    /// instant (the `lateness_ns` of `fixed_rate_tick_begin`), if its lane
    /// is `fixed_rate`. Zero in simulated runs unless earlier work delayed
    /// the tick.
    pub fn release_lateness(&self) -> Option<Duration> {
        self.release_lateness
    }

    /// Its priority class.
    pub fn priority(&self) -> Priority {
        self.priority
    }

    /// The magpie worker running it (thread-pool lanes), else `None`.
    pub fn worker_id(&self) -> Option<usize> {
        self.worker_id
    }

    /// Its cooperative time budget.
    pub fn budget(&self) -> Option<Duration> {
        self.budget
    }

    /// Whether the run's stop was requested: long work should return early.
    /// Prefer [`GraphContext::cancel_requested`], which also records that
    /// the request was observed.
    pub fn cancel_requested(&self) -> bool {
        self.stop.is_requested()
    }

    /// The legacy spelling of [`cancel_requested`](Self::cancel_requested).
    pub fn stop_requested(&self) -> bool {
        self.cancel_requested()
    }
}

/// How time passes for budgets and trace timestamps in one invocation.
#[derive(Clone, Copy, Debug)]
pub(crate) enum InvClock {
    /// Real time: elapsed is measured.
    Real { origin: Instant, start: Instant },
    /// Simulated time: the invocation starts at `start_ns` virtual ns and
    /// elapses only by [`GraphContext::simulate_work`].
    Virtual { start_ns: u64 },
}

/// An invocation's view of the graph: its committed inputs, its staged
/// outputs, cooperative checkpoints.
pub struct GraphContext {
    pub(crate) inputs: Arc<[(PortDecl, Vec<Value>)]>,
    pub(crate) outputs: Arc<[PortDecl]>,
    pub(crate) staged: Vec<(usize, Value)>,
    pub(crate) clock: InvClock,
    pub(crate) sim_cost: Duration,
    /// Events the invocation recorded itself, inline (no allocation).
    pub(crate) marks: InvMarks,
    pub(crate) cancel_observed: bool,
    pub(crate) budget_reported: bool,
    pub(crate) stop: StopToken,
    pub(crate) budget: Option<Duration>,
    pub(crate) tid: u64,
    pub(crate) component: Arc<str>,
    /// Whether trace events are recorded.
    pub(crate) tracing: bool,
}

impl fmt::Debug for GraphContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GraphContext")
            .field("component", &self.component)
            .field("staged", &self.staged.len())
            .finish_non_exhaustive()
    }
}

impl GraphContext {
    /// Stages `value` on `port`. Consumers see it after this invocation's
    /// region barrier commits it: never within the same region pass, and
    /// never by a recursive call into a consumer.
    pub fn publish<T: Send + Sync + 'static>(
        &mut self,
        port: Output<T>,
        value: T,
    ) -> Result<(), ComponentError> {
        let decl = port.decl();
        let index = self
            .outputs
            .iter()
            .position(|d| d.name == decl.name && d.type_id == decl.type_id)
            .ok_or_else(|| {
                ComponentError::new(format!(
                    "`{}` publishes on undeclared output `{}` of type `{}`",
                    self.component, decl.name, decl.type_name
                ))
            })?;
        self.staged.push((index, Arc::new(value)));
        Ok(())
    }

    /// The values committed to `port` since the component last ran, oldest
    /// first. Every invocation of the component in this epoch sees the same
    /// values. An undeclared port has none.
    pub fn inputs<T: Send + Sync + 'static>(&self, port: Input<T>) -> impl Iterator<Item = &T> {
        let decl = port.decl();
        self.inputs
            .iter()
            .filter(move |(d, _)| d.name == decl.name && d.type_id == decl.type_id)
            .flat_map(|(_, values)| values.iter())
            .filter_map(|v| v.downcast_ref::<T>())
    }

    /// The newest value committed to `port`, if any.
    pub fn latest<T: Send + Sync + 'static>(&self, port: Input<T>) -> Option<&T> {
        self.inputs(port).last()
    }

    /// Whether the run's stop was requested. The first `true` records a
    /// `component_cancellation_observed` trace event.
    pub fn cancel_requested(&mut self) -> bool {
        let requested = self.stop.is_requested();
        if requested && !self.cancel_observed {
            self.cancel_observed = true;
            self.record_instant("component_cancellation_observed");
        }
        requested
    }

    /// A cooperative checkpoint: `Err` if the stop was requested (return it
    /// from `execute` to leave early; the runner treats it as a
    /// cancellation, not a failure). Also reports an exceeded budget once.
    pub fn checkpoint(&mut self) -> Result<(), Cancelled> {
        self.check_budget();
        if self.cancel_requested() {
            Err(Cancelled)
        } else {
            Ok(())
        }
    }

    /// Simulated lanes: this invocation takes `cost` of virtual time (the
    /// virtual clock moves only by such costs). Ignored in wall-clock runs.
    pub fn simulate_work(&mut self, cost: Duration) {
        self.sim_cost = self.sim_cost.saturating_add(cost);
    }

    /// Time spent so far: real, or the simulated cost.
    pub fn elapsed(&self) -> Duration {
        match self.clock {
            InvClock::Real { start, .. } => start.elapsed(),
            InvClock::Virtual { .. } => self.sim_cost,
        }
    }

    pub(crate) fn now_ns(&self) -> u64 {
        match self.clock {
            InvClock::Real { origin, .. } => origin.elapsed().as_nanos() as u64,
            InvClock::Virtual { start_ns } => start_ns + self.sim_cost.as_nanos() as u64,
        }
    }

    pub(crate) fn check_budget(&mut self) {
        if let Some(budget) = self.budget {
            if !self.budget_reported && self.elapsed() > budget {
                self.budget_reported = true;
                self.record_instant("component_timeout_budget_exceeded");
            }
        }
    }

    fn record_instant(&mut self, name: &'static str) {
        if !self.tracing {
            return;
        }
        let ts = self.now_ns();
        self.marks.push(name, ts);
    }
}

/// Returned by [`GraphContext::checkpoint`] when the stop was requested.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cancelled;

impl From<Cancelled> for ComponentError {
    fn from(_: Cancelled) -> Self {
        ComponentError::new(CANCELLED_MESSAGE)
    }
}

pub(crate) const CANCELLED_MESSAGE: &str = "cancelled at a checkpoint";

/// A boxed factory of one component (called once per replica).
pub type Factory = Box<dyn Fn() -> Box<dyn Component> + Send>;

fn boxed<C: Component, F: Fn() -> C + Send + 'static>(factory: F) -> Factory {
    Box::new(move || Box::new(factory()) as Box<dyn Component>)
}

pub(crate) struct ComponentNode {
    pub(crate) name: Arc<str>,
    pub(crate) lane: usize,
    pub(crate) exec: Execution,
    pub(crate) region: usize,
    pub(crate) factory: Factory,
    pub(crate) outputs: Arc<[PortDecl]>,
    pub(crate) inputs: Vec<PortDecl>,
    pub(crate) first: Option<Box<dyn Component>>,
}

/// Builds a [`Graph`] in code. `lane` first, then `component`s, then
/// `connect`s, then [`build`](Self::build).
#[derive(Default)]
pub struct GraphBuilder {
    lanes: Vec<LaneSpec>,
    components: Vec<ComponentNode>,
    /// Explicit region names: components sharing one are one region.
    region_names: Vec<Option<String>>,
    edges: Vec<((usize, usize), (usize, usize))>,
}

impl fmt::Debug for GraphBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GraphBuilder")
            .field("lanes", &self.lanes.len())
            .field("components", &self.components.len())
            .field("edges", &self.edges.len())
            .finish()
    }
}

impl GraphBuilder {
    /// An empty graph.
    pub fn new() -> GraphBuilder {
        GraphBuilder::default()
    }

    /// Adds a lane.
    pub fn lane(&mut self, lane: LaneSpec) -> Result<&mut Self, SpecError> {
        if self.lanes.iter().any(|l| l.name == lane.name) {
            return Err(SpecError::Duplicate(lane.name));
        }
        self.lanes.push(lane);
        Ok(self)
    }

    /// Adds a component made by `factory` on `lane`. A reentrant component
    /// on a thread-pool lane gets one replica per `max_threads` (each
    /// invocation runs on a replica of its own); any other gets one.
    pub fn component<C, F>(
        &mut self,
        name: &str,
        lane: &str,
        exec: Execution,
        factory: F,
    ) -> Result<ComponentId, SpecError>
    where
        C: Component,
        F: Fn() -> C + Send + 'static,
    {
        self.component_boxed(name, lane, exec, None, boxed(factory))
    }

    /// Like [`component`](Self::component), in the named `region` (components
    /// sharing a region run together and commit at one barrier).
    pub fn component_in_region<C, F>(
        &mut self,
        name: &str,
        lane: &str,
        region: &str,
        exec: Execution,
        factory: F,
    ) -> Result<ComponentId, SpecError>
    where
        C: Component,
        F: Fn() -> C + Send + 'static,
    {
        self.component_boxed(name, lane, exec, Some(region.to_string()), boxed(factory))
    }

    pub(crate) fn component_boxed(
        &mut self,
        name: &str,
        lane: &str,
        exec: Execution,
        region: Option<String>,
        factory: Factory,
    ) -> Result<ComponentId, SpecError> {
        if self.components.iter().any(|c| &*c.name == name) {
            return Err(SpecError::Duplicate(name.to_string()));
        }
        let lane_index = self
            .lanes
            .iter()
            .position(|l| l.name == lane)
            .ok_or_else(|| SpecError::UnknownLane {
                component: name.to_string(),
                lane: lane.to_string(),
            })?;
        if exec.invocations == 0 {
            return Err(SpecError::BadValue {
                at: format!("component `{name}`"),
                field: "execution.invocations".into(),
                why: "must be at least 1".into(),
            });
        }
        let first = factory();
        let ports = first.ports();
        let mut outputs = Vec::new();
        let mut inputs = Vec::new();
        for p in ports {
            let list = match p.direction {
                Direction::Output => &mut outputs,
                Direction::Input => &mut inputs,
            };
            if list.iter().any(|q: &PortDecl| q.name == p.name) {
                return Err(SpecError::Duplicate(format!("{name}.{}", p.name)));
            }
            list.push(p);
        }
        self.components.push(ComponentNode {
            name: name.into(),
            lane: lane_index,
            exec,
            region: 0,
            factory,
            outputs: outputs.into(),
            inputs,
            first: Some(first),
        });
        self.region_names.push(region);
        Ok(self.components.len() - 1)
    }

    /// Joins `from` ("component.port", an output) to `to` (an input). The
    /// types must match.
    pub fn connect(&mut self, from: &str, to: &str) -> Result<&mut Self, SpecError> {
        let (fc, fp) = self.find_port(from, Direction::Output)?;
        let (tc, tp) = self.find_port(to, Direction::Input)?;
        let out = self.components[fc].outputs[fp];
        let inp = self.components[tc].inputs[tp];
        if out.type_id != inp.type_id {
            return Err(SpecError::TypeMismatch {
                from: from.to_string(),
                from_type: out.type_name,
                to: to.to_string(),
                to_type: inp.type_name,
            });
        }
        self.edges.push(((fc, fp), (tc, tp)));
        Ok(self)
    }

    /// Joins typed ports: the compiler checks that the types match.
    pub fn connect_typed<T: Send + Sync + 'static>(
        &mut self,
        from: (ComponentId, Output<T>),
        to: (ComponentId, Input<T>),
    ) -> Result<&mut Self, SpecError> {
        let from_name = format!("{}.{}", self.name_of(from.0)?, from.1.name());
        let to_name = format!("{}.{}", self.name_of(to.0)?, to.1.name());
        self.connect(&from_name, &to_name)
    }

    fn name_of(&self, id: ComponentId) -> Result<Arc<str>, SpecError> {
        self.components
            .get(id)
            .map(|c| Arc::clone(&c.name))
            .ok_or_else(|| SpecError::UnknownPort(format!("component #{id}")))
    }

    fn find_port(&self, path: &str, dir: Direction) -> Result<(usize, usize), SpecError> {
        let unknown = || SpecError::UnknownPort(path.to_string());
        let (comp, port) = path.rsplit_once('.').ok_or_else(unknown)?;
        let c = self
            .components
            .iter()
            .position(|c| &*c.name == comp)
            .ok_or_else(unknown)?;
        let list: &[PortDecl] = match dir {
            Direction::Output => &self.components[c].outputs,
            Direction::Input => &self.components[c].inputs,
        };
        let p = list
            .iter()
            .position(|d| d.name == port)
            .ok_or_else(unknown)?;
        Ok((c, p))
    }

    /// Validates and compiles: regions, their topological order (ties by the
    /// highest priority in the region, then definition order), the edge
    /// table, and the advisory diagnostics.
    pub fn build(mut self) -> Result<Graph, SpecError> {
        // Regions: a named region groups its components; every other
        // component is a region of its own. Numbered by first appearance.
        let mut region_of_name: BTreeMap<String, usize> = BTreeMap::new();
        let mut regions = 0usize;
        for (c, name) in self.region_names.iter().enumerate() {
            let r = match name {
                Some(n) => *region_of_name.entry(n.clone()).or_insert_with(|| {
                    regions += 1;
                    regions - 1
                }),
                None => {
                    regions += 1;
                    regions - 1
                }
            };
            self.components[c].region = r;
        }
        let mut members: Vec<Vec<usize>> = vec![Vec::new(); regions];
        for (c, comp) in self.components.iter().enumerate() {
            members[comp.region].push(c);
        }
        // Region dependency edges (an edge inside one region is delivered at
        // that region's barrier, for the next epoch).
        let mut succ: Vec<Vec<usize>> = vec![Vec::new(); regions];
        let mut indeg = vec![0usize; regions];
        for &((fc, _), (tc, _)) in &self.edges {
            let (fr, tr) = (self.components[fc].region, self.components[tc].region);
            if fr != tr && !succ[fr].contains(&tr) {
                succ[fr].push(tr);
                indeg[tr] += 1;
            }
        }
        let best = |r: usize| -> Priority {
            members[r]
                .iter()
                .map(|&c| self.components[c].exec.priority)
                .min()
                .unwrap_or_default()
        };
        // Kahn's algorithm; among ready regions the highest priority first,
        // then the lowest region number (definition order).
        let mut ready: BinaryHeap<std::cmp::Reverse<(u8, usize)>> = (0..regions)
            .filter(|&r| indeg[r] == 0)
            .map(|r| std::cmp::Reverse((best(r).rank(), r)))
            .collect();
        let mut order = Vec::with_capacity(regions);
        while let Some(std::cmp::Reverse((_, r))) = ready.pop() {
            order.push(r);
            for &s in &succ[r] {
                indeg[s] -= 1;
                if indeg[s] == 0 {
                    ready.push(std::cmp::Reverse((best(s).rank(), s)));
                }
            }
        }
        if order.len() != regions {
            let names = (0..regions)
                .filter(|&r| indeg[r] > 0)
                .flat_map(|r| {
                    members[r]
                        .iter()
                        .map(|&c| self.components[c].name.to_string())
                })
                .collect();
            return Err(SpecError::Cycle(names));
        }
        // ancestors[r][a]: region r (transitively) depends on region a.
        let mut ancestors = vec![vec![false; regions]; regions];
        for &r in &order {
            for &s in &succ[r] {
                let mut inherited = ancestors[r].clone();
                inherited[r] = true;
                for (t, f) in ancestors[s].iter_mut().zip(inherited) {
                    *t |= f;
                }
            }
        }
        let mut diagnostics: Vec<Diagnostic> =
            self.lanes.iter().flat_map(LaneSpec::diagnostics).collect();
        diagnostics.sort_by(|a, b| (&a.lane, a.field).cmp(&(&b.lane, b.field)));
        let compiled = order
            .iter()
            .map(|&r| {
                let mut comps = members[r].clone();
                // Within a region: priority, then definition order.
                comps.sort_by_key(|&c| (self.components[c].exec.priority, c));
                Region {
                    index: r,
                    components: comps,
                }
            })
            .collect();
        Ok(Graph {
            lanes: self.lanes,
            components: self.components,
            edges: self.edges,
            regions: compiled,
            ancestors,
            diagnostics,
        })
    }
}

pub(crate) struct Region {
    /// The region's number (definition order).
    pub(crate) index: usize,
    /// Its components, by priority then definition order.
    pub(crate) components: Vec<usize>,
}

/// A validated, compiled graph, ready to [`run`](super::run).
pub struct Graph {
    pub(crate) lanes: Vec<LaneSpec>,
    pub(crate) components: Vec<ComponentNode>,
    pub(crate) edges: Vec<((usize, usize), (usize, usize))>,
    /// In execution order.
    pub(crate) regions: Vec<Region>,
    pub(crate) ancestors: Vec<Vec<bool>>,
    pub(crate) diagnostics: Vec<Diagnostic>,
}

impl fmt::Debug for Graph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Graph")
            .field("lanes", &self.lanes)
            .field("components", &self.component_order())
            .field("diagnostics", &self.diagnostics)
            .finish_non_exhaustive()
    }
}

impl Graph {
    /// The advisory diagnostics (validation succeeded regardless).
    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.diagnostics
    }

    /// The lanes.
    pub fn lanes(&self) -> &[LaneSpec] {
        &self.lanes
    }

    /// Component names in compiled order (regions in topological order,
    /// components within a region by priority, then definition order). This
    /// is also the startup order.
    pub fn component_order(&self) -> Vec<&str> {
        self.regions
            .iter()
            .flat_map(|r| r.components.iter().map(|&c| &*self.components[c].name))
            .collect()
    }

    /// The lane kind of component `c`.
    pub(crate) fn lane_kind(&self, c: usize) -> &LaneKind {
        &self.lanes[self.components[c].lane].kind
    }

    /// How many replicas component `c` gets.
    pub(crate) fn replicas(&self, c: usize) -> usize {
        match self.lane_kind(c) {
            LaneKind::ThreadPool(p) if self.components[c].exec.reentrant => p.width(),
            _ => 1,
        }
    }
}

/// A component instance shared with the worker that runs it.
pub(crate) type Replica = Arc<Mutex<Box<dyn Component>>>;
