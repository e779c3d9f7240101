//! A whole run: rules, frontier, pool and executor set up from the
//! [`Config`], the walk started, the executor joined, the totals checked
//! (the accounting invariant) and handed to the reporter.

use std::collections::BTreeMap;
use std::io::Write;
use std::panic::{self, AssertUnwindSafe};
use std::time::{Duration, Instant};

use magpie_core::sync::atomic::AtomicBool;
use magpie_core::sync::{Arc, Mutex};
use magpie_runtime::{Executor, ExecutorConfig, MetricsSnapshot};

use crate::archive::{ArchiveLimits, ArchivePolicy};
use crate::cli::{self, Config};
use crate::pool::BufferPool;
use crate::report::progress::progress_wanted;
use crate::report::{
    finalize, Finding, Outcome, Progress, ProgressDisplay, Reporter, ScanError, Summary,
};
use crate::rules::{self, PrefilterKind, RuleSet};
use crate::skip::{sort_skipped, SkipReason, SkippedEntry};
use crate::trace::{TraceSink, DEFAULT_MAX_EVENTS};
use crate::walk::{WalkConfig, WalkCursor};

use super::frontier::{FrontierStats, ObjectFrontier, WaitList, SKIP_LABELS};
use super::task::{EnumCursor, GitEnum, Task, WalkEnum};
use super::{lock, run_task, ArchiveSettings, Counters, Settings, Shared, Totals, WorkerScratch};
use crate::git::{HistoryCursor, HistoryStatus};

/// Chunk buffers per worker (seed 001: the pool holds `4 × workers`).
pub const BUFFERS_PER_WORKER: usize = 4;

/// The most places at frontier level 0 (files on disk in flight).
pub const MAX_FRONTIER: usize = 512;

/// Frontier places per worker in a `scan git` run (blobs in flight).
pub const GIT_BLOBS_PER_WORKER: usize = 8;

/// The fewest places at any level.
pub const MIN_FRONTIER: usize = 16;

/// File descriptors kept out of the frontier's budget: stdio, the walker's
/// open directories, the output and trace files, temp files of nested zips.
pub const RESERVED_FDS: u64 = 128;

/// Knobs that are not on the command line (tests, benchmarks). `Default` is
/// what the binary uses.
#[derive(Clone, Debug, Default)]
pub struct Tuning {
    /// Level-0 frontier capacity; `None`: [`frontier_capacity`] from the fd
    /// limit.
    pub frontier_capacity: Option<usize>,
    /// Buffers in the pool; `None`: [`BUFFERS_PER_WORKER`] × workers.
    pub pool_buffers: Option<usize>,
    /// Do not free the compiled rules and the buffer pool at the end: the
    /// process is about to exit, and freeing ~10 MB of compiled regexes costs
    /// several milliseconds of a short run ([`run`] sets it).
    pub leak_at_end: bool,
}

/// The soft limit on open files, from `/proc/self/limits` (no `unsafe`
/// `getrlimit` in this crate).
pub fn fd_soft_limit() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    let soft = line["Max open files".len()..].split_whitespace().next()?;
    soft.parse().ok()
}

/// Level-0 capacity: every in-flight file holds one descriptor from its first
/// to its last chunk, so half of what the soft fd limit leaves after
/// [`RESERVED_FDS`] (the other half is for nested levels), between
/// [`MIN_FRONTIER`] and [`MAX_FRONTIER`]. 1024 fds give 448.
pub fn frontier_capacity(fd_limit: Option<u64>) -> usize {
    let fds = fd_limit.unwrap_or(1024);
    let budget = fds.saturating_sub(RESERVED_FDS) / 2;
    usize::try_from(budget)
        .unwrap_or(MAX_FRONTIER)
        .clamp(MIN_FRONTIER, MAX_FRONTIER)
}

