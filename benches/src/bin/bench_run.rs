//! The in-process half of `benches/run` (run that script, not this binary:
//! it builds once and also runs the suites that live in other binaries).
//!
//! ```text
//! bench_run --out DIR [--quick] [--baseline DIR] [--only SUBSTRING] [--workers N]
//! ```
//!
//! Runs every comparison of [`magpie_benches::suite`] and writes
//! `results.md`, `results.tsv`, `plots/*.svg` (and `comparison.md` with
//! `--baseline`) into DIR. Exit code 0 for a valid run, 3 for a run marked
//! INVALID (its files are written all the same), 2 for a usage error.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use magpie_benches::suite::{self, output, Options};

const USAGE: &str =
    "usage: bench_run --out DIR [--quick] [--baseline DIR] [--only SUBSTRING] [--workers N]";

fn parse(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut opts = Options {
        out: PathBuf::new(),
        quick: false,
        baseline: None,
        only: None,
        workers: magpie_benches::typed::WORKERS,
    };
    while let Some(a) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match a.as_str() {
            "--out" => opts.out = value("--out")?.into(),
            "--quick" => opts.quick = true,
            "--baseline" => opts.baseline = Some(value("--baseline")?.into()),
            "--only" => opts.only = Some(value("--only")?),
            "--workers" => {
                opts.workers = value("--workers")?
                    .parse()
                    .map_err(|e| format!("--workers: {e}"))?
            }
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if opts.out.as_os_str().is_empty() {
        return Err("--out is required".into());
    }
    Ok(opts)
}

fn main() -> ExitCode {
    let opts = match parse(std::env::args().skip(1)) {
        Ok(o) => o,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("bench_run: {e}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let run = suite::run(opts);
    match output::write_all(&run) {
        Ok(files) => {
            for f in files {
                println!("wrote {}", f.display());
            }
        }
        Err(e) => {
            eprintln!("bench_run: could not write the results: {e}");
            return ExitCode::FAILURE;
        }
    }
    let problems = run.validity.problems();
    if problems.is_empty() {
        println!("run VALID");
        ExitCode::SUCCESS
    } else {
        for p in problems {
            println!("run INVALID: {p}");
        }
        ExitCode::from(3)
    }
}
