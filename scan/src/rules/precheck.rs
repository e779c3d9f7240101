//! A necessary condition for a keyword hit of an unanchored rule to yield a
//! candidate, checked before the rule's regex searches its window (see
//! README.md, "Pre-check before the window search").
//!
//! The rule's regex is read as the sequence of its top-level items, each
//! abstracted to a *run*: the set of bytes any match of the item can hold,
//! and the item's shortest and longest match length. Any match of the
//! regex is then a match of the sequence of runs (the abstraction only
//! forgets, it never adds a constraint), so a hit at which the runs cannot
//! match cannot be confirmed by the regex either.
//!
//! The *pivot* is an item every match of which is non-empty and holds no
//! byte of any keyword (gitleaks' generic rule: the assignment operator
//! `(?:=|>|:{1,3}=|\|\||:|=>|\?=|,)`). A match that contains the hit
//! `hs..he` then has the pivot's text wholly after `he` or wholly before
//! `hs`:
//!
//! - **After:** the item `j` holding the hit's last byte goes on after
//!   `he` (its rest: at most its longest length, bytes of its set), then
//!   the items up to the pivot, the pivot and the items after it follow in
//!   order. Checked forward from `he`.
//! - **Before:** the item `j` holding the hit's first byte began before
//!   `hs`; before that lie the items after the pivot back to it, the pivot
//!   and every item before it. Checked backward from `hs - 1`.
//!
//! Each `j` whose set holds the hit's last (first) byte is tried. The runs
//! are matched by a bit-parallel NFA: one `u128` per run, bit `c` = "`c`
//! bytes of this run consumed". Only positions within the rule's span of
//! the hit are read, since a candidate is at most `span` long.

use regex_syntax::hir::{Class, Hir, HirKind, Look};

/// A set of bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct ByteSet([u64; 4]);

impl ByteSet {
    fn insert(&mut self, b: u8) {
        self.0[usize::from(b >> 6)] |= 1 << (b & 63);
    }

    fn insert_range(&mut self, lo: u8, hi: u8) {
        for b in lo..=hi {
            self.insert(b);
        }
    }

    pub(super) fn contains(&self, b: u8) -> bool {
        self.0[usize::from(b >> 6)] >> (b & 63) & 1 == 1
    }

    fn len(&self) -> u32 {
        self.0.iter().map(|w| w.count_ones()).sum()
    }
}

/// The bytes any match of `h` can hold. A Unicode class reaching past
/// ASCII holds every byte from 0x80 up (its UTF-8 encodings).
fn bytes_of(h: &Hir, out: &mut ByteSet) {
    match h.kind() {
        HirKind::Empty | HirKind::Look(_) => {}
        HirKind::Literal(l) => l.0.iter().for_each(|&b| out.insert(b)),
        HirKind::Class(Class::Bytes(c)) => {
            for r in c.ranges() {
                out.insert_range(r.start(), r.end());
            }
        }
        HirKind::Class(Class::Unicode(c)) => {
            for r in c.ranges() {
                let (lo, hi) = (u32::from(r.start()), u32::from(r.end()));
                if lo < 0x80 {
                    out.insert_range(lo as u8, hi.min(0x7f) as u8);
                }
                if hi >= 0x80 {
                    out.insert_range(0x80, 0xff);
                }
            }
        }
        HirKind::Repetition(r) => bytes_of(&r.sub, out),
        HirKind::Capture(c) => bytes_of(&c.sub, out),
        HirKind::Concat(v) | HirKind::Alternation(v) => v.iter().for_each(|h| bytes_of(h, out)),
    }
}

/// The bytes a non-empty match of `h` can start with (`last`: end with).
fn edge_of(h: &Hir, last: bool, out: &mut ByteSet) {
    match h.kind() {
        HirKind::Empty | HirKind::Look(_) => {}
        HirKind::Literal(l) => {
            let b = if last { l.0.last() } else { l.0.first() };
            b.iter().for_each(|&&b| out.insert(b));
        }
        HirKind::Class(_) => bytes_of(h, out),
        HirKind::Repetition(r) => edge_of(&r.sub, last, out),
        HirKind::Capture(c) => edge_of(&c.sub, last, out),
        HirKind::Alternation(v) => v.iter().for_each(|h| edge_of(h, last, out)),
        HirKind::Concat(v) => {
            let mut parts: Vec<&Hir> = v.iter().collect();
            if last {
                parts.reverse();
            }
            for p in parts {
                edge_of(p, last, out);
                if p.properties().minimum_len().unwrap_or(0) > 0 {
                    break;
                }
            }
        }
    }
}

