//! `CachePadded<T>`: keeps a value alone on its cache line(s).
//!
//! Two values written by different cores must not share a line, or every write
//! by one core invalidates the other's copy ("false sharing"). We align to
//! 128 bytes on x86_64 and aarch64, not 64: since Sandy Bridge, Intel's spatial
//! prefetcher pulls cache lines in adjacent pairs, so two values 64 bytes apart
//! still fight; Apple's M-series and several Neoverse parts have 128-byte lines
//! outright. Other targets get 64.

use core::fmt;
use core::ops::{Deref, DerefMut};

/// Pads and aligns `T` to [`CACHE_LINE`] bytes.
#[cfg_attr(any(target_arch = "x86_64", target_arch = "aarch64"), repr(align(128)))]
#[cfg_attr(
    not(any(target_arch = "x86_64", target_arch = "aarch64")),
    repr(align(64))
)]
#[derive(Default)]
pub struct CachePadded<T> {
    value: T,
}

/// The alignment `CachePadded` uses on this target.
pub const CACHE_LINE: usize = core::mem::align_of::<CachePadded<()>>();

impl<T> CachePadded<T> {
    /// Pads `value`.
    #[inline]
    pub const fn new(value: T) -> Self {
        Self { value }
    }

    /// Returns the value.
    #[inline]
    pub fn into_inner(self) -> T {
        self.value
    }
}

impl<T> Deref for CachePadded<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T> DerefMut for CachePadded<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        &mut self.value
    }
}

impl<T: fmt::Debug> fmt::Debug for CachePadded<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CachePadded")
            .field("value", &self.value)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_padded_is_aligned_to_a_full_line() {
        #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
        assert_eq!(CACHE_LINE, 128);
        assert_eq!(core::mem::align_of::<CachePadded<u8>>(), CACHE_LINE);
        assert_eq!(core::mem::size_of::<CachePadded<u8>>(), CACHE_LINE);
        // Two padded neighbours in an array never share a line.
        let pair = [CachePadded::new(1u64), CachePadded::new(2u64)];
        let a = &*pair[0] as *const u64 as usize;
        let b = &*pair[1] as *const u64 as usize;
        assert!(b - a >= CACHE_LINE);
        assert_eq!(a % CACHE_LINE, 0);
    }
}
