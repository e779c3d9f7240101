//! The current worker: one thread-local pointer to the state a pool worker
//! keeps for its joins (the runtime's `JoinLocal`), set for the worker's
//! lifetime and read by every `join` (README.md, "The current worker", C1-C3).
//!
//! A `RefCell<Option<Rc<..>>>` thread-local costs a lazy-initialisation
//! check, a borrow flag and a reference count per access; a `Cell` holding a
//! pointer costs a load, and is what rayon does (`WorkerThread::current`).
//! Reading through the pointer is `unsafe`, so it lives here, behind a
//! closure API that cannot hand the reference out of the scope that set it.

use core::any::TypeId;
use core::cell::Cell;
use core::ptr::NonNull;

/// The pointer and the type it was set with.
type Slot = Option<(NonNull<()>, TypeId)>;

thread_local! {
    /// This thread's current worker context: set by [`enter`], read by
    /// [`with`]. A `const` initialiser and a `Copy` value without a
    /// destructor: no lazy-initialisation state, no registration.
    static CURRENT: Cell<Slot> = const { Cell::new(None) };
}

/// Puts `ctx` back to the slot's previous value when dropped (C2): on
/// return and on unwind alike.
struct Restore(Slot);

impl Drop for Restore {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.0));
    }
}

/// C1: makes `ctx` this thread's current worker context while `f` runs,
/// then restores the previous one (also when `f` unwinds).
pub fn enter<T: 'static, R>(ctx: &T, f: impl FnOnce() -> R) -> R {
    let slot = Some((NonNull::from(ctx).cast::<()>(), TypeId::of::<T>()));
    let _restore = Restore(CURRENT.with(|c| c.replace(slot)));
    f()
}

/// C3: runs `f` with this thread's current worker context if one of type `T`
/// is set ([`enter`] is running on this thread), else with `None`.
#[inline(always)]
pub fn with<T: 'static, R>(f: impl FnOnce(Option<&T>) -> R) -> R {
    let ctx = match CURRENT.with(Cell::get) {
        Some((ptr, ty)) if ty == TypeId::of::<T>() => {
            // SAFETY: C2: the slot holds a pointer made from a `&T` (the type
            // checked just above) by an `enter` that is still running on this
            // thread: `enter` restores the slot before it returns or unwinds,
            // so the `&T` it was given outlives this call, and `f` cannot keep
            // the reference past it (its lifetime is this call's). Only shared
            // references are made from it.
            Some(unsafe { ptr.cast::<T>().as_ref() })
        }
        _ => None,
    };
    f(ctx)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    struct Ctx(u32);
    struct Other(#[allow(dead_code)] u64);

    #[test]
    fn with_sees_the_context_only_inside_enter() {
        assert!(with::<Ctx, _>(|c| c.is_none()));
        let ctx = Ctx(7);
        let seen = enter(&ctx, || with::<Ctx, _>(|c| c.map(|c| c.0)));
        assert_eq!(seen, Some(7));
        assert!(with::<Ctx, _>(|c| c.is_none()));
    }

    #[test]
    fn another_type_is_not_seen_as_the_context() {
        let ctx = Ctx(1);
        enter(&ctx, || {
            assert!(with::<Other, _>(|o| o.is_none()));
            assert_eq!(with::<Ctx, _>(|c| c.map(|c| c.0)), Some(1));
        });
    }

    #[test]
    fn nested_enter_restores_the_outer_context() {
        let (outer, inner) = (Ctx(1), Ctx(2));
        enter(&outer, || {
            let o = Other(9);
            enter(&inner, || {
                assert_eq!(with::<Ctx, _>(|c| c.map(|c| c.0)), Some(2));
                enter(&o, || assert!(with::<Ctx, _>(|c| c.is_none())));
                assert_eq!(with::<Ctx, _>(|c| c.map(|c| c.0)), Some(2));
            });
            assert_eq!(with::<Ctx, _>(|c| c.map(|c| c.0)), Some(1));
        });
    }

    #[test]
    fn an_unwind_out_of_enter_restores_the_slot() {
        let r = std::panic::catch_unwind(|| {
            let ctx = Ctx(3);
            enter(&ctx, || std::panic::resume_unwind(Box::new("out of enter")));
        });
        assert!(r.is_err());
        // The frame that held `ctx` is gone: nothing may point at it.
        assert!(with::<Ctx, _>(|c| c.is_none()));
    }

    #[test]
    fn another_thread_does_not_see_this_threads_context() {
        let ctx = Ctx(4);
        enter(&ctx, || {
            let other = std::thread::spawn(|| with::<Ctx, _>(|c| c.is_none()));
            assert!(other.join().unwrap());
        });
    }
}
