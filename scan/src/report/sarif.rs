//! The `sarif` format: SARIF 2.1.0, shaped for GitHub code scanning.
//!
//! One run. `tool.driver` names `magpie-scan` and lists each rule that has a
//! result (id, name, short and full description, help, default level). Each
//! result has `ruleId`, `ruleIndex`, `level: "error"`, a message, exactly one
//! location and `partialFingerprints["magpie/v1"]` = our fingerprint.
//!
//! Locations: `artifactLocation.uri` is the on-disk file relative to the
//! directory the scan ran in (`uriBaseId: "%SRCROOT%"`), with `/` separators
//! and every byte outside `A-Z a-z 0-9 - . _ ~ /` percent-encoded, so names
//! that are not UTF-8 stay exact. A path outside that directory is written as
//! an absolute `file://` URI with no `uriBaseId`. For an archive member the
//! location is the archive file itself (`region.startLine` 1, the only line a
//! viewer can show for it) and the message names the member path, line and
//! column. `region.startColumn` counts bytes (SARIF's default is UTF-16 code
//! units; the two agree on ASCII lines).
//!
//! Every string here is lossy UTF-8 (no `\udcXX` escapes): SARIF consumers
//! parse with standard JSON libraries that reject lone surrogates.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Component, Path};

use super::error::OutputError;
use super::finding::Finding;
use super::json::push_bytes_str;
use super::{SkipView, WriteOptions};
use crate::rules::Precision;

/// The schema URI written in `$schema`.
pub const SARIF_SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";
/// The SARIF version written in `version`.
pub const SARIF_VERSION: &str = "2.1.0";
/// `tool.driver.name`.
pub const TOOL_NAME: &str = "magpie-scan";
/// The `uriBaseId` of relative locations.
pub const SRCROOT: &str = "%SRCROOT%";
/// The key of our fingerprint in `partialFingerprints`.
pub const FINGERPRINT_KEY: &str = "magpie/v1";
/// The key of the introducing commit in `partialFingerprints` (`scan git`).
pub const COMMIT_KEY: &str = "commitSha";

/// Percent-encodes `bytes` for a URI path: every byte outside the RFC 3986
/// unreserved set and `/` becomes `%XX` (upper-case hex).
pub fn percent_encode_path(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Where a file on disk goes in a SARIF location.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArtifactUri {
    /// The URI: relative (forward slashes) or absolute `file://`.
    pub uri: String,
    /// `Some(SRCROOT)` for a relative URI.
    pub base_id: Option<&'static str>,
}

/// The SARIF artifact URI for `file`, a path as the walker produced it (the
/// command-line root joined with the path below it). Relative paths, and
/// absolute ones under `base_dir`, become relative URIs; `.` components are
/// dropped. Anything else becomes an absolute `file://` URI.
pub fn artifact_uri(file: &Path, base_dir: Option<&Path>) -> ArtifactUri {
    let rel = if file.is_absolute() {
        base_dir.and_then(|b| file.strip_prefix(b).ok())
    } else {
        Some(file)
    };
    match rel {
        Some(rel) => {
            let parts: Vec<&[u8]> = rel
                .components()
                .filter_map(|c| match c {
                    Component::CurDir => None,
                    Component::ParentDir => Some(&b".."[..]),
                    other => Some(other.as_os_str().as_encoded_bytes()),
                })
                .collect();
            ArtifactUri {
                uri: percent_encode_path(&parts.join(&b'/')),
                base_id: Some(SRCROOT),
            }
        }
        None => ArtifactUri {
            uri: file_uri(file, false),
            base_id: None,
        },
    }
}

/// `file://` URI of an absolute path, with a trailing `/` when `dir`.
pub fn file_uri(path: &Path, dir: bool) -> String {
    let parts: Vec<&[u8]> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.as_encoded_bytes()),
            Component::ParentDir => Some(&b".."[..]),
            _ => None,
        })
        .collect();
    let mut uri = format!("file:///{}", percent_encode_path(&parts.join(&b'/')));
    if dir && !uri.ends_with('/') {
        uri.push('/');
    }
    uri
}

