//! Scan: run the rules over a chunk's owned range and turn the matches into
//! findings (README.md, step 5).

use std::borrow::Cow;

use crate::chunk::Locator;
use crate::pool::PooledBuf;
use crate::report::Finding;
use crate::rules::Match;
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
            sc.findings.push(finding(shared, &obj, &buf, m, &mut loc));
        }
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

fn finding(shared: &Shared, obj: &ObjectRef, buf: &[u8], m: &Match, loc: &mut Locator) -> Finding {
    let info = shared.rules.rule(m.rule);
    let at = loc.locate(buf, m.secret_start);
    let mut f = Finding::new(
        info.id.as_str(),
        info.description.as_str(),
        obj.path().clone(),
        at.line,
        at.column,
        at.offset,
        &buf[m.secret_start..m.secret_end],
    );
    f.precision = info.precision;
    f.commit = obj
        .desc()
        .git
        .as_ref()
        .map(|g| std::sync::Arc::clone(&g.commit));
    f.context = context_line(buf, m.secret_start);
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
