//! A planted *history*: a seeded git repository whose commits add, change,
//! move, merge, hide and delete synthetic secrets, and the ground truth of
//! what `scan git --all-objects` must report for it: each planted secret
//! with the commit that wrote the blob holding it, and the path.
//!
//! The rules of attribution are scan/GIT.md's ("What is scanned, and which
//! commit a finding names"): every blob is scanned once, only for what it
//! adds against its first parent's blob at its path, so a finding names the
//! commit that added the secret's line; a blob no commit reaches is
//! reported with the commit `unreachable` and the blob id as its path. With
//! `--whole-blobs` a secret that moves into a new blob (the file was edited
//! around it) is reported again for that blob's commit: those findings are
//! marked [`Expected::whole_blobs_only`].
//!
//! Each round plants one secret per scenario ([`SCENARIOS`]). The objects of
//! the first half of the rounds are packed (`git repack -a -d`), the rest
//! stay loose. The `git` binary builds the repository (this is a test and
//! benchmark tool; the scanner itself never runs git), with a fixed identity
//! and a clock that moves one minute per commit, so the same seed gives the
//! same commit ids.

use std::io;
use std::path::Path;
use std::process::{Command, Stdio};

use serde::Serialize;

use scan::rules::template::{render, Rng};
use scan::rules::{RuleId, RuleSet};

use crate::RuleCycle;

/// Name of the ground-truth file written beside (not inside) the repository.
pub const HISTORY_TRUTH: &str = "history-truth.json";

/// What each round plants, in order.
pub const SCENARIOS: &[&str] = &[
    "added-then-deleted",
    "changed",
    "renamed",
    "merge-commit",
    "side-branch-only",
    "dangling-commit",
    "archive",
    "many-commits",
    "unreachable-blob",
];

/// How many commits a `many-commits` secret lives through (each edits the
/// file around it, so each writes a new blob holding it: reported once by
/// default, at the first, and once per blob with `--whole-blobs`).
pub const MANY_COMMITS: usize = 4;

/// One finding `scan git --all-objects` must report.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, PartialOrd, Ord)]
pub struct Expected {
    /// Full id of the commit that introduced the blob, or `unreachable`.
    pub commit: String,
    /// Path in that commit's tree (`archive.zip!member` inside an
    /// archive); for an unreachable blob, its id.
    pub path: String,
    /// The rule whose template made the secret.
    pub rule: String,
    pub secret: String,
    /// The planted line that carries it (for peers' rule coverage: a tool
    /// that cannot find this line in a plain file cannot find it in history).
    pub line: String,
    /// One of [`SCENARIOS`].
    pub scenario: String,
    /// `packed` or `loose`: where the blob's object is stored.
    pub storage: String,
    /// Reported only by `scan git --whole-blobs`: the secret's line is
    /// unchanged from the first parent's blob at this path, so the default
    /// scan (what each blob adds) reports it at an earlier commit only.
    pub whole_blobs_only: bool,
}

/// The contents of [`HISTORY_TRUTH`].
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct HistoryTruth {
    pub seed: u64,
    pub rounds: usize,
    /// Commits reachable from refs, plus dangling ones.
    pub commits: usize,
    pub expected: Vec<Expected>,
}

/// The repository under construction.
struct Repo<'a> {
    dir: &'a Path,
    /// Seconds since the epoch of the next commit.
    clock: u64,
    commits: usize,
}

impl Repo<'_> {
    fn cmd(&self, args: &[&str]) -> Command {
        let date = format!("@{} +0000", self.clock);
        let mut cmd = Command::new("git");
        cmd.current_dir(self.dir)
            .args(args)
            .env("GIT_AUTHOR_NAME", "Plant Author")
            .env("GIT_AUTHOR_EMAIL", "plant@example.com")
            .env("GIT_COMMITTER_NAME", "Plant Author")
            .env("GIT_COMMITTER_EMAIL", "plant@example.com")
            .env("GIT_AUTHOR_DATE", &date)
            .env("GIT_COMMITTER_DATE", &date)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .stdin(Stdio::null());
        cmd
    }

    fn git(&self, args: &[&str]) -> io::Result<String> {
        let out = self.cmd(args).output()?;
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "git {args:?}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    fn write(&self, rel: &str, data: &[u8]) -> io::Result<()> {
        let path = self.dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, data)
    }

    /// Stages everything and commits; returns the new commit's id.
    fn commit(&mut self, msg: &str) -> io::Result<String> {
        self.git(&["add", "-A"])?;
        self.git(&["commit", "-q", "--allow-empty", "-m", msg])?;
        self.clock += 60;
        self.commits += 1;
        self.git(&["rev-parse", "HEAD"])
    }
}

