//! Reading objects for `scan git`: the handles the walk and the workers
//! read through, and the pack-delta cache the workers share (README.md,
//! "Decoding").
//!
//! A packed blob is usually a delta against another blob, which is itself
//! a delta, up to git's `--depth` (50) links. gix resolves a chain from
//! the base forward and keeps the result in a pack cache keyed by pack
//! offset; the next object whose chain passes through a cached entry
//! stops there. The walk hands blobs out in pack order within a window
//! (`history.rs`, [`PACK_ORDER_WINDOW`](super::history::PACK_ORDER_WINDOW)),
//! so a delta's base was usually resolved just before it: one shared
//! cache makes that hit whichever worker resolved the base.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use gix::odb::pack::cache::lru::MemoryCappedHashmap;
use gix::odb::pack::cache::DecodeEntry;

/// gix's pack cache for the workers, all together: 8 MiB. It serves only
/// what [`Odb::find_blob`] leaves to gix (reference deltas, chains past
/// [`MAX_CHAIN`], alternates); packed blobs go through the decoded-blob
/// cache ([`DECODED_CACHE_BYTES`]). At 64 MiB, beside that cache, cargo's
/// history peaked at 424 MB against 366 MB before it.
pub const PACK_CACHE_BYTES: usize = 8 << 20;

/// The walk's object cache (by id): a tree read as a commit's tree is read
/// again as its child's parent tree. 16 MiB.
pub const WALK_OBJECT_CACHE_BYTES: usize = 16 << 20;

/// The walk's own pack cache (trees): 16 MiB.
pub const WALK_PACK_CACHE_BYTES: usize = 16 << 20;

/// The largest decoded-blob buffer a worker keeps for the next blob: 8 MiB.
pub const SPARE_BLOB_BUF_BYTES: usize = 8 << 20;

/// Keeps `data`'s allocation as the worker's spare blob buffer (`spare`),
/// unless it is larger than [`SPARE_BLOB_BUF_BYTES`].
pub fn give_back(spare: &mut Vec<u8>, mut data: Vec<u8>) {
    if data.capacity() <= SPARE_BLOB_BUF_BYTES && data.capacity() > spare.capacity() {
        data.clear();
        *spare = data;
    }
}

/// A repository with the pack cache its workers share.
#[derive(Clone)]
pub struct Odb {
    repo: gix::ThreadSafeRepository,
    packs: Arc<Mutex<MemoryCappedHashmap>>,
    files: Arc<Packs>,
    decoded: Arc<Mutex<Decoded>>,
    lfs_objects: std::path::PathBuf,
}

impl std::fmt::Debug for Odb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Odb")
            .field("git_dir", &self.repo.git_dir())
            .finish_non_exhaustive()
    }
}

impl Odb {
    /// `repo`, with its packs opened, a new shared pack cache of
    /// [`PACK_CACHE_BYTES`] and a decoded-blob cache of
    /// [`DECODED_CACHE_BYTES`].
    pub fn new(repo: gix::ThreadSafeRepository) -> Self {
        let packs = Arc::new(Packs::new(&repo));
        Self::with_packs(repo, packs)
    }

    /// Like [`Odb::new`], with packs already opened (`with_data`) for the
    /// walk (`HistoryCursor::packs`).
    pub fn with_packs(repo: gix::ThreadSafeRepository, files: Arc<Packs>) -> Self {
        let lfs_objects = super::lfs::store(&repo.to_thread_local());
        Self {
            lfs_objects,
            files,
            repo,
            packs: Arc::new(Mutex::new(MemoryCappedHashmap::new(PACK_CACHE_BYTES))),
            decoded: Arc::new(Mutex::new(Decoded::new(DECODED_CACHE_BYTES))),
        }
    }

