//! The index at the top of `docs/loom.md` is generated; this test fails when
//! it no longer matches the sources or the measured data.
#![forbid(unsafe_code)]

#[test]
fn loom_index_in_docs_matches_the_sources() {
    let root = loom_index::workspace_root();
    let built = match loom_index::build(&root) {
        Ok(built) => built,
        Err(errors) => panic!(
            "the loom index cannot be built:\n  {}\n(fix the above, then run `cargo run -p loom-index`)",
            errors.join("\n  ")
        ),
    };
    assert!(
        built.models > 0,
        "no loom models found under {}",
        root.display()
    );
    if let Some((line, want, have)) = loom_index::first_difference(&built.doc, &built.current) {
        panic!(
            "docs/loom.md's loom index differs from what the sources give: \
             run `cargo run -p loom-index`\n  line {line}\n  expected: {want}\n  found:    {have}"
        );
    }
}