/// Capacities of every level: level 0 from [`frontier_capacity`], each
/// archive level an eighth of it (an archive holds at most one member being
/// read, so few places go a long way; a nested zip holds a temp file).
fn level_capacities(level0: usize, archive_depth: u32) -> Vec<usize> {
    let nested = (level0 / 8).max(MIN_FRONTIER);
    std::iter::once(level0)
        .chain(std::iter::repeat_n(nested, archive_depth as usize))
        .collect()
}

/// Compiles the rules the configuration asks for: the built-in set, or a
/// gitleaks config (`-c`, `GITLEAKS_CONFIG`, `.gitleaks.toml` at the root)
/// composed with the `--rules` files (see `rules::sources`), minus
/// `--exclude-rule`. Unsupported parts of a config are skipped with a
/// warning on standard error.
pub fn load_rules(config: &Config) -> Result<RuleSet, ScanError> {
    let file = rules::sources::find_config(config.config_file.as_deref(), &config.paths);
    let (mut rules, warnings) =
        rules::sources::load(file.as_deref(), &config.rule_files).map_err(ScanError::Rules)?;
    for w in warnings {
        eprintln!("scan: warning: {w}");
    }
    if !config.exclude_rules.is_empty() {
        rules
            .exclude(&config.exclude_rules)
            .map_err(|e| ScanError::Rules(e.to_string()))?;
    }
    if let Some(kind) = config.prefilter {
        let kind = match kind {
            cli::Prefilter::ShiftOr => PrefilterKind::ShiftOr,
            cli::Prefilter::Teddy => PrefilterKind::Teddy,
            cli::Prefilter::Dfa => PrefilterKind::Dfa,
        };
        rules = rules.with_prefilter(kind);
    }
    Ok(rules)
}

/// The accounting of a run: every discovered object ended exactly one way.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Accounting {
    /// Objects discovered: walk entries that were not ignored, archive
    /// members, and the members or rest of an archive counted skipped.
    pub discovered: u64,
    /// Objects whose bytes were scanned to the end.
    pub scanned: u64,
    /// Archives opened (their members are objects of their own).
    pub expanded: u64,
    /// Objects skipped, any reason.
    pub skipped: u64,
    /// Objects dropped with no end (only an aborted run has any).
    pub abandoned: u64,
    /// Frontier places taken.
    pub acquired: u64,
    /// Frontier places still held at the end (a leaked permit if not 0).
    pub in_flight: u64,
}

impl Accounting {
    /// `discovered == scanned + expanded + skipped + abandoned`, no place
    /// held, and nothing abandoned unless the run was aborted.
    pub fn holds(&self, aborted: bool) -> bool {
        self.discovered == self.scanned + self.expanded + self.skipped + self.abandoned
            && self.in_flight == 0
            && (aborted || self.abandoned == 0)
    }
}

/// What [`scan`] returns: finalized findings (before the baseline), the
/// summary and the accounting.
#[derive(Debug)]
pub struct ScanReport {
    /// Sorted, de-duplicated, fingerprinted.
    pub findings: Vec<Finding>,
    /// Every skip, named, sorted by path.
    pub skipped: Vec<SkippedEntry>,
    /// Totals; `summary.metrics` holds every counter.
    pub summary: Summary,
    /// The accounting check's numbers.
    pub accounting: Accounting,
    /// The executor's counters.
    pub runtime: MetricsSnapshot,
    /// `scan git --state`: the state to write once the run is reported.
    pub state: Option<crate::git::StateUpdate>,
}

fn settings(config: &Config, rules: &RuleSet, shard: Option<crate::shard::Shard>) -> Settings {
    let archives = config.scan_archives.then(|| ArchiveSettings {
        limits: ArchiveLimits {
            max_depth: config.archive_depth,
            max_entry_bytes: config
                .max_file_size
                .unwrap_or(ArchiveLimits::default().max_entry_bytes),
            ..ArchiveLimits::default()
        },
        policy: match config.archive_policy {
            cli::ArchivePolicy::Skip => ArchivePolicy::Skip,
            cli::ArchivePolicy::Partial => ArchivePolicy::Partial,
            cli::ArchivePolicy::FailRun => ArchivePolicy::FailRun,
        },
    });
    Settings {
        chunk_size: config.chunk_size.max(1),
        context_len: rules.context_len(),
        follow_symlinks: config.follow_symlinks,
        max_file_size: config.max_file_size,
        max_decode_depth: config.max_decode_depth,
        archives,
        shard,
    }
}

