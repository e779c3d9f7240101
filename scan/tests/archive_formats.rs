//! Archive formats, nesting, limits and damage, through the public cursor.
#![cfg(not(loom))]

mod archive_common;

use std::io::Write;
use std::path::Path;

use archive_common::*;
use scan::archive::{
    detect_file, sniff, ArchiveCursor, ArchiveKind, ArchiveLimits, ArchivePolicy, ErrorScope,
    MemberInfo, RootBudget,
};
use scan::skip::{ByteScope, SkipReason};

fn open(
    dir: &Path,
    name: &str,
    bytes: &[u8],
    kind: ArchiveKind,
    limits: &ArchiveLimits,
) -> ArchiveCursor {
    let f = write(dir, name, bytes);
    ArchiveCursor::open(f, kind, 1, limits, RootBudget::new(limits.max_root_bytes)).unwrap()
}

fn open_default(dir: &Path, name: &str, bytes: &[u8], kind: ArchiveKind) -> ArchiveCursor {
    open(dir, name, bytes, kind, &ArchiveLimits::default())
}

fn run(
    dir: &Path,
    name: &str,
    bytes: &[u8],
    policy: ArchivePolicy,
    limits: &ArchiveLimits,
) -> Outcome {
    let kind = sniff(bytes).expect("fixture is an archive");
    let f = write(dir, name, bytes);
    let mut out = Outcome::default();
    match ArchiveCursor::open(f, kind, 1, limits, RootBudget::new(limits.max_root_bytes)) {
        Ok(mut c) => drain(&mut c, Path::new(name), policy, &mut out),
        Err(e) => out
            .skipped
            .push((name.as_bytes().to_vec(), e.skip_reason())),
    }
    out
}

fn run_default(dir: &Path, name: &str, bytes: &[u8]) -> Outcome {
    run_policy(dir, name, bytes, ArchivePolicy::Skip)
}

fn run_policy(dir: &Path, name: &str, bytes: &[u8], policy: ArchivePolicy) -> Outcome {
    run(dir, name, bytes, policy, &ArchiveLimits::default())
}

fn read_all(c: &mut ArchiveCursor) -> Result<Vec<u8>, scan::archive::ArchiveError> {
    let mut v = Vec::new();
    let mut buf = [0u8; 1000];
    loop {
        match c.read_member(&mut buf)? {
            0 => return Ok(v),
            n => v.extend_from_slice(&buf[..n]),
        }
    }
}

#[test]
fn zip_members_stream_with_names_and_contents() {
    let dir = tempfile::tempdir().unwrap();
    let big: Vec<u8> = (0..300_000u32).flat_map(|i| i.to_le_bytes()).collect();
    let bytes = zip_bytes(&[
        ZipEntry::new(b"dir/", b"").stored(),
        ZipEntry::new(b"dir/a.txt", b"alpha").stored(),
        ZipEntry::new(b"b.bin", &big),
        ZipEntry::new(b"empty", b""),
    ]);
    assert_eq!(sniff(&bytes), Some(ArchiveKind::Zip));
    let out = run_default(dir.path(), "app.jar", &bytes);
    assert_eq!(
        out.paths(),
        ["app.jar!dir/a.txt", "app.jar!b.bin", "app.jar!empty"]
    );
    assert_eq!(out.file(b"app.jar!dir/a.txt"), Some(&b"alpha"[..]));
    assert_eq!(out.file(b"app.jar!b.bin"), Some(&big[..]));
    assert!(out.skipped.is_empty(), "{:?}", out.skipped);
}

#[test]
fn zips_written_by_the_zip_crate_read_back_including_data_descriptors() {
    let dir = tempfile::tempdir().unwrap();
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    // Seekable writer: sizes in the headers.
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    w.start_file("x/one.env", opts).unwrap();
    w.write_all(b"TOKEN=1").unwrap();
    w.start_file("two.txt", opts).unwrap();
    w.write_all(&[b'z'; 70_000]).unwrap();
    let seekable = w.finish().unwrap().into_inner();
    // Streaming writer: sizes after the data (general purpose bit 3).
    let mut w = zip::ZipWriter::new_stream(Vec::new());
    w.start_file("streamed.txt", opts).unwrap();
    w.write_all(b"streamed body").unwrap();
    let streamed = w.finish().unwrap().into_inner();
    for (name, bytes, want) in [
        ("s.zip", seekable, vec!["s.zip!x/one.env", "s.zip!two.txt"]),
        ("t.zip", streamed, vec!["t.zip!streamed.txt"]),
    ] {
        let out = run_default(dir.path(), name, &bytes);
        assert_eq!(out.paths(), want);
        assert!(out.skipped.is_empty(), "{:?}", out.skipped);
    }
}

