//! A recorder for criterion's custom-timed samples, and the ratio summary
//! the benches print after criterion's own output.
//!
//! Every bench routine here uses `iter_custom`, so it sees each call's
//! iteration count and measured time. Criterion calls the routine for its
//! warm-up first and then exactly `sample_size` times for the measurement, so
//! the last `sample_size` records of a benchmark are its measured samples.
//! (Criterion's `--quick` mode samples differently; the summary then uses
//! whatever the last calls were.)

use std::sync::Mutex;
use std::time::Duration;

#[derive(Debug)]
struct Entry {
    group: String,
    peer: String,
    iters: u64,
    total: Duration,
}

/// Collected samples, in the order they were taken.
#[derive(Debug, Default)]
pub struct Recorder {
    entries: Mutex<Vec<Entry>>,
}

impl Recorder {
    /// An empty recorder.
    pub const fn new() -> Self {
        Self {
            entries: Mutex::new(Vec::new()),
        }
    }

    /// Records one `iter_custom` call.
    pub fn record(&self, group: &str, peer: &str, iters: u64, total: Duration) {
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Entry {
                group: group.to_string(),
                peer: peer.to_string(),
                iters,
                total,
            });
    }

    /// Median time per iteration over the last `last_n` samples of
    /// `group/peer`, or `None` if it never ran.
    pub fn median(&self, group: &str, peer: &str, last_n: usize) -> Option<Duration> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let mut per_iter: Vec<f64> = entries
            .iter()
            .filter(|e| e.group == group && e.peer == peer && e.iters > 0)
            .map(|e| e.total.as_secs_f64() / e.iters as f64)
            .collect();
        let skip = per_iter.len().saturating_sub(last_n);
        per_iter.drain(..skip);
        median_of(&mut per_iter).map(Duration::from_secs_f64)
    }

    /// Peers recorded for `group`, in first-seen order.
    pub fn peers(&self, group: &str) -> Vec<String> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let mut peers: Vec<String> = Vec::new();
        for e in entries.iter().filter(|e| e.group == group) {
            if !peers.contains(&e.peer) {
                peers.push(e.peer.clone());
            }
        }
        peers
    }
}

/// The median of `xs` (mean of the middle two for an even count).
pub fn median_of(xs: &mut [f64]) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    Some(if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    })
}

/// The spread of a set of per-round ratios: minimum, quartiles, maximum.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    /// Number of rounds.
    pub n: usize,
    /// Smallest ratio.
    pub min: f64,
    /// First quartile.
    pub q1: f64,
    /// Median.
    pub median: f64,
    /// Third quartile.
    pub q3: f64,
    /// Largest ratio.
    pub max: f64,
}

impl Spread {
    /// The spread of `xs` (quartiles by linear interpolation between the
    /// sorted values), or `None` when empty.
    pub fn of(xs: &[f64]) -> Option<Spread> {
        if xs.is_empty() {
            return None;
        }
        let mut v = xs.to_vec();
        v.sort_by(f64::total_cmp);
        let q = |p: f64| {
            let pos = p * (v.len() - 1) as f64;
            let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
            v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
        };
        Some(Spread {
            n: v.len(),
            min: v[0],
            q1: q(0.25),
            median: q(0.5),
            q3: q(0.75),
            max: v[v.len() - 1],
        })
    }
}

impl std::fmt::Display for Spread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "median {:.3} (min {:.3}, q1 {:.3}, q3 {:.3}, max {:.3}; {} rounds)",
            self.median, self.min, self.q1, self.q3, self.max, self.n
        )
    }
}

/// Per-round ratios `a / b` in `group`: the `k`-th timed run of `a` divided
/// by the `k`-th timed run of `b`. In [`alternate`]'s records every peer runs
/// once per round, so these pair runs of the same round.
pub fn round_ratios(rec: &Recorder, group: &str, a: &str, b: &str) -> Vec<f64> {
    let entries = rec.entries.lock().unwrap_or_else(|e| e.into_inner());
    let runs = |peer: &str| -> Vec<f64> {
        entries
            .iter()
            .filter(|e| e.group == group && e.peer == peer && e.iters > 0)
            .map(|e| e.total.as_secs_f64() / e.iters as f64)
            .collect()
    };
    let (xa, xb) = (runs(a), runs(b));
    xa.iter().zip(&xb).map(|(x, y)| x / y).collect()
}

/// One line per peer in `against`: the spread of `subject`'s per-round
/// ratio to it in `group` (lines for peers that did not run are left out).
pub fn ratio_spreads(rec: &Recorder, group: &str, subject: &str, against: &[&str]) -> String {
    let mut out = String::new();
    for peer in against {
        if let Some(s) = Spread::of(&round_ratios(rec, group, subject, peer)) {
            out.push_str(&format!("  {group}: {subject} / {peer} {s}\n"));
        }
    }
    out
}

