//! Lane and execution specifications, their validation and the advisory
//! diagnostics (seed 004, "Lane Types", "Runtime Priority v1", "Advisory
//! Policy Fields").

use std::fmt;
use std::time::Duration;

use crate::time::OverrunPolicy;

/// A component's runtime priority class (`execution.priority`). An omitted
/// value is [`Priority::Normal`]. This is ordering inside magpie, never an
/// OS priority.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Priority {
    /// Rank 0: runs first.
    High,
    /// Rank 1: the default.
    #[default]
    Normal,
    /// Rank 2.
    Low,
    /// Rank 3: runs last (until it ages; see `lanes/README.md`).
    Background,
}

impl Priority {
    /// Every class, best first.
    pub const ALL: [Priority; 4] = [
        Priority::High,
        Priority::Normal,
        Priority::Low,
        Priority::Background,
    ];

    /// 0 for `High` .. 3 for `Background`; lower runs first.
    pub fn rank(self) -> u8 {
        self as u8
    }

    /// The class of a rank (ranks above 3 are `Background`).
    pub fn from_rank(rank: u8) -> Priority {
        Self::ALL[usize::from(rank.min(3))]
    }

    /// The seed's spelling: `high`, `normal`, `low`, `background`.
    pub fn name(self) -> &'static str {
        match self {
            Priority::High => "high",
            Priority::Normal => "normal",
            Priority::Low => "low",
            Priority::Background => "background",
        }
    }

    /// Parses a seed spelling; anything else is a validation error.
    pub fn parse(s: &str) -> Result<Priority, SpecError> {
        Self::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| SpecError::UnknownPriority(s.to_string()))
    }

    /// `low` and `background`: their drops count as low-priority rejections.
    pub fn is_low(self) -> bool {
        self >= Priority::Low
    }
}

/// What a thread-pool lane does with a ready invocation that finds the queue
/// full (`overflow`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum OverflowPolicy {
    /// `drop_oldest` / `overwrite`: evict the oldest waiting invocation and
    /// admit the new one (keep the newest work).
    DropOldest,
    /// `drop_newest` / `reject` / `reject_new` / `block`: refuse the new
    /// invocation (keep the oldest work). `block` never blocks: the runtime
    /// does not block a producer.
    #[default]
    RejectNew,
    /// `fail_fast`: refuse it and stop the run with an error.
    FailFast,
}

impl OverflowPolicy {
    /// Parses any of the seed's spellings.
    pub fn parse(s: &str) -> Result<OverflowPolicy, SpecError> {
        match s {
            "drop_oldest" | "overwrite" => Ok(OverflowPolicy::DropOldest),
            "drop_newest" | "reject" | "reject_new" | "block" => Ok(OverflowPolicy::RejectNew),
            "fail_fast" => Ok(OverflowPolicy::FailFast),
            other => Err(SpecError::UnknownOverflow(other.to_string())),
        }
    }
}

/// A `thread_pool` lane's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadPoolSpec {
    /// Invocations in flight at most (on magpie's workers). `0` means 1.
    pub max_threads: usize,
    /// Ready invocations waiting behind the running ones: `None` unbounded,
    /// `Some(0)` none (only the active width).
    pub queue_capacity: Option<usize>,
    /// What happens at capacity.
    pub overflow: OverflowPolicy,
    /// Starvation aging: a class whose oldest runnable invocation has been
    /// passed over this many times for better classes is served next (`0`
    /// turns aging off). See `lanes/README.md` for the bound.
    pub aging_step: u64,
}

/// The default `aging_step`: a waiting class is served after being passed
/// over 64 times, so under a saturating flood of better work it still gets
/// about one dispatch in 65.
pub const DEFAULT_AGING_STEP: u64 = 64;

impl Default for ThreadPoolSpec {
    fn default() -> Self {
        Self {
            max_threads: 1,
            queue_capacity: None,
            overflow: OverflowPolicy::default(),
            aging_step: DEFAULT_AGING_STEP,
        }
    }
}