/// Peak resident set size of this process, from `/proc/self/status`.
pub fn peak_rss_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = text.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line["VmHWM:".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// Scans `config.paths` with `rules` and returns the findings and totals.
/// Nothing is written; [`run`] adds the reporting.
pub fn scan_with(
    config: &Config,
    rules: RuleSet,
    tuning: &Tuning,
    trace: Option<&std::sync::Arc<TraceSink>>,
) -> Result<ScanReport, ScanError> {
    let started = Instant::now();
    let shard = config.parsed_shard()?;
    let mut state = None;
    let git = match &config.git {
        Some(opts) => {
            let repo = crate::git::open(&opts.repo)?;
            let mut cursor = HistoryCursor::new(&repo, opts).map_err(ScanError::Usage)?;
            for note in cursor.take_notes() {
                eprintln!("scan: {note}");
            }
            state = cursor.take_state_update();
            Some((repo, cursor))
        }
        None => None,
    };
    if git.is_none() {
        for root in &config.paths {
            check_root(root)?;
        }
    }
    crate::walk::compile_excludes(&config.exclude).map_err(ScanError::Usage)?;
    let workers = config.workers.max(1);
    let settings = settings(config, &rules, shard);
    let git_commits = git.as_ref().map(|(_, cursor)| cursor.commits() as u64);
    let level0 = tuning.frontier_capacity.unwrap_or_else(|| match git {
        // A blob holds no descriptor but, while it is chunked, its decoded
        // bytes: few in flight bound the memory (README in src/git/).
        Some(_) => (GIT_BLOBS_PER_WORKER * workers).clamp(MIN_FRONTIER, MAX_FRONTIER),
        None => frontier_capacity(fd_soft_limit()),
    });
    let depth = settings.archives.as_ref().map_or(0, |a| a.limits.max_depth);
    let frontier = ObjectFrontier::new(&level_capacities(level0, depth));
    let buffers = tuning
        .pool_buffers
        .unwrap_or(BUFFERS_PER_WORKER * workers)
        .max(1);
    let pool = BufferPool::new(buffers, settings.chunk_size + 2 * settings.context_len);
    let progress = progress_wanted(!config.progress).then(|| Arc::new(Progress::new()));
    let display = match &progress {
        Some(p) => ProgressDisplay::start(Arc::clone(p), true),
        None => ProgressDisplay::hidden(),
    };
    let shared = Arc::new(Shared {
        settings,
        rules,
        pool,
        frontier,
        waiters: WaitList::new(),
        progress,
        git: git
            .as_ref()
            .map(|(repo, cursor)| crate::git::Odb::with_packs(repo.clone(), cursor.packs())),
        aborted: AtomicBool::new(false),
        abort_error: Mutex::new(None),
        totals: Mutex::new(Totals::default()),
    });
    let walk = WalkEnum {
        cursor: WalkCursor::new(
            config.paths.clone(),
            WalkConfig {
                follow_symlinks: config.follow_symlinks,
                respect_ignore: config.respect_ignore_files,
                max_file_size: config.max_file_size,
                exclude: config.exclude.clone(),
            },
        ),
        batch: Vec::with_capacity(super::ENUM_BATCH_SIZE),
        finished: false,
        roots: config.paths.clone(),
    };

    let for_init = Arc::clone(&shared);
    let for_tasks = Arc::clone(&shared);
    let sink = trace.cloned();
    let ex = Executor::new(
        ExecutorConfig {
            workers,
            // The scanner shares its machine: let the kernel move workers.
            pin_threads: false,
            ..ExecutorConfig::default()
        },
        move |worker| WorkerScratch::new(Arc::clone(&for_init), worker, sink.as_ref()),
        move |task, ctx| run_task(&for_tasks, task, ctx),
    );
    let first = match git {
        Some((_, cursor)) => Task::Enumerate {
            cursor: EnumCursor::Git(Box::new(GitEnum {
                cursor,
                batch: Vec::with_capacity(super::ENUM_BATCH_SIZE),
                finished: false,
            })),
        },
        None => Task::Enumerate {
            cursor: EnumCursor::Walk(Box::new(walk)),
        },
    };
    if ex.spawn_external(first).is_err() {
        return Err(ScanError::Other("the executor refused the walk".into()));
    }
    let joined = panic::catch_unwind(AssertUnwindSafe(|| ex.join()));
    display.finish();
    let runtime = match joined {
        Ok(m) => m,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            return Err(ScanError::Other(format!(
                "internal error: a task panicked: {what}"
            )));
        }
    };
    let elapsed = started.elapsed();

    let aborted = shared.aborted();
    let leftover = shared.waiters.drain();
    let leftover_count = leftover.len();
    drop(leftover);
    if let Some(err) = lock(&shared.abort_error).take() {
        return Err(err);
    }
    if leftover_count > 0 {
        return Err(ScanError::Other(format!(
            "internal error: {leftover_count} tasks were still parked when the executor finished"
        )));
    }
    let totals = std::mem::take(&mut *lock(&shared.totals));
    debug_assert_eq!(totals.scratches_dropped, workers, "every scratch flushed");
    let fstats = shared.frontier.stats();
    let accounting = accounting(&totals.counters, &fstats);
    debug_assert!(
        accounting.holds(aborted),
        "accounting invariant broken: {accounting:?}"
    );
    let mut findings = totals.findings;
    finalize(&mut findings);
    let mut skipped = totals.skipped;
    sort_skipped(&mut skipped);
    let mut summary = summary(
        config,
        &shared,
        &totals.counters,
        &fstats,
        &accounting,
        &runtime,
        elapsed,
        trace.map_or(0, |t| t.dropped()),
    );
    if let Some(n) = git_commits {
        // Commits the history walk covered (`scan git`).
        summary.metrics.insert("git_commits", n);
        summary.git_commits = Some(n);
    }
    if tuning.leak_at_end {
        std::mem::forget(shared);
    }
    Ok(ScanReport {
        findings,
        skipped,
        summary,
        accounting,
        runtime,
        state,
    })
}