/// The on-disk file of `path` as reports show it (relative to the scan
/// root, which `%SRCROOT%` names).
fn shown_file(path: &super::ObjPath) -> std::path::PathBuf {
    use std::os::unix::ffi::OsStrExt;
    std::path::PathBuf::from(std::ffi::OsStr::from_bytes(path.file_bytes()))
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn push_str(buf: &mut Vec<u8>, s: &str) {
    push_bytes_str(buf, s.as_bytes());
}

/// Writes `findings` as a SARIF 2.1.0 log.
pub fn write_sarif<S: SkipView>(
    out: &mut dyn Write,
    findings: &[Finding],
    skipped: &[S],
    opts: &WriteOptions,
) -> Result<(), OutputError> {
    // Rules with a result, in id order; a result's ruleIndex points here.
    let mut rules: BTreeMap<&str, (&str, Precision)> = BTreeMap::new();
    for f in findings {
        rules
            .entry(&f.rule)
            .or_insert((&f.description, f.precision));
    }
    let index: BTreeMap<&str, usize> = rules.keys().enumerate().map(|(i, k)| (*k, i)).collect();

    let mut buf = Vec::with_capacity(4096);
    buf.extend_from_slice(b"{\"$schema\":");
    push_str(&mut buf, SARIF_SCHEMA);
    buf.extend_from_slice(b",\"version\":");
    push_str(&mut buf, SARIF_VERSION);
    buf.extend_from_slice(b",\"runs\":[{\"tool\":{\"driver\":{\"name\":");
    push_str(&mut buf, TOOL_NAME);
    buf.extend_from_slice(b",\"version\":");
    push_str(&mut buf, opts.tool_version);
    buf.extend_from_slice(b",\"semanticVersion\":");
    push_str(&mut buf, opts.tool_version);
    buf.extend_from_slice(b",\"rules\":[");
    for (i, (id, (desc, precision))) in rules.iter().enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        push_rule(&mut buf, id, desc, *precision);
    }
    buf.extend_from_slice(b"]}}");
    if let Some(base) = &opts.base_dir {
        buf.extend_from_slice(b",\"originalUriBaseIds\":{");
        push_str(&mut buf, SRCROOT);
        buf.extend_from_slice(b":{\"uri\":");
        push_str(&mut buf, &file_uri(base, true));
        buf.extend_from_slice(b"}}");
    }
    if let Some(p) = &opts.provenance {
        buf.extend_from_slice(b",\"versionControlProvenance\":[{\"repositoryUri\":");
        push_str(&mut buf, &p.repository_uri);
        if let Some(r) = &p.revision_id {
            buf.extend_from_slice(b",\"revisionId\":");
            push_str(&mut buf, r);
        }
        if let Some(b) = &p.branch {
            buf.extend_from_slice(b",\"branch\":");
            push_str(&mut buf, b);
        }
        buf.extend_from_slice(b"}]");
    }
    if let Some(h) = &opts.history {
        buf.extend_from_slice(b",\"properties\":{\"history\":");
        buf.extend_from_slice(h.to_json().as_bytes());
        buf.push(b'}');
    }
    buf.extend_from_slice(b",\"invocations\":[{\"executionSuccessful\":true");
    buf.extend_from_slice(b",\"toolExecutionNotifications\":[");
    for (i, e) in skipped.iter().enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        push_notification(&mut buf, e, opts);
    }
    buf.extend_from_slice(b"]}]");
    buf.extend_from_slice(b",\"results\":[");
    out.write_all(&buf)?;

    for (i, f) in findings.iter().enumerate() {
        buf.clear();
        if i > 0 {
            buf.push(b',');
        }
        push_result(&mut buf, f, index[f.rule.as_str()], opts);
        out.write_all(&buf)?;
    }
    out.write_all(b"]}]}\n")?;
    out.flush()?;
    Ok(())
}

