//! `scan git` decodes packed blobs itself (`scan/src/git/odb.rs`,
//! `Odb::find_blob`; README.md of `src/git`, "Decoding"): offset-delta
//! chains resolved through the shared decoded-blob cache. Every blob of a
//! packed history with deep delta chains decodes to gix's bytes, in pack
//! order and in reverse, through a warm and a cold cache.

#[path = "e2e_common/mod.rs"]
mod common;

#[path = "git_common/mod.rs"]
mod gitc;

use common::tempdir;
use gitc::{git, git_with_input, init};

/// A history of one file edited 40 times (and a second one 10 times),
/// written by one `git fast-import` and repacked with deep chains: most
/// blobs are offset deltas on deltas.
fn packed_history(dir: &std::path::Path) {
    init(dir);
    let mut body: Vec<String> = (0..400)
        .map(|i| format!("line {i} of the file\n"))
        .collect();
    let mut stream = Vec::new();
    for c in 0..40 {
        body[(c * 37) % 400] = format!("edited in commit {c}\n");
        body.insert((c * 11) % 400, format!("inserted in commit {c}\n"));
        let a = body.concat();
        let b = format!("{}b {c}\n", body[..100].concat());
        stream.extend_from_slice(
            format!(
                "commit refs/heads/main\ncommitter A <a@example.com> {} +0000\ndata 2\nc\n",
                1_700_000_000 + c
            )
            .as_bytes(),
        );
        for (name, text) in [("a.txt", &a), ("b.txt", &b)]
            .into_iter()
            .take(1 + usize::from(c % 4 == 0))
        {
            stream.extend_from_slice(
                format!("M 100644 inline {name}\ndata {}\n", text.len()).as_bytes(),
            );
            stream.extend_from_slice(text.as_bytes());
            stream.push(b'\n');
        }
    }
    git_with_input(dir, &["fast-import", "--quiet"], &stream);
    git(dir, &["repack", "-adf", "--depth=50", "--window=50", "-q"]);
}

#[test]
fn packed_blobs_decode_to_gix_bytes_in_any_order() {
    if !gitc::git_present() {
        eprintln!("skipped: no git binary");
        return;
    }
    let dir = tempdir();
    packed_history(dir.path());
    let listing = git(dir.path(), &["rev-list", "--objects", "--all"]);
    let ids: Vec<gix::ObjectId> = listing
        .lines()
        .filter_map(|l| {
            let (id, path) = l.split_once(' ')?;
            path.ends_with(".txt").then(|| id.parse().unwrap())
        })
        .collect();
    assert!(ids.len() >= 45, "{} blobs", ids.len());
    let verify = git(dir.path(), &["verify-pack", "-v", &pack_idx(dir.path())]);
    let deep = verify
        .lines()
        .filter(|l| {
            l.contains(" blob ")
                && l.split_whitespace()
                    .nth(5)
                    .is_some_and(|d| d.parse::<u32>().is_ok_and(|d| d >= 2))
        })
        .count();
    assert!(
        deep >= 10,
        "the fixture has chains of two or more deltas: {deep}"
    );

    let repo = gix::ThreadSafeRepository::open(dir.path()).unwrap();
    let orders: [Vec<gix::ObjectId>; 2] = [ids.clone(), ids.iter().rev().copied().collect()];
    for order in orders {
        // A new Odb: a cold cache for each order, warmed as it goes.
        let odb = scan::git::Odb::new(repo.clone());
        let handle = odb.worker();
        let mut scratch = scan::git::odb::DecodeScratch::default();
        for round in 0..2 {
            for id in &order {
                let want = handle.find_object(*id).unwrap().detach().data;
                let mut got = Vec::new();
                odb.decode_packed(id, &mut got, &mut scratch)
                    .unwrap_or_else(|| panic!("{id} is packed and resolved here"));
                assert!(got == want, "{id} (round {round}) differs from gix's bytes");
                let mut got = Vec::new();
                odb.find_blob(&handle, id, &mut got, &mut scratch).unwrap();
                assert!(got == want, "{id} by find_blob");
            }
        }
    }
}

fn pack_idx(dir: &std::path::Path) -> String {
    let packs = dir.join(".git/objects/pack");
    let idx = std::fs::read_dir(&packs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "idx"))
        .expect("one pack");
    idx.display().to_string()
}
