//! The sharding examples of the docs run as written: the Kubernetes
//! Indexed Job's two scripts (`docs/examples/k8s-indexed-job.yaml`) and the
//! GitHub Actions matrix's two `scan` steps
//! (`docs/examples/github-actions-shards.yml`), on a small repository, with
//! `scan` on PATH; each merged report equals one full run's.
#![cfg(not(loom))]

#[path = "e2e_common/mod.rs"]
mod common;

#[path = "git_common/mod.rs"]
mod gitc;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{github_token, run_guarded, tempdir, Run};
use gitc::{commit_file, git, git_present, init, remove_file};
use yaml_rust2::{Yaml, YamlLoader};

fn workspace_file(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(rel)
}

fn load_yaml(rel: &str) -> Vec<Yaml> {
    let text = std::fs::read_to_string(workspace_file(rel)).unwrap();
    YamlLoader::load_from_str(&text).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// A directory holding a `scan` link to the binary under test, and the
/// PATH with it first.
fn scan_on_path(dir: &Path) -> String {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(common::bin(), bin.join("scan")).unwrap();
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// Runs `script` with `sh -ec` in `cwd`, with `env`.
fn sh(cwd: &Path, script: &str, path: &str, env: &[(&str, String)]) -> Run {
    let mut cmd = Command::new("sh");
    cmd.current_dir(cwd)
        .args(["-ec", script])
        .env("PATH", path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    run_guarded(cmd)
}

/// A history with tokens added, removed and on a merged branch.
fn repository(dir: &Path) {
    init(dir);
    commit_file(dir, "README.md", "docs example\n", "root");
    for k in 0..6u32 {
        let path = format!("cfg/{k}.env");
        commit_file(dir, &path, &format!("T={}\n", github_token(300 + k)), "add");
        if k % 2 == 0 {
            remove_file(dir, &path, "remove");
        }
    }
    git(dir, &["checkout", "-q", "-b", "side"]);
    commit_file(
        dir,
        "side.env",
        &format!("S={}\n", github_token(399)),
        "side",
    );
    git(dir, &["checkout", "-q", "main"]);
    git(dir, &["merge", "-q", "--no-ff", "-m", "merge", "side"]);
}

/// A container's env list as (name, value).
fn container_env(c: &Yaml) -> Vec<(String, String)> {
    c["env"]
        .as_vec()
        .expect("env")
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_owned(),
                e["value"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn env_value(env: &[(String, String)], name: &str) -> String {
    env.iter()
        .find(|(k, _)| k == name)
        .unwrap_or_else(|| panic!("env {name}"))
        .1
        .clone()
}

#[test]
fn the_kubernetes_indexed_job_scripts_shard_and_merge_as_one_run() {
    if !git_present() {
        return;
    }
    let docs = load_yaml("docs/examples/k8s-indexed-job.yaml");
    assert_eq!(docs.len(), 2, "the scan Job and the merge Job");
    let job = &docs[0];
    assert_eq!(job["kind"].as_str(), Some("Job"));
    assert_eq!(job["spec"]["completionMode"].as_str(), Some("Indexed"));
    let completions = job["spec"]["completions"].as_i64().unwrap();
    let container = &job["spec"]["template"]["spec"]["containers"][0];
    let env = container_env(container);
    assert_eq!(
        env_value(&env, "SHARDS"),
        completions.to_string(),
        "SHARDS must equal completions"
    );
    let script = container["args"][0].as_str().unwrap();
    assert!(script.contains("$JOB_COMPLETION_INDEX"), "{script}");
    let merge_script = docs[1]["spec"]["template"]["spec"]["containers"][0]["args"][0]
        .as_str()
        .unwrap();

    let t = tempdir();
    let path = scan_on_path(t.path());
    let repo = t.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    repository(&repo);
    let reports = t.path().join("reports");
    std::fs::create_dir(&reports).unwrap();
    for i in 0..completions {
        let vars = [
            ("JOB_COMPLETION_INDEX", i.to_string()),
            ("SHARDS", env_value(&env, "SHARDS")),
            ("REPO", repo.display().to_string()),
            ("REPORTS", reports.display().to_string()),
        ];
        // Run twice: a retried pod writes the same report.
        for _ in 0..2 {
            let r = sh(t.path(), script, &path, &vars);
            assert_eq!(r.code, Some(0), "pod {i} (findings exit 0): {}", r.stderr);
        }
        assert!(reports.join(format!("shard-{i}.jsonl")).exists());
        assert!(!reports.join(format!("shard-{i}.jsonl.part")).exists());
    }
    let vars = [("REPORTS", reports.display().to_string())];
    let merged = sh(t.path(), merge_script, &path, &vars);
    assert_eq!(merged.code, Some(1), "findings: {}", merged.stderr);
    let full = sh(
        t.path(),
        "scan git --format sarif --no-progress \"$REPO\"",
        &path,
        &[("REPO", repo.display().to_string())],
    );
    assert_eq!(full.code, Some(1));
    let sarif = std::fs::read_to_string(reports.join("magpie.sarif")).unwrap();
    assert_eq!(
        sarif,
        full.stdout_text(),
        "the merge is the full run's report"
    );
    // One shard lost: the merge refuses, naming it.
    std::fs::remove_file(reports.join("shard-1.jsonl")).unwrap();
    let r = sh(t.path(), merge_script, &path, &vars);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!("1/{completions}")),
        "{}",
        r.stderr
    );
}

#[test]
fn the_github_actions_matrix_steps_shard_and_merge_as_one_run() {
    if !git_present() {
        return;
    }
    let wf = load_yaml("docs/examples/github-actions-shards.yml").remove(0);
    let shard_job = &wf["jobs"]["shard"];
    let matrix: Vec<i64> = shard_job["strategy"]["matrix"]["shard"]
        .as_vec()
        .expect("a shard matrix")
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect();
    let n = matrix.len() as i64;
    assert_eq!(matrix, (0..n).collect::<Vec<_>>(), "0-based, each once");
    assert_eq!(
        shard_job["env"]["SHARDS"].as_str(),
        Some("${{ strategy.job-total }}")
    );
    let step = |job: &Yaml, name: &str| -> String {
        job["steps"]
            .as_vec()
            .unwrap()
            .iter()
            .find(|s| s["name"].as_str() == Some(name))
            .and_then(|s| s["run"].as_str())
            .unwrap_or_else(|| panic!("step {name:?}"))
            .to_owned()
    };
    let scan_step = step(shard_job, "Scan this shard");
    let merge_step = step(&wf["jobs"]["merge"], "Merge the shards");
    assert_eq!(wf["jobs"]["merge"]["needs"].as_str(), Some("shard"));

    let t = tempdir();
    let path = scan_on_path(t.path());
    let repo = t.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    repository(&repo);
    let shards = t.path().join("work/shards");
    std::fs::create_dir_all(&shards).unwrap();
    for i in matrix {
        // The checkout is the working directory, as in the job.
        let vars = [("SHARD", i.to_string()), ("SHARDS", n.to_string())];
        let r = sh(&repo, &scan_step, &path, &vars);
        assert_eq!(r.code, Some(0), "shard {i}: {}", r.stderr);
        // upload-artifact / download-artifact with merge-multiple.
        let name = format!("shard-{i}.jsonl");
        std::fs::rename(repo.join(&name), shards.join(&name)).unwrap();
    }
    let work = t.path().join("work");
    let merged = sh(&work, &merge_step, &path, &[]);
    assert_eq!(merged.code, Some(1), "findings: {}", merged.stderr);
    let full = sh(&repo, "scan git --format sarif --no-progress .", &path, &[]);
    let sarif = std::fs::read_to_string(work.join("magpie.sarif")).unwrap();
    assert_eq!(sarif, full.stdout_text());
}