impl ThreadPoolSpec {
    /// `max_threads`, with the seed's "0 means one worker".
    pub fn width(&self) -> usize {
        self.max_threads.max(1)
    }
}

/// A `fixed_rate` lane's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FixedRateSpec {
    /// The cadence (`period_ms`, or `1 / hz`).
    pub period: Duration,
    /// The overrun accounting budget (`tick_budget_ms`); `None`: the period.
    pub tick_budget: Option<Duration>,
    /// Sleep on the runtime timer between ticks (`wall_clock_enabled`);
    /// off: simulated ticks, no sleeping.
    pub wall_clock: bool,
    /// How the next tick is chosen after a late one (shared with
    /// [`crate::time::Interval`]).
    pub overrun_policy: OverrunPolicy,
    /// Stop this lane after this many ticks (`max_ticks`).
    pub max_ticks: Option<u64>,
}

impl FixedRateSpec {
    /// A simulated lane of `period`.
    pub fn every(period: Duration) -> FixedRateSpec {
        FixedRateSpec {
            period,
            tick_budget: None,
            wall_clock: false,
            overrun_policy: OverrunPolicy::default(),
            max_ticks: None,
        }
    }

    /// The overrun accounting budget: `tick_budget`, else the period.
    pub fn budget(&self) -> Duration {
        self.tick_budget.unwrap_or(self.period)
    }
}

/// The lane types of schema v1.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LaneKind {
    /// Deterministic, in-process, in region order.
    EventLoop,
    /// Ticks on a fixed cadence.
    FixedRate(FixedRateSpec),
    /// A bounded pool on magpie's workers.
    ThreadPool(ThreadPoolSpec),
}

impl LaneKind {
    /// `event_loop`, `fixed_rate` or `thread_pool`.
    pub fn type_name(&self) -> &'static str {
        match self {
            LaneKind::EventLoop => "event_loop",
            LaneKind::FixedRate(_) => "fixed_rate",
            LaneKind::ThreadPool(_) => "thread_pool",
        }
    }
}

/// Fields that are parsed and preserved but not enforced (seed 004,
/// "Advisory Policy Fields"). Any that is set produces an
/// `advisory_lane_field_ignored` diagnostic.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AdvisoryFields {
    /// Lane `priority` (an OS priority intent).
    pub priority: Option<String>,
    /// `thread_name`: enforced on a `thread_pool` lane, which then runs on
    /// workers of its own named `{thread_name}-{i}`; advisory on the other
    /// lanes (they run on the thread that calls `run`).
    pub thread_name: Option<String>,
    /// `cpu_affinity`: CPU numbers. Enforced on a `thread_pool` lane, which
    /// then runs on workers of its own restricted to these CPUs (Linux; a
    /// `lane_placement_not_applied` diagnostic says why when the OS
    /// refuses); advisory on the other lanes.
    pub cpu_affinity: Option<Vec<i64>>,
    /// `nice_priority`.
    pub nice_priority: Option<i64>,
    /// `rt_policy`.
    pub rt_policy: Option<String>,
    /// `rt_priority`.
    pub rt_priority: Option<i64>,
    /// `isolation_intent`.
    pub isolation_intent: Option<String>,
    /// `wall_clock_enabled` on a lane that is not `fixed_rate`.
    pub wall_clock_enabled: Option<bool>,
}

/// One lane: a name, a type and its advisory fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaneSpec {
    /// The lane's name, referenced by components.
    pub name: String,
    /// Its type and settings.
    pub kind: LaneKind,
    /// Parsed, not enforced.
    pub advisory: AdvisoryFields,
}

impl LaneSpec {
    /// An `event_loop` lane.
    pub fn event_loop(name: impl Into<String>) -> LaneSpec {
        Self::new(name, LaneKind::EventLoop)
    }

    /// A `fixed_rate` lane.
    pub fn fixed_rate(name: impl Into<String>, spec: FixedRateSpec) -> LaneSpec {
        Self::new(name, LaneKind::FixedRate(spec))
    }

