//! [`Finding`], fingerprints, [`finalize`] and redaction.

use crate::decode::Encoding;
use std::collections::HashMap;

use std::sync::Arc;

use super::path::ObjPath;
use crate::git::CommitMeta;
use crate::rules::Precision;

/// One secret found at one place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// The rule's id, e.g. `aws-access-key-id`.
    pub rule: String,
    /// The rule's one-line description.
    pub description: String,
    /// How often the rule's findings are real (SARIF `precision`): `low`
    /// for the generic keyword-plus-randomness rule, higher for rules that
    /// recognise a token's own format. [`Finding::new`] sets the default
    /// (`medium`); the scanner sets the rule's own.
    pub precision: Precision,
    /// The file, and archive members below it.
    pub path: ObjPath,
    /// 1-based line of the secret's first byte.
    pub line: u64,
    /// 1-based column of the secret's first byte, counted in bytes.
    pub column: u64,
    /// Byte offset of the secret's first byte in the file or archive member.
    pub offset: u64,
    /// The secret itself (the rule's capture group), raw bytes.
    pub secret: Vec<u8>,
    /// Set by [`finalize`]; empty before. See [`fingerprint`].
    pub fingerprint: String,
    /// The line the secret is on, trimmed to a few hundred bytes, for the
    /// `text` format only. Empty when the rule engine gives none.
    pub context: Vec<u8>,
    /// The decodings that revealed the secret, outermost first (`base64`,
    /// then `percent` for a percent-encoded value inside base64); empty when
    /// the secret was in the file as it is. A decoded finding's line, column
    /// and offset are those of the encoded span, and `secret` is the decoded
    /// secret.
    pub decoded: Vec<Encoding>,
    /// Length of the encoded span in the file, when `decoded` is not empty.
    pub encoded_len: u64,
    /// For a finding in git history (`scan git`): the commit that
    /// introduced the blob; `None` for a directory scan.
    pub commit: Option<Arc<CommitMeta>>,
}

impl Finding {
    /// A finding with no fingerprint yet and no context line.
    pub fn new(
        rule: impl Into<String>,
        description: impl Into<String>,
        path: ObjPath,
        line: u64,
        column: u64,
        offset: u64,
        secret: impl Into<Vec<u8>>,
    ) -> Self {
        Self {
            rule: rule.into(),
            description: description.into(),
            precision: Precision::default(),
            path,
            line,
            column,
            offset,
            secret: secret.into(),
            fingerprint: String::new(),
            context: Vec::new(),
            decoded: Vec::new(),
            encoded_len: 0,
            commit: None,
        }
    }
}

impl Finding {
    /// 1-based line just past the secret's last byte (the line of its last
    /// byte).
    pub fn end_line(&self) -> u64 {
        if !self.decoded.is_empty() {
            // An encoded span is one run of non-space bytes.
            return self.line;
        }
        self.line + memchr::memchr_iter(b'\n', &self.secret).count() as u64
    }

    /// 1-based column, in bytes, just past the secret's last byte (SARIF's
    /// exclusive `endColumn`): on a one-line secret, `column + length`.
    pub fn end_column(&self) -> u64 {
        if !self.decoded.is_empty() {
            return self.column + self.encoded_len;
        }
        match memchr::memrchr(b'\n', &self.secret) {
            None => self.column + self.secret.len() as u64,
            Some(i) => (self.secret.len() - i) as u64,
        }
    }
}

impl Finding {
    /// Bytes the finding covers in the file: the secret, or the encoded span
    /// a decoded secret came from.
    pub fn byte_len(&self) -> u64 {
        if self.decoded.is_empty() {
            self.secret.len() as u64
        } else {
            self.encoded_len
        }
    }

    /// The decodings as reports print them: `base64`, `base64 > percent`.
    pub fn decoded_label(&self) -> String {
        let names: Vec<&str> = self.decoded.iter().map(|e| e.as_str()).collect();
        names.join(" > ")
    }
}

