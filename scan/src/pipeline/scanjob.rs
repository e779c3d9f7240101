//! Scan: run the rules over a chunk's owned range and turn the matches into
//! findings (README.md, step 5).

use std::borrow::Cow;

use crate::chunk::Locator;
use crate::decode::{self, Encoding};
use crate::pool::PooledBuf;
use crate::report::Finding;
use crate::rules::{self, Match, RuleId, RuleSet};
use crate::trace::TaskKind;

use super::frontier::ObjectRef;
use super::task::ChunkSpan;
use super::{Ctx, Note, Shared};

/// Bytes of the secret's line kept before the secret for the `text`
/// format's context row.
const CONTEXT_BEFORE: usize = 80;
/// Bytes of the line kept after the secret's start.
const CONTEXT_AFTER: usize = 200;

pub(super) fn run(
    shared: &Shared,
    obj: ObjectRef,
    buf: PooledBuf,
    chunk: ChunkSpan,
    ctx: &mut Ctx,
) -> Option<Note> {
    let sc = &mut ctx.scratch;
    sc.counters.scan_count += 1;
    sc.counters.bytes_scanned += u64::from(chunk.new_bytes);
    if let Some(p) = &shared.progress {
        p.add_bytes(u64::from(chunk.new_bytes));
    }
    let path = obj.path();
    // Rules with a `path` regex and path allowlists read it: set it for
    // every chunk (a no-op compare when the worker's last chunk was the same
    // object's).
    let text: Cow<'_, str> = if path.is_archive_member() {
        Cow::Owned(path.to_string())
    } else {
        String::from_utf8_lossy(path.file_bytes())
    };
    sc.rules.set_path(Some(&text));
    sc.matches.clear();
    shared
        .rules
        .scan(&buf, chunk.owned(), &mut sc.rules, &mut sc.matches);
    if let Some(git) = obj.desc().git.as_deref() {
        // A git blob read by what it adds: only secrets touching an added
        // byte (`git/added.rs`).
        let base = chunk.base_offset;
        sc.matches
            .retain(|m| git.reports(base + m.secret_start as u64, base + m.secret_end as u64));
    }
    if !sc.matches.is_empty() {
        sc.counters.raw_findings += sc.matches.len() as u64;
        if let Some(p) = &shared.progress {
            p.add_findings(sc.matches.len() as u64);
        }
        let meta = chunk.meta(buf.len());
        let mut loc = Locator::new(&meta);
        for m in &sc.matches {
            if line_allows(&buf, m.secret_start, m.secret_end) {
                sc.counters.inline_allowed += 1;
                continue;
            }
            let secret = &buf[m.secret_start..m.secret_end];
            let f = finding(shared, &obj, &buf, m.rule, m.secret_start, secret, &mut loc);
            sc.findings.push(f);
        }
    }
    if shared.settings.max_decode_depth > 0 {
        scan_decoded(shared, &obj, &buf, &chunk, ctx);
    }
    let note = Note::of(
        ctx,
        TaskKind::Scan,
        &obj,
        chunk.base_offset + u64::from(chunk.owned_start),
        u64::from(chunk.new_bytes),
    );
    // The buffer goes back to the pool here; a FetchSync parked on an empty
    // pool is woken by the runner's wake check right after this task.
    drop(buf);
    note
}

/// A secret found in decoded text: where its outermost encoded span lies in
/// the chunk, the decodings, the rule and the decoded secret.
struct DecodedHit {
    span: (usize, usize),
    chain: Vec<Encoding>,
    rule: RuleId,
    secret: Vec<u8>,
}

/// Runs the rules again over the text of every encoded span whose first byte
/// the chunk owns (`scan/src/decode/`), and reports what they find at the
/// encoded span.
fn scan_decoded(shared: &Shared, obj: &ObjectRef, buf: &[u8], chunk: &ChunkSpan, ctx: &mut Ctx) {
    let sc = &mut ctx.scratch;
    let mut hits = Vec::new();
    let mut chain = Vec::new();
    let mut level = Level {
        rules: &shared.rules,
        rule_scratch: &mut sc.rules,
        scratch: &mut sc.decode,
        matches: &mut sc.matches,
        max_depth: shared.settings.max_decode_depth,
        decoded_spans: 0,
    };
    level.scan(buf, chunk.owned(), 0, None, &mut chain, &mut hits);
    sc.counters.decoded_spans += level.decoded_spans;
    if let Some(git) = obj.desc().git.as_deref() {
        let base = chunk.base_offset;
        hits.retain(|h| git.reports(base + h.span.0 as u64, base + h.span.1 as u64));
    }
    if hits.is_empty() {
        return;
    }
    hits.sort_by(|a, b| (a.span, &a.secret, a.rule).cmp(&(b.span, &b.secret, b.rule)));
    hits.dedup_by(|a, b| a.span == b.span && a.secret == b.secret && a.rule == b.rule);
    sc.counters.raw_findings += hits.len() as u64;
    let meta = chunk.meta(buf.len());
    let mut loc = Locator::new(&meta);
    for hit in hits {
        let (start, end) = hit.span;
        if line_allows(buf, start, end) {
            sc.counters.inline_allowed += 1;
            continue;
        }
        let mut f = finding(shared, obj, buf, hit.rule, start, hit.secret, &mut loc);
        f.decoded = hit.chain;
        f.encoded_len = (end - start) as u64;
        sc.findings.push(f);
    }
}

/// One worker's decoding state, borrowed for one chunk.
struct Level<'a> {
    rules: &'a RuleSet,
    rule_scratch: &'a mut rules::Scratch,
    scratch: &'a mut decode::Scratch,
    matches: &'a mut Vec<Match>,
    max_depth: u32,
    decoded_spans: u64,
}

