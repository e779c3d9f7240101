//! # scan
//!
//! magpie's secret scanner: walks a tree, reads files in chunks, looks
//! inside archives and reports credentials, on the `Enumerate -> FetchSync
//! -> Scan` task graph of [`pipeline`] (see `src/pipeline/README.md`).
#![forbid(unsafe_code)]

pub mod archive;
pub mod chunk;
pub mod cli;
pub mod pipeline;
pub mod pool;
pub mod report;
pub mod rules;
pub mod skip;
pub mod source;
pub mod trace;
pub mod walk;

/// Runs the scanner with the parsed command line.
///
/// `main` maps the result to the exit code with [`report::exit_code`]:
/// 0 clean, 1 findings, 2 error (a broken pipe counts as clean).
pub fn run(config: cli::Config) -> Result<report::Outcome, report::ScanError> {
    pipeline::run(config)
}
