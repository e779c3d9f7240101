//! [`Summary`]: a run's totals, shown on stderr and in the `json` format.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::time::Duration;

use super::json::write_str;
use super::text::Palette;

/// A run's totals. The pipeline fills it in; the reporter sets
/// [`Summary::findings`] and [`Summary::baseline_suppressed`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Summary {
    /// `scan git`: the commits the history walk covered (the text summary
    /// then says blobs, not files); `None` for a directory scan.
    pub git_commits: Option<u64>,
    /// `scan DIR` on a repository: whether its history was scanned (shown
    /// as its own line, and as `history` in `json`); `None` when no
    /// repository was found.
    pub history: Option<crate::git::HistoryStatus>,
    /// Files (and archive members) whose bytes were scanned.
    pub files_scanned: u64,
    /// Payload bytes scanned (the overlap carried between chunks is not
    /// counted twice).
    pub bytes_scanned: u64,
    /// Objects not scanned, by reason label (`too-large`, `fifo`, ...).
    pub skipped: BTreeMap<&'static str, u64>,
    /// Archives opened.
    pub archives: u64,
    /// Members read from archives.
    pub archive_members: u64,
    /// Findings reported.
    pub findings: u64,
    /// Findings left out because their fingerprint is in the baseline.
    pub baseline_suppressed: u64,
    /// Worker threads used.
    pub workers: usize,
    /// Wall time of the scan.
    pub elapsed: Duration,
    /// Trace events dropped because the `--trace` buffer was full.
    pub trace_events_dropped: u64,
    /// What ignore files (with `--respect-gitignore`) and `--exclude` left
    /// out of the walk.
    pub excluded: crate::walk::Exclusions,
    /// `--respect-gitignore` was on: the summary says what the rules left out
    /// even when that is nothing.
    pub respect_gitignore: bool,
    /// Matches left out because their line carries `gitleaks:allow` or
    /// `magpie:allow`.
    pub inline_allowed: u64,
    /// Findings left out because a `.gitleaksignore` file lists them.
    pub ignore_file_suppressed: u64,
    /// Add "-v names them" to the skipped line (text reports without `-v`).
    pub skip_hint: bool,
    /// `--shard I/N`: which shard ran and how many items it owned (a
    /// line of the text summary, `shard` in `json`).
    pub shard: Option<crate::shard::ShardSummary>,
    /// History objects (trees, commits, blobs) that could not be read: the
    /// run exits 2 after its report. Carried to `scan merge` in the `jsonl`
    /// summary record; not shown otherwise.
    pub history_unreadable: u64,
    /// Extra counters shown with `--metrics` (task counts, bytes fetched,
    /// frontier back-pressure, ...), by name.
    pub metrics: BTreeMap<&'static str, u64>,
}

impl Summary {
    /// Throughput in MB/s (1 MB = 10^6 bytes); 0 when no time has passed.
    pub fn throughput_mb_s(&self) -> f64 {
        mb_per_s(self.bytes_scanned, self.elapsed)
    }

    /// Total objects skipped, over every reason.
    pub fn skipped_total(&self) -> u64 {
        self.skipped.values().sum()
    }

    /// Writes the human summary (the lines printed on stderr at the end).
    /// `metrics` adds the [`Summary::metrics`] counters.
    pub fn write_text(&self, out: &mut dyn Write, color: bool, metrics: bool) -> io::Result<()> {
        let p = Palette::new(color);
        let mut s = String::new();
        let what = match self.git_commits {
            Some(c) => format!(
                "{} blobs of {} {}",
                group(self.files_scanned),
                group(c),
                plural(c, "commit", "commits")
            ),
            None => format!("{} files", group(self.files_scanned)),
        };
        s.push_str(&format!(
            "{}scanned{} {what}, {} in {:.2} s ({:.1} MB/s, {} workers)\n",
            p.bold,
            p.reset,
            human_bytes(self.bytes_scanned),
            self.elapsed.as_secs_f64(),
            self.throughput_mb_s(),
            self.workers
        ));
        if let (Some(h), None) = (&self.history, self.git_commits) {
            s.push_str(&h.line());
            s.push('\n');
        }
        if let Some(sh) = &self.shard {
            s.push_str(&format!(
                "shard {}/{} (0-based): owned {} {} (files by path, blobs by id)\n",
                sh.index,
                sh.count,
                group(sh.owned),
                plural(sh.owned, "item", "items"),
            ));
        }
        if self.archives > 0 || self.archive_members > 0 {
            s.push_str(&format!(
                "archives {}, members {}\n",
                group(self.archives),
                group(self.archive_members)
            ));
        }
        if !self.skipped.is_empty() {
            let parts: Vec<String> = self
                .skipped
                .iter()
                .map(|(k, v)| format!("{k} {}", group(*v)))
                .collect();
            s.push_str(&format!(
                "skipped {} ({}){}\n",
                group(self.skipped_total()),
                parts.join(", "),
                if self.skip_hint {
                    "; -v names them"
                } else {
                    ""
                }
            ));
        }
        let x = &self.excluded;
        if self.respect_gitignore || x.ignored_files + x.ignored_dirs > 0 {
            s.push_str(&format!(
                "ignore files excluded {} {} and {} {} (--respect-gitignore)\n",
                group(x.ignored_files),
                plural(x.ignored_files, "file", "files"),
                group(x.ignored_dirs),
                plural(x.ignored_dirs, "directory", "directories"),
            ));
        }
        if x.excluded_files + x.excluded_dirs > 0 {
            s.push_str(&format!(
                "--exclude left out {} {} and {} {}\n",
                group(x.excluded_files),
                plural(x.excluded_files, "file", "files"),
                group(x.excluded_dirs),
                plural(x.excluded_dirs, "directory", "directories"),
            ));
        }
        let colour = if self.findings > 0 { p.red } else { p.green };
        s.push_str(&format!(
            "{colour}{}{} {}",
            group(self.findings),
            p.reset,
            if self.findings == 1 {
                "finding"
            } else {
                "findings"
            }
        ));
        let mut hidden = Vec::new();
        if self.baseline_suppressed > 0 {
            hidden.push(format!(
                "{} more in the baseline",
                group(self.baseline_suppressed)
            ));
        }
        if self.inline_allowed > 0 {
            hidden.push(format!("{} allowed inline", group(self.inline_allowed)));
        }
        if self.ignore_file_suppressed > 0 {
            hidden.push(format!(
                "{} in .gitleaksignore",
                group(self.ignore_file_suppressed)
            ));
        }
        if !hidden.is_empty() {
            s.push_str(&format!(" ({})", hidden.join(", ")));
        }
        s.push('\n');
        if self.trace_events_dropped > 0 {
            s.push_str(&format!(
                "trace: {} events dropped (buffer full)\n",
                group(self.trace_events_dropped)
            ));
        }
        if metrics {
            for (k, v) in &self.metrics {
                s.push_str(&format!("  {k:<28} {}\n", group(*v)));
            }
        }
        out.write_all(s.as_bytes())
    }