fn accounting(c: &Counters, f: &FrontierStats) -> Accounting {
    let at_discovery: u64 = c.skipped_at_discovery.iter().sum();
    let ended_skipped: u64 = f.skipped.iter().sum();
    Accounting {
        discovered: f.acquired_total() + at_discovery,
        scanned: f.scanned,
        expanded: f.expanded,
        skipped: at_discovery + ended_skipped,
        abandoned: f.abandoned,
        acquired: f.acquired_total(),
        in_flight: f.in_flight.iter().map(|&n| n as u64).sum(),
    }
}

#[allow(clippy::too_many_arguments)]
fn summary(
    config: &Config,
    shared: &Shared,
    c: &Counters,
    f: &FrontierStats,
    acc: &Accounting,
    rt: &MetricsSnapshot,
    elapsed: Duration,
    trace_dropped: u64,
) -> Summary {
    let mut skipped = BTreeMap::new();
    for i in 0..SKIP_LABELS {
        let n = c.skipped_at_discovery[i] + f.skipped[i];
        if n > 0 {
            skipped.insert(SkipReason::LABELS[i], n);
        }
    }
    let mut m: BTreeMap<&'static str, u64> = BTreeMap::new();
    // Seed 001's pipeline counters.
    m.insert("enumerate_count", c.enumerate_count);
    m.insert("objects_discovered", acc.discovered);
    m.insert("enumerate_backpressure", c.enumerate_backpressure);
    m.insert("fetch_sync_count", c.fetch_sync_count);
    m.insert("bytes_fetched", c.bytes_fetched);
    m.insert("scan_count", c.scan_count);
    m.insert("bytes_scanned", c.bytes_scanned);
    m.insert("objects_completed", f.ended());
    m.insert("objects_admitted", acc.acquired);
    m.insert("frontier_in_flight", acc.in_flight);
    // The accounting and the structures behind it.
    m.insert("objects_scanned", acc.scanned);
    m.insert("objects_expanded", acc.expanded);
    m.insert("objects_skipped", acc.skipped);
    m.insert("objects_abandoned", acc.abandoned);
    m.insert("frontier_capacity", shared.frontier.capacity(0) as u64);
    m.insert("frontier_peak", f.peak.first().copied().unwrap_or(0) as u64);
    m.insert("fetch_pool_empty", c.fetch_pool_empty);
    m.insert("parks", shared.waiters.parks());
    m.insert("pool_buffers", shared.pool.count() as u64);
    m.insert("chunk_size", shared.settings.chunk_size as u64);
    m.insert("overlap_bytes", 2 * shared.settings.context_len as u64);
    m.insert("raw_findings", c.raw_findings);
    if let Some(rss) = peak_rss_bytes() {
        m.insert("peak_rss_bytes", rss);
    }
    // The executor's counters.
    let t = &rt.total;
    for (k, v) in [
        ("rt_tasks_run", rt.tasks_run()),
        ("rt_tasks_lifo", t.tasks_lifo),
        ("rt_tasks_local", t.tasks_local),
        ("rt_tasks_global", t.tasks_global),
        ("rt_tasks_steal", t.tasks_steal),
        ("rt_steal_attempts", t.steal_attempts),
        ("rt_steal_successes", t.steal_successes),
        ("rt_tasks_stolen", t.tasks_stolen),
        ("rt_global_batches", t.global_batches),
        ("rt_overflows", t.overflows),
        ("rt_parks", t.parks),
        ("rt_unparks", t.unparks),
        ("rt_spurious_wakeups", t.spurious_wakeups),
        ("rt_idle_wakeups", t.idle_wakeups),
        ("rt_wake_on_hoard", t.wake_on_hoard),
        ("rt_panics", t.panics),
    ] {
        m.insert(k, v);
    }
    Summary {
        git_commits: None,
        history: None,
        shard: shared.settings.shard.map(|s| crate::shard::ShardSummary {
            index: s.index,
            count: s.count,
            owned: c.shard_owned,
        }),
        history_unreadable: 0,
        excluded: c.excluded,
        respect_gitignore: config.respect_ignore_files,
        skip_hint: false,
        inline_allowed: c.inline_allowed,
        ignore_file_suppressed: 0,
        files_scanned: acc.scanned,
        bytes_scanned: c.bytes_scanned,
        skipped,
        archives: acc.expanded,
        archive_members: f.acquired.iter().skip(1).sum(),
        findings: 0,
        baseline_suppressed: 0,
        workers: config.workers.max(1),
        elapsed,
        trace_events_dropped: trace_dropped,
        metrics: m,
    }
}

