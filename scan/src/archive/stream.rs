//! Byte sources under the archive readers: a file read by position, a parent
//! cursor's current member, and the gzip layer with its inflation guard.

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;

use super::cursor::{Meter, ParentMember};
use super::error::{ArchiveError, ErrorScope};
use crate::skip::SkipReason;

/// Decompressed bytes a gzip stream or zip member may produce before the
/// inflation ratio is checked at all: small highly-compressible files (a
/// 100 KB run of spaces inflates 1000:1) are normal; bombs are not small.
pub const INFLATION_GRACE: u64 = 1024 * 1024;

/// Positional read that retries `EINTR`.
pub(crate) fn read_at(file: &File, buf: &mut [u8], pos: u64) -> io::Result<usize> {
    loop {
        match file.read_at(buf, pos) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            other => return other,
        }
    }
}

/// Reads from `*pos` but not past `end`, advancing `*pos`.
pub(crate) fn read_range(
    file: &File,
    pos: &mut u64,
    end: u64,
    buf: &mut [u8],
) -> io::Result<usize> {
    let left = end.saturating_sub(*pos);
    let want = usize::try_from(left).map_or(buf.len(), |l| l.min(buf.len()));
    if want == 0 {
        return Ok(0);
    }
    let n = read_at(file, &mut buf[..want], *pos)?;
    *pos += n as u64;
    Ok(n)
}

/// Fills `buf` from `r` until it is full or `r` ends; returns the count.
pub(crate) fn read_full<R: Read + ?Sized>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Where an archive's raw bytes come from.
pub(crate) enum Source {
    /// A file on disk (or a spooled temp file), read by position.
    File { file: File, pos: u64, len: u64 },
    /// The current member of the enclosing archive.
    Parent(ParentMember),
}

impl Source {
    pub(crate) fn file(file: File) -> Result<Source, ArchiveError> {
        let len = file
            .metadata()
            .map_err(|e| ArchiveError::from_io(&e, ErrorScope::Archive))?
            .len();
        Ok(Source::File { file, pos: 0, len })
    }
}

impl Read for Source {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Source::File { file, pos, len } => read_range(file, pos, *len, buf),
            Source::Parent(p) => p.read(buf),
        }
    }
}

/// Counts the bytes read through it (the compressed input of a decoder).
pub(crate) struct Counted<R> {
    pub(crate) inner: R,
    pub(crate) count: u64,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count += n as u64;
        Ok(n)
    }
}

/// True when `out` decompressed bytes from `input` compressed bytes break the
/// ratio (0 disables the check; the first [`INFLATION_GRACE`] bytes are free).
pub(crate) fn over_ratio(out: u64, input: u64, max_ratio: u64) -> bool {
    max_ratio != 0
        && out > INFLATION_GRACE
        && u128::from(out) > u128::from(max_ratio) * u128::from(input.max(1))
}

/// A gzip decoder (concatenated members are one stream, as `gunzip` reads
/// them) that refuses to inflate past the ratio.
pub(crate) struct GzLayer {
    dec: flate2::read::MultiGzDecoder<Counted<Source>>,
    out: u64,
    max_ratio: u64,
    /// As [`DecLayer`]'s: an error met while reading the head, returned by
    /// the next read.
    deferred: Option<io::Error>,
}

/// Fills `head` from `r` as far as it goes. An error ends the filling and
/// is returned beside the bytes read before it, which the caller replays
/// before it reports the error: a stream that fails early still has its
/// good start scanned (the layers' `read_head`).
fn read_head_deferring(r: &mut impl Read, head: &mut [u8]) -> (usize, Option<io::Error>) {
    let mut got = 0;
    while got < head.len() {
        match r.read(&mut head[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return (got, Some(e)),
        }
    }
    (got, None)
}

impl GzLayer {
    pub(crate) fn new(src: Source, max_ratio: u64) -> Self {
        GzLayer {
            dec: flate2::read::MultiGzDecoder::new(Counted {
                inner: src,
                count: 0,
            }),
            out: 0,
            max_ratio,
            deferred: None,
        }
    }

    /// [`DecLayer::read_head`] for gzip.
    pub(crate) fn read_head(&mut self, head: &mut [u8]) -> usize {
        let (got, err) = read_head_deferring(self, head);
        self.deferred = err;
        got
    }

    /// The original file name stored in the gzip header, if any (known after
    /// the first read).
    pub(crate) fn file_name(&self) -> Option<Vec<u8>> {
        self.dec
            .header()
            .and_then(|h| h.filename())
            .map(<[u8]>::to_vec)
    }
}

impl Read for GzLayer {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(e) = self.deferred.take() {
            return Err(e);
        }
        let n = self.dec.read(buf)?;
        self.out += n as u64;
        if over_ratio(self.out, self.dec.get_ref().count, self.max_ratio) {
            return Err(ArchiveError::new(
                SkipReason::ArchiveInflation,
                ErrorScope::Archive,
                format!(
                    "gzip stream inflated {} bytes from {}",
                    self.out,
                    self.dec.get_ref().count
                ),
            )
            .into_io());
        }
        Ok(n)
    }
}

