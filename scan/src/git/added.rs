//! Scanning only what a blob adds (README.md, "Scanning only what a blob
//! adds" and "Short and long context").
//!
//! A blob that replaces its first parent's blob at the same path (its
//! *base*) is diffed against it by lines (imara-diff's histogram diff),
//! and only windows around the lines it adds are scanned:
//!
//! 1. Each added line range `[a, b)` (bytes of the new blob) gets a lead
//!    and a context from the rule set's [`ContextSplit`]: the short rules'
//!    (their longest match, and `DEDUP_RADIUS` plus their largest reach),
//!    widened by those of every long rule's keyword (`-----BEGIN ... KEY`,
//!    `eyJ`, ...) that occurs within [`long_reach`] of the range. Its owned
//!    range is `[a - lead, b)`: every secret that touches an added byte
//!    starts in it. An encoded span (base64, hex, percent: `decode`) never
//!    crosses a newline and the added ranges are whole lines, so a span
//!    that touches an added byte lies inside the added range, and the
//!    decoder sees it whole.
//! 2. Owned ranges whose buffers (owned ± context) would overlap are
//!    merged, the larger context kept; a merged range is cut into pieces of
//!    at most a chunk, each scanned in a buffer with its context on both
//!    sides, widened to whole lines (at most the full context from the
//!    piece). A long rule with no keyword within reach cannot match near
//!    the piece nor compete with a match there, and every other rule reads
//!    only within its context: what `RuleSet::scan` reports for the owned
//!    range is what a whole-blob scan reports there.
//! 3. A finding is kept only when its secret (or its encoded span) touches
//!    an added range ([`touches`]): a secret the parent's blob already held,
//!    unchanged, was reported for the commit that introduced it.
//! 4. Lines are counted over the whole blob (the skipped bytes too, with
//!    `memchr`), so every finding keeps its exact line and column.
//!
//! A blob over [`DIFF_MAX_BYTES`], or whose base is, or that has no base,
//! or whose base is an archive or cannot be read, is scanned whole.

use std::ops::Range;

use crate::chunk::LineBase;
use crate::rules::{ContextSplit, RuleSet};

/// The largest blob (new or base) diffed: 4 MiB. Above it the blob is
/// scanned whole: the line diff's time grows faster than linearly in the
/// worst case, the scan's does not.
pub const DIFF_MAX_BYTES: u64 = 4 << 20;

/// A worker's reusable state for diffing: the base blob's decoded bytes
/// and where the long keywords are in the new blob.
#[derive(Debug, Default)]
pub struct DiffScratch {
    base: Vec<u8>,
    long: LongHits,
    /// The buffers of [`Odb::find_blob`](super::Odb::find_blob), for the
    /// base and for the blob itself.
    pub decode: super::odb::DecodeScratch,
}

/// What a blob adds against its base: byte ranges of the new blob,
/// ascending, disjoint, none empty.
pub type AddedRanges = Box<[Range<u64>]>;

/// Whether the bytes `[start, end)` of the blob touch an added range (an
/// empty secret at `start` touches nothing).
pub fn touches(added: &[Range<u64>], start: u64, end: u64) -> bool {
    // The first added range that ends after `start`.
    let i = added.partition_point(|r| r.end <= start);
    added.get(i).is_some_and(|r| r.start < end && start < end)
}

/// The byte ranges of `new` whose lines a line diff against `old` marks
/// added (imara-diff, histogram).
///
/// The lines the two blobs share at their start and at their end are cut
/// off before the lines are interned (README.md, "Where the time goes"):
/// imara-diff strips the common prefix and suffix of its token lists
/// before it diffs, so the ranges are the same as diffing the whole blobs
/// (`trimming_the_common_lines_changes_no_added_range`), and the common
/// lines are only compared, not hashed.
pub fn added_ranges(old: &[u8], new: &[u8]) -> Vec<Range<usize>> {
    let (pre, old_end, new_end) = common_lines(old, new);
    let mut out = added_ranges_whole(&old[pre..old_end], &new[pre..new_end]);
    for r in &mut out {
        *r = r.start + pre..r.end + pre;
    }
    out
}

