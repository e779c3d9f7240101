//! `scan::cli::parse`: every flag reaches the `Config`, defaults are the
//! documented ones, and `--help` explains every flag.
#![cfg(not(loom))]

use std::ffi::OsString;
use std::path::PathBuf;

use scan::cli::{parse, ArchivePolicy, ColorChoice, Config, DEFAULT_MAX_FILE_SIZE};
use scan::report::Format;

fn args(list: &[&str]) -> Vec<OsString> {
    std::iter::once("scan")
        .chain(list.iter().copied())
        .map(OsString::from)
        .collect()
}

fn ok(list: &[&str]) -> Config {
    parse(args(list)).unwrap_or_else(|e| panic!("{list:?}: {e}"))
}

#[test]
fn defaults_are_the_documented_ones() {
    let c = ok(&["."]);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert_eq!(c.paths, vec![PathBuf::from(".")]);
    assert_eq!(c.format, Format::Text);
    assert_eq!(c.workers, cores);
    assert_eq!(c.max_file_size, Some(DEFAULT_MAX_FILE_SIZE));
    assert_eq!(DEFAULT_MAX_FILE_SIZE, 256 * 1024 * 1024);
    assert!(
        !c.respect_ignore_files,
        "ignored files are scanned by default"
    );
    assert!(c.exclude.is_empty() && !c.verbose && !c.fail_on_skip);
    assert!(!c.follow_symlinks);
    assert!(c.scan_archives);
    assert_eq!(c.archive_depth, 3);
    assert_eq!(c.archive_policy, ArchivePolicy::Partial);
    assert!(c.rule_files.is_empty() && c.exclude_rules.is_empty());
    assert_eq!(c.baseline, None);
    assert!(!c.redact && !c.metrics);
    assert_eq!(c.trace, None);
    assert!(c.progress);
    assert_eq!(c.color, ColorChoice::Auto);
    assert_eq!(c.output, None);
}

#[test]
fn every_flag_reaches_the_config() {
    let c = ok(&[
        "--format",
        "sarif",
        "--workers",
        "7",
        "--max-file-size",
        "1G",
        "--respect-gitignore",
        "--exclude",
        "vendor/",
        "-v",
        "--fail-on-skip",
        "--follow-symlinks",
        "--archive-depth",
        "5",
        "--archive-policy",
        "fail-run",
        "--rules",
        "a.toml",
        "--exclude-rule",
        "generic-api-key",
        "--baseline",
        "base.json",
        "--redact",
        "--metrics",
        "--trace",
        "t.json",
        "--no-progress",
        "--color",
        "never",
        "-o",
        "out.sarif",
        "dir1",
        "dir2",
    ]);
    assert_eq!(c.paths, vec![PathBuf::from("dir1"), PathBuf::from("dir2")]);
    assert_eq!(c.format, Format::Sarif);
    assert_eq!(c.workers, 7);
    assert_eq!(c.max_file_size, Some(1 << 30));
    assert!(c.respect_ignore_files);
    assert_eq!(c.exclude, vec!["vendor/".to_string()]);
    assert!(c.verbose && c.fail_on_skip);
    assert!(c.follow_symlinks);
    assert!(c.scan_archives);
    assert_eq!(c.archive_depth, 5);
    assert_eq!(c.archive_policy, ArchivePolicy::FailRun);
    assert_eq!(c.rule_files, vec![PathBuf::from("a.toml")]);
    assert_eq!(c.exclude_rules, vec!["generic-api-key".to_string()]);
    assert_eq!(c.baseline, Some(PathBuf::from("base.json")));
    assert!(c.redact && c.metrics);
    assert_eq!(c.trace, Some(PathBuf::from("t.json")));
    assert!(!c.progress);
    assert_eq!(c.color, ColorChoice::Never);
    assert_eq!(c.output, Some(PathBuf::from("out.sarif")));
}

#[test]
fn repeatable_flags_keep_every_value_in_order() {
    let c = ok(&[
        "--rules",
        "b.toml",
        "--exclude-rule",
        "x",
        "--rules",
        "a.toml",
        "--exclude-rule",
        "y",
        ".",
    ]);
    assert_eq!(
        c.rule_files,
        vec![PathBuf::from("b.toml"), PathBuf::from("a.toml")]
    );
    assert_eq!(c.exclude_rules, vec!["x".to_string(), "y".to_string()]);
}