#[test]
fn zip_is_detected_by_magic_not_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = zip_bytes(&[ZipEntry::new(b"k", b"v")]);
    let f = write(dir.path(), "data.bin", &bytes);
    assert_eq!(detect_file(&f, &bytes, b"data.bin"), Some(ArchiveKind::Zip));
    let text = b"just some text, not a zip at all";
    let f = write(dir.path(), "fake.zip", text);
    assert_eq!(detect_file(&f, text, b"fake.zip"), None);
}

#[test]
fn zip_behind_a_launcher_stub_is_found_through_its_end_record() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = b"#!/bin/sh\nexec java -jar \"$0\"\n".to_vec();
    let stub = bytes.len();
    bytes.extend(zip_bytes(&[ZipEntry::new(
        b"app.properties",
        b"password=hunter2",
    )]));
    let f = write(dir.path(), "tool.jar", &bytes);
    assert_eq!(sniff(&bytes), None, "no magic at offset 0");
    assert_eq!(
        detect_file(&f, &bytes[..stub], b"tool.jar"),
        Some(ArchiveKind::Zip)
    );
    let out = run_as(dir.path(), "tool.jar", &bytes, ArchiveKind::Zip);
    assert_eq!(
        out.file(b"tool.jar!app.properties"),
        Some(&b"password=hunter2"[..])
    );
}

fn run_as(dir: &Path, name: &str, bytes: &[u8], kind: ArchiveKind) -> Outcome {
    let limits = ArchiveLimits::default();
    let mut c = open(dir, name, bytes, kind, &limits);
    let mut out = Outcome::default();
    drain(&mut c, Path::new(name), ArchivePolicy::Skip, &mut out);
    out
}

#[test]
fn tar_members_stream_in_order_with_long_names_and_no_directories() {
    let dir = tempfile::tempdir().unwrap();
    let long = format!("{}/deep.key", "d".repeat(150));
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Directory);
    h.set_size(0);
    b.append_data(&mut h, "sub/", &[][..]).unwrap();
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Symlink);
    h.set_size(0);
    b.append_link(&mut h, "sub/link", "target").unwrap();
    for (name, data) in [
        ("sub/a.txt", &b"one"[..]),
        (long.as_str(), b"two"),
        ("z", &[7u8; 1500][..]),
    ] {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_entry_type(tar::EntryType::Regular);
        b.append_data(&mut h, name, data).unwrap();
    }
    let bytes = b.into_inner().unwrap();
    assert_eq!(sniff(&bytes), Some(ArchiveKind::Tar));
    let out = run_default(dir.path(), "t.tar", &bytes);
    let want_long = format!("t.tar!{long}");
    assert_eq!(
        out.paths(),
        ["t.tar!sub/a.txt", want_long.as_str(), "t.tar!z"]
    );
    assert_eq!(out.file(want_long.as_bytes()), Some(&b"two"[..]));
    assert_eq!(out.file(b"t.tar!z"), Some(&[7u8; 1500][..]));
}

#[test]
fn pax_path_records_name_members() {
    let dir = tempfile::tempdir().unwrap();
    let mut pax = Vec::new();
    let rec = "path=pax/\u{e9}t\u{e9}.env\n";
    let len = rec.len() + 3; // "NN " prefix, two digits
    pax.extend_from_slice(format!("{len} {rec}").as_bytes());
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_ustar();
    h.set_entry_type(tar::EntryType::XHeader);
    h.set_size(pax.len() as u64);
    b.append_data(&mut h, "PaxHeader", &pax[..]).unwrap();
    let mut h = tar::Header::new_ustar();
    h.set_size(4);
    h.set_entry_type(tar::EntryType::Regular);
    b.append_data(&mut h, "short-name", &b"body"[..]).unwrap();
    let bytes = b.into_inner().unwrap();
    let out = run_default(dir.path(), "p.tar", &bytes);
    assert_eq!(out.paths(), ["p.tar!pax/\u{e9}t\u{e9}.env"]);
}