/// `(p, old_end, new_end)`: `old[..p]` and `new[..p]` are the lines the
/// two share at their start (all of them), `old[old_end..]` and
/// `new[new_end..]` lines they share at their end, after `p`.
fn common_lines(old: &[u8], new: &[u8]) -> (usize, usize, usize) {
    let same = common_prefix(old, new);
    if same == old.len() && same == new.len() {
        return (same, same, same);
    }
    // Whole lines only: up to the last newline in the common bytes.
    let pre = memchr::memrchr(b'\n', &old[..same]).map_or(0, |i| i + 1);
    let tail = common_suffix(&old[pre..], &new[pre..]);
    // The common bytes at the end start inside a line (or at the middle's
    // start); whole lines start after its first newline.
    let from = new.len() - tail;
    let suf = memchr::memchr(b'\n', &new[from..]).map_or(0, |i| tail - (i + 1));
    (pre, old.len() - suf, new.len() - suf)
}

/// Length of the longest common prefix of `a` and `b`.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    const BLOCK: usize = 64;
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + BLOCK <= n && a[i..i + BLOCK] == b[i..i + BLOCK] {
        i += BLOCK;
    }
    i + a[i..n]
        .iter()
        .zip(&b[i..n])
        .take_while(|(x, y)| x == y)
        .count()
}

/// Length of the longest common suffix of `a` and `b`.
fn common_suffix(a: &[u8], b: &[u8]) -> usize {
    const BLOCK: usize = 64;
    let n = a.len().min(b.len());
    let (a, b) = (&a[a.len() - n..], &b[b.len() - n..]);
    let mut i = 0;
    while i + BLOCK <= n && a[n - i - BLOCK..n - i] == b[n - i - BLOCK..n - i] {
        i += BLOCK;
    }
    i + a[..n - i]
        .iter()
        .rev()
        .zip(b[..n - i].iter().rev())
        .take_while(|(x, y)| x == y)
        .count()
}

/// [`added_ranges`] without cutting off the common lines first.
pub fn added_ranges_whole(old: &[u8], new: &[u8]) -> Vec<Range<usize>> {
    use imara_diff::{Algorithm, Diff, InternedInput};
    if old == new {
        return Vec::new();
    }
    let input = InternedInput::new(old, new);
    let diff = Diff::compute(Algorithm::Histogram, &input);
    // Byte offset of each line of `new` (the tokens are whole lines, the
    // terminator included), and its end.
    let mut starts = Vec::with_capacity(input.after.len() + 1);
    let mut at = 0usize;
    for t in &input.after {
        starts.push(at);
        at += input.interner[*t].len();
    }
    starts.push(at);
    debug_assert_eq!(at, new.len(), "the line tokens cover the blob");
    let mut out: Vec<Range<usize>> = Vec::new();
    for h in diff.hunks() {
        let (l0, l1) = (h.after.start as usize, h.after.end as usize);
        if l0 == l1 {
            continue; // lines removed only
        }
        let r = starts[l0]..starts[l1];
        match out.last_mut() {
            Some(last) if last.end >= r.start => last.end = r.end,
            _ => out.push(r),
        }
    }
    out
}

/// One scan of a diffed blob: the buffer's bytes and the owned range in
/// it, as absolute offsets into the blob.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Piece {
    /// The bytes copied into the pool buffer.
    pub buf: Range<usize>,
    /// The part of `buf` whose secret starts this scan reports.
    pub owned: Range<usize>,
}

/// Where the long rules' keywords occur in a blob: for each of
/// [`ContextSplit::long_keywords`], its start offsets, ascending.
#[derive(Debug, Default)]
pub struct LongHits {
    at: Vec<Vec<usize>>,
    found: Vec<(u32, usize)>,
    folded: Vec<u8>,
}

impl LongHits {
    /// Finds the long keywords of `split` in `data[within]` (whole hits
    /// starting there: the search reads a keyword's length past its end).
    pub fn find(&mut self, split: &ContextSplit, data: &[u8], within: Range<usize>) {
        let n = split.long_keywords().len();
        self.at.resize_with(n, Vec::new);
        self.at.iter_mut().for_each(Vec::clear);
        if n == 0 || within.is_empty() {
            return;
        }
        let longest = split
            .long_keywords()
            .iter()
            .map(|k| k.keyword.len())
            .max()
            .unwrap_or(0);
        let end = (within.end + longest).min(data.len());
        self.found.clear();
        split.find_long(&data[within.start..end], &mut self.folded, &mut self.found);
        for &(k, p) in &self.found {
            let p = within.start + p;
            if p < within.end {
                self.at[k as usize].push(p);
            }
        }
        debug_assert!(self.at.iter().all(|v| v.is_sorted()));
    }

