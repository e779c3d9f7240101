//! The zip reader: walks the central directory one record at a time and
//! decodes one member at a time, by position, from a file on disk.
//!
//! `zip::ZipArchive` keeps the metadata of every entry in memory (hundreds of
//! bytes each) and its member readers borrow the archive; `zip::ZipIterable`
//! streams the directory but its iterator is only reachable through a borrow
//! that restarts the pass. An owned cursor that may stop after any member
//! needs neither, so the directory records are parsed here (the layout is
//! APPNOTE.TXT 4.3.12-4.3.16 and 4.5.3) and members are inflated with
//! `flate2`, CRC-checked with `flate2::Crc`. Memory is one record and one
//! decoder, whatever the entry count.

use std::fs::File;
use std::io::Read;

use magpie_core::sync::Arc;

use super::cursor::RawHeader;
use super::error::{ArchiveError, ErrorScope};
use super::stream::{read_at, read_range};
use crate::skip::SkipReason;

const EOCD_SIG: &[u8; 4] = b"PK\x05\x06";
const EOCD_LEN: u64 = 22;
const Z64_LOCATOR_SIG: &[u8; 4] = b"PK\x06\x07";
const Z64_LOCATOR_LEN: u64 = 20;
const Z64_EOCD_SIG: &[u8; 4] = b"PK\x06\x06";
const Z64_EOCD_LEN: u64 = 56;
const CDH_SIG: &[u8; 4] = b"PK\x01\x02";
const CDH_LEN: u64 = 46;
const LFH_SIG: &[u8; 4] = b"PK\x03\x04";
const LFH_LEN: u64 = 30;
const MAX_COMMENT: u64 = 0xFFFF;

const FLAG_ENCRYPTED: u16 = 1;
const FLAG_STRONG_ENCRYPTION: u16 = 1 << 6;
const METHOD_STORED: u16 = 0;
const METHOD_DEFLATED: u16 = 8;
const METHOD_AES: u16 = 99;
const EXTRA_ZIP64: u16 = 0x0001;
const EXTRA_AES: u16 = 0x9901;

fn le16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn le64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

fn corrupt(scope: ErrorScope, detail: &str) -> ArchiveError {
    ArchiveError::corrupt(scope, detail)
}

/// Reads exactly `buf.len()` bytes at `pos`; running out is corruption.
fn read_exact_at(
    file: &File,
    buf: &mut [u8],
    pos: u64,
    scope: ErrorScope,
) -> Result<(), ArchiveError> {
    let mut got = 0;
    while got < buf.len() {
        match read_at(file, &mut buf[got..], pos + got as u64) {
            Ok(0) => {
                return Err(corrupt(
                    scope,
                    "zip structure runs past the end of the file",
                ))
            }
            Ok(n) => got += n,
            Err(e) => return Err(ArchiveError::from_io(&e, scope)),
        }
    }
    Ok(())
}

/// Finds the end-of-central-directory record in the last 64 KiB + 22 bytes:
/// the last signature whose comment fits in the file. Returns its offset and
/// its 22 bytes.
pub(crate) fn find_eocd(file: &File, len: u64) -> Result<(u64, [u8; 22]), ArchiveError> {
    if len < EOCD_LEN {
        return Err(corrupt(ErrorScope::Archive, "too short for a zip"));
    }
    let tail_len = len.min(EOCD_LEN + MAX_COMMENT);
    let mut tail = vec![0u8; tail_len as usize];
    read_exact_at(file, &mut tail, len - tail_len, ErrorScope::Archive)?;
    let last = tail.len() - EOCD_LEN as usize;
    for i in (0..=last).rev() {
        if &tail[i..i + 4] == EOCD_SIG {
            let comment = usize::from(le16(&tail, i + 20));
            if i + EOCD_LEN as usize + comment <= tail.len() {
                let rec: [u8; 22] = tail[i..i + 22].try_into().expect("22 bytes");
                return Ok((len - tail_len + i as u64, rec));
            }
        }
    }
    Err(corrupt(
        ErrorScope::Archive,
        "no end of central directory record (truncated or not a zip)",
    ))
}

/// A member's data region, read by position.
struct Window {
    file: Arc<File>,
    pos: u64,
    end: u64,
    consumed: u64,
}

impl Read for Window {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = read_range(&self.file, &mut self.pos, self.end, buf)?;
        self.consumed += n as u64;
        Ok(n)
    }
}

enum Data {
    Stored(Window),
    Deflated(Box<flate2::read::DeflateDecoder<Window>>),
}

struct Member {
    data: Data,
    crc: flate2::Crc,
    expected_crc: u32,
    expected_size: u64,
    out: u64,
}

/// Where the entry the last header described lives.
struct Located {
    local_offset: u64,
    compressed: u64,
    size: u64,
    crc: u32,
    method: u16,
}

