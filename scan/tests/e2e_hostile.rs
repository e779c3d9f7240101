//! Hostile input, end to end through the binary: every run ends (a hang
//! detector watches each one), exits with the code the findings call for,
//! reports the secrets planted among the hostile entries, counts every
//! entry it does not scan under a reason, and keeps the accounting
//! invariant.
#![cfg(not(loom))]

mod archive_common;
mod e2e_common;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;
use std::path::Path;

use archive_common::{gzip, tar_bytes, write_zip_bomb, zip_bytes, ZipEntry};
use e2e_common::*;

/// Runs `scan --format json --metrics ARGS` in `dir`, checks the exit code
/// and the accounting, and returns the run.
fn scan_json(dir: &Path, args: &[&OsStr], code: i32) -> Run {
    let mut all: Vec<&OsStr> = vec!["--format".as_ref(), "json".as_ref(), "--metrics".as_ref()];
    all.extend_from_slice(args);
    let run = scan_in(dir, all);
    assert_eq!(run.code, Some(code), "stderr: {}", run.stderr);
    assert_accounting(&run.summary());
    run
}

fn secrets(run: &Run) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = run
        .findings()
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap().to_string(),
                f["secret"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    v.sort();
    v
}

fn mkfifo(path: &Path) {
    let st = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo (coreutils) is needed");
    assert!(st.success());
}

#[test]
fn unreadable_files_are_skipped_and_counted() {
    let dir = tempdir();
    let token = github_token(10);
    put(dir.path(), "ok.env", format!("T={token}\n").as_bytes());
    let locked = put(
        dir.path(),
        "locked.env",
        format!("T={}\n", github_token(11)).as_bytes(),
    );
    std::fs::set_permissions(&locked, std::os::unix::fs::PermissionsExt::from_mode(0o000)).unwrap();
    // /proc/self/mem is a regular file whose read at offset 0 fails with EIO
    // (nothing is mapped there), even for root: an unreadable file that
    // every user can produce.
    let run = scan_json(dir.path(), &[".".as_ref(), "/proc/self/mem".as_ref()], 1);
    let s = run.summary();
    let unreadable = skipped(&s).get("unreadable").copied().unwrap_or(0);
    let want = if is_root() { 1 } else { 2 };
    assert_eq!(unreadable, want, "{s}");
    assert!(secrets(&run).contains(&("ok.env".into(), token)));
}

/// Files are created and deleted while the scan walks and reads them: each
/// one is scanned or counted (vanished, too large, ...), the stable files
/// are all scanned, and nothing is lost.
#[test]
fn files_vanishing_during_the_scan_are_counted_not_lost() {
    let dir = tempdir();
    let stable = 300;
    for i in 0..stable {
        put(
            dir.path(),
            &format!("stable/s{i:04}.env"),
            format!("T={}\n", github_token(i)).as_bytes(),
        );
    }
    let churn = dir.path().join("churn");
    std::fs::create_dir_all(&churn).unwrap();
    let stop = std::sync::Arc::new(magpie_core::sync::atomic::AtomicBool::new(false));
    let stop2 = std::sync::Arc::clone(&stop);
    let churn2 = churn.clone();
    let churner = std::thread::spawn(move || {
        let mut n = 0u64;
        while !stop2.load(magpie_core::sync::atomic::Ordering::Relaxed) {
            let p = churn2.join(format!("c{}", n % 500));
            if n % 2 == 0 {
                let _ = std::fs::write(&p, vec![b'x'; 100_000]);
            } else {
                let _ = std::fs::remove_file(&p);
            }
            n += 1;
        }
    });
    for _ in 0..3 {
        let run = scan_json(dir.path(), &[".".as_ref()], 1);
        let found = secrets(&run)
            .iter()
            .filter(|(p, _)| p.starts_with("stable/"))
            .count();
        assert_eq!(found, stable as usize);
    }
    stop.store(true, magpie_core::sync::atomic::Ordering::Relaxed);
    churner.join().unwrap();
}