    /// Whether keyword `k` starts somewhere in `[lo, hi]`.
    fn any_in(&self, k: usize, lo: usize, hi: usize) -> bool {
        let at = &self.at[k];
        let i = at.partition_point(|&p| p < lo);
        at.get(i).is_some_and(|&p| p <= hi)
    }
}

/// The window of an added range `[a, b)` (README.md, "Short and long
/// context"): owned `[a - lead, b)`, scanned with `ctx` bytes around it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Window {
    owned: Range<usize>,
    ctx: usize,
}

/// The bytes around the added range `r` in which a long keyword widens its
/// window: a window's owned range starts at most `full_match_len` before
/// `r`, and a long rule's hit lies within `full_len` of the owned range of
/// any secret it reports or competes with.
pub fn long_reach(split: &ContextSplit, r: &Range<usize>) -> Range<usize> {
    r.start
        .saturating_sub(split.full_match_len() + split.full_len())..r.end + split.full_len() + 1
}

/// Plans the scans of the blob `data` whose added ranges are `added`
/// (steps 1-3 of README.md, "Short and long context"): each range gets the
/// short rules' lead and context, widened by those of every long keyword
/// `long` holds within [`long_reach`] of it; windows whose buffers (owned
/// ± ctx) would overlap are merged (the larger context wins); a merged
/// range is cut into owned pieces of at most `chunk_size` bytes, each in a
/// buffer of its context on both sides, widened to whole lines by at most
/// `split.full_len()` from the piece (clipped to the blob).
pub fn plan(
    data: &[u8],
    added: &[Range<usize>],
    split: &ContextSplit,
    long: &LongHits,
    chunk_size: usize,
) -> Vec<Piece> {
    let mut merged: Vec<Window> = Vec::new();
    for r in added {
        let (mut lead, mut ctx) = (split.short_match_len(), split.short_len());
        let reach = long_reach(split, r);
        for (k, kw) in split.long_keywords().iter().enumerate() {
            if long.any_in(k, reach.start, reach.end - 1) {
                lead = lead.max(kw.match_len);
                ctx = ctx.max(kw.context_len);
            }
        }
        let mut w = Window {
            owned: r.start.saturating_sub(lead)..r.end,
            ctx,
        };
        // Earlier windows whose buffers would overlap this one's: one
        // window (a long lead may reach back over several).
        while let Some(last) = merged.last() {
            if w.owned.start.saturating_sub(w.ctx) > last.owned.end + last.ctx {
                break;
            }
            let last = merged.pop().expect("looked at");
            w = Window {
                owned: last.owned.start.min(w.owned.start)..last.owned.end.max(w.owned.end),
                ctx: last.ctx.max(w.ctx),
            };
        }
        merged.push(w);
    }
    let cs = chunk_size.max(1);
    let mut out = Vec::new();
    for w in merged {
        let mut s = w.owned.start;
        while s < w.owned.end {
            let e = (s + cs).min(w.owned.end);
            out.push(Piece {
                buf: widen(data, s..e, w.ctx, split.full_len()),
                owned: s..e,
            });
            s = e;
        }
    }
    out
}

/// The buffer of the owned piece `owned`: `ctx` bytes on both sides,
/// widened to the start of the first line and the end (its newline
/// included) of the last, but never more than `full` bytes from `owned`.
/// Whole lines make the allow markers on a finding's line and the encoded
/// runs of the decoder the same as with the full context on both sides
/// (README.md, "Short and long context", step 3).
fn widen(data: &[u8], owned: Range<usize>, ctx: usize, full: usize) -> Range<usize> {
    let (ctx, len) = (ctx.min(full), data.len());
    let lo = owned.start.saturating_sub(ctx);
    let lo_cap = owned.start.saturating_sub(full);
    let start = memchr::memrchr(b'\n', &data[lo_cap..lo]).map_or(lo_cap, |i| lo_cap + i + 1);
    let hi = (owned.end + ctx).min(len);
    let hi_cap = (owned.end + full).min(len);
    // The line holding the buffer's last byte, up to its newline.
    let last = hi.max(1) - 1;
    let end = memchr::memchr(b'\n', &data[last..hi_cap]).map_or(hi_cap, |i| last + i + 1);
    start..end.max(hi)
}

