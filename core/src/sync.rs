//! The sync facade: the only door to atomics, cells, locks and threads.
//!
//! Every other module of magpie, in this crate and above it, takes its
//! concurrency primitives from here. Under `cfg(loom)` they are loom's
//! instrumented types, so the model checker sees every access; otherwise they
//! are std's, behind `#[repr(transparent)]` wrappers with the same method names
//! loom uses.
//!
//! The wrappers exist for one reason: clippy's `disallowed-types` forbids
//! `std::sync::atomic::Atomic*` and `std::cell::UnsafeCell` everywhere else in
//! the workspace, and a plain re-export would be the same type and trip the
//! lint in every user. A wrapper is a distinct type that compiles to the same
//! instructions (every method is `#[inline]`).
//!
//! Gate on plain `cfg(loom)`, never `cfg(all(test, loom))`: `magpie-runtime`
//! must see loom types from this crate when it is model-checked too.

#[cfg(loom)]
mod imp {
    pub use loom::cell::UnsafeCell;
    pub use loom::hint;
    pub use loom::sync::{Arc, Condvar, Mutex, MutexGuard};
    pub use loom::thread;
    pub use loom::thread_local;

    /// Loom's atomics, plus std's `Ordering`.
    pub mod atomic {
        pub use loom::sync::atomic::{
            fence, AtomicBool, AtomicI64, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize,
            Ordering,
        };
    }
}

#[cfg(not(loom))]
mod imp {
    pub use std::hint;
    pub use std::sync::{Arc, Condvar, Mutex, MutexGuard};
    pub use std::thread;
    pub use std::thread_local;

    /// std's `UnsafeCell` with loom's `with`/`with_mut` access methods, so the
    /// same code compiles against both.
    #[derive(Debug, Default)]
    #[repr(transparent)]
    pub struct UnsafeCell<T: ?Sized>(
        #[allow(clippy::disallowed_types)] // the facade is the one allowed user
        std::cell::UnsafeCell<T>,
    );

    impl<T> UnsafeCell<T> {
        /// Wraps `data`.
        #[inline]
        pub const fn new(data: T) -> Self {
            #[allow(clippy::disallowed_types)]
            Self(std::cell::UnsafeCell::new(data))
        }

        /// Unwraps the value.
        #[inline]
        pub fn into_inner(self) -> T {
            self.0.into_inner()
        }
    }

    impl<T: ?Sized> UnsafeCell<T> {
        /// Runs `f` with a shared raw pointer to the contents.
        #[inline(always)]
        pub fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
            f(self.0.get())
        }

