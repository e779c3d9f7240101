//! Chunked positional reads: exact reassembly, shrinking and growing files,
//! sparse giants, and lock-free sharing of one handle.
#![cfg(not(loom))]

#[path = "walk_common/mod.rs"]
mod walk_common;

use std::fs::File;
use std::io::Write;
use std::sync::Arc;

use scan::source::{
    open_for_scan, open_regular, read_chunk_at, read_limit, CHUNK_SIZE, DEFAULT_MAX_FILE_SIZE,
    GROWTH_ALLOWANCE,
};
use scan::walk::WalkConfig;
use walk_common::*;

/// Reads a file the way the FetchSync chain does: chunk after chunk until a
/// chunk says `done`. Returns the bytes and the number of chunks.
fn read_chain(file: &File, size: u64, chunk: usize) -> (Vec<u8>, usize) {
    let mut buf = vec![0u8; chunk];
    let mut all = Vec::new();
    let mut offset = 0u64;
    let mut chunks = 0;
    loop {
        let r = read_chunk_at(file, offset, size, &mut buf).unwrap();
        all.extend_from_slice(&buf[..r.len]);
        offset += r.len as u64;
        chunks += 1;
        assert!(chunks < 1_000_000, "read chain does not end");
        if r.done {
            return (all, chunks);
        }
    }
}

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 31 % 253) as u8).collect()
}

#[test]
fn chunks_reassemble_the_file_exactly() {
    let dir = tempfile::tempdir().unwrap();
    for (n, want_chunks) in [
        (0, 1),
        (1, 1),
        (CHUNK_SIZE - 1, 1),
        (CHUNK_SIZE, 1),
        (CHUNK_SIZE + 1, 2),
        (3 * CHUNK_SIZE, 3),
        (3 * CHUNK_SIZE + 17, 4),
    ] {
        let p = dir.path().join(format!("f{n}"));
        let data = pattern(n);
        touch(&p, &data);
        let (f, size) = open_regular(&p).unwrap();
        let (got, chunks) = read_chain(&f, size, CHUNK_SIZE);
        assert_eq!(got, data, "size {n}");
        assert_eq!(chunks, want_chunks, "size {n}: no empty trailing chunk");
    }
}

#[test]
fn file_that_shrinks_while_read_ends_at_its_new_end() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("shrinking");
    let data = pattern(5 * CHUNK_SIZE);
    touch(&p, &data);
    let (f, size) = open_regular(&p).unwrap();
    let mut buf = vec![0u8; CHUNK_SIZE];
    let first = read_chunk_at(&f, 0, size, &mut buf).unwrap();
    assert_eq!((first.len, first.done), (CHUNK_SIZE, false));
    File::options()
        .write(true)
        .open(&p)
        .unwrap()
        .set_len((CHUNK_SIZE + 100) as u64)
        .unwrap();
    let second = read_chunk_at(&f, CHUNK_SIZE as u64, size, &mut buf).unwrap();
    assert_eq!((second.len, second.done), (100, true));
    assert_eq!(&buf[..100], &data[CHUNK_SIZE..CHUNK_SIZE + 100]);
    let past = read_chunk_at(&f, 3 * CHUNK_SIZE as u64, size, &mut buf).unwrap();
    assert_eq!((past.len, past.done), (0, true));
}

#[test]
fn file_that_grows_while_read_is_read_at_most_one_allowance_past_its_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("growing");
    touch(&p, &pattern(CHUNK_SIZE + 10));
    let (f, size) = open_regular(&p).unwrap();
    // Grow by far more than the allowance before reading, and keep growing
    // from another thread while reading.
    let mut w = File::options().append(true).open(&p).unwrap();
    w.write_all(&vec![b'g'; 4 * CHUNK_SIZE]).unwrap();
    let stop = Arc::new(magpie_core::sync::atomic::AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(magpie_core::sync::atomic::Ordering::Relaxed) {
                w.write_all(&[b'h'; 4096]).unwrap();
                std::thread::yield_now();
            }
        })
    };
    let (got, _) = read_chain(&f, size, CHUNK_SIZE);
    stop.store(true, magpie_core::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();
    assert!(got.len() as u64 >= size);
    assert!(got.len() as u64 <= read_limit(size));
    assert!(got.len() as u64 <= size + GROWTH_ALLOWANCE);
    // The chain stops with the chunk that reaches the snapshot: growth is
    // read only as far as that chunk's buffer goes.
    let (got, _) = read_chain(&f, size, 4096);
    assert!(got.len() as u64 >= size && got.len() as u64 <= size + 4096);
}

#[test]
fn sparse_20_gib_file_is_too_large_by_default_and_its_tail_reads_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("sparse");
    File::create(&p).unwrap().set_len(20 << 30).unwrap();
    assert!(matches!(
        open_for_scan(&p, &WalkConfig::default()),
        Err(scan::skip::SkipReason::TooLarge { .. })
    ));
    let (f, size) = open_regular(&p).unwrap();
    let mut buf = vec![1u8; CHUNK_SIZE];
    let r = read_chunk_at(&f, size - 100, size, &mut buf).unwrap();
    assert_eq!((r.len, r.done), (100, true));
    assert!(buf[..100].iter().all(|b| *b == 0));
}

#[test]
fn a_200_mb_single_line_file_is_under_the_default_limit() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bundle.min.js");
    File::create(&p).unwrap().set_len(200_000_000).unwrap();
    let (_, size) = open_for_scan(&p, &WalkConfig::default()).unwrap();
    assert_eq!(size, 200_000_000);
    const { assert!(DEFAULT_MAX_FILE_SIZE >= 200_000_000) };
}

#[test]
fn threads_share_one_handle_without_a_lock() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("shared");
    let data = pattern(16 * CHUNK_SIZE + 5);
    touch(&p, &data);
    let (f, size) = open_regular(&p).unwrap();
    let f = Arc::new(f);
    let chunks = size.div_ceil(CHUNK_SIZE as u64);
    let handles: Vec<_> = (0..4u64)
        .map(|t| {
            let f = f.clone();
            std::thread::spawn(move || {
                let mut mine = Vec::new();
                let mut buf = vec![0u8; CHUNK_SIZE];
                for c in (t..chunks).step_by(4) {
                    let r = read_chunk_at(&f, c * CHUNK_SIZE as u64, size, &mut buf).unwrap();
                    mine.push((c, buf[..r.len].to_vec()));
                }
                mine
            })
        })
        .collect();
    let mut parts: Vec<(u64, Vec<u8>)> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    parts.sort_by_key(|(c, _)| *c);
    let joined: Vec<u8> = parts.into_iter().flat_map(|(_, v)| v).collect();
    assert_eq!(joined, data);
}
