//! The index of magpie's loom models, generated from the sources.
//!
//! A loom model is a `#[test]` in a file under a `tests/` folder that starts
//! with `#![cfg(loom)]` (every `core/tests/loom_*.rs`), or in the part of a
//! source file that follows `#[cfg(all(test, loom))]` (the scanner's
//! `loom_tests` modules). Between its doc comment and its `#[test]` each
//! model carries
//!
//! ```text
//! // protocol: <protocol> <step ids>
//! // broken-variant: <name>; class: <bug class>; expects: <text>   (zero or more)
//! ```
//!
//! and `docs/loom-measured.tsv` (written by `.ci/loom-measure`) holds its
//! iterations and seconds at preemption bounds 2 and 3. [`build`] renders one
//! row per model between the `loom-index` markers of `docs/loom.md`.
#![forbid(unsafe_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The document holding the index, relative to the workspace root.
pub const DOC: &str = "docs/loom.md";
/// The measured data, relative to the workspace root.
pub const MEASURED: &str = "docs/loom-measured.tsv";
/// The line before the generated block.
pub const BEGIN: &str = "<!-- loom-index:begin -->";
/// The line after the generated block.
pub const END: &str = "<!-- loom-index:end -->";
/// The bounds the index reports, in column order.
pub const BOUNDS: [u32; 2] = [2, 3];
/// Folders searched for loom models.
const ROOTS: [&str; 4] = ["core", "runtime", "scan", "tests"];
/// The learning order of the core model files (docs/loom.md, "Your first
/// loom model"); files not named here follow, in path order.
const ORDER: [&str; 6] = [
    "core/tests/loom_park.rs",
    "core/tests/loom_gate.rs",
    "core/tests/loom_idle.rs",
    "core/tests/loom_queue.rs",
    "core/tests/loom_task_state.rs",
    "core/tests/loom_task_cell.rs",
];

/// A deliberately broken variant a model must catch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Variant {
    /// The `magpie_broken` cfg value.
    pub name: String,
    /// The kind of bug it stands for.
    pub class: String,
    /// Text loom's failure report must contain.
    pub expects: String,
}

/// One loom model, as annotated in its source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Model {
    /// Path relative to the workspace root, `/`-separated.
    pub file: String,
    /// The test function's name.
    pub name: String,
    /// The protocol (`queue`, `park`, ...): the first word of `// protocol:`.
    pub protocol: String,
    /// The step ids: the rest of `// protocol:`.
    pub steps: String,
    /// The first sentence of the doc comment, or the name in words.
    pub property: String,
    /// The variants it catches, in source order.
    pub variants: Vec<Variant>,
}

/// One measured run of a model at one bound.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Measure {
    /// loom's "Completed in N iterations", summed over passes.
    pub iterations: u64,
    /// Wall time of the test process.
    pub seconds: f64,
    /// How many loom runs the model made (`explore` makes several).
    pub passes: u32,
}

/// `(file, model, bound)`.
pub type MeasureKey = (String, String, u32);

/// What [`build`] produced.
#[derive(Debug)]
pub struct Built {
    /// `docs/loom.md` with a freshly rendered index.
    pub doc: String,
    /// `docs/loom.md` as it is on disk.
    pub current: String,
    /// How many models the index lists.
    pub models: usize,
}

/// The workspace root: two folders above this crate.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Renders the index from the sources under `root` and splices it into
/// `docs/loom.md`. Every problem found is returned, one message each.
pub fn build(root: &Path) -> Result<Built, Vec<String>> {
    let mut errors = Vec::new();
    let mut models = Vec::new();
    for file in model_files(root).map_err(|e| vec![e])? {
        let text = read(root, &file).map_err(|e| vec![e])?;
        match parse_models(&file, &text) {
            Ok(found) => models.extend(found),
            Err(mut e) => errors.append(&mut e),
        }
    }
    let measured = read(root, MEASURED).and_then(|t| parse_measured(&t));
    let current = read(root, DOC);
    let (measured, current) = match (measured, current) {
        (Ok(m), Ok(c)) => (m, c),
        (m, c) => {
            errors.extend(m.err());
            errors.extend(c.err());
            return Err(errors);
        }
    };
    let block = match render(&models, &measured, &headings(&current)) {
        Ok(block) => block,
        Err(mut e) => {
            errors.append(&mut e);
            return Err(errors);
        }
    };
    if !errors.is_empty() {
        return Err(errors);
    }
    let doc = splice(&current, &block).map_err(|e| vec![e])?;
    Ok(Built {
        doc,
        current,
        models: models.len(),
    })
}