/// A path named on the command line must exist and be readable: a file is
/// opened (without blocking: a FIFO is fine), a directory listed. Anything
/// else is an error before the scan starts, `PATH: Permission denied`, as
/// ripgrep says it. `-` is standard input; a FIFO is only `stat`ed.
fn check_root(root: &std::path::Path) -> Result<(), ScanError> {
    if crate::source::is_stdin(root) {
        return Ok(());
    }
    let err = |source| ScanError::Root {
        path: root.to_path_buf(),
        source,
    };
    let meta = std::fs::metadata(root).map_err(err)?;
    if std::os::unix::fs::FileTypeExt::is_fifo(&meta.file_type()) {
        // Opening it here, even without blocking, would meet its writer
        // and close on it: the FetchSync opens it once.
        return Ok(());
    }
    if meta.is_dir() {
        std::fs::read_dir(root).map_err(err)?;
    } else {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
            .open(root)
            .map_err(err)?;
    }
    Ok(())
}

/// Scans with the configuration's rules and no reporting (tests and
/// embedding): [`scan_with`] after [`load_rules`].
pub fn scan(config: &Config, tuning: &Tuning) -> Result<ScanReport, ScanError> {
    let rules = load_rules(config)?;
    scan_with(config, rules, tuning, None)
}

/// The repositories among a directory scan's paths (`scan DIR`): those
/// whose history is scanned, and what the summary says.
fn dir_repositories(
    config: &Config,
) -> (
    Vec<(std::path::PathBuf, gix::ThreadSafeRepository)>,
    Option<HistoryStatus>,
) {
    use crate::git::auto::{repository_at, DirRepo};
    let mut found = Vec::new();
    let mut status = None;
    for root in &config.paths {
        let why = match repository_at(root) {
            DirRepo::Found(repo) if !config.no_git_history => {
                found.push((root.clone(), *repo));
                continue;
            }
            DirRepo::Found(_) => "--no-git-history".to_owned(),
            DirRepo::Broken(e) => e,
            DirRepo::Inside(top) => format!(
                "{} is inside the repository at {}: scan that directory, or `scan git {}`",
                root.display(),
                top.display(),
                top.display()
            ),
            DirRepo::None => continue,
        };
        status.get_or_insert(HistoryStatus::NotScanned(why));
    }
    (found, status)
}

