//! The chunk contract: a secret anywhere relative to chunk boundaries is
//! reported exactly once, at the right offset, line and column, and chunked
//! scanning equals whole-file scanning.
#![cfg(not(loom))]

use proptest::prelude::*;
use scan::chunk::{plan_in_memory, Locator};
use scan::rules::template::{render, Rng};
use scan::rules::{RuleSet, Scratch};
use std::sync::OnceLock;

fn rules() -> &'static RuleSet {
    static R: OnceLock<RuleSet> = OnceLock::new();
    R.get_or_init(RuleSet::builtin)
}

/// (rule id, absolute secret start, secret end, line, column)
type Finding = (String, usize, usize, u64, u64);

fn scan_chunked(data: &[u8], chunk: usize) -> Vec<Finding> {
    let rs = rules();
    let mut scratch = Scratch::new();
    let mut out = Vec::new();
    let mut found = Vec::new();
    for (buf, meta) in plan_in_memory(data, chunk, rs.context_len()) {
        out.clear();
        rs.scan(&buf, meta.owned.clone(), &mut scratch, &mut out);
        let mut loc = Locator::new(&meta);
        for m in &out {
            let l = loc.locate(&buf, m.secret_start);
            let base = meta.base_offset as usize;
            found.push((
                rs.rule(m.rule).id.clone(),
                base + m.secret_start,
                base + m.secret_end,
                l.line,
                l.column,
            ));
        }
    }
    found
}

fn scan_whole(data: &[u8]) -> Vec<(String, usize, usize)> {
    let rs = rules();
    let mut out = Vec::new();
    rs.scan(data, 0..data.len(), &mut Scratch::new(), &mut out);
    out.iter()
        .map(|m| (rs.rule(m.rule).id.clone(), m.secret_start, m.secret_end))
        .collect()
}

/// Neutral text: words and numbers that no rule reports.
fn filler(len: usize, seed: u64, long_lines: bool) -> Vec<u8> {
    let words = [
        "alpha", "beta", "gamma", "delta", "value", "count", "the", "of", "import", "def",
        "return", "x = 42",
    ];
    let mut rng = Rng::new(seed);
    let mut v = Vec::with_capacity(len + 16);
    while v.len() < len {
        v.extend_from_slice(rng.pick(&words).as_bytes());
        v.push(if !long_lines && rng.chance(1, 8) {
            b'\n'
        } else {
            b' '
        });
    }
    v.truncate(len);
    v
}

const FAMILY_SAMPLES: &[&str] = &[
    "github-pat",
    "aws-secret-access-key",
    "slack-webhook-url",
    "private-key-rsa",
    "private-key-pgp",
    "jwt",
    "postgres-url",
    "generic-secret-assignment",
    "azure-devops-pat",
];

fn planted(rule: &str, seed: u64) -> (String, String) {
    let rs = rules();
    let id = rs.find(rule).unwrap();
    let mut rng = Rng::new(seed);
    let secret = rs.generate_secret(id, &mut rng).unwrap();
    let example = rs.rule(id).examples[0].clone();
    (render(&example, &mut rng, Some(&secret)), secret)
}

