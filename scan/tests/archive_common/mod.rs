//! Builders for archive fixtures (hand-made where a library would hide the
//! bytes under test) and a driver that runs a cursor to the end.
#![allow(dead_code)]

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use scan::archive::{member_path, ArchiveCursor, ArchivePolicy, PolicyAction};
use scan::skip::SkipReason;

// ---------------------------------------------------------------- zip

/// One entry of a hand-built zip.
pub struct ZipEntry {
    pub name: Vec<u8>,
    pub data: Vec<u8>,
    pub deflate: bool,
    pub flags: u16,
    pub method: Option<u16>,
    pub crc: Option<u32>,
}

impl ZipEntry {
    pub fn new(name: &[u8], data: &[u8]) -> Self {
        ZipEntry {
            name: name.to_vec(),
            data: data.to_vec(),
            deflate: true,
            flags: 0,
            method: None,
            crc: None,
        }
    }
    pub fn stored(mut self) -> Self {
        self.deflate = false;
        self
    }
}

pub fn crc32(data: &[u8]) -> u32 {
    let mut c = flate2::Crc::new();
    c.update(data);
    c.sum()
}

pub fn deflate(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// A zip (no zip64) built record by record, so names, flags, methods and
/// CRCs are exactly what the test says.
pub fn zip_bytes(entries: &[ZipEntry]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for e in entries {
        let payload = if e.deflate {
            deflate(&e.data)
        } else {
            e.data.clone()
        };
        let method = e.method.unwrap_or(if e.deflate { 8 } else { 0 });
        let crc = e.crc.unwrap_or_else(|| crc32(&e.data));
        let offset = out.len() as u32;
        let common = |v: &mut Vec<u8>| {
            v.extend_from_slice(&20u16.to_le_bytes()); // version needed
            v.extend_from_slice(&e.flags.to_le_bytes());
            v.extend_from_slice(&method.to_le_bytes());
            v.extend_from_slice(&0u32.to_le_bytes()); // time, date
            v.extend_from_slice(&crc.to_le_bytes());
            v.extend_from_slice(&(payload.len() as u32).to_le_bytes());
            v.extend_from_slice(&(e.data.len() as u32).to_le_bytes());
            v.extend_from_slice(&(e.name.len() as u16).to_le_bytes());
            v.extend_from_slice(&0u16.to_le_bytes()); // extra length
        };
        out.extend_from_slice(b"PK\x03\x04");
        common(&mut out);
        out.extend_from_slice(&e.name);
        out.extend_from_slice(&payload);

        central.extend_from_slice(b"PK\x01\x02");
        central.extend_from_slice(&20u16.to_le_bytes()); // version made by
        common(&mut central);
        central.extend_from_slice(&0u16.to_le_bytes()); // comment length
        central.extend_from_slice(&0u16.to_le_bytes()); // disk
        central.extend_from_slice(&0u16.to_le_bytes()); // internal attrs
        central.extend_from_slice(&0u32.to_le_bytes()); // external attrs
        central.extend_from_slice(&offset.to_le_bytes());
        central.extend_from_slice(&e.name);
    }
    let cd_offset = out.len() as u32;
    out.extend_from_slice(&central);
    out.extend_from_slice(&eocd(entries.len() as u16, central.len() as u32, cd_offset));
    out
}

fn eocd(entries: u16, cd_size: u32, cd_offset: u32) -> Vec<u8> {
    let mut v = b"PK\x05\x06".to_vec();
    v.extend_from_slice(&0u16.to_le_bytes());
    v.extend_from_slice(&0u16.to_le_bytes());
    v.extend_from_slice(&entries.to_le_bytes());
    v.extend_from_slice(&entries.to_le_bytes());
    v.extend_from_slice(&cd_size.to_le_bytes());
    v.extend_from_slice(&cd_offset.to_le_bytes());
    v.extend_from_slice(&0u16.to_le_bytes());
    v
}

// ---------------------------------------------------------------- deflate by hand

/// Writes bits least-significant first, as DEFLATE packs them.
pub struct BitWriter<W: Write> {
    out: W,
    acc: u64,
    nbits: u32,
    pub bytes: u64,
}

impl<W: Write> BitWriter<W> {
    pub fn new(out: W) -> Self {
        BitWriter {
            out,
            acc: 0,
            nbits: 0,
            bytes: 0,
        }
    }
    pub fn bits(&mut self, value: u64, n: u32) {
        self.acc |= value << self.nbits;
        self.nbits += n;
        while self.nbits >= 8 {
            self.out.write_all(&[self.acc as u8]).unwrap();
            self.bytes += 1;
            self.acc >>= 8;
            self.nbits -= 8;
        }
    }
    /// A Huffman code: stored most-significant bit first.
    pub fn code(&mut self, code: u32, len: u32) {
        let rev = code.reverse_bits() >> (32 - len);
        self.bits(u64::from(rev), len);
    }
    pub fn align(&mut self) {
        if self.nbits > 0 {
            let pad = 8 - self.nbits;
            self.bits(0, pad);
        }
    }
    pub fn finish(mut self) -> W {
        self.align();
        self.out
    }
}

/// A stored (uncompressed) deflate block holding `data` (< 64 KiB), not final.
pub fn stored_block<W: Write>(w: &mut BitWriter<W>, data: &[u8]) {
    w.bits(0, 1); // BFINAL = 0
    w.bits(0, 2); // BTYPE = 00
    w.align();
    let len = data.len() as u16;
    w.bits(u64::from(len), 16);
    w.bits(u64::from(!len), 16);
    for b in data {
        w.bits(u64::from(*b), 8);
    }
}

/// A final fixed-Huffman block inflating to `n` zero bytes: one literal 0,
/// then <length 258, distance 1> pairs (13 bits per 258 bytes, so a 2 GiB
/// bomb is about 13 MB), then literals for the rest.
pub fn zeros_block<W: Write>(w: &mut BitWriter<W>, n: u64) {
    w.bits(1, 1); // BFINAL
    w.bits(1, 2); // BTYPE = 01, fixed Huffman
    let literal_zero = |w: &mut BitWriter<W>| w.code(0x30, 8);
    if n > 0 {
        literal_zero(w);
    }
    let mut left = n.saturating_sub(1);
    while left >= 258 {
        w.code(0xC0 + (285 - 280), 8); // length 258
        w.code(0, 5); // distance 1
        left -= 258;
    }
    for _ in 0..left {
        literal_zero(w);
    }
    w.code(0, 7); // end of block (256)
}

/// The raw deflate stream of `size` zeros, built once per process per size
/// (a 2 GiB stream is about 13 MB).
pub fn zeros_stream(size: u64) -> std::sync::Arc<Vec<u8>> {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock};
    static CACHE: OnceLock<Mutex<HashMap<u64, Arc<Vec<u8>>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let mut g = cache.lock().unwrap();
    g.entry(size)
        .or_insert_with(|| {
            let mut w = BitWriter::new(Vec::new());
            zeros_block(&mut w, size);
            Arc::new(w.finish())
        })
        .clone()
}