/// How to summarise one benchmark group.
#[derive(Clone, Copy, Debug)]
pub struct GroupSpec {
    /// Criterion group name.
    pub name: &'static str,
    /// Tasks per iteration (for ns/task); 0 to omit.
    pub tasks: u64,
    /// Samples per benchmark in this group (criterion's `sample_size`).
    pub samples: usize,
    /// Peer every other peer's time is divided by (`0.42x cb_seed000`).
    pub ratio_to: Option<&'static str>,
    /// Peer whose time is divided by every other peer's (`speedup 1.93`).
    pub speedup_over: Option<&'static str>,
}

/// Formats the summary of `specs`: per peer, the median time per iteration,
/// ns/task, and the requested ratios.
pub fn summary(rec: &Recorder, specs: &[GroupSpec]) -> String {
    let mut out = String::new();
    for spec in specs {
        let peers = rec.peers(spec.name);
        if peers.is_empty() {
            continue;
        }
        out.push_str(spec.name);
        if spec.tasks > 0 {
            out.push_str(&format!(" ({} tasks)", spec.tasks));
        }
        out.push('\n');
        let base = |p: Option<&str>| p.and_then(|p| rec.median(spec.name, p, spec.samples));
        let ratio_base = base(spec.ratio_to);
        let speedup_base = base(spec.speedup_over);
        for peer in &peers {
            let Some(m) = rec.median(spec.name, peer, spec.samples) else {
                continue;
            };
            out.push_str(&format!(
                "  {peer:<14} median {:>10.3} ms",
                m.as_secs_f64() * 1e3
            ));
            if spec.tasks > 0 {
                let ns = m.as_secs_f64() * 1e9 / spec.tasks as f64;
                out.push_str(&format!("  {ns:>9.2} ns/task"));
            }
            if let (Some(b), Some(name)) = (ratio_base, spec.ratio_to) {
                if name != peer {
                    out.push_str(&format!(
                        "  {:.3}x {name}",
                        m.as_secs_f64() / b.as_secs_f64()
                    ));
                }
            }
            if let (Some(b), Some(name)) = (speedup_base, spec.speedup_over) {
                if name != peer {
                    out.push_str(&format!(
                        "  speedup {:.3} over {name}",
                        b.as_secs_f64() / m.as_secs_f64()
                    ));
                }
            }
            out.push('\n');
        }
    }
    out
}

/// Runs every peer once per round for `rounds` rounds, the peers strictly
/// alternating, and records each run in `rec` under `group`. Each `run`
/// returns the time of one iteration.
///
/// This is the measurement the ratios in docs/benchmarks.md come from:
/// criterion runs all samples of one peer before the next, so a change in
/// background load between peers shows up as a ratio; here it hits every
/// peer alike.
///
/// The order inside a round follows [`round_order`], a balanced design: over
/// [`balanced_rounds`]`(n)` consecutive rounds every peer runs right after
/// every other peer equally often. What ran just before matters on this
/// machine (a vCPU left idle by one peer wakes slowly for the next; a pool
/// whose threads still spin hands the next run warm cores), so a fixed cyclic
/// order, where a peer always follows the same neighbour, biases the ratios.
/// Pass a multiple of `balanced_rounds(n)` for the full balance.
pub fn alternate(
    rec: &Recorder,
    group: &str,
    rounds: usize,
    peers: &mut [(&str, &mut dyn FnMut() -> Duration)],
) {
    let n = peers.len();
    // A zero-iteration record per peer, in the order given, so that reports
    // (which list peers in first-seen order) keep the caller's order rather
    // than the first round's; `median` skips such records.
    for (name, _) in peers.iter() {
        rec.record(group, name, 0, Duration::ZERO);
    }
    for round in 0..rounds {
        for k in round_order(n, round) {
            let (name, run) = &mut peers[k];
            let t = run();
            rec.record(group, name, 1, t);
        }
    }
}

/// Rounds in one full balanced design for `n` peers: `n` when `n` is even,
/// `2n` when it is odd (a Williams design needs the mirrored rows then).
pub fn balanced_rounds(n: usize) -> usize {
    if n % 2 == 0 {
        n
    } else {
        2 * n
    }
}

/// The smallest multiple of [`balanced_rounds`]`(n)` that is at least
/// `at_least`: how many rounds a group of `n` peers runs.
pub fn balanced_rounds_at_least(n: usize, at_least: usize) -> usize {
    let full = balanced_rounds(n).max(1);
    at_least.div_ceil(full).max(1) * full
}

