//! `JoinHandle`, `AbortHandle` and `JoinError`.

use core::any::Any;
use core::fmt;
use core::future::Future;
use core::marker::PhantomData;
use core::pin::Pin;
use core::task::{Context, Poll};

use super::id::TaskId;
use super::raw::RawTask;
use super::state::TransitionToCancelled;

/// An owned permission to await a task's output. One pointer wide.
///
/// Awaiting it yields `Ok(output)`, or a [`JoinError`] if the task panicked
/// or was cancelled ([`JoinHandle::abort`], an [`AbortHandle`], or runtime
/// shutdown). Dropping it detaches the task: it keeps running and drops its
/// own output when it completes.
pub struct JoinHandle<T> {
    raw: RawTask,
    _output: PhantomData<T>,
}

// SAFETY: the handle receives the task's `T` on whatever thread polls it, so
// `T: Send` is required; everything else it touches is the atomic state word
// and cells whose ownership the word hands over (task README, step J).
unsafe impl<T: Send> Send for JoinHandle<T> {}
// SAFETY: `&JoinHandle` only reaches `abort`, `is_finished`, `id` and
// `abort_handle`: atomics and the immutable id. The output is read only
// through `Pin<&mut Self>`.
unsafe impl<T: Send> Sync for JoinHandle<T> {}

// The handle is a pointer; the output is never pinned inside it.
impl<T> Unpin for JoinHandle<T> {}

impl<T> JoinHandle<T> {
    /// # Safety
    /// `raw` is a task whose output type is `T` and the caller passes the
    /// `JoinHandle`'s reference (JOIN_INTEREST is set for it).
    pub(crate) unsafe fn from_raw(raw: RawTask) -> Self {
        Self {
            raw,
            _output: PhantomData,
        }
    }

    /// Cancel the task. If it has not completed, its future is dropped the
    /// next time a worker reaches it (at once if it is idle: it is scheduled
    /// for that; at its next shield exit if it is inside a shield) and the
    /// handle resolves to a cancelled [`JoinError`]. If it completes first,
    /// the handle gets its output. Idempotent.
    pub fn abort(&self) {
        abort(self.raw)
    }

    /// The task completed: its output (or error) is ready, or was taken.
    pub fn is_finished(&self) -> bool {
        self.raw.state().load().is_complete()
    }

    /// The task's id.
    pub fn id(&self) -> TaskId {
        self.raw.id()
    }

    /// A handle that can abort the task but not await it.
    pub fn abort_handle(&self) -> AbortHandle {
        // Made from the JoinHandle's reference (README step R).
        self.raw.state().ref_inc();
        AbortHandle { raw: self.raw }
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut out: Poll<Result<T, JoinError>> = Poll::Pending;
        // SAFETY: the handle holds its reference and is polled through
        // `&mut`; `out` has the type the task's vtable writes (`bind` made
        // this handle with `T = F::Output`).
        unsafe {
            (self.raw.vtable().try_read_output)(
                self.raw,
                (&mut out as *mut Poll<Result<T, JoinError>>).cast::<()>(),
                cx.waker(),
            )
        };
        out
    }
}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        // SAFETY: the handle gives up its reference.
        unsafe { (self.raw.vtable().drop_join_handle)(self.raw) }
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("id", &self.id())
            .field("state", self.raw.state())
            .finish()
    }
}

/// Cancel a task on behalf of a handle that holds a reference (task README
/// step C1).
fn abort(raw: RawTask) {
    match raw.state().cancel() {
        TransitionToCancelled::Schedule => {
            // SAFETY: `cancel` made the IDLE task SCHEDULED with a new
            // reference for the entry; the caller's handle keeps its own
            // across the call.
            unsafe { (raw.vtable().schedule)(raw) }
        }
        TransitionToCancelled::Running
        | TransitionToCancelled::Scheduled
        | TransitionToCancelled::AlreadyComplete => {}
    }
}

/// Permission to abort a task, without its output. `Clone`; one pointer
/// wide; holds one reference.
pub struct AbortHandle {
    raw: RawTask,
}

// SAFETY: an `AbortHandle` only uses the atomic state word, the immutable id
// and `S::schedule` (`S: Send + Sync`, and the entry it creates is `Send`).
unsafe impl Send for AbortHandle {}
// SAFETY: as above; every method takes `&self` and is thread-safe.
unsafe impl Sync for AbortHandle {}

impl AbortHandle {
    /// Cancel the task (see [`JoinHandle::abort`]).
    pub fn abort(&self) {
        abort(self.raw)
    }

