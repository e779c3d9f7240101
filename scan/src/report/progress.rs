//! Live progress: counters the workers bump, and the bar on stderr.
//!
//! [`Progress`] is a handful of relaxed atomic counters. Workers add to them
//! as they finish files and chunks; nothing waits on them and nothing is
//! published through them, so Relaxed is enough: a reader may see a count a
//! moment old, never a torn one. `files` and `bytes`, bumped per file and per
//! chunk by every worker, sit on their own cache lines so the bumps of
//! different workers do not fight over one line more than they must.
//!
//! [`ProgressDisplay`] is an indicatif spinner on stderr whose text is
//! rendered from a [`Progress`] snapshot on every tick (10 a second), so the
//! workers never touch the terminal or a lock.

use std::fmt::Write as _;
use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use magpie_core::sync::atomic::{AtomicU64, Ordering};
use magpie_core::sync::Arc;
use magpie_core::CachePadded;

use super::summary::{group, human_bytes, mb_per_s};

/// How often the bar redraws.
pub const TICK: Duration = Duration::from_millis(100);

/// Counters of a running scan, shared by every worker (wrap it in an `Arc`).
#[derive(Debug, Default)]
pub struct Progress {
    files: CachePadded<AtomicU64>,
    bytes: CachePadded<AtomicU64>,
    // Rare events share a line.
    findings: AtomicU64,
    skipped: AtomicU64,
}

/// The counters at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProgressSnapshot {
    /// Files (and archive members) finished.
    pub files: u64,
    /// Payload bytes scanned.
    pub bytes: u64,
    /// Findings so far (before dedup and the baseline).
    pub findings: u64,
    /// Objects skipped.
    pub skipped: u64,
}

impl Progress {
    /// All counters at zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `n` finished files.
    #[inline]
    pub fn add_files(&self, n: u64) {
        // Relaxed: a statistic; see the module docs.
        self.files.fetch_add(n, Ordering::Relaxed);
    }

    /// Adds `n` scanned bytes.
    #[inline]
    pub fn add_bytes(&self, n: u64) {
        // Relaxed: a statistic; see the module docs.
        self.bytes.fetch_add(n, Ordering::Relaxed);
    }

    /// Adds `n` findings.
    #[inline]
    pub fn add_findings(&self, n: u64) {
        // Relaxed: a statistic; see the module docs.
        self.findings.fetch_add(n, Ordering::Relaxed);
    }

    /// Adds `n` skipped objects.
    #[inline]
    pub fn add_skipped(&self, n: u64) {
        // Relaxed: a statistic; see the module docs.
        self.skipped.fetch_add(n, Ordering::Relaxed);
    }

    /// Reads every counter (each read is atomic; the set is not a single
    /// instant, which a progress line does not need).
    pub fn snapshot(&self) -> ProgressSnapshot {
        // Relaxed: a statistic; see the module docs.
        ProgressSnapshot {
            files: self.files.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            findings: self.findings.load(Ordering::Relaxed),
            skipped: self.skipped.load(Ordering::Relaxed),
        }
    }
}

/// The progress text for `s` after `elapsed`:
/// `1,234 files, 56.7 MB, 12.3 MB/s, 2 findings, 5 skipped`.
pub fn render_line(s: &ProgressSnapshot, elapsed: Duration) -> String {
    let mut line = format!(
        "{} files, {}, {:.1} MB/s",
        group(s.files),
        human_bytes(s.bytes),
        mb_per_s(s.bytes, elapsed)
    );
    if s.findings > 0 {
        let _ = write!(line, ", {} findings", group(s.findings));
    }
    if s.skipped > 0 {
        let _ = write!(line, ", {} skipped", group(s.skipped));
    }
    line
}

/// Whether to draw a bar: stderr is a terminal and `--no-progress` is off.
pub fn progress_wanted(no_progress: bool) -> bool {
    !no_progress && std::io::stderr().is_terminal()
}

/// The spinner on stderr. Hidden (every call a no-op) when not enabled.
/// Cleared from the screen by [`ProgressDisplay::finish`] or on drop, so the
/// summary that follows starts on a clean line.
#[derive(Debug)]
pub struct ProgressDisplay {
    bar: ProgressBar,
}

impl ProgressDisplay {
    /// Starts drawing `progress` on stderr if `enabled`.
    pub fn start(progress: Arc<Progress>, enabled: bool) -> Self {
        if !enabled {
            return Self {
                bar: ProgressBar::hidden(),
            };
        }
        let style = ProgressStyle::with_template("{spinner} scanning: {counts} [{elapsed}]")
            .unwrap_or_else(|_| ProgressStyle::default_spinner())
            .with_key(
                "counts",
                move |state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                    let _ = w.write_str(&render_line(&progress.snapshot(), state.elapsed()));
                },
            );
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        bar.set_style(style);
        bar.enable_steady_tick(TICK);
        Self { bar }
    }

    /// A display that draws nothing.
    pub fn hidden() -> Self {
        Self {
            bar: ProgressBar::hidden(),
        }
    }

    /// Whether anything is drawn.
    pub fn is_visible(&self) -> bool {
        !self.bar.is_hidden()
    }

    /// Stops and clears the bar.
    pub fn finish(self) {
        self.bar.finish_and_clear();
    }
}

impl Drop for ProgressDisplay {
    fn drop(&mut self) {
        if !self.bar.is_finished() {
            self.bar.finish_and_clear();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn concurrent_bumps_are_all_counted() {
        const THREADS: u64 = 4;
        const N: u64 = if cfg!(miri) { 100 } else { 50_000 };
        let p = Arc::new(Progress::new());
        let handles: Vec<_> = (0..THREADS)
            .map(|_| {
                let p = Arc::clone(&p);
                magpie_core::sync::thread::spawn(move || {
                    for _ in 0..N {
                        p.add_files(1);
                        p.add_bytes(3);
                        p.add_findings(1);
                        p.add_skipped(2);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let s = p.snapshot();
        assert_eq!(s.files, THREADS * N);
        assert_eq!(s.bytes, 3 * THREADS * N);
        assert_eq!(s.findings, THREADS * N);
        assert_eq!(s.skipped, 2 * THREADS * N);
    }

    #[test]
    fn progress_line_shows_counts_and_throughput() {
        let s = ProgressSnapshot {
            files: 1234,
            bytes: 5_000_000,
            findings: 0,
            skipped: 3,
        };
        assert_eq!(
            render_line(&s, Duration::from_secs(2)),
            "1,234 files, 5.0 MB, 2.5 MB/s, 3 skipped"
        );
    }

    #[test]
    fn disabled_display_draws_nothing() {
        let d = ProgressDisplay::start(Arc::new(Progress::new()), false);
        assert!(!d.is_visible());
        d.finish();
    }
}