    /// Decodes the object `id` (a blob) into `out`: a packed one whose
    /// chain is all offset deltas is resolved here, through the shared
    /// decoded-blob cache (README.md, "Decoding"); anything else (a loose
    /// object, a reference delta, a pack opened after this run started, an
    /// entry this resolution refuses) by gix through `repo`, a handle
    /// from [`Odb::worker`], with gix's errors.
    pub fn find_blob(
        &self,
        repo: &gix::Repository,
        id: &gix::oid,
        out: &mut Vec<u8>,
        scratch: &mut DecodeScratch,
    ) -> Result<(), gix::objs::find::existing::Error> {
        if self.decode_packed(id, out, scratch).is_some() {
            return Ok(());
        }
        gix::objs::FindExt::find(&repo.objects, id, out).map(|_| ())
    }

    /// The size of the object `id` (a blob), from its pack entry headers
    /// (the first delta's header names the result's size) read through
    /// the same mapping of the pack as [`Odb::find_blob`], so that its
    /// pages are not resident twice; else gix's `find_header`.
    pub fn blob_size(
        &self,
        repo: &gix::Repository,
        id: &gix::oid,
        scratch: &mut DecodeScratch,
    ) -> Result<u64, gix::object::find::existing::Error> {
        let packed = self.files.locate(id).and_then(|(n, offset)| {
            let pack = self.files.packs.get(n as usize)?.data.as_ref()?.get();
            let entry = pack.entry(offset).ok()?;
            pack.decode_header(entry, &mut scratch.inflate, &|_| None)
                .ok()
                .map(|h| h.object_size)
        });
        match packed {
            Some(size) => Ok(size),
            None => repo.find_header(id).map(|h| h.size()),
        }
    }

    /// The part of [`Odb::find_blob`] done here: `None` when `id` is not in
    /// a pack opened at the start or its chain is not resolved here (then
    /// `out` holds nothing of value).
    pub fn decode_packed(
        &self,
        id: &gix::oid,
        out: &mut Vec<u8>,
        scratch: &mut DecodeScratch,
    ) -> Option<()> {
        let (n, offset) = self.files.locate(id)?;
        self.resolve(n, offset, out, scratch)
    }

    /// Resolves the packed object at (`n`, `offset`) into `out`: the delta
    /// chain is followed back to the first entry the cache holds or to the
    /// undeltified base (which is then cached), and the deltas are applied
    /// forward; the result is cached. `None` when any link is not an
    /// offset delta within the pack or does not decode.
    fn resolve(&self, n: u32, offset: u64, out: &mut Vec<u8>, s: &mut DecodeScratch) -> Option<()> {
        let mapping = self.files.packs.get(n as usize)?.data.as_ref()?;
        // Pack bytes inflated, for `Mapping::read` (also when a link fails:
        // those pages were touched all the same).
        s.read = 0;
        let resolved = self.resolve_in(n, &mapping.get(), offset, out, s);
        mapping.read(s.read);
        resolved
    }

    /// [`Odb::resolve`] through one mapping of pack `n`, counting the pack
    /// bytes inflated into `s.read`.
    fn resolve_in(
        &self,
        n: u32,
        pack: &gix::odb::pack::data::File,
        offset: u64,
        out: &mut Vec<u8>,
        s: &mut DecodeScratch,
    ) -> Option<()> {
        let cache = || self.decoded.lock().unwrap_or_else(PoisonError::into_inner);
        let mut entry = pack.entry(offset).ok()?;
        let key = entry.data_offset;
        s.chain.clear();
        // The chain's base: a cached object, or `None` when it is the
        // undeltified entry inflated into `out`.
        let base = loop {
            if let Some(hit) = cache().get((n, entry.data_offset)) {
                break Some(hit);
            }
            match entry.header {
                gix::odb::pack::data::entry::Header::OfsDelta { base_distance } => {
                    if s.chain.len() >= MAX_CHAIN {
                        return None;
                    }
                    let base = entry.checked_base_pack_offset(base_distance)?;
                    s.chain.push(entry);
                    entry = pack.entry(base).ok()?;
                }
                gix::odb::pack::data::entry::Header::RefDelta { .. } => return None,
                _ => {
                    // An undeltified object: gix would inflate it again
                    // for every delta against it.
                    s.read += inflate_into(pack, &entry, out, &mut s.inflate)?;
                    let whole: Arc<[u8]> = Arc::from(out.as_slice());
                    cache().put((n, entry.data_offset), whole);
                    break None;
                }
            }
        };
        let Some(first) = s.chain.pop() else {
            if let Some(hit) = base {
                out.clear();
                out.extend_from_slice(&hit);
            }
            return Some(());
        };
        // The first delta reads the cached base in place (no copy).
        s.read += inflate_into(pack, &first, &mut s.delta, &mut s.inflate)?;
        apply_delta(base.as_deref().unwrap_or(out), &s.delta, &mut s.next)?;
        std::mem::swap(out, &mut s.next);
        while let Some(delta) = s.chain.pop() {
            s.read += inflate_into(pack, &delta, &mut s.delta, &mut s.inflate)?;
            apply_delta(out, &s.delta, &mut s.next)?;
            std::mem::swap(out, &mut s.next);
        }
        let result: Arc<[u8]> = Arc::from(out.as_slice());
        cache().put((n, key), result);
        Some(())
    }