#[test]
fn gzip_single_file_is_one_member_named_from_its_header_or_the_archive() {
    let dir = tempfile::tempdir().unwrap();
    let named = gzip(b"AWS_SECRET=abc", Some(b"creds.env"));
    assert_eq!(sniff(&named), Some(ArchiveKind::Gzip));
    let out = run_default(dir.path(), "x.gz", &named);
    assert_eq!(out.paths(), ["x.gz!creds.env"]);
    assert_eq!(out.file(b"x.gz!creds.env"), Some(&b"AWS_SECRET=abc"[..]));

    let unnamed = gzip(b"plain", None);
    let out = run_default(dir.path(), "notes.txt.gz", &unnamed);
    assert_eq!(out.paths(), ["notes.txt.gz!notes.txt"]);
}

#[test]
fn tar_gz_is_recognised_from_content_even_when_opened_as_gzip() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = gzip(
        &tar_bytes(&[(b"etc/app.conf", b"key=1"), (b"b", b"2")]),
        None,
    );
    assert_eq!(sniff(&bytes), Some(ArchiveKind::TarGz));
    let mut c = open_default(dir.path(), "a.bin", &bytes, ArchiveKind::Gzip);
    assert_eq!(c.kind(), ArchiveKind::TarGz);
    let mut out = Outcome::default();
    drain(&mut c, Path::new("a.tgz"), ArchivePolicy::Skip, &mut out);
    assert_eq!(out.paths(), ["a.tgz!etc/app.conf", "a.tgz!b"]);
    // A plain gzip opened as TarGz is read as what it is.
    let plain = gzip(b"not a tar", None);
    let c = open_default(dir.path(), "p.gz", &plain, ArchiveKind::TarGz);
    assert_eq!(c.kind(), ArchiveKind::Gzip);
}

#[test]
fn member_names_that_are_not_utf8_survive_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let name = b"caf\xe9/\xff\xfe.key";
    let zip = zip_bytes(&[ZipEntry::new(name, b"z")]);
    let tar = tar_bytes(&[(name, b"t")]);
    for (file, bytes) in [("n.zip", zip), ("n.tar", tar)] {
        let mut want = format!("{file}!").into_bytes();
        want.extend_from_slice(name);
        let out = run_default(dir.path(), file, &bytes);
        assert_eq!(out.files.len(), 1, "{file}");
        assert_eq!(out.files[0].0, want, "{file}");
    }
}

/// a.tar.gz ! b.zip ! c.tar ! secret.env: three levels, read at max_depth 3;
/// one more level (d.zip inside c.tar) is refused as too deep.
fn nested_fixture(levels: usize) -> Vec<u8> {
    let secret: &[u8] = b"API_KEY=deep";
    // innermost first
    let mut inner = tar_bytes(&[(b"secret.env", secret)]);
    let mut inner_name: &[u8] = b"c.tar";
    if levels == 4 {
        let d = zip_bytes(&[ZipEntry::new(b"secret.env", secret)]);
        inner = tar_bytes(&[(b"d.zip", &d)]);
    }
    let b = zip_bytes(&[
        ZipEntry::new(inner_name, &inner),
        ZipEntry::new(b"readme", b"hi"),
    ]);
    inner_name = b"b.zip";
    gzip(&tar_bytes(&[(inner_name, &b), (b"top.txt", b"top")]), None)
}

#[test]
fn nested_archives_open_to_the_depth_limit_and_not_one_past() {
    let dir = tempfile::tempdir().unwrap();
    let limits = ArchiveLimits::default();
    assert_eq!(limits.max_depth, 3);
    let out = run(
        dir.path(),
        "a.tar.gz",
        &nested_fixture(3),
        ArchivePolicy::Partial,
        &limits,
    );
    assert_eq!(
        out.paths(),
        [
            "a.tar.gz!b.zip!c.tar!secret.env",
            "a.tar.gz!b.zip!readme",
            "a.tar.gz!top.txt"
        ]
    );
    assert_eq!(
        out.file(b"a.tar.gz!b.zip!c.tar!secret.env"),
        Some(&b"API_KEY=deep"[..])
    );
    assert!(out.skipped.is_empty(), "{:?}", out.skipped);

    let out = run(
        dir.path(),
        "a.tar.gz",
        &nested_fixture(4),
        ArchivePolicy::Partial,
        &limits,
    );
    assert_eq!(
        out.skipped,
        [(
            b"a.tar.gz!b.zip!c.tar!d.zip".to_vec(),
            SkipReason::ArchiveDepth
        )]
    );
    // The rest of every level is still read.
    assert_eq!(out.paths(), ["a.tar.gz!b.zip!readme", "a.tar.gz!top.txt"]);
}