/// Counts lines forward through a blob: [`LineBase`] at ascending offsets,
/// each newline counted once.
#[derive(Clone, Debug, Default)]
pub struct LineCounter {
    pos: usize,
    base: LineBase,
}

impl LineCounter {
    /// The lines before `offset` of `data` (`offset` at or after the last
    /// one asked).
    pub fn at(&mut self, data: &[u8], offset: usize) -> LineBase {
        debug_assert!(offset >= self.pos, "offsets are asked in order");
        let seg = &data[self.pos..offset];
        let n = memchr::memchr_iter(b'\n', seg).count() as u64;
        if n > 0 {
            let last = memchr::memrchr(b'\n', seg).expect("a newline was counted");
            self.base.last_newline = Some((self.pos + last) as u64);
        }
        self.base.newlines += n;
        self.pos = offset;
        self.base
    }
}

/// The scans left of a blob being read by its added windows.
#[derive(Debug)]
pub struct Windows {
    pieces: std::vec::IntoIter<Piece>,
    lines: LineCounter,
}

impl Windows {
    /// The next scan: its piece and the lines before its buffer's start.
    pub fn next(&mut self, data: &[u8]) -> Option<(Piece, LineBase)> {
        let p = self.pieces.next()?;
        let lines = self.lines.at(data, p.buf.start);
        Some((p, lines))
    }

    /// Whether another scan follows.
    pub fn is_done(&self) -> bool {
        self.pieces.len() == 0
    }
}

/// How a blob of `scan git` is read: whole, or by the windows of what it
/// adds against its base.
#[derive(Debug)]
pub enum Reading {
    /// Scanned whole (no base, too large, an archive, ...).
    Whole,
    /// Only the windows; the added ranges are for the Scan's filter.
    Added(AddedRanges, Windows),
}