/// The tag of a history finding's fingerprint (`scan git`): a different
/// tag, and the commit hashed too, so a baseline from `scan DIR` and one
/// from `scan git` never share a fingerprint by construction.
const GIT_FINGERPRINT_TAG: &[u8] = b"magpie-git-fingerprint-v1";

/// Version tag hashed first, so a future change of the recipe can never
/// produce a fingerprint equal to an old one by accident of layout.
const FINGERPRINT_TAG: &[u8] = b"magpie-fingerprint-v1";

const FNV_OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a, 64-bit: for each byte, `h ^= byte; h *= 0x100000001b3`, starting
/// from `0xcbf29ce484222325`. Not cryptographic; it only needs to be stable
/// across runs, platforms and releases, which a seeded std hasher is not.
#[derive(Clone, Copy, Debug)]
pub struct Fnv1a64(u64);

impl Default for Fnv1a64 {
    fn default() -> Self {
        Self(FNV_OFFSET_BASIS)
    }
}

impl Fnv1a64 {
    /// Feeds `bytes`.
    pub fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(FNV_PRIME);
        }
    }

    /// Feeds `n` as 8 little-endian bytes.
    pub fn write_u64(&mut self, n: u64) {
        self.write(&n.to_le_bytes());
    }

    /// Feeds a field as its length (8 bytes, little-endian) then its bytes, so
    /// no two different field lists hash the same input stream.
    pub fn write_field(&mut self, bytes: &[u8]) {
        self.write_u64(bytes.len() as u64);
        self.write(bytes);
    }

    /// The hash so far.
    pub fn finish(&self) -> u64 {
        self.0
    }
}

/// The fingerprint of the `occurrence`-th (0-based, in offset order) finding
/// of `secret` by `rule` in `path`: FNV-1a 64 over
///
/// 1. the tag `magpie-fingerprint-v1` (length-prefixed),
/// 2. the rule id (length-prefixed),
/// 3. the number of path segments, then each segment length-prefixed (file
///    first, then archive members outermost first),
/// 4. the secret (length-prefixed),
/// 5. the occurrence index as 8 little-endian bytes,
///
/// where "length-prefixed" means the length as 8 little-endian bytes then the
/// bytes, printed as 16 lowercase hex digits.
///
/// Line, column and offset are not hashed, so an edit elsewhere in the file
/// that moves the secret keeps its fingerprint; the occurrence index keeps two
/// copies of one secret in one file apart.
pub fn fingerprint(rule: &str, path: &ObjPath, secret: &[u8], occurrence: u64) -> String {
    fingerprint_in(None, rule, path, secret, occurrence)
}

/// [`fingerprint`], for a finding of `scan git` when `commit` is given:
/// the tag is then `magpie-git-fingerprint-v1` and the commit id
/// (length-prefixed, as 40 hex digits) follows it, before the rule id.
pub fn fingerprint_in(
    commit: Option<&str>,
    rule: &str,
    path: &ObjPath,
    secret: &[u8],
    occurrence: u64,
) -> String {
    let mut h = Fnv1a64::default();
    match commit {
        None => h.write_field(FINGERPRINT_TAG),
        Some(c) => {
            h.write_field(GIT_FINGERPRINT_TAG);
            h.write_field(c.as_bytes());
        }
    }
    h.write_field(rule.as_bytes());
    h.write_u64(path.segments().len() as u64);
    for seg in path.segments() {
        h.write_field(seg);
    }
    h.write_field(secret);
    h.write_u64(occurrence);
    format!("{:016x}", h.finish())
}