/// The peers' order in round `round` of `n` peers: row `round` of a Williams
/// design (carry-over balanced Latin square). Row 0 is
/// `0, 1, n-1, 2, n-2, ...`; row `i` adds `i` to every entry modulo `n`; for
/// odd `n`, rows `n..2n` are rows `0..n` reversed. Every peer appears once
/// per round and, over `balanced_rounds(n)` rounds, each ordered pair of
/// distinct peers is adjacent the same number of times (once for even `n`,
/// twice for odd `n`).
pub fn round_order(n: usize, round: usize) -> Vec<usize> {
    if n == 0 {
        return Vec::new();
    }
    let base = (0..n).map(|j| {
        if j == 0 {
            0
        } else if j % 2 == 1 {
            j.div_ceil(2)
        } else {
            n - j / 2
        }
    });
    let row = round % balanced_rounds(n);
    let shift = row % n;
    let mut order: Vec<usize> = base.map(|b| (b + shift) % n).collect();
    if row >= n {
        order.reverse();
    }
    order
}

/// Whether the alternating pass should run `group`: the bench's first
/// non-flag argument (criterion's filter, `cargo bench --bench typed --
/// tree_d20`) must be a substring of it, if given.
pub fn selected(group: &str) -> bool {
    std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .is_none_or(|f| group.contains(&f))
}

/// The summary of `specs` as CSV rows
/// `bench,group,peer,tasks,median_ns,ns_per_task,ratio,ratio_to,speedup,speedup_over`
/// (a header first), for `benches/plot.py`.
pub fn csv(rec: &Recorder, bench: &str, specs: &[GroupSpec]) -> String {
    let mut out = String::from(
        "bench,group,peer,tasks,median_ns,ns_per_task,ratio,ratio_to,speedup,speedup_over\n",
    );
    for spec in specs {
        let base = |p: Option<&str>| p.and_then(|p| rec.median(spec.name, p, spec.samples));
        let (rb, sb) = (base(spec.ratio_to), base(spec.speedup_over));
        for peer in rec.peers(spec.name) {
            let Some(m) = rec.median(spec.name, &peer, spec.samples) else {
                continue;
            };
            let ns = m.as_secs_f64() * 1e9;
            let per_task = if spec.tasks > 0 {
                format!("{:.3}", ns / spec.tasks as f64)
            } else {
                String::new()
            };
            let ratio = rb.map_or(String::new(), |b| {
                format!("{:.4}", m.as_secs_f64() / b.as_secs_f64())
            });
            let speedup = sb.map_or(String::new(), |b| {
                format!("{:.4}", b.as_secs_f64() / m.as_secs_f64())
            });
            out.push_str(&format!(
                "{bench},{},{peer},{},{ns:.0},{per_task},{ratio},{},{speedup},{}\n",
                spec.name,
                spec.tasks,
                spec.ratio_to.unwrap_or(""),
                spec.speedup_over.unwrap_or(""),
            ));
        }
    }
    out
}

