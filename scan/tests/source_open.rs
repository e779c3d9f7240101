//! Safe open: only regular files are opened for reading, and a path swapped
//! after listing can never block the scanner.
#![cfg(not(loom))]

#[path = "walk_common/mod.rs"]
mod walk_common;

use std::os::unix::fs::symlink;

use scan::skip::{SkipReason, SpecialKind};
use scan::source::{open_for_scan, open_regular, open_regular_nofollow};
use scan::walk::{WalkConfig, WalkCursor, WalkItem};
use walk_common::*;

#[test]
fn regular_file_opens_with_its_size() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("f");
    touch(&p, b"hello");
    let (_f, size) = open_regular(&p).unwrap();
    assert_eq!(size, 5);
    let (_f, size) = open_regular_nofollow(&p).unwrap();
    assert_eq!(size, 5);
}

#[test]
fn special_files_are_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_path_buf();
    mkfifo(&d.join("pipe"));
    let _sock = std::os::unix::net::UnixListener::bind(d.join("sock")).unwrap();
    symlink("/dev/zero", d.join("zero")).unwrap();
    std::fs::create_dir(d.join("dir")).unwrap();
    let results = guarded(move || {
        [
            open_regular(&d.join("pipe")).unwrap_err(),
            open_regular(&d.join("sock")).unwrap_err(),
            open_regular(&d.join("zero")).unwrap_err(),
            open_regular_nofollow(&d.join("zero")).unwrap_err(),
            open_regular(&d.join("dir")).unwrap_err(),
            open_regular(std::path::Path::new("/dev/null")).unwrap_err(),
        ]
    });
    assert_eq!(
        results,
        [
            SkipReason::SpecialFile(SpecialKind::Fifo),
            SkipReason::SpecialFile(SpecialKind::Socket),
            SkipReason::SpecialFile(SpecialKind::CharDevice),
            SkipReason::SymlinkNotFollowed,
            SkipReason::SpecialFile(SpecialKind::Directory),
            SkipReason::SpecialFile(SpecialKind::CharDevice),
        ]
    );
}

#[test]
fn missing_paths_and_bad_links_map_to_their_reasons() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    symlink("nowhere", d.join("dangling")).unwrap();
    symlink("self", d.join("self")).unwrap();
    touch(&d.join("file"), b"x");
    assert_eq!(
        open_regular(&d.join("gone")).unwrap_err(),
        SkipReason::Vanished
    );
    assert_eq!(
        open_regular(&d.join("file/below")).unwrap_err(),
        SkipReason::Vanished
    );
    assert_eq!(
        open_regular(&d.join("dangling")).unwrap_err(),
        SkipReason::BrokenSymlink
    );
    assert_eq!(
        open_regular(&d.join("self")).unwrap_err(),
        SkipReason::SymlinkLoop
    );
}

/// The walker saw a regular file; before the FetchSync task opens it, it is
/// replaced by a FIFO with no writer. A plain open would wait forever.
#[test]
fn file_swapped_for_a_fifo_after_listing_is_refused_not_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("victim");
    touch(&p, b"was a file");
    let mut cursor = WalkCursor::new(vec![dir.path().to_path_buf()], WalkConfig::default());
    let mut out = Vec::new();
    cursor.next_batch(10, &mut out);
    let listed = match &out[..] {
        [WalkItem::File { path, size: 10 }] => path.clone(),
        other => panic!("{other:?}"),
    };
    std::fs::remove_file(&p).unwrap();
    mkfifo(&p);
    let cfg = WalkConfig::default();
    let res = guarded(move || open_for_scan(&listed, &cfg).map(|(_, s)| s));
    assert_eq!(res, Err(SkipReason::SpecialFile(SpecialKind::Fifo)));
}

#[test]
fn file_that_grew_past_the_limit_after_listing_is_too_large_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("growing");
    touch(&p, &[0u8; 10]);
    let cfg = WalkConfig {
        max_file_size: Some(100),
        ..WalkConfig::default()
    };
    assert_eq!(open_for_scan(&p, &cfg).unwrap().1, 10);
    std::fs::File::options()
        .write(true)
        .open(&p)
        .unwrap()
        .set_len(101)
        .unwrap();
    assert_eq!(
        open_for_scan(&p, &cfg).unwrap_err(),
        SkipReason::TooLarge {
            size: 101,
            limit: 100
        }
    );
}
