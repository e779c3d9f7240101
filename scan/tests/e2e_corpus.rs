//! The planted corpus, end to end through the binary: every planted secret
//! is reported at its ground-truth line, column and byte offset, no decoy
//! and nothing else is, whatever the chunk size; and through the library,
//! the run's accounting holds.
#![cfg(not(loom))]

mod e2e_common;

use std::collections::BTreeSet;

use e2e_common::*;
use scan_plant::{generate, GroundTruth, GROUND_TRUTH};

/// (path below the corpus root, line, column, offset, rule, secret)
type Key = (String, u64, u64, u64, String, String);

fn planted(truth: &GroundTruth) -> BTreeSet<Key> {
    truth
        .secrets
        .iter()
        .map(|s| {
            (
                s.path.clone(),
                s.line,
                s.column,
                s.offset,
                s.rule.clone(),
                s.secret.clone(),
            )
        })
        .collect()
}

fn reported(run: &Run) -> BTreeSet<Key> {
    run.findings()
        .iter()
        .filter_map(|f| {
            let path = f["path"].as_str().unwrap();
            // The ground truth lists every secret itself: not corpus content.
            (path != GROUND_TRUTH).then(|| {
                (
                    path.to_string(),
                    f["line"].as_u64().unwrap(),
                    f["column"].as_u64().unwrap(),
                    f["offset"].as_u64().unwrap(),
                    f["rule"].as_str().unwrap().to_string(),
                    f["secret"].as_str().unwrap().to_string(),
                )
            })
        })
        .collect()
}

fn check_corpus(seed: u64, chunk: &str) {
    let dir = tempdir();
    let truth = generate(dir.path(), seed, scan_plant::DEFAULT_FILES).unwrap();
    let run = scan_in(
        dir.path(),
        ["--format", "json", "--metrics", "--chunk-size", chunk, "."],
    );
    assert_eq!(run.code, Some(1), "findings exit 1; stderr: {}", run.stderr);
    let want = planted(&truth);
    let got = reported(&run);
    let missed: Vec<_> = want.difference(&got).collect();
    let extra: Vec<_> = got.difference(&want).collect();
    assert!(
        missed.is_empty() && extra.is_empty(),
        "seed {seed}, chunk {chunk}:\nmissed {missed:#?}\nextra {extra:#?}"
    );
    let decoys: BTreeSet<(&str, u64)> = truth
        .decoys
        .iter()
        .map(|d| (d.path.as_str(), d.line))
        .collect();
    for (path, line, ..) in &got {
        assert!(
            !decoys.contains(&(path.as_str(), *line)),
            "decoy reported at {path}:{line}"
        );
    }
    let summary = run.summary();
    assert_accounting(&summary);
    assert!(summary["archives"].as_u64().unwrap() >= 3, "{summary}");
    assert!(summary["archive_members"].as_u64().unwrap() > 0);
}

#[test]
fn planted_corpus_is_found_exactly_with_default_chunks() {
    check_corpus(7, "256K");
}

#[test]
fn planted_corpus_is_found_exactly_with_chunks_smaller_than_the_overlap() {
    // 1000 bytes is far below the rules' context (12.8 KB): every long
    // secret crosses chunk boundaries, and each chunk's prefix spans many
    // earlier chunks.
    check_corpus(7, "1000");
}

#[test]
fn planted_corpus_is_found_exactly_with_other_seeds_and_chunk_sizes() {
    for (seed, chunk) in [(1, "64K"), (2, "16K"), (3, "4099")] {
        check_corpus(seed, chunk);
    }
}

#[test]
fn library_scan_keeps_the_accounting_invariant_and_agrees_with_the_binary() {
    let dir = tempdir();
    let truth = generate(dir.path(), 5, 120).unwrap();
    let mut config = scan::cli::parse(
        ["scan", "--workers", "3", "--no-progress"]
            .into_iter()
            .map(Into::into)
            .chain(std::iter::once(dir.path().as_os_str().to_owned())),
    )
    .unwrap();
    config.chunk_size = 8192;
    let report = scan::pipeline::scan(&config, &scan::pipeline::Tuning::default()).unwrap();
    assert!(report.accounting.holds(false), "{:?}", report.accounting);
    let found: BTreeSet<(String, u64, String)> = report
        .findings
        .iter()
        .map(|f| {
            // Reported below the scan root.
            (
                f.path.to_string(),
                f.offset,
                String::from_utf8(f.secret.clone()).unwrap(),
            )
        })
        .filter(|(p, ..)| p != GROUND_TRUTH)
        .collect();
    let want: BTreeSet<(String, u64, String)> = truth
        .secrets
        .iter()
        .map(|s| (s.path.clone(), s.offset, s.secret.clone()))
        .collect();
    assert_eq!(found, want);
    // A tiny frontier and pool force parking on both; nothing may be lost.
    let tiny = scan::pipeline::Tuning {
        frontier_capacity: Some(1),
        pool_buffers: Some(1),
        ..scan::pipeline::Tuning::default()
    };
    let report2 = scan::pipeline::scan(&config, &tiny).unwrap();
    assert!(report2.accounting.holds(false), "{:?}", report2.accounting);
    assert_eq!(report2.findings, report.findings);
    assert!(report2.summary.metrics["enumerate_backpressure"] > 0);
    // Whether a FetchSync ever finds the one buffer taken depends on timing:
    // the next FetchSync of a file is spawned before the Scan that holds the
    // buffer, and the Scan (in the LIFO slot) usually runs and returns the
    // buffer before another worker gets the FetchSync. So this run cannot
    // promise `fetch_pool_empty > 0` (it stopped happening when the rule set
    // grew); parking on an empty pool is proven by the loom model
    // `task_parked_on_the_pool_is_handed_back_exactly_once`
    // (src/pipeline/frontier.rs), and here nothing may be lost either way.
}
