//! Telling archives from other files: magic bytes first, names second.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;

use super::ArchiveKind;

/// How many leading bytes detection looks at: one tar header block.
pub const SNIFF_LEN: usize = 512;

const ZIP_LOCAL: &[u8] = b"PK\x03\x04";
const ZIP_EMPTY: &[u8] = b"PK\x05\x06";
const ZIP_SPANNED: &[u8] = b"PK\x07\x08";
const GZIP: &[u8] = &[0x1f, 0x8b];
/// `BZh` then the block size digit `1`-`9`, then a block or end-of-stream
/// magic (checked from the 5th byte: `1AY&SY` or `\x17rE8P\x90`).
const BZIP2: &[u8] = b"BZh";
const BZIP2_BLOCK: &[u8] = &[0x31, 0x41, 0x59, 0x26, 0x53, 0x59];
const BZIP2_END: &[u8] = &[0x17, 0x72, 0x45, 0x38, 0x50, 0x90];
const XZ: &[u8] = &[0xfd, b'7', b'z', b'X', b'Z', 0x00];
const ZSTD: &[u8] = &[0x28, 0xb5, 0x2f, 0xfd];

/// The archive kind the first bytes of a file or member announce, if any.
///
/// - zip: a local file header (`PK\3\4`), an empty archive's end record
///   (`PK\5\6`) or a spanning marker (`PK\7\8`) at offset 0;
/// - gzip: `1f 8b`; it is `TarGz` when the first decompressed 512 bytes
///   (inflated from `head` alone) are a valid tar header;
/// - tar: a 512-byte header whose checksum is right (ustar, GNU and v7).
///
/// `head` should be at least [`SNIFF_LEN`] bytes when the file has them.
pub fn sniff(head: &[u8]) -> Option<ArchiveKind> {
    if head.starts_with(ZIP_LOCAL) || head.starts_with(ZIP_EMPTY) || head.starts_with(ZIP_SPANNED) {
        return Some(ArchiveKind::Zip);
    }
    if head.starts_with(GZIP) {
        let mut block = [0u8; SNIFF_LEN];
        let mut dec = flate2::read::GzDecoder::new(head);
        let mut got = 0;
        while got < block.len() {
            match dec.read(&mut block[got..]) {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n,
            }
        }
        if got == SNIFF_LEN && is_tar_header(&block) {
            return Some(ArchiveKind::TarGz);
        }
        return Some(ArchiveKind::Gzip);
    }
    if is_bzip2(head) {
        // Whether a tar is inside is decided when the cursor opens it.
        return Some(ArchiveKind::Bzip2);
    }
    if head.starts_with(XZ) {
        return Some(ArchiveKind::Xz);
    }
    if head.starts_with(ZSTD) {
        return Some(ArchiveKind::Zstd);
    }
    if head.len() >= SNIFF_LEN && is_tar_header(&head[..SNIFF_LEN]) {
        return Some(ArchiveKind::Tar);
    }
    None
}

fn is_bzip2(head: &[u8]) -> bool {
    head.len() >= 10
        && head.starts_with(BZIP2)
        && (b'1'..=b'9').contains(&head[3])
        && (head[4..10] == *BZIP2_BLOCK || head[4..10] == *BZIP2_END)
}

/// The kind a file name's extension suggests (ASCII case-insensitive): a
/// hint only; [`sniff`] decides.
pub fn kind_from_name(name: &[u8]) -> Option<ArchiveKind> {
    let lower: Vec<u8> = name.iter().map(u8::to_ascii_lowercase).collect();
    let ends = |s: &[u8]| lower.ends_with(s);
    if ZIP_EXTENSIONS.iter().any(|e| ends(e)) {
        Some(ArchiveKind::Zip)
    } else if ends(b".tar.gz") || ends(b".tgz") {
        Some(ArchiveKind::TarGz)
    } else if ends(b".tar") {
        Some(ArchiveKind::Tar)
    } else if ends(b".gz") || ends(b".gzip") {
        Some(ArchiveKind::Gzip)
    } else if ends(b".tar.bz2") || ends(b".tbz2") || ends(b".tbz") {
        Some(ArchiveKind::TarBz2)
    } else if ends(b".bz2") {
        Some(ArchiveKind::Bzip2)
    } else if ends(b".tar.xz") || ends(b".txz") {
        Some(ArchiveKind::TarXz)
    } else if ends(b".xz") {
        Some(ArchiveKind::Xz)
    } else if ends(b".tar.zst") || ends(b".tzst") {
        Some(ArchiveKind::TarZst)
    } else if ends(b".zst") || ends(b".zstd") {
        Some(ArchiveKind::Zstd)
    } else {
        None
    }
}

