//! The tasks' `Waker`: one static vtable for every task type, the task
//! pointer as data, one reference per waker (task README, steps W1..W4).

use core::mem::ManuallyDrop;
use core::ops::Deref;
use core::task::{RawWaker, RawWakerVTable, Waker};

use super::raw::RawTask;
use super::state::{TransitionToNotified, TransitionToNotifiedByVal};

/// A `static`, not a `const`: `Waker::will_wake` compares vtable addresses, and
/// a `const` could be duplicated per codegen unit.
static WAKER_VTABLE: RawWakerVTable =
    RawWakerVTable::new(clone_waker, wake_by_val, wake_by_ref, drop_waker);

/// The `Waker` for `raw`, owning one reference.
///
/// # Safety
/// The caller passes one reference to the new waker.
#[inline]
unsafe fn waker_from_ref(raw: RawTask) -> Waker {
    // SAFETY: the vtable's functions treat the data pointer as a task with
    // one reference owned by the waker, which (caller) it has. Waking and
    // dropping from any thread is fine: see `clone_waker`'s SAFETY below.
    unsafe { Waker::from_raw(RawWaker::new(raw.as_waker_data(), &WAKER_VTABLE)) }
}

/// W1: clone = one more reference.
unsafe fn clone_waker(data: *const ()) -> RawWaker {
    // SAFETY: `data` is a task pointer of a waker (or a `WakerRef`) that
    // holds a reference, so the task is alive.
    let raw = unsafe { RawTask::from_waker_data(data) };
    raw.state().ref_inc();
    // The RawWaker may be used on any thread: the vtable functions only use
    // the atomic state word and `S::schedule` (`S: Send + Sync`, and the task
    // is `Send`, task README "Send and Sync").
    RawWaker::new(data, &WAKER_VTABLE)
}

/// W2: wake by value. The waker's reference is dropped in the same RMW unless
/// the task is submitted; then it is kept across the scheduler call (which
/// borrows the scheduler from the cell) and dropped after.
unsafe fn wake_by_val(data: *const ()) {
    // SAFETY: the waker being consumed holds a reference.
    let raw = unsafe { RawTask::from_waker_data(data) };
    match raw.state().transition_to_notified_by_val() {
        TransitionToNotifiedByVal::Submit => {
            // SAFETY: the RMW made the task SCHEDULED with a new reference
            // for the entry; our reference outlives the call.
            unsafe { (raw.vtable().schedule)(raw) };
            if raw.state().ref_dec() {
                // SAFETY: that was the last reference.
                unsafe { (raw.vtable().dealloc)(raw) };
            }
        }
        TransitionToNotifiedByVal::DoNothing => {}
        // SAFETY: the RMW dropped the last reference.
        TransitionToNotifiedByVal::Dealloc => unsafe { (raw.vtable().dealloc)(raw) },
    }
}

/// W3: wake by reference.
unsafe fn wake_by_ref(data: *const ()) {
    // SAFETY: the waker holds a reference.
    let raw = unsafe { RawTask::from_waker_data(data) };
    match raw.state().transition_to_notified() {
        TransitionToNotified::Submit => {
            // SAFETY: SCHEDULED with a new reference for the entry; the
            // waker's reference outlives the call.
            unsafe { (raw.vtable().schedule)(raw) }
        }
        TransitionToNotified::DoNothing => {}
    }
}

/// W4: drop = one reference fewer; free on the last.
unsafe fn drop_waker(data: *const ()) {
    // SAFETY: the waker being dropped holds a reference.
    let raw = unsafe { RawTask::from_waker_data(data) };
    if raw.state().ref_dec() {
        // SAFETY: that was the last reference.
        unsafe { (raw.vtable().dealloc)(raw) };
    }
}

/// A `Waker` borrowed from a reference the caller holds (the worker's, during
/// a poll): no reference-count change on creation or drop. Cloning it makes a
/// real waker with its own reference.
pub(crate) struct WakerRef {
    waker: ManuallyDrop<Waker>,
}

impl WakerRef {
    /// # Safety
    /// The caller holds a reference to `raw` for the `WakerRef`'s whole life.
    #[inline]
    pub(crate) unsafe fn new(raw: RawTask) -> Self {
        Self {
            // SAFETY: the waker "owns" the caller's reference only nominally:
            // `ManuallyDrop` never runs `drop_waker`, and `Deref` hands out
            // only `&Waker`, which cannot be consumed by `wake()`.
            waker: ManuallyDrop::new(unsafe { waker_from_ref(raw) }),
        }
    }
}

impl Deref for WakerRef {
    type Target = Waker;

    #[inline]
    fn deref(&self) -> &Waker {
        &self.waker
    }
}