/// The report order: by commit (none first), path, offset, rule, secret,
/// line, column, then description and context. [`finalize`] sorts with it,
/// and so does `scan merge`, so a merge of shards lists the findings in the
/// order one whole run does.
pub fn sort_findings(findings: &mut [Finding]) {
    findings.sort_unstable_by(|a, b| {
        (
            &a.commit, &a.path, a.offset, &a.rule, &a.secret, a.line, a.column,
        )
            .cmp(&(
                &b.commit, &b.path, b.offset, &b.rule, &b.secret, b.line, b.column,
            ))
            .then_with(|| a.description.cmp(&b.description))
            .then_with(|| a.context.cmp(&b.context))
    });
}

/// Sorts by (path, offset, rule), drops exact duplicates (same path, offset,
/// rule and secret: e.g. a match reported by two overlapping chunks), and
/// assigns every fingerprint.
///
/// The result depends only on the set of findings, not on the order the
/// workers produced them in.
pub fn finalize(findings: &mut Vec<Finding>) {
    sort_findings(findings);
    findings.dedup_by(|later, earlier| {
        later.path == earlier.path
            && later.commit == earlier.commit
            && later.offset == earlier.offset
            && later.rule == earlier.rule
            && later.secret == earlier.secret
    });
    type Key<'a> = (Option<&'a str>, &'a str, &'a ObjPath, &'a [u8]);
    let mut seen: HashMap<Key<'_>, u64> = HashMap::new();
    let mut prints = Vec::with_capacity(findings.len());
    for f in findings.iter() {
        let commit = f.commit.as_deref().map(|c| c.id.as_str());
        let n = seen
            .entry((commit, f.rule.as_str(), &f.path, f.secret.as_slice()))
            .or_insert(0);
        prints.push(fingerprint_in(commit, &f.rule, &f.path, &f.secret, *n));
        *n += 1;
    }
    for (f, p) in findings.iter_mut().zip(prints) {
        f.fingerprint = p;
    }
}

/// The most bytes of a secret [`redact`] ever shows.
pub const REDACT_MAX_PREFIX: usize = 4;

/// `secret` cut to a short prefix plus `…`: at most [`REDACT_MAX_PREFIX`]
/// bytes and at most a quarter of the secret, backed off to a UTF-8 character
/// boundary. A secret shorter than 4 bytes shows as `…` alone, so the output
/// never contains the whole secret.
pub fn redact(secret: &[u8]) -> Vec<u8> {
    let mut n = (secret.len() / 4).min(REDACT_MAX_PREFIX);
    // Back off over UTF-8 continuation bytes so a character is not split.
    while n > 0 && n < secret.len() && (secret[n] & 0xC0) == 0x80 {
        n -= 1;
    }
    let mut out = secret[..n].to_vec();
    out.extend_from_slice("…".as_bytes());
    out
}

/// `secret` with `percent` of it hidden (`--redact=PERCENT`): the first
/// `len × (100 − percent) / 100` bytes, backed off to a UTF-8 character
/// boundary, then `…`. 100 shows `…` alone; `None` is [`redact`]'s short
/// form. The shown part is never the whole secret.
pub fn redact_percent(secret: &[u8], percent: Option<u8>) -> Vec<u8> {
    let Some(p) = percent else {
        return redact(secret);
    };
    let keep = secret.len() * usize::from(100 - p.min(100)) / 100;
    let mut n = keep.min(secret.len().saturating_sub(1));
    while n > 0 && n < secret.len() && (secret[n] & 0xC0) == 0x80 {
        n -= 1;
    }
    let mut out = secret[..n].to_vec();
    out.extend_from_slice("…".as_bytes());
    out
}

/// `context` with every occurrence of `secret` replaced by [`redact`]`(secret)`.
pub fn redact_in(context: &[u8], secret: &[u8]) -> Vec<u8> {
    redact_in_percent(context, secret, None)
}