#[test]
fn every_format_name_parses() {
    for (name, f) in [
        ("text", Format::Text),
        ("jsonl", Format::Jsonl),
        ("json", Format::Json),
        ("sarif", Format::Sarif),
    ] {
        assert_eq!(ok(&["--format", name, "."]).format, f);
    }
}

#[test]
fn max_file_size_accepts_suffixes_and_zero_means_no_limit() {
    assert_eq!(
        ok(&["--max-file-size", "256M", "."]).max_file_size,
        Some(256 << 20)
    );
    assert_eq!(
        ok(&["--max-file-size", "1048576", "."]).max_file_size,
        Some(1 << 20)
    );
    assert_eq!(ok(&["--max-file-size", "0", "."]).max_file_size, None);
    assert!(parse(args(&["--max-file-size", "lots", "."])).is_err());
}

#[test]
fn no_archives_turns_archive_scanning_off() {
    let c = ok(&["--no-archives", "."]);
    assert!(!c.scan_archives);
    assert_eq!(c.archive_depth, 0);
    let c = ok(&["--archive-depth", "0", "."]);
    assert!(!c.scan_archives);
    // Both at once is a contradiction, not a silent choice.
    assert!(parse(args(&["--no-archives", "--archive-depth", "2", "."])).is_err());
}

#[test]
fn usage_errors_want_exit_code_2() {
    for bad in [
        &[][..],
        &["--format", "xml", "."],
        &["--workers", "0", "."],
        &["--workers", "many", "."],
        &["--archive-policy", "maybe", "."],
        &["--color", "sometimes", "."],
        &["--no-such-flag", "."],
    ] {
        let e = parse(args(bad)).expect_err(&format!("{bad:?} should fail"));
        assert_eq!(e.exit_code(), 2, "{bad:?}");
    }
}

#[test]
fn help_and_version_want_exit_code_0() {
    for flag in ["--help", "-h", "--version", "-V"] {
        let e = parse(args(&[flag])).expect_err(flag);
        assert_eq!(e.exit_code(), 0, "{flag}");
    }
}

#[test]
fn long_help_explains_every_flag_and_shows_defaults() {
    let help = scan::cli::long_help();
    for flag in [
        "--format",
        "--workers",
        "--max-file-size",
        "--no-ignore",
        "--follow-symlinks",
        "--archive-depth",
        "--no-archives",
        "--archive-policy",
        "--rules",
        "--exclude-rule",
        "--baseline",
        "--redact",
        "--metrics",
        "--trace",
        "--no-progress",
        "--color",
        "--output",
    ] {
        let at = help
            .find(&format!("{flag} "))
            .or_else(|| help.find(&format!("{flag}\n")))
            .unwrap_or_else(|| panic!("{flag} missing from --help"));
        // The flag's entry has a sentence of explanation after it.
        let entry = &help[at..help[at..].find("\n\n").map_or(help.len(), |e| at + e)];
        assert!(
            entry.split_whitespace().count() > 8,
            "{flag} is not explained: {entry:?}"
        );
    }
    for default in [
        "[default: text]",
        "[default: 256M]",
        "[default: 3]",
        "[default: partial]",
        "[default: auto]",
        "[default: the number of CPU cores",
    ] {
        assert!(help.contains(default), "help lacks {default}");
    }
    assert!(help.contains("EXIT STATUS"));
}

#[cfg(unix)]
#[test]
fn non_utf8_paths_reach_the_config_exactly() {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let raw = b"caf\xe9".to_vec();
    let mut a = args(&["--baseline"]);
    a.push(OsString::from_vec(b"b\xff.json".to_vec()));
    a.push(OsString::from_vec(raw.clone()));
    let c = parse(a).unwrap();
    assert_eq!(c.paths[0].as_os_str().as_bytes(), &raw[..]);
    assert_eq!(
        c.baseline.unwrap().as_os_str().as_bytes(),
        &b"b\xff.json"[..]
    );
}
