//! The byte budget shared by every archive under one outermost archive.

use magpie_core::sync::atomic::{AtomicU64, Ordering};
use magpie_core::sync::Arc;

struct Shared {
    limit: u64,
    used: AtomicU64,
}

/// A byte budget shared by an outermost archive and every archive nested in
/// it (clone it into each cursor). Every member byte any of them produces,
/// read or skipped by decompressing, is charged here.
///
/// The counter is a plain statistic: `Relaxed` is enough because no other
/// memory is published through it. When one budget is shared by cursors on
/// several threads, each may overshoot the limit by at most one read (one
/// buffer) before it sees the total; a single cursor chain never overshoots.
#[derive(Clone)]
pub struct RootBudget {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for RootBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RootBudget")
            .field("limit", &self.limit())
            .field("used", &self.used())
            .finish()
    }
}

impl RootBudget {
    /// A budget of `limit` bytes (use `ArchiveLimits::max_root_bytes`).
    pub fn new(limit: u64) -> Self {
        RootBudget {
            shared: Arc::new(Shared {
                limit,
                used: AtomicU64::new(0),
            }),
        }
    }

    /// The limit.
    pub fn limit(&self) -> u64 {
        self.shared.limit
    }

    /// Bytes charged so far.
    pub fn used(&self) -> u64 {
        self.shared.used.load(Ordering::Relaxed)
    }

    /// Bytes left (0 once the limit is reached or passed).
    pub fn remaining(&self) -> u64 {
        self.limit().saturating_sub(self.used())
    }

    /// Charges `n` bytes; returns false if the total is now over the limit.
    pub(crate) fn charge(&self, n: u64) -> bool {
        let before = self.shared.used.fetch_add(n, Ordering::Relaxed);
        before.saturating_add(n) <= self.limit()
    }
}