struct Planter<'a> {
    rules: &'a RuleSet,
    rng: Rng,
    cycle: RuleCycle,
}

impl Planter<'_> {
    /// A fresh secret and a line that carries it in its rule's context.
    fn line(&mut self) -> (RuleId, String, String) {
        let r = self.cycle.take_bare(self.rules);
        let secret = self
            .rules
            .generate_secret(r, &mut self.rng)
            .expect("every built-in rule has a template");
        let ex = self.rng.pick(&self.rules.rule(r).examples).clone();
        let line = render(&ex, &mut self.rng, Some(&secret));
        (r, secret, line)
    }

    /// File contents: `n` harmless lines, then `line`, then `m` more.
    fn file(&mut self, line: &str, salt: usize) -> String {
        const FILLER: &[&str] = &[
            "import os",
            "LOG_LEVEL = \"info\"",
            "timeout_seconds = 30",
            "# keep in sync with the deployment",
            "retries = 3",
            "region = \"eu-west-1\"",
        ];
        let mut s = String::new();
        for i in 0..self.rng.range(1, 5) {
            s.push_str(self.rng.pick::<&str>(FILLER));
            s.push_str(&format!("  # {salt}.{i}\n"));
        }
        s.push_str(line);
        s.push('\n');
        for _ in 0..self.rng.range(0, 4) {
            s.push_str(self.rng.pick::<&str>(FILLER));
            s.push('\n');
        }
        s
    }
}