    /// A `thread_pool` lane.
    pub fn thread_pool(name: impl Into<String>, spec: ThreadPoolSpec) -> LaneSpec {
        Self::new(name, LaneKind::ThreadPool(spec))
    }

    fn new(name: impl Into<String>, kind: LaneKind) -> LaneSpec {
        LaneSpec {
            name: name.into(),
            kind,
            advisory: AdvisoryFields::default(),
        }
    }

    /// The `advisory_lane_field_ignored` diagnostics of this lane.
    pub fn diagnostics(&self) -> Vec<Diagnostic> {
        let a = &self.advisory;
        let not_default = |s: &Option<String>, defaults: &[&str]| {
            s.as_deref().is_some_and(|v| !defaults.contains(&v))
        };
        let mut fields: Vec<(&'static str, String)> = Vec::new();
        if not_default(&a.priority, &["", "normal"]) {
            fields.push((
                "priority",
                "lane priority is not an OS priority here; use execution.priority".into(),
            ));
        }
        // A thread-pool lane gets workers of its own for these two; the
        // other lanes run on the thread that calls `run`.
        let own_threads = matches!(self.kind, LaneKind::ThreadPool(_));
        if !own_threads && not_default(&a.thread_name, &[""]) {
            fields.push((
                "thread_name",
                "this lane runs on the thread that calls run, which keeps its name".into(),
            ));
        }
        if !own_threads && a.cpu_affinity.as_ref().is_some_and(|v| !v.is_empty()) {
            fields.push((
                "cpu_affinity",
                "this lane runs on the thread that calls run; pin that thread".into(),
            ));
        }
        if a.nice_priority.is_some_and(|v| v != 0) {
            fields.push(("nice_priority", "OS nice values are not applied".into()));
        }
        if not_default(&a.rt_policy, &["", "none", "other"]) {
            fields.push((
                "rt_policy",
                "real-time scheduling policies are not applied".into(),
            ));
        }
        if a.rt_priority.is_some_and(|v| v != 0) {
            fields.push(("rt_priority", "real-time priorities are not applied".into()));
        }
        if not_default(&a.isolation_intent, &["", "none", "shared"]) {
            fields.push((
                "isolation_intent",
                "lanes are not isolated on their own threads".into(),
            ));
        }
        if a.wall_clock_enabled == Some(true) && !matches!(self.kind, LaneKind::FixedRate(_)) {
            fields.push((
                "wall_clock_enabled",
                format!(
                    "only fixed_rate lanes have a cadence; this lane is {}",
                    self.kind.type_name()
                ),
            ));
        }
        fields
            .into_iter()
            .map(|(field, why)| Diagnostic {
                code: ADVISORY_LANE_FIELD_IGNORED,
                lane: self.name.clone(),
                field,
                message: format!(
                    "lane `{}`: field `{field}` is parsed but not enforced: {why}",
                    self.name
                ),
            })
            .collect()
    }
}

/// The diagnostic code for an advisory field that is set.
pub const ADVISORY_LANE_FIELD_IGNORED: &str = "advisory_lane_field_ignored";

/// The diagnostic code for a thread-pool lane's `cpu_affinity` or
/// `thread_name` that the OS did not apply as asked (a refused CPU set, a
/// name longer than the OS shows, workers that could not be started).
pub const LANE_PLACEMENT_NOT_APPLIED: &str = "lane_placement_not_applied";

/// A machine-readable warning: validation still succeeds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// `advisory_lane_field_ignored`.
    pub code: &'static str,
    /// The lane it is about.
    pub lane: String,
    /// The field.
    pub field: &'static str,
    /// For people.
    pub message: String,
}

/// How a component runs (`execution.*`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Execution {
    /// Its priority class.
    pub priority: Priority,
    /// May its invocations overlap (up to the lane's `max_threads`)?
    pub reentrant: bool,
    /// A cooperative time budget per invocation (`budget_ms`): exceeding it
    /// is reported, never preempted.
    pub budget: Option<Duration>,
    /// Invocations per epoch in which the component is ready (default 1).
    pub invocations: usize,
}

