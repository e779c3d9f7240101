//! The per-process event queue: Vyukov's multi-producer, single-consumer
//! linked queue with a stub node.
//!
//! ```text
//!  head (consumer only)                         tail (producers swap)
//!    |                                            |
//!    v                                            v
//!  [stub] --next--> [e1] --next--> [e2] ... --> [en] --next--> null
//! ```
//!
//! A push is one `swap` of `tail` plus one store into the old tail's `next`;
//! a pop reads `head.next` and moves `head` forward. Between a producer's
//! swap and its store the chain is cut ("inconsistent"): the consumer sees
//! the end of the chain before the new tail and reports
//! [`Pop::Inconsistent`]. That event is not lost: the producer notifies the
//! process only after its store (README.md, "Producer", step 3), and that
//! notify re-queues it.
//!
//! The consumer side is `pub(crate)` and `unsafe`: the only safe way to pop
//! is through a [`Stepping`](super::Stepping) token, which only the READY ->
//! RUNNING transition hands out.

use core::ptr;

use crate::sync::atomic::{AtomicPtr, Ordering};
use crate::sync::UnsafeCell;

struct Node<T> {
    next: AtomicPtr<Node<T>>,
    value: UnsafeCell<Option<T>>,
}

impl<T> Node<T> {
    fn alloc(value: Option<T>) -> *mut Node<T> {
        Box::into_raw(Box::new(Node {
            next: AtomicPtr::new(ptr::null_mut()),
            value: UnsafeCell::new(value),
        }))
    }
}

/// What one pop found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Pop<T> {
    /// The oldest event.
    Data(T),
    /// Nothing queued.
    Empty,
    /// A producer is between its swap and its link; its notify will follow.
    Inconsistent,
}

/// A multi-producer, single-consumer FIFO queue.
pub(crate) struct Queue<T> {
    /// The stub: the last node popped (its value already taken). Read and
    /// written by the consumer only.
    head: UnsafeCell<*mut Node<T>>,
    /// The newest node. Producers `swap` it.
    tail: AtomicPtr<Node<T>>,
}

// SAFETY: values move from producer threads to the consumer thread (T: Send);
// `head` is touched only by the single consumer (the `pop` contract), and
// `tail`/`next` are atomics.
unsafe impl<T: Send> Send for Queue<T> {}
// SAFETY: as above; `push` from many threads at once is the point of the type.
unsafe impl<T: Send> Sync for Queue<T> {}

impl<T> Queue<T> {
    pub(crate) fn new() -> Self {
        let stub = Node::alloc(None);
        Self {
            head: UnsafeCell::new(stub),
            tail: AtomicPtr::new(stub),
        }
    }

    /// Appends `value`. Any thread, any time; never blocks, one allocation.
    pub(crate) fn push(&self, value: T) {
        let node = Node::alloc(Some(value));
        // AcqRel. Release: the next producer writes our node's `next`, and
        // the consumer may free our node; both must see it initialised.
        // Acquire: pairs with the Release of the swap that installed `prev`,
        // so our store into `prev.next` follows its initialisation.
        let prev = self.tail.swap(node, Ordering::AcqRel);
        // SAFETY: `prev` is live. The consumer frees a node only after moving
        // `head` past it, which needs a non-null `prev.next`, which only this
        // call writes, here.
        #[cfg(not(magpie_broken = "mpsc_link_relaxed"))]
        unsafe {
            // Release: pairs with the Acquire load of `next` in `pop`, so the
            // consumer that reaches `node` sees its value.
            (*prev).next.store(node, Ordering::Release);
        }
        // broken: the link does not publish the node's value.
        // SAFETY: as above.
        #[cfg(magpie_broken = "mpsc_link_relaxed")]
        unsafe {
            (*prev).next.store(node, Ordering::Relaxed);
        }
    }

    /// Takes the oldest value.
    ///
    /// # Safety
    /// At most one thread calls `pop` at a time, and every call
    /// happens-after the previous one (the caller holds the process's
    /// [`Stepping`](super::Stepping) token, whose transitions order the
    /// steps).
    pub(crate) unsafe fn pop(&self) -> Pop<T> {
        // SAFETY: the single consumer (the contract) is the only reader and
        // writer of `head`.
        let head = self.head.with(|p| unsafe { *p });
        // SAFETY: `head` is the stub, owned by the queue and freed only by
        // the consumer, below or in `drop`.
        // Acquire: pairs with the Release store of `next` in `push`.
        let next = unsafe { (*head).next.load(Ordering::Acquire) };
        if next.is_null() {
            // Acquire: pairs with the AcqRel swap in `push`; only a hint here
            // (which of Empty or Inconsistent), never used to read a node.
            return if self.tail.load(Ordering::Acquire) == head {
                Pop::Empty
            } else {
                Pop::Inconsistent
            };
        }
        // SAFETY: single consumer (the contract).
        self.head.with_mut(|p| unsafe { *p = next });
        // SAFETY: `next` is fully initialised (the Acquire above) and no
        // producer touches a node's value after linking it; the consumer is
        // the only one to take it, once, as it becomes the stub.
        let value = unsafe { (*next).value.with_mut(|v| (*v).take()) };
        // SAFETY: the old stub is unreachable for producers: its `next` is
        // set (so no producer will write it again) and `tail` has moved past
        // it. It was allocated by `Node::alloc`.
        drop(unsafe { Box::from_raw(head) });
        match value {
            Some(v) => Pop::Data(v),
            None => unreachable!("a linked node always carries a value"),
        }
    }
}

impl<T> Drop for Queue<T> {
    fn drop(&mut self) {
        // `&mut self`: no producer or consumer is left.
        // SAFETY: exclusive access.
        let mut cur = self.head.with(|p| unsafe { *p });
        while !cur.is_null() {
            // SAFETY: every node in the chain was allocated by `Node::alloc`
            // and is owned by the queue; each is freed once as we walk past.
            let node = unsafe { Box::from_raw(cur) };
            cur = node.next.load(Ordering::Relaxed);
            drop(node);
        }
    }
}
