//! The text, jsonl and json formats: exact keys, exact bytes for names and
//! secrets that are not UTF-8, redaction everywhere, colour rules, terminal
//! safety, and EPIPE reported as its own error.
#![cfg(not(loom))]

use std::collections::BTreeSet;
use std::io::{self, Write};
use std::path::Path;
use std::time::Duration;

use proptest::prelude::*;
use scan::cli::ColorChoice;
use scan::report::json::{parse_one, parse_stream, push_bytes_str, JsonValue};
use scan::report::jsonl::FINDING_KEYS;
use scan::report::text::color_enabled;
use scan::report::{
    finalize, write_report, Finding, Format, ObjPath, OutputError, Reporter, ScanError, Summary,
    WriteOptions,
};

const SECRET: &[u8] = b"AKIAIOSFODNN7EXAMPLE";

fn findings() -> Vec<Finding> {
    let plain = ObjPath::from_path(Path::new("repo/.env"));
    let member = ObjPath::from_path(Path::new("repo/a.tar.gz"))
        .member(b"b.zip")
        .member(b"c.env");
    let odd = ObjPath::from_file_bytes(b"repo/caf\xe9.txt");
    let mut f1 = Finding::new(
        "aws-access-key-id",
        "AWS access key ID",
        plain,
        3,
        19,
        64,
        SECRET,
    );
    f1.context = b"  AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE  ".to_vec();
    let mut v = vec![
        f1,
        Finding::new(
            "generic-api-key",
            "Generic API key",
            member,
            1,
            5,
            4,
            &b"k3y-\"quoted\"\\tab\t"[..],
        ),
        Finding::new(
            "generic-api-key",
            "Generic API key",
            odd,
            2,
            1,
            10,
            &b"s\xffcr\xe2\x82t-value"[..],
        ),
    ];
    finalize(&mut v);
    v
}

fn summary() -> Summary {
    let mut s = Summary {
        files_scanned: 12,
        bytes_scanned: 3_000_000,
        archives: 1,
        archive_members: 2,
        workers: 2,
        elapsed: Duration::from_millis(1500),
        ..Summary::default()
    };
    s.skipped.insert("too-large", 2);
    s.skipped.insert("fifo", 1);
    s.findings = 3;
    s
}

fn render(format: Format, v: &[Finding], opts: &WriteOptions) -> Vec<u8> {
    let mut out = Vec::new();
    write_report(&mut out, format, v, &[], &summary(), opts).unwrap();
    out
}

fn get_bytes<'a>(v: &'a JsonValue, key: &str) -> &'a [u8] {
    v.get(key).and_then(JsonValue::as_bytes).unwrap()
}

#[test]
fn jsonl_objects_have_exactly_the_documented_keys_in_order() {
    let v = findings();
    let out = render(Format::Jsonl, &v, &WriteOptions::default());
    let lines: Vec<&[u8]> = out
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(lines.len(), v.len());
    for line in lines {
        let JsonValue::Object(members) = parse_one(line).unwrap() else {
            panic!("not an object")
        };
        let keys: Vec<&[u8]> = members.iter().map(|(k, _)| k.as_slice()).collect();
        let want: Vec<&[u8]> = FINDING_KEYS.iter().map(|k| k.as_bytes()).collect();
        assert_eq!(keys, want);
    }
}

#[test]
fn jsonl_of_utf8_findings_is_standard_json() {
    let v: Vec<Finding> = findings()
        .into_iter()
        .filter(|f| std::str::from_utf8(&f.path.to_bytes()).is_ok())
        .filter(|f| std::str::from_utf8(&f.secret).is_ok())
        .collect();
    let out = render(Format::Jsonl, &v, &WriteOptions::default());
    for (line, f) in String::from_utf8(out).unwrap().lines().zip(&v) {
        let j: serde_json::Value = serde_json::from_str(line).unwrap();
        let keys: BTreeSet<&str> = j.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, FINDING_KEYS.iter().copied().collect());
        assert_eq!(j["secret"].as_str().unwrap().as_bytes(), &f.secret[..]);
        assert_eq!(j["line"], f.line);
        assert_eq!(j["column"], f.column);
        assert_eq!(j["offset"], f.offset);
        assert_eq!(j["fingerprint"], f.fingerprint.as_str());
    }
}