fn read(root: &Path, file: &str) -> Result<String, String> {
    std::fs::read_to_string(root.join(file)).map_err(|e| format!("cannot read {file}: {e}"))
}

/// The files holding loom models, relative to `root`, in index order.
pub fn model_files(root: &Path) -> Result<Vec<String>, String> {
    let mut files = Vec::new();
    for dir in ROOTS {
        walk(root, &root.join(dir), &mut files)?;
    }
    files.retain(|(_, text)| loom_region(text).is_some());
    let mut files: Vec<String> = files.into_iter().map(|(f, _)| f).collect();
    // Unranked files: core's first, then the other crates', in path order.
    files.sort_by_key(|f| {
        let rank = ORDER.iter().position(|o| o == f).unwrap_or(ORDER.len());
        (rank, !f.starts_with("core/"), f.clone())
    });
    Ok(files)
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) -> Result<(), String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(()); // a folder this checkout does not have
    };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() {
            if name != "target" && !name.to_string_lossy().starts_with('.') {
                walk(root, &path, out)?;
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path
                .strip_prefix(root)
                .map_err(|e| format!("{}: {e}", path.display()))?
                .to_string_lossy()
                .replace('\\', "/");
            let text =
                std::fs::read_to_string(&path).map_err(|e| format!("cannot read {rel}: {e}"))?;
            let in_tests = rel.split('/').any(|part| part == "tests");
            if (in_tests && text.lines().any(|l| l.trim() == "#![cfg(loom)]"))
                || text.lines().any(|l| l.trim() == "#[cfg(all(test, loom))]")
            {
                out.push((rel, text));
            }
        }
    }
    Ok(())
}

/// The line where a file's loom models start: 0 for a `#![cfg(loom)]` test
/// file, the line after `#[cfg(all(test, loom))]` otherwise.
fn loom_region(text: &str) -> Option<usize> {
    let lines: Vec<&str> = text.lines().collect();
    if lines.iter().any(|l| l.trim() == "#![cfg(loom)]") {
        return Some(0);
    }
    lines
        .iter()
        .position(|l| l.trim() == "#[cfg(all(test, loom))]")
        .map(|i| i + 1)
}

/// Parses the models of one file (see the crate docs for the annotations).
pub fn parse_models(file: &str, text: &str) -> Result<Vec<Model>, Vec<String>> {
    let lines: Vec<&str> = text.lines().collect();
    let start = loom_region(text).unwrap_or(lines.len());
    let mut models = Vec::new();
    let mut errors = Vec::new();
    for i in start..lines.len() {
        if lines[i].trim() != "#[test]" {
            continue;
        }
        let Some(name) = lines[i + 1..].iter().find_map(|l| fn_name(l)) else {
            errors.push(format!("{file}:{}: a #[test] with no fn after it", i + 1));
            continue;
        };
        // The comment and attribute lines just above the #[test].
        let mut first = i;
        while first > start && {
            let l = lines[first - 1].trim();
            l.starts_with("//") || l.starts_with("#[")
        } {
            first -= 1;
        }
        let above = &lines[first..i];
        let mut protocol = None;
        let mut variants = Vec::new();
        let mut doc = Vec::new();
        for (k, line) in above.iter().enumerate() {
            let line = line.trim();
            let at = first + k + 1;
            if let Some(doc_line) = line.strip_prefix("///") {
                doc.push(doc_line.trim());
            } else if let Some(rest) = line.strip_prefix("// protocol:") {
                let mut words = rest.split_whitespace();
                match words.next() {
                    Some(p) => protocol = Some((p.to_owned(), words.collect::<Vec<_>>().join(" "))),
                    None => errors.push(format!("{file}:{at}: `// protocol:` names no protocol")),
                }
            } else if let Some(rest) = line.strip_prefix("// broken-variant:") {
                match parse_variant(rest) {
                    Ok(v) => variants.push(v),
                    Err(e) => errors.push(format!("{file}:{at}: {e}")),
                }
            }
        }
        let Some((protocol, steps)) = protocol else {
            errors.push(format!(
                "{file}:{}: loom model `{name}` has no `// protocol: <protocol> <steps>` line \
                 above its #[test]",
                i + 1
            ));
            continue;
        };
        models.push(Model {
            file: file.to_owned(),
            property: first_sentence(&doc).unwrap_or_else(|| name.replace('_', " ")),
            name,
            protocol,
            steps,
            variants,
        });
    }
    if errors.is_empty() {
        Ok(models)
    } else {
        Err(errors)
    }
}