#[test]
fn nested_cursor_fails_once_its_parent_moves_on() {
    let dir = tempfile::tempdir().unwrap();
    let inner = tar_bytes(&[(b"x", &[1u8; 5000][..]), (b"y", b"2")]);
    let outer = tar_bytes(&[(b"in.tar", &inner), (b"after", b"3")]);
    let mut c = open_default(dir.path(), "o.tar", &outer, ArchiveKind::Tar);
    let info = c.next_member().unwrap().unwrap();
    assert_eq!(info.is_nested_archive, Some(ArchiveKind::Tar));
    let mut child = c.open_nested(ArchiveKind::Tar).unwrap();
    assert_eq!(child.depth(), 2);
    assert_eq!(child.next_member().unwrap().unwrap().name, b"x");
    // The parent moves on while the child is half-read.
    assert_eq!(c.next_member().unwrap().unwrap().name, b"after");
    let err = read_all(&mut child).unwrap_err();
    assert_eq!(err.scope(), ErrorScope::Archive);
    assert_eq!(read_all(&mut c).unwrap(), b"3");
}

#[test]
fn open_nested_refuses_a_member_already_partly_read() {
    let dir = tempfile::tempdir().unwrap();
    let inner = tar_bytes(&[(b"x", b"1")]);
    let outer = tar_bytes(&[(b"in.tar", &inner)]);
    let mut c = open_default(dir.path(), "o.tar", &outer, ArchiveKind::Tar);
    c.next_member().unwrap().unwrap();
    let mut two = [0u8; 2];
    assert_eq!(c.read_member(&mut two).unwrap(), 2);
    assert!(c.open_nested(ArchiveKind::Tar).is_err());
}

#[test]
fn more_entries_than_the_limit_stop_the_archive_after_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let limits = ArchiveLimits {
        max_entries: 5,
        ..ArchiveLimits::default()
    };
    let names: Vec<Vec<u8>> = (0..12).map(|i| format!("f{i:02}").into_bytes()).collect();
    let zip = zip_bytes(
        &names
            .iter()
            .map(|n| ZipEntry::new(n, b"x"))
            .collect::<Vec<_>>(),
    );
    let tar = tar_bytes(
        &names
            .iter()
            .map(|n| (n.as_slice(), &b"x"[..]))
            .collect::<Vec<_>>(),
    );
    for (file, bytes) in [("e.zip", &zip), ("e.tar", &tar)] {
        let out = run(dir.path(), file, bytes, ArchivePolicy::Partial, &limits);
        assert_eq!(
            out.files.len(),
            5,
            "{file}: members up to the limit are kept"
        );
        assert_eq!(out.reasons(), ["archive_entry_limit"], "{file}");
    }
    // Zip knows how many were not reached.
    let mut c = open(dir.path(), "e.zip", &zip, ArchiveKind::Zip, &limits);
    assert_eq!(c.members_remaining(), Some(12));
    for _ in 0..5 {
        c.next_member().unwrap().unwrap();
    }
    let err = c.next_member().unwrap_err();
    assert_eq!(err.skip_reason(), SkipReason::ArchiveEntries);
    assert_eq!(c.members_remaining(), Some(6));
    assert_eq!(
        c.next_member().unwrap_err(),
        err,
        "archive-scope errors repeat"
    );
}

