//! # scan
//!
//! magpie's secret scanner. Not yet written: see issue 5.
#![forbid(unsafe_code)]

/// Runs the scanner with the given command-line arguments.
///
/// Returns the process exit code: 0 clean, 1 findings, 2 error.
pub fn run(_args: Vec<std::ffi::OsString>) -> u8 {
    eprintln!("scan: the scanner is not built yet (issue 5); nothing was scanned");
    2
}

pub mod chunk;
pub mod corpus;
pub mod rules;