/// Extensions of the zip family.
pub const ZIP_EXTENSIONS: [&[u8]; 12] = [
    b".zip", b".jar", b".war", b".ear", b".apk", b".aar", b".whl", b".nupkg", b".xpi", b".ipa",
    b".docx", b".xlsx",
];

/// [`sniff`], plus one case magic at offset 0 misses: a zip-family name whose
/// data starts with something else (a self-extracting stub, a shell-script
/// launcher before a jar) is a zip if an end-of-central-directory record is
/// found in its last 64 KiB. Costs one extra read, only for such names.
pub fn detect_file(file: &File, head: &[u8], name: &[u8]) -> Option<ArchiveKind> {
    if let Some(kind) = sniff(head) {
        return Some(kind);
    }
    if kind_from_name(name) != Some(ArchiveKind::Zip) {
        return None;
    }
    let len = file.metadata().ok()?.len();
    super::zip::find_eocd(file, len)
        .ok()
        .map(|_| ArchiveKind::Zip)
}

/// Parses a tar octal field: optional leading spaces/NULs, octal digits,
/// ended by a space, NUL or the field's end.
fn parse_octal(field: &[u8]) -> Option<u64> {
    let mut digits = 0;
    let mut v: u64 = 0;
    for &b in field.iter().skip_while(|b| **b == b' ' || **b == 0) {
        match b {
            b'0'..=b'7' => {
                v = v.checked_mul(8)?.checked_add(u64::from(b - b'0'))?;
                digits += 1;
            }
            b' ' | 0 => break,
            _ => return None,
        }
    }
    (digits > 0).then_some(v)
}

/// True if `block` is a 512-byte tar header with a correct checksum (the
/// unsigned sum of the block with the checksum field read as spaces; the
/// signed sum some old tars wrote is accepted too). An all-zero block (the
/// end-of-archive marker) is not a header.
pub(crate) fn is_tar_header(block: &[u8]) -> bool {
    if block.len() < SNIFF_LEN || block[..SNIFF_LEN].iter().all(|b| *b == 0) {
        return false;
    }
    let Some(stored) = parse_octal(&block[148..156]) else {
        return false;
    };
    let (mut unsigned, mut signed) = (0u64, 0i64);
    for (i, b) in block[..SNIFF_LEN].iter().enumerate() {
        let b = if (148..156).contains(&i) { b' ' } else { *b };
        unsigned += u64::from(b);
        signed += i64::from(b as i8);
    }
    stored == unsigned || i64::try_from(stored).is_ok_and(|s| s == signed)
}

/// Reads up to `buf.len()` bytes from the start of `file` (for callers that sniff
/// a file on disk).
pub fn read_head(file: &File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn octal_fields_parse_like_tar_writes_them() {
        assert_eq!(parse_octal(b"0000644\0"), Some(0o644));
        assert_eq!(parse_octal(b"  1234 \0"), Some(0o1234));
        assert_eq!(parse_octal(b"\0\0\0\0"), None);
        assert_eq!(parse_octal(b"12x4"), None);
    }

    #[test]
    fn names_hint_kinds_case_insensitively() {
        assert_eq!(kind_from_name(b"a/B.JAR"), Some(ArchiveKind::Zip));
        assert_eq!(kind_from_name(b"x.tar.gz"), Some(ArchiveKind::TarGz));
        assert_eq!(kind_from_name(b"x.tgz"), Some(ArchiveKind::TarGz));
        assert_eq!(kind_from_name(b"x.tar"), Some(ArchiveKind::Tar));
        assert_eq!(kind_from_name(b"x.gz"), Some(ArchiveKind::Gzip));
        assert_eq!(kind_from_name(b"x.txt"), None);
    }

    #[test]
    fn plain_text_and_zero_blocks_are_not_archives() {
        assert_eq!(sniff(b"hello world"), None);
        assert_eq!(sniff(&[0u8; 1024]), None);
        assert_eq!(sniff(&[b'a'; 600]), None);
    }
}
