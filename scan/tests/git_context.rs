//! `scan git`'s windows around added lines with the short and long context
//! (scan/src/git/README.md, "Short and long context"): a blob read by
//! its windows yields exactly the matches a whole-blob scan yields that
//! touch an added byte, as the windows with the full context around every
//! added range did before (`full_windows` below, main's plan), while
//! reading fewer bytes. Library level: the rule engine on the planned
//! buffers, the same filter as the Scan task (`added::touches`).
#![cfg(not(loom))]

use std::ops::Range;
use std::sync::OnceLock;

use scan::git::added::{added_ranges, plan, touches, LongHits, Piece};
use scan::rules::template::{render, Rng};
use scan::rules::{ContextSplit, RuleSet, Scratch, SHORT_REACH_MAX};

fn rules() -> &'static RuleSet {
    static R: OnceLock<RuleSet> = OnceLock::new();
    R.get_or_init(RuleSet::builtin)
}

/// A chunk as small as the pool's smallest (two cuts in a long window).
const CHUNK: usize = 16 * 1024;

/// (rule id, secret start, secret end) in the new blob.
type Hit = (String, usize, usize);

fn added(old: &str, new: &str) -> Vec<Range<u64>> {
    added_ranges(old.as_bytes(), new.as_bytes())
        .into_iter()
        .map(|r| r.start as u64..r.end as u64)
        .collect()
}

/// What the added-bytes mode must report: the whole blob scanned once,
/// the matches whose secret touches an added byte kept.
fn whole_touching(old: &str, new: &str) -> Vec<Hit> {
    let rs = rules();
    let added = added(old, new);
    let mut out = Vec::new();
    rs.scan(new.as_bytes(), 0..new.len(), &mut Scratch::new(), &mut out);
    out.iter()
        .filter(|m| touches(&added, m.secret_start as u64, m.secret_end as u64))
        .map(|m| (rs.rule(m.rule).id.clone(), m.secret_start, m.secret_end))
        .collect()
}

/// The pieces `split` plans for `new` against `old`.
fn pieces(old: &str, new: &str, split: &ContextSplit) -> Vec<Piece> {
    let ranges = added_ranges(old.as_bytes(), new.as_bytes());
    let mut long = LongHits::default();
    long.find(split, new.as_bytes(), 0..new.len());
    plan(new.as_bytes(), &ranges, split, &long, CHUNK)
}

/// What the windows of `split` report (each piece scanned as the Scan
/// task scans it), and the bytes they read.
fn windowed(old: &str, new: &str, split: &ContextSplit) -> (Vec<Hit>, usize) {
    let rs = rules();
    let added = added(old, new);
    let mut scratch = Scratch::new();
    let (mut hits, mut read, mut out) = (Vec::new(), 0, Vec::new());
    for p in pieces(old, new, split) {
        assert!(p.buf.start <= p.owned.start && p.owned.end <= p.buf.end);
        out.clear();
        let base = p.buf.start;
        let owned = p.owned.start - base..p.owned.end - base;
        rs.scan(
            &new.as_bytes()[p.buf.clone()],
            owned,
            &mut scratch,
            &mut out,
        );
        read += p.buf.len();
        for m in &out {
            let (s, e) = (base + m.secret_start, base + m.secret_end);
            if touches(&added, s as u64, e as u64) {
                hits.push((rs.rule(m.rule).id.clone(), s, e));
            }
        }
    }
    (hits, read)
}

/// Main's plan: the full context on both sides of every added range, the
/// owned range reaching the full context back.
fn full_windows() -> ContextSplit {
    let full = rules().context_len();
    ContextSplit::with_bounds(full, full, full, full, Vec::new())
}

/// The split without its long keywords: what the short context alone
/// finds (the tests show it misses the long blocks, so they can fail).
fn short_only() -> ContextSplit {
    let s = rules().context_split();
    ContextSplit::with_bounds(
        s.short_len(),
        s.short_match_len(),
        s.full_len(),
        s.full_match_len(),
        Vec::new(),
    )
}

