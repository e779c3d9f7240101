//! The walker's rules on ordinary trees: ignore files, hidden files, `.git`,
//! roots, order, size limit, and resuming in batches.
#![cfg(not(loom))]

mod walk_common;

use std::path::PathBuf;

use scan::skip::SkipReason;
use scan::walk::{Exclusions, WalkConfig, WalkCursor, WalkItem};
use walk_common::*;

fn tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    touch(&d.join(".gitignore"), b"*.log\nbuild/\n");
    touch(&d.join(".ignore"), b"skip-me.txt\n");
    touch(&d.join("a.txt"), b"a");
    touch(&d.join("x.log"), b"log");
    touch(&d.join("build/out.txt"), b"out");
    touch(&d.join("skip-me.txt"), b"s");
    touch(&d.join(".hidden"), b"h");
    touch(&d.join(".git/config"), b"[core]");
    touch(&d.join(".git/objects/ab/cd"), b"obj");
    touch(&d.join("sub/.env"), b"KEY=1");
    touch(&d.join("sub/deeper/z.txt"), b"z");
    dir
}

fn rel_paths(items: &[(Vec<u8>, Seen)], base: &std::path::Path) -> Vec<String> {
    by_rel_path(items, base)
        .keys()
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .collect()
}

#[test]
fn respect_ignore_applies_ignore_files_outside_a_git_repo_and_scans_hidden_files() {
    let dir = tree();
    let cfg = WalkConfig {
        respect_ignore: true,
        ..WalkConfig::default()
    };
    let items = walk_all(vec![dir.path().to_path_buf()], cfg, 100);
    assert_eq!(
        rel_paths(&items, dir.path()),
        [
            ".gitignore",
            ".hidden",
            ".ignore",
            "a.txt",
            "sub/.env",
            "sub/deeper/z.txt"
        ]
    );
    assert!(items.iter().all(|(_, s)| matches!(s, Seen::File(_))));
}

#[test]
fn ignored_files_are_scanned_by_default_but_dot_git_is_never_entered() {
    let dir = tree();
    let items = walk_all(vec![dir.path().to_path_buf()], WalkConfig::default(), 100);
    assert_eq!(
        rel_paths(&items, dir.path()),
        [
            ".gitignore",
            ".hidden",
            ".ignore",
            "a.txt",
            "build/out.txt",
            "skip-me.txt",
            "sub/.env",
            "sub/deeper/z.txt",
            "x.log"
        ]
    );
}

#[test]
fn walk_is_depth_first_in_byte_order_of_names() {
    let dir = tempfile::tempdir().unwrap();
    for p in ["b", "a/y", "a/x", "a/sub/q", "c/z", "B"] {
        touch(&dir.path().join(p), b"");
    }
    let items = walk_all(vec![dir.path().to_path_buf()], WalkConfig::default(), 3);
    let order: Vec<String> = items
        .iter()
        .map(|(p, _)| {
            let s = String::from_utf8_lossy(p).into_owned();
            s[dir.path().as_os_str().len() + 1..].to_string()
        })
        .collect();
    assert_eq!(order, ["B", "a/sub/q", "a/x", "a/y", "b", "c/z"]);
}

#[test]
fn roots_are_walked_in_order_and_paths_keep_the_root_as_given() {
    let dir = tempfile::tempdir().unwrap();
    touch(&dir.path().join("one/f1"), b"1");
    touch(&dir.path().join("two/f2"), b"22");
    touch(&dir.path().join("single.txt"), b"333");
    let base = dir.path().to_string_lossy().into_owned();
    let roots: Vec<PathBuf> = vec![
        format!("{base}/two/./").into(),
        format!("{base}/missing").into(),
        format!("{base}/single.txt").into(),
        format!("{base}/one").into(),
    ];
    let items = walk_all(roots, WalkConfig::default(), 2);
    let got: Vec<(String, Seen)> = items
        .into_iter()
        .map(|(p, s)| (String::from_utf8(p).unwrap(), s))
        .collect();
    assert_eq!(
        got,
        [
            (format!("{base}/two/./f2"), Seen::File(2)),
            (
                format!("{base}/missing"),
                Seen::RootError(std::io::ErrorKind::NotFound)
            ),
            (format!("{base}/single.txt"), Seen::File(3)),
            (format!("{base}/one/f1"), Seen::File(1)),
        ]
    );
}

#[test]
fn files_over_the_size_limit_are_skipped_from_metadata() {
    let dir = tempfile::tempdir().unwrap();
    touch(&dir.path().join("at-limit"), &[1u8; 100]);
    touch(&dir.path().join("over-limit"), &[1u8; 101]);
    let cfg = WalkConfig {
        max_file_size: Some(100),
        ..WalkConfig::default()
    };
    let items = walk_all(vec![dir.path().to_path_buf()], cfg, 10);
    let m = by_rel_path(&items, dir.path());
    assert_eq!(m[&b"at-limit".to_vec()], Seen::File(100));
    assert_eq!(
        m[&b"over-limit".to_vec()],
        Seen::Skipped(SkipReason::TooLarge {
            size: 101,
            limit: 100
        })
    );
}