/// Writes the repository at `repo` (created if missing; must not be a
/// repository yet) and returns its ground truth; also writes the truth as
/// JSON to [`HISTORY_TRUTH`] beside the repository directory.
pub fn generate_history(repo: &Path, seed: u64, rounds: usize) -> io::Result<HistoryTruth> {
    std::fs::create_dir_all(repo)?;
    let rules = RuleSet::builtin();
    let mut rng = Rng::new(seed ^ 0x6869_7374_6f72_7921);
    let cycle = RuleCycle::new(&rules, &mut rng);
    let mut p = Planter {
        rules: &rules,
        rng,
        cycle,
    };
    let mut r = Repo {
        dir: repo,
        clock: 1_700_000_000 + seed % 1_000_000,
        commits: 0,
    };
    let mut expected = Vec::new();
    r.git(&["init", "-q", "-b", "main"])?;
    r.write("README.md", b"planted history\n")?;
    r.commit("initial")?;

    for round in 0..rounds {
        let storage = if round < rounds / 2 {
            "packed"
        } else {
            "loose"
        };
        let expect = |expected: &mut Vec<Expected>,
                      commit: &str,
                      path: &str,
                      (rule, secret, line): (RuleId, &str, &str),
                      scenario: &str| {
            expected.push(Expected {
                commit: commit.to_owned(),
                path: path.to_owned(),
                rule: rules.rule(rule).id.clone(),
                secret: secret.to_owned(),
                line: line.to_owned(),
                scenario: scenario.to_owned(),
                storage: storage.to_owned(),
                whole_blobs_only: false,
            });
        };
        let dir = format!("r{round}");

        // Added, then deleted in the next commit.
        let (rule, secret, line) = p.line();
        let path = format!("{dir}/config.env");
        r.write(&path, p.file(&line, round).as_bytes())?;
        let c = r.commit(&format!("round {round}: add config"))?;
        expect(
            &mut expected,
            &c,
            &path,
            (rule, &secret, &line),
            "added-then-deleted",
        );
        std::fs::remove_file(repo.join(&path))?;
        r.commit(&format!("round {round}: remove config"))?;

        // Changed: one secret replaced by another.
        let (rule1, s1, l1) = p.line();
        let (rule2, s2, l2) = p.line();
        let path = format!("{dir}/settings.py");
        r.write(&path, p.file(&l1, round).as_bytes())?;
        let c1 = r.commit(&format!("round {round}: settings"))?;
        r.write(&path, p.file(&l2, round).as_bytes())?;
        let c2 = r.commit(&format!("round {round}: rotate the key"))?;
        expect(&mut expected, &c1, &path, (rule1, &s1, &l1), "changed");
        expect(&mut expected, &c2, &path, (rule2, &s2, &l2), "changed");

        // Renamed: the blob keeps its first commit and path.
        let (rule, secret, line) = p.line();
        let from = format!("{dir}/old_name.yaml");
        let to = format!("{dir}/new_name.yaml");
        r.write(&from, p.file(&line, round).as_bytes())?;
        let c = r.commit(&format!("round {round}: add old_name"))?;
        r.git(&["mv", &from, &to])?;
        r.commit(&format!("round {round}: rename"))?;
        expect(&mut expected, &c, &from, (rule, &secret, &line), "renamed");

        // Written by a merge commit itself (not by either parent).
        let side = format!("side-{round}");
        r.git(&["checkout", "-q", "-b", &side])?;
        r.write(&format!("{dir}/side.txt"), b"side work\n")?;
        r.commit(&format!("round {round}: side work"))?;
        r.git(&["checkout", "-q", "main"])?;
        r.write(&format!("{dir}/main.txt"), b"main work\n")?;
        r.commit(&format!("round {round}: main work"))?;
        r.git(&["merge", "-q", "--no-ff", "--no-commit", &side])?;
        let (rule, secret, line) = p.line();
        let path = format!("{dir}/merged.ini");
        r.write(&path, p.file(&line, round).as_bytes())?;
        let c = r.commit(&format!("round {round}: merge {side}"))?;
        r.git(&["branch", "-q", "-d", &side])?;
        expect(
            &mut expected,
            &c,
            &path,
            (rule, &secret, &line),
            "merge-commit",
        );

        // Only on a branch that is never merged.
        let feature = format!("feature-{round}");
        r.git(&["checkout", "-q", "-b", &feature])?;
        let (rule, secret, line) = p.line();
        let path = format!("{dir}/feature.js");
        r.write(&path, p.file(&line, round).as_bytes())?;
        let c = r.commit(&format!("round {round}: feature"))?;
        r.git(&["checkout", "-q", "main"])?;
        expect(
            &mut expected,
            &c,
            &path,
            (rule, &secret, &line),
            "side-branch-only",
        );

        // Only in a commit no ref reaches (its branch deleted).
        let doomed = format!("doomed-{round}");
        r.git(&["checkout", "-q", "-b", &doomed])?;
        let (rule, secret, line) = p.line();
        let path = format!("{dir}/lost.env");
        r.write(&path, p.file(&line, round).as_bytes())?;
        let c = r.commit(&format!("round {round}: lost work"))?;
        r.git(&["checkout", "-q", "main"])?;
        r.git(&["branch", "-q", "-D", &doomed])?;
        expect(
            &mut expected,
            &c,
            &path,
            (rule, &secret, &line),
            "dangling-commit",
        );

        // In an archive member.
        let (rule, secret, line) = p.line();
        let member = format!("conf/{round}.txt");
        let zip = crate::zip_bytes(&[(member.clone(), p.file(&line, round).into_bytes())])?;
        let path = format!("{dir}/bundle.zip");
        r.write(&path, &zip)?;
        let c = r.commit(&format!("round {round}: bundle"))?;
        expect(
            &mut expected,
            &c,
            &format!("{path}!{member}"),
            (rule, &secret, &line),
            "archive",
        );

        // The same secret through several commits that edit around it.
        let (rule, secret, line) = p.line();
        let path = format!("{dir}/long_lived.go");
        for k in 0..MANY_COMMITS {
            let body = format!("// revision {k}\n{}", p.file(&line, round * 100 + k));
            r.write(&path, body.as_bytes())?;
            let c = r.commit(&format!("round {round}: revision {k}"))?;
            expect(
                &mut expected,
                &c,
                &path,
                (rule, &secret, &line),
                "many-commits",
            );
            // Only the first revision adds the secret's line.
            let last = expected.last_mut().expect("just pushed");
            last.whole_blobs_only = k > 0;
        }

        // A blob written to the object database and never committed
        // (always loose: `repack -a -d` leaves unreachable objects out).
        let (rule, secret, line) = p.line();
        let tmp = format!("{dir}/.unreachable.tmp");
        r.write(&tmp, p.file(&line, round).as_bytes())?;
        let blob = r.git(&["hash-object", "-w", &tmp])?;
        std::fs::remove_file(repo.join(&tmp))?;
        let e = Expected {
            commit: "unreachable".into(),
            path: blob,
            rule: rules.rule(rule).id.clone(),
            secret,
            line,
            scenario: "unreachable-blob".into(),
            storage: "loose".into(),
            whole_blobs_only: false,
        };
        expected.push(e);

        if round + 1 == rounds / 2 {
            // Everything so far into one pack; the reflogs keep the
            // dangling commits, so `-a -d` packs them too (not pruned).
            r.git(&["repack", "-q", "-a", "-d"])?;
        }
    }
    expected.sort();
    let truth = HistoryTruth {
        seed,
        rounds,
        commits: r.commits,
        expected,
    };
    let json = serde_json::to_vec_pretty(&truth).map_err(io::Error::other)?;
    let out = repo.parent().unwrap_or(Path::new(".")).join(HISTORY_TRUTH);
    std::fs::write(out, json)?;
    Ok(truth)
}