#[test]
fn json_and_jsonl_keep_non_utf8_paths_and_secrets_exact() {
    let v = findings();
    for format in [Format::Jsonl, Format::Json] {
        let out = render(format, &v, &WriteOptions::default());
        // Still valid UTF-8 text: raw bytes became \udcXX escapes.
        let text = String::from_utf8(out.clone()).unwrap();
        assert!(text.contains(r"caf\udce9.txt"));
        let objects: Vec<JsonValue> = match format {
            Format::Json => parse_one(&out)
                .unwrap()
                .get("findings")
                .unwrap()
                .as_array()
                .unwrap()
                .to_vec(),
            _ => parse_stream(&out).unwrap(),
        };
        assert_eq!(objects.len(), v.len());
        for (o, f) in objects.iter().zip(&v) {
            assert_eq!(get_bytes(o, "path"), &f.path.to_bytes()[..]);
            assert_eq!(get_bytes(o, "secret"), &f.secret[..]);
            assert_eq!(get_bytes(o, "rule"), f.rule.as_bytes());
        }
    }
}

#[test]
fn json_document_carries_findings_and_summary() {
    let v = findings();
    let out = render(Format::Json, &v, &WriteOptions::default());
    let doc = parse_one(&out).unwrap();
    assert_eq!(doc.get("findings").unwrap().as_array().unwrap().len(), 3);
    let s = doc.get("summary").unwrap();
    for (key, want) in [
        ("files_scanned", 12),
        ("bytes_scanned", 3_000_000),
        ("archives", 1),
        ("archive_members", 2),
        ("findings", 3),
        ("baseline_suppressed", 0),
        ("workers", 2),
    ] {
        assert_eq!(s.get(key).and_then(JsonValue::as_u64), Some(want), "{key}");
    }
    let skipped = s.get("skipped").unwrap();
    assert_eq!(
        skipped.get("too-large").and_then(JsonValue::as_u64),
        Some(2)
    );
    assert_eq!(skipped.get("fifo").and_then(JsonValue::as_u64), Some(1));
    for key in ["elapsed_seconds", "throughput_mb_per_second", "metrics"] {
        assert!(s.get(key).is_some(), "{key}");
    }
}

#[test]
fn empty_reports_are_well_formed() {
    assert!(render(Format::Jsonl, &[], &WriteOptions::default()).is_empty());
    assert!(render(Format::Text, &[], &WriteOptions::default()).is_empty());
    let doc = parse_one(&render(Format::Json, &[], &WriteOptions::default())).unwrap();
    assert_eq!(doc.get("findings").unwrap().as_array().unwrap().len(), 0);
}

#[test]
fn redaction_hides_the_secret_in_every_format_and_keeps_fingerprints() {
    let v = findings();
    let redacted = WriteOptions {
        redact: true,
        ..WriteOptions::default()
    };
    for format in [Format::Text, Format::Jsonl, Format::Json, Format::Sarif] {
        let out = render(format, &v, &redacted);
        for f in &v {
            assert!(
                memchr::memmem::find(&out, &f.secret).is_none(),
                "{format:?} shows {:?}",
                String::from_utf8_lossy(&f.secret)
            );
            assert!(memchr::memmem::find(&out, f.fingerprint.as_bytes()).is_some());
        }
        let text = String::from_utf8_lossy(&out);
        assert!(text.contains("AKIA…"), "{format:?}");
        // Without --redact the secret is there.
        let plain = render(format, &v, &WriteOptions::default());
        assert!(memchr::memmem::find(&plain, SECRET).is_some(), "{format:?}");
    }
}

#[test]
fn text_shows_rule_location_secret_context_and_fingerprint() {
    let v = findings();
    let text = String::from_utf8(render(Format::Text, &v, &WriteOptions::default())).unwrap();
    let f = v.iter().find(|f| f.rule == "aws-access-key-id").unwrap();
    assert!(text.contains("aws-access-key-id  AWS access key ID"));
    assert!(text.contains("repo/.env:3:19 (offset 64)"));
    assert!(text.contains("AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE"));
    assert!(text.contains(&f.fingerprint));
    assert!(text.contains("repo/a.tar.gz!b.zip!c.env:1:5"));
    // Lossy for people: the invalid byte shows as U+FFFD.
    assert!(text.contains("repo/caf\u{fffd}.txt"));
    assert!(!text.contains('\x1b'), "no colour when colour is off");
}

#[test]
fn text_redacts_the_context_line_too() {
    let v = findings();
    let opts = WriteOptions {
        redact: true,
        ..WriteOptions::default()
    };
    let text = String::from_utf8(render(Format::Text, &v, &opts)).unwrap();
    assert!(text.contains("AWS_ACCESS_KEY_ID=AKIA…"));
}

#[test]
fn text_colours_only_when_asked() {
    let v = findings();
    let opts = WriteOptions {
        color: true,
        ..WriteOptions::default()
    };
    let text = String::from_utf8(render(Format::Text, &v, &opts)).unwrap();
    assert!(text.contains("\x1b[1;31maws-access-key-id\x1b[0m"));
}

