//! The keyword prefilter: finds every occurrence of every rule keyword in a
//! lowercased copy of the scanned region.
//!
//! "Every occurrence" is literal: overlapping occurrences and keywords that
//! are prefixes of other keywords are all reported. That makes the set of
//! hits a pure function of the bytes around each position, which the chunk
//! contract needs (a non-overlapping search would depend on where the search
//! started). The default engine, [`PrefilterKind::ShiftOr`], verifies every
//! keyword of every candidate bucket, so it finds them all directly. The
//! Teddy and DFA engines (kept for comparison) search leftmost-longest and
//! restart one byte after the start of the previous hit; the shorter
//! keywords that match at the same position are exactly the keywords that
//! are prefixes of the longest one, which `prefixes` lists.

use aho_corasick::{packed, AhoCorasick, AhoCorasickKind, Input, MatchKind};

/// Most patterns one Teddy searcher takes (aho-corasick's packed limit).
const TEDDY_GROUP: usize = 64;
/// Above this many Teddy passes, one DFA pass is cheaper.
const TEDDY_MAX_GROUPS: usize = 4;
/// Teddy fingerprints the first three bytes; shorter patterns flood it.
const TEDDY_MIN_LEN: usize = 3;

/// Which engine finds keyword occurrences.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrefilterKind {
    /// A scalar bucketed shift-or filter over the first eight bytes of every
    /// keyword (one pass, any number of keywords, case folded by its table),
    /// then exact verification of each candidate.
    ShiftOr,
    /// SIMD Teddy searchers, one per group of at most 64 keywords.
    Teddy,
    /// One Aho-Corasick DFA.
    Dfa,
}

#[derive(Debug)]
enum Engine {
    ShiftOr(ShiftOr),
    Teddy(Vec<(packed::Searcher, Vec<u32>)>),
    Dfa(AhoCorasick),
    Empty,
}

#[derive(Debug)]
pub(crate) struct Prefilter {
    /// Lowercased keyword bytes, deduplicated.
    pub patterns: Vec<Vec<u8>>,
    /// For each pattern, the patterns (same engine group) that are proper
    /// prefixes of it.
    prefixes: Vec<Vec<u32>>,
    engine: Engine,
}

impl Prefilter {
    pub fn new(patterns: Vec<Vec<u8>>, force: Option<PrefilterKind>) -> Prefilter {
        if patterns.is_empty() {
            return Prefilter {
                patterns,
                prefixes: Vec::new(),
                engine: Engine::Empty,
            };
        }
        let groups: Vec<Vec<u32>> = {
            // Sorting keeps keywords with the same leading bytes in one group
            // (and so in one prefix-closure).
            let mut ids: Vec<u32> = (0..patterns.len() as u32).collect();
            ids.sort_by(|&a, &b| patterns[a as usize].cmp(&patterns[b as usize]));
            ids.chunks(TEDDY_GROUP).map(<[u32]>::to_vec).collect()
        };
        if force.is_none() || force == Some(PrefilterKind::ShiftOr) {
            let engine = Engine::ShiftOr(ShiftOr::new(&patterns));
            return Prefilter {
                patterns,
                prefixes: Vec::new(),
                engine,
            };
        }
        let teddy_ok = patterns.iter().all(|p| p.len() >= TEDDY_MIN_LEN)
            && groups.len() <= TEDDY_MAX_GROUPS
            && force != Some(PrefilterKind::Dfa);
        if teddy_ok {
            let searchers: Option<Vec<_>> = groups
                .iter()
                .map(|g| {
                    let mut b = packed::Config::new()
                        .match_kind(packed::MatchKind::LeftmostLongest)
                        .builder();
                    for &id in g {
                        b.add(&patterns[id as usize]);
                    }
                    b.build().map(|s| (s, g.clone()))
                })
                .collect();
            if let Some(searchers) = searchers {
                let prefixes = prefix_closure(&patterns, &groups);
                return Prefilter {
                    patterns,
                    prefixes,
                    engine: Engine::Teddy(searchers),
                };
            }
        }
        let ac = AhoCorasick::builder()
            .kind(Some(AhoCorasickKind::DFA))
            .match_kind(MatchKind::LeftmostLongest)
            .build(&patterns)
            .expect("keyword automaton within size limits");
        let all = vec![(0..patterns.len() as u32).collect::<Vec<_>>()];
        let prefixes = prefix_closure(&patterns, &all);
        Prefilter {
            patterns,
            prefixes,
            engine: Engine::Dfa(ac),
        }
    }

    pub fn kind(&self) -> PrefilterKind {
        match self.engine {
            Engine::ShiftOr(_) => PrefilterKind::ShiftOr,
            Engine::Teddy(_) => PrefilterKind::Teddy,
            _ => PrefilterKind::Dfa,
        }
    }