/// `scan DIR` where DIR is a repository: scans the history of each one
/// found (after the walk, on a fresh executor sized like `scan git`'s),
/// drops the history findings whose blob is the work tree file at that path
/// (the walk reported them), and adds the rest, the skips and the counts
/// to `report`. Returns the history's unreadable objects.
fn add_histories(
    config: &Config,
    repos: Vec<(std::path::PathBuf, gix::ThreadSafeRepository)>,
    tuning: &Tuning,
    report: &mut ScanReport,
) -> Result<u64, ScanError> {
    let roots = config.paths.len();
    let (mut commits, mut blobs, mut unreadable) = (0, 0, 0);
    for (root, repo) in repos {
        let mut hc = config.clone();
        hc.paths = vec![root.clone()];
        hc.git = Some(crate::git::GitOptions {
            repo: root.clone(),
            exclude: config.exclude.clone(),
            ..crate::git::GitOptions::default()
        });
        let rules = load_rules(&hc)?;
        let mut h = scan_with(&hc, rules, tuning, None)?;
        crate::git::auto::drop_work_tree_copies(&repo, &mut h.findings);
        unreadable += history_unreadable(&h.skipped);
        commits += h.summary.git_commits.unwrap_or(0);
        blobs += h.summary.files_scanned;
        for mut f in h.findings {
            f.path = crate::git::auto::below_root(&f.path, &root, roots);
            report.findings.push(f);
        }
        for mut s in h.skipped {
            s.path = crate::git::auto::below_root(&s.path, &root, roots);
            report.skipped.push(s);
        }
        let sum = &mut report.summary;
        for (k, v) in &h.summary.skipped {
            *sum.skipped.entry(*k).or_insert(0) += v;
        }
        sum.bytes_scanned += h.summary.bytes_scanned;
        sum.inline_allowed += h.summary.inline_allowed;
        if let (Some(a), Some(b)) = (&mut sum.shard, &h.summary.shard) {
            a.owned += b.owned;
        }
        sum.elapsed += h.summary.elapsed;
        sum.metrics.insert("git_commits", commits);
        sum.metrics.insert("git_blobs_scanned", blobs);
    }
    finalize(&mut report.findings);
    sort_skipped(&mut report.skipped);
    report.summary.history = Some(HistoryStatus::Scanned { commits, blobs });
    Ok(unreadable)
}

