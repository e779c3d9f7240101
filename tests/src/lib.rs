//! Cross-crate integration and stress tests live in `tests/tests/`.
#![forbid(unsafe_code)]
