//! Task bookkeeping for the async runtime.
//!
//! [`state`] holds the packed 64-bit task-state word: lifecycle, wake and
//! cancel flags, join-handle flags, shield depth and reference count, each
//! transition one atomic read-modify-write. The protocol, the lifecycle
//! diagram and the reference-ownership table are in `README.md` beside this
//! file.

pub mod state;
