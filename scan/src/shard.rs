//! `--shard I/N`: one of N deterministic parts of a scan, for runs spread
//! over many machines (a Kubernetes Indexed Job, a CI matrix); `scan merge`
//! (`report::merge`) puts the parts' `jsonl` reports back together.
//!
//! `I` is 0-based (`0/3`, `1/3`, `2/3`), as Kubernetes' `JOB_COMPLETION_INDEX`
//! is. Every item lands in exactly one shard:
//!
//! - a file (or a skipped walk entry) of a directory scan by its path as the
//!   report shows it (below the scan root): FNV-1a 64 of the path's bytes,
//!   mod N ([`Shard::owns_path`]). An archive goes whole with its file: its
//!   members are read by the shard that owns the archive.
//! - a blob of a history scan (and a submodule's gitlink, an unreadable tree
//!   or commit) by its object id: the id's first 8 bytes as a big-endian
//!   number, mod N ([`Shard::owns_object`]). Object ids are already uniform
//!   hashes, so no further hashing is needed.
//!
//! Every shard still walks the whole tree or the whole commit graph (the
//! walk is cheap next to reading and scanning, and it is what tells a shard
//! which items exist); it reads only what it owns. Neither hash depends on
//! the process (no `RandomState`), the machine or the order of the walk, so
//! a shard run again owns the same items and writes the same report.

use crate::report::finding::Fnv1a64;

/// The most shards `--shard` accepts.
pub const MAX_SHARDS: u32 = 1 << 20;

/// One part of a sharded scan: `index` of `count`, 0-based.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Shard {
    /// Which part, `0..count`.
    pub index: u32,
    /// How many parts.
    pub count: u32,
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl Shard {
    /// Parses `I/N` (0-based `I`, `0 <= I < N`, `1 <= N <=` [`MAX_SHARDS`]).
    /// The error is one line that names the value.
    pub fn parse(s: &str) -> Result<Self, String> {
        let bad =
            |why: &str| format!("--shard {s}: {why} (expected I/N with 0 <= I < N, e.g. 0/4)");
        let (i, n) = s.trim().split_once('/').ok_or_else(|| bad("no '/'"))?;
        let index: u32 = i
            .trim()
            .parse()
            .map_err(|_| bad("I is not a whole number"))?;
        let count: u32 = n
            .trim()
            .parse()
            .map_err(|_| bad("N is not a whole number"))?;
        if count == 0 || count > MAX_SHARDS {
            return Err(bad(&format!("N must be between 1 and {MAX_SHARDS}")));
        }
        if index >= count {
            return Err(bad(&format!(
                "I is out of range: shards are numbered from 0 to {}",
                count - 1
            )));
        }
        Ok(Self { index, count })
    }

    /// The shard (0-based) that owns the walk entry shown as `path`.
    pub fn of_path(path: &[u8], count: u32) -> u32 {
        let mut h = Fnv1a64::default();
        h.write(path);
        (h.finish() % u64::from(count.max(1))) as u32
    }

    /// The shard (0-based) that owns the git object `id` (raw id bytes).
    pub fn of_object(id: &[u8], count: u32) -> u32 {
        let mut first = [0u8; 8];
        let n = id.len().min(8);
        first[..n].copy_from_slice(&id[..n]);
        (u64::from_be_bytes(first) % u64::from(count.max(1))) as u32
    }

    /// Whether this shard reads the walk entry shown as `path`.
    pub fn owns_path(&self, path: &[u8]) -> bool {
        Self::of_path(path, self.count) == self.index
    }

    /// Whether this shard reads the git object `id`.
    pub fn owns_object(&self, id: &[u8]) -> bool {
        Self::of_object(id, self.count) == self.index
    }
}

/// What a sharded run's summary says about its shard (text, `json`, and the
/// `jsonl` summary record).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShardSummary {
    /// Which part (0-based).
    pub index: u32,
    /// How many parts.
    pub count: u32,
    /// Items this shard owned: walk entries (files, streams, entries skipped
    /// as they were found) and history items (blobs, gitlinks, unreadable
    /// trees and commits). Archive members are not counted: they go with
    /// their archive.
    pub owned: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_accepts_zero_based_indices_and_rejects_the_rest() {
        assert_eq!(Shard::parse("0/1"), Ok(Shard { index: 0, count: 1 }));
        assert_eq!(Shard::parse("2/3"), Ok(Shard { index: 2, count: 3 }));
        for bad in [
            "3/3",
            "1/0",
            "0/0",
            "-1/3",
            "a/3",
            "1",
            "1/3/4",
            "",
            "0/2000000",
        ] {
            let e = Shard::parse(bad).unwrap_err();
            assert!(!e.contains('\n'), "one line: {e}");
            assert!(e.contains("--shard"), "{e}");
        }
        assert!(Shard::parse("3/3").unwrap_err().contains("out of range"));
    }

    #[test]
    fn every_path_and_object_is_owned_by_exactly_one_shard() {
        for count in [1u32, 2, 3, 5, 7] {
            for k in 0..200u32 {
                let path = format!("dir{}/file{k}.env", k % 7);
                let owners = (0..count)
                    .filter(|&i| Shard { index: i, count }.owns_path(path.as_bytes()))
                    .count();
                assert_eq!(owners, 1, "{path} with {count} shards");
                let id = Fnv1a64::default()
                    .finish()
                    .to_be_bytes()
                    .map(|b| b ^ k as u8);
                let owners = (0..count)
                    .filter(|&i| Shard { index: i, count }.owns_object(&id))
                    .count();
                assert_eq!(owners, 1);
            }
        }
    }

    #[test]
    fn the_partition_is_stable_across_runs_and_spreads_paths() {
        // FNV-1a of fixed bytes: the same on every run and machine.
        assert_eq!(
            Shard::of_path(b"a", 1 << 20),
            (0xaf63_dc4c_8601_ec8c_u64 % (1 << 20)) as u32
        );
        let mut per = [0u32; 4];
        for k in 0..400 {
            per[Shard::of_path(format!("src/f{k}.rs").as_bytes(), 4) as usize] += 1;
        }
        assert!(per.iter().all(|&n| n > 50), "{per:?}");
        assert_eq!(Shard::of_object(&[0, 0, 0, 0, 0, 0, 0, 7, 0xff], 4), 3);
    }
}