/// Writes a zip whose one deflated member `name` inflates to `size` zeros,
/// declaring `declared` as its size. Returns the file size.
pub fn write_zip_bomb(path: &Path, name: &[u8], size: u64, declared: u64) -> u64 {
    let stream = zeros_stream(size);
    let compressed = stream.len() as u64;
    let mut f = BufWriter::new(File::create(path).unwrap());
    let declared32 = u32::try_from(declared).unwrap_or(u32::MAX);
    let fields = |v: &mut Vec<u8>| {
        v.extend_from_slice(&20u16.to_le_bytes());
        v.extend_from_slice(&0u16.to_le_bytes());
        v.extend_from_slice(&8u16.to_le_bytes());
        v.extend_from_slice(&0u32.to_le_bytes());
        v.extend_from_slice(&0u32.to_le_bytes()); // CRC never reached
        v.extend_from_slice(&(compressed as u32).to_le_bytes());
        v.extend_from_slice(&declared32.to_le_bytes());
        v.extend_from_slice(&(name.len() as u16).to_le_bytes());
        v.extend_from_slice(&0u16.to_le_bytes());
    };
    let mut local = b"PK\x03\x04".to_vec();
    fields(&mut local);
    local.extend_from_slice(name);
    f.write_all(&local).unwrap();
    f.write_all(&stream).unwrap();
    let cd_offset = local.len() as u64 + compressed;
    let mut central = b"PK\x01\x02".to_vec();
    central.extend_from_slice(&20u16.to_le_bytes());
    fields(&mut central);
    central.extend_from_slice(&[0u8; 12]); // comment len, disk, attrs
    central.extend_from_slice(&0u32.to_le_bytes()); // local header offset
    central.extend_from_slice(name);
    f.write_all(&central).unwrap();
    f.write_all(&eocd(1, central.len() as u32, cd_offset as u32))
        .unwrap();
    let f = f.into_inner().unwrap();
    f.metadata().unwrap().len()
}