    /// The local Git LFS store, `<common dir>/lfs/objects` (`lfs.rs`).
    pub fn lfs_objects(&self) -> &std::path::Path {
        &self.lfs_objects
    }

    /// The repository.
    pub fn repo(&self) -> &gix::ThreadSafeRepository {
        &self.repo
    }

    /// A worker's handle: the shared pack cache, and no object cache (each
    /// blob is read once, so caching it by id would only copy it).
    pub fn worker(&self) -> gix::Repository {
        let mut r = self.repo.to_thread_local();
        r.object_cache_size(None);
        let packs = Arc::clone(&self.packs);
        r.objects
            .set_pack_cache(move || Box::new(SharedPackCache(Arc::clone(&packs))));
        r
    }
}

/// The walk's handle: an object cache for the trees it reads twice and a
/// pack cache of its own.
pub fn walk_handle(repo: &gix::ThreadSafeRepository) -> gix::Repository {
    let mut r = repo.to_thread_local();
    r.object_cache_size(WALK_OBJECT_CACHE_BYTES);
    r.objects
        .set_pack_cache(|| Box::new(MemoryCappedHashmap::new(WALK_PACK_CACHE_BYTES)));
    r
}

/// The decoded blobs the workers keep, all together: 48 MiB
/// ([`Odb::find_blob`]). Each is the whole blob, keyed by where it is
/// packed (one key per object id): an undeltified blob, which gix never
/// caches, and the result of each delta chain resolved.
pub const DECODED_CACHE_BYTES: usize = 48 << 20;

/// The longest delta chain [`Odb::find_blob`] resolves itself (git's
/// `--depth` is 50 by default, 4095 at most); a longer one is left to gix.
pub const MAX_CHAIN: usize = 4096;

/// The repository's packs, opened from `objects/pack/*.{idx,pack}`
/// (README.md, "Decoding"): where an object is packed (a binary search in
/// a memory-mapped `.idx`, no pack entry read), and the pack data to
/// resolve it from. (gix's `location_by_oid` inflated the whole entry to
/// learn its compressed size: every undeltified blob was inflated once
/// more by the walk, only to be sorted.)
pub struct Packs {
    /// Sorted by file name: a pack's number is its place here.
    packs: Vec<Pack>,
}

struct Pack {
    index: gix::odb::pack::index::File,
    /// `None` when the `.pack` beside the index cannot be opened.
    data: Option<Mapping>,
}

/// How many bytes of pack data are read through one mapping of a pack
/// before the next reader maps it afresh (README.md, "Memory bounds").
pub const REMAP_BYTES: u64 = 64 << 20;

/// A pack's data, mapped afresh after every [`REMAP_BYTES`] read through
/// it. Every page a mapping touched counts in the process's resident set
/// for as long as the mapping lives, so one mapping for the whole run
/// counted the whole pack (rails' history: 380 MB on top of gix's own
/// mapping of it). The old mapping goes away when the last worker using
/// it drops its `Arc`; its pages stay in the page cache, unaccounted to
/// us.
struct Mapping {
    path: std::path::PathBuf,
    kind: gix::hash::Kind,
    /// The current mapping and the bytes read through it so far.
    current: Mutex<(Arc<gix::odb::pack::data::File>, u64)>,
}