pub(crate) struct ZipReader {
    file: Arc<File>,
    len: u64,
    /// Bytes of foreign data before the archive (a self-extracting stub):
    /// stored offsets are relative to the archive, reads are relative to the file.
    shift: u64,
    cd_start: u64,
    cd_pos: u64,
    cd_end: u64,
    total: u64,
    consumed: u64,
    located: Option<Located>,
    member: Option<Member>,
}

fn method_name(m: u16) -> &'static str {
    match m {
        1 => "zip method shrink",
        6 => "zip method implode",
        9 => "zip method deflate64",
        12 => "zip method bzip2",
        14 => "zip method lzma",
        93 => "zip method zstd",
        95 => "zip method xz",
        98 => "zip method ppmd",
        _ => "zip compression method unknown",
    }
}

impl ZipReader {
    pub(crate) fn open(file: File) -> Result<Self, ArchiveError> {
        let len = file
            .metadata()
            .map_err(|e| ArchiveError::from_io(&e, ErrorScope::Archive))?
            .len();
        let (eocd_pos, e) = find_eocd(&file, len)?;
        let mut disk = u32::from(le16(&e, 4));
        let mut cd_disk = u32::from(le16(&e, 6));
        let mut total = u64::from(le16(&e, 10));
        let mut size = u64::from(le32(&e, 12));
        let mut offset = u64::from(le32(&e, 16));
        let mut end = eocd_pos;
        if eocd_pos >= Z64_LOCATOR_LEN {
            let mut loc = [0u8; Z64_LOCATOR_LEN as usize];
            read_exact_at(
                &file,
                &mut loc,
                eocd_pos - Z64_LOCATOR_LEN,
                ErrorScope::Archive,
            )?;
            if &loc[..4] == Z64_LOCATOR_SIG {
                let at = le64(&loc, 8);
                if at.checked_add(Z64_EOCD_LEN).is_none_or(|e| e > eocd_pos) {
                    return Err(corrupt(
                        ErrorScope::Archive,
                        "zip64 end record out of range",
                    ));
                }
                let mut rec = [0u8; Z64_EOCD_LEN as usize];
                read_exact_at(&file, &mut rec, at, ErrorScope::Archive)?;
                if &rec[..4] != Z64_EOCD_SIG {
                    return Err(corrupt(ErrorScope::Archive, "bad zip64 end record"));
                }
                disk = le32(&rec, 16);
                cd_disk = le32(&rec, 20);
                total = le64(&rec, 32);
                size = le64(&rec, 40);
                offset = le64(&rec, 48);
                end = at;
            }
        }
        if disk != 0 || cd_disk != 0 {
            return Err(ArchiveError::new(
                SkipReason::ArchiveUnsupported("multi-disk zip"),
                ErrorScope::Archive,
                "spanned or split zip",
            ));
        }
        let cd_start = end.checked_sub(size).ok_or_else(|| {
            corrupt(
                ErrorScope::Archive,
                "central directory larger than the file",
            )
        })?;
        let shift = cd_start
            .checked_sub(offset)
            .ok_or_else(|| corrupt(ErrorScope::Archive, "central directory offset out of range"))?;
        if total > size / CDH_LEN {
            return Err(corrupt(
                ErrorScope::Archive,
                "more entries declared than the central directory can hold",
            ));
        }
        Ok(ZipReader {
            file: Arc::new(file),
            len,
            shift,
            cd_start,
            cd_pos: cd_start,
            cd_end: end,
            total,
            consumed: 0,
            located: None,
            member: None,
        })
    }

    /// Entries not yet reached.
    pub(crate) fn remaining(&self) -> u64 {
        self.total - self.consumed
    }