/// [`redact_in`] with [`redact_percent`]'s form.
pub fn redact_in_percent(context: &[u8], secret: &[u8], percent: Option<u8>) -> Vec<u8> {
    if secret.is_empty() {
        return context.to_vec();
    }
    let red = redact_percent(secret, percent);
    let mut out = Vec::with_capacity(context.len());
    let mut last = 0;
    for at in memchr::memmem::find_iter(context, secret) {
        if at < last {
            continue; // overlapping occurrence, already covered
        }
        out.extend_from_slice(&context[last..at]);
        out.extend_from_slice(&red);
        last = at + secret.len();
    }
    out.extend_from_slice(&context[last..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn fnv1a64_matches_the_published_test_vectors() {
        // Vectors from the FNV reference test suite.
        for (input, want) in [
            (&b""[..], 0xcbf29ce484222325u64),
            (b"a", 0xaf63dc4c8601ec8c),
            (b"foobar", 0x85944171f73967e8),
        ] {
            let mut h = Fnv1a64::default();
            h.write(input);
            assert_eq!(h.finish(), want, "{:?}", String::from_utf8_lossy(input));
        }
    }

    #[test]
    fn end_position_is_just_past_the_secret() {
        let p = ObjPath::from_path(Path::new("a"));
        let one = Finding::new("r", "", p.clone(), 3, 5, 0, b"abcd".to_vec());
        assert_eq!((one.end_line(), one.end_column()), (3, 9));
        let multi = Finding::new("r", "", p, 3, 5, 0, b"ab\ncdef\nxy".to_vec());
        assert_eq!((multi.end_line(), multi.end_column()), (5, 3));
    }

    #[test]
    fn redaction_never_shows_the_whole_secret() {
        for len in 0..40 {
            let secret: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
            let red = redact(&secret);
            let shown = &red[..red.len() - "…".len()];
            assert!(red.ends_with("…".as_bytes()));
            assert!(shown.len() <= REDACT_MAX_PREFIX);
            assert!(len == 0 || shown.len() < len, "len {len}");
            assert!(secret.starts_with(shown));
        }
    }

    #[test]
    fn redact_percent_hides_that_share_and_never_the_whole_secret() {
        let s = b"0123456789abcdefghij";
        assert_eq!(redact_percent(s, Some(100)), "…".as_bytes());
        assert_eq!(redact_percent(s, Some(75)), "01234…".as_bytes());
        assert_eq!(
            redact_percent(s, Some(0)),
            "0123456789abcdefghi…".as_bytes()
        );
        assert_eq!(redact_percent(s, None), redact(s));
        assert_eq!(redact_percent(b"", Some(50)), "…".as_bytes());
    }

    #[test]
    fn redaction_does_not_split_a_utf8_character() {
        // 'é' is two bytes; a cut at byte 1 would split it.
        let red = redact("éabcdefg".as_bytes());
        assert!(std::str::from_utf8(&red).is_ok());
    }

    #[test]
    fn redact_in_replaces_every_copy_of_the_secret() {
        let out = redact_in(b"k=SECRETVALUE k2=SECRETVALUE", b"SECRETVALUE");
        assert_eq!(out, "k=SE… k2=SE…".as_bytes());
    }

    #[test]
    fn fingerprint_ignores_position_but_not_occurrence() {
        let p = ObjPath::from_path(Path::new("a.env"));
        let f0 = fingerprint("r", &p, b"s", 0);
        assert_eq!(f0.len(), 16);
        assert_ne!(f0, fingerprint("r", &p, b"s", 1));
        assert_ne!(f0, fingerprint("r2", &p, b"s", 0));
        assert_ne!(f0, fingerprint("r", &p.member(b"m"), b"s", 0));
        assert_eq!(f0, fingerprint("r", &p, b"s", 0));
    }

    #[test]
    fn bang_inside_a_name_does_not_alias_a_member() {
        let a = ObjPath::from_file_bytes(b"x!y");
        let b = ObjPath::from_file_bytes(b"x").member(b"y");
        assert_eq!(a.to_bytes(), b.to_bytes());
        assert_ne!(fingerprint("r", &a, b"s", 0), fingerprint("r", &b, b"s", 0));
    }
}
