//! Compression bombs: 2 GiB of zeros in a ~13 MB zip, gzip and tar.gz, built
//! by hand (a fixed-Huffman deflate block of <258, 1> matches) so the tests
//! never hold or compute 2 GiB. The cursor must stop at the limit, having
//! produced no more than the limit, with bounded memory (this file runs in its
//! own process, so its peak RSS is its own).
#![cfg(not(loom))]

mod archive_common;

use std::path::Path;

use archive_common::*;
use scan::archive::{ArchiveCursor, ArchiveKind, ArchiveLimits, ErrorScope, RootBudget};
use scan::skip::{ByteScope, SkipReason};

const BOMB: u64 = 2 << 30;
const MIB: u64 = 1 << 20;

fn open(path: &Path, kind: ArchiveKind, limits: &ArchiveLimits) -> ArchiveCursor {
    let f = std::fs::File::open(path).unwrap();
    ArchiveCursor::open(f, kind, 1, limits, RootBudget::new(limits.max_root_bytes)).unwrap()
}

/// Reads the current member in 256 KiB chunks (one pool buffer, reused)
/// until it ends or fails; returns bytes read and the error.
fn pump(c: &mut ArchiveCursor) -> (u64, Option<scan::archive::ArchiveError>) {
    let mut buf = vec![0u8; 256 * 1024];
    let mut total = 0u64;
    loop {
        match c.read_member(&mut buf) {
            Ok(0) => return (total, None),
            Ok(n) => {
                assert!(buf[..n].iter().all(|b| *b == 0));
                total += n as u64;
            }
            Err(e) => return (total, Some(e)),
        }
    }
}

/// Peak resident set of this process, from /proc.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kb * 1024
}

fn assert_memory_bounded() {
    let peak = peak_rss();
    assert!(peak < 160 * MIB, "peak RSS {} MiB", peak / MIB);
}

#[test]
fn fixtures_are_small_and_really_inflate_to_two_gib() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bomb.zip");
    let size = write_zip_bomb(&p, b"zeros.bin", BOMB, BOMB);
    assert!(size < 16 * MIB, "bomb is {size} bytes");
    // Check the generator on a small sample: it inflates to exactly n zeros.
    let mut w = BitWriter::new(Vec::new());
    zeros_block(&mut w, 100_000);
    let stream = w.finish();
    let mut out = Vec::new();
    std::io::Read::read_to_end(
        &mut flate2::read::DeflateDecoder::new(&stream[..]),
        &mut out,
    )
    .unwrap();
    assert_eq!(out.len(), 100_000);
    assert!(out.iter().all(|b| *b == 0));
}

#[test]
fn zip_bomb_stops_at_the_inflation_ratio_with_default_limits() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bomb.zip");
    // Declared 200 MiB: under max_entry_bytes, so only reading can catch it.
    write_zip_bomb(&p, b"zeros.bin", BOMB, 200 * MIB);
    let mut c = open(&p, ArchiveKind::Zip, &ArchiveLimits::default());
    c.next_member().unwrap().unwrap();
    let (read, err) = pump(&mut c);
    let err = err.expect("bomb must be stopped");
    assert_eq!(err.skip_reason(), SkipReason::ArchiveInflation);
    assert_eq!(err.scope(), ErrorScope::Member);
    assert!(read < 16 * MIB, "read {read} bytes before stopping");
    assert_eq!(
        c.next_member().unwrap(),
        None,
        "a member error leaves the cursor usable"
    );
    assert_memory_bounded();
}

#[test]
fn zip_bomb_stops_exactly_at_the_archive_byte_limit_when_the_ratio_is_off() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bomb.zip");
    write_zip_bomb(&p, b"zeros.bin", BOMB, BOMB);
    let limits = ArchiveLimits {
        max_inflation_ratio: 0,
        max_entry_bytes: 4 << 30,
        max_archive_bytes: 24 * MIB,
        ..ArchiveLimits::default()
    };
    let mut c = open(&p, ArchiveKind::Zip, &limits);
    c.next_member().unwrap().unwrap();
    let (read, err) = pump(&mut c);
    assert_eq!(read, 24 * MIB);
    let err = err.unwrap();
    assert_eq!(
        err.skip_reason(),
        SkipReason::ArchiveBytes(ByteScope::Archive)
    );
    assert_eq!(err.scope(), ErrorScope::Archive);
    assert_memory_bounded();
}

