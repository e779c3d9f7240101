//! `cargo run -p loom-index`: rewrites the index block of `docs/loom.md` from
//! the annotated loom models and `docs/loom-measured.tsv`.
#![forbid(unsafe_code)]

use std::process::ExitCode;

fn main() -> ExitCode {
    let root = loom_index::workspace_root();
    match loom_index::build(&root) {
        Ok(built) => {
            if built.doc == built.current {
                println!(
                    "docs/loom.md: the loom index is up to date ({} models)",
                    built.models
                );
                return ExitCode::SUCCESS;
            }
            if let Err(e) = std::fs::write(root.join(loom_index::DOC), &built.doc) {
                eprintln!("cannot write {}: {e}", loom_index::DOC);
                return ExitCode::FAILURE;
            }
            println!(
                "docs/loom.md: rewrote the loom index ({} models)",
                built.models
            );
            ExitCode::SUCCESS
        }
        Err(errors) => {
            for e in errors {
                eprintln!("{e}");
            }
            ExitCode::FAILURE
        }
    }
}