    pub(crate) fn next_header(&mut self) -> Result<Option<RawHeader>, ArchiveError> {
        self.member = None;
        self.located = None;
        if self.consumed >= self.total {
            return Ok(None);
        }
        let archive = ErrorScope::Archive;
        if self.cd_pos.saturating_add(CDH_LEN) > self.cd_end {
            return Err(corrupt(
                archive,
                "central directory shorter than its entry count",
            ));
        }
        let mut h = [0u8; CDH_LEN as usize];
        read_exact_at(&self.file, &mut h, self.cd_pos, archive)?;
        if &h[..4] != CDH_SIG {
            return Err(corrupt(archive, "bad central directory header"));
        }
        let flags = le16(&h, 8);
        let method = le16(&h, 10);
        let crc = le32(&h, 16);
        let mut compressed = u64::from(le32(&h, 20));
        let mut size = u64::from(le32(&h, 24));
        let name_len = usize::from(le16(&h, 28));
        let extra_len = usize::from(le16(&h, 30));
        let comment_len = u64::from(le16(&h, 32));
        let mut local = u64::from(le32(&h, 42));
        let var_end = self.cd_pos + CDH_LEN + (name_len + extra_len) as u64;
        if var_end + comment_len > self.cd_end {
            return Err(corrupt(
                archive,
                "central directory entry runs past the directory",
            ));
        }
        let mut var = vec![0u8; name_len + extra_len];
        read_exact_at(&self.file, &mut var, self.cd_pos + CDH_LEN, archive)?;
        self.cd_pos = var_end + comment_len;
        self.consumed += 1;
        let extra_field = var.split_off(name_len);
        let name = var;

        let mut problem = None;
        let mut aes = false;
        let mut extra = &extra_field[..];
        while extra.len() >= 4 {
            let id = le16(extra, 0);
            let n = usize::from(le16(extra, 2));
            let Some(data) = extra.get(4..4 + n) else {
                break;
            };
            match id {
                EXTRA_ZIP64 => {
                    let mut at = 0;
                    let mut field = |v: &mut u64| {
                        if let Some(b) = data.get(at..at + 8) {
                            *v = le64(b, 0);
                            at += 8;
                            true
                        } else {
                            false
                        }
                    };
                    let ok = (size != 0xFFFF_FFFF || field(&mut size))
                        && (compressed != 0xFFFF_FFFF || field(&mut compressed))
                        && (local != 0xFFFF_FFFF || field(&mut local));
                    if !ok {
                        problem = Some(corrupt(ErrorScope::Member, "zip64 extra field too short"));
                    }
                }
                EXTRA_AES => aes = true,
                _ => {}
            }
            extra = &extra[4 + n..];
        }
        let is_file = !name.ends_with(b"/");
        if flags & (FLAG_ENCRYPTED | FLAG_STRONG_ENCRYPTION) != 0 || method == METHOD_AES || aes {
            problem = Some(ArchiveError::new(
                SkipReason::ArchiveEncrypted,
                ErrorScope::Member,
                "encrypted zip member",
            ));
        } else if method != METHOD_STORED && method != METHOD_DEFLATED {
            let what = method_name(method);
            problem = Some(ArchiveError::new(
                SkipReason::ArchiveUnsupported(what),
                ErrorScope::Member,
                what,
            ));
        }
        self.located = Some(Located {
            local_offset: local.saturating_add(self.shift),
            compressed,
            size,
            crc,
            method,
        });
        Ok(Some(RawHeader {
            name,
            size_hint: Some(size),
            is_file,
            problem,
        }))
    }

    /// Prepares to decode the entry the last header described.
    pub(crate) fn open_member(&mut self) -> Result<(), ArchiveError> {
        let member = ErrorScope::Member;
        let Some(at) = self.located.take() else {
            return Err(corrupt(member, "no entry located"));
        };
        if at.local_offset.saturating_add(LFH_LEN) > self.len {
            return Err(corrupt(member, "local header out of range"));
        }
        let mut lfh = [0u8; LFH_LEN as usize];
        read_exact_at(&self.file, &mut lfh, at.local_offset, member)?;
        if &lfh[..4] != LFH_SIG {
            return Err(corrupt(member, "bad local file header"));
        }
        let start =
            at.local_offset + LFH_LEN + u64::from(le16(&lfh, 26)) + u64::from(le16(&lfh, 28));
        let end = start
            .checked_add(at.compressed)
            .filter(|e| *e <= self.cd_start)
            .ok_or_else(|| corrupt(member, "member data runs into the central directory"))?;
        if at.method == METHOD_STORED && at.compressed != at.size {
            return Err(corrupt(member, "stored member with different sizes"));
        }
        let window = Window {
            file: Arc::clone(&self.file),
            pos: start,
            end,
            consumed: 0,
        };
        let data = if at.method == METHOD_STORED {
            Data::Stored(window)
        } else {
            Data::Deflated(Box::new(flate2::read::DeflateDecoder::new(window)))
        };
        self.member = Some(Member {
            data,
            crc: flate2::Crc::new(),
            expected_crc: at.crc,
            expected_size: at.size,
            out: 0,
        });
        Ok(())
    }

    /// Compressed bytes consumed by the current member's inflater, if it has one.
    pub(crate) fn compressed_in(&self) -> Option<u64> {
        match &self.member.as_ref()?.data {
            Data::Stored(_) => None,
            Data::Deflated(d) => Some(d.get_ref().consumed),
        }
    }

    pub(crate) fn read(&mut self, buf: &mut [u8]) -> Result<usize, ArchiveError> {
        let scope = ErrorScope::Member;
        let Some(m) = self.member.as_mut() else {
            return Ok(0);
        };
        let n = match &mut m.data {
            Data::Stored(w) => w.read(buf),
            Data::Deflated(d) => d.read(buf),
        }
        .map_err(|e| ArchiveError::from_io(&e, scope))?;
        if n == 0 {
            if !buf.is_empty() {
                if m.out != m.expected_size {
                    return Err(corrupt(
                        scope,
                        "member shorter than declared (truncated data)",
                    ));
                }
                if m.crc.sum() != m.expected_crc {
                    return Err(corrupt(scope, "CRC mismatch"));
                }
            }
            return Ok(0);
        }
        m.out += n as u64;
        if m.out > m.expected_size {
            return Err(corrupt(scope, "member longer than declared"));
        }
        m.crc.update(&buf[..n]);
        Ok(n)
    }

    pub(crate) fn skip_rest(&mut self) {
        self.member = None;
        self.located = None;
    }
}