/// A rule's SARIF `name`: its id in PascalCase (`github-pat` gives
/// `GithubPat`), as SARIF asks for a name that differs from the id.
pub fn rule_name(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    let mut upper = true;
    for c in id.chars() {
        if c.is_ascii_alphanumeric() {
            if upper {
                out.extend(c.to_uppercase());
            } else {
                out.push(c);
            }
            upper = false;
        } else {
            upper = true;
        }
    }
    if out.is_empty() || out == id {
        out.insert_str(0, "Rule");
    }
    out
}

fn push_rule(buf: &mut Vec<u8>, id: &str, desc: &str, precision: Precision) {
    let short = if desc.is_empty() { id } else { desc };
    buf.extend_from_slice(b"{\"id\":");
    push_str(buf, id);
    buf.extend_from_slice(b",\"name\":");
    push_str(buf, &rule_name(id));
    buf.extend_from_slice(b",\"shortDescription\":{\"text\":");
    push_str(buf, short);
    buf.extend_from_slice(b"},\"fullDescription\":{\"text\":");
    push_str(buf, &format!("{short} (magpie rule {id})."));
    buf.extend_from_slice(b"},\"help\":{\"text\":");
    push_str(
        buf,
        &format!(
            "{short}. If the credential is real, revoke and rotate it, then remove it from \
             the file and from version-control history. If it is a test value or a false \
             positive, add the finding's fingerprint to a baseline (scan --baseline)."
        ),
    );
    buf.extend_from_slice(
        b"},\"defaultConfiguration\":{\"level\":\"error\"},\
          \"properties\":{\"tags\":[\"security\",\"secret\"],\"precision\":",
    );
    push_str(buf, precision.as_str());
    buf.extend_from_slice(b"}}");
}

/// A skipped entry as a `toolExecutionNotification`: level `warning`, the
/// reason label as `descriptor.id`, the path and reason in the message, and
/// the file on disk as the location (for an archive member, the archive;
/// `properties.archiveMember` names the member).
fn push_notification(buf: &mut Vec<u8>, e: &impl SkipView, opts: &WriteOptions) {
    let path = e.view_path();
    let file = shown_file(path);
    let loc = artifact_uri(&file, opts.base_dir.as_deref());
    buf.extend_from_slice(b"{\"level\":\"warning\",\"descriptor\":{\"id\":");
    push_str(buf, e.view_label());
    buf.extend_from_slice(b"},\"message\":{\"text\":");
    push_str(buf, &format!("not scanned: {}: {}", path, e.view_message()));
    buf.extend_from_slice(
        b"},\"locations\":[{\"physicalLocation\":{\"artifactLocation\":{\"uri\":",
    );
    push_str(buf, &loc.uri);
    if let Some(base) = loc.base_id {
        buf.extend_from_slice(b",\"uriBaseId\":");
        push_str(buf, base);
    }
    buf.extend_from_slice(b"}}}]");
    if path.is_archive_member() {
        buf.extend_from_slice(b",\"properties\":{\"archiveMember\":");
        push_str(buf, &lossy(&path.member_bytes()));
        buf.push(b'}');
    }
    buf.push(b'}');
}

