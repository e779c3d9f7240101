//! The walker on hostile trees: special files, symlink loops, odd names, huge
//! and deep trees, entries that vanish, entries it may not read. Every entry
//! must come out as a file or as skipped with the right reason, and the walk
//! must end (each walk runs under a hang guard).
#![cfg(not(loom))]

mod walk_common;

use std::ffi::OsStr;
use std::io::ErrorKind;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use scan::skip::{SkipReason, SpecialKind};
use scan::source::open_regular;
use scan::walk::{WalkConfig, WalkCursor, WalkItem};
use walk_common::*;

fn follow() -> WalkConfig {
    WalkConfig {
        follow_symlinks: true,
        ..WalkConfig::default()
    }
}

fn walk_guarded(root: PathBuf, cfg: WalkConfig) -> Vec<(Vec<u8>, Seen)> {
    guarded(move || walk_all(vec![root], cfg, 64))
}

fn key(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

#[test]
fn fifos_sockets_and_device_links_are_never_opened() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    mkfifo(&d.join("pipe"));
    let _sock = std::os::unix::net::UnixListener::bind(d.join("sock")).unwrap();
    symlink("/dev/zero", d.join("zero")).unwrap();
    touch(&d.join("ok.txt"), b"ok");

    let m = by_rel_path(&walk_guarded(d.to_path_buf(), WalkConfig::default()), d);
    assert_eq!(
        m[&key("pipe")],
        Seen::Skipped(SkipReason::SpecialFile(SpecialKind::Fifo))
    );
    assert_eq!(
        m[&key("sock")],
        Seen::Skipped(SkipReason::SpecialFile(SpecialKind::Socket))
    );
    assert_eq!(
        m[&key("zero")],
        Seen::Skipped(SkipReason::SymlinkNotFollowed)
    );
    assert_eq!(m[&key("ok.txt")], Seen::File(2));
    assert_eq!(m.len(), 4);

    let m = by_rel_path(&walk_guarded(d.to_path_buf(), follow()), d);
    assert_eq!(
        m[&key("zero")],
        Seen::Skipped(SkipReason::SpecialFile(SpecialKind::CharDevice))
    );
    assert_eq!(
        m[&key("pipe")],
        Seen::Skipped(SkipReason::SpecialFile(SpecialKind::Fifo))
    );
    assert_eq!(m.len(), 4);
}

#[test]
fn broken_links_and_link_loops_are_skipped_with_their_reason_in_both_modes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    symlink("nowhere", d.join("broken")).unwrap();
    symlink("self", d.join("self")).unwrap();
    symlink("ping", d.join("pong")).unwrap();
    symlink("pong", d.join("ping")).unwrap();
    touch(&d.join("real.txt"), b"r");
    symlink("real.txt", d.join("to-real")).unwrap();

    let m = by_rel_path(&walk_guarded(d.to_path_buf(), WalkConfig::default()), d);
    assert_eq!(m[&key("broken")], Seen::Skipped(SkipReason::BrokenSymlink));
    assert_eq!(m[&key("self")], Seen::Skipped(SkipReason::SymlinkLoop));
    assert_eq!(m[&key("ping")], Seen::Skipped(SkipReason::SymlinkLoop));
    assert_eq!(m[&key("pong")], Seen::Skipped(SkipReason::SymlinkLoop));
    assert_eq!(
        m[&key("to-real")],
        Seen::Skipped(SkipReason::SymlinkNotFollowed)
    );
    assert_eq!(m[&key("real.txt")], Seen::File(1));

    let m = by_rel_path(&walk_guarded(d.to_path_buf(), follow()), d);
    assert_eq!(m[&key("broken")], Seen::Skipped(SkipReason::BrokenSymlink));
    assert_eq!(m[&key("self")], Seen::Skipped(SkipReason::SymlinkLoop));
    assert_eq!(m[&key("ping")], Seen::Skipped(SkipReason::SymlinkLoop));
    assert_eq!(
        m[&key("to-real")],
        Seen::File(1),
        "followed: the link's path, the target's size"
    );
    assert_eq!(m.len(), 6);
}

#[test]
fn directory_loops_end_with_follow_and_are_not_entered_without() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    touch(&d.join("a/b/file"), b"f");
    symlink("..", d.join("a/b/up")).unwrap();
    symlink(d, d.join("a/root")).unwrap();

    let m = by_rel_path(&walk_guarded(d.to_path_buf(), WalkConfig::default()), d);
    assert_eq!(
        m[&key("a/b/up")],
        Seen::Skipped(SkipReason::SymlinkNotFollowed)
    );
    assert_eq!(
        m[&key("a/root")],
        Seen::Skipped(SkipReason::SymlinkNotFollowed)
    );
    assert_eq!(m.len(), 3);

    let m = by_rel_path(&walk_guarded(d.to_path_buf(), follow()), d);
    assert_eq!(m[&key("a/b/file")], Seen::File(1));
    assert_eq!(m[&key("a/b/up")], Seen::Skipped(SkipReason::SymlinkLoop));
    assert_eq!(m[&key("a/root")], Seen::Skipped(SkipReason::SymlinkLoop));
    assert_eq!(m.len(), 3, "{m:?}");
}

