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

use regex_syntax::hir::{Class, Hir, HirKind};

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

/// An item abstracted: `min..=max` bytes (`max` `None`: unbounded), each in
/// `set`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Run {
    set: ByteSet,
    min: usize,
    max: Option<usize>,
}

impl Run {
    fn of(h: &Hir) -> Run {
        let mut set = ByteSet::default();
        bytes_of(h, &mut set);
        let p = h.properties();
        Run {
            set,
            // `None`: the item matches nothing; 0 only weakens the check.
            min: p.minimum_len().unwrap_or(0),
            max: p.maximum_len(),
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
    /// Counts `0..=lim` are tracked.
    lim: u32,
    /// `min`, at most `lim`.
    min: u32,
    /// Counts at `lim` stay there on more bytes (an unbounded run).
    sat: bool,
}

impl NfaRun {
    fn new(r: &Run) -> NfaRun {
        match r.max {
            Some(max) if max <= MAX_COUNT => NfaRun {
                set: r.set,
                lim: max as u32,
                min: r.min.min(max) as u32,
                sat: false,
            },
            _ => {
                let min = r.min.min(MAX_COUNT) as u32;
                NfaRun {
                    set: r.set,
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

    fn done(&self, st: u128) -> bool {
        st >> self.min != 0
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
    fn new(edge: ByteSet, runs: impl Iterator<Item = Run>) -> Seq {
        Seq {
            edge,
            runs: runs.take(MAX_RUNS).map(|r| NfaRun::new(&r)).collect(),
        }
    }

    /// True when the runs, in order, can match a prefix of `bytes`.
    fn accepts(&self, bytes: impl Iterator<Item = u8>) -> bool {
        let runs = &self.runs;
        let mut st = [0u128; MAX_RUNS];
        st[0] = 1;
        if self.close(&mut st) {
            return true;
        }
        for b in bytes {
            let mut live = false;
            for (s, r) in st.iter_mut().zip(runs) {
                *s = if r.set.contains(b) {
                    let carry = if r.sat { *s & (1u128 << r.lim) } else { 0 };
                    ((*s << 1) | carry) & r.mask()
                } else {
                    0
                };
                live |= *s != 0;
            }
            if self.close(&mut st) {
                return true;
            }
            if !live {
                return false;
            }
        }
        false
    }

    /// Adds count 0 of each run after a run that can be complete; true
    /// when the last run can be.
    fn close(&self, st: &mut [u128; MAX_RUNS]) -> bool {
        let runs = &self.runs;
        for k in 1..runs.len() {
            if runs[k - 1].done(st[k - 1]) {
                st[k] |= 1;
            }
        }
        let last = runs.len() - 1;
        runs[last].done(st[last])
    }
}

/// The pre-check of one rule.
#[derive(Debug, Clone)]
pub(super) struct Precheck {
    /// Hit before the pivot: run forward from the hit's end.
    forward: Vec<Seq>,
    /// Hit after the pivot: run backward from the hit's start.
    backward: Vec<Seq>,
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
        let rest = |r: &Run| Run {
            set: r.set,
            min: 0,
            max: r.max,
        };
        let forward = (0..p)
            .map(|j| {
                Seq::new(
                    items[j].set,
                    std::iter::once(rest(&items[j])).chain(items[j + 1..].iter().copied()),
                )
            })
            .collect();
        let backward = (p + 1..items.len())
            .map(|j| {
                Seq::new(
                    items[j].set,
                    std::iter::once(rest(&items[j])).chain(items[..j].iter().rev().copied()),
                )
            })
            .collect();
        Some(Precheck { forward, backward })
    }

    /// False only when no match of at most `span` bytes that contains the
    /// hit `hs..he` of `buf` can exist.
    pub(super) fn may_match(&self, buf: &[u8], hs: usize, he: usize, span: usize) -> bool {
        debug_assert!(hs < he && he <= buf.len());
        let (first, last) = (buf[hs], buf[he - 1]);
        // A keyword longer than `span` leaves both empty.
        let after = &buf[he..(hs + span).min(buf.len()).max(he)];
        let before = &buf[he.saturating_sub(span).min(hs)..hs];
        self.forward
            .iter()
            .any(|s| s.edge.contains(last) && s.accepts(after.iter().copied()))
            || self
                .backward
                .iter()
                .any(|s| s.edge.contains(first) && s.accepts(before.iter().rev().copied()))
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
        pc.may_match(text.as_bytes(), hs, hs + kw.len(), 200)
    }

    #[test]
    fn an_assignment_passes_and_a_call_argument_does_not() {
        let pc = check(
            r#"(?i)[\w.-]{0,50}?(?:key|token)(?:[ \t\w.-]{0,20})[\s'"]{0,3}(?:=|:{1,3}=|:|,)[\x60'"\s=]{0,5}([\w.=-]{10,150})(?:[\x60'"\s;]|$)"#,
            &["key", "token"],
        );
        assert!(may(&pc, "api_key = 'abcdefghijkl'", "key"));
        assert!(may(&pc, "token = 'abcd_key_efghij'", "key"), "a hit inside the value");
        assert!(!may(&pc, "x = 'abcd_key_efghij'", "key"), "no keyword before the operator");
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