fn push_result(buf: &mut Vec<u8>, f: &Finding, rule_index: usize, opts: &WriteOptions) {
    let secret = opts.shown_secret(&f.secret);
    let file = shown_file(&f.path);
    let loc = artifact_uri(&file, opts.base_dir.as_deref());
    let what = if f.description.is_empty() {
        f.rule.clone()
    } else {
        f.description.clone()
    };
    let message = if f.path.is_archive_member() {
        format!(
            "{what}: {} in archive member {} (line {}, column {}, byte offset {}) of {}",
            lossy(&secret),
            lossy(&f.path.member_bytes()),
            f.line,
            f.column,
            f.offset,
            lossy(f.path.file_bytes()),
        )
    } else {
        format!("{what}: {}", lossy(&secret))
    };
    let message = if f.decoded.is_empty() {
        message
    } else {
        format!("{message} (decoded: {})", f.decoded_label())
    };

    buf.extend_from_slice(b"{\"ruleId\":");
    push_str(buf, &f.rule);
    buf.extend_from_slice(format!(",\"ruleIndex\":{rule_index},\"level\":\"error\"").as_bytes());
    buf.extend_from_slice(b",\"message\":{\"text\":");
    push_str(buf, &message);
    buf.extend_from_slice(
        b"},\"locations\":[{\"physicalLocation\":{\"artifactLocation\":{\"uri\":",
    );
    push_str(buf, &loc.uri);
    if let Some(base) = loc.base_id {
        buf.extend_from_slice(b",\"uriBaseId\":");
        push_str(buf, base);
    }
    buf.extend_from_slice(b"},\"region\":");
    if f.path.is_archive_member() {
        buf.extend_from_slice(b"{\"startLine\":1}");
    } else {
        buf.extend_from_slice(
            format!(
                "{{\"startLine\":{},\"startColumn\":{},\"endLine\":{},\"endColumn\":{},\"byteOffset\":{},\"byteLength\":{}}}",
                f.line.max(1),
                f.column.max(1),
                f.end_line().max(1),
                f.end_column().max(1),
                f.offset,
                f.byte_len()
            )
            .as_bytes(),
        );
    }
    buf.push(b'}');
    if f.path.is_archive_member() {
        // The member itself, which no viewer can open on disk.
        buf.extend_from_slice(
            b",\"logicalLocations\":[{\"kind\":\"member\",\"fullyQualifiedName\":",
        );
        push_str(buf, &f.path.to_string());
        buf.extend_from_slice(b",\"name\":");
        push_str(buf, &lossy(&f.path.member_bytes()));
        buf.push(b'}');
        buf.push(b']');
    }
    buf.extend_from_slice(b"}],\"partialFingerprints\":{");
    push_str(buf, FINGERPRINT_KEY);
    buf.push(b':');
    push_str(buf, &f.fingerprint);
    if let Some(c) = &f.commit {
        buf.push(b',');
        push_str(buf, COMMIT_KEY);
        buf.push(b':');
        push_str(buf, &c.id);
    }
    buf.push(b'}');
    let member = f.path.is_archive_member();
    if member || f.commit.is_some() || !f.decoded.is_empty() {
        buf.extend_from_slice(b",\"properties\":{");
        let mut first = true;
        if member {
            buf.extend_from_slice(b"\"archiveMember\":");
            push_str(buf, &lossy(&f.path.member_bytes()));
            first = false;
        }
        if !f.decoded.is_empty() {
            if !first {
                buf.push(b',');
            }
            first = false;
            buf.extend_from_slice(b"\"decoded\":");
            push_str(buf, &f.decoded_label());
        }
        if let Some(c) = &f.commit {
            let values = [&c.id, &c.author, &c.email, &c.date, &c.subject];
            for (key, value) in super::jsonl::GIT_KEYS.iter().zip(values) {
                if !first {
                    buf.push(b',');
                }
                first = false;
                push_str(buf, key);
                buf.push(b':');
                push_str(buf, value);
            }
        }
        buf.push(b'}');
    }
    buf.push(b'}');
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn percent_encoding_keeps_only_unreserved_bytes_and_slashes() {
        assert_eq!(
            percent_encode_path(b"a/b c/%x#?.env"),
            "a/b%20c/%25x%23%3F.env"
        );
        assert_eq!(percent_encode_path(b"caf\xe9"), "caf%E9");
        assert_eq!(percent_encode_path("é".as_bytes()), "%C3%A9");
    }

    #[test]
    fn relative_paths_drop_dot_components_and_use_srcroot() {
        let u = artifact_uri(Path::new("./repo/./x.env"), None);
        assert_eq!(u.uri, "repo/x.env");
        assert_eq!(u.base_id, Some(SRCROOT));
    }

    #[test]
    fn absolute_paths_under_the_base_become_relative() {
        let base = PathBuf::from("/work/repo");
        let u = artifact_uri(Path::new("/work/repo/src/k.txt"), Some(&base));
        assert_eq!(u.uri, "src/k.txt");
        let outside = artifact_uri(Path::new("/etc/k.txt"), Some(&base));
        assert_eq!(outside.uri, "file:///etc/k.txt");
        assert_eq!(outside.base_id, None);
    }
}