/// Writes a gzip whose stream starts with `prefix` (e.g. a tar header, as a
/// stored block) and then inflates to `zeros` zero bytes.
pub fn write_gzip_bomb(path: &Path, prefix: &[u8], zeros: u64) -> u64 {
    let mut f = BufWriter::new(File::create(path).unwrap());
    f.write_all(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3]).unwrap();
    if !prefix.is_empty() {
        let mut w = BitWriter::new(&mut f);
        stored_block(&mut w, prefix);
        w.finish();
    }
    f.write_all(&zeros_stream(zeros)).unwrap();
    f.write_all(&[0u8; 8]).unwrap(); // CRC and size never reached
    let f = f.into_inner().unwrap();
    f.metadata().unwrap().len()
}

// ---------------------------------------------------------------- tar and gzip

/// A GNU tar of regular files (names may be non-UTF-8 or long).
pub fn tar_bytes(entries: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (name, data) in entries {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_entry_type(tar::EntryType::Regular);
        b.append_data(&mut h, std::ffi::OsStr::from_bytes(name), *data)
            .unwrap();
    }
    b.into_inner().unwrap()
}

/// A tar header block announcing one regular file of `size` bytes.
pub fn tar_header(name: &str, size: u64) -> Vec<u8> {
    let mut h = tar::Header::new_ustar();
    h.set_path(name).unwrap();
    h.set_size(size);
    h.set_mode(0o644);
    h.set_entry_type(tar::EntryType::Regular);
    h.set_cksum();
    h.as_bytes().to_vec()
}

pub fn gzip(data: &[u8], name: Option<&[u8]>) -> Vec<u8> {
    let mut b = flate2::GzBuilder::new();
    if let Some(n) = name {
        b = b.filename(n);
    }
    let mut e = b.write(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

pub fn write(dir: &Path, name: &str, bytes: &[u8]) -> File {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    File::open(p).unwrap()
}

// ---------------------------------------------------------------- driver

/// What running a cursor to its end produced.
#[derive(Debug, Default)]
pub struct Outcome {
    pub files: Vec<(Vec<u8>, Vec<u8>)>,
    pub skipped: Vec<(Vec<u8>, SkipReason)>,
    pub aborted: bool,
}

impl Outcome {
    pub fn file(&self, path: &[u8]) -> Option<&[u8]> {
        self.files
            .iter()
            .find(|(p, _)| p == path)
            .map(|(_, d)| d.as_slice())
    }
    pub fn paths(&self) -> Vec<String> {
        self.files
            .iter()
            .map(|(p, _)| String::from_utf8_lossy(p).into_owned())
            .collect()
    }
    pub fn reasons(&self) -> Vec<&'static str> {
        self.skipped.iter().map(|(_, r)| r.label()).collect()
    }
}

/// Runs `cursor` to its end as the task graph would: nested archives are
/// opened and drained depth-first, errors go through `policy`.
pub fn drain(cursor: &mut ArchiveCursor, path: &Path, policy: ArchivePolicy, out: &mut Outcome) {
    loop {
        let err = match cursor.next_member() {
            Ok(None) => return,
            Ok(Some(info)) => {
                let p = member_path(path, &info.name);
                match info.is_nested_archive {
                    Some(kind) => match cursor.open_nested(kind) {
                        Ok(mut child) => {
                            drain(&mut child, &p, policy, out);
                            if out.aborted {
                                return;
                            }
                            continue;
                        }
                        Err(e) => (p, e),
                    },
                    None => {
                        let mut content = Vec::new();
                        let mut buf = vec![0u8; 4096];
                        let res = loop {
                            match cursor.read_member(&mut buf) {
                                Ok(0) => break Ok(()),
                                Ok(n) => content.extend_from_slice(&buf[..n]),
                                Err(e) => break Err(e),
                            }
                        };
                        match res {
                            Ok(()) => {
                                out.files.push((p.as_os_str().as_bytes().to_vec(), content));
                                continue;
                            }
                            Err(e) => (p, e),
                        }
                    }
                }
            }
            Err(e) => {
                let p = match e.member() {
                    Some(m) => member_path(path, m),
                    None => path.to_path_buf(),
                };
                (p, e)
            }
        };
        let (p, e) = err;
        out.skipped
            .push((p.as_os_str().as_bytes().to_vec(), e.skip_reason()));
        match policy.action(&e) {
            PolicyAction::SkipMember => continue,
            PolicyAction::StopArchive => return,
            PolicyAction::AbortRun => {
                out.aborted = true;
                return;
            }
        }
    }
}