/// True when `h` matches the empty string only as `$` (end of haystack):
/// an alternation whose alternatives are `$` or never empty.
fn empty_only_at_end(h: &Hir) -> bool {
    match h.kind() {
        HirKind::Capture(c) => empty_only_at_end(&c.sub),
        HirKind::Alternation(v) => v.iter().all(|a| {
            matches!(a.kind(), HirKind::Look(Look::End))
                || a.properties().minimum_len().unwrap_or(0) > 0
        }),
        _ => false,
    }
}

/// An item abstracted: `min..=max` bytes (`max` `None`: unbounded), each in
/// `set`, the first in `first` and the last in `last`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Run {
    set: ByteSet,
    first: ByteSet,
    last: ByteSet,
    min: usize,
    max: Option<usize>,
    /// Empty only at the end of the haystack (`min` counts the non-empty
    /// matches).
    end: bool,
}

impl Run {
    fn of(h: &Hir) -> Run {
        let mut set = ByteSet::default();
        bytes_of(h, &mut set);
        let (mut first, mut last) = (ByteSet::default(), ByteSet::default());
        edge_of(h, false, &mut first);
        edge_of(h, true, &mut last);
        let p = h.properties();
        // `None`: the item matches nothing; 0 only weakens the check.
        let min = p.minimum_len().unwrap_or(0);
        let end = min == 0 && empty_only_at_end(h);
        Run {
            set,
            first,
            last,
            min: if end { 1 } else { min },
            max: p.maximum_len(),
            end,
        }
    }

    /// The rest of an item after (before) a byte of it: any bytes of its
    /// set.
    fn rest(&self) -> Run {
        Run {
            first: self.set,
            last: self.set,
            min: 0,
            end: false,
            ..*self
        }
    }
}

/// Most runs one sequence checks; the rest of a longer one is dropped
/// (a prefix of the sequence is still a necessary condition).
pub(super) const MAX_RUNS: usize = 16;
/// Counts up to this are tracked exactly; a run whose longest length is
/// beyond it is taken as unbounded.
const MAX_COUNT: usize = 127;

/// A run prepared for the NFA.
#[derive(Debug, Clone, Copy)]
struct NfaRun {
    set: ByteSet,
    /// The bytes that may take a count from 0 to 1.
    edge: ByteSet,
    /// May be empty when the input ends here (`$`).
    end: bool,
    /// Counts `0..=lim` are tracked.
    lim: u32,
    /// `min`, at most `lim`.
    min: u32,
    /// Counts at `lim` stay there on more bytes (an unbounded run).
    sat: bool,
}

impl NfaRun {
    /// `backward`: the run is read from its end.
    fn new(r: &Run, backward: bool) -> NfaRun {
        let edge = if backward { r.last } else { r.first };
        // `$` is at the haystack's end: only a forward run can use it.
        let end = r.end && !backward;
        let min = if r.end && backward { 0 } else { r.min };
        match r.max {
            Some(max) if max <= MAX_COUNT => NfaRun {
                set: r.set,
                edge,
                end,
                lim: max as u32,
                min: min.min(max) as u32,
                sat: false,
            },
            _ => {
                let min = min.min(MAX_COUNT) as u32;
                NfaRun {
                    set: r.set,
                    edge,
                    end,
                    lim: min,
                    min,
                    sat: true,
                }
            }
        }
    }

    fn mask(&self) -> u128 {
        if self.lim as usize >= MAX_COUNT {
            u128::MAX
        } else {
            (1u128 << (self.lim + 1)) - 1
        }
    }

    /// One byte: counts move up by one (from 0 only on an edge byte).
    fn step(&self, st: u128, b: u8) -> u128 {
        let from0 = if self.edge.contains(b) {
            (st & 1) << 1
        } else {
            0
        };
        let more = if self.set.contains(b) {
            let carry = if self.sat {
                st & (1u128 << self.lim)
            } else {
                0
            };
            ((st & !1) << 1) | carry
        } else {
            0
        };
        (from0 | more) & self.mask()
    }
}

