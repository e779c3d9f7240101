//! The task cell: its layout, its allocation, and the type-erased pointer
//! every handle holds.
//!
//! ```text
//!  one allocation per task, #[repr(C)]
//! +-----------------------------+  <- RawTask points here (NonNull<Header>)
//! | Header                      |  state word, &'static Vtable, TaskId
//! +-----------------------------+
//! | S (the scheduler handle)    |
//! +-----------------------------+
//! | UnsafeCell<Stage<F>>        |  the future, then its output, then nothing
//! +-----------------------------+  <- header + vtable.trailer_offset
//! | Trailer                     |  registry owner and links, join waker
//! +-----------------------------+
//! ```
//!
//! The header is first so that a pointer to the cell is a pointer to the
//! header, and code that does not know `F` and `S` (wakers, the registry,
//! `JoinHandle<T>`) reaches everything else through the vtable. The trailer
//! sits after the future so that the header, the scheduler and the start of
//! the future share the first cache line, the one every poll touches; the
//! trailer is touched only at spawn, completion and when a `JoinHandle`
//! registers its waker.

use core::future::Future;
use core::ptr::{self, NonNull};
use core::task::Waker;
use std::alloc::{handle_alloc_error, Layout};
use std::mem::offset_of;

use super::harness;
use super::id::TaskId;
use super::join::JoinError;
use super::state::State;
use super::Schedule;
use crate::sync::UnsafeCell;

#[cfg(loom)]
use loom::alloc::{alloc, dealloc};
#[cfg(not(loom))]
use std::alloc::{alloc, dealloc};

/// The first bytes of every task. Type-erased code sees only this.
#[repr(C)]
pub(crate) struct Header {
    /// The packed state word (`state.rs`): lifecycle, flags, shield depth,
    /// reference count.
    pub(crate) state: State,
    /// The functions and offsets for this task's concrete `F` and `S`.
    pub(crate) vtable: &'static Vtable,
    /// Written once before the task is shared, read-only after.
    pub(crate) id: TaskId,
}

/// The registry links of a task. Read and written only while holding the
/// lock of the registry shard the task belongs to (`list.rs`).
#[derive(Default)]
pub(crate) struct Links {
    pub(crate) prev: Option<RawTask>,
    pub(crate) next: Option<RawTask>,
}

/// The last part of the cell.
#[repr(C)]
pub(crate) struct Trailer {
    /// The registry the task was bound to: the address of its shard array
    /// (`OwnedTasks::owner_key`). Written before the task is shared.
    pub(crate) owner: usize,
    /// Registry links, guarded by the owner's shard lock.
    pub(crate) links: UnsafeCell<Links>,
    /// The `JoinHandle`'s waker. Owned by the handle while JOIN_WAKER is
    /// clear, by the task side while it is set (task README, step J).
    pub(crate) join_waker: UnsafeCell<Option<Waker>>,
}

/// What the future slot holds.
pub(crate) enum Stage<F: Future> {
    /// Not finished: the future, pinned in place (it is dropped in place too).
    Running(F),
    /// Finished: the output (or the error) until someone takes or drops it.
    Finished(Result<F::Output, JoinError>),
    /// Neither: the output was taken or dropped.
    Consumed,
}

/// The whole task: one allocation, header first.
#[repr(C)]
pub(crate) struct Cell<F: Future, S> {
    pub(crate) header: Header,
    /// Read-only after the task is created; borrowed by wakers from any
    /// thread, hence `S: Sync`.
    pub(crate) scheduler: S,
    /// Owned by whoever the state word says (task README, "Who owns the
    /// stage").
    pub(crate) stage: UnsafeCell<Stage<F>>,
    pub(crate) trailer: Trailer,
}

/// One per concrete task type, `'static`. Every function takes the task and
/// is `unsafe`: the caller must hold the reference or the right the function
/// consumes, as its docs in `harness.rs` say.
pub(crate) struct Vtable {
    /// Run a queue entry (consumes its reference).
    pub(crate) poll: unsafe fn(RawTask),
    /// Hand a new queue entry to `S::schedule` (consumes the entry's new
    /// reference; the caller keeps its own across the call).
    pub(crate) schedule: unsafe fn(RawTask),
    /// Free the cell (the caller dropped the last reference).
    pub(crate) dealloc: unsafe fn(RawTask),
    /// `JoinHandle::poll`: write `Poll<Result<F::Output, JoinError>>` through
    /// the pointer if the output is ready, else register the waker.
    pub(crate) try_read_output: unsafe fn(RawTask, *mut (), &Waker),
    /// Drop the `JoinHandle` (consumes its reference).
    pub(crate) drop_join_handle: unsafe fn(RawTask),
    /// Drop a queue entry without running it (consumes its reference).
    pub(crate) drop_notified: unsafe fn(RawTask),
    /// Cancel a task the shutdown sweep claimed and unlinked (consumes the
    /// registry's reference).
    pub(crate) shutdown: unsafe fn(RawTask),
    /// Byte offset of the trailer from the header.
    pub(crate) trailer_offset: usize,
}

impl<F: Future, S: Schedule> Cell<F, S> {
    const TRAILER_OFFSET: usize = offset_of!(Self, trailer);
}