#[test]
fn broken_symlinks_and_loops_end_and_are_counted() {
    let dir = tempdir();
    let d = dir.path();
    let token = github_token(20);
    put(d, "real/secret.env", format!("T={token}\n").as_bytes());
    symlink("does-not-exist", d.join("broken")).unwrap();
    symlink("self", d.join("self")).unwrap();
    symlink("loop-b", d.join("loop-a")).unwrap();
    symlink("loop-a", d.join("loop-b")).unwrap();
    symlink("..", d.join("real/up")).unwrap(); // a directory link to an ancestor
    symlink("real/secret.env", d.join("link-to-file")).unwrap();

    let run = scan_json(d, &[".".as_ref()], 1);
    let s = skipped(&run.summary());
    assert_eq!(s.get("broken_symlink"), Some(&1), "{s:?}");
    assert_eq!(s.get("symlink_loop"), Some(&3), "{s:?}");
    assert_eq!(s.get("symlink_not_followed"), Some(&2), "{s:?}");
    assert_eq!(
        secrets(&run),
        vec![("real/secret.env".into(), token.clone())]
    );

    let run = scan_json(d, &["--follow-symlinks".as_ref(), ".".as_ref()], 1);
    let found = secrets(&run);
    assert!(
        found.contains(&("link-to-file".into(), token.clone())),
        "{found:?}"
    );
    assert!(
        found.contains(&("real/secret.env".into(), token)),
        "{found:?}"
    );
    let s = skipped(&run.summary());
    assert!(s.get("symlink_loop").copied().unwrap_or(0) >= 1, "{s:?}");
    assert_eq!(s.get("broken_symlink"), Some(&1), "{s:?}");
}

#[test]
fn fifos_and_devices_are_never_opened() {
    let dir = tempdir();
    let d = dir.path();
    let token = github_token(30);
    put(d, "after.env", format!("T={token}\n").as_bytes());
    mkfifo(&d.join("pipe"));
    symlink("/dev/zero", d.join("zero")).unwrap();
    // Without --follow-symlinks the link is not followed; with it, its target
    // is a character device. Either way nothing blocks or reads forever (the
    // hang detector would fail the test), and the FIFO is refused by type.
    let run = scan_json(d, &[".".as_ref()], 1);
    let s = skipped(&run.summary());
    assert_eq!(s.get("special_file"), Some(&1), "{s:?}");
    assert_eq!(s.get("symlink_not_followed"), Some(&1), "{s:?}");
    let run = scan_json(d, &["--follow-symlinks".as_ref(), ".".as_ref()], 1);
    let s = skipped(&run.summary());
    assert_eq!(s.get("special_file"), Some(&2), "{s:?}");
    assert_eq!(secrets(&run), vec![("after.env".into(), token)]);
    // Named on the command line, a device is refused too (a FIFO named
    // there is read, as `cat` would: e2e_skips.rs).
    let run = scan_json(d, &["/dev/zero".as_ref()], 0);
    assert_eq!(skipped(&run.summary()).get("special_file"), Some(&1));
}