fn fn_name(line: &str) -> Option<String> {
    let at = line.find("fn ")?;
    if at > 0 && !line[..at].ends_with(' ') {
        return None;
    }
    let name: String = line[at + 3..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty()).then_some(name)
}

/// `NAME; class: CLASS; expects: TEXT`.
pub fn parse_variant(rest: &str) -> Result<Variant, String> {
    let mut parts = rest.splitn(3, ';');
    let name = parts.next().unwrap_or("").trim();
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(format!("broken-variant name `{name}` is not an identifier"));
    }
    let mut class = None;
    let mut expects = None;
    for part in parts {
        let part = part.trim();
        if let Some(c) = part.strip_prefix("class:") {
            class = Some(c.trim().to_owned());
        } else if let Some(t) = part.strip_prefix("expects:") {
            expects = Some(t.trim().to_owned());
        } else {
            return Err(format!("broken-variant {name}: unknown field `{part}`"));
        }
    }
    match (class, expects) {
        (Some(class), Some(expects)) if !class.is_empty() && !expects.is_empty() => Ok(Variant {
            name: name.to_owned(),
            class,
            expects,
        }),
        _ => Err(format!(
            "broken-variant {name} needs `; class: <bug class>; expects: <failure text>`"
        )),
    }
}

/// The first sentence of a doc comment, on one line.
fn first_sentence(doc: &[&str]) -> Option<String> {
    let paragraph: Vec<&str> = doc.iter().copied().take_while(|l| !l.is_empty()).collect();
    let text = paragraph.join(" ");
    if text.is_empty() {
        return None;
    }
    let end = text
        .match_indices(". ")
        .map(|(i, _)| i + 1)
        .next()
        .unwrap_or(text.len());
    Some(text[..end].trim().to_owned())
}

/// Parses `docs/loom-measured.tsv`: a header, then `model file bound
/// iterations seconds passes` rows.
pub fn parse_measured(text: &str) -> Result<BTreeMap<MeasureKey, Measure>, String> {
    let mut rows = BTreeMap::new();
    for (n, line) in text.lines().enumerate().skip(1) {
        if line.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split('\t').collect();
        let bad = || {
            format!(
                "{MEASURED}:{}: expected model, file, bound, iterations, seconds, passes",
                n + 1
            )
        };
        if f.len() < 5 {
            return Err(bad());
        }
        let bound = f[2].parse().map_err(|_| bad())?;
        let measure = Measure {
            iterations: f[3].parse().map_err(|_| bad())?,
            seconds: f[4].parse().map_err(|_| bad())?,
            passes: f.get(5).map_or(Ok(1), |p| p.parse()).map_err(|_| bad())?,
        };
        rows.insert((f[1].to_owned(), f[0].to_owned(), bound), measure);
    }
    Ok(rows)
}

/// The `## ` to `#### ` headings of a document that are a single code span,
/// such as the tour's "### `pop_and_steal_never_duplicate`".
pub fn headings(doc: &str) -> BTreeSet<String> {
    doc.lines()
        .filter_map(|l| {
            let t = l.trim_start_matches('#');
            (l.starts_with("##") && t.starts_with(' ')).then(|| t.trim())
        })
        .filter_map(|t| t.strip_prefix('`')?.strip_suffix('`').map(str::to_owned))
        .collect()
}

