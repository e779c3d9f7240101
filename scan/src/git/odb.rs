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

use std::sync::{Arc, Mutex, PoisonError};

use gix::odb::pack::cache::lru::MemoryCappedHashmap;
use gix::odb::pack::cache::DecodeEntry;

/// Decoded pack entries the workers keep, all together: 64 MiB. A window
/// of blobs in pack order needs the bases of its chains, not the whole
/// window.
pub const PACK_CACHE_BYTES: usize = 64 << 20;

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
}

impl std::fmt::Debug for Odb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Odb")
            .field("git_dir", &self.repo.git_dir())
            .finish_non_exhaustive()
    }
}

impl Odb {
    /// `repo`, with a new shared pack cache of [`PACK_CACHE_BYTES`].
    pub fn new(repo: gix::ThreadSafeRepository) -> Self {
        Self {
            repo,
            packs: Arc::new(Mutex::new(MemoryCappedHashmap::new(PACK_CACHE_BYTES))),
        }
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

/// The walk's handle: an object cache for the trees it reads twice, a pack
/// cache of its own, and pack locations available (`location_by_oid`, for
/// the pack order of blobs).
pub fn walk_handle(repo: &gix::ThreadSafeRepository) -> gix::Repository {
    let mut r = repo.to_thread_local();
    r.object_cache_size(WALK_OBJECT_CACHE_BYTES);
    r.objects
        .set_pack_cache(|| Box::new(MemoryCappedHashmap::new(WALK_PACK_CACHE_BYTES)));
    r.objects.prevent_pack_unload();
    r
}

/// Where `id` is packed: (pack, offset), or `None` for a loose or missing
/// object. Needs a handle from [`walk_handle`].
pub fn pack_location(
    repo: &gix::Repository,
    id: &gix::oid,
    buf: &mut Vec<u8>,
) -> Option<(u32, u64)> {
    gix::odb::pack::Find::location_by_oid(&*repo.objects, id, buf)
        .map(|l| (l.pack_id, l.pack_offset))
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