impl Mapping {
    fn open(path: std::path::PathBuf, kind: gix::hash::Kind) -> Option<Self> {
        let file = gix::odb::pack::data::File::at(&path, kind).ok()?;
        Some(Self {
            path,
            kind,
            current: Mutex::new((Arc::new(file), 0)),
        })
    }

    fn get(&self) -> Arc<gix::odb::pack::data::File> {
        let current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(&current.0)
    }

    /// Counts `bytes` read through the current mapping; past
    /// [`REMAP_BYTES`], maps the pack again (keeping the old mapping if
    /// that fails).
    fn read(&self, bytes: u64) {
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        current.1 += bytes;
        if current.1 >= REMAP_BYTES {
            current.1 = 0;
            if let Ok(file) = gix::odb::pack::data::File::at(&self.path, self.kind) {
                current.0 = Arc::new(file);
            }
        }
    }
}

impl std::fmt::Debug for Packs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Packs")
            .field("packs", &self.packs.len())
            .finish()
    }
}

impl Packs {
    /// Opens the packs of `repo`'s own object directory, index and data
    /// (one set for the walk, which sorts by the indices, and the workers,
    /// which decode); an index that cannot be opened is left out (its
    /// objects sort as loose ones and gix decodes them), a `.pack` that
    /// cannot be opened leaves its objects to gix. Alternates are not
    /// read, likewise.
    pub fn new(repo: &gix::ThreadSafeRepository) -> Self {
        let dir = repo.objects.path().join("pack");
        let mut paths: Vec<std::path::PathBuf> = std::fs::read_dir(&dir)
            .map(|rd| {
                rd.filter_map(Result::ok)
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|x| x == "idx"))
                    .collect()
            })
            .unwrap_or_default();
        paths.sort();
        let kind = repo.objects.object_hash();
        let packs = paths
            .iter()
            .filter_map(|p| {
                let index = gix::odb::pack::index::File::at(p, kind).ok()?;
                let data = Mapping::open(p.with_extension("pack"), kind);
                Some(Pack { index, data })
            })
            .collect();
        Self { packs }
    }

    /// Where `id` is packed: (pack number, offset), or `None` for a loose
    /// or missing object. The numbers are this set's, not gix's pack ids.
    pub fn locate(&self, id: &gix::oid) -> Option<(u32, u64)> {
        self.packs.iter().enumerate().find_map(|(n, p)| {
            p.index
                .lookup(id)
                .map(|e| (n as u32, p.index.pack_offset_at_index(e)))
        })
    }
}

/// (pack number, entry data offset): one object.
type PackKey = (u32, u64);

/// The decoded-blob cache: whole objects by (pack, offset), the least
/// recently used dropped first, at most `cap` bytes of them. Each is an
/// exact-size shared slice: the bound is what is held (gix's
/// `MemoryCappedHashmap` weighs an entry by its length but keeps reused
/// buffers of any capacity), and a hit is read in place, not copied.
#[derive(Debug)]
struct Decoded {
    map: HashMap<PackKey, (Arc<[u8]>, u64)>,
    /// Last use (a tick) to key: the first is the least recently used.
    order: BTreeMap<u64, PackKey>,
    tick: u64,
    bytes: usize,
    cap: usize,
}

impl Decoded {
    fn new(cap: usize) -> Self {
        Self {
            map: HashMap::new(),
            order: BTreeMap::new(),
            tick: 0,
            bytes: 0,
            cap,
        }
    }

    fn get(&mut self, key: PackKey) -> Option<Arc<[u8]>> {
        let (data, used) = self.map.get_mut(&key)?;
        self.order.remove(used);
        self.tick += 1;
        *used = self.tick;
        self.order.insert(self.tick, key);
        Some(Arc::clone(data))
    }