        /// Runs `f` with a mutable raw pointer to the contents.
        #[inline(always)]
        pub fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
    }

    /// std's atomics behind loom-shaped wrappers (see the module docs). Each
    /// method is std's method of the same name.
    #[allow(clippy::disallowed_types)] // the facade is the one allowed user
    #[allow(missing_docs)] // every method mirrors std's, documented there
    pub mod atomic {
        pub use std::sync::atomic::{fence, Ordering};

        macro_rules! int_atomic {
            ($(#[$doc:meta])* $name:ident, $int:ty) => {
                $(#[$doc])*
                #[derive(Debug, Default)]
                #[repr(transparent)]
                pub struct $name(std::sync::atomic::$name);

                impl $name {
                    /// A new atomic holding `v`.
                    #[inline]
                    pub const fn new(v: $int) -> Self {
                        Self(std::sync::atomic::$name::new(v))
                    }
                    /// The std atomic underneath, for syscalls such as futex
                    /// wait that need its address.
                    #[inline]
                    pub const fn as_std(&self) -> &std::sync::atomic::$name {
                        &self.0
                    }
                    #[inline]
                    pub fn load(&self, order: Ordering) -> $int {
                        self.0.load(order)
                    }
                    #[inline]
                    pub fn store(&self, v: $int, order: Ordering) {
                        self.0.store(v, order)
                    }
                    #[inline]
                    pub fn swap(&self, v: $int, order: Ordering) -> $int {
                        self.0.swap(v, order)
                    }
                    #[inline]
                    pub fn compare_exchange(
                        &self,
                        current: $int,
                        new: $int,
                        success: Ordering,
                        failure: Ordering,
                    ) -> Result<$int, $int> {
                        self.0.compare_exchange(current, new, success, failure)
                    }
                    #[inline]
                    pub fn compare_exchange_weak(
                        &self,
                        current: $int,
                        new: $int,
                        success: Ordering,
                        failure: Ordering,
                    ) -> Result<$int, $int> {
                        self.0.compare_exchange_weak(current, new, success, failure)
                    }
                    #[inline]
                    pub fn fetch_add(&self, v: $int, order: Ordering) -> $int {
                        self.0.fetch_add(v, order)
                    }
                    #[inline]
                    pub fn fetch_sub(&self, v: $int, order: Ordering) -> $int {
                        self.0.fetch_sub(v, order)
                    }
                    #[inline]
                    pub fn fetch_or(&self, v: $int, order: Ordering) -> $int {
                        self.0.fetch_or(v, order)
                    }
                    #[inline]
                    pub fn fetch_and(&self, v: $int, order: Ordering) -> $int {
                        self.0.fetch_and(v, order)
                    }
                    #[inline]
                    pub fn fetch_max(&self, v: $int, order: Ordering) -> $int {
                        self.0.fetch_max(v, order)
                    }
                    #[inline]
                    pub fn fetch_update<F>(
                        &self,
                        set_order: Ordering,
                        fetch_order: Ordering,
                        f: F,
                    ) -> Result<$int, $int>
                    where
                        F: FnMut($int) -> Option<$int>,
                    {
                        self.0.fetch_update(set_order, fetch_order, f)
                    }
                    #[inline]
                    pub fn get_mut(&mut self) -> &mut $int {
                        self.0.get_mut()
                    }
                    #[inline]
                    pub fn into_inner(self) -> $int {
                        self.0.into_inner()
                    }
                }
            };
        }

        int_atomic!(
            /// An atomic `u8`.
            AtomicU8, u8
        );
        int_atomic!(
            /// An atomic `u32`.
            AtomicU32, u32
        );
        int_atomic!(
            /// An atomic `u64`.
            AtomicU64, u64
        );
        int_atomic!(
            /// An atomic `usize`.
            AtomicUsize, usize
        );
        int_atomic!(
            /// An atomic `i64`.
            AtomicI64, i64
        );

        /// An atomic `bool`.
        #[derive(Debug, Default)]
        #[repr(transparent)]
        pub struct AtomicBool(std::sync::atomic::AtomicBool);

        impl AtomicBool {
            #[inline]
            pub const fn new(v: bool) -> Self {
                Self(std::sync::atomic::AtomicBool::new(v))
            }
            #[inline]
            pub fn load(&self, order: Ordering) -> bool {
                self.0.load(order)
            }
            #[inline]
            pub fn store(&self, v: bool, order: Ordering) {
                self.0.store(v, order)
            }
            #[inline]
            pub fn swap(&self, v: bool, order: Ordering) -> bool {
                self.0.swap(v, order)
            }
            #[inline]
            pub fn compare_exchange(
                &self,
                current: bool,
                new: bool,
                success: Ordering,
                failure: Ordering,
            ) -> Result<bool, bool> {
                self.0.compare_exchange(current, new, success, failure)
            }
            #[inline]
            pub fn fetch_or(&self, v: bool, order: Ordering) -> bool {
                self.0.fetch_or(v, order)
            }
            #[inline]
            pub fn fetch_and(&self, v: bool, order: Ordering) -> bool {
                self.0.fetch_and(v, order)
            }
            #[inline]
            pub fn into_inner(self) -> bool {
                self.0.into_inner()
            }
        }

        /// An atomic raw pointer.
        #[derive(Debug)]
        #[repr(transparent)]
        pub struct AtomicPtr<T>(std::sync::atomic::AtomicPtr<T>);

        impl<T> Default for AtomicPtr<T> {
            fn default() -> Self {
                Self::new(std::ptr::null_mut())
            }
        }

        impl<T> AtomicPtr<T> {
            #[inline]
            pub const fn new(p: *mut T) -> Self {
                Self(std::sync::atomic::AtomicPtr::new(p))
            }
            #[inline]
            pub fn load(&self, order: Ordering) -> *mut T {
                self.0.load(order)
            }
            #[inline]
            pub fn store(&self, p: *mut T, order: Ordering) {
                self.0.store(p, order)
            }
            #[inline]
            pub fn swap(&self, p: *mut T, order: Ordering) -> *mut T {
                self.0.swap(p, order)
            }
            #[inline]
            pub fn compare_exchange(
                &self,
                current: *mut T,
                new: *mut T,
                success: Ordering,
                failure: Ordering,
            ) -> Result<*mut T, *mut T> {
                self.0.compare_exchange(current, new, success, failure)
            }
            #[inline]
            pub fn into_inner(self) -> *mut T {
                self.0.into_inner()
            }
        }
    }
}

pub use imp::*;

#[cfg(all(test, not(loom)))]
mod tests {
    use super::atomic::{AtomicU64, Ordering};
    use super::UnsafeCell;

    #[test]
    fn unsafe_cell_with_and_with_mut_reach_the_same_value() {
        let cell = UnsafeCell::new(41u32);
        // SAFETY: the cell is local to this test; no other reference exists.
        cell.with_mut(|p| unsafe { *p += 1 });
        // SAFETY: as above, and the write has finished.
        assert_eq!(cell.with(|p| unsafe { *p }), 42);
        assert_eq!(cell.into_inner(), 42);
    }

    #[test]
    fn atomic_wrapper_is_the_size_of_the_integer() {
        assert_eq!(std::mem::size_of::<AtomicU64>(), 8);
        let a = AtomicU64::new(1);
        assert_eq!(a.fetch_add(2, Ordering::Relaxed), 1);
        assert_eq!(a.load(Ordering::Relaxed), 3);
    }
}