    /// The task completed.
    pub fn is_finished(&self) -> bool {
        self.raw.state().load().is_complete()
    }

    /// The task's id.
    pub fn id(&self) -> TaskId {
        self.raw.id()
    }
}

impl Clone for AbortHandle {
    fn clone(&self) -> Self {
        // Made from this handle's reference.
        self.raw.state().ref_inc();
        Self { raw: self.raw }
    }
}

impl Drop for AbortHandle {
    fn drop(&mut self) {
        if self.raw.state().ref_dec() {
            // SAFETY: that was the last reference.
            unsafe { (self.raw.vtable().dealloc)(self.raw) }
        }
    }
}

impl fmt::Debug for AbortHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AbortHandle")
            .field("id", &self.id())
            .field("state", self.raw.state())
            .finish()
    }
}

/// Why a task produced no output: it was cancelled, or it panicked.
pub struct JoinError {
    repr: Repr,
    id: TaskId,
}

enum Repr {
    Cancelled,
    Panic(Box<dyn Any + Send + 'static>),
}

// SAFETY: the panic payload is `Send` but maybe not `Sync`. `&JoinError`
// never reaches it except to downcast to `String` or `&'static str` (both
// `Sync`) for `Debug`/`Display`; `Any::type_id` reads only the vtable. The
// payload itself is handed out only by value (`into_panic`,
// `try_into_panic`).
unsafe impl Sync for JoinError {}

impl JoinError {
    pub(crate) fn cancelled(id: TaskId) -> Self {
        Self {
            repr: Repr::Cancelled,
            id,
        }
    }

    pub(crate) fn panic(id: TaskId, payload: Box<dyn Any + Send + 'static>) -> Self {
        Self {
            repr: Repr::Panic(payload),
            id,
        }
    }

    /// The error of task `id` that was cancelled, for a runtime that keeps
    /// tasks outside magpie-core's cells (their handles resolve to the same
    /// error type as every other task's).
    pub fn new_cancelled(id: TaskId) -> Self {
        Self::cancelled(id)
    }

    /// The error of task `id` that panicked with `payload` (see
    /// [`new_cancelled`](Self::new_cancelled)).
    pub fn new_panic(id: TaskId, payload: Box<dyn Any + Send + 'static>) -> Self {
        Self::panic(id, payload)
    }

    /// The task was cancelled (aborted, or dropped at shutdown).
    pub fn is_cancelled(&self) -> bool {
        matches!(self.repr, Repr::Cancelled)
    }

    /// The task panicked (in its poll, or in its future's `Drop`).
    pub fn is_panic(&self) -> bool {
        matches!(self.repr, Repr::Panic(_))
    }

    /// The panic payload, for `std::panic::resume_unwind`.
    ///
    /// # Panics
    /// If the error is a cancellation.
    #[track_caller]
    pub fn into_panic(self) -> Box<dyn Any + Send + 'static> {
        self.try_into_panic()
            .expect("`JoinError::into_panic` on a cancelled task")
    }

    /// The panic payload, or the error back if it is a cancellation.
    pub fn try_into_panic(self) -> Result<Box<dyn Any + Send + 'static>, JoinError> {
        match self.repr {
            Repr::Panic(payload) => Ok(payload),
            Repr::Cancelled => Err(self),
        }
    }

    /// The id of the task that failed.
    pub fn id(&self) -> TaskId {
        self.id
    }

    /// The panic message, when the payload is a string (what `panic!` makes).
    fn panic_message(&self) -> Option<&str> {
        match &self.repr {
            Repr::Panic(payload) => {
                if let Some(s) = payload.downcast_ref::<&'static str>() {
                    Some(s)
                } else {
                    payload.downcast_ref::<String>().map(String::as_str)
                }
            }
            Repr::Cancelled => None,
        }
    }
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.repr, self.panic_message()) {
            (Repr::Cancelled, _) => write!(f, "task {} was cancelled", self.id),
            (Repr::Panic(_), Some(msg)) => {
                write!(f, "task {} panicked with message {msg:?}", self.id)
            }
            (Repr::Panic(_), None) => write!(f, "task {} panicked", self.id),
        }
    }
}

impl fmt::Debug for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.repr, self.panic_message()) {
            (Repr::Cancelled, _) => write!(f, "JoinError::Cancelled({:?})", self.id),
            (Repr::Panic(_), Some(msg)) => {
                write!(f, "JoinError::Panic({:?}, {msg:?}, ..)", self.id)
            }
            (Repr::Panic(_), None) => write!(f, "JoinError::Panic({:?}, ..)", self.id),
        }
    }
}

impl std::error::Error for JoinError {}
