#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(scan::run(std::env::args_os().collect()))
}