#[test]
fn names_that_are_not_utf8_survive_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let dir_name = OsStr::from_bytes(b"d\xe9j\xe0");
    let file_name = OsStr::from_bytes(b"\xff\xfe key\x01.txt");
    touch(&d.join(dir_name).join(file_name), b"x");
    let items = walk_guarded(d.to_path_buf(), WalkConfig::default());
    let mut want = d.as_os_str().as_bytes().to_vec();
    want.extend_from_slice(b"/d\xe9j\xe0/\xff\xfe key\x01.txt");
    assert_eq!(items, [(want.clone(), Seen::File(1))]);
    // And the path opens.
    let (_, size) = open_regular(Path::new(OsStr::from_bytes(&want))).unwrap();
    assert_eq!(size, 1);
}

#[test]
fn sparse_20_gib_file_is_too_large_without_being_read() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("disk.img");
    std::fs::File::create(&p)
        .unwrap()
        .set_len(20 << 30)
        .unwrap();
    let items = walk_guarded(dir.path().to_path_buf(), WalkConfig::default());
    assert_eq!(
        items[0].1,
        Seen::Skipped(SkipReason::TooLarge {
            size: 20 << 30,
            limit: scan::source::DEFAULT_MAX_FILE_SIZE
        })
    );
    let unlimited = WalkConfig {
        max_file_size: None,
        ..WalkConfig::default()
    };
    let items = walk_guarded(dir.path().to_path_buf(), unlimited);
    assert_eq!(items[0].1, Seen::File(20 << 30));
}

#[test]
fn two_hundred_deep_directories_are_walked_to_the_bottom() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = dir.path().to_path_buf();
    for i in 0..200 {
        p.push(format!("d{i}"));
    }
    touch(&p.join("bottom.txt"), b"deep");
    touch(&dir.path().join("d0/top.txt"), b"t");
    let items = walk_guarded(dir.path().to_path_buf(), WalkConfig::default());
    let mut want = p.join("bottom.txt").as_os_str().as_bytes().to_vec();
    assert_eq!(items.len(), 2);
    assert_eq!(items[0], (std::mem::take(&mut want), Seen::File(4)));
    let (_, size) = open_regular(&p.join("bottom.txt")).unwrap();
    assert_eq!(size, 4);
}

#[test]
fn twenty_thousand_files_in_one_directory_each_come_out_once() {
    let dir = tempfile::tempdir().unwrap();
    const N: usize = 20_000;
    for i in 0..N {
        std::fs::write(dir.path().join(format!("f{i:05}")), b"").unwrap();
    }
    let items = walk_guarded(dir.path().to_path_buf(), WalkConfig::default());
    assert_eq!(items.len(), N);
    let unique: std::collections::BTreeSet<_> = items.iter().map(|(p, _)| p.clone()).collect();
    assert_eq!(unique.len(), N);
    assert!(items.iter().all(|(_, s)| *s == Seen::File(0)));
}

#[test]
fn entries_deleted_during_the_walk_are_vanished_not_errors() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..100 {
        touch(&dir.path().join(format!("f{i:03}")), b"x");
    }
    let mut cursor = WalkCursor::new(vec![dir.path().to_path_buf()], WalkConfig::default());
    let mut out = Vec::new();
    assert!(cursor.next_batch(10, &mut out));
    // Listed (the directory has been read) but not yet yielded: gone now.
    std::fs::remove_file(dir.path().join("f050")).unwrap();
    // Yielded as a file, deleted before the open.
    let first = out[0].path().to_path_buf();
    std::fs::remove_file(&first).unwrap();
    while cursor.next_batch(10, &mut out) {}
    assert_eq!(out.len(), 100);
    let f050 = out
        .iter()
        .find(|i| i.path() == dir.path().join("f050"))
        .unwrap();
    assert!(matches!(
        f050,
        WalkItem::Skipped {
            reason: SkipReason::Vanished,
            ..
        }
    ));
    assert_eq!(open_regular(&first).unwrap_err(), SkipReason::Vanished);
}

const CHILD_ENV: &str = "SCAN_TEST_UNPRIVILEGED_DIR";
const UNREADABLE_TEST: &str = "permission_denied_entries_are_skipped_as_unreadable";

fn check_unreadable(d: &Path) {
    let items = walk_all(vec![d.to_path_buf()], WalkConfig::default(), 16);
    let m = by_rel_path(&items, d);
    assert_eq!(m[&key("ok.txt")], Seen::File(2));
    // The walker lists a file it may not read (stat needs no read right)...
    assert_eq!(m[&key("locked.txt")], Seen::File(6));
    // ...and the open says why it is skipped.
    assert_eq!(
        open_regular(&d.join("locked.txt")).unwrap_err(),
        SkipReason::Unreadable(ErrorKind::PermissionDenied)
    );
    // A directory it may not list is skipped; what is inside is not discovered.
    assert_eq!(
        m[&key("closed")],
        Seen::Skipped(SkipReason::Unreadable(ErrorKind::PermissionDenied))
    );
    assert_eq!(m.len(), 3, "{m:?}");
    // A root it may not list is a root error.
    let items = walk_all(vec![d.join("closed")], WalkConfig::default(), 16);
    assert_eq!(
        items,
        [(
            d.join("closed").as_os_str().as_bytes().to_vec(),
            Seen::RootError(ErrorKind::PermissionDenied)
        )]
    );
}