impl Level<'_> {
    /// Decodes the spans of `buf` that start in `owned` at decoding depth
    /// `depth` (0: the file's own bytes), scans each text, and goes one
    /// level deeper while `max_depth` allows. `outer` is the outermost span
    /// (in the chunk) the text came from.
    fn scan(
        &mut self,
        buf: &[u8],
        owned: std::ops::Range<usize>,
        depth: usize,
        outer: Option<(usize, usize)>,
        chain: &mut Vec<Encoding>,
        hits: &mut Vec<DecodedHit>,
    ) {
        if self.scratch.spans.len() <= depth {
            self.scratch.spans.resize_with(depth + 1, Vec::new);
            self.scratch.decoded.resize_with(depth + 1, Vec::new);
        }
        let mut spans = std::mem::take(&mut self.scratch.spans[depth]);
        let mut text = std::mem::take(&mut self.scratch.decoded[depth]);
        spans.clear();
        decode::spans(buf, owned, &mut spans);
        for s in &spans {
            if !decode::decode(s.encoding, &buf[s.start..s.end], &mut text) {
                continue;
            }
            self.decoded_spans += 1;
            let span = outer.unwrap_or((s.start, s.end));
            chain.push(s.encoding);
            self.matches.clear();
            self.rules
                .scan(&text, 0..text.len(), self.rule_scratch, self.matches);
            // Path-only rules match the file, not the text: they report an
            // empty secret, already reported by the plain scan.
            for m in self
                .matches
                .iter()
                .filter(|m| m.secret_end > m.secret_start)
            {
                hits.push(DecodedHit {
                    span,
                    chain: chain.clone(),
                    rule: m.rule,
                    secret: text[m.secret_start..m.secret_end].to_vec(),
                });
            }
            if (depth as u32) + 1 < self.max_depth {
                self.scan(&text, 0..text.len(), depth + 1, Some(span), chain, hits);
            }
            chain.pop();
        }
        self.scratch.spans[depth] = spans;
        self.scratch.decoded[depth] = text;
    }
}

/// A finding of `rule` whose secret is `secret` and whose place in the
/// chunk is `buf[at]` (the secret's first byte, or an encoded span's).
fn finding(
    shared: &Shared,
    obj: &ObjectRef,
    buf: &[u8],
    rule: RuleId,
    at: usize,
    secret: impl Into<Vec<u8>>,
    loc: &mut Locator,
) -> Finding {
    let info = shared.rules.rule(rule);
    let pos = loc.locate(buf, at);
    let mut f = Finding::new(
        info.id.as_str(),
        info.description.as_str(),
        obj.path().clone(),
        pos.line,
        pos.column,
        pos.offset,
        secret,
    );
    f.precision = info.precision;
    f.commit = obj
        .desc()
        .git
        .as_ref()
        .map(|g| std::sync::Arc::clone(&g.commit));
    f.context = context_line(buf, at);
    f
}

/// The markers that suppress a finding on their line: gitleaks' spelling
/// and magpie's own.
pub const ALLOW_MARKERS: [&[u8]; 2] = [b"gitleaks:allow", b"magpie:allow"];

/// Whether the line holding the secret `buf[start..end]` carries an allow
/// marker (anywhere on the line, usually in a trailing comment). The line
/// is searched as far as the buffer holds it: at least the rule context on
/// each side of the secret.
fn line_allows(buf: &[u8], start: usize, end: usize) -> bool {
    let from = memchr::memrchr(b'\n', &buf[..start]).map_or(0, |i| i + 1);
    let to = memchr::memchr(b'\n', &buf[end..]).map_or(buf.len(), |i| end + i);
    let line = &buf[from..to];
    ALLOW_MARKERS
        .iter()
        .any(|m| memchr::memmem::find(line, m).is_some())
}

/// The line holding `buf[pos]`, clipped to [`CONTEXT_BEFORE`] bytes before
/// `pos` and [`CONTEXT_AFTER`] after it, within the buffer.
fn context_line(buf: &[u8], pos: usize) -> Vec<u8> {
    let lo = pos.saturating_sub(CONTEXT_BEFORE);
    let start = memchr::memrchr(b'\n', &buf[lo..pos]).map_or(lo, |i| lo + i + 1);
    let hi = (pos + CONTEXT_AFTER).min(buf.len());
    let end = memchr::memchr(b'\n', &buf[pos..hi]).map_or(hi, |i| pos + i);
    buf[start..end].to_vec()
}

#[cfg(test)]
mod tests {
    use super::context_line;

    #[test]
    fn an_allow_marker_on_the_secrets_line_suppresses_it_and_only_there() {
        use super::line_allows;
        let buf = b"a = SECRET1 # gitleaks:allow\nb = SECRET2\nc = SECRET3 // magpie:allow";
        let at = |s: &[u8]| memchr::memmem::find(buf, s).unwrap();
        assert!(line_allows(buf, at(b"SECRET1"), at(b"SECRET1") + 7));
        assert!(!line_allows(buf, at(b"SECRET2"), at(b"SECRET2") + 7));
        assert!(line_allows(buf, at(b"SECRET3"), at(b"SECRET3") + 7));
    }

    #[test]
    fn context_is_the_secrets_line_clipped_to_the_buffer() {
        let buf = b"first\nkey = SECRET here\nlast";
        let pos = 12;
        assert_eq!(context_line(buf, pos), b"key = SECRET here");
        let long = [b'x'; 1000];
        assert_eq!(context_line(&long, 500).len(), 280);
        assert_eq!(context_line(b"abc", 0), b"abc");
    }
}