    fn put(&mut self, key: PackKey, data: Arc<[u8]>) {
        if data.len() > self.cap || self.map.contains_key(&key) {
            return;
        }
        while self.bytes + data.len() > self.cap {
            let Some((_, old)) = self.order.pop_first() else {
                break;
            };
            if let Some((d, _)) = self.map.remove(&old) {
                self.bytes -= d.len();
            }
        }
        self.tick += 1;
        self.order.insert(self.tick, key);
        self.bytes += data.len();
        self.map.insert(key, (data, self.tick));
    }
}

/// A worker's buffers for [`Odb::find_blob`].
#[derive(Default)]
pub struct DecodeScratch {
    inflate: gix::zlib::Inflate,
    chain: Vec<gix::odb::pack::data::Entry>,
    delta: Vec<u8>,
    next: Vec<u8>,
    /// Pack bytes inflated by the current resolution (`Mapping::read`).
    read: u64,
}

impl std::fmt::Debug for DecodeScratch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DecodeScratch").finish_non_exhaustive()
    }
}

/// Inflates the pack entry `entry` (its own bytes: a whole object, or a
/// delta's instructions) into `out`, which it sizes; returns how many
/// bytes of the pack it read.
fn inflate_into(
    pack: &gix::odb::pack::data::File,
    entry: &gix::odb::pack::data::Entry,
    out: &mut Vec<u8>,
    inflate: &mut gix::zlib::Inflate,
) -> Option<u64> {
    let size = usize::try_from(entry.decompressed_size).ok()?;
    out.clear();
    out.try_reserve(size).ok()?;
    out.resize(size, 0);
    let read = pack.decompress_entry(entry, inflate, out).ok()?;
    Some(read as u64)
}

/// Reads a delta header's size: 7 bits a byte, least significant first,
/// the high bit set on every byte but the last.
fn delta_size(d: &mut &[u8]) -> Option<usize> {
    let mut size = 0u64;
    let mut shift = 0;
    loop {
        let (&b, rest) = d.split_first()?;
        *d = rest;
        if shift > 63 {
            return None;
        }
        size |= u64::from(b & 0x7f) << shift;
        shift += 7;
        if b & 0x80 == 0 {
            return usize::try_from(size).ok();
        }
    }
}

/// Applies the git delta `delta` to `base` into `out` (git's
/// `patch_delta`): the base's size and the result's, then instructions
/// that copy a range of the base (high bit set: offset and size bytes
/// flagged by the low seven bits, a size of 0 meaning 64 KiB) or insert
/// the next 1 to 127 bytes. `None` when the delta does not fit the base or
/// does not produce the size it names (a corrupt entry: gix then decodes
/// it and names the error). Ours because gix-pack's own
/// `data::delta::apply` is `pub(crate)` (gix-pack 0.74.2) and its public
/// decode paths do not let us keep the undeltified base they inflate.
pub fn apply_delta(base: &[u8], delta: &[u8], out: &mut Vec<u8>) -> Option<()> {
    let mut d = delta;
    if delta_size(&mut d)? != base.len() {
        return None;
    }
    let size = delta_size(&mut d)?;
    out.clear();
    out.try_reserve(size).ok()?;
    while let Some((&cmd, rest)) = d.split_first() {
        d = rest;
        if cmd & 0x80 != 0 {
            let mut field = |bits: u8, first: u8| -> Option<usize> {
                let mut v = 0usize;
                for i in 0..bits {
                    if cmd & (first << i) != 0 {
                        let (&b, rest) = d.split_first()?;
                        d = rest;
                        v |= usize::from(b) << (8 * i);
                    }
                }
                Some(v)
            };
            let from = field(4, 0x01)?;
            let len = match field(3, 0x10)? {
                0 => 0x10000,
                n => n,
            };
            out.extend_from_slice(base.get(from..from.checked_add(len)?)?);
        } else if cmd != 0 {
            let n = usize::from(cmd);
            out.extend_from_slice(d.get(..n)?);
            d = &d[n..];
        } else {
            return None;
        }
        if out.len() > size {
            return None;
        }
    }
    (out.len() == size).then_some(())
}

