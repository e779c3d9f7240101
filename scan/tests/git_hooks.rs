//! The CI and pre-commit integrations, run as their tools would run them:
//! `.pre-commit-hooks.yaml`'s entry on a temp repository's staged changes,
//! and the `scan` command line of `docs/examples/github-actions-scan.yml`
//! through scan's own parser and on a repository, so neither can rot.

#[path = "e2e_common/mod.rs"]
mod common;

#[path = "git_common/mod.rs"]
mod gitc;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{github_token, run_guarded, tempdir, Run};
use gitc::{commit_file, git, init};
use yaml_rust2::{Yaml, YamlLoader};

fn workspace_file(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(rel)
}

fn load_yaml(rel: &str) -> Yaml {
    let text = std::fs::read_to_string(workspace_file(rel)).unwrap();
    let mut docs = YamlLoader::load_from_str(&text).unwrap_or_else(|e| panic!("{rel}: {e}"));
    assert_eq!(docs.len(), 1, "{rel}: one document");
    docs.remove(0)
}

/// The `magpie-scan` hook of `.pre-commit-hooks.yaml`.
fn hook() -> Yaml {
    let hooks = load_yaml(".pre-commit-hooks.yaml");
    let hooks = hooks.as_vec().expect("a list of hooks");
    hooks
        .iter()
        .find(|h| h["id"].as_str() == Some("magpie-scan"))
        .expect("a hook with id magpie-scan")
        .clone()
}

/// Runs `entry` as pre-commit does for a hook with `pass_filenames:
/// false`: split into words, no file names appended, in the repository's
/// root, standard input closed. `scan` is the binary under test.
fn run_entry(entry: &str, repo: &Path) -> Run {
    let words: Vec<&str> = entry.split_whitespace().collect();
    assert_eq!(words.first(), Some(&"scan"), "{entry}");
    let mut cmd = Command::new(common::bin());
    cmd.current_dir(repo)
        .args(&words[1..])
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    run_guarded(cmd)
}

#[test]
fn the_pre_commit_hook_stops_a_commit_of_a_staged_token_and_passes_a_clean_one() {
    let h = hook();
    let entry = h["entry"].as_str().expect("an entry");
    assert_eq!(entry, "scan git --staged");
    let language = h["language"].as_str().unwrap();
    assert!(["system", "rust"].contains(&language), "{language}");
    assert_eq!(h["pass_filenames"].as_bool(), Some(false));

    let t = tempdir();
    let dir = t.path();
    init(dir);
    commit_file(dir, "README.md", "hello\n", "first");
    let token = github_token(50);
    common::put(dir, "deploy.env", format!("TOKEN={token}\n").as_bytes());
    git(dir, &["add", "deploy.env"]);
    let run = run_entry(entry, dir);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    let out = run.stdout_text();
    assert!(out.contains(&token) && out.contains("deploy.env"), "{out}");

    // Unstaged, then a clean file staged instead: the hook lets it through.
    git(dir, &["rm", "-q", "--cached", "deploy.env"]);
    std::fs::remove_file(dir.join("deploy.env")).unwrap();
    common::put(dir, "notes.txt", b"nothing secret\n");
    git(dir, &["add", "notes.txt"]);
    let run = run_entry(entry, dir);
    assert_eq!(run.code, Some(0), "{}{}", run.stdout_text(), run.stderr);

    // The first commit of a repository (no HEAD yet) is checked too.
    let fresh = tempdir();
    init(fresh.path());
    common::put(fresh.path(), "k.env", format!("T={token}\n").as_bytes());
    git(fresh.path(), &["add", "k.env"]);
    assert_eq!(run_entry(entry, fresh.path()).code, Some(1));
}

/// The example workflow's steps.
fn workflow_steps() -> Vec<Yaml> {
    let wf = load_yaml("docs/examples/github-actions-scan.yml");
    wf["jobs"]["scan"]["steps"]
        .as_vec()
        .expect("jobs.scan.steps")
        .clone()
}

fn step_using<'a>(steps: &'a [Yaml], action: &str) -> &'a Yaml {
    steps
        .iter()
        .find(|s| s["uses"].as_str().is_some_and(|u| u.starts_with(action)))
        .unwrap_or_else(|| panic!("a step using {action}"))
}

#[test]
fn the_github_actions_example_runs_a_scan_command_that_scan_accepts() {
    let steps = workflow_steps();
    let checkout = step_using(&steps, "actions/checkout@");
    assert_eq!(checkout["with"]["fetch-depth"].as_i64(), Some(0));
    let line = steps
        .iter()
        .filter_map(|s| s["run"].as_str())
        .find(|r| r.trim_start().starts_with("scan git"))
        .expect("a step that runs scan git")
        .trim();
    assert!(
        !line.contains('\\') && !line.contains('$'),
        "one plain line: {line}"
    );
    let words: Vec<&str> = line.split_whitespace().collect();
    let config = scan::cli::parse(words.iter().map(std::ffi::OsString::from))
        .unwrap_or_else(|e| panic!("scan rejects `{line}`: {e}"));
    let history = config.git.as_ref().expect("a scan git run");
    let state = history.state.as_ref().expect("--state");
    assert_eq!(config.format, scan::report::Format::Sarif);
    let output = config.output.as_ref().expect("--output");

    // The cache keeps the state file, and the upload reads the report.
    let cache = step_using(&steps, "actions/cache@");
    assert_eq!(cache["with"]["path"].as_str(), state.to_str());
    let upload = step_using(&steps, "github/codeql-action/upload-sarif@");
    assert_eq!(upload["with"]["sarif_file"].as_str(), output.to_str());

    // And the line works: on a repository with a token, twice.
    let t = tempdir();
    let dir = t.path();
    init(dir);
    let c1 = commit_file(dir, "a.env", &format!("T={}\n", github_token(51)), "one");
    let run_line = || {
        let mut cmd = Command::new(common::bin());
        cmd.current_dir(dir)
            .args(&words[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        run_guarded(cmd)
    };
    let first = run_line();
    assert_eq!(first.code, Some(1), "{}", first.stderr);
    let sarif: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join(output)).unwrap()).unwrap();
    let results = sarif["runs"][0]["results"].as_array().unwrap();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["partialFingerprints"]["commitSha"], c1.as_str());
    assert!(dir.join(state).is_file(), "the state was written");
    // (The state and the report are untracked files of the work tree.)
    common::put(dir, "b.txt", b"plain\n");
    git(dir, &["add", "b.txt"]);
    git(dir, &["commit", "-q", "-m", "two"]);
    let second = run_line();
    assert_eq!(
        second.code,
        Some(0),
        "only the new commit: {}",
        second.stderr
    );
}
