//! # scan
//!
//! magpie's secret scanner: walks a tree, reads files in chunks, looks
//! inside archives and reports credentials, on the `Enumerate -> FetchSync
//! -> Scan` task graph of [`pipeline`] (see `src/pipeline/README.md`).
#![forbid(unsafe_code)]

pub mod archive;
pub mod chunk;
pub mod cli;
pub mod decode;
pub mod git;
pub mod pipeline;
pub mod pool;
pub mod report;
pub mod rules;
pub mod shard;
pub mod skip;
pub mod source;
pub mod trace;
pub mod walk;

/// Runs the scanner with the parsed command line.
///
/// `main` maps the result to the exit code with [`report::exit_code`]:
/// 0 clean, 1 findings, 2 error (a broken pipe counts as clean).
pub fn run(config: cli::Config) -> Result<report::Outcome, report::ScanError> {
    if config.list_rules {
        return list_rules(&config);
    }
    if let Some(files) = &config.merge {
        return report::merge::run(&config, files);
    }
    pipeline::run(config)
}

/// `scan rules`: the rules a scan with `config` would run, on standard
/// output.
fn list_rules(config: &cli::Config) -> Result<report::Outcome, report::ScanError> {
    let rules = pipeline::load_rules(config)?;
    let json = config.format != report::Format::Text;
    let mut out = std::io::stdout().lock();
    match rules::list::write_list(&rules, json, &mut out) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(report::ScanError::BrokenPipe),
        Err(source) => Err(report::ScanError::Output {
            what: "standard output".into(),
            source,
        }),
        Ok(()) => Ok(report::Outcome {
            reported: 0,
            summary: report::Summary::default(),
            fail_on_skip: 0,
            findings_exit: None,
        }),
    }
}