#[test]
fn a_2gib_zip_bomb_stops_at_a_limit_in_bounded_memory() {
    let dir = tempdir();
    let d = dir.path();
    let token = github_token(40);
    put(d, "next.env", format!("T={token}\n").as_bytes());
    write_zip_bomb(&d.join("bomb.zip"), b"zeros.bin", 2 << 30, 2 << 30);
    // Declares 2 GiB: refused from its header by the member size limit.
    let run = scan_json(d, &[".".as_ref()], 1);
    let s = run.summary();
    assert_eq!(
        skipped(&s).get("archive_entry_bytes_limit"),
        Some(&1),
        "{s}"
    );
    // Declares 200 MiB, under the limit, so it is inflated: the inflation
    // ratio stops it after a few MiB.
    write_zip_bomb(&d.join("bomb.zip"), b"zeros.bin", 2 << 30, 200 << 20);
    let (run, child_rss) = scan_in_with_peak_rss(d, ["--format", "json", "--metrics", "."]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(child_rss < 256 << 20, "peak RSS {child_rss} bytes");
    let s = run.summary();
    assert_accounting(&s);
    assert_eq!(skipped(&s).get("archive_inflation_ratio"), Some(&1), "{s}");
    assert!(
        s["bytes_scanned"].as_u64().unwrap() < 64 << 20,
        "the bomb was not cut short: {s}"
    );
    assert!(metric(&s, "peak_rss_bytes") < 256 << 20, "{s}");
    assert_eq!(secrets(&run), vec![("next.env".into(), token.clone())]);
    // Declares 1000 bytes and inflates past them: corrupt at byte 1000.
    write_zip_bomb(&d.join("bomb.zip"), b"zeros.bin", 2 << 30, 1000);
    let run = scan_json(d, &[".".as_ref()], 1);
    let s = run.summary();
    assert_eq!(skipped(&s).get("archive_corrupt"), Some(&1), "{s}");
    assert_eq!(secrets(&run), vec![("next.env".into(), token)]);
}

/// a.tar holds b.tar holds c.tar holds d.tar, each with a secret: with the
/// default depth of 3, the secrets of a, b and c are found and d is skipped
/// as too deep; with `--archive-depth 1` only a's is found.
#[test]
fn archives_nested_past_the_depth_limit_are_skipped() {
    let t = |i: u32| format!("T={}\n", github_token(50 + i)).into_bytes();
    let d4 = tar_bytes(&[(b"d.env", &t(4))]);
    let c3 = tar_bytes(&[(b"c.env", &t(3)), (b"d.tar", &d4)]);
    let b2 = tar_bytes(&[(b"b.env", &t(2)), (b"c.tar", &c3)]);
    let a1 = gzip(&tar_bytes(&[(b"a.env", &t(1)), (b"b.tar", &b2)]), None);
    let dir = tempdir();
    put(dir.path(), "a.tar.gz", &a1);
    let run = scan_json(dir.path(), &[".".as_ref()], 1);
    let paths: Vec<String> = secrets(&run).into_iter().map(|(p, _)| p).collect();
    assert_eq!(
        paths,
        vec![
            "a.tar.gz!a.env",
            "a.tar.gz!b.tar!b.env",
            "a.tar.gz!b.tar!c.tar!c.env"
        ]
    );
    let s = run.summary();
    assert_eq!(skipped(&s).get("archive_depth_limit"), Some(&1), "{s}");
    assert_eq!(s["archives"], 3);
    let run = scan_json(
        dir.path(),
        &["--archive-depth".as_ref(), "1".as_ref(), ".".as_ref()],
        1,
    );
    let paths: Vec<String> = secrets(&run).into_iter().map(|(p, _)| p).collect();
    assert_eq!(paths, vec!["a.tar.gz!a.env"]);
    // Without archives, the gzip bytes are scanned as they are: nothing.
    scan_json(dir.path(), &["--no-archives".as_ref(), ".".as_ref()], 0);
}

#[test]
fn truncated_and_garbage_archives_are_counted_and_the_rest_is_scanned() {
    let dir = tempdir();
    let d = dir.path();
    let first = github_token(60);
    let mut big = vec![b'#'; 200_000];
    big.extend_from_slice(b"\n");
    let good = tar_bytes(&[
        (b"first.env", format!("T={first}\n").as_bytes()),
        (b"big.txt", &big),
        (b"last.env", format!("T={}\n", github_token(61)).as_bytes()),
    ]);
    // A tar cut inside its second member: the first is read, the rest lost.
    put(d, "cut.tar", &good[..good.len() / 2]);
    put(
        d,
        "garbage.gz",
        b"\x1f\x8b\x08\x00garbage that is not deflate at all",
    );
    let mut not_zip = b"PK\x03\x04".to_vec();
    not_zip.extend(std::iter::repeat_n(0xee, 1000));
    put(d, "garbage.zip", &not_zip);
    let member = zip_bytes(&[ZipEntry::new(
        b"in.env",
        format!("T={}\n", github_token(62)).as_bytes(),
    )]);
    put(d, "cut.zip", &member[..member.len() - 10]);
    let token = github_token(63);
    put(d, "plain.env", format!("T={token}\n").as_bytes());

    let run = scan_json(d, &[".".as_ref()], 1);
    let found = secrets(&run);
    assert!(
        found.contains(&("cut.tar!first.env".into(), first)),
        "{found:?}"
    );
    assert!(found.contains(&("plain.env".into(), token)), "{found:?}");
    assert_eq!(found.len(), 2, "{found:?}");
    let s = skipped(&run.summary());
    assert!(s.get("archive_corrupt").copied().unwrap_or(0) >= 3, "{s:?}");

    let run = scan_json(
        d,
        &["--archive-policy".as_ref(), "skip".as_ref(), ".".as_ref()],
        1,
    );
    assert!(skipped(&run.summary()).contains_key("archive_corrupt"));
    let fail = scan_in(d, ["--archive-policy", "fail-run", "."]);
    assert_eq!(fail.code, Some(2), "{}", fail.stderr);
}

#[test]
fn non_utf8_names_are_lossy_in_text_and_exact_in_json() {
    let dir = tempdir();
    let name = OsStr::from_bytes(b"caf\xe9.env");
    let token = github_token(70);
    std::fs::write(dir.path().join(name), format!("T={token}\n")).unwrap();
    let text = scan_in(dir.path(), ["--color", "never", "."]);
    assert_eq!(text.code, Some(1), "{}", text.stderr);
    assert!(
        text.stdout_text().contains("caf\u{fffd}.env:1:3"),
        "{}",
        text.stdout_text()
    );
    let jsonl = scan_in(dir.path(), ["--format", "jsonl", "."]);
    assert_eq!(jsonl.code, Some(1));
    // serde_json refuses lone surrogates, so look at the raw text.
    assert!(
        jsonl.stdout_text().contains(r#""path":"caf\udce9.env""#),
        "{}",
        jsonl.stdout_text()
    );
}

#[test]
fn a_sparse_20gib_file_is_skipped_as_too_large_without_reading_it() {
    let dir = tempdir();
    let f = std::fs::File::create(dir.path().join("disk.img")).unwrap();
    f.set_len(20 << 30).unwrap();
    drop(f);
    let run = scan_json(dir.path(), &[".".as_ref()], 0);
    let s = run.summary();
    assert_eq!(skipped(&s).get("too_large"), Some(&1), "{s}");
    assert_eq!(s["bytes_scanned"], 0);
    assert_eq!(metric(&s, "bytes_fetched"), 0);
}

#[test]
fn a_200mb_single_line_with_a_secret_at_its_end_is_found_in_bounded_memory() {
    let dir = tempdir();
    let token = github_token(80);
    let path = dir.path().join("bundle.min.js");
    {
        use std::io::Write;
        let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        let block = vec![b'x'; 1 << 20];
        for _ in 0..200 {
            f.write_all(&block).unwrap();
        }
        write!(f, " tok={token}").unwrap();
    }
    let (run, child_rss) =
        scan_in_with_peak_rss(dir.path(), ["--format", "json", "--metrics", "."]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert_accounting(&run.summary());
    assert_eq!(run.findings().len(), 1);
    let f = &run.findings()[0];
    assert_eq!(f["secret"], token.as_str());
    assert_eq!(f["line"], 1);
    assert_eq!(f["offset"], (200u64 << 20) + 5);
    assert_eq!(f["column"], (200u64 << 20) + 6);
    let s = run.summary();
    assert_eq!(s["bytes_scanned"], (200u64 << 20) + 5 + token.len() as u64);
    // Measured from outside (the kernel's figure for the exited child) and
    // from inside (VmHWM when the summary is built): both under 256 MiB.
    assert!(child_rss < 256 << 20, "peak RSS {child_rss} bytes");
    let rss = metric(&s, "peak_rss_bytes");
    assert!(rss < 256 << 20, "peak RSS {rss} bytes (self-reported)");
}

#[test]
fn two_hundred_nested_directories_are_walked_to_the_bottom() {
    let dir = tempdir();
    let rel: String = (0..200).map(|i| format!("d{i}/")).collect();
    let token = github_token(90);
    put(
        dir.path(),
        &format!("{rel}deep.env"),
        format!("T={token}\n").as_bytes(),
    );
    let run = scan_json(dir.path(), &[".".as_ref()], 1);
    assert_eq!(secrets(&run), vec![(format!("{rel}deep.env"), token)]);
}

#[test]
fn twenty_thousand_files_in_one_directory_are_all_scanned() {
    let dir = tempdir();
    let flat = dir.path().join("flat");
    std::fs::create_dir(&flat).unwrap();
    for i in 0..20_000u32 {
        let body = if i % 1000 == 7 {
            format!("T={}\n", github_token(i))
        } else {
            format!("line {i}\n")
        };
        std::fs::write(flat.join(format!("f{i:05}.txt")), body).unwrap();
    }
    let run = scan_json(dir.path(), &["flat".as_ref()], 1);
    let s = run.summary();
    assert_eq!(s["files_scanned"], 20_000);
    assert_eq!(run.findings().len(), 20);
}