/// The vtable for `Cell<F, S>`. Every field is a constant, so the reference
/// is promoted to a `'static`.
fn vtable<F: Future + Send + 'static, S: Schedule>() -> &'static Vtable
where
    F::Output: Send + 'static,
{
    &Vtable {
        poll: harness::poll::<F, S>,
        schedule: harness::schedule::<F, S>,
        dealloc: harness::dealloc::<F, S>,
        try_read_output: harness::try_read_output::<F, S>,
        drop_join_handle: harness::drop_join_handle::<F, S>,
        drop_notified: harness::drop_notified::<F, S>,
        shutdown: harness::shutdown::<F, S>,
        trailer_offset: Cell::<F, S>::TRAILER_OFFSET,
    }
}

/// A type-erased pointer to a task cell: what `Notified`, `JoinHandle`,
/// `AbortHandle`, wakers and the registry hold. `Copy`: it carries no
/// ownership by itself; each holder's type says which reference it owns.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct RawTask {
    ptr: NonNull<Header>,
}

impl RawTask {
    /// Allocate and initialize a task cell: SCHEDULED, three references (the
    /// first queue entry, the `JoinHandle`, the registry), no links.
    pub(crate) fn new<F, S>(future: F, scheduler: S, id: TaskId, owner: usize) -> RawTask
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
        S: Schedule,
    {
        let layout = Layout::new::<Cell<F, S>>();
        // SAFETY: the layout is not zero-sized (the header alone is 24 bytes).
        let cell = unsafe { alloc(layout) }.cast::<Cell<F, S>>();
        if cell.is_null() {
            handle_alloc_error(layout);
        }
        // SAFETY: `cell` is a fresh allocation for one `Cell<F, S>`, aligned
        // for it by `Layout::new`; each field is written once through a raw
        // place (no reference to uninitialized memory is made). Writing the
        // fields one by one keeps at most one extra copy of a large future on
        // the stack.
        unsafe {
            ptr::addr_of_mut!((*cell).header).write(Header {
                state: State::new_owned(),
                vtable: vtable::<F, S>(),
                id,
            });
            ptr::addr_of_mut!((*cell).scheduler).write(scheduler);
            ptr::addr_of_mut!((*cell).stage).write(UnsafeCell::new(Stage::Running(future)));
            ptr::addr_of_mut!((*cell).trailer).write(Trailer {
                owner,
                links: UnsafeCell::new(Links::default()),
                join_waker: UnsafeCell::new(None),
            });
        }
        RawTask {
            // SAFETY: checked non-null above. The pointer keeps the
            // provenance of the whole allocation: every later access to the
            // scheduler, stage or trailer derives from it, never from a
            // `&Header`.
            ptr: unsafe { NonNull::new_unchecked(cell.cast::<Header>()) },
        }
    }

    /// Free the cell of a `Cell<F, S>`, dropping what it still holds.
    ///
    /// # Safety
    /// The caller dropped the task's last reference (so it synchronized with
    /// every other holder's accesses, task README step R) and the task is a
    /// `Cell<F, S>`. Nobody touches the task after this.
    pub(crate) unsafe fn dealloc_cell<F: Future, S>(self) {
        let cell = self.ptr.as_ptr().cast::<Cell<F, S>>();
        // SAFETY: (caller) this is the only access left, and the cell is fully
        // initialized. Struct drop glue drops every field even if one panics;
        // the panic is caught (a free must not unwind into a waker's drop).
        let res = harness::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe {
            ptr::drop_in_place(cell)
        }));
        if let Err(payload) = res {
            harness::drop_panic_payload(payload);
        }
        // SAFETY: allocated in `new` with this very layout.
        unsafe { dealloc(cell.cast::<u8>(), Layout::new::<Cell<F, S>>()) }
    }

    /// The pointer as a waker's data pointer.
    #[inline]
    pub(crate) fn as_waker_data(self) -> *const () {
        self.ptr.as_ptr() as *const ()
    }

    /// The task a waker's data pointer refers to.
    ///
    /// # Safety
    /// `data` came from [`RawTask::as_waker_data`].
    #[inline]
    pub(crate) unsafe fn from_waker_data(data: *const ()) -> RawTask {
        RawTask {
            // SAFETY: (caller) a task pointer, hence non-null.
            ptr: unsafe { NonNull::new_unchecked(data as *mut Header) },
        }
    }

    /// The cell as its concrete type.
    #[inline]
    pub(crate) fn cell<F: Future, S>(self) -> NonNull<Cell<F, S>> {
        self.ptr.cast()
    }

    #[inline]
    pub(crate) fn header(&self) -> &Header {
        // SAFETY: every `RawTask` in circulation belongs to a holder of a
        // reference (or to a registry shard whose lock the caller holds,
        // which holds one), so the cell is allocated and its header
        // initialized and never mutated except through its atomics.
        unsafe { self.ptr.as_ref() }
    }

    #[inline]
    pub(crate) fn state(&self) -> &State {
        &self.header().state
    }

    #[inline]
    pub(crate) fn vtable(&self) -> &'static Vtable {
        self.header().vtable
    }

    #[inline]
    pub(crate) fn id(&self) -> TaskId {
        self.header().id
    }

    /// The trailer, found through the vtable's offset.
    #[inline]
    pub(crate) fn trailer(&self) -> &Trailer {
        let offset = self.vtable().trailer_offset;
        // SAFETY: `offset` is `offset_of!(Cell<F, S>, trailer)` for this
        // task's concrete type, so the pointer stays inside the allocation
        // (whose provenance `self.ptr` carries) and points to an initialized
        // `Trailer`; alive for the same reason as `header`.
        unsafe { &*self.ptr.as_ptr().cast::<u8>().add(offset).cast::<Trailer>() }
    }
}

impl core::fmt::Debug for RawTask {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "RawTask({:p})", self.ptr)
    }
}