    /// True when [`find_all`](Self::find_all) wants the haystack
    /// ASCII-lowercased first.
    pub fn needs_folding(&self) -> bool {
        !matches!(self.engine, Engine::ShiftOr(_))
    }

    /// Appends `(pattern, position)` for every keyword occurrence in `hay`
    /// (lowercased first when [`needs_folding`](Self::needs_folding)).
    pub fn find_all(&self, hay: &[u8], hits: &mut Vec<(u32, usize)>) {
        match &self.engine {
            Engine::Empty => {}
            Engine::ShiftOr(so) => so.find_all(&self.patterns, hay, hits),
            Engine::Teddy(searchers) => {
                for (s, ids) in searchers {
                    let mut at = 0;
                    while let Some(m) = s.find_in(hay, aho_corasick::Span::from(at..hay.len())) {
                        let id = ids[m.pattern().as_usize()];
                        self.push(id, m.start(), hits);
                        at = m.start() + 1;
                    }
                }
            }
            Engine::Dfa(ac) => {
                let mut at = 0;
                while let Some(m) = ac.find(Input::new(hay).range(at..)) {
                    self.push(m.pattern().as_u32(), m.start(), hits);
                    at = m.start() + 1;
                }
            }
        }
    }

    fn push(&self, id: u32, pos: usize, hits: &mut Vec<(u32, usize)>) {
        hits.push((id, pos));
        for &p in &self.prefixes[id as usize] {
            hits.push((p, pos));
        }
    }
}

/// Lanes of the shift-or state: the first `LANES` bytes of each keyword are
/// filtered, longer keywords are checked in full on verification.
const LANES: usize = 8;
/// Buckets: bit `b` of every lane belongs to bucket `b`.
const BUCKETS: usize = 8;
/// Bits of a byte class; the filter's domain is a pair of classes.
const CLASS_BITS: usize = 5;
const DOMAIN: usize = 1 << (2 * CLASS_BITS);
/// Bytes stepped between two checks for candidates.
const BLOCK: usize = 8;
/// A candidate shows as a clear bit in the top lane.
const TOP: u64 = 0xff << (8 * (LANES - 1));

/// One shift-or stream: the state and the class pair ending at the last
/// byte read.
#[derive(Debug, Clone, Copy)]
struct Stream {
    d: u64,
    pair: u32,
}

/// Maps a byte to one of 32 classes: each letter (either case) has its own
/// class, then digits, `_`, `-`, `.`, `:` with `/`, and everything else.
/// (32 classes keep the pair table at 8 KiB, inside L1.)
const fn byte_class(c: u8) -> u8 {
    let c = c.to_ascii_lowercase();
    match c {
        b'a'..=b'z' => c - b'a',
        b'0'..=b'9' => 26,
        b'_' => 27,
        b'-' => 28,
        b'.' => 29,
        b':' | b'/' => 30,
        _ => 31,
    }
}

const CLASSES: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut c = 0;
    while c < 256 {
        t[c] = byte_class(c as u8);
        c += 1;
    }
    t
};

/// Bucketed shift-or over pairs of byte classes, in the manner of
/// Hyperscan's FDR but scalar (this crate forbids `unsafe`, so no SIMD).
///
/// The state `d` has one byte (lane) per keyword position `j < LANES`; bit
/// `b` of lane `j` is clear after reading byte `t` iff some keyword of bucket
/// `b` may match `hay[t-j..=t]` in its first `j+1` bytes (positions past a
/// keyword's end match anything). Lane `j > 0` is indexed by the classes of
/// the pair `hay[t-1], hay[t]` against the keyword's pair `p[j-1], p[j]`,
/// which is far more selective than single bytes. Each step is
/// `d = (d << 8) | table[pair]`; a clear bit in the top lane marks a
/// candidate start `t - 7`, verified against the bucket's keywords with that
/// first byte. Classes fold ASCII case, so no lowercased copy is needed.
#[derive(Debug)]
struct ShiftOr {
    table: Vec<u64>,
    /// `index[b * 256 + c]`: keywords of bucket `b` whose first byte
    /// (lowercase) is `c`.
    index: Vec<Vec<u32>>,
    /// OR of every table entry: clear exactly in the lanes that match
    /// anything (past the end of a bucket's shortest keyword).
    flush: u64,
}