impl Default for Execution {
    fn default() -> Self {
        Self {
            priority: Priority::Normal,
            reentrant: false,
            budget: None,
            invocations: 1,
        }
    }
}

impl Execution {
    /// The default execution with `priority`.
    pub fn with_priority(priority: Priority) -> Execution {
        Execution {
            priority,
            ..Execution::default()
        }
    }
}

/// A graph or lane specification that does not validate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SpecError {
    /// `execution.priority` is not one of the four classes.
    UnknownPriority(String),
    /// `type` is not `event_loop`, `fixed_rate` or `thread_pool`.
    UnknownLaneType {
        /// The lane.
        lane: String,
        /// What it said.
        found: String,
    },
    /// `overflow` is not a known policy.
    UnknownOverflow(String),
    /// `overrun_policy` is not a known policy.
    UnknownOverrunPolicy(String),
    /// A field this schema does not have.
    UnknownField {
        /// Where.
        at: String,
        /// The field.
        field: String,
    },
    /// A field of the wrong type or range.
    BadValue {
        /// Where.
        at: String,
        /// The field.
        field: String,
        /// What is wrong.
        why: String,
    },
    /// A component names a lane that does not exist.
    UnknownLane {
        /// The component.
        component: String,
        /// The lane it names.
        lane: String,
    },
    /// A name is used twice.
    Duplicate(String),
    /// An edge endpoint is not `component.port` of a declared port.
    UnknownPort(String),
    /// An edge joins ports of different types.
    TypeMismatch {
        /// The output.
        from: String,
        /// Its type.
        from_type: &'static str,
        /// The input.
        to: String,
        /// Its type.
        to_type: &'static str,
    },
    /// The regions' dependencies form a cycle.
    Cycle(Vec<String>),
    /// No factory is registered for a component kind.
    UnknownKind(String),
    /// The TOML does not parse.
    Toml(String),
    /// The YAML does not parse, or holds what a graph file cannot (a null,
    /// a non-string key, several documents).
    Yaml(String),
    /// The graph file cannot be read.
    Io(String),
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpecError::UnknownPriority(p) => write!(
                f,
                "unknown execution.priority `{p}` (expected high, normal, low or background)"
            ),
            SpecError::UnknownLaneType { lane, found } => write!(
                f,
                "lane `{lane}`: unknown lane type `{found}` (expected event_loop, fixed_rate or \
                 thread_pool; isolated_thread and manual_step are not supported)"
            ),
            SpecError::UnknownOverflow(o) => write!(
                f,
                "unknown overflow policy `{o}` (expected drop_oldest, overwrite, drop_newest, \
                 reject, reject_new, block or fail_fast)"
            ),
            SpecError::UnknownOverrunPolicy(o) => write!(
                f,
                "unknown overrun_policy `{o}` (expected drop_tick, skip_next or catch_up_once)"
            ),
            SpecError::UnknownField { at, field } => write!(f, "{at}: unknown field `{field}`"),
            SpecError::BadValue { at, field, why } => write!(f, "{at}: field `{field}`: {why}"),
            SpecError::UnknownLane { component, lane } => {
                write!(f, "component `{component}` names unknown lane `{lane}`")
            }
            SpecError::Duplicate(n) => write!(f, "`{n}` is defined twice"),
            SpecError::UnknownPort(p) => write!(f, "unknown port `{p}`"),
            SpecError::TypeMismatch {
                from,
                from_type,
                to,
                to_type,
            } => write!(
                f,
                "edge `{from}` -> `{to}` joins a `{from_type}` output to a `{to_type}` input"
            ),
            SpecError::Cycle(names) => {
                write!(f, "the regions form a cycle through {}", names.join(" -> "))
            }
            SpecError::UnknownKind(k) => write!(f, "no component factory for kind `{k}`"),
            SpecError::Toml(e) => write!(f, "invalid TOML: {e}"),
            SpecError::Yaml(e) => write!(f, "invalid YAML graph: {e}"),
            SpecError::Io(e) => write!(f, "cannot read the graph file: {e}"),
        }
    }
}

impl std::error::Error for SpecError {}