/// The compressed single-file formats read besides gzip.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Codec {
    /// `.bz2` (concatenated streams read as one, as `bunzip2` does).
    Bzip2,
    /// `.xz` (concatenated streams read as one, as `xz -d` does).
    Xz,
    /// `.zst` (every frame, one after another, as `zstd -d` reads them;
    /// skippable frames are skipped).
    Zstd,
}

/// The most memory an xz stream's dictionary may ask for: 64 MiB (what
/// `xz -9` uses). A stream that wants more is refused, not decoded.
pub(crate) const XZ_MEM_LIMIT_KIB: u32 = 64 * 1024;

enum Dec {
    Bzip2(bzip2::read::MultiBzDecoder<Counted<Source>>),
    Xz(Box<lzma_rust2::XzReader<Counted<Source>>>),
    Zstd(Box<ZstdFrames<Counted<Source>>>),
}

/// A bzip2, xz or zstd decoder that refuses to inflate past the ratio, as
/// [`GzLayer`] does for gzip.
pub(crate) struct DecLayer {
    dec: Dec,
    out: u64,
    max_ratio: u64,
    /// An error met while reading the head for detection, returned by the
    /// next read, after the head's bytes have been replayed.
    deferred: Option<io::Error>,
}

impl DecLayer {
    pub(crate) fn new(src: Source, codec: Codec, max_ratio: u64) -> io::Result<Self> {
        let counted = Counted {
            inner: src,
            count: 0,
        };
        let dec = match codec {
            Codec::Bzip2 => Dec::Bzip2(bzip2::read::MultiBzDecoder::new(counted)),
            Codec::Xz => Dec::Xz(Box::new(lzma_rust2::XzReader::new_mem_limit(
                counted,
                true,
                XZ_MEM_LIMIT_KIB,
            ))),
            Codec::Zstd => Dec::Zstd(Box::new(ZstdFrames::new(counted)?)),
        };
        Ok(DecLayer {
            dec,
            out: 0,
            max_ratio,
            deferred: None,
        })
    }

    /// Fills `head` as far as the stream goes (detection wants its first
    /// [`SNIFF_LEN`](super::SNIFF_LEN) bytes). An error keeps the bytes read
    /// before it: they are returned, and the error comes from the next read,
    /// so a stream cut short still has its good start scanned.
    pub(crate) fn read_head(&mut self, head: &mut [u8]) -> usize {
        let (got, err) = read_head_deferring(self, head);
        self.deferred = err;
        got
    }

    fn compressed_in(&self) -> u64 {
        match &self.dec {
            Dec::Bzip2(d) => d.get_ref().count,
            Dec::Xz(d) => d.inner().count,
            Dec::Zstd(d) => d.src.count,
        }
    }
}

impl Read for DecLayer {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(e) = self.deferred.take() {
            return Err(e);
        }
        let n = match &mut self.dec {
            Dec::Bzip2(d) => d.read(buf)?,
            Dec::Xz(d) => d.read(buf)?,
            Dec::Zstd(d) => d.read(buf)?,
        };
        self.out += n as u64;
        let cin = self.compressed_in();
        if over_ratio(self.out, cin, self.max_ratio) {
            return Err(ArchiveError::new(
                SkipReason::ArchiveInflation,
                ErrorScope::Archive,
                format!("compressed stream inflated {} bytes from {cin}", self.out),
            )
            .into_io());
        }
        Ok(n)
    }
}

/// A zstd stream of one or more frames, decoded one frame after another
/// into one output (what `zstd -d` and `pzstd` write: a multi-frame file is
/// the concatenation of its frames' contents). Skippable frames (magic
/// `0x184D2A50`-`0x184D2A5F`) are skipped without being buffered.
/// `ruzstd`'s `StreamingDecoder` reads one frame only.
pub(crate) struct ZstdFrames<R: Read> {
    pub(crate) src: R,
    dec: ruzstd::decoding::FrameDecoder,
    /// The input ended cleanly after a whole frame.
    done: bool,
}

impl<R: Read> ZstdFrames<R> {
    pub(crate) fn new(src: R) -> io::Result<Self> {
        let mut z = ZstdFrames {
            src,
            dec: ruzstd::decoding::FrameDecoder::new(),
            done: false,
        };
        z.done = !z.next_frame()?;
        Ok(z)
    }

