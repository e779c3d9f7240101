//! Helpers shared by the walker and source tests.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use scan::skip::SkipReason;
use scan::walk::{WalkConfig, WalkCursor, WalkItem};

/// Runs `f` on its own thread and waits for it with a generous timeout: a
/// walk or open that blocks (on a FIFO, a device) fails the test instead of
/// hanging the suite. The timeout is a hang detector, not a speed check.
pub fn guarded<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(Duration::from_secs(300)) {
        Ok(v) => v,
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("hung: a FIFO or device was opened?"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("the guarded closure panicked"),
    }
}

/// What the walk said about each path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    File(u64),
    Skipped(SkipReason),
    RootError(std::io::ErrorKind),
    Stream,
}

/// Walks `roots` to the end in batches of `batch` and returns every item in
/// order, with paths as raw bytes.
pub fn walk_all(roots: Vec<PathBuf>, cfg: WalkConfig, batch: usize) -> Vec<(Vec<u8>, Seen)> {
    let mut cursor = WalkCursor::new(roots, cfg);
    let mut items = Vec::new();
    let mut rounds = 0usize;
    loop {
        let mut out = Vec::new();
        let more = cursor.next_batch(batch, &mut out);
        assert!(out.len() <= batch, "batch overflow");
        for item in out {
            let seen = match &item {
                WalkItem::File { size, .. } => Seen::File(*size),
                WalkItem::Skipped { reason, .. } => Seen::Skipped(*reason),
                WalkItem::RootError { error, .. } => Seen::RootError(error.kind()),
                WalkItem::Stream { .. } => Seen::Stream,
            };
            items.push((item.path().as_os_str().as_bytes().to_vec(), seen));
        }
        if !more {
            break;
        }
        rounds += 1;
        assert!(rounds < 10_000_000, "walk does not end");
    }
    items
}

/// The walk's items keyed by path relative to `base` (a `/` after it).
pub fn by_rel_path(items: &[(Vec<u8>, Seen)], base: &Path) -> BTreeMap<Vec<u8>, Seen> {
    let prefix = base.as_os_str().as_bytes();
    items
        .iter()
        .map(|(p, s)| {
            let rel = p
                .strip_prefix(prefix)
                .and_then(|r| r.strip_prefix(b"/"))
                .unwrap_or(p)
                .to_vec();
            (rel, s.clone())
        })
        .collect()
}

pub fn touch(path: &Path, data: &[u8]) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(path, data).unwrap();
}

pub fn mkfifo(path: &Path) {
    let st = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo (coreutils) is needed");
    assert!(st.success());
}

/// True when this process can read anything (root without dropped rights).
pub fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

pub fn labels(items: &[(Vec<u8>, Seen)]) -> BTreeMap<&'static str, usize> {
    let mut m = BTreeMap::new();
    for (_, s) in items {
        let k = match s {
            Seen::File(_) => "file",
            Seen::Skipped(r) => r.label(),
            Seen::RootError(_) => "root_error",
            Seen::Stream => "stream",
        };
        *m.entry(k).or_insert(0) += 1;
    }
    m
}
