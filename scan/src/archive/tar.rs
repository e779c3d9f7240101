//! The tar reader: walks 512-byte headers over any byte stream, one member at
//! a time, holding no more than one header and one metadata record.
//!
//! Header fields are decoded with the `tar` crate's `Header`; the stream
//! walking is ours because `tar::Archive::entries` borrows the archive, and
//! the cursor must be an owned value that an Enumerate task can carry.

use tar::EntryType;

use super::cursor::{Meter, RawHeader};
use super::detect::is_tar_header;
use super::error::{ArchiveError, ErrorScope};
use super::stream::{read_full, Stream};
use crate::skip::SkipReason;

const BLOCK: u64 = 512;
/// Largest GNU long-name or PAX record accepted.
const MAX_META_BYTES: u64 = 1024 * 1024;
/// Most metadata headers (long names, PAX records) allowed before one entry.
const MAX_META_HEADERS: u32 = 32;

pub(crate) struct TarReader {
    stream: Stream,
    /// Data bytes of the current entry not yet read or skipped.
    left: u64,
    /// Padding after the current entry's data.
    pad: u64,
}

fn corrupt(detail: &str) -> ArchiveError {
    ArchiveError::corrupt(ErrorScope::Archive, detail)
}

fn io_err(e: &std::io::Error) -> ArchiveError {
    ArchiveError::from_io(e, ErrorScope::Archive)
}

fn trim_nul(mut v: Vec<u8>) -> Vec<u8> {
    while v.last() == Some(&0) {
        v.pop();
    }
    v
}

impl TarReader {
    pub(crate) fn new(stream: Stream) -> Self {
        TarReader {
            stream,
            left: 0,
            pad: 0,
        }
    }

    fn read_meta(&mut self, size: u64, meter: &mut Meter) -> Result<Vec<u8>, ArchiveError> {
        if size > MAX_META_BYTES {
            return Err(corrupt("tar metadata record too large"));
        }
        let mut data = vec![0u8; size as usize];
        if read_full(&mut self.stream, &mut data).map_err(|e| io_err(&e))? != data.len() {
            return Err(corrupt("tar truncated inside a metadata record"));
        }
        self.stream.skip(pad_of(size), meter)?;
        Ok(data)
    }

    pub(crate) fn next_header(
        &mut self,
        meter: &mut Meter,
    ) -> Result<Option<RawHeader>, ArchiveError> {
        let mut long_name: Option<Vec<u8>> = None;
        let mut pax_size: Option<u64> = None;
        let mut pax_sparse = false;
        let mut meta_headers = 0u32;
        loop {
            let mut block = [0u8; BLOCK as usize];
            let got = read_full(&mut self.stream, &mut block).map_err(|e| io_err(&e))?;
            if got == 0 {
                // Ended at a header boundary without the zero blocks: accept.
                return Ok(None);
            }
            if got < block.len() {
                return Err(corrupt("tar truncated inside a header"));
            }
            if block.iter().all(|b| *b == 0) {
                return Ok(None);
            }
            if !is_tar_header(&block) {
                return Err(corrupt("tar header checksum mismatch"));
            }
            let h = tar::Header::from_byte_slice(&block);
            let header_size = h
                .entry_size()
                .map_err(|_| corrupt("tar header size field unreadable"))?;
            let etype = h.entry_type();
            if matches!(
                etype,
                EntryType::GNULongName
                    | EntryType::GNULongLink
                    | EntryType::XHeader
                    | EntryType::XGlobalHeader
            ) {
                meta_headers += 1;
                if meta_headers > MAX_META_HEADERS {
                    return Err(corrupt("too many tar metadata headers in a row"));
                }
                let data = self.read_meta(header_size, meter)?;
                match etype {
                    EntryType::GNULongName => long_name = Some(trim_nul(data)),
                    EntryType::XHeader => {
                        for ext in tar::PaxExtensions::new(&data).flatten() {
                            match ext.key_bytes() {
                                b"path" => long_name = Some(ext.value_bytes().to_vec()),
                                b"size" => {
                                    pax_size = Some(
                                        ext.value()
                                            .ok()
                                            .and_then(|v| v.trim().parse().ok())
                                            .ok_or_else(|| corrupt("bad PAX size"))?,
                                    )
                                }
                                k if k.starts_with(b"GNU.sparse.") => pax_sparse = true,
                                _ => {}
                            }
                        }
                    }
                    _ => {}
                }
                continue;
            }
            let size = pax_size.unwrap_or(header_size);
            self.left = size;
            self.pad = pad_of(size);
            let name = long_name.unwrap_or_else(|| h.path_bytes().into_owned());
            let is_file = !(etype.is_dir()
                || etype.is_symlink()
                || etype.is_hard_link()
                || etype.is_character_special()
                || etype.is_block_special()
                || etype.is_fifo());
            let problem = if etype.is_gnu_sparse() {
                Some("GNU sparse tar member")
            } else if pax_sparse {
                Some("PAX sparse tar member")
            } else {
                None
            }
            .map(|what| {
                ArchiveError::new(
                    SkipReason::ArchiveUnsupported(what),
                    ErrorScope::Member,
                    what,
                )
            });
            return Ok(Some(RawHeader {
                name,
                size_hint: Some(size),
                is_file,
                problem,
            }));
        }
    }

    pub(crate) fn read(&mut self, buf: &mut [u8]) -> Result<usize, ArchiveError> {
        if self.left == 0 || buf.is_empty() {
            return Ok(0);
        }
        let want = usize::try_from(self.left).map_or(buf.len(), |l| l.min(buf.len()));
        let n = std::io::Read::read(&mut self.stream, &mut buf[..want]).map_err(|e| io_err(&e))?;
        if n == 0 {
            return Err(corrupt("tar truncated inside a member"));
        }
        self.left -= n as u64;
        Ok(n)
    }

    /// Skips what is left of the current entry and its padding.
    pub(crate) fn skip_rest(&mut self, meter: &mut Meter) -> Result<(), ArchiveError> {
        let n = self.left + self.pad;
        self.left = 0;
        self.pad = 0;
        self.stream.skip(n, meter)
    }
}

fn pad_of(size: u64) -> u64 {
    (BLOCK - size % BLOCK) % BLOCK
}