/// Decides how the blob `data` (already decoded, not an archive) is read:
/// when it has a `base` and both are at most [`DIFF_MAX_BYTES`] (and the
/// `limit`, `--max-file-size`), the base is decoded and diffed; else, or
/// when the base cannot be read or is an archive, [`Reading::Whole`].
#[allow(clippy::too_many_arguments)]
pub fn reading(
    odb: &super::Odb,
    repo: &gix::Repository,
    base: Option<&gix::ObjectId>,
    data: &[u8],
    limit: Option<u64>,
    rules: &RuleSet,
    chunk_size: usize,
    scratch: &mut DiffScratch,
) -> Reading {
    let Some(base) = base else {
        return Reading::Whole;
    };
    let bound = limit.map_or(DIFF_MAX_BYTES, |l| l.min(DIFF_MAX_BYTES));
    if data.len() as u64 > bound {
        return Reading::Whole;
    }
    match odb.blob_size(repo, base, &mut scratch.decode) {
        Ok(size) if size <= bound => {}
        _ => return Reading::Whole,
    }
    if odb
        .find_blob(repo, base, &mut scratch.base, &mut scratch.decode)
        .is_err()
    {
        return Reading::Whole;
    }
    let old = &scratch.base;
    if crate::archive::sniff(&old[..old.len().min(crate::archive::SNIFF_LEN)]).is_some() {
        return Reading::Whole;
    }
    let ranges = added_ranges(old, data);
    let split = rules.context_split();
    if let (Some(first), Some(last)) = (ranges.first(), ranges.last()) {
        let within = long_reach(split, first).start..long_reach(split, last).end.min(data.len());
        scratch.long.find(split, data, within);
    }
    let pieces = plan(data, &ranges, split, &scratch.long, chunk_size);
    let added = ranges
        .into_iter()
        .map(|r| r.start as u64..r.end as u64)
        .collect();
    Reading::Added(
        added,
        Windows {
            pieces: pieces.into_iter(),
            lines: LineCounter::default(),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn added_lines_are_the_byte_ranges_of_the_new_lines() {
        let old = b"a\nb\nc\nd\n";
        let new = b"a\nB\nc\nd\ne";
        assert_eq!(added_ranges(old, new), vec![2..4, 8..9]);
        // Only removed lines: nothing added.
        assert!(added_ranges(b"a\nb\nc\n", b"a\nc\n").is_empty());
        // A blob against an empty base: all of it.
        assert_eq!(added_ranges(b"", b"x\ny"), vec![0..3]);
        // Adjacent hunks are one range.
        assert_eq!(added_ranges(b"a\n", b"a\nb\nc\n"), vec![2..6]);
    }

    #[test]
    fn trimming_the_common_lines_changes_no_added_range() {
        // Blobs of lines from a tiny alphabet (repeated lines: where a
        // diff may place a hunk is ambiguous), edited at random.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let pieces: [&[u8]; 6] = [b"a\n", b"b\n", b"a", b"\n", b"ab\n", b"b"];
        for _ in 0..if cfg!(miri) { 20 } else { 2000 } {
            let old: Vec<u8> = (0..next(12))
                .flat_map(|_| pieces[next(6) as usize].iter().copied())
                .collect();
            let mut new = old.clone();
            for _ in 0..next(4) {
                let at = next(new.len() as u64 + 1) as usize;
                let p = pieces[next(6) as usize];
                if next(2) == 0 {
                    new.splice(at..at, p.iter().copied());
                } else {
                    new.drain(at..(at + p.len()).min(new.len()));
                }
            }
            assert_eq!(
                added_ranges(&old, &new),
                added_ranges_whole(&old, &new),
                "{:?} -> {:?}",
                String::from_utf8_lossy(&old),
                String::from_utf8_lossy(&new)
            );
        }
        // Long common runs (the 64-byte blocks of the comparison).
        let body: Vec<u8> = (0..300)
            .flat_map(|i| format!("line {i}\n").into_bytes())
            .collect();
        let mut new = body.clone();
        new.splice(1000..1000, b"inserted\n".iter().copied());
        assert_eq!(added_ranges(&body, &new), added_ranges_whole(&body, &new));
        assert_eq!(added_ranges(&body, &new).len(), 1);
        assert!(added_ranges(&body, &body).is_empty());
    }

    #[test]
    fn touching_means_sharing_a_byte_with_an_added_range() {
        let added = [10..20, 30..40];
        assert!(touches(&added, 5, 11));
        assert!(touches(&added, 19, 25));
        assert!(touches(&added, 0, 100));
        assert!(!touches(&added, 0, 10));
        assert!(!touches(&added, 20, 30));
        assert!(!touches(&added, 40, 50));
        assert!(!touches(&added, 15, 15), "an empty secret touches nothing");
        assert!(!touches(&[], 0, 100));
    }

    use crate::rules::LongKeyword;

    /// `n` lines of ten bytes (nine `x` and a newline): line `i` starts
    /// at `10 * i`.
    fn lines(n: usize) -> Vec<u8> {
        b"xxxxxxxxx\n".repeat(n)
    }

    /// Short rules: lead 30, context 100; the full context 1000 (lead
    /// 900); one long keyword `-----begin` needing lead 900, context 1000.
    fn split() -> ContextSplit {
        ContextSplit::with_bounds(
            100,
            30,
            1000,
            900,
            vec![LongKeyword {
                keyword: b"-----begin".to_vec(),
                context_len: 1000,
                match_len: 900,
            }],
        )
    }

    fn plan_of(data: &[u8], added: &[Range<usize>], cs: usize) -> Vec<Piece> {
        let s = split();
        let mut long = LongHits::default();
        long.find(&s, data, 0..data.len());
        plan(data, added, &s, &long, cs)
    }

    #[test]
    #[allow(clippy::single_range_in_vec_init)]
    fn a_window_without_a_long_keyword_near_it_gets_the_short_context() {
        let data = lines(1000);
        // Far apart: two pieces, each owned from a - 30 to b, buffered
        // 100 bytes on both sides (already whole lines here).
        let p = plan_of(&data, &[1000..1010, 5000..5010], 1 << 20);
        assert_eq!(
            p,
            vec![
                Piece {
                    buf: 870..1110,
                    owned: 970..1010
                },
                Piece {
                    buf: 4870..5110,
                    owned: 4970..5010
                },
            ]
        );
        // Buffers that would overlap: one window. At the blob's ends:
        // clipped.
        let p = plan_of(&data, &[50..60, 250..260, 9990..10_000], 1 << 20);
        assert_eq!(p[0].owned, 20..260);
        assert_eq!(p[0].buf, 0..360);
        assert_eq!(p[1].owned, 9960..10_000);
        assert_eq!(p[1].buf, 9860..10_000);
        // A long window is cut into chunks, each with its own context.
        let p = plan_of(&data, &[1000..4000], 1000);
        let owned: Vec<_> = p.iter().map(|p| p.owned.clone()).collect();
        assert_eq!(owned, vec![970..1970, 1970..2970, 2970..3970, 3970..4000]);
        assert!(p.iter().all(|p| p.buf.start + 100 == p.owned.start));
    }

    #[test]
    #[allow(clippy::single_range_in_vec_init)]
    fn a_long_keyword_within_reach_widens_only_its_windows() {
        let mut data = lines(1000);
        data[3000..3010].copy_from_slice(b"-----BEGIN");
        // 3000 is within 900 + 1000 before 4500 and 1000 after 1990: both
        // windows take the long lead and context; 7000 is out of reach.
        let p = plan_of(&data, &[1990..2000, 4500..4510, 7000..7010], 1 << 20);
        assert_eq!(p.len(), 2, "{p:?}");
        assert_eq!(p[0].owned, 1090..4510, "merged: buffers overlap");
        assert_eq!(p[0].buf, 90..5510);
        assert_eq!(
            p[1],
            Piece {
                buf: 6870..7110,
                owned: 6970..7010
            }
        );
        // Just out of reach on either side: short.
        for (at, added) in [(3001, 1990..2000), (89, 1990..2000)] {
            let mut data = lines(1000);
            data[at..at + 10].copy_from_slice(b"-----begin");
            let p = plan_of(&data, std::slice::from_ref(&added), 1 << 20);
            assert_eq!(p[0].owned, added.start - 30..added.end, "hit at {at}");
            let mut data = lines(1000);
            let at = if at > added.end { at - 1 } else { at + 1 };
            data[at..at + 10].copy_from_slice(b"-----Begin");
            let p = plan_of(&data, std::slice::from_ref(&added), 1 << 20);
            assert_eq!(p[0].owned, added.start - 900..added.end, "hit at {at}");
        }
    }

    #[test]
    #[allow(clippy::single_range_in_vec_init)]
    fn a_buffer_reaches_whole_lines_but_no_further_than_the_full_context() {
        // One newline at 500 and one at 3000: the window of 1200..1210
        // (short context 100) widens back to 501 and forward to 3001; a
        // line longer than the full context is cut at 1000 from the owned
        // range.
        let mut data = vec![b'y'; 5000];
        data[500] = b'\n';
        data[3000] = b'\n';
        let p = plan_of(&data, &[1200..1210], 1 << 20);
        assert_eq!(p[0].owned, 1170..1210);
        assert_eq!(p[0].buf, 501..2210);
        data[500] = b'y';
        let p = plan_of(&data, &[1200..1210], 1 << 20);
        assert_eq!(p[0].buf, 170..2210);
        // A buffer already ending at a newline is not widened.
        let data = lines(100);
        let p = plan_of(&data, &[500..510], 1 << 20);
        assert_eq!(p[0].buf, 370..610);
    }

    #[test]
    fn lines_are_counted_over_the_skipped_bytes() {
        let data = b"a\nbb\nccc\ndddd\n";
        let mut c = LineCounter::default();
        assert_eq!(c.at(data, 0), LineBase::default());
        let at5 = c.at(data, 5);
        assert_eq!((at5.newlines, at5.last_newline), (2, Some(4)));
        let at12 = c.at(data, 12);
        assert_eq!((at12.newlines, at12.last_newline), (3, Some(8)));
    }
}
