//! bzip2, xz and zstd: alone, under tar, and nested in other formats, the
//! bytes inside are scanned, not the compressed ones; a bomb stops at the
//! inflation ratio; an archive past the depth limit is named.
#![cfg(not(loom))]

mod e2e_common;

use std::io::Write;

use e2e_common::*;

fn bz2(data: &[u8]) -> Vec<u8> {
    let mut e = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn xz(data: &[u8]) -> Vec<u8> {
    let mut w =
        lzma_rust2::XzWriter::new(Vec::new(), lzma_rust2::XzOptions::with_preset(1)).unwrap();
    w.write_all(data).unwrap();
    w.finish().unwrap()
}

fn zst(data: &[u8]) -> Vec<u8> {
    ruzstd::encoding::compress_to_vec(data, ruzstd::encoding::CompressionLevel::Fastest)
}

fn tar_of(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (name, data) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append_data(&mut h, name, *data).unwrap();
    }
    b.into_inner().unwrap()
}

fn zip_of(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut z = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for (name, data) in files {
        z.start_file(*name, opts).unwrap();
        z.write_all(data).unwrap();
    }
    z.finish().unwrap().into_inner()
}

fn found(dir: &std::path::Path, args: &[&str]) -> (Run, Vec<(String, String)>) {
    let mut all = vec!["--format", "json", "--metrics"];
    all.extend_from_slice(args);
    all.push(".");
    let run = scan_in(dir, all);
    let mut f: Vec<(String, String)> = run
        .findings()
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap().to_owned(),
                f["secret"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    f.sort();
    (run, f)
}

#[test]
fn bz2_xz_and_zst_files_alone_and_under_tar_are_decompressed_and_scanned() {
    let dir = tempdir();
    let d = dir.path();
    let t: Vec<String> = (20..26).map(github_token).collect();
    let line = |i: usize| format!("TOKEN={}\n", t[i]);
    put(d, "a.env.bz2", &bz2(line(0).as_bytes()));
    put(d, "b.env.xz", &xz(line(1).as_bytes()));
    put(d, "c.env.zst", &zst(line(2).as_bytes()));
    put(
        d,
        "d.tar.bz2",
        &bz2(&tar_of(&[("conf/d.env", line(3).as_bytes())])),
    );
    put(d, "e.txz", &xz(&tar_of(&[("e.env", line(4).as_bytes())])));
    put(
        d,
        "f.tar.zst",
        &zst(&tar_of(&[("x/f.env", line(5).as_bytes())])),
    );
    let (run, f) = found(d, &[]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert_eq!(
        f,
        vec![
            ("a.env.bz2!a.env".to_owned(), t[0].clone()),
            ("b.env.xz!b.env".to_owned(), t[1].clone()),
            ("c.env.zst!c.env".to_owned(), t[2].clone()),
            ("d.tar.bz2!conf/d.env".to_owned(), t[3].clone()),
            ("e.txz!e.env".to_owned(), t[4].clone()),
            ("f.tar.zst!x/f.env".to_owned(), t[5].clone()),
        ]
    );
    assert_accounting(&run.summary());
}

#[test]
fn compressed_files_nested_in_zip_and_tar_are_read() {
    let dir = tempdir();
    let d = dir.path();
    let t1 = github_token(31);
    let t2 = github_token(32);
    let inner_xz = xz(&tar_of(&[("k.env", format!("K={t1}\n").as_bytes())]));
    put(d, "outer.zip", &zip_of(&[("lib/inner.tar.xz", &inner_xz)]));
    let inner_zst = zst(format!("T={t2}\n").as_bytes());
    put(d, "outer.tar", &tar_of(&[("notes.txt.zst", &inner_zst)]));
    let (run, f) = found(d, &[]);
    assert_eq!(
        f,
        vec![
            ("outer.tar!notes.txt.zst!notes.txt".to_owned(), t2),
            ("outer.zip!lib/inner.tar.xz!k.env".to_owned(), t1),
        ],
        "{}",
        run.stderr
    );
    assert_accounting(&run.summary());
}

#[test]
fn a_compressed_archive_past_the_depth_limit_is_named_as_skipped() {
    let dir = tempdir();
    let d = dir.path();
    let t = github_token(33);
    let deep = bz2(&tar_of(&[("deep.env", format!("K={t}\n").as_bytes())]));
    put(d, "top.zip", &zip_of(&[("mid.tar.bz2", &deep)]));
    let (run, f) = found(d, &["--archive-depth", "1"]);
    assert!(f.is_empty(), "{f:?}");
    let skipped = run.json()["skipped"].as_array().unwrap().clone();
    assert!(
        skipped
            .iter()
            .any(|s| s["path"] == "top.zip!mid.tar.bz2" && s["reason"] == "archive_depth_limit"),
        "{skipped:?}"
    );
    assert_accounting(&run.summary());
}

#[test]
fn a_bzip2_or_zstd_bomb_stops_at_the_inflation_ratio() {
    let dir = tempdir();
    let d = dir.path();
    let zeros = vec![0u8; 8 << 20];
    put(d, "bomb.bin.bz2", &bz2(&zeros));
    put(d, "bomb.bin.zst", &zst(&zeros));
    let t = github_token(34);
    put(d, "after.env", format!("K={t}\n").as_bytes());
    let (run, f) = found(d, &[]);
    assert_eq!(f, vec![("after.env".to_owned(), t)], "{}", run.stderr);
    let s = skipped(&run.summary());
    assert_eq!(s.get("archive_inflation_ratio"), Some(&2), "{s:?}");
    assert_accounting(&run.summary());
}

#[test]
fn a_truncated_xz_file_is_counted_corrupt_and_the_rest_is_scanned() {
    let dir = tempdir();
    let d = dir.path();
    let whole = xz(&vec![b'a'; 100_000]);
    put(d, "cut.xz", &whole[..whole.len() / 2]);
    let t = github_token(35);
    put(d, "ok.env", format!("K={t}\n").as_bytes());
    let (run, f) = found(d, &[]);
    assert_eq!(f, vec![("ok.env".to_owned(), t)], "{}", run.stderr);
    let s = skipped(&run.summary());
    assert_eq!(s.get("archive_corrupt"), Some(&1), "{s:?}");
    assert_accounting(&run.summary());
}

/// A skippable frame (magic 0x184D2A50, then a little-endian length, then
/// that many bytes), as `pzstd` and seekable-zstd writers put between frames.
fn skippable(payload: &[u8]) -> Vec<u8> {
    let mut v = 0x184D_2A50u32.to_le_bytes().to_vec();
    v.extend_from_slice(&u32::try_from(payload.len()).unwrap().to_le_bytes());
    v.extend_from_slice(payload);
    v
}

#[test]
fn every_frame_of_a_multi_frame_zstd_file_is_read() {
    let dir = tempdir();
    let d = dir.path();
    let t: Vec<String> = (40..44).map(github_token).collect();
    // Three frames, a skippable frame between the second and third: the
    // file's content is the three frames' contents in order.
    let mut multi = zst(format!("A={}\n", t[0]).as_bytes());
    multi.extend(zst(format!("B={}\n", t[1]).as_bytes()));
    multi.extend(skippable(b"not content, never scanned"));
    multi.extend(zst(format!("C={}\n", t[2]).as_bytes()));
    put(d, "multi.env.zst", &multi);
    // A tar cut into two frames in the middle of a member's data.
    let tar = tar_of(&[("deep/k.env", format!("K={}\n", t[3]).as_bytes())]);
    let (a, b) = tar.split_at(600);
    let mut split = zst(a);
    split.extend(zst(b));
    put(d, "split.tar.zst", &split);
    let (run, f) = found(d, &[]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    let mut want = vec![
        ("multi.env.zst!multi.env".to_owned(), t[0].clone()),
        ("multi.env.zst!multi.env".to_owned(), t[1].clone()),
        ("multi.env.zst!multi.env".to_owned(), t[2].clone()),
        ("split.tar.zst!deep/k.env".to_owned(), t[3].clone()),
    ];
    want.sort();
    assert_eq!(f, want);
    assert_accounting(&run.summary());
}

#[test]
fn a_zstd_file_cut_inside_a_skippable_frame_is_counted_corrupt() {
    let dir = tempdir();
    let d = dir.path();
    let t = github_token(45);
    let mut cut = zst(format!("A={t}\n").as_bytes());
    let skip = skippable(&[0u8; 64]);
    cut.extend_from_slice(&skip[..20]);
    put(d, "cut.env.zst", &cut);
    let (run, f) = found(d, &[]);
    // The first frame's secret is read before the cut is found.
    assert_eq!(
        f,
        vec![("cut.env.zst!cut.env".to_owned(), t)],
        "{}",
        run.stderr
    );
    let s = skipped(&run.summary());
    assert_eq!(s.get("archive_corrupt"), Some(&1), "{s:?}");
    assert_accounting(&run.summary());
}

/// Runs `cat FILE | scan --format json [ARGS] -`: the archive arrives on a
/// pipe, which cannot seek.
fn scan_piped(dir: &std::path::Path, file: &str, args: &[&str]) -> Run {
    let mut cmd = std::process::Command::new("sh");
    cmd.current_dir(dir)
        .arg("-c")
        .arg(r#"f=$1; b=$2; shift 2; cat "$f" | "$b" --no-progress --format json --metrics "$@" -"#)
        .args(["sh", file, bin()])
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    run_guarded(cmd)
}

#[test]
fn an_archive_on_standard_input_is_detected_and_read() {
    let dir = tempdir();
    let d = dir.path();
    let t: Vec<String> = (50..53).map(github_token).collect();
    put(
        d,
        "in.tar.zst",
        &zst(&tar_of(&[(
            "a/one.env",
            format!("K={}\n", t[0]).as_bytes(),
        )])),
    );
    // A zip needs random access: the pipe is spooled to a temp file first.
    put(
        d,
        "in.zip",
        &zip_of(&[("two.env", format!("K={}\n", t[1]).as_bytes())]),
    );
    put(d, "in.env.bz2", &bz2(format!("K={}\n", t[2]).as_bytes()));
    for (file, member, token) in [
        ("in.tar.zst", "a/one.env", &t[0]),
        ("in.zip", "two.env", &t[1]),
        ("in.env.bz2", "<stdin>", &t[2]),
    ] {
        let run = scan_piped(d, file, &[]);
        assert_eq!(run.code, Some(1), "{file}: {}", run.stderr);
        let f = run.findings();
        assert_eq!(f.len(), 1, "{file}: {f:?}");
        assert_eq!(f[0]["secret"], token.as_str(), "{file}");
        let path = f[0]["path"].as_str().unwrap();
        assert!(
            path.starts_with("<stdin>!") && path.ends_with(member),
            "{file}: {path}"
        );
        assert_accounting(&run.summary());
    }
}

#[test]
fn an_archive_on_standard_input_past_the_size_limit_is_named_too_large() {
    let dir = tempdir();
    let d = dir.path();
    let big: Vec<u8> = (0..200_000u32).flat_map(|i| i.to_le_bytes()).collect();
    put(d, "big.zip", &zip_of(&[("noise.bin", &big)]));
    let run = scan_piped(d, "big.zip", &["--max-file-size", "64K"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let v = run.json();
    assert_eq!(v["skipped"][0]["reason"], "too_large", "{v}");
    assert!(
        v["skipped"][0]["message"]
            .as_str()
            .unwrap()
            .contains("zip archive on a stream"),
        "{v}"
    );
}

#[test]
fn a_gzip_file_that_fails_in_its_first_bytes_keeps_what_it_decoded() {
    let dir = tempdir();
    let d = dir.path();
    let t = github_token(46);
    // One good gzip member (a few dozen bytes of output, less than the
    // 512 the reader takes to tell gzip from tar.gz), then a second member
    // whose header is garbage: the decoder fails inside that first read.
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(format!("A={t}\n").as_bytes()).unwrap();
    let mut bytes = enc.finish().unwrap();
    bytes.extend_from_slice(&[0x1f, 0x8b, 0x08, 0xff, 0xde, 0xad, 0xbe, 0xef]);
    put(d, "early.env.gz", &bytes);
    let (run, f) = found(d, &[]);
    assert_eq!(
        f,
        vec![("early.env.gz!early.env".to_owned(), t)],
        "{}",
        run.stderr
    );
    let s = skipped(&run.summary());
    assert_eq!(s.get("archive_corrupt"), Some(&1), "{s:?}");
    assert_accounting(&run.summary());
}
