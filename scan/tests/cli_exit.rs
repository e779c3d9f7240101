//! Exit codes: the mapping from a scan's result, and the binary's behaviour on
//! usage errors and on a closed stdout.
#![cfg(not(loom))]

use std::io::Write;
use std::process::{Command, Stdio};

use scan::report::{error_message, exit_code, Outcome, ScanError, Summary};

fn outcome(reported: u64) -> Result<Outcome, ScanError> {
    Ok(Outcome {
        reported,
        summary: Summary::default(),
        fail_on_skip: 0,
        findings_exit: None,
    })
}

#[test]
fn fail_on_skip_turns_any_outcome_into_exit_2_with_a_message() {
    for reported in [0, 3] {
        let r = Ok(Outcome {
            reported,
            summary: Summary::default(),
            fail_on_skip: 2,
            findings_exit: None,
        });
        assert_eq!(exit_code(&r), 2);
        let msg = error_message(&r).expect("a message");
        assert!(msg.contains("--fail-on-skip"), "{msg}");
    }
}

#[test]
fn exit_code_is_0_clean_1_findings_2_error() {
    assert_eq!(exit_code(&outcome(0)), 0);
    assert_eq!(exit_code(&outcome(1)), 1);
    assert_eq!(exit_code(&outcome(500)), 1);
    for e in [
        ScanError::Rules("bad regex".into()),
        ScanError::FailRun("encrypted zip".into()),
        ScanError::Other("x".into()),
        ScanError::Root {
            path: "nope".into(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        },
    ] {
        let r = Err(e);
        assert_eq!(exit_code(&r), 2);
        assert!(error_message(&r).is_some_and(|m| m.starts_with("scan: error: ")));
    }
}

#[test]
fn broken_pipe_is_success_without_a_message() {
    let r = Err(ScanError::BrokenPipe);
    assert_eq!(exit_code(&r), 0);
    assert_eq!(error_message(&r), None);
}

#[test]
fn binary_rejects_bad_arguments_with_exit_code_2() {
    let out = Command::new(env!("CARGO_BIN_EXE_scan"))
        .args(["--format", "xml", "."])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--format"));
}

#[test]
fn binary_help_goes_to_stdout_with_exit_code_0() {
    let out = Command::new(env!("CARGO_BIN_EXE_scan"))
        .arg("--help")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("--baseline"));
    assert!(out.stderr.is_empty());
}

/// The shell waits on stdin until the test has closed the read end of the
/// child's stdout, then execs `scan --help`, whose write must hit EPIPE.
#[cfg(unix)]
#[test]
fn help_into_a_closed_pipe_exits_0_without_panic_or_message() {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(r#"read _ && exec "$0" --help"#)
        .arg(env!("CARGO_BIN_EXE_scan"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // the only read end: now writes get EPIPE
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"go\n").unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "stderr: {:?}", out.stderr);
    assert!(
        out.stderr.is_empty(),
        "unexpected stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
