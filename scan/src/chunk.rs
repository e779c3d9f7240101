//! Chunk planning: how a file read in fixed-size chunks by sequential
//! FetchSync tasks becomes independent Scan tasks that together report every
//! match exactly once.
//!
//! With chunk size `C` and `ctx = RuleSet::context_len()`, chunk `i` reads the
//! new bytes `[iC, iC + n)` (`n = C` except for the last chunk). Its buffer
//! holds a *prefix* carried from the previous buffer, then those new bytes:
//!
//! ```text
//! buffer:  [ prefix (min(2·ctx, iC) bytes) | new bytes (n) ]
//! owned:        [iC − ctx ................ iC + n − ctx)      (absolute)
//! ```
//!
//! 1. The owned ranges partition the file: chunk 0 owns from 0, each chunk's
//!    owned end is the next chunk's owned start (`iC + C − ctx`), and the
//!    last chunk owns through the end of the file. So each secret start is
//!    owned by exactly one chunk, and [`RuleSet::scan`] reports a match only
//!    where its secret starts in `owned`.
//! 2. Every owned position has `ctx` bytes of buffer before it (the prefix
//!    is `2·ctx` long, or reaches the file start) and `ctx` bytes after it
//!    (the owned range stops `ctx` before the buffer end, except in the
//!    last chunk, whose buffer ends with the file). That is the contract of
//!    `RuleSet::scan`, whose result is then a pure function of the file's
//!    bytes, whatever the chunk size.
//! 3. The prefix is always available from the previous buffer: that buffer
//!    covers `[max(0, (i−1)C − 2·ctx), iC)`, which contains
//!    `[max(0, iC − 2·ctx), iC)`. Chunks smaller than `2·ctx` still work (the
//!    prefix then spans several earlier chunks' bytes), just wastefully.
//! 4. `bytes_scanned` counts only the new bytes, so the chunks of a file add
//!    up to its length.
//!
//! Lines and columns: [`ChunkCursor`] counts newlines once per byte, in the
//! part of each buffer that the next buffer does not repeat, and hands each
//! chunk the newline count and the offset of the last newline before its
//! buffer start. [`ChunkMeta::locate`] then turns a buffer position into an
//! absolute offset and a 1-based line and column without reading anything
//! outside that buffer, so a 200 MB line costs nothing extra.
//!
//! [`RuleSet::scan`]: crate::rules::RuleSet::scan

use std::ops::Range;

/// The default chunk size: 256 KiB.
pub const CHUNK_SIZE: usize = 256 * 1024;

/// Line bookkeeping at an absolute offset: what precedes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LineBase {
    /// Newlines (`\n`) before the offset.
    pub newlines: u64,
    /// Absolute offset of the last newline before the offset, if any.
    pub last_newline: Option<u64>,
}

/// Where a byte is, for reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    /// Absolute byte offset in the file.
    pub offset: u64,
    /// 1-based line.
    pub line: u64,
    /// 1-based column, in bytes.
    pub column: u64,
}

/// What one Scan task needs about its buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkMeta {
    /// 0-based chunk number within the file.
    pub index: u64,
    /// Absolute offset of `buffer[0]`.
    pub base_offset: u64,
    /// Bytes at the front of the buffer carried over from the previous one.
    pub prefix_len: usize,
    /// Total buffer length (prefix plus new bytes).
    pub len: usize,
    /// Buffer range whose secret starts this chunk reports.
    pub owned: Range<usize>,
    /// This chunk ends the file.
    pub is_last: bool,
    /// Lines before `base_offset`.
    pub lines: LineBase,
}

impl ChunkMeta {
    /// Bytes read for this chunk for the first time (the `bytes_scanned`
    /// metric); the prefix is not counted.
    pub fn new_bytes(&self) -> usize {
        self.len - self.prefix_len
    }

    /// Offset, line and column of `buffer[pos]`. `buf` is this chunk's
    /// buffer. Costs one newline count over `buf[..pos]`; use [`Locator`]
    /// for many positions.
    pub fn locate(&self, buf: &[u8], pos: usize) -> Location {
        Locator::new(self).locate(buf, pos)
    }
}

/// Locates several positions of one buffer in increasing order, counting
/// each newline once.
#[derive(Debug, Clone)]
pub struct Locator {
    base_offset: u64,
    /// Position up to which `newlines` and `last_newline` are counted.
    pos: usize,
    newlines: u64,
    last_newline: Option<u64>,
    start: LineBase,
}

impl Locator {
    pub fn new(meta: &ChunkMeta) -> Locator {
        Locator {
            base_offset: meta.base_offset,
            pos: 0,
            newlines: meta.lines.newlines,
            last_newline: meta.lines.last_newline,
            start: meta.lines,
        }
    }

