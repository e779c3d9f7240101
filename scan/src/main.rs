//! `scan [OPTIONS] PATH...`: parse, run, map the result to an exit code.
#![forbid(unsafe_code)]

use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let config = match scan::cli::parse(std::env::args_os()) {
        Ok(config) => config,
        Err(e) => {
            // Help and version go to stdout (exit 0), usage errors to stderr
            // (exit 2). A closed stdout is not worth a panic.
            let _ = e.print();
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(scan::report::EXIT_ERROR));
        }
    };
    if let Some(topic) = config.docs {
        let _ = std::io::stdout().lock().write_all(topic.text().as_bytes());
        return ExitCode::SUCCESS;
    }
    let result = scan::run(config);
    if let Some(msg) = scan::report::error_message(&result) {
        let _ = writeln!(std::io::stderr().lock(), "{msg}");
    }
    ExitCode::from(scan::report::exit_code(&result))
}