/// A sequence of runs and the set of the run the hit's edge byte must be
/// in for the sequence to apply.
#[derive(Debug, Clone)]
struct Seq {
    edge: ByteSet,
    runs: Vec<NfaRun>,
}

impl Seq {
    fn new(edge: ByteSet, runs: impl Iterator<Item = Run>, backward: bool) -> Seq {
        Seq {
            edge,
            runs: runs
                .take(MAX_RUNS)
                .map(|r| NfaRun::new(&r, backward))
                .collect(),
        }
    }

    /// True when the runs, in order, can match a prefix of `bytes` (the
    /// first run needing `min0` bytes, at most its own shortest length); `at_end`: `bytes` ends
    /// where the haystack does, so `$` items may match there.
    fn accepts(&self, bytes: impl Iterator<Item = u8>, min0: u32, at_end: bool) -> bool {
        let runs = &self.runs;
        let done = |k: usize, st: u128, end: bool| {
            let r = &runs[k];
            let min = if k == 0 { min0.min(r.lim) } else { r.min };
            st >> min != 0 || (end && r.end && st & 1 != 0)
        };
        // Adds count 0 of each run after a run that can be complete; true
        // when the last run can be.
        let close = |st: &mut [u128; MAX_RUNS], end: bool| {
            for k in 1..runs.len() {
                if done(k - 1, st[k - 1], end) {
                    st[k] |= 1;
                }
            }
            done(runs.len() - 1, st[runs.len() - 1], end)
        };
        let mut st = [0u128; MAX_RUNS];
        st[0] = 1;
        if close(&mut st, false) {
            return true;
        }
        for b in bytes {
            let mut live = false;
            for (s, r) in st.iter_mut().zip(runs) {
                *s = r.step(*s, b);
                live |= *s != 0;
            }
            if close(&mut st, false) {
                return true;
            }
            if !live {
                return false;
            }
        }
        at_end && close(&mut st, true)
    }
}

/// The pre-check of one rule.
#[derive(Debug, Clone)]
pub(super) struct Precheck {
    /// Hit before the pivot: run forward from the hit's end.
    forward: Vec<Seq>,
    /// Hit after the pivot: run backward from the hit's start; with the
    /// shortest length of the item holding the hit's first byte.
    backward: Vec<(u32, Seq)>,
}

impl Precheck {
    /// The pre-check of a rule with regex `hir` whose keyword hits may hold
    /// the bytes of `hit_bytes`; `None` when no item can be the pivot.
    pub(super) fn new(hir: &Hir, hit_bytes: &ByteSet) -> Option<Precheck> {
        let items: Vec<Run> = match hir.kind() {
            HirKind::Concat(parts) => parts.iter().map(Run::of).collect(),
            HirKind::Capture(c) => return Precheck::new(&c.sub, hit_bytes),
            _ => vec![Run::of(hir)],
        };
        // The most selective item that cannot overlap a hit.
        let p = (0..items.len())
            .filter(|&i| {
                let it = &items[i];
                it.min >= 1 && (0..=255u8).all(|b| !(it.set.contains(b) && hit_bytes.contains(b)))
            })
            .min_by_key(|&i| items[i].set.len())?;
        let forward = (0..p)
            .map(|j| {
                Seq::new(
                    items[j].set,
                    std::iter::once(items[j].rest()).chain(items[j + 1..].iter().copied()),
                    false,
                )
            })
            .collect();
        let backward = (p + 1..items.len())
            .map(|j| {
                // The rest tracks counts up to the item's shortest length;
                // `may_match` says how much of it must lie before the hit.
                let rest = Run {
                    min: items[j].min,
                    ..items[j].rest()
                };
                let seq = Seq::new(
                    items[j].set,
                    std::iter::once(rest).chain(items[..j].iter().rev().copied()),
                    true,
                );
                (items[j].min.min(MAX_COUNT) as u32, seq)
            })
            .collect();
        Some(Precheck { forward, backward })
    }