    /// Offset, line and column of `buf[pos]`; cheapest when called with
    /// non-decreasing positions.
    pub fn locate(&mut self, buf: &[u8], pos: usize) -> Location {
        assert!(
            pos <= buf.len(),
            "position {pos} outside a buffer of {} bytes",
            buf.len()
        );
        if pos < self.pos {
            self.pos = 0;
            self.newlines = self.start.newlines;
            self.last_newline = self.start.last_newline;
        }
        let seg = &buf[self.pos..pos];
        let n = memchr::memchr_iter(b'\n', seg).count() as u64;
        if n > 0 {
            let last = memchr::memrchr(b'\n', seg).expect("a newline was counted");
            self.last_newline = Some(self.base_offset + (self.pos + last) as u64);
        }
        self.newlines += n;
        self.pos = pos;
        let offset = self.base_offset + pos as u64;
        let column = match self.last_newline {
            Some(nl) => offset - nl,
            None => offset + 1,
        };
        Location {
            offset,
            line: self.newlines + 1,
            column,
        }
    }
}

/// The sequential state of one file's reader: plans each chunk as it is
/// read and carries line counts forward.
#[derive(Debug, Clone)]
pub struct ChunkCursor {
    chunk_size: usize,
    context_len: usize,
    index: u64,
    /// Absolute offset of the next chunk's new bytes.
    next_start: u64,
    /// Lines before the next buffer's start.
    next_lines: LineBase,
    done: bool,
}

impl ChunkCursor {
    /// `chunk_size` new bytes per chunk (> 0); `context_len` from
    /// [`RuleSet::context_len`](crate::rules::RuleSet::context_len).
    pub fn new(chunk_size: usize, context_len: usize) -> ChunkCursor {
        assert!(chunk_size > 0, "chunk size must be positive");
        ChunkCursor {
            chunk_size,
            context_len,
            index: 0,
            next_start: 0,
            next_lines: LineBase::default(),
            done: false,
        }
    }

    pub fn chunk_size(&self) -> usize {
        self.chunk_size
    }

    /// Longest prefix a buffer can carry: `2 * context_len`.
    pub fn max_prefix(&self) -> usize {
        2 * self.context_len
    }

    /// Absolute offset of the next chunk's new bytes.
    pub fn next_offset(&self) -> u64 {
        self.next_start
    }

    /// Bytes the next buffer must start with: the last this-many bytes of the
    /// previous buffer.
    pub fn next_prefix_len(&self) -> usize {
        (self.max_prefix() as u64).min(self.next_start) as usize
    }

    /// Plans the chunk whose buffer is `buf`: [`next_prefix_len`] carried
    /// bytes followed by the bytes just read (at most `chunk_size`). `eof`:
    /// the file ends with this buffer (a short read, or the known size
    /// reached). A reader that only learns of the end from a read of 0 bytes
    /// passes a buffer of just the prefix with `eof = true`; that chunk owns
    /// the file's tail.
    ///
    /// Counts the newlines of the part of `buf` that the next buffer will
    /// not repeat.
    ///
    /// [`next_prefix_len`]: Self::next_prefix_len
    pub fn advance(&mut self, buf: &[u8], eof: bool) -> ChunkMeta {
        assert!(!self.done, "advance after the last chunk");
        let prefix_len = self.next_prefix_len();
        assert!(
            buf.len() >= prefix_len,
            "buffer shorter than its carried prefix"
        );
        let new = buf.len() - prefix_len;
        assert!(
            new <= self.chunk_size,
            "read {new} bytes into a chunk of {}",
            self.chunk_size
        );
        assert!(
            eof || new == self.chunk_size,
            "a short read must end the file"
        );
        let start = self.next_start;
        let end = start + new as u64;
        let base_offset = start - prefix_len as u64;
        let ctx = self.context_len as u64;
        let owned_start = start.saturating_sub(ctx);
        let owned_end = if eof {
            end
        } else {
            end.saturating_sub(ctx).max(owned_start)
        };
        let meta = ChunkMeta {
            index: self.index,
            base_offset,
            prefix_len,
            len: buf.len(),
            owned: (owned_start - base_offset) as usize..(owned_end - base_offset) as usize,
            is_last: eof,
            lines: self.next_lines,
        };
        // Lines before the next buffer's start: this buffer up to there.
        let next_base = end - (self.max_prefix() as u64).min(end);
        let upto = (next_base - base_offset) as usize;
        let seg = &buf[..upto];
        let n = memchr::memchr_iter(b'\n', seg).count() as u64;
        if n > 0 {
            let last = memchr::memrchr(b'\n', seg).expect("a newline was counted");
            self.next_lines.last_newline = Some(base_offset + last as u64);
        }
        self.next_lines.newlines += n;
        self.next_start = end;
        self.index += 1;
        self.done = eof;
        meta
    }
}