    /// Writes the summary as one JSON object (the `summary` member of the
    /// `json` format).
    pub fn write_json(&self, out: &mut dyn Write) -> io::Result<()> {
        write!(
            out,
            "{{\"files_scanned\":{},\"bytes_scanned\":{},\"skipped\":{{",
            self.files_scanned, self.bytes_scanned
        )?;
        write_counters(out, &self.skipped)?;
        let x = &self.excluded;
        write!(
            out,
            "}},\"excluded\":{{\"ignore_files\":{},\"ignore_dirs\":{},\
             \"exclude_glob_files\":{},\"exclude_glob_dirs\":{}}}",
            x.ignored_files, x.ignored_dirs, x.excluded_files, x.excluded_dirs
        )?;
        write!(
            out,
            ",\"archives\":{},\"archive_members\":{},\"findings\":{},\
             \"baseline_suppressed\":{},\"inline_allowed\":{},\"ignore_file_suppressed\":{},\"workers\":{},\"elapsed_seconds\":{:.6},\
             \"throughput_mb_per_second\":{:.3},\"trace_events_dropped\":{},\"metrics\":{{",
            self.archives,
            self.archive_members,
            self.findings,
            self.baseline_suppressed,
            self.inline_allowed,
            self.ignore_file_suppressed,
            self.workers,
            self.elapsed.as_secs_f64(),
            self.throughput_mb_s(),
            self.trace_events_dropped
        )?;
        write_counters(out, &self.metrics)?;
        out.write_all(b"}")?;
        if let Some(h) = &self.history {
            write!(out, ",\"history\":{}", h.to_json())?;
        }
        if let Some(sh) = &self.shard {
            write!(
                out,
                ",\"shard\":{{\"index\":{},\"count\":{},\"owned\":{}}}",
                sh.index, sh.count, sh.owned
            )?;
        }
        out.write_all(b"}")
    }
}

fn write_counters(out: &mut dyn Write, m: &BTreeMap<&'static str, u64>) -> io::Result<()> {
    for (i, (k, v)) in m.iter().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        write_str(out, k)?;
        write!(out, ":{v}")?;
    }
    Ok(())
}

fn plural(n: u64, one: &'static str, many: &'static str) -> &'static str {
    if n == 1 {
        one
    } else {
        many
    }
}

/// `bytes` over `elapsed` in MB/s (10^6 bytes); 0 for a zero duration.
pub fn mb_per_s(bytes: u64, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs > 0.0 {
        bytes as f64 / 1e6 / secs
    } else {
        0.0
    }
}

/// `n` bytes in decimal units: `999 B`, `1.2 kB`, `3.4 MB`, `5.6 GB`, `7.8 TB`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["kB", "MB", "GB", "TB"];
    if n < 1000 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1000.0;
    let mut unit = 0;
    while v >= 1000.0 && unit + 1 < UNITS.len() {
        v /= 1000.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// `n` with thousands separated by `,`: `1,234,567`.
pub fn group(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_inserts_separators_every_three_digits() {
        assert_eq!(group(0), "0");
        assert_eq!(group(999), "999");
        assert_eq!(group(1000), "1,000");
        assert_eq!(group(1234567), "1,234,567");
        assert_eq!(group(u64::MAX), "18,446,744,073,709,551,615");
    }

    #[test]
    fn human_bytes_picks_the_largest_unit_below_1000() {
        assert_eq!(human_bytes(999), "999 B");
        assert_eq!(human_bytes(1000), "1.0 kB");
        assert_eq!(human_bytes(1_500_000), "1.5 MB");
        assert_eq!(human_bytes(2_000_000_000), "2.0 GB");
        assert_eq!(human_bytes(5_000_000_000_000_000), "5000.0 TB");
    }

    #[test]
    fn throughput_is_zero_for_zero_elapsed_time() {
        assert_eq!(mb_per_s(10, Duration::ZERO), 0.0);
        assert_eq!(mb_per_s(3_000_000, Duration::from_secs(2)), 1.5);
    }
}