/// Root reads everything, so as root this test re-runs itself as `nobody`
/// through `setpriv` (util-linux) and checks that the child really ran.
#[test]
fn permission_denied_entries_are_skipped_as_unreadable() {
    use std::os::unix::fs::PermissionsExt;
    if let Some(dir) = std::env::var_os(CHILD_ENV) {
        check_unreadable(Path::new(&dir));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    touch(&d.join("ok.txt"), b"ok");
    touch(&d.join("locked.txt"), b"secret");
    touch(&d.join("closed/inside.txt"), b"in");
    std::fs::set_permissions(d.join("locked.txt"), std::fs::Permissions::from_mode(0o000)).unwrap();
    std::fs::set_permissions(d.join("closed"), std::fs::Permissions::from_mode(0o000)).unwrap();
    if is_root() {
        let exe = std::env::current_exe().unwrap();
        let out = std::process::Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(exe)
            .args([
                "--exact",
                UNREADABLE_TEST,
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, d)
            .output()
            .expect("setpriv (util-linux) is needed to drop root for this test");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "unprivileged run failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    } else {
        check_unreadable(d);
    }
    std::fs::set_permissions(d.join("closed"), std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// One tree with every hostile kind of entry: the counts per outcome are
/// exactly the entries made, nothing lost, nothing counted twice.
#[test]
fn every_discovered_entry_is_a_file_or_skipped_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for i in 0..50 {
        touch(&d.join(format!("plain/f{i}")), b"data");
    }
    for i in 0..3 {
        mkfifo(&d.join(format!("fifo{i}")));
    }
    let _s = std::os::unix::net::UnixListener::bind(d.join("sock")).unwrap();
    symlink("/dev/zero", d.join("zero")).unwrap();
    symlink("/dev/null", d.join("null")).unwrap();
    symlink("gone", d.join("dangling")).unwrap();
    symlink("loop", d.join("loop")).unwrap();
    symlink("plain", d.join("plain-link")).unwrap();
    std::fs::File::create(d.join("huge"))
        .unwrap()
        .set_len(1 << 40)
        .unwrap();
    touch(&d.join(OsStr::from_bytes(b"\x80\x81")), b"odd");

    let items = walk_guarded(d.to_path_buf(), WalkConfig::default());
    assert_counts(
        &items,
        &[
            ("file", 51),
            ("special_file", 4),
            ("symlink_not_followed", 3),
            ("broken_symlink", 1),
            ("symlink_loop", 1),
            ("too_large", 1),
        ],
    );
    let items = walk_guarded(d.to_path_buf(), follow());
    assert_counts(
        &items,
        &[
            ("file", 101),
            ("special_file", 6),
            ("broken_symlink", 1),
            ("symlink_loop", 1),
            ("too_large", 1),
        ],
    );
}

fn assert_counts(items: &[(Vec<u8>, Seen)], want: &[(&'static str, usize)]) {
    let want: std::collections::BTreeMap<&str, usize> = want.iter().copied().collect();
    assert_eq!(labels(items), want);
}

/// The `ignore` crate opens ignore files with a blocking open and reads them
/// whole: a FIFO `.gitignore` would hang the walk and a sparse giant `.ignore`
/// would exhaust memory. With ignore rules on, such directories are walked
/// without them,
/// and the hostile file is reported like any other entry.
#[test]
fn hostile_ignore_files_neither_hang_the_walk_nor_hide_files() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    touch(&d.join("keep.txt"), b"k");
    touch(&d.join("pipe-dir/secret.env"), b"s");
    touch(&d.join("pipe-dir/sub/x"), b"x");
    mkfifo(&d.join("pipe-dir/.gitignore"));
    touch(&d.join("big-dir/y"), b"y");
    std::fs::File::create(d.join("big-dir/.ignore"))
        .unwrap()
        .set_len(2 << 30)
        .unwrap();
    let respect = WalkConfig {
        respect_ignore: true,
        ..WalkConfig::default()
    };
    let items = walk_guarded(d.to_path_buf(), respect.clone());
    let m = by_rel_path(&items, d);
    assert_eq!(
        m[&key("pipe-dir/.gitignore")],
        Seen::Skipped(SkipReason::SpecialFile(SpecialKind::Fifo))
    );
    assert!(matches!(
        m[&key("big-dir/.ignore")],
        Seen::Skipped(SkipReason::TooLarge { .. })
    ));
    assert_counts(
        &items,
        &[("file", 4), ("special_file", 1), ("too_large", 1)],
    );

    // A root whose own ignore file is a FIFO.
    let root = tempfile::tempdir().unwrap();
    mkfifo(&root.path().join(".gitignore"));
    touch(&root.path().join("a"), b"a");
    let items = walk_guarded(root.path().to_path_buf(), respect);
    assert_counts(&items, &[("file", 1), ("special_file", 1)]);
}