fn line_col(data: &[u8], off: usize) -> (u64, u64) {
    let line = data[..off].iter().filter(|&&b| b == b'\n').count() as u64 + 1;
    let col = off
        - data[..off]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |p| p + 1)
        + 1;
    (line, col as u64)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn a_secret_near_any_chunk_boundary_is_reported_exactly_once(
        which in 0..FAMILY_SAMPLES.len(),
        seed in 0u64..1000,
        boundary in 1usize..3,
        at_owned_edge in any::<bool>(),
        delta in -400i64..400,
        long_lines in any::<bool>(),
    ) {
        let ctx = rules().context_len();
        let chunk = 2 * ctx + 1000;
        let rule = FAMILY_SAMPLES[which];
        let (text, secret) = planted(rule, seed);
        // Shift the planted text so that its secret starts near a buffer
        // edge (k·chunk) or an owned edge (k·chunk − ctx), from a little
        // before the whole secret to a little after.
        let secret_in_text = text.find(&secret).unwrap();
        let edge = boundary * chunk - if at_owned_edge { ctx } else { 0 };
        let span = secret.len() as i64 + 400;
        let d = delta.rem_euclid(2 * span) - span;
        let secret_at = (edge as i64 + d).max(secret_in_text as i64 + 1) as usize;
        let text_at = secret_at - secret_in_text;
        let mut data = filler(text_at - 1, seed, long_lines);
        data.push(b'\n');
        data.extend_from_slice(text.as_bytes());
        data.push(b'\n');
        data.extend(filler(3 * chunk, seed + 1, long_lines));
        let found = scan_chunked(&data, chunk);
        let (line, col) = line_col(&data, secret_at);
        prop_assert_eq!(found, vec![(rule.to_string(), secret_at, secret_at + secret.len(), line, col)]);
    }
}

#[test]
fn chunked_scanning_equals_whole_file_scanning() {
    let rs = rules();
    let mut rng = Rng::new(2024);
    let mut data = Vec::new();
    let mut planted_count = 0;
    for round in 0..2 {
        for id in rs.ids() {
            let secret = rs.generate_secret(id, &mut rng).unwrap();
            let ex = rng.pick(&rs.rule(id).examples).clone();
            data.extend(filler(
                rng.range(0, 3000),
                round * 1000 + u64::from(id.0),
                rng.chance(1, 3),
            ));
            data.push(b'\n');
            data.extend_from_slice(render(&ex, &mut rng, Some(&secret)).as_bytes());
            data.push(b'\n');
            planted_count += 1;
        }
    }
    let whole = scan_whole(&data);
    assert_eq!(
        whole.len(),
        planted_count,
        "every planted secret found once when scanned whole"
    );
    let ctx = rs.context_len();
    for chunk in [2 * ctx + 1, 3 * ctx + 4099, 256 * 1024, ctx / 2 + 7] {
        let chunked: Vec<(String, usize, usize)> = scan_chunked(&data, chunk)
            .into_iter()
            .map(|(r, s, e, _, _)| (r, s, e))
            .collect();
        assert_eq!(chunked, whole, "chunk size {chunk}");
    }
}

/// Not sampled but exhaustive: for a one-line and a multi-line secret, every
/// start from "the whole secret just before the edge" to "just after it",
/// at a buffer edge and at an owned edge, gives exactly one finding with its
/// offset, line and column.
#[test]
fn a_secret_at_every_offset_across_both_edges_is_reported_exactly_once() {
    let ctx = rules().context_len();
    let chunk = 2 * ctx + 1000;
    let head = filler(2 * chunk, 11, false);
    let tail = filler(2 * chunk, 12, false);
    let mut checked = 0;
    let mut multi_line = false;
    for rule in ["github-pat", "private-key-rsa"] {
        let (text, secret) = planted(rule, 5);
        multi_line |= secret.contains('\n');
        let secret_in_text = text.find(&secret).unwrap();
        for edge in [chunk, chunk - ctx] {
            let first = edge - secret.len() - 8;
            for secret_at in first..=edge + 8 {
                let text_at = secret_at - secret_in_text;
                let mut data = head[..text_at - 1].to_vec();
                data.push(b'\n');
                data.extend_from_slice(text.as_bytes());
                data.push(b'\n');
                data.extend_from_slice(&tail);
                let (line, col) = line_col(&data, secret_at);
                let want = vec![(
                    rule.to_string(),
                    secret_at,
                    secret_at + secret.len(),
                    line,
                    col,
                )];
                assert_eq!(scan_chunked(&data, chunk), want, "edge {edge}");
                checked += 1;
            }
        }
    }
    assert!(multi_line, "the RSA key sample should span lines");
    assert!(checked > 4 * 17, "{checked}");
}