/// Splits an in-memory file into chunk buffers and their plans, exactly as
/// a reader following [`ChunkCursor`] would (tests, archives read whole).
pub fn plan_in_memory(
    data: &[u8],
    chunk_size: usize,
    context_len: usize,
) -> Vec<(Vec<u8>, ChunkMeta)> {
    let mut cur = ChunkCursor::new(chunk_size, context_len);
    let mut out: Vec<(Vec<u8>, ChunkMeta)> = Vec::new();
    let mut prev: Vec<u8> = Vec::new();
    loop {
        let p = cur.next_prefix_len();
        let start = cur.next_offset() as usize;
        let end = (start + chunk_size).min(data.len());
        let mut buf = Vec::with_capacity(p + end - start);
        buf.extend_from_slice(&prev[prev.len() - p..]);
        buf.extend_from_slice(&data[start..end]);
        let eof = end == data.len();
        let meta = cur.advance(&buf, eof);
        prev.clone_from(&buf);
        out.push((buf, meta));
        if eof {
            return out;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owned_ranges_partition_the_file_and_new_bytes_add_up() {
        for (len, c, ctx) in [
            (0, 4, 3),
            (1, 4, 3),
            (10, 4, 3),
            (100, 7, 20),
            (64, 16, 4),
            (48, 16, 0),
        ] {
            let data: Vec<u8> = (0..len).map(|i| b"ab\ncd"[i % 5]).collect();
            let chunks = plan_in_memory(&data, c, ctx);
            let mut next = 0u64;
            let mut total = 0;
            for (buf, m) in &chunks {
                assert_eq!(
                    &data[m.base_offset as usize..m.base_offset as usize + m.len],
                    &buf[..]
                );
                assert_eq!(
                    m.base_offset + m.owned.start as u64,
                    next,
                    "gap or overlap at chunk {}",
                    m.index
                );
                next = m.base_offset + m.owned.end as u64;
                // Context before and after the owned range (clamped to the file).
                assert!(m.owned.is_empty() || m.owned.start >= ctx || m.base_offset == 0);
                assert!(m.owned.is_empty() || m.len - m.owned.end >= ctx || m.is_last);
                total += m.new_bytes();
            }
            assert_eq!(next, len as u64);
            assert_eq!(total, len);
            assert!(chunks.last().unwrap().1.is_last);
        }
    }

    #[test]
    fn locate_matches_a_direct_count_in_every_chunk() {
        let data: Vec<u8> = (0..500u32)
            .map(|i| {
                if i % 37 == 5 || i % 11 == 0 {
                    b'\n'
                } else {
                    b'x'
                }
            })
            .collect();
        for (buf, m) in plan_in_memory(&data, 23, 9) {
            let mut loc = Locator::new(&m);
            for pos in 0..buf.len() {
                let off = m.base_offset as usize + pos;
                let line = data[..off].iter().filter(|&&b| b == b'\n').count() as u64 + 1;
                let col = off
                    - data[..off]
                        .iter()
                        .rposition(|&b| b == b'\n')
                        .map_or(0, |p| p + 1)
                    + 1;
                let want = Location {
                    offset: off as u64,
                    line,
                    column: col as u64,
                };
                assert_eq!(loc.locate(&buf, pos), want);
                assert_eq!(m.locate(&buf, pos), want);
            }
        }
    }

    #[test]
    fn a_read_of_zero_bytes_ends_the_file_with_a_prefix_only_chunk() {
        let data = [b'z'; 32];
        let mut cur = ChunkCursor::new(16, 2);
        let a = cur.advance(&data[..16], false);
        let mut b_buf = data[16 - cur.next_prefix_len()..16].to_vec();
        b_buf.extend_from_slice(&data[16..32]);
        let b = cur.advance(&b_buf, false);
        let tail = b_buf[b_buf.len() - cur.next_prefix_len()..].to_vec();
        let c = cur.advance(&tail, true);
        assert_eq!((a.owned.clone(), a.prefix_len), (0..14, 0));
        assert_eq!(b.base_offset + b.owned.start as u64, 14);
        assert_eq!(c.new_bytes(), 0);
        assert_eq!(c.base_offset + c.owned.start as u64, 30);
        assert_eq!(c.base_offset + c.owned.end as u64, 32);
    }
}