#[test]
fn encrypted_zip_member_is_skipped_and_partial_reads_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let mut enc = ZipEntry::new(b"locked.txt", b"ciphertext!").stored();
    enc.flags = 1; // traditional PKWARE encryption
    let mut aes = ZipEntry::new(b"aes.txt", b"ciphertext").stored();
    aes.method = Some(99);
    let bytes = zip_bytes(&[
        ZipEntry::new(b"a", b"1"),
        enc,
        aes,
        ZipEntry::new(b"b", b"2"),
    ]);
    let out = run_policy(dir.path(), "e.zip", &bytes, ArchivePolicy::Partial);
    assert_eq!(out.paths(), ["e.zip!a", "e.zip!b"]);
    assert_eq!(
        out.skipped,
        [
            (b"e.zip!locked.txt".to_vec(), SkipReason::ArchiveEncrypted),
            (b"e.zip!aes.txt".to_vec(), SkipReason::ArchiveEncrypted)
        ]
    );
    let out = run_default(dir.path(), "e.zip", &bytes);
    assert_eq!(out.paths(), ["e.zip!a"], "skip stops at the first problem");
    assert_eq!(out.reasons(), ["archive_encrypted"]);
    let out = run_policy(dir.path(), "e.zip", &bytes, ArchivePolicy::FailRun);
    assert!(out.aborted);
}

#[test]
fn unsupported_zip_method_is_a_member_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut bz = ZipEntry::new(b"x.bz2", b"data").stored();
    bz.method = Some(12);
    let bytes = zip_bytes(&[bz, ZipEntry::new(b"ok", b"1")]);
    let out = run_policy(dir.path(), "m.zip", &bytes, ArchivePolicy::Partial);
    assert_eq!(out.paths(), ["m.zip!ok"]);
    assert_eq!(
        out.skipped,
        [(
            b"m.zip!x.bz2".to_vec(),
            SkipReason::ArchiveUnsupported("zip method bzip2")
        )]
    );
}

#[test]
fn zip_member_with_a_wrong_crc_is_corrupt_and_the_next_one_still_reads() {
    let dir = tempfile::tempdir().unwrap();
    let mut bad = ZipEntry::new(b"bad", b"payload");
    bad.crc = Some(0xDEAD_BEEF);
    let bytes = zip_bytes(&[bad, ZipEntry::new(b"good", b"ok")]);
    let out = run_policy(dir.path(), "c.zip", &bytes, ArchivePolicy::Partial);
    assert_eq!(out.paths(), ["c.zip!good"]);
    assert_eq!(
        out.skipped,
        [(b"c.zip!bad".to_vec(), SkipReason::ArchiveCorrupt)]
    );
}

#[test]
fn truncated_and_garbage_archives_of_every_format_are_corrupt_not_crashes() {
    let dir = tempfile::tempdir().unwrap();
    let payload: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let zip = zip_bytes(&[ZipEntry::new(b"a", &payload), ZipEntry::new(b"b", b"x")]);
    let tar = tar_bytes(&[(b"a", &payload), (b"b", b"x")]);
    let gz = gzip(&payload, Some(b"a"));
    let tgz = gzip(&tar, None);
    let mut garbage = Vec::new();
    let mut x: u32 = 12345;
    for _ in 0..10_000 {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        garbage.push((x >> 16) as u8);
    }
    let with_magic = |magic: &[u8]| {
        let mut v = magic.to_vec();
        v.extend_from_slice(&garbage);
        v
    };
    let cases: Vec<(&str, Vec<u8>, ArchiveKind)> = vec![
        (
            "zip-truncated",
            zip[..zip.len() / 2].to_vec(),
            ArchiveKind::Zip,
        ),
        ("zip-garbage", with_magic(b"PK\x03\x04"), ArchiveKind::Zip),
        (
            "tar-truncated",
            tar[..tar.len() / 2].to_vec(),
            ArchiveKind::Tar,
        ),
        ("tar-garbage", garbage.clone(), ArchiveKind::Tar),
        (
            "gz-truncated",
            gz[..gz.len() / 2].to_vec(),
            ArchiveKind::Gzip,
        ),
        ("gz-garbage", with_magic(&[0x1f, 0x8b]), ArchiveKind::Gzip),
        (
            "tgz-truncated",
            tgz[..tgz.len() / 2].to_vec(),
            ArchiveKind::TarGz,
        ),
        (
            "tgz-garbage",
            with_magic(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3]),
            ArchiveKind::TarGz,
        ),
        ("empty", Vec::new(), ArchiveKind::Zip),
    ];
    for (name, bytes, kind) in cases {
        let f = write(dir.path(), name, &bytes);
        let limits = ArchiveLimits::default();
        let mut out = Outcome::default();
        match ArchiveCursor::open(f, kind, 1, &limits, RootBudget::new(limits.max_root_bytes)) {
            Ok(mut c) => drain(&mut c, Path::new(name), ArchivePolicy::Partial, &mut out),
            Err(e) => out
                .skipped
                .push((name.as_bytes().to_vec(), e.skip_reason())),
        }
        assert_eq!(
            out.reasons(),
            ["archive_corrupt"],
            "{name}: {:?}",
            out.skipped
        );
        // What came out before the damage is the real data, never garbage.
        for (p, data) in &out.files {
            assert!(payload.starts_with(data) || data == b"x", "{name}: {p:?}");
        }
    }
}

