//! Short and long context (README.md, "Short and long context").
//!
//! [`RuleSet::context_len`](super::RuleSet::context_len) is the farthest any
//! rule reads from an owned range. A handful of rules (PEM and PGP private
//! key blocks, service-account JSON keys, PuTTY files, long JWTs) match
//! across kilobytes and set that bound for all. This splits it: a rule
//! whose reach is at most [`SHORT_REACH_MAX`] is *short*, the rest are
//! *long*, and a long rule only ever reads near a hit of one of its
//! keywords. A scan that knows where the long keywords are can give an
//! owned range the short context, widened by the long context of each long
//! keyword found within [`ContextSplit::full_len`] of it, and find what a
//! scan with the full context finds there (`scan/src/git/added.rs` does).

use aho_corasick::{AhoCorasick, Input, MatchKind};

use super::{Rule, DEDUP_RADIUS};

/// A rule that may read more than this many bytes from a secret start
/// ([`Rule::reach`]) is a *long* rule. 4 KiB: above every built-in rule
/// but the key blocks, the Kerberos hashes and `jwt`
/// (`scan/tests/git_context.rs`,
/// `the_short_context_leaves_out_only_the_long_block_rules`).
pub const SHORT_REACH_MAX: usize = 4 * 1024;

/// One distinct (lowercased) keyword of a long rule, with what its rules
/// need around a window whose reach holds a hit of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LongKeyword {
    /// The keyword, lowercased (found ASCII case-insensitively).
    pub keyword: Vec<u8>,
    /// The context its long rules need: `DEDUP_RADIUS` + their largest
    /// reach.
    pub context_len: usize,
    /// The longest match of its long rules.
    pub match_len: usize,
}

/// The rule set's context, split into the short rules' and the long
/// keywords'.
#[derive(Debug)]
pub struct ContextSplit {
    short_len: usize,
    short_match: usize,
    full_len: usize,
    full_match: usize,
    long: Vec<LongKeyword>,
    /// Finds the leftmost long keyword in lowercased bytes (exact, so the
    /// automaton's literal prefilter runs: an ASCII case-insensitive
    /// automaton, overlapping or not, had none and took about 4.5 ns a
    /// byte, 18 % of a ripgrep history scan's samples); `None` when the
    /// set has no long rule.
    finder: Option<AhoCorasick>,
}

impl ContextSplit {
    /// The split of `rules` (their `context_len` is `full_len`).
    pub(super) fn new(rules: &[Rule], full_len: usize) -> ContextSplit {
        let mut short_reach = 0;
        let mut short_match = 0;
        let mut full_match = 0;
        let mut long: Vec<LongKeyword> = Vec::new();
        for r in rules {
            let reach = r.reach();
            full_match = full_match.max(r.span);
            if reach <= SHORT_REACH_MAX {
                short_reach = short_reach.max(reach);
                short_match = short_match.max(r.span);
                continue;
            }
            for kw in &r.info.keywords {
                let kw = kw.as_bytes().to_ascii_lowercase();
                let need = DEDUP_RADIUS + reach;
                match long.iter_mut().find(|l| l.keyword == kw) {
                    Some(l) => {
                        l.context_len = l.context_len.max(need);
                        l.match_len = l.match_len.max(r.span);
                    }
                    None => long.push(LongKeyword {
                        keyword: kw,
                        context_len: need,
                        match_len: r.span,
                    }),
                }
            }
        }
        ContextSplit::with_bounds(
            (DEDUP_RADIUS + short_reach).min(full_len),
            short_match,
            full_len,
            full_match,
            long,
        )
    }

    /// A split with these bounds and long keywords (lowercase), for tests
    /// of what uses it; [`RuleSet::context_split`](super::RuleSet::context_split)
    /// gives a rule set's.
    #[doc(hidden)]
    pub fn with_bounds(
        short_len: usize,
        short_match: usize,
        full_len: usize,
        full_match: usize,
        long: Vec<LongKeyword>,
    ) -> ContextSplit {
        let finder = (!long.is_empty()).then(|| {
            AhoCorasick::builder()
                .match_kind(MatchKind::LeftmostFirst)
                .build(long.iter().map(|l| &l.keyword))
                .expect("a few short keywords build")
        });
        ContextSplit {
            short_len,
            short_match,
            full_len,
            full_match,
            long,
            finder,
        }
    }

    /// The context the short rules need: `DEDUP_RADIUS` plus the largest
    /// reach of a short rule.
    pub fn short_len(&self) -> usize {
        self.short_len
    }

    /// The longest match of a short rule.
    pub fn short_match_len(&self) -> usize {
        self.short_match
    }

    /// The whole set's context (`RuleSet::context_len`).
    pub fn full_len(&self) -> usize {
        self.full_len
    }

    /// The longest match of any rule.
    pub fn full_match_len(&self) -> usize {
        self.full_match
    }

    /// The long rules' distinct keywords.
    pub fn long_keywords(&self) -> &[LongKeyword] {
        &self.long
    }

    /// Appends `(keyword index, start)` for every occurrence of a long
    /// keyword in `data`, ASCII case-insensitively, overlapping ones
    /// included, in order of their start: every position where the rule
    /// engine's keyword filter can report a long rule's keyword (it reports
    /// a subset: it also checks the byte before and the case of
    /// case-sensitive keywords). `folded` is scratch space.
    pub fn find_long(&self, data: &[u8], folded: &mut Vec<u8>, out: &mut Vec<(u32, usize)>) {
        let Some(f) = &self.finder else {
            return;
        };
        folded.clear();
        folded.extend(data.iter().map(u8::to_ascii_lowercase));
        let hay = folded.as_slice();
        // The leftmost hit from `pos`, then every keyword that starts
        // there, then on from the next byte: no start is skipped, so
        // overlapping hits and keywords that are prefixes of others are
        // all found.
        let mut pos = 0;
        while let Some(m) = f.find(Input::new(hay).span(pos..hay.len())) {
            let at = m.start();
            for (k, l) in self.long.iter().enumerate() {
                if hay[at..].starts_with(&l.keyword) {
                    out.push((k as u32, at));
                }
            }
            pos = at + 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_long_finds_every_case_insensitive_occurrence_overlaps_and_prefixes_included() {
        let kws: [&[u8]; 5] = [b"ab", b"abc", b"bca", b"aa", b"-a$"];
        let long = kws
            .iter()
            .map(|k| LongKeyword {
                keyword: k.to_vec(),
                context_len: 1,
                match_len: 1,
            })
            .collect();
        let split = ContextSplit::with_bounds(1, 1, 1, 1, long);
        let alphabet = b"abcABC-$";
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut folded = Vec::new();
        for len in 0..if cfg!(miri) { 8 } else { 300 } {
            let hay: Vec<u8> = (0..len % 40)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    alphabet[(x % alphabet.len() as u64) as usize]
                })
                .collect();
            let mut want = Vec::new();
            for at in 0..hay.len() {
                for (k, kw) in kws.iter().enumerate() {
                    if hay.len() - at >= kw.len() && hay[at..at + kw.len()].eq_ignore_ascii_case(kw)
                    {
                        want.push((k as u32, at));
                    }
                }
            }
            let mut got = Vec::new();
            split.find_long(&hay, &mut folded, &mut got);
            assert_eq!(got, want, "{:?}", String::from_utf8_lossy(&hay));
        }
    }
}
