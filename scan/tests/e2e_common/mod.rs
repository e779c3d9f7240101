//! Helpers for the end-to-end tests: run the `scan` binary as a user would,
//! with a hang detector, and check a run's accounting.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long a run may take before the test calls it hung. A hang detector
/// for runs that would otherwise never end (a FIFO opened, a loop followed),
/// not a speed check: every run here takes seconds.
pub const HANG: Duration = Duration::from_secs(900);

/// What one run of the binary produced.
#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl Run {
    /// The `json` report, parsed.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "not a json report ({e}): {}\nstderr: {}",
                String::from_utf8_lossy(&self.stdout),
                self.stderr
            )
        })
    }

    /// The findings of a `json` report.
    pub fn findings(&self) -> Vec<Value> {
        self.json()["findings"].as_array().unwrap().clone()
    }

    /// The summary of a `json` report.
    pub fn summary(&self) -> Value {
        self.json()["summary"].clone()
    }

    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
}

/// The binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_scan")
}

/// Runs `scan ARGS` in `cwd` (no progress bar, two workers unless `args`
/// says otherwise), failing the test if it does not end within [`HANG`].
pub fn scan_in<I, S>(cwd: &Path, args: I) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut cmd = Command::new(bin());
    cmd.current_dir(cwd)
        .arg("--no-progress")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    run_guarded(cmd)
}

/// Like [`scan_in`], under `/usr/bin/time`: also returns the scan process's
/// peak resident set in bytes, as the kernel reports it for the exited
/// child (`ru_maxrss`), not as the process reports itself.
pub fn scan_in_with_peak_rss<I, S>(cwd: &Path, args: I) -> (Run, u64)
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let out = tempfile::NamedTempFile::new().unwrap();
    let mut cmd = Command::new("/usr/bin/time");
    cmd.current_dir(cwd)
        .arg("-o")
        .arg(out.path())
        .args(["-f", "%M", bin(), "--no-progress"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let run = run_guarded(cmd);
    let text = std::fs::read_to_string(out.path()).unwrap();
    // The last line is the KiB figure; a line before it may say the command
    // exited non-zero.
    let kib: u64 = text
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("/usr/bin/time wrote {text:?} (GNU time is needed)"));
    (run, kib * 1024)
}

/// Runs `cmd` to its end with [`HANG`] as a hang detector.
pub fn run_guarded(mut cmd: Command) -> Run {
    let mut child = cmd.spawn().expect("spawn scan");
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut v = Vec::new();
        out.read_to_end(&mut v).unwrap();
        v
    });
    let t_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        err.read_to_end(&mut v).unwrap();
        v
    });
    let deadline = Instant::now() + HANG;
    let status: ExitStatus = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("scan hung (no exit within {HANG:?})");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Run {
        code: status.code(),
        stdout: t_out.join().unwrap(),
        stderr: String::from_utf8_lossy(&t_err.join().unwrap()).into_owned(),
    }
}

/// Skipped objects by label, from a summary.
pub fn skipped(summary: &Value) -> BTreeMap<String, u64> {
    summary["skipped"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
        .collect()
}

pub fn metric(summary: &Value, key: &str) -> u64 {
    summary["metrics"][key]
        .as_u64()
        .unwrap_or_else(|| panic!("metric {key} missing (run with --metrics): {summary}"))
}

/// The accounting invariant, from a `json` summary written with `--metrics`:
/// every discovered object was scanned, opened as an archive or skipped, no
/// object was dropped without an end, and every frontier place came back.
pub fn assert_accounting(summary: &Value) {
    let discovered = metric(summary, "objects_discovered");
    let scanned = summary["files_scanned"].as_u64().unwrap();
    let archives = summary["archives"].as_u64().unwrap();
    let skipped: u64 = skipped(summary).values().sum();
    assert_eq!(
        discovered,
        scanned + archives + skipped,
        "discovered != scanned + archives + skipped: {summary}"
    );
    assert_eq!(metric(summary, "objects_abandoned"), 0, "{summary}");
    assert_eq!(
        metric(summary, "objects_completed"),
        metric(summary, "objects_admitted"),
        "an object with a frontier place never ended: {summary}"
    );
    assert_eq!(
        metric(summary, "frontier_in_flight"),
        0,
        "a frontier place was not released: {summary}"
    );
}

/// A fresh temporary directory.
pub fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

/// Writes `data` to `dir/rel`, creating parents.
pub fn put(dir: &Path, rel: &str, data: &[u8]) -> PathBuf {
    let p = dir.join(rel);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(&p, data).unwrap();
    p
}

/// A GitHub token that the built-in rules report (not a placeholder).
pub fn github_token(n: u32) -> String {
    // 36 characters after the prefix, varied so entropy is high.
    let alphabet = b"A7kQ2mZp9XrT4wLc8VbN3yHd6FsJ1gKe5UoR";
    let mut s = String::from("ghp_");
    for i in 0..36u32 {
        let k = (i.wrapping_mul(7).wrapping_add(n.wrapping_mul(13)) as usize) % alphabet.len();
        s.push(alphabet[k] as char);
    }
    s
}

/// Whether this process reads everything regardless of permissions.
pub fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}