    /// False only when no match of at most `span` bytes that contains the
    /// hit `hs..he` of `buf[..hay_end]` (the haystack the regex searches)
    /// can exist.
    pub(super) fn may_match(
        &self,
        buf: &[u8],
        hay_end: usize,
        hs: usize,
        he: usize,
        span: usize,
    ) -> bool {
        debug_assert!(hs < he && he <= hay_end && hay_end <= buf.len());
        let (first, last) = (buf[hs], buf[he - 1]);
        // A keyword longer than `span` leaves both empty.
        let end = (hs + span).min(hay_end).max(he);
        let after = &buf[he..end];
        let before = &buf[he.saturating_sub(span).min(hs)..hs];
        self.forward
            .iter()
            .any(|s| s.edge.contains(last) && s.accepts(after.iter().copied(), 0, end == hay_end))
            || self.backward.iter().any(|(min, s)| {
                // The item holding the hit's first byte is at least `min`
                // long; from `hs` on it holds at most the run of its bytes
                // there, so the part before `hs` holds the rest.
                s.edge.contains(first) && {
                    let ahead = buf[hs..end]
                        .iter()
                        .take(*min as usize)
                        .take_while(|&&b| s.edge.contains(b))
                        .count() as u32;
                    s.accepts(before.iter().rev().copied(), min - ahead, false)
                }
            })
    }
}

/// The bytes a hit of these (lowercased) keywords may hold: the prefilter
/// folds ASCII upper case to lower case, so each letter in both cases.
pub(super) fn hit_bytes(keywords: &[Vec<u8>]) -> ByteSet {
    let mut s = ByteSet::default();
    for &b in keywords.iter().flatten() {
        s.insert(b);
        s.insert(b.to_ascii_uppercase());
        s.insert(b.to_ascii_lowercase());
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(pattern: &str, kws: &[&str]) -> Precheck {
        let hir = regex_syntax::ParserBuilder::new()
            .unicode(false)
            .utf8(false)
            .build()
            .parse(pattern)
            .unwrap();
        let kws: Vec<Vec<u8>> = kws.iter().map(|k| k.as_bytes().to_vec()).collect();
        Precheck::new(&hir, &hit_bytes(&kws)).expect("a pivot")
    }

    fn may(pc: &Precheck, text: &str, kw: &str) -> bool {
        let hs = text.to_ascii_lowercase().find(kw).unwrap();
        pc.may_match(text.as_bytes(), text.len(), hs, hs + kw.len(), 200)
    }

    #[test]
    fn an_assignment_passes_and_a_call_argument_does_not() {
        let pc = check(
            r#"(?i)[\w.-]{0,50}?(?:key|token)(?:[ \t\w.-]{0,20})[\s'"]{0,3}(?:=|:{1,3}=|:|,)[\x60'"\s=]{0,5}([\w.=-]{10,150})(?:[\x60'"\s;]|$)"#,
            &["key", "token"],
        );
        assert!(may(&pc, "api_key = 'abcdefghijkl'", "key"));
        assert!(
            may(&pc, "token = 'abcd_key_efghij'", "key"),
            "a hit inside the value"
        );
        assert!(
            !may(&pc, "x = 'abcd_key_efghij'", "key"),
            "no keyword before the operator"
        );
        assert!(may(&pc, "TOKEN::= abcdefghijkl", "token"));
        assert!(!may(&pc, "f(x, key)", "key"));
        assert!(!may(&pc, "d.keys()", "key"));
        assert!(!may(&pc, "sort(key=lambda v: v)", "key"));
        assert!(!may(&pc, "the key to the door", "key"));
    }

    #[test]
    fn a_run_beyond_its_longest_length_stops_the_check() {
        // At most 3 word bytes between the keyword and `=`.
        let pc = check(r"key\w{0,3}=[a-z]{4}", &["key"]);
        assert!(may(&pc, "keyabc=wxyz", "key"));
        assert!(!may(&pc, "keyabcd=wxyz", "key"));
        assert!(!may(&pc, "keyabc=wxy", "key"), "too short a value");
    }

    #[test]
    fn no_pivot_when_every_item_may_hold_a_keyword_byte() {
        let hir = regex_syntax::ParserBuilder::new()
            .build()
            .parse(r"(?i)[a-z]+key[a-z]*")
            .unwrap();
        assert!(Precheck::new(&hir, &hit_bytes(&[b"key".to_vec()])).is_none());
    }
}