/// Asserts that the split's windows, main's and the whole-blob scan agree
/// on `old -> new`, and that the split reads at most what main's read;
/// returns the findings and the bytes each plan read.
fn same_findings(old: &str, new: &str) -> (Vec<Hit>, usize, usize) {
    let want = whole_touching(old, new);
    let (got, read) = windowed(old, new, rules().context_split());
    let (main, main_read) = windowed(old, new, &full_windows());
    assert_eq!(got, want, "split windows against the whole blob");
    assert_eq!(main, want, "main's windows against the whole blob");
    assert!(read <= main_read, "split read {read}, main {main_read}");
    (want, read, main_read)
}

/// `n` harmless lines, numbered from `from`.
fn filler(from: usize, n: usize) -> String {
    (from..from + n)
        .map(|i| format!("setting_{i} = \"value number {i}\"\n"))
        .collect()
}

/// `lines` lines of 64 seeded base64 characters.
fn b64_lines(seed: u64, lines: usize) -> Vec<String> {
    const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut rng = Rng::new(seed);
    (0..lines)
        .map(|_| {
            (0..64)
                .map(|_| B64[rng.below(64) as usize] as char)
                .collect()
        })
        .collect()
}

const BEGIN: &str = "-----BEGIN PRIVATE KEY-----";
const END: &str = "-----END PRIVATE KEY-----";

fn key(body: &[String]) -> String {
    format!("{BEGIN}\n{}\n{END}\n", body.join("\n"))
}

/// A GitHub token (`ghp_` and 36 seeded characters).
fn token(seed: u64) -> String {
    render("ghp_{alnum:36}", &mut Rng::new(seed), None)
}

#[test]
fn the_short_context_leaves_out_only_the_long_block_rules() {
    let rs = rules();
    let s = rs.context_split();
    // Pinned: the numbers scan/src/git/README.md and the rules README
    // quote. The short context is DEDUP_RADIUS (256) plus the largest
    // reach of a rule at most SHORT_REACH_MAX (4 KiB) away.
    assert_eq!(SHORT_REACH_MAX, 4096);
    assert_eq!(
        (
            s.short_len(),
            s.short_match_len(),
            s.full_len(),
            s.full_match_len()
        ),
        (2305, 1200, 12_808, 12_288),
        "short and full context and match bounds of the built-in rules"
    );
    assert_eq!(s.full_len(), rs.context_len());
    let mut long: Vec<String> = s
        .long_keywords()
        .iter()
        .map(|k| String::from_utf8(k.keyword.clone()).unwrap())
        .collect();
    long.sort();
    assert_eq!(
        long,
        [
            "\"private_key\"",
            "$krb5asrep$",
            "$krb5tgs$",
            "-----begin dsa private key",
            "-----begin ec private key",
            "-----begin encrypted private key",
            "-----begin openssh private key",
            "-----begin pgp private key block",
            "-----begin private key",
            "-----begin rsa private key",
            "eyj",
            "ls0tls1crudjti",
            "putty-user-key-file-",
        ],
        "the long rules' keywords: the key blocks (also base64-encoded whole), Kerberos hashes and jwt"
    );
    // Every long keyword needs more than the short context.
    assert!(s
        .long_keywords()
        .iter()
        .all(|k| k.context_len > s.short_len()));
}

#[test]
fn a_key_block_whose_middle_lines_change_is_found_from_its_begin_line() {
    // The change is about 5 KB below BEGIN: farther than the short
    // context reaches, nearer than the long one.
    let mut body = b64_lines(1, 100);
    let top = format!("{}{}", filler(0, 50), key(&body));
    let old = format!("{top}{}", filler(50, 20));
    for (i, line) in b64_lines(2, 3).into_iter().enumerate() {
        body[80 + i] = line;
    }
    let new_key = key(&body);
    let new = format!("{}{new_key}{}", filler(0, 50), filler(50, 20));
    let (found, _, _) = same_findings(&old, &new);
    let at = new.find(BEGIN).unwrap();
    assert_eq!(
        found,
        vec![(
            "private-key-pkcs8".to_owned(),
            at,
            at + new_key.trim_end().len()
        )]
    );
    assert!(
        windowed(&old, &new, &short_only()).0.is_empty(),
        "the short context alone misses the key"
    );
}

