//! `scan-plant OUT_DIR --seed N [--files K]`: writes a reproducible corpus
//! of realistic files with planted synthetic secrets and decoys, and
//! `OUT_DIR/ground-truth.json` (see the `scan_plant` library).
//!
//! `scan-plant --list-rules` prints the built-in rule table (RULES.md).
//!
//! `scan-plant --engine-throughput DIR [--prefilter shiftor|teddy|dfa]` instead
//! measures the rule engine alone: it reads every regular file under DIR
//! into memory, then scans each one on this thread and prints MB/s.
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use scan::rules::{PrefilterKind, RuleSet, Scratch};

fn usage() -> ExitCode {
    eprintln!("usage: scan-plant OUT_DIR --seed N [--files K]\n       scan-plant --git REPO --seed N [--rounds K]\n       scan-plant --engine-throughput DIR [--prefilter shiftor|teddy|dfa]\n       scan-plant --list-rules");
    ExitCode::from(2)
}

fn walk(dir: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let ft = e.file_type()?;
        if ft.is_dir() {
            walk(&e.path(), out)?;
        } else if ft.is_file() {
            out.push((e.path(), std::fs::read(e.path())?));
        }
    }
    Ok(())
}

/// Nanoseconds this thread has run on a CPU (Linux `schedstat`), so that
/// throughput can be quoted per CPU-second on a shared machine.
fn thread_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

fn throughput(dir: &Path, kind: Option<PrefilterKind>) -> ExitCode {
    let mut files = Vec::new();
    if let Err(e) = walk(dir, &mut files) {
        eprintln!("scan-plant: {}: {e}", dir.display());
        return ExitCode::from(2);
    }
    let total: usize = files.iter().map(|(_, d)| d.len()).sum();
    let mut rules = RuleSet::builtin();
    if let Some(k) = kind {
        rules = rules.with_prefilter(k);
    }
    println!(
        "{} files, {:.1} MB, {} rules, {} keywords, prefilter {:?}, context_len {}",
        files.len(),
        total as f64 / 1e6,
        rules.len(),
        rules.keyword_count(),
        rules.prefilter_kind(),
        rules.context_len()
    );
    if std::env::var_os("SCAN_PLANT_KEYWORDS").is_some() {
        for k in rules.keyword_list() {
            println!("kw {k}");
        }
    }
    let show: usize = std::env::var("SCAN_PLANT_SHOW")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut scratch = Scratch::new();
    let mut out = Vec::new();
    let mut per_rule = std::collections::BTreeMap::<String, usize>::new();
    for round in 0..3 {
        let t = Instant::now();
        let cpu0 = thread_cpu_ns();
        let mut n = 0;
        for (_, data) in &files {
            out.clear();
            rules.scan(data, 0..data.len(), &mut scratch, &mut out);
            n += out.len();
            if round == 0 {
                for m in &out {
                    let id = rules.rule(m.rule).id.clone();
                    let seen = per_rule.entry(id.clone()).or_default();
                    *seen += 1;
                    if *seen <= show {
                        let lo = m.start.saturating_sub(20);
                        let hi = (m.end + 10).min(data.len());
                        println!("  [{id}] {:?}", String::from_utf8_lossy(&data[lo..hi]));
                    }
                }
            }
        }
        let dt = t.elapsed().as_secs_f64();
        let cpu = match (cpu0, thread_cpu_ns()) {
            (Some(a), Some(b)) => format!(
                ", {:.0} MB per CPU-second",
                total as f64 / 1e6 / ((b - a) as f64 / 1e9)
            ),
            _ => String::new(),
        };
        println!(
            "round {round}: {n} findings in {dt:.3} s = {:.0} MB/s wall{cpu}",
            total as f64 / 1e6 / dt
        );
    }
    for (id, n) in per_rule {
        println!("  {id}: {n}");
    }
    ExitCode::SUCCESS
}

/// `scan-plant --git REPO --seed N [--rounds K]`: a planted history
/// (`scan_plant::history`), its ground truth in `history-truth.json` beside
/// REPO.
fn history(args: &[String]) -> ExitCode {
    let [repo, rest @ ..] = args else {
        return usage();
    };
    let (mut seed, mut rounds) = (None, 4);
    for pair in rest.chunks(2) {
        match (pair[0].as_str(), pair.get(1).map(|v| v.parse::<u64>())) {
            ("--seed", Some(Ok(v))) => seed = Some(v),
            ("--rounds", Some(Ok(v))) => rounds = v as usize,
            _ => return usage(),
        }
    }
    let Some(seed) = seed else {
        return usage();
    };
    match scan_plant::history::generate_history(Path::new(repo), seed, rounds) {
        Ok(t) => {
            eprintln!(
                "planted {} findings-to-be in {} commits ({} rounds of {} scenarios)",
                t.expected.len(),
                t.commits,
                rounds,
                scan_plant::history::SCENARIOS.len()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("scan-plant: {e}");
            ExitCode::from(1)
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--list-rules") {
        // The rule table of RULES.md.
        let rules = RuleSet::builtin();
        println!("| id | family | description | keywords |\n| --- | --- | --- | --- |");
        for id in rules.ids() {
            let r = rules.rule(id);
            let kws: Vec<String> = r
                .keywords
                .iter()
                .map(|k| format!("`{}`", k.replace('|', "\\|")))
                .collect();
            println!(
                "| `{}` | {} | {} | {} |",
                r.id,
                r.family,
                r.description,
                kws.join(" ")
            );
        }
        return ExitCode::SUCCESS;
    }
    if args.first().map(String::as_str) == Some("--engine-throughput") {
        let Some(dir) = args.get(1) else {
            return usage();
        };
        let kind = match args.get(2..4) {
            None => None,
            Some([flag, k]) if flag == "--prefilter" && k == "teddy" => Some(PrefilterKind::Teddy),
            Some([flag, k]) if flag == "--prefilter" && k == "dfa" => Some(PrefilterKind::Dfa),
            Some([flag, k]) if flag == "--prefilter" && k == "shiftor" => {
                Some(PrefilterKind::ShiftOr)
            }
            _ => return usage(),
        };
        return throughput(Path::new(dir), kind);
    }
    if args.first().map(String::as_str) == Some("--git") {
        return history(&args[1..]);
    }
    let mut out = None;
    let mut seed = None;
    let mut files = scan_plant::DEFAULT_FILES;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--seed" => match it.next().and_then(|v| v.parse().ok()) {
                Some(v) => seed = Some(v),
                None => return usage(),
            },
            "--files" => match it.next().and_then(|v| v.parse().ok()) {
                Some(v) => files = v,
                None => return usage(),
            },
            _ if out.is_none() && !a.starts_with("--") => out = Some(PathBuf::from(a)),
            _ => return usage(),
        }
    }
    let (Some(out), Some(seed)) = (out, seed) else {
        return usage();
    };
    match scan_plant::generate(&out, seed, files) {
        Ok(t) => {
            println!(
                "{}: {} files, {} planted secrets ({} rules), {} decoys",
                out.display(),
                t.files,
                t.secrets.len(),
                t.secrets
                    .iter()
                    .map(|s| &s.rule)
                    .collect::<std::collections::BTreeSet<_>>()
                    .len(),
                t.decoys.len()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("scan-plant: {}: {e}", out.display());
            ExitCode::from(2)
        }
    }
}