/// Writes `contents` to `target/bench-results/NAME` (creating the folder)
/// and returns the path, or prints why it could not.
pub fn save_results(name: &str, contents: &str) -> Option<std::path::PathBuf> {
    // Benches run with the package folder as the working directory.
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = manifest
        .parent()
        .unwrap_or(manifest)
        .join("target/bench-results");
    let path = dir.join(name);
    match std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, contents)) {
        Ok(()) => Some(path),
        Err(e) => {
            eprintln!("could not write {}: {e}", path.display());
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_uses_only_the_last_samples() {
        let rec = Recorder::new();
        // Warm-up calls: slow.
        rec.record("g", "p", 1, Duration::from_millis(100));
        rec.record("g", "p", 2, Duration::from_millis(200));
        // Measured samples: 10, 20, 30 ms per iteration.
        for ms in [10u64, 30, 20] {
            rec.record("g", "p", 2, Duration::from_millis(2 * ms));
        }
        assert_eq!(rec.median("g", "p", 3), Some(Duration::from_millis(20)));
        assert_eq!(rec.median("g", "q", 3), None);
    }

    #[test]
    fn round_ratios_pair_runs_of_the_same_round() {
        let rec = Recorder::new();
        rec.record("g", "a", 0, Duration::ZERO);
        rec.record("g", "b", 0, Duration::ZERO);
        for (a, b) in [(10u64, 20u64), (30, 10), (5, 5)] {
            rec.record("g", "a", 1, Duration::from_millis(a));
            rec.record("g", "b", 1, Duration::from_millis(b));
        }
        let r = round_ratios(&rec, "g", "a", "b");
        assert_eq!(r.len(), 3);
        assert!((r[0] - 0.5).abs() < 1e-9 && (r[1] - 3.0).abs() < 1e-9);
        let s = Spread::of(&r).unwrap();
        assert_eq!((s.n, s.median), (3, 1.0));
        assert!((s.min - 0.5).abs() < 1e-9 && (s.max - 3.0).abs() < 1e-9);
        assert!((s.q1 - 0.75).abs() < 1e-9 && (s.q3 - 2.0).abs() < 1e-9);
        assert!(ratio_spreads(&rec, "g", "a", &["b", "c"]).contains("a / b median 1.000"));
        assert_eq!(Spread::of(&[]), None);
    }

    #[test]
    fn median_of_even_count_averages_the_middle_pair() {
        assert_eq!(median_of(&mut [4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median_of(&mut []), None);
    }

    #[test]
    fn summary_reports_ratios_and_speedups() {
        let rec = Recorder::new();
        rec.record("work", "seq", 1, Duration::from_millis(100));
        rec.record("work", "cb_seed000", 1, Duration::from_millis(50));
        let s = summary(
            &rec,
            &[GroupSpec {
                name: "work",
                tasks: 1000,
                samples: 1,
                ratio_to: Some("cb_seed000"),
                speedup_over: Some("seq"),
            }],
        );
        assert!(s.contains("speedup 2.000 over seq"), "{s}");
        assert!(s.contains("2.000x cb_seed000"), "{s}");
        assert!(s.contains("50000.00 ns/task"), "{s}");
    }
    #[test]
    fn round_order_balances_who_runs_right_after_whom() {
        for n in 1..=9 {
            let rounds = balanced_rounds(n);
            let mut follows = vec![vec![0usize; n]; n];
            for r in 0..rounds {
                let order = round_order(n, r);
                let mut seen = order.clone();
                seen.sort_unstable();
                assert_eq!(
                    seen,
                    (0..n).collect::<Vec<_>>(),
                    "n={n} round {r}: a permutation"
                );
                for w in order.windows(2) {
                    follows[w[0]][w[1]] += 1;
                }
            }
            let per_pair = if n % 2 == 0 { 1 } else { 2 };
            for (a, row) in follows.iter().enumerate() {
                for (b, &count) in row.iter().enumerate() {
                    let want = if a == b { 0 } else { per_pair };
                    assert_eq!(count, want, "n={n}: {b} after {a}");
                }
            }
        }
    }

    #[test]
    fn balanced_rounds_at_least_is_a_whole_number_of_designs() {
        assert_eq!(balanced_rounds_at_least(8, 11), 16);
        assert_eq!(balanced_rounds_at_least(7, 11), 14);
        assert_eq!(balanced_rounds_at_least(3, 11), 12);
        assert_eq!(balanced_rounds_at_least(2, 11), 12);
        assert_eq!(balanced_rounds_at_least(2, 0), 2);
    }

    #[test]
    fn alternate_reports_peers_in_the_callers_order() {
        let rec = Recorder::new();
        let mut runs = [0u32; 4];
        let [ra, rb, rc, rd] = &mut runs;
        let mut a = || {
            *ra += 1;
            Duration::from_millis(1)
        };
        let mut b = || {
            *rb += 1;
            Duration::from_millis(1)
        };
        let mut c = || {
            *rc += 1;
            Duration::from_millis(1)
        };
        let mut d = || {
            *rd += 1;
            Duration::from_millis(1)
        };
        // Row 0 of the design for four peers runs them as a, b, d, c.
        assert_eq!(round_order(4, 0), [0, 1, 3, 2]);
        alternate(
            &rec,
            "g",
            4,
            &mut [("a", &mut a), ("b", &mut b), ("c", &mut c), ("d", &mut d)],
        );
        assert_eq!(rec.peers("g"), ["a", "b", "c", "d"]);
        assert_eq!(runs, [4; 4]);
        assert_eq!(
            rec.median("g", "c", usize::MAX),
            Some(Duration::from_millis(1))
        );
    }

    #[test]
    fn alternate_follows_the_balanced_order_and_records_every_run() {
        let rec = Recorder::new();
        let order = std::cell::RefCell::new(Vec::new());
        let mut a = || {
            order.borrow_mut().push('a');
            Duration::from_millis(1)
        };
        let mut b = || {
            order.borrow_mut().push('b');
            Duration::from_millis(3)
        };
        alternate(&rec, "g", 3, &mut [("a", &mut a), ("b", &mut b)]);
        assert_eq!(order.into_inner(), vec!['a', 'b', 'b', 'a', 'a', 'b']);
        assert_eq!(rec.median("g", "b", 3), Some(Duration::from_millis(3)));
        let out = csv(
            &rec,
            "t",
            &[GroupSpec {
                name: "g",
                tasks: 0,
                samples: 3,
                ratio_to: Some("a"),
                speedup_over: None,
            }],
        );
        assert!(out.contains("t,g,b,0,3000000,,3.0000,a,,"), "{out}");
    }
}