/// One pack cache behind a lock, for every worker's handle.
struct SharedPackCache(Arc<Mutex<MemoryCappedHashmap>>);

impl DecodeEntry for SharedPackCache {
    fn put(
        &mut self,
        pack_id: u32,
        offset: u64,
        data: &[u8],
        kind: gix::object::Kind,
        compressed_size: usize,
    ) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).put(
            pack_id,
            offset,
            data,
            kind,
            compressed_size,
        );
    }

    fn get(
        &mut self,
        pack_id: u32,
        offset: u64,
        out: &mut Vec<u8>,
    ) -> Option<(gix::object::Kind, usize)> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(pack_id, offset, out)
    }
}

#[cfg(test)]
mod tests {
    use super::apply_delta;

    /// A delta of base size `b`, result size `r` (one byte each) and
    /// instructions `ins`.
    fn delta(b: u8, r: u8, ins: &[u8]) -> Vec<u8> {
        [&[b, r][..], ins].concat()
    }

    #[test]
    fn a_delta_copies_from_its_base_and_inserts_its_own_bytes() {
        let base = b"0123456789";
        let mut out = Vec::new();
        // Copy 4 bytes from offset 2 (offset byte flagged 0x01, size byte
        // flagged 0x10), insert "ab", copy 3 from offset 0 (no offset byte).
        let d = delta(10, 9, &[0x91, 2, 4, 2, b'a', b'b', 0x90, 3]);
        assert_eq!(apply_delta(base, &d, &mut out), Some(()));
        assert_eq!(out, b"2345ab012");
        // A copy size of 0 means 64 KiB.
        let big = vec![7u8; 0x10000];
        let d = [&[0x80, 0x80, 0x04, 0x80, 0x80, 0x04][..], &[0x80]].concat();
        assert_eq!(apply_delta(&big, &d, &mut out), Some(()));
        assert_eq!(out, big);
    }

    #[test]
    fn a_corrupt_delta_is_refused_not_applied() {
        let base = b"0123456789";
        let mut out = Vec::new();
        let refused = [
            delta(9, 4, &[0x91, 0, 4]),     // wrong base size
            delta(10, 4, &[0x91, 8, 4]),    // copy past the base
            delta(10, 4, &[0x91, 0]),       // copy size missing
            delta(10, 4, &[0]),             // instruction 0
            delta(10, 4, &[5, b'a', b'b']), // insert past the end
            delta(10, 4, &[0x91, 0, 3]),    // result shorter than named
            delta(10, 2, &[0x91, 0, 3]),    // result longer than named
            vec![0x8a],                     // header cut short
            vec![0xff; 12],                 // size over 64 bits
        ];
        for d in refused {
            assert_eq!(apply_delta(base, &d, &mut out), None, "{d:?}");
        }
        assert_eq!(
            apply_delta(base, &delta(10, 4, &[0x91, 6, 4]), &mut out),
            Some(())
        );
        assert_eq!(out, b"6789");
    }

    #[test]
    fn the_decoded_cache_holds_at_most_its_cap_dropping_the_least_recently_used() {
        let mut c = super::Decoded::new(10);
        let blob = |n: usize| -> std::sync::Arc<[u8]> { vec![n as u8; n].into() };
        c.put((0, 1), blob(4));
        c.put((0, 2), blob(4));
        assert!(c.get((0, 1)).is_some(), "used: now the most recent");
        c.put((0, 3), blob(4));
        assert_eq!(c.bytes, 8);
        assert!(c.get((0, 2)).is_none(), "the least recently used went");
        assert_eq!(c.get((0, 1)).as_deref(), Some(&[4u8; 4][..]));
        c.put((1, 1), blob(11));
        assert!(c.get((1, 1)).is_none(), "larger than the cap: not kept");
        c.put((1, 2), blob(10));
        assert_eq!((c.bytes, c.map.len()), (10, 1));
    }
}
