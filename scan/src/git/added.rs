//! Scanning only what a blob adds (README.md, "Scanning only what a blob
//! adds").
//!
//! A blob that replaces its first parent's blob at the same path (its
//! *base*) is diffed against it by lines (imara-diff's histogram diff),
//! and only windows around the lines it adds are scanned:
//!
//! 1. Each added line range `[a, b)` (bytes of the new blob) becomes an
//!    owned range `[a - ctx, b)`, `ctx` = `RuleSet::context_len()`, which
//!    is at least the longest match any rule can make: every secret that
//!    touches an added byte starts in it. An encoded span (base64, hex,
//!    percent: `decode`) never crosses a newline and the added ranges are
//!    whole lines, so a span that touches an added byte lies inside the
//!    added range, and the decoder sees it whole.
//! 2. Owned ranges whose buffers (owned ± `ctx`) would overlap are merged;
//!    a merged range is cut into pieces of at most a chunk, each scanned in
//!    a buffer with `ctx` bytes on both sides (or the blob's own ends):
//!    the contract of `RuleSet::scan`, so a match that starts in an owned
//!    range is the one a whole-blob scan finds there.
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

/// The largest blob (new or base) diffed: 4 MiB. Above it the blob is
/// scanned whole: the line diff's time grows faster than linearly in the
/// worst case, the scan's does not.
pub const DIFF_MAX_BYTES: u64 = 4 << 20;

/// A worker's reusable state for diffing: the base blob's decoded bytes.
#[derive(Debug, Default)]
pub struct DiffScratch {
    base: Vec<u8>,
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
pub fn added_ranges(old: &[u8], new: &[u8]) -> Vec<Range<usize>> {
    use imara_diff::{Algorithm, Diff, InternedInput};
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

/// Plans the scans of a blob of `len` bytes whose added ranges are
/// `added` (steps 1-2 of the module doc): owned ranges of at most
/// `chunk_size` bytes, each inside a buffer with `ctx` bytes on both sides
/// (clipped to the blob).
pub fn plan(len: usize, added: &[Range<usize>], ctx: usize, chunk_size: usize) -> Vec<Piece> {
    let mut merged: Vec<Range<usize>> = Vec::new();
    for r in added {
        let (start, end) = (r.start.saturating_sub(ctx), r.end);
        match merged.last_mut() {
            // Buffers (owned ± ctx) that would overlap: one range.
            Some(last) if start <= last.end + 2 * ctx => last.end = last.end.max(end),
            _ => merged.push(start..end),
        }
    }
    let cs = chunk_size.max(1);
    let mut out = Vec::new();
    for m in merged {
        let mut s = m.start;
        while s < m.end {
            let e = (s + cs).min(m.end);
            out.push(Piece {
                buf: s.saturating_sub(ctx)..(e + ctx).min(len),
                owned: s..e,
            });
            s = e;
        }
    }
    out
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
pub fn reading(
    repo: &gix::Repository,
    base: Option<&gix::ObjectId>,
    data: &[u8],
    limit: Option<u64>,
    ctx: usize,
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
    match repo.find_header(*base).map(|h| h.size()) {
        Ok(size) if size <= bound => {}
        _ => return Reading::Whole,
    }
    if gix::objs::FindExt::find(&repo.objects, base, &mut scratch.base).is_err() {
        return Reading::Whole;
    }
    let old = &scratch.base;
    if crate::archive::sniff(&old[..old.len().min(crate::archive::SNIFF_LEN)]).is_some() {
        return Reading::Whole;
    }
    let ranges = added_ranges(old, data);
    let pieces = plan(data.len(), &ranges, ctx, chunk_size);
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

    #[test]
    #[allow(clippy::single_range_in_vec_init)]
    fn windows_reach_ctx_back_and_merge_when_buffers_would_overlap() {
        let data = 10_000;
        let ctx = 100;
        // Far apart: two pieces, each owned from a - ctx to b, buffered ± ctx.
        let p = plan(data, &[1000..1010, 5000..5010], ctx, 1 << 20);
        assert_eq!(
            p,
            vec![
                Piece {
                    buf: 800..1110,
                    owned: 900..1010
                },
                Piece {
                    buf: 4800..5110,
                    owned: 4900..5010
                },
            ]
        );
        // Close: one piece. At the blob's ends: clipped.
        let p = plan(data, &[50..60, 300..310, 9990..10_000], ctx, 1 << 20);
        assert_eq!(p[0].owned, 0..310);
        assert_eq!(p[0].buf, 0..410);
        assert_eq!(p[1].owned, 9890..10_000);
        assert_eq!(p[1].buf, 9790..10_000);
        // A long range is cut into chunks, each with its own context.
        let p = plan(data, &[1000..4000], ctx, 1000);
        let owned: Vec<_> = p.iter().map(|p| p.owned.clone()).collect();
        assert_eq!(owned, vec![900..1900, 1900..2900, 2900..3900, 3900..4000]);
        assert!(p.iter().all(|p| p.buf.start + ctx == p.owned.start));
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