impl ShiftOr {
    fn new(patterns: &[Vec<u8>]) -> ShiftOr {
        // Similar keywords share a bucket (sorted by length, then bytes), so
        // each lane of a bucket accepts few distinct pairs.
        let mut ids: Vec<u32> = (0..patterns.len() as u32).collect();
        ids.sort_by(|&a, &b| {
            let (pa, pb) = (&patterns[a as usize], &patterns[b as usize]);
            (pa.len().min(LANES), pa).cmp(&(pb.len().min(LANES), pb))
        });
        let per = ids.len().div_ceil(BUCKETS).max(1);
        let mut table = vec![!0u64; DOMAIN];
        let mut index = vec![Vec::new(); BUCKETS * 256];
        for (i, &id) in ids.iter().enumerate() {
            let b = i / per;
            let p = &patterns[id as usize];
            index[b * 256 + p[0] as usize].push(id);
            for j in 0..LANES {
                let bit = !(1u64 << (8 * j + b));
                match (j, p.get(j)) {
                    (_, None) => table.iter_mut().for_each(|t| *t &= bit),
                    (0, Some(&c)) => {
                        let cur = CLASSES[c as usize] as usize;
                        for prev in 0..1 << CLASS_BITS {
                            table[(prev << CLASS_BITS) | cur] &= bit;
                        }
                    }
                    (_, Some(&c)) => {
                        let prev = CLASSES[p[j - 1] as usize] as usize;
                        table[(prev << CLASS_BITS) | CLASSES[c as usize] as usize] &= bit;
                    }
                }
            }
        }
        let flush = table.iter().fold(0u64, |acc, &t| acc | t);
        ShiftOr {
            table,
            index,
            flush,
        }
    }

    /// One step: shift in byte `c` (class pair with the previous byte).
    #[inline(always)]
    fn step(table: &[u64], st: &mut Stream, c: u8) {
        let cur = u32::from(CLASSES[c as usize]);
        st.pair = ((st.pair << CLASS_BITS) | cur) & (DOMAIN as u32 - 1);
        st.d = (st.d << 8) | table[st.pair as usize];
    }

    /// Eight steps over `block` (at `base` in `hay`) with one branch; on a
    /// possible candidate, replays the block checking each step.
    #[inline(always)]
    fn block(
        &self,
        patterns: &[Vec<u8>],
        hay: &[u8],
        base: usize,
        st: &mut Stream,
        hits: &mut Vec<(u32, usize)>,
    ) {
        let table = &self.table[..DOMAIN];
        let start = *st;
        let mut all = !0u64;
        for &c in &hay[base..base + BLOCK] {
            Self::step(table, st, c);
            all &= st.d;
        }
        if all & TOP != TOP {
            self.replay(patterns, hay, base, base + BLOCK, start, hits);
        }
    }

    /// Steps over `hay[from..to]` from state `st`, verifying every candidate.
    #[cold]
    fn replay(
        &self,
        patterns: &[Vec<u8>],
        hay: &[u8],
        from: usize,
        to: usize,
        mut st: Stream,
        hits: &mut Vec<(u32, usize)>,
    ) -> Stream {
        let table = &self.table[..DOMAIN];
        for (t, &c) in hay.iter().enumerate().take(to).skip(from) {
            Self::step(table, &mut st, c);
            if st.d & TOP != TOP && t + 1 >= LANES {
                self.verify(patterns, hay, t + 1 - LANES, st.d, hits);
            }
        }
        st
    }

    fn find_all(&self, patterns: &[Vec<u8>], hay: &[u8], hits: &mut Vec<(u32, usize)>) {
        let n = hay.len();
        let fresh = Stream { d: !0, pair: 0 };
        // Two independent streams, A over the first half and B over the
        // second, stepped in the same loop so their dependency chains
        // overlap. A then finishes the keywords that start in its half but
        // end in B's (LANES - 1 more bytes); B flushes the end.
        let half = (n / 2) / BLOCK * BLOCK;
        let mut a = fresh;
        let mut b = Stream {
            d: !0,
            pair: hay
                .get(half.wrapping_sub(1))
                .map_or(0, |&c| u32::from(CLASSES[c as usize])),
        };
        let (mut pa, mut pb) = (0, half);
        if half >= BLOCK {
            while pa < half {
                self.block(patterns, hay, pa, &mut a, hits);
                self.block(patterns, hay, pb, &mut b, hits);
                pa += BLOCK;
                pb += BLOCK;
            }
            self.replay(patterns, hay, half, (half + LANES - 1).min(n), a, hits);
        } else {
            b = fresh;
            pb = 0;
        }
        while pb + BLOCK <= n {
            self.block(patterns, hay, pb, &mut b, hits);
            pb += BLOCK;
        }
        b = self.replay(patterns, hay, pb, n, b, hits);
        // Flush: shift in "anything" so keywords shorter than LANES that end
        // near the end of `hay` reach the top lane.
        for t in n..n + LANES - 1 {
            b.d = (b.d << 8) | self.flush;
            if b.d & TOP != TOP && t + 1 >= LANES {
                self.verify(patterns, hay, t + 1 - LANES, b.d, hits);
            }
        }
    }