#[test]
fn colour_choice_follows_terminal_and_no_color() {
    use std::ffi::OsStr;
    let set = Some(OsStr::new("1"));
    let empty = Some(OsStr::new(""));
    assert!(color_enabled(ColorChoice::Auto, true, None));
    assert!(color_enabled(ColorChoice::Auto, true, empty));
    assert!(!color_enabled(ColorChoice::Auto, true, set));
    assert!(!color_enabled(ColorChoice::Auto, false, None));
    assert!(color_enabled(ColorChoice::Always, false, set));
    assert!(!color_enabled(ColorChoice::Never, true, None));
}

#[test]
fn hostile_names_and_secrets_cannot_drive_the_terminal() {
    let p = ObjPath::from_file_bytes(b"evil\x1b[2J\rname\xe2\x80\xae.txt");
    let mut v = vec![Finding::new(
        "r",
        "d\x1b]0;title\x07",
        p,
        1,
        1,
        0,
        &b"sec\x1b[31mret\x08"[..],
    )];
    finalize(&mut v);
    let text = String::from_utf8(render(Format::Text, &v, &WriteOptions::default())).unwrap();
    for bad in ['\x1b', '\r', '\x07', '\x08', '\u{202e}'] {
        assert!(!text.contains(bad), "{bad:?} reached the terminal");
    }
    assert!(text.contains(r"\u{1b}[2J"));
}

/// A writer whose reader has gone away.
struct ClosedPipe;

impl Write for ClosedPipe {
    fn write(&mut self, _: &[u8]) -> io::Result<usize> {
        Err(io::Error::from(io::ErrorKind::BrokenPipe))
    }
    fn flush(&mut self) -> io::Result<()> {
        Err(io::Error::from(io::ErrorKind::BrokenPipe))
    }
}

/// A full disk.
struct Full;

impl Write for Full {
    fn write(&mut self, _: &[u8]) -> io::Result<usize> {
        Err(io::Error::other("no space left"))
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn epipe_is_a_distinct_error_in_every_format() {
    let v = findings();
    for format in [Format::Text, Format::Jsonl, Format::Json, Format::Sarif] {
        let r = write_report(
            &mut ClosedPipe,
            format,
            &v,
            &[],
            &summary(),
            &WriteOptions::default(),
        );
        assert!(matches!(r, Err(OutputError::BrokenPipe)), "{format:?}");
        let r = write_report(
            &mut Full,
            format,
            &v,
            &[],
            &summary(),
            &WriteOptions::default(),
        );
        assert!(matches!(r, Err(OutputError::Io(_))), "{format:?}");
    }
    // Even an empty jsonl report flushes, and a closed pipe there is EPIPE too.
    let r = write_report(
        &mut ClosedPipe,
        Format::Jsonl,
        &[],
        &[],
        &summary(),
        &WriteOptions::default(),
    );
    assert!(matches!(r, Err(OutputError::BrokenPipe)));
}

#[test]
fn reporter_turns_epipe_into_scan_error_broken_pipe() {
    let r = Reporter::with_writer(
        Format::Jsonl,
        WriteOptions::default(),
        None,
        Box::new(ClosedPipe),
    );
    let mut stderr = Vec::new();
    let res = r.finish(findings(), &[], Summary::default(), &mut stderr);
    assert!(matches!(res, Err(ScanError::BrokenPipe)));
    assert_eq!(scan::report::exit_code(&res), 0);
}

#[test]
fn reporter_counts_reported_findings_and_writes_the_summary() {
    let r = Reporter::with_writer(
        Format::Jsonl,
        WriteOptions::default(),
        None,
        Box::new(io::sink()),
    );
    let mut stderr = Vec::new();
    let mut twice = findings();
    twice.extend(findings()); // duplicates collapse
    let o = r.finish(twice, &[], summary(), &mut stderr).unwrap();
    assert_eq!(o.reported, 3);
    assert_eq!(o.summary.findings, 3);
    assert_eq!(scan::report::exit_code(&Ok(o)), 1);
    let text = String::from_utf8(stderr).unwrap();
    assert!(text.contains("12 files"), "{text}");
    assert!(text.contains("skipped 3 (fifo 1, too-large 2)"), "{text}");
    assert!(text.contains("2.0 MB/s"), "{text}");
    assert!(text.contains("3 findings"), "{text}");
}

proptest! {
    #[test]
    fn any_bytes_round_trip_through_the_json_string_escaping(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        let mut buf = Vec::new();
        push_bytes_str(&mut buf, &bytes);
        prop_assert!(std::str::from_utf8(&buf).is_ok());
        prop_assert_eq!(parse_one(&buf).unwrap(), JsonValue::String(bytes));
    }

    #[test]
    fn utf8_strings_are_escaped_as_standard_json(s in any::<String>()) {
        let mut buf = Vec::new();
        push_bytes_str(&mut buf, s.as_bytes());
        let back: String = serde_json::from_slice(&buf).unwrap();
        prop_assert_eq!(back, s);
    }
}