/// The short name of a model file: `loom_queue` for `core/tests/loom_queue.rs`,
/// `scan::pool` for `scan/src/pool.rs`.
pub fn short_file(file: &str) -> String {
    let stem = file.strip_suffix(".rs").unwrap_or(file);
    if let Some((_, t)) = stem.split_once("/tests/") {
        return t.to_owned();
    }
    match stem.split_once("/src/") {
        Some((krate, path)) => format!(
            "{krate}::{}",
            path.trim_end_matches("/mod").replace('/', "::")
        ),
        None => stem.to_owned(),
    }
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

/// Renders the block that goes between the markers. Fails if a model has
/// no measured row at a bound, or the data names a model that is gone.
pub fn render(
    models: &[Model],
    measured: &BTreeMap<MeasureKey, Measure>,
    anchors: &BTreeSet<String>,
) -> Result<String, Vec<String>> {
    let mut errors = Vec::new();
    let mut known = BTreeSet::new();
    for m in models {
        for bound in BOUNDS {
            let key = (m.file.clone(), m.name.clone(), bound);
            if !measured.contains_key(&key) {
                errors.push(format!(
                    "loom model `{}` ({}) has no measured row at bound {bound} in {MEASURED}: \
                     run `.ci/loom-measure`",
                    m.name, m.file
                ));
            }
            known.insert(key);
        }
    }
    for (file, name, bound) in measured.keys() {
        if BOUNDS.contains(bound) && !known.contains(&(file.clone(), name.clone(), *bound)) {
            errors.push(format!(
                "{MEASURED} measures `{name}` ({file}), which is no longer a loom model: \
                 run `.ci/loom-measure`"
            ));
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let get = |m: &Model, bound: u32| measured[&(m.file.clone(), m.name.clone(), bound)];

    let mut out = String::new();
    let files: BTreeSet<&str> = models.iter().map(|m| m.file.as_str()).collect();
    let variants: usize = models.iter().map(|m| m.variants.len()).sum();
    let bare = models.iter().filter(|m| m.variants.is_empty()).count();
    let total = |bound| {
        models.iter().fold((0u64, 0f64), |(i, s), m| {
            let x = get(m, bound);
            (i + x.iterations, s + x.seconds)
        })
    };
    let (i2, s2) = total(2);
    let (i3, s3) = total(3);
    let _ = writeln!(
        out,
        "{} models in {} files; {variants} broken variants (a variant caught by two models \
         counts twice); {bare} models have none. Each model run alone: {} iterations in \
         {s2:.1} s at `LOOM_MAX_PREEMPTIONS=2`, {} iterations in {s3:.1} s at 3.",
        models.len(),
        files.len(),
        thousands(i2),
        thousands(i3),
    );
    out.push('\n');
    out.push_str(
        "| model | file | protocol: steps | property | broken variant: bug class \
         | iterations, bound 2 / 3 | seconds, bound 2 / 3 |\n",
    );
    out.push_str("| --- | --- | --- | --- | --- | ---: | ---: |\n");
    for m in models {
        let name = if anchors.contains(&m.name) {
            format!("[`{}`](#{})", m.name, m.name)
        } else {
            format!("`{}`", m.name)
        };
        let variants = if m.variants.is_empty() {
            "—".to_owned()
        } else {
            m.variants
                .iter()
                .map(|v| format!("`{}`: {}", v.name, v.class))
                .collect::<Vec<_>>()
                .join("<br>")
        };
        let (a, b) = (get(m, 2), get(m, 3));
        let passes = if a.passes > 1 {
            format!(" (Σ {} passes)", a.passes)
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "| {name} | {} | {}: {} | {} | {variants} | {} / {}{passes} | {:.2} / {:.2} |",
            short_file(&m.file),
            m.protocol,
            m.steps,
            cell(&m.property),
            thousands(a.iterations),
            thousands(b.iterations),
            a.seconds,
            b.seconds,
        );
    }
    let _ = writeln!(
        out,
        "| **total** | | | | | {} / {} | {s2:.1} / {s3:.1} |",
        thousands(i2),
        thousands(i3)
    );
    let mut classes: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for m in models {
        for v in &m.variants {
            let names = classes.entry(v.class.as_str()).or_default();
            if !names.contains(&v.name.as_str()) {
                names.push(&v.name);
            }
        }
    }
    out.push_str("\nBroken variants by bug class:\n\n");
    for (class, names) in classes {
        let names: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
        let _ = writeln!(out, "- **{class}** ({}): {}", names.len(), names.join(", "));
    }
    Ok(out)
}

/// Replaces what lies between the [`BEGIN`] and [`END`] lines of `doc`.
pub fn splice(doc: &str, block: &str) -> Result<String, String> {
    let begin = doc
        .find(BEGIN)
        .ok_or_else(|| format!("{DOC} has no `{BEGIN}` line"))?;
    let end = doc
        .find(END)
        .filter(|&e| e > begin)
        .ok_or_else(|| format!("{DOC} has no `{END}` line after `{BEGIN}`"))?;
    let mut out = String::with_capacity(doc.len() + block.len());
    out.push_str(&doc[..begin + BEGIN.len()]);
    out.push_str("\n\n");
    out.push_str(block);
    out.push('\n');
    out.push_str(&doc[end..]);
    Ok(out)
}

/// The first line where `want` and `have` differ: `(line number, want, have)`.
pub fn first_difference(want: &str, have: &str) -> Option<(usize, String, String)> {
    let mut w = want.lines();
    let mut h = have.lines();
    for n in 1.. {
        match (w.next(), h.next()) {
            (None, None) => return None,
            (a, b) if a == b => {}
            (a, b) => {
                return Some((
                    n,
                    a.unwrap_or("<end of file>").to_owned(),
                    b.unwrap_or("<end of file>").to_owned(),
                ))
            }
        }
    }
    unreachable!("the loop above returns")
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "core/tests/loom_x.rs";

    fn source(annotations: &str) -> String {
        format!(
            "#![cfg(loom)]\n\n/// Pushes are never lost. More text.\n{annotations}#[test]\nfn pushes_are_never_lost() {{}}\n"
        )
    }

    #[test]
    fn annotations_give_protocol_steps_property_and_variants() {
        let text = source(
            "// protocol: queue P1 S4\n// broken-variant: a_b; class: slot reuse; expects: seen 2 times\n",
        );
        let models = parse_models(FILE, &text).unwrap();
        assert_eq!(
            models,
            vec![Model {
                file: FILE.into(),
                name: "pushes_are_never_lost".into(),
                protocol: "queue".into(),
                steps: "P1 S4".into(),
                property: "Pushes are never lost.".into(),
                variants: vec![Variant {
                    name: "a_b".into(),
                    class: "slot reuse".into(),
                    expects: "seen 2 times".into(),
                }],
            }]
        );
    }

    #[test]
    fn model_without_a_protocol_line_is_an_error() {
        let errors = parse_models(
            FILE,
            &source("// broken-variant: a; class: c; expects: e\n"),
        )
        .unwrap_err();
        assert_eq!(errors.len(), 1);
        assert!(errors[0].contains("pushes_are_never_lost"), "{errors:?}");
        assert!(errors[0].contains("// protocol:"), "{errors:?}");
    }

    #[test]
    fn variant_without_class_or_expects_is_an_error() {
        assert!(parse_variant(" a_b").is_err());
        assert!(parse_variant(" a_b; class: slot reuse").is_err());
        assert!(parse_variant(" a_b; expects: x").is_err());
        assert!(parse_variant(" a_b; class: c; expects: x; y").is_ok());
    }

    #[test]
    fn model_without_a_measured_row_is_an_error() {
        let models = parse_models(FILE, &source("// protocol: queue P1\n")).unwrap();
        let row = |bound| {
            (
                (FILE.to_owned(), "pushes_are_never_lost".to_owned(), bound),
                Measure {
                    iterations: 3,
                    seconds: 0.5,
                    passes: 1,
                },
            )
        };
        let only_bound_2: BTreeMap<_, _> = [row(2)].into_iter().collect();
        let errors = render(&models, &only_bound_2, &BTreeSet::new()).unwrap_err();
        assert!(errors[0].contains("bound 3"), "{errors:?}");
        let both: BTreeMap<_, _> = [row(2), row(3)].into_iter().collect();
        let block = render(&models, &both, &BTreeSet::new()).unwrap();
        assert!(
            block.contains("| `pushes_are_never_lost` | loom_x | queue: P1 |"),
            "{block}"
        );
    }

    #[test]
    fn measured_row_of_a_vanished_model_is_an_error() {
        let stale: BTreeMap<_, _> = [(
            (FILE.to_owned(), "gone".to_owned(), 2),
            Measure {
                iterations: 1,
                seconds: 0.1,
                passes: 1,
            },
        )]
        .into_iter()
        .collect();
        let errors = render(&[], &stale, &BTreeSet::new()).unwrap_err();
        assert!(errors[0].contains("no longer a loom model"), "{errors:?}");
    }

    #[test]
    fn splice_replaces_only_the_block() {
        let doc = format!("top\n{BEGIN}\nold\n{END}\nbottom\n");
        assert_eq!(
            splice(&doc, "new\n").unwrap(),
            format!("top\n{BEGIN}\n\nnew\n\n{END}\nbottom\n")
        );
        assert!(splice("no markers", "x").is_err());
    }

    #[test]
    fn files_are_named_short() {
        assert_eq!(short_file("core/tests/loom_queue.rs"), "loom_queue");
        assert_eq!(
            short_file("scan/src/pipeline/frontier.rs"),
            "scan::pipeline::frontier"
        );
    }
}