#[test]
fn zip_bomb_declaring_its_size_is_refused_before_inflating() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bomb.zip");
    write_zip_bomb(&p, b"zeros.bin", BOMB, BOMB);
    let mut c = open(&p, ArchiveKind::Zip, &ArchiveLimits::default());
    let err = c.next_member().unwrap_err();
    assert_eq!(
        err.skip_reason(),
        SkipReason::ArchiveBytes(ByteScope::Entry)
    );
    assert_eq!(c.archive_bytes(), 0, "nothing inflated");
    assert_eq!(c.next_member().unwrap(), None);
}

#[test]
fn zip_bomb_lying_about_its_size_is_corrupt_past_the_declared_size() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bomb.zip");
    write_zip_bomb(&p, b"zeros.bin", BOMB, 1000);
    let mut c = open(&p, ArchiveKind::Zip, &ArchiveLimits::default());
    c.next_member().unwrap().unwrap();
    let (read, err) = pump(&mut c);
    assert_eq!(err.unwrap().skip_reason(), SkipReason::ArchiveCorrupt);
    assert!(read <= 1000);
}

#[test]
fn gzip_bomb_stops_at_the_ratio_or_the_entry_limit() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("zeros.gz");
    write_gzip_bomb(&p, b"", BOMB);
    let mut c = open(&p, ArchiveKind::Gzip, &ArchiveLimits::default());
    c.next_member().unwrap().unwrap();
    let (read, err) = pump(&mut c);
    assert_eq!(err.unwrap().skip_reason(), SkipReason::ArchiveInflation);
    assert!(read < 16 * MIB);

    let limits = ArchiveLimits {
        max_inflation_ratio: 0,
        max_entry_bytes: 20 * MIB,
        ..ArchiveLimits::default()
    };
    let mut c = open(&p, ArchiveKind::Gzip, &limits);
    c.next_member().unwrap().unwrap();
    let (read, err) = pump(&mut c);
    assert_eq!(read, 20 * MIB);
    assert_eq!(
        err.unwrap().skip_reason(),
        SkipReason::ArchiveBytes(ByteScope::Entry)
    );
    assert_memory_bounded();
}

#[test]
fn tar_gz_bomb_member_is_refused_and_skipping_it_stops_at_a_limit() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bomb.tgz");
    write_gzip_bomb(&p, &tar_header("zeros.bin", BOMB), BOMB);
    // Default limits: the 2 GiB member is over max_entry_bytes; getting past it
    // means inflating it, and the ratio guard stops that.
    let mut c = open(&p, ArchiveKind::TarGz, &ArchiveLimits::default());
    assert_eq!(c.kind(), ArchiveKind::TarGz);
    let first = c.next_member().unwrap_err();
    assert_eq!(
        first.skip_reason(),
        SkipReason::ArchiveBytes(ByteScope::Entry)
    );
    assert_eq!(first.member(), Some(&b"zeros.bin"[..]));
    let err = c.next_member().unwrap_err();
    assert_eq!(err.skip_reason(), SkipReason::ArchiveInflation);
    assert!(c.archive_bytes() < 16 * MIB);

    // Ratio off: the per-archive budget stops the skip.
    let limits = ArchiveLimits {
        max_inflation_ratio: 0,
        max_archive_bytes: 16 * MIB,
        ..ArchiveLimits::default()
    };
    let mut c = open(&p, ArchiveKind::TarGz, &limits);
    c.next_member().unwrap_err();
    let err = loop {
        match c.next_member() {
            Err(e) if e.scope() == ErrorScope::Archive => break e,
            Err(_) => continue,
            Ok(m) => panic!("no member expected, got {m:?}"),
        }
    };
    assert_eq!(
        err.skip_reason(),
        SkipReason::ArchiveBytes(ByteScope::Archive)
    );
    assert_eq!(c.archive_bytes(), 16 * MIB);
    assert_memory_bounded();
}