#[test]
fn a_begin_line_added_above_an_existing_body_is_found() {
    let body = b64_lines(3, 100);
    let pre = filler(0, 40);
    let old = format!("{pre}{}\n{END}\n{}", body.join("\n"), filler(40, 10));
    let k = key(&body);
    let new = format!("{pre}{k}{}", filler(40, 10));
    let (found, _, _) = same_findings(&old, &new);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, "private-key-pkcs8");
    assert!(windowed(&old, &new, &short_only()).0.is_empty());
}

#[test]
fn a_key_split_across_an_edit_boundary_is_found_at_the_edit_that_completes_it() {
    let body = b64_lines(4, 100);
    let k = key(&body);
    let pre = filler(0, 30);
    // The first 90 lines are there before; the edit adds the rest.
    let cut = k.find(&body[90]).unwrap();
    let old = format!("{pre}{}", &k[..cut]);
    let new = format!("{pre}{k}");
    let (found, _, _) = same_findings(&old, &new);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(windowed(&old, &new, &short_only()).0.is_empty());
}

#[test]
fn a_secret_added_next_to_an_unchanged_one_is_the_only_finding_and_reads_less() {
    let (a, b) = (token(1), token(2));
    let head = filler(0, 1000);
    let tail = filler(1000, 1000);
    let old = format!("{head}A_TOKEN={a}\n{tail}");
    let new = format!("{head}A_TOKEN={a}\nB_TOKEN={b}\n{tail}");
    let (found, read, main_read) = same_findings(&old, &new);
    let at = new.find(&b).unwrap();
    assert_eq!(found, vec![("github-pat".to_owned(), at, at + b.len())]);
    // One added line in a 70 KB blob: main read 3 * 12 808 bytes around
    // it, the short windows 1 200 + 2 * 2 305 (and the line).
    assert!(
        read * 4 < main_read,
        "split read {read} bytes, main {main_read}"
    );
}

/// Lines to build blobs from: filler, planted secrets of every family the
/// rules have examples for, key blocks and their parts.
fn random_line(rng: &mut Rng, n: usize) -> String {
    let rs = rules();
    match rng.below(10) {
        0 => {
            let ids: Vec<_> = rs.ids().collect();
            let id = *rng.pick(&ids);
            let Some(secret) = rs.generate_secret(id, rng) else {
                return filler(n, 1);
            };
            let ex = rng.pick(&rs.rule(id).examples).clone();
            format!("{}\n", render(&ex, rng, Some(&secret)))
        }
        1 => format!("{BEGIN}\n"),
        2 => format!("{END}\n"),
        3 => format!("{}\n", b64_lines(rng.next_u64(), 1)[0]),
        4 => key(&b64_lines(rng.next_u64(), rng.range(2, 120))),
        _ => filler(n, 1 + rng.range(0, 3)),
    }
}

#[test]
fn random_edits_give_the_same_findings_as_the_whole_blob() {
    let cases = if cfg!(debug_assertions) { 8 } else { 60 };
    let mut rng = Rng::new(14);
    let mut total = 0;
    for _ in 0..cases {
        let mut lines: Vec<String> = (0..rng.range(20, 200))
            .map(|i| random_line(&mut rng, i))
            .collect();
        let old = lines.concat();
        for _ in 0..rng.range(1, 6) {
            let at = rng.range(0, lines.len() - 1);
            match rng.below(3) {
                0 => lines.insert(at, random_line(&mut rng, 1000 + at)),
                1 if lines.len() > 1 => {
                    lines.remove(at);
                }
                _ => lines[at] = random_line(&mut rng, 2000 + at),
            }
        }
        let new = lines.concat();
        let (found, _, _) = same_findings(&old, &new);
        total += found.len();
    }
    assert!(total > 0, "the random edits added secrets");
}