    #[cold]
    fn verify(
        &self,
        patterns: &[Vec<u8>],
        hay: &[u8],
        start: usize,
        d: u64,
        hits: &mut Vec<(u32, usize)>,
    ) {
        let mut buckets = !(d >> (8 * (LANES - 1))) & 0xff;
        let first = hay[start].to_ascii_lowercase() as usize;
        while buckets != 0 {
            let b = buckets.trailing_zeros() as usize;
            buckets &= buckets - 1;
            for &id in &self.index[b * 256 + first] {
                let p = &patterns[id as usize];
                if hay.len() - start >= p.len()
                    && hay[start..start + p.len()].eq_ignore_ascii_case(p)
                {
                    hits.push((id, start));
                }
            }
        }
    }
}

fn prefix_closure(patterns: &[Vec<u8>], groups: &[Vec<u32>]) -> Vec<Vec<u32>> {
    let mut out = vec![Vec::new(); patterns.len()];
    for g in groups {
        for &a in g {
            for &b in g {
                let (pa, pb) = (&patterns[a as usize], &patterns[b as usize]);
                if a != b && pb.len() < pa.len() && pa.starts_with(pb) {
                    out[a as usize].push(b);
                }
            }
        }
    }
    out
}

/// Copies `src` into `dst`, ASCII-lowercased. Written as a plain loop over
/// bytes so the compiler vectorises it.
pub(crate) fn fold_into(src: &[u8], dst: &mut Vec<u8>) {
    dst.clear();
    dst.resize(src.len(), 0);
    for (d, &s) in dst.iter_mut().zip(src) {
        *d = s | (u8::from(s.is_ascii_uppercase()) << 5);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hits(pf: &Prefilter, hay: &str) -> Vec<(String, usize)> {
        let mut h = Vec::new();
        pf.find_all(hay.as_bytes(), &mut h);
        let mut v: Vec<_> = h
            .into_iter()
            .map(|(id, p)| {
                (
                    String::from_utf8(pf.patterns[id as usize].clone()).unwrap(),
                    p,
                )
            })
            .collect();
        v.sort();
        v
    }

    #[test]
    fn every_overlapping_and_prefix_occurrence_is_found() {
        let pats: Vec<Vec<u8>> = ["aaa", "aaab", "sk_", "sk_live_", "token"]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect();
        let want = vec![
            ("aaa".to_string(), 0),
            ("aaa".to_string(), 1),
            ("aaab".to_string(), 1),
            ("sk_".to_string(), 6),
            ("sk_live_".to_string(), 6),
            ("token".to_string(), 15),
        ];
        for kind in [
            PrefilterKind::ShiftOr,
            PrefilterKind::Teddy,
            PrefilterKind::Dfa,
        ] {
            let pf = Prefilter::new(pats.clone(), Some(kind));
            assert_eq!(hits(&pf, "aaaab sk_live_ token"), want, "{kind:?}");
            if kind == PrefilterKind::ShiftOr {
                // Case is folded by the table; short haystacks are flushed.
                assert_eq!(hits(&pf, "TOKEN"), vec![("token".to_string(), 0)]);
                assert_eq!(hits(&pf, "aaa"), vec![("aaa".to_string(), 0)]);
            }
        }
    }

    #[test]
    fn shift_or_agrees_with_the_dfa_on_random_haystacks() {
        use crate::rules::template::Rng;
        let kws = [
            "ghp_",
            "token",
            "sk_live_",
            "sk_",
            "-----begin rsa",
            "://",
            "hf_",
            "a3-",
            "xoxb-",
            "passw",
            "eyj",
        ];
        let pats: Vec<Vec<u8>> = kws.iter().map(|s| s.as_bytes().to_vec()).collect();
        let so = Prefilter::new(pats.clone(), Some(PrefilterKind::ShiftOr));
        let dfa = Prefilter::new(pats, Some(PrefilterKind::Dfa));
        let mut rng = Rng::new(9);
        for len in (0..400).chain([1000, 4099, 65_536]) {
            let mut hay: Vec<u8> = (0..len)
                .map(|_| *rng.pick(b"abcdefghijklmnopqrstuvwxyz _-:/.\n0123TOKENGHP"))
                .collect();
            for _ in 0..len / 20 {
                let k = rng.pick(&kws).as_bytes();
                if len >= k.len() {
                    let at = rng.range(0, len - k.len());
                    hay[at..at + k.len()].copy_from_slice(k);
                }
            }
            let folded = hay.to_ascii_lowercase();
            let (mut a, mut b) = (Vec::new(), Vec::new());
            so.find_all(&hay, &mut a);
            dfa.find_all(&folded, &mut b);
            a.sort_unstable();
            b.sort_unstable();
            assert_eq!(a, b, "haystack of {len} bytes");
        }
    }
}