#[test]
fn batches_resume_where_they_stopped_on_any_thread() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..500 {
        touch(&dir.path().join(format!("d{}/f{i:03}", i % 7)), b"x");
    }
    let whole = walk_all(
        vec![dir.path().to_path_buf()],
        WalkConfig::default(),
        usize::MAX,
    );
    assert_eq!(whole.len(), 500);

    // Pull 7 at a time, moving the cursor to a fresh thread for every batch,
    // as an Enumerate task that re-enqueues itself would.
    let mut cursor = WalkCursor::new(vec![dir.path().to_path_buf()], WalkConfig::default());
    let mut pieces: Vec<PathBuf> = Vec::new();
    loop {
        let (c, batch, more) = std::thread::spawn(move || {
            let mut out = Vec::new();
            let more = cursor.next_batch(7, &mut out);
            (cursor, out, more)
        })
        .join()
        .unwrap();
        cursor = c;
        assert!(batch.len() <= 7);
        pieces.extend(batch.into_iter().map(|i| match i {
            WalkItem::File { path, .. } => path,
            other => panic!("unexpected {other:?}"),
        }));
        if !more {
            break;
        }
    }
    let whole_paths: Vec<Vec<u8>> = whole.into_iter().map(|(p, _)| p).collect();
    let piece_paths: Vec<Vec<u8>> = pieces
        .iter()
        .map(|p| std::os::unix::ffi::OsStrExt::as_bytes(p.as_os_str()).to_vec())
        .collect();
    assert_eq!(
        piece_paths, whole_paths,
        "same items, same order, none twice"
    );
    let mut out = Vec::new();
    assert!(!cursor.next_batch(10, &mut out));
    assert!(out.is_empty(), "a finished cursor stays finished");
}

/// Walks `root` to the end and returns the paths below it and what the
/// filters left out.
fn walk_counting(root: &std::path::Path, cfg: WalkConfig) -> (Vec<String>, Exclusions) {
    let mut cursor = WalkCursor::new(vec![root.to_path_buf()], cfg);
    let mut items = Vec::new();
    while cursor.next_batch(7, &mut items) {}
    let mut rel: Vec<String> = items
        .iter()
        .map(|i| {
            let p = i.path().strip_prefix(root).unwrap();
            p.to_string_lossy().into_owned()
        })
        .collect();
    rel.sort();
    (rel, cursor.exclusions())
}

#[test]
fn what_ignore_files_leave_out_is_counted_files_and_directories_apart() {
    let dir = tree();
    let cfg = WalkConfig {
        respect_ignore: true,
        ..WalkConfig::default()
    };
    let (_, x) = walk_counting(dir.path(), cfg);
    // x.log and skip-me.txt are files; build/ is one directory, not entered.
    assert_eq!(
        x,
        Exclusions {
            ignored_files: 2,
            ignored_dirs: 1,
            ..Exclusions::default()
        }
    );
    let (_, none) = walk_counting(dir.path(), WalkConfig::default());
    assert_eq!(none, Exclusions::default());
}

#[test]
fn deeper_ignore_files_and_negations_win_and_gitignore_above_a_repo_does_not_apply() {
    let outer = tempfile::tempdir().unwrap();
    let o = outer.path();
    // Above the repository: ignored by git's rules, so it must not apply.
    touch(&o.join(".gitignore"), b"*.env\n");
    let repo = o.join("repo");
    touch(&repo.join(".git/HEAD"), b"ref: refs/heads/main\n");
    touch(&repo.join(".gitignore"), b"*.key\nlogs/\n");
    touch(&repo.join("a.env"), b"x");
    touch(&repo.join("a.key"), b"x");
    touch(&repo.join("logs/x.txt"), b"x");
    touch(&repo.join("sub/.gitignore"), b"!keep.key\n");
    touch(&repo.join("sub/keep.key"), b"x");
    touch(&repo.join("sub/drop.key"), b"x");
    touch(&repo.join(".git/info/exclude"), b"local.txt\n");
    touch(&repo.join("local.txt"), b"x");
    let cfg = WalkConfig {
        respect_ignore: true,
        ..WalkConfig::default()
    };
    let (rel, x) = walk_counting(&repo, cfg);
    assert_eq!(
        rel,
        [".gitignore", "a.env", "sub/.gitignore", "sub/keep.key"]
    );
    assert_eq!(x.ignored_files, 3, "a.key, sub/drop.key, local.txt");
    assert_eq!(x.ignored_dirs, 1, "logs/");

    // Outside any repository every .gitignore above the root applies.
    let plain = o.join("plain");
    touch(&plain.join("b.env"), b"x");
    touch(&plain.join("b.txt"), b"x");
    let cfg = WalkConfig {
        respect_ignore: true,
        ..WalkConfig::default()
    };
    let (rel, x) = walk_counting(&plain, cfg);
    assert_eq!(rel, ["b.txt"]);
    assert_eq!(x.ignored_files, 1);
}
