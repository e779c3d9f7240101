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
    /// Eight buckets (one state word).
    ShiftOr1(ShiftOr<1>),
    /// Sixteen buckets (two state words).
    ShiftOr2(ShiftOr<2>),
    Teddy(Vec<(packed::Searcher, Vec<u32>)>),
    Dfa(AhoCorasick),
    Empty,
}

#[derive(Debug)]
pub(crate) struct Prefilter {
    /// Lowercased keyword bytes, deduplicated.
    pub patterns: Vec<Vec<u8>>,
    /// For each pattern, the classes ([`byte_class`]) of the byte before an
    /// occurrence that let it be reported (bit `c` = class `c`; [`ANY`] for
    /// most). A hit at the buffer's start counts as preceded by class
    /// [`START`].
    after: Vec<u32>,
    /// For each pattern, the patterns (same engine group) that are proper
    /// prefixes of it.
    prefixes: Vec<Vec<u32>>,
    engine: Engine,
}

impl Prefilter {
    /// `after[i]`: the byte classes that may precede an occurrence of
    /// `patterns[i]` (see [`Prefilter::after`]).
    pub fn new(patterns: Vec<Vec<u8>>, after: Vec<u32>, force: Option<PrefilterKind>) -> Prefilter {
        assert_eq!(patterns.len(), after.len(), "one class mask per pattern");
        if patterns.is_empty() {
            return Prefilter {
                patterns,
                after,
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
            let engine = shift_or(&patterns, &after, None);
            return Prefilter {
                patterns,
                after,
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
                    after,
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
            after,
            prefixes,
            engine: Engine::Dfa(ac),
        }
    }

    /// The classes that may precede a reported occurrence of pattern `id`.
    pub fn after(&self, id: usize) -> u32 {
        self.after[id]
    }

    pub fn kind(&self) -> PrefilterKind {
        match self.engine {
            Engine::ShiftOr1(_) | Engine::ShiftOr2(_) => PrefilterKind::ShiftOr,
            Engine::Teddy(_) => PrefilterKind::Teddy,
            _ => PrefilterKind::Dfa,
        }
    }

    /// True when [`find_all`](Self::find_all) wants the haystack
    /// ASCII-lowercased first.
    pub fn needs_folding(&self) -> bool {
        !matches!(self.engine, Engine::ShiftOr1(_) | Engine::ShiftOr2(_))
    }

    /// Appends `(pattern, position)` for every keyword occurrence in `hay`
    /// (lowercased first when [`needs_folding`](Self::needs_folding)) whose
    /// preceding byte is of a class the pattern allows. `prev` is the byte
    /// before `hay` in the scanned buffer, `None` at the buffer's start.
    pub fn find_all(&self, hay: &[u8], prev: Option<u8>, hits: &mut Vec<(u32, usize)>) {
        let prev = prev.map_or(START, |c| CLASSES[c as usize]);
        match &self.engine {
            Engine::Empty => {}
            Engine::ShiftOr1(so) => so.find_all(&self.patterns, &self.after, hay, prev, hits),
            Engine::ShiftOr2(so) => so.find_all(&self.patterns, &self.after, hay, prev, hits),
            Engine::Teddy(searchers) => {
                for (s, ids) in searchers {
                    let mut at = 0;
                    while let Some(m) = s.find_in(hay, aho_corasick::Span::from(at..hay.len())) {
                        let id = ids[m.pattern().as_usize()];
                        self.push(id, hay, prev, m.start(), hits);
                        at = m.start() + 1;
                    }
                }
            }
            Engine::Dfa(ac) => {
                let mut at = 0;
                while let Some(m) = ac.find(Input::new(hay).range(at..)) {
                    self.push(m.pattern().as_u32(), hay, prev, m.start(), hits);
                    at = m.start() + 1;
                }
            }
        }
    }

    fn push(&self, id: u32, hay: &[u8], prev: u8, pos: usize, hits: &mut Vec<(u32, usize)>) {
        let before = class_before(hay, prev, pos);
        for p in std::iter::once(id).chain(self.prefixes[id as usize].iter().copied()) {
            if self.after[p as usize] & (1 << before) != 0 {
                hits.push((p, pos));
            }
        }
    }
}

/// Lanes of the shift-or state: the first `LANES` bytes of each keyword are
/// filtered, longer keywords are checked in full on verification.
const LANES: usize = 8;
/// Most words of the shift-or state. Each `u64` word is a filter of its
/// own: `LANES` lanes of eight bits, one bit per bucket, shifted by eight
/// bits per byte. The words share the class pair (one table entry holds a
/// word for each), so a second word doubles the buckets at the cost of one
/// more shift, OR and AND per byte, and halves the keywords per bucket.
/// Which pays depends on the keyword set ([`shift_or`]).
const MAX_WORDS: usize = 2;
/// Buckets of one word.
const WORD_BUCKETS: usize = 8;
/// Most buckets: bit `b % 8` of every lane of word `b / 8` belongs to
/// bucket `b`.
const MAX_BUCKETS: usize = WORD_BUCKETS * MAX_WORDS;
/// Bits of a byte class; the filter's domain is a pair of classes.
const CLASS_BITS: usize = 5;
const DOMAIN: usize = 1 << (2 * CLASS_BITS);
/// Bytes stepped between two checks for candidates.
const BLOCK: usize = 8;
/// A candidate shows as a clear bit in the top lane.
const TOP: u64 = 0xff << (8 * (LANES - 1));

/// One table entry or state: a `u64` per word.
type State<const W: usize> = [u64; W];

/// One shift-or stream: the state and the class pair ending at the last
/// byte read.
#[derive(Debug, Clone, Copy)]
struct Stream<const W: usize> {
    d: State<W>,
    pair: u32,
}

/// AND of the words: a clear bit in its top lane is a candidate in some
/// word.
#[inline(always)]
fn and_words<const W: usize>(d: &State<W>) -> u64 {
    d.iter().fold(!0, |a, &w| a & w)
}

/// Maps a byte to one of 32 classes: each letter (either case) has its own
/// class but `z`, which shares `q`'s (the two rarest letters), then digits,
/// `_`, `-`, `.`, `:` with `/`, `$`, and everything else. (32 classes keep
/// the pair table at 16 KiB, inside L1.) `$` has a class of its own because
/// the password-hash keywords `$1$`, `$5$`, ... are otherwise "other,
/// digit, other", a shape that `(1)`, `[0]` and most binary data (every
/// `.pyc` file) are full of: with `$` among the other bytes those keywords
/// passed about 10 positions per KB of a `.pyc` file, where the rest of
/// the keywords pass about 0.5.
const fn byte_class(c: u8) -> u8 {
    let c = c.to_ascii_lowercase();
    match c {
        b'z' => b'q' - b'a',
        b'a'..=b'y' => c - b'a',
        b'0'..=b'9' => LETTER_CLASSES,
        b'_' => LETTER_CLASSES + 1,
        b'-' => LETTER_CLASSES + 2,
        b'.' => LETTER_CLASSES + 3,
        b':' | b'/' => LETTER_CLASSES + 4,
        b'$' => LETTER_CLASSES + 5,
        _ => 31,
    }
}

/// Classes `0..LETTER_CLASSES` are letters (25: `z` shares `q`'s class);
/// the digits' class comes next, then `_`'s.
const LETTER_CLASSES: u8 = 25;
const _: () = assert!(byte_class(b'y') == LETTER_CLASSES - 1 && byte_class(b'$') < 31);

/// Every class may precede the keyword: the default.
pub(crate) const ANY: u32 = !0;
/// Classes of the bytes that are not ASCII letters (digits, `_`, `-`, `.`,
/// `:` and `/`, and everything else, non-ASCII bytes included).
pub(crate) const NOT_LETTER: u32 = !((1 << LETTER_CLASSES) - 1);
/// Classes of the bytes that are not ASCII word characters
/// (`[A-Za-z0-9_]`).
pub(crate) const NOT_WORD: u32 = !((1 << (LETTER_CLASSES + 2)) - 1);
/// The class a hit at the start of the buffer counts as preceded by: the
/// "everything else" class, which [`NOT_LETTER`] and [`NOT_WORD`] allow
/// (a regex's `^` and `\b` see no letter there either).
const START: u8 = 31;

/// Class of the byte before `hay[pos]` (`prev` at 0).
fn class_before(hay: &[u8], prev: u8, pos: usize) -> u8 {
    match pos.checked_sub(1) {
        Some(p) => CLASSES[hay[p] as usize],
        None => prev,
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
struct ShiftOr<const W: usize> {
    table: Vec<State<W>>,
    /// The keywords of bucket `b` whose first byte (lowercase) is `c`:
    /// `ids[starts[b * 256 + c]..starts[b * 256 + c + 1]]` (one flat array:
    /// a `Vec` per slot took 24 bytes each, 98 KB for 16 buckets, and
    /// every candidate read one).
    starts: Vec<u32>,
    ids: Vec<u32>,
    /// OR of every table entry: clear exactly in the lanes that match
    /// anything (past the end of a bucket's shortest keyword).
    flush: State<W>,
}

/// The extra estimated pass rate (keyword candidates per byte, by
/// [`bucket_cost`]) that eight more buckets must save before a second state
/// word pays for its shift, OR and AND on every byte. Set between the two
/// keyword sets it was calibrated on (2026-11-28, callgrind, one worker, a
/// 94 MB eighth of the Python standard library): the built-in rules' 707
/// keywords are estimated to pass 0.098 per byte in 8 buckets and 0.0048 in
/// 16 (a saving of 0.093), and their filter cost the same instructions with
/// one word or two (1.50 G against 1.48 G); gitleaks' config's 244 keywords
/// pass 0.011 and 0.0013 (a saving of 0.0094), and its second word cost
/// 0.50 G more (1.65 G against 1.15 G, 8 % of the whole scan).
const SECOND_WORD_SAVING: f64 = 0.03;

/// The shift-or engine for `patterns`: keywords with the same context set
/// and similar lengths share a bucket (sorted by context set, then length,
/// then bytes), and [`bucket_bounds`] cuts the sorted list where the filter
/// passes the fewest non-matches (short keywords fill only the lanes they
/// have, so a bucket holding them must hold few). Sixteen buckets when
/// they pass [`SECOND_WORD_SAVING`] fewer positions than eight, else eight;
/// `words` forces one or two (tests).
fn shift_or(patterns: &[Vec<u8>], after: &[u32], words: Option<usize>) -> Engine {
    let mut ids: Vec<u32> = (0..patterns.len() as u32).collect();
    ids.sort_by(|&a, &b| {
        let (pa, pb) = (&patterns[a as usize], &patterns[b as usize]);
        let (ka, kb) = (after[a as usize], after[b as usize]);
        (ka, pa.len().min(LANES), pa).cmp(&(kb, pb.len().min(LANES), pb))
    });
    let sorted: Vec<(usize, u32)> = ids
        .iter()
        .map(|&id| (patterns[id as usize].len(), after[id as usize]))
        .collect();
    let (one, one_cost) = bucket_bounds(&sorted, WORD_BUCKETS);
    let (two, two_cost) = bucket_bounds(&sorted, MAX_BUCKETS);
    if words.map_or(one_cost - two_cost > SECOND_WORD_SAVING, |w| w == 2) {
        Engine::ShiftOr2(ShiftOr::new(patterns, after, &ids, &two))
    } else {
        Engine::ShiftOr1(ShiftOr::new(patterns, after, &ids, &one))
    }
}

impl<const W: usize> ShiftOr<W> {
    /// `ids`: the keywords in bucket order; `bounds`: where each of the
    /// `W * 8` buckets ends in it.
    fn new(patterns: &[Vec<u8>], after: &[u32], ids: &[u32], bounds: &[usize]) -> Self {
        debug_assert_eq!(bounds.len(), W * WORD_BUCKETS);
        let mut table = vec![[!0u64; W]; DOMAIN];
        let mut index = vec![Vec::new(); W * WORD_BUCKETS * 256];
        for (i, &id) in ids.iter().enumerate() {
            let b = bounds.partition_point(|&end| end <= i);
            let (w, wb) = (b / WORD_BUCKETS, b % WORD_BUCKETS);
            let p = &patterns[id as usize];
            index[b * 256 + p[0] as usize].push(id);
            for j in 0..LANES {
                let bit = !(1u64 << (8 * j + wb));
                match (j, p.get(j)) {
                    (_, None) => table.iter_mut().for_each(|t| t[w] &= bit),
                    (0, Some(&c)) => {
                        // Lane 0 sees the pair (byte before, first byte).
                        let cur = CLASSES[c as usize] as usize;
                        for prev in 0..1 << CLASS_BITS {
                            if after[id as usize] & (1 << prev) != 0 {
                                table[(prev << CLASS_BITS) | cur][w] &= bit;
                            }
                        }
                    }
                    (_, Some(&c)) => {
                        let prev = CLASSES[p[j - 1] as usize] as usize;
                        table[(prev << CLASS_BITS) | CLASSES[c as usize] as usize][w] &= bit;
                    }
                }
            }
        }
        let mut starts = Vec::with_capacity(index.len() + 1);
        let mut flat = Vec::with_capacity(patterns.len());
        for slot in &index {
            starts.push(flat.len() as u32);
            flat.extend_from_slice(slot);
        }
        starts.push(flat.len() as u32);
        let mut flush = [0u64; W];
        for t in &table {
            for (f, &x) in flush.iter_mut().zip(t) {
                *f |= x;
            }
        }
        ShiftOr {
            table,
            starts,
            ids: flat,
            flush,
        }
    }

    /// One step: shift in byte `c` (class pair with the previous byte).
    #[inline(always)]
    fn step(table: &[State<W>], st: &mut Stream<W>, c: u8) {
        let cur = u32::from(CLASSES[c as usize]);
        st.pair = ((st.pair << CLASS_BITS) | cur) & (DOMAIN as u32 - 1);
        let t = &table[st.pair as usize];
        for (d, &x) in st.d.iter_mut().zip(t) {
            *d = (*d << 8) | x;
        }
    }

    /// Eight steps over `block` (at `base` in `hay`) with one branch; on a
    /// possible candidate, replays the block checking each step.
    #[inline(always)]
    fn block(&self, hay: &Hay, base: usize, st: &mut Stream<W>, hits: &mut Vec<(u32, usize)>) {
        let table = &self.table[..DOMAIN];
        let start = *st;
        let mut all = [!0u64; W];
        for &c in &hay.bytes[base..base + BLOCK] {
            Self::step(table, st, c);
            for (a, &d) in all.iter_mut().zip(&st.d) {
                *a &= d;
            }
        }
        if and_words(&all) & TOP != TOP {
            self.replay(hay, base, base + BLOCK, start, hits);
        }
    }

    /// Steps over `hay[from..to]` from state `st`, verifying every candidate.
    #[cold]
    fn replay(
        &self,
        hay: &Hay,
        from: usize,
        to: usize,
        mut st: Stream<W>,
        hits: &mut Vec<(u32, usize)>,
    ) -> Stream<W> {
        let table = &self.table[..DOMAIN];
        for (t, &c) in hay.bytes.iter().enumerate().take(to).skip(from) {
            Self::step(table, &mut st, c);
            if and_words(&st.d) & TOP != TOP && t + 1 >= LANES {
                self.verify(hay, t + 1 - LANES, &st.d, hits);
            }
        }
        st
    }

    fn find_all(
        &self,
        patterns: &[Vec<u8>],
        after: &[u32],
        bytes: &[u8],
        prev: u8,
        hits: &mut Vec<(u32, usize)>,
    ) {
        let hay = Hay {
            patterns,
            after,
            bytes,
            prev,
        };
        let n = bytes.len();
        // The stream starting at 0 starts after the byte before `hay`.
        let fresh = Stream {
            d: [!0; W],
            pair: u32::from(prev),
        };
        // Two independent streams, A over the first half and B over the
        // second, stepped in the same loop so their dependency chains
        // overlap. A then finishes the keywords that start in its half but
        // end in B's (LANES - 1 more bytes); B flushes the end.
        let half = (n / 2) / BLOCK * BLOCK;
        let mut a = fresh;
        let mut b = Stream {
            d: [!0; W],
            pair: bytes
                .get(half.wrapping_sub(1))
                .map_or(0, |&c| u32::from(CLASSES[c as usize])),
        };
        let (mut pa, mut pb) = (0, half);
        if half >= BLOCK {
            while pa < half {
                self.block(&hay, pa, &mut a, hits);
                self.block(&hay, pb, &mut b, hits);
                pa += BLOCK;
                pb += BLOCK;
            }
            self.replay(&hay, half, (half + LANES - 1).min(n), a, hits);
        } else {
            b = fresh;
            pb = 0;
        }
        while pb + BLOCK <= n {
            self.block(&hay, pb, &mut b, hits);
            pb += BLOCK;
        }
        b = self.replay(&hay, pb, n, b, hits);
        // Flush: shift in "anything" so keywords shorter than LANES that end
        // near the end of `hay` reach the top lane.
        for t in n..n + LANES - 1 {
            for (d, &f) in b.d.iter_mut().zip(&self.flush) {
                *d = (*d << 8) | f;
            }
            if and_words(&b.d) & TOP != TOP && t + 1 >= LANES {
                self.verify(&hay, t + 1 - LANES, &b.d, hits);
            }
        }
    }

    #[cold]
    fn verify(&self, hay: &Hay, start: usize, d: &State<W>, hits: &mut Vec<(u32, usize)>) {
        let bytes = hay.bytes;
        // Bit b: bucket b's top lane is clear.
        let mut buckets = d.iter().enumerate().fold(0u32, |acc, (w, &x)| {
            acc | ((!(x >> (8 * (LANES - 1))) & 0xff) as u32) << (WORD_BUCKETS * w)
        });
        let first = bytes[start].to_ascii_lowercase() as usize;
        let before = 1u32 << class_before(bytes, hay.prev, start);
        while buckets != 0 {
            let b = buckets.trailing_zeros() as usize;
            buckets &= buckets - 1;
            let slot = b * 256 + first;
            let (lo, hi) = (self.starts[slot] as usize, self.starts[slot + 1] as usize);
            for &id in &self.ids[lo..hi] {
                let p = &hay.patterns[id as usize];
                if bytes.len() - start >= p.len()
                    && hay.after[id as usize] & before != 0
                    && bytes[start..start + p.len()].eq_ignore_ascii_case(p)
                {
                    hits.push((id, start));
                }
            }
        }
    }
}

/// Share of text positions whose class pair one keyword accepts in a lane
/// past the first (about a common bigram's), for [`bucket_cost`].
const PAIR_RATE: f64 = 1.0 / 200.0;

/// Estimated share of positions where a bucket of `k` keywords, the
/// shortest `len` bytes long, with context set `after`, passes the filter:
/// the first lane passes about `k` of 26 first letters (a fifth as many
/// where a keyword must start a word), each further lane `k` pairs.
fn bucket_cost(k: usize, len: usize, after: u32) -> f64 {
    let k = k as f64;
    let first = (k / f64::from(LETTER_CLASSES)).min(1.0) * if after == ANY { 1.0 } else { 0.2 };
    let depth = len.clamp(1, LANES) as i32 - 1;
    first * (k * PAIR_RATE).min(1.0).powi(depth)
}

/// Most places [`bucket_bounds`] considers for a cut, besides the places
/// where the keyword length or context set changes. The search is quadratic
/// in them: over every keyword of the 658 built-in rules it took 278 M
/// instructions (about 0.1 s of CPU) at every start of the scanner, most of
/// the time of a scan of an empty directory.
const MAX_CUTS: usize = 128;

/// Cuts `sorted` (keyword length and context set, in bucket order) into at
/// most `buckets` contiguous runs with the least total [`bucket_cost`];
/// returns the end index of each run and that total. Exact up to [`MAX_CUTS`] keywords;
/// above that, runs end only where the length or context set changes or on
/// a grid of about `MAX_CUTS` places (the cost model is an estimate, so the
/// best cut on the grid is as good a guess as the best cut anywhere).
fn bucket_bounds(sorted: &[(usize, u32)], buckets: usize) -> (Vec<usize>, f64) {
    let n = sorted.len();
    let step = n.div_ceil(MAX_CUTS).max(1);
    let key = |i: usize| (sorted[i].0.min(LANES), sorted[i].1);
    // The places a run may start or end, ascending, 0 and n included.
    let places: Vec<usize> = (0..=n)
        .filter(|&i| i == 0 || i == n || i % step == 0 || key(i) != key(i - 1))
        .collect();
    let m = places.len();
    // Shortest length and context set of the keywords between two places.
    let seg: Vec<(usize, u32)> = places
        .windows(2)
        .map(|w| {
            sorted[w[0]..w[1]]
                .iter()
                .fold((LANES, 0u32), |(l, a), &(len, after)| {
                    (l.min(len), a | after)
                })
        })
        .collect();
    // best[b][q]: least cost of the keywords before places[q] in b + 1
    // runs; cut[b][q]: the place where the last of those runs starts.
    let mut best = vec![vec![f64::INFINITY; m]; buckets];
    let mut cut = vec![vec![0usize; m]; buckets];
    for b in 0..buckets {
        for q in 0..m {
            // The run places[p]..places[q], grown leftwards.
            let (mut len, mut after) = (LANES, 0u32);
            for p in (0..=q).rev() {
                if p < q {
                    len = len.min(seg[p].0);
                    after |= seg[p].1;
                }
                let before = match b {
                    0 if p > 0 => continue,
                    0 => 0.0,
                    _ => best[b - 1][p],
                };
                let c = before + bucket_cost(places[q] - places[p], len, after);
                if c < best[b][q] {
                    best[b][q] = c;
                    cut[b][q] = p;
                }
            }
        }
    }
    let mut ends = vec![n; buckets];
    let mut q = m - 1;
    for b in (0..buckets).rev() {
        ends[b] = places[q];
        q = cut[b][q];
    }
    (ends, best[buckets - 1][m - 1])
}

/// What the shift-or filter searches and verifies against.
struct Hay<'a> {
    patterns: &'a [Vec<u8>],
    after: &'a [u32],
    bytes: &'a [u8],
    /// Class of the byte before `bytes` ([`START`] at the buffer's start).
    prev: u8,
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

    fn pats(kws: &[&str]) -> Vec<Vec<u8>> {
        kws.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    fn hits(pf: &Prefilter, hay: &str, prev: Option<u8>) -> Vec<(String, usize)> {
        let mut h = Vec::new();
        // Teddy and the DFA search a lowercased copy.
        let hay = if pf.needs_folding() {
            hay.to_ascii_lowercase()
        } else {
            hay.to_string()
        };
        pf.find_all(hay.as_bytes(), prev, &mut h);
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

    const KINDS: [PrefilterKind; 3] = [
        PrefilterKind::ShiftOr,
        PrefilterKind::Teddy,
        PrefilterKind::Dfa,
    ];

    #[test]
    fn every_overlapping_and_prefix_occurrence_is_found() {
        let pats = pats(&["aaa", "aaab", "sk_", "sk_live_", "token"]);
        let want = vec![
            ("aaa".to_string(), 0),
            ("aaa".to_string(), 1),
            ("aaab".to_string(), 1),
            ("sk_".to_string(), 6),
            ("sk_live_".to_string(), 6),
            ("token".to_string(), 15),
        ];
        for kind in KINDS {
            let pf = Prefilter::new(pats.clone(), vec![ANY; pats.len()], Some(kind));
            assert_eq!(hits(&pf, "aaaab sk_live_ token", None), want, "{kind:?}");
            if kind == PrefilterKind::ShiftOr {
                // Case is folded by the table; short haystacks are flushed.
                assert_eq!(hits(&pf, "TOKEN", None), vec![("token".to_string(), 0)]);
                assert_eq!(hits(&pf, "aaa", None), vec![("aaa".to_string(), 0)]);
            }
        }
    }

    #[test]
    fn the_class_masks_are_the_byte_sets_they_name() {
        for c in 0..=255u8 {
            let bit = 1u32 << CLASSES[c as usize];
            assert_eq!(NOT_LETTER & bit != 0, !c.is_ascii_alphabetic(), "{c}");
            assert_eq!(
                NOT_WORD & bit != 0,
                !(c.is_ascii_alphanumeric() || c == b'_'),
                "{c}"
            );
        }
        const { assert!(NOT_LETTER & NOT_WORD & (1 << START) != 0) };
    }

    #[test]
    fn a_keyword_that_must_start_a_word_is_not_reported_after_a_letter() {
        // "jira" must not follow a letter, "cio" a word character; "pk_"
        // may follow anything.
        let pats = pats(&["jira", "cio", "pk_"]);
        let after = vec![NOT_LETTER, NOT_WORD, ANY];
        for kind in KINDS {
            let pf = Prefilter::new(pats.clone(), after.clone(), Some(kind));
            let got = hits(&pf, "jira xjira 2jira _JIRA cio acio 9cio -cio apk_", None);
            let want: Vec<(String, usize)> = vec![
                ("cio".into(), 23),
                ("cio".into(), 38),
                ("jira".into(), 0),
                ("jira".into(), 12),
                ("jira".into(), 18),
                ("pk_".into(), 43),
            ];
            assert_eq!(got, want, "{kind:?}");
            // At the haystack's start the byte before it decides; at the
            // buffer's start (None) nothing precedes the keyword.
            assert_eq!(hits(&pf, "jira", Some(b'x')), vec![], "{kind:?}");
            assert_eq!(
                hits(&pf, "jira", Some(b'1')),
                vec![("jira".to_string(), 0)],
                "{kind:?}"
            );
            assert_eq!(hits(&pf, "cio", Some(b'1')), vec![], "{kind:?}");
            assert_eq!(
                hits(&pf, "cio", None),
                vec![("cio".to_string(), 0)],
                "{kind:?}"
            );
        }
    }

    /// Every occurrence whose preceding byte's class is in the pattern's
    /// mask, by brute force.
    fn brute(pats: &[Vec<u8>], after: &[u32], hay: &[u8], prev: Option<u8>) -> Vec<(u32, usize)> {
        let prev = prev.map_or(START, |c| CLASSES[c as usize]);
        let mut out = Vec::new();
        for at in 0..hay.len() {
            for (id, p) in pats.iter().enumerate() {
                if hay.len() - at >= p.len()
                    && hay[at..at + p.len()].eq_ignore_ascii_case(p)
                    && after[id] & (1 << class_before(hay, prev, at)) != 0
                {
                    out.push((id as u32, at));
                }
            }
        }
        out.sort_unstable();
        out
    }

    #[test]
    fn every_bucket_of_a_large_keyword_set_finds_what_brute_force_finds() {
        // Enough keywords (lengths 2 to 20, every context mask) to fill
        // every bucket of every word of the shift-or state.
        use crate::rules::template::Rng;
        let mut rng = Rng::new(17);
        let alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789_-.:/$";
        let mut kws: Vec<Vec<u8>> = Vec::new();
        while kws.len() < 300 {
            let len = rng.range(2, 20);
            let k: Vec<u8> = (0..len).map(|_| *rng.pick(alphabet)).collect();
            if !kws.contains(&k) {
                kws.push(k);
            }
        }
        let masks = [ANY, NOT_LETTER, NOT_WORD];
        let after: Vec<u32> = kws.iter().map(|_| *rng.pick(&masks)).collect();
        for words in [1, 2] {
            let pf = Prefilter {
                engine: shift_or(&kws, &after, Some(words)),
                patterns: kws.clone(),
                after: after.clone(),
                prefixes: Vec::new(),
            };
            let (buckets, used) = match &pf.engine {
                Engine::ShiftOr1(so) => (WORD_BUCKETS, so.used_buckets()),
                Engine::ShiftOr2(so) => (MAX_BUCKETS, so.used_buckets()),
                _ => panic!("shift-or forced"),
            };
            assert_eq!(buckets, words * WORD_BUCKETS);
            assert_eq!(used, buckets, "every bucket holds keywords");
            check_against_brute(&pf, &kws, &after, &mut rng);
        }
    }

    /// Haystacks of several lengths, keywords planted, against brute force.
    fn check_against_brute(
        pf: &Prefilter,
        kws: &[Vec<u8>],
        after: &[u32],
        rng: &mut crate::rules::template::Rng,
    ) {
        let mut total = 0;
        for len in [0, 1, 7, 8, 9, 63, 500, 2000] {
            let mut hay: Vec<u8> = (0..len)
                .map(|_| *rng.pick(b"abcdefghijklmnopqrstuvwxyzABC 0123_-.:/$\n"))
                .collect();
            for _ in 0..len / 10 {
                let k = rng.pick(kws).clone();
                if len >= k.len() {
                    let at = rng.range(0, len - k.len());
                    hay[at..at + k.len()].copy_from_slice(&k);
                }
            }
            for prev in [None, Some(b'q')] {
                let want = brute(kws, after, &hay, prev);
                let mut got = Vec::new();
                pf.find_all(&hay, prev, &mut got);
                got.sort_unstable();
                assert_eq!(got, want, "{len} bytes, byte before {prev:?}");
                total += want.len();
            }
        }
        // 134 (first run).
        assert!(total > 100, "{total} hits: the haystacks hold keywords");
    }

    #[test]
    fn every_engine_agrees_with_brute_force_on_random_haystacks() {
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
            "jira",
            "okta",
            "technicalanalysisapi",
        ];
        let pats = pats(&kws);
        let mut rng = Rng::new(9);
        let masks = [ANY, NOT_LETTER, NOT_WORD];
        for round in 0..3 {
            // Round 0: no context; then a random mask per keyword.
            let after: Vec<u32> = (0..pats.len())
                .map(|_| if round == 0 { ANY } else { *rng.pick(&masks) })
                .collect();
            let engines: Vec<Prefilter> = KINDS
                .iter()
                .map(|&k| Prefilter::new(pats.clone(), after.clone(), Some(k)))
                .collect();
            for len in (0..300).chain([1000, 4099, 65_536]) {
                let mut hay: Vec<u8> = (0..len)
                    .map(|_| *rng.pick(b"abcdefghijklmnopqrstuvwxyz _-:/.\n0123TOKENGHPJIRA"))
                    .collect();
                for _ in 0..len / 20 {
                    let k = rng.pick(&kws).as_bytes();
                    if len >= k.len() {
                        let at = rng.range(0, len - k.len());
                        hay[at..at + k.len()].copy_from_slice(k);
                    }
                }
                let prev = *rng.pick(&[None, Some(b'a'), Some(b'_'), Some(b' '), Some(b'7')]);
                let want = brute(&pats, &after, &hay, prev);
                let folded = hay.to_ascii_lowercase();
                for pf in &engines {
                    let mut got = Vec::new();
                    let h = if pf.needs_folding() { &folded } else { &hay };
                    pf.find_all(h, prev, &mut got);
                    got.sort_unstable();
                    assert_eq!(got, want, "{:?}, {len} bytes, round {round}", pf.kind());
                }
            }
        }
    }

    /// [`SECOND_WORD_SAVING`] sits between its two calibration sets: the
    /// built-in rules get sixteen buckets, gitleaks' config eight.
    #[test]
    fn the_built_in_rules_get_two_state_words_and_gitleaks_config_one() {
        use crate::rules::RuleSet;
        let words = |rs: &RuleSet| match rs.pf.engine {
            Engine::ShiftOr1(_) => 1,
            Engine::ShiftOr2(_) => 2,
            _ => 0,
        };
        assert_eq!(words(&RuleSet::builtin()), 2);
        let config = include_str!("../../tests/data/gitleaks-default.toml");
        let rs = RuleSet::from_specs(RuleSet::load_toml(config).unwrap()).unwrap();
        assert_eq!(words(&rs), 1);
    }

    impl<const W: usize> ShiftOr<W> {
        fn used_buckets(&self) -> usize {
            (0..W * WORD_BUCKETS)
                .filter(|b| self.starts[b * 256] < self.starts[(b + 1) * 256])
                .count()
        }
    }

    /// The cost of cutting `sorted` at `ends`, by [`bucket_cost`].
    fn cost_of(sorted: &[(usize, u32)], ends: &[usize]) -> f64 {
        let mut start = 0;
        ends.iter()
            .map(|&end| {
                let run = &sorted[start..end];
                start = end;
                let len = run.iter().map(|r| r.0).min().unwrap_or(LANES).min(LANES);
                let after = run.iter().fold(0, |a, r| a | r.1);
                bucket_cost(run.len(), len, after)
            })
            .sum()
    }

    /// The exact search over every cut (what `bucket_bounds` did before
    /// [`MAX_CUTS`]): the reference for the grid.
    fn exact_cost(sorted: &[(usize, u32)]) -> f64 {
        let n = sorted.len();
        let mut best = vec![vec![f64::INFINITY; n + 1]; MAX_BUCKETS];
        for b in 0..MAX_BUCKETS {
            for j in 0..=n {
                let (mut len, mut after) = (LANES, 0u32);
                for i in (0..=j).rev() {
                    if i < j {
                        len = len.min(sorted[i].0);
                        after |= sorted[i].1;
                    }
                    let before = match b {
                        0 if i > 0 => continue,
                        0 => 0.0,
                        _ => best[b - 1][i],
                    };
                    best[b][j] = best[b][j].min(before + bucket_cost(j - i, len, after));
                }
            }
        }
        best[MAX_BUCKETS - 1][n]
    }

    /// Keyword lengths and context sets in bucket order, as `ShiftOr::new`
    /// sorts them: two context sets, lengths 3-12 drawn from a fixed seed.
    fn synthetic(n: usize) -> Vec<(usize, u32)> {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut v: Vec<(usize, u32)> = (0..n)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (
                    3 + (x % 10) as usize,
                    if i % 3 == 0 { NOT_WORD } else { ANY },
                )
            })
            .collect();
        v.sort_by_key(|&(len, after)| (after, len.min(LANES)));
        v
    }

    #[test]
    fn bucket_cuts_are_exact_up_to_max_cuts_and_near_exact_above() {
        for n in [1, 7, MAX_CUTS] {
            let sorted = synthetic(n);
            let (ends, cost) = bucket_bounds(&sorted, MAX_BUCKETS);
            assert_eq!(ends.len(), MAX_BUCKETS);
            assert!((cost - cost_of(&sorted, &ends)).abs() <= 1e-12 * cost.max(1e-12));
            assert_eq!(*ends.last().unwrap(), n);
            let (got, want) = (cost_of(&sorted, &ends), exact_cost(&sorted));
            assert!(
                (got - want).abs() <= 1e-12 * want.max(1e-12),
                "n = {n}: {got} vs {want}"
            );
        }
        // Above MAX_CUTS the cuts lie on the grid or where the key changes,
        // and cost at most 5 % more than the exact search's.
        let n = 5 * MAX_CUTS;
        let sorted = synthetic(n);
        let (ends, _) = bucket_bounds(&sorted, MAX_BUCKETS);
        assert!(ends.windows(2).all(|w| w[0] <= w[1]) && ends[MAX_BUCKETS - 1] == n);
        let (got, want) = (cost_of(&sorted, &ends), exact_cost(&sorted));
        assert!(got <= 1.05 * want, "grid {got} vs exact {want}");
    }
}