#[test]
fn skipping_an_unread_member_of_a_compressed_tar_is_charged_to_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let big = vec![b'q'; 3 << 20];
    let bytes = gzip(&tar_bytes(&[(b"big", &big), (b"small", b"s")]), None);
    let limits = ArchiveLimits {
        max_archive_bytes: 2 << 20,
        max_inflation_ratio: 0,
        ..ArchiveLimits::default()
    };
    let mut c = open(dir.path(), "s.tgz", &bytes, ArchiveKind::TarGz, &limits);
    c.next_member().unwrap().unwrap(); // peeks 512 bytes of "big", reads nothing else
    let err = c.next_member().unwrap_err();
    assert_eq!(
        err.skip_reason(),
        SkipReason::ArchiveBytes(ByteScope::Archive)
    );
    assert_eq!(c.archive_bytes(), 2 << 20, "stopped exactly at the budget");
    // The same tar uncompressed on disk skips by seeking, for free.
    let tar = tar_bytes(&[(b"big", &big), (b"small", b"s")]);
    let mut c = open(dir.path(), "s.tar", &tar, ArchiveKind::Tar, &limits);
    c.next_member().unwrap().unwrap();
    assert_eq!(c.next_member().unwrap().unwrap().name, b"small");
}

#[test]
fn root_budget_is_shared_by_nested_cursors() {
    let dir = tempfile::tempdir().unwrap();
    let inner = tar_bytes(&[(b"a", &[1u8; 40_000][..]), (b"b", &[2u8; 40_000][..])]);
    let outer = tar_bytes(&[(b"in.tar", &inner)]);
    let limits = ArchiveLimits {
        max_root_bytes: 100_000,
        ..ArchiveLimits::default()
    };
    let root = RootBudget::new(limits.max_root_bytes);
    let f = write(dir.path(), "o.tar", &outer);
    let mut c = ArchiveCursor::open(f, ArchiveKind::Tar, 1, &limits, root.clone()).unwrap();
    let mut out = Outcome::default();
    drain(&mut c, Path::new("o.tar"), ArchivePolicy::Partial, &mut out);
    // Inner member bytes are charged at both levels: a (40,000) costs 2 x 40,000
    // plus the tar headers read through the parent; b cannot fit.
    assert_eq!(out.paths(), ["o.tar!in.tar!a"]);
    assert_eq!(out.reasons(), ["archive_root_bytes_limit"]);
    assert!(root.used() >= root.limit());
}

#[test]
fn member_info_reports_size_and_nested_kind() {
    let dir = tempfile::tempdir().unwrap();
    let z = zip_bytes(&[ZipEntry::new(b"k", b"v")]);
    let g = gzip(b"gz body", None);
    let bytes = tar_bytes(&[(b"z.dat", &z), (b"g.dat", &g), (b"t.txt", b"plain")]);
    let mut c = open_default(dir.path(), "m.tar", &bytes, ArchiveKind::Tar);
    let mut infos: Vec<MemberInfo> = Vec::new();
    while let Some(i) = c.next_member().unwrap() {
        infos.push(i);
    }
    let kinds: Vec<_> = infos.iter().map(|i| i.is_nested_archive).collect();
    assert_eq!(
        kinds,
        [Some(ArchiveKind::Zip), Some(ArchiveKind::Gzip), None]
    );
    assert_eq!(infos[2].size_hint, Some(5));
}