/// Objects of a history that could not be read (corrupt, missing): the
/// history was scanned partially, and the run exits 2 after its report.
fn history_unreadable(skipped: &[SkippedEntry]) -> u64 {
    skipped
        .iter()
        .filter(|s| matches!(s.reason, SkipReason::Unreadable(_)))
        .map(|s| s.count)
        .sum()
}

/// The error of a run whose history had `unreadable` objects (after its
/// report is written): exit 2. `scan merge` returns the same.
pub fn partial_history_error(unreadable: u64) -> ScanError {
    ScanError::Other(format!(
        "the git history was scanned partially: {unreadable} {} could not be read \
         (the report names {}); exit 2",
        if unreadable == 1 { "object" } else { "objects" },
        if unreadable == 1 { "it" } else { "them" },
    ))
}

/// The whole program: reporter (baseline and output checked first), rules,
/// trace file, the scan, the report and the summary.
pub fn run(mut config: Config) -> Result<Outcome, ScanError> {
    // A bad `--shard` is one line and exit 2, before any output is created.
    config.parsed_shard()?;
    let mut provenance = None;
    let mut repos = Vec::new();
    let mut not_scanned = None;
    if let Some(opts) = &config.git {
        // The repository's own directory is where its `.gitleaksignore` and
        // `.gitleaks.toml` are, and SARIF's %SRCROOT%.
        let repo = crate::git::open(&opts.repo)?;
        config.paths = vec![crate::git::root_dir(&repo)];
        provenance = Some(crate::git::provenance(&repo));
    } else {
        (repos, not_scanned) = dir_repositories(&config);
        if let [(_, repo)] = repos.as_slice() {
            provenance = Some(crate::git::provenance(repo));
        }
    }
    let mut reporter = Reporter::from_config(&config)?;
    if let Some(p) = provenance {
        reporter.set_provenance(p);
    }
    let rules = load_rules(&config)?;
    let workers = config.workers.max(1);
    let trace = match &config.trace {
        Some(path) => {
            // Fail before the scan if the file cannot be written.
            std::fs::File::create(path).map_err(|source| ScanError::Output {
                what: format!("trace file {}", path.display()),
                source,
            })?;
            Some(TraceSink::new(workers, DEFAULT_MAX_EVENTS))
        }
        None => None,
    };
    let tuning = Tuning {
        leak_at_end: true,
        ..Tuning::default()
    };
    let mut report = scan_with(&config, rules, &tuning, trace.as_ref())?;
    let mut unreadable = 0;
    if config.git.is_some() {
        unreadable = history_unreadable(&report.skipped);
        report.summary.history = Some(HistoryStatus::Scanned {
            commits: report.summary.git_commits.unwrap_or(0),
            blobs: report.summary.files_scanned,
        });
    } else if !repos.is_empty() {
        unreadable = add_histories(&config, repos, &tuning, &mut report)?;
    } else {
        report.summary.history = not_scanned;
    }
    let state = report.state.take();
    let mut summary = report.summary;
    summary.history_unreadable = unreadable;
    if let (Some(sink), Some(path)) = (&trace, &config.trace) {
        let stats = sink.write_to_file(path)?;
        summary.trace_events_dropped = stats.dropped;
    }
    if config.metrics {
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "runtime:\n{}", report.runtime);
    }
    let outcome = reporter.finish(
        report.findings,
        &report.skipped,
        summary,
        &mut std::io::stderr().lock(),
    )?;
    if unreadable > 0 {
        // The report is written and names them; the state is not advanced,
        // so the next incremental run reads those commits again.
        return Err(partial_history_error(unreadable));
    }
    if let Some(state) = state {
        state.write().map_err(|source| ScanError::Output {
            what: format!("state file {}", state.path.display()),
            source,
        })?;
    }
    Ok(outcome)
}
