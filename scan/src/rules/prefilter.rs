//! The keyword prefilter: finds every occurrence of every rule keyword in a
//! lowercased copy of the scanned region.
//!
//! "Every occurrence" is literal: overlapping occurrences and keywords that
//! are prefixes of other keywords are all reported. That makes the set of
//! hits a pure function of the bytes around each position, which the chunk
//! contract needs (a non-overlapping search would depend on where the search
//! started). Each engine search is leftmost-longest and restarts one byte
//! after the start of the previous hit; the shorter keywords that match at
//! the same position are exactly the keywords that are prefixes of the
//! longest one, which `prefixes` lists.

use aho_corasick::{packed, AhoCorasick, AhoCorasickKind, Input, MatchKind};

/// Most patterns one Teddy searcher takes (aho-corasick's packed limit).
const TEDDY_GROUP: usize = 64;
/// Above this many Teddy passes, one DFA pass is cheaper.
const TEDDY_MAX_GROUPS: usize = 3;
/// Teddy fingerprints the first three bytes; shorter patterns flood it.
const TEDDY_MIN_LEN: usize = 3;

/// Which engine finds keyword occurrences.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrefilterKind {
    /// SIMD Teddy searchers, one per group of at most 64 keywords.
    Teddy,
    /// One Aho-Corasick DFA.
    Dfa,
}

#[derive(Debug)]
enum Engine {
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
            return Prefilter { patterns, prefixes: Vec::new(), engine: Engine::Empty };
        }
        let groups: Vec<Vec<u32>> = {
            // Sorting keeps keywords with the same leading bytes in one group
            // (and so in one prefix-closure).
            let mut ids: Vec<u32> = (0..patterns.len() as u32).collect();
            ids.sort_by(|&a, &b| patterns[a as usize].cmp(&patterns[b as usize]));
            ids.chunks(TEDDY_GROUP).map(<[u32]>::to_vec).collect()
        };
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
                return Prefilter { patterns, prefixes, engine: Engine::Teddy(searchers) };
            }
        }
        let ac = AhoCorasick::builder()
            .kind(Some(AhoCorasickKind::DFA))
            .match_kind(MatchKind::LeftmostLongest)
            .build(&patterns)
            .expect("keyword automaton within size limits");
        let all = vec![(0..patterns.len() as u32).collect::<Vec<_>>()];
        let prefixes = prefix_closure(&patterns, &all);
        Prefilter { patterns, prefixes, engine: Engine::Dfa(ac) }
    }

    pub fn kind(&self) -> PrefilterKind {
        match self.engine {
            Engine::Teddy(_) => PrefilterKind::Teddy,
            _ => PrefilterKind::Dfa,
        }
    }

    /// Appends `(pattern, position)` for every keyword occurrence in `hay`
    /// (already lowercased).
    pub fn find_all(&self, hay: &[u8], hits: &mut Vec<(u32, usize)>) {
        match &self.engine {
            Engine::Empty => {}
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
            .map(|(id, p)| (String::from_utf8(pf.patterns[id as usize].clone()).unwrap(), p))
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
            ("sk_".to_string(), 5),
            ("sk_live_".to_string(), 5),
            ("token".to_string(), 13),
        ];
        for kind in [PrefilterKind::Teddy, PrefilterKind::Dfa] {
            let pf = Prefilter::new(pats.clone(), Some(kind));
            assert_eq!(hits(&pf, "aaaab sk_live_ token"), want, "{kind:?}");
        }
    }
}