    /// Reads the next frame's header; false at a clean end of the input
    /// (no byte left between frames).
    fn next_frame(&mut self) -> io::Result<bool> {
        use ruzstd::decoding::errors::{FrameDecoderError, ReadFrameHeaderError};
        loop {
            let mut first = [0u8; 1];
            let n = loop {
                match self.src.read(&mut first) {
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    r => break r?,
                }
            };
            if n == 0 {
                return Ok(false);
            }
            let mut header = (&first[..]).chain(&mut self.src);
            match self.dec.init(&mut header) {
                Ok(()) => return Ok(true),
                Err(FrameDecoderError::ReadFrameHeaderError(ReadFrameHeaderError::SkipFrame {
                    length,
                    ..
                })) => {
                    let want = u64::from(length);
                    let got = io::copy(&mut (&mut self.src).take(want), &mut io::sink())?;
                    if got < want {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            format!("zstd skippable frame cut short: {got} of {want} bytes"),
                        ));
                    }
                }
                Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e.to_string())),
            }
        }
    }
}

impl<R: Read> Read for ZstdFrames<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        use ruzstd::decoding::BlockDecodingStrategy;
        if buf.is_empty() {
            return Ok(0);
        }
        while !self.done {
            // As ruzstd's StreamingDecoder: decode blocks until a buffer's
            // worth can be collected or the frame ends.
            while self.dec.can_collect() < buf.len() && !self.dec.is_finished() {
                let more = buf.len() - self.dec.can_collect();
                self.dec
                    .decode_blocks(&mut self.src, BlockDecodingStrategy::UptoBytes(more))
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
            }
            let n = self.dec.read(buf)?;
            if n > 0 {
                return Ok(n);
            }
            // This frame is drained: on to the next, if any.
            self.done = !self.next_frame()?;
        }
        Ok(0)
    }
}

/// The byte stream a tar or gzip reader consumes, with the bytes already read
/// to detect the format replayed first.
pub(crate) struct Stream {
    head: Vec<u8>,
    head_pos: usize,
    body: StreamBody,
}

pub(crate) enum StreamBody {
    Plain(Source),
    Gz(Box<GzLayer>),
    Dec(Box<DecLayer>),
}

impl Stream {
    pub(crate) fn new(head: Vec<u8>, body: StreamBody) -> Self {
        Stream {
            head,
            head_pos: 0,
            body,
        }
    }

    /// Skips `n` bytes. A plain file seeks for free; anything else is read
    /// and discarded, and what it decompressed is charged to the meter.
    pub(crate) fn skip(&mut self, mut n: u64, meter: &mut Meter) -> Result<(), ArchiveError> {
        let from_head =
            (self.head.len() - self.head_pos).min(usize::try_from(n).unwrap_or(usize::MAX));
        self.head_pos += from_head;
        n -= from_head as u64;
        if n == 0 {
            return Ok(());
        }
        if let StreamBody::Plain(Source::File { pos, len, .. }) = &mut self.body {
            let to = pos.saturating_add(n);
            if to > *len {
                return Err(ArchiveError::corrupt(
                    ErrorScope::Archive,
                    "archive truncated inside a member",
                ));
            }
            *pos = to;
            return Ok(());
        }
        let mut scratch = [0u8; 8192];
        while n > 0 {
            let room = n.min(meter.room()?);
            let want = usize::try_from(room).map_or(scratch.len(), |n| n.min(scratch.len()));
            let got = self
                .read(&mut scratch[..want])
                .map_err(|e| ArchiveError::from_io(&e, ErrorScope::Archive))?;
            if got == 0 {
                return Err(ArchiveError::corrupt(
                    ErrorScope::Archive,
                    "archive truncated inside a member",
                ));
            }
            n -= got as u64;
            meter.charge_discarded(got as u64)?;
        }
        Ok(())
    }

    pub(crate) fn gz_file_name(&self) -> Option<Vec<u8>> {
        match &self.body {
            StreamBody::Gz(g) => g.file_name(),
            StreamBody::Plain(_) | StreamBody::Dec(_) => None,
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.head_pos < self.head.len() {
            let n = (self.head.len() - self.head_pos).min(buf.len());
            buf[..n].copy_from_slice(&self.head[self.head_pos..self.head_pos + n]);
            self.head_pos += n;
            return Ok(n);
        }
        match &mut self.body {
            StreamBody::Plain(s) => s.read(buf),
            StreamBody::Gz(g) => g.read(buf),
            StreamBody::Dec(d) => d.read(buf),
        }
    }
}
