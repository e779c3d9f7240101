//! The planted-secret corpus: a seeded, reproducible directory of realistic
//! files with fresh synthetic secrets from every rule, decoys that must not
//! be reported, and a ground-truth file listing both. `scan-plant` is its
//! command line; the end-to-end recall test and the kingfisher comparison
//! read it.
//!
//! Same seed, same bytes: the generator draws everything from one
//! [`Rng`], iterates in a fixed order, and writes archives with fixed
//! timestamps and modes.
#![forbid(unsafe_code)]

use std::io::Write;
use std::path::Path;

use serde::Serialize;

pub mod history;

use scan::chunk::CHUNK_SIZE;
use scan::rules::template::{render, Rng};
use scan::rules::{RuleId, RuleSet};

/// Name of the ground-truth file written at the corpus root.
pub const GROUND_TRUTH: &str = "ground-truth.json";
/// Default number of ordinary files (enough to plant every rule).
pub const DEFAULT_FILES: usize = 240;

/// One planted secret.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Planted {
    /// Relative path; archive members as `outer.zip!inner/file`.
    pub path: String,
    /// 1-based line and column (bytes) of the secret's first byte.
    pub line: u64,
    pub column: u64,
    /// Byte offset of the secret in its file (member).
    pub offset: u64,
    pub family: String,
    pub rule: String,
    pub secret: String,
    /// Planted inside a binary blob (NUL-separated).
    pub in_binary: bool,
    /// Where it was put: `line`, `chunk-boundary`, `long-line`, `archive`, `binary`.
    pub placement: String,
}

/// A look-alike that must not be reported.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Decoy {
    pub path: String,
    pub line: u64,
    /// Why it is not a secret (`counter-example:<rule>`, `placeholder`, ...).
    pub kind: String,
    pub text: String,
}

/// The contents of `ground-truth.json`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct GroundTruth {
    pub seed: u64,
    pub files: usize,
    pub rules: usize,
    pub secrets: Vec<Planted>,
    pub decoys: Vec<Decoy>,
}

/// Placeholders and documentation values a scanner must stay quiet about.
pub const PLACEHOLDER_DECOYS: &[&str] = &[
    "aws_access_key_id = AKIAIOSFODNN7EXAMPLE",
    "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "GITHUB_TOKEN=ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "api_key = \"your-token-here\"",
    "API_KEY=<YOUR_API_KEY>",
    "token: ${TOKEN}",
    "password = \"changeme\"",
    "secret = \"aaaaaaaaaaaaaaaaaaaa\"",
    "api_token = \"1234567890abcdef\"",
    "client_secret: \"xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx\"",
    "stripe.api_key = \"sk_test_4eC39HqLyjWDarjtT1zdp7dc\"",
    "DATABASE_URL=postgres://user:password@localhost:5432/app",
    "REDIS_URL=redis://:${REDIS_PASSWORD}@cache:6379/0",
    "password: {{ vault_db_password }}",
    "SLACK_WEBHOOK=https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
];

/// Lines that make files look like their kind. None contains anything a
/// rule reports.
fn boilerplate(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::Py => &[
            "import os",
            "import logging",
            "from dataclasses import dataclass",
            "log = logging.getLogger(__name__)",
            "def handler(event, context):",
            "    items = [x for x in event.get(\"items\", []) if x]",
            "    return {\"status\": 200, \"count\": len(items)}",
            "class Settings:",
            "    debug = False",
            "    timeout_seconds = 30",
            "# TODO: move these into the config service",
            "if __name__ == \"__main__\":",
            "    handler({}, None)",
        ],
        Kind::Js => &[
            "'use strict';",
            "const express = require('express');",
            "const app = express();",
            "app.get('/health', (req, res) => res.json({ ok: true }));",
            "module.exports = { port: process.env.PORT || 3000 };",
            "function retry(fn, n) { return fn().catch(e => n ? retry(fn, n - 1) : Promise.reject(e)); }",
            "// keep in sync with the backend",
        ],
        Kind::Go => &[
            "package config",
            "import (\n\t\"os\"\n\t\"time\"\n)",
            "type Config struct {\n\tAddr    string\n\tTimeout time.Duration\n}",
            "func Load() Config {\n\treturn Config{Addr: os.Getenv(\"ADDR\"), Timeout: 5 * time.Second}\n}",
            "// Default values for local development.",
        ],
        Kind::Yaml => &[
            "apiVersion: apps/v1",
            "kind: Deployment",
            "metadata:\n  name: web\n  labels:\n    app: web",
            "spec:\n  replicas: 3",
            "      containers:\n        - name: web\n          image: registry.internal/web:1.4.2",
            "# values below are injected by the pipeline",
        ],
        Kind::Json => &["\"name\": \"service\",", "\"version\": \"2.3.1\",", "\"retries\": 3,", "\"region\": \"eu-west-1\","],
        Kind::Env => &["APP_ENV=production", "LOG_LEVEL=info", "PORT=8080", "FEATURE_FLAGS=search,billing", "TZ=UTC"],
        Kind::Ini => &["[server]", "host = 0.0.0.0", "port = 8443", "[database]", "pool_size = 10", "; managed by ops"],
        Kind::Dockerfile => &[
            "FROM python:3.12-slim",
            "WORKDIR /app",
            "COPY requirements.txt .",
            "RUN pip install --no-cache-dir -r requirements.txt",
            "COPY . .",
            "CMD [\"gunicorn\", \"app:server\"]",
        ],
        Kind::Md => &[
            "# Deployment notes",
            "Run `make deploy` from the repository root.",
            "- staging is rebuilt every night",
            "- production needs two approvals",
            "See the runbook for rollback steps.",
        ],
        Kind::Bin => &[],
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Py,
    Js,
    Go,
    Yaml,
    Json,
    Env,
    Ini,
    Dockerfile,
    Md,
    Bin,
}

const KINDS: &[Kind] = &[
    Kind::Py,
    Kind::Js,
    Kind::Go,
    Kind::Yaml,
    Kind::Json,
    Kind::Env,
    Kind::Ini,
    Kind::Dockerfile,
    Kind::Md,
    Kind::Bin,
];

fn file_name(kind: Kind, rng: &mut Rng, n: usize) -> String {
    let stem = *rng.pick(&[
        "settings", "config", "app", "deploy", "main", "client", "notes", "values", "local",
        "service",
    ]);
    match kind {
        Kind::Py => format!("{stem}_{n}.py"),
        Kind::Js => format!("{stem}_{n}.js"),
        Kind::Go => format!("{stem}_{n}.go"),
        Kind::Yaml => format!("{stem}_{n}.yaml"),
        Kind::Json => format!("{stem}_{n}.json"),
        Kind::Env => format!(".env.{stem}{n}"),
        Kind::Ini => format!("{stem}_{n}.ini"),
        Kind::Dockerfile => format!("Dockerfile.{stem}{n}"),
        Kind::Md => format!("{stem}_{n}.md"),
        Kind::Bin => format!("{stem}_{n}.bin"),
    }
}

fn directory(rng: &mut Rng) -> String {
    const PARTS: &[&str] = &[
        "src",
        "lib",
        "config",
        "deploy",
        "docs",
        "internal",
        "pkg",
        "scripts",
        "services/api",
        "vendor/acme",
    ];
    let depth = rng.range(0, 3);
    (0..depth)
        .map(|_| *rng.pick(PARTS))
        .collect::<Vec<_>>()
        .join("/")
}

/// A file being assembled, with what was planted in it (offsets only; lines
/// are computed once the bytes are final).
struct Draft {
    path: String,
    data: Vec<u8>,
    planted: Vec<(usize, RuleId, String, &'static str)>,
    decoys: Vec<(usize, String, String)>,
}

impl Draft {
    fn new(path: String) -> Draft {
        Draft {
            path,
            data: Vec::new(),
            planted: Vec::new(),
            decoys: Vec::new(),
        }
    }
    fn line(&mut self, s: &str) {
        self.data.extend_from_slice(s.as_bytes());
        self.data.push(b'\n');
    }
    /// Appends `text` (holding `secret`) as its own line(s).
    fn plant(&mut self, text: &str, secret: &str, rule: RuleId, placement: &'static str) {
        let at = self.data.len() + text.find(secret).expect("example contains its secret");
        self.planted.push((at, rule, secret.to_owned(), placement));
        self.line(text);
    }
    fn decoy(&mut self, text: &str, kind: String) {
        self.decoys.push((self.data.len(), kind, text.to_owned()));
        self.line(text);
    }
}

/// Picks rules in a seeded cyclic order so every rule is planted once
/// before any is planted twice.
struct RuleCycle {
    order: Vec<RuleId>,
    next: usize,
}

impl RuleCycle {
    fn new(rules: &RuleSet, rng: &mut Rng) -> RuleCycle {
        let mut order: Vec<RuleId> = rules.ids().collect();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i as u64 + 1) as usize);
        }
        RuleCycle { order, next: 0 }
    }
    fn take(&mut self) -> RuleId {
        let r = self.order[self.next % self.order.len()];
        self.next += 1;
        r
    }
    /// The next rule whose first example is the bare secret (fits inside
    /// JSON strings, long lines and binary blobs), skipping multi-line ones.
    fn take_bare(&mut self, rules: &RuleSet) -> RuleId {
        loop {
            let r = self.take();
            let info = rules.rule(r);
            if info.examples.iter().any(|e| e == "{secret}") && info.family != "private-key" {
                return r;
            }
        }
    }
}

struct Gen<'a> {
    rules: &'a RuleSet,
    rng: Rng,
    cycle: RuleCycle,
    decoy_pool: Vec<(String, String)>,
}

impl Gen<'_> {
    fn secret(&mut self, r: RuleId) -> String {
        self.rules
            .generate_secret(r, &mut self.rng)
            .expect("every built-in rule has a template")
    }

    fn example(&mut self, r: RuleId, secret: &str) -> String {
        let ex = self.rng.pick(&self.rules.rule(r).examples).clone();
        render(&ex, &mut self.rng, Some(secret))
    }

    fn decoy(&mut self) -> (String, String) {
        let (t, kind) = self.rng.pick(&self.decoy_pool).clone();
        (render(&t, &mut self.rng, None), kind)
    }

    /// An ordinary file of `kind` with `secrets` planted secrets and
    /// `decoys` decoys between boilerplate lines.
    fn text_file(&mut self, path: String, kind: Kind, secrets: usize, decoys: usize) -> Draft {
        let mut d = Draft::new(path);
        let lines = boilerplate(kind);
        let total = self.rng.range(8, 60);
        let mut events: Vec<u8> = std::iter::repeat_n(1u8, secrets)
            .chain(std::iter::repeat_n(2u8, decoys))
            .collect();
        for i in (1..events.len()).rev() {
            events.swap(i, self.rng.below(i as u64 + 1) as usize);
        }
        if kind == Kind::Json {
            d.line("{");
        }
        for i in 0..total {
            let l: &str = self.rng.pick::<&str>(lines);
            d.line(l);
            if !events.is_empty() && self.rng.below((total - i) as u64) < events.len() as u64 {
                match events.pop() {
                    Some(1) if kind == Kind::Json => {
                        let r = self.cycle.take_bare(self.rules);
                        let s = self.secret(r);
                        d.plant(&format!("\"value_{i}\": \"{s}\","), &s, r, "line");
                    }
                    Some(1) => {
                        let r = self.cycle.take();
                        let s = self.secret(r);
                        let text = self.example(r, &s);
                        d.plant(&text, &s, r, "line");
                    }
                    _ => {
                        let (t, k) = self.decoy();
                        d.decoy(&t, k);
                    }
                }
            }
        }
        if kind == Kind::Json {
            d.line("\"end\": true\n}");
        }
        d
    }

    /// Random bytes with NUL-delimited secrets inside.
    fn binary_file(&mut self, path: String, secrets: usize) -> Draft {
        let mut d = Draft::new(path);
        for _ in 0..secrets + 1 {
            let n = self.rng.range(512, 8192);
            d.data.extend((0..n).map(|_| self.rng.next_u64() as u8));
            d.data.extend_from_slice(b"\0\0");
            if d.planted.len() < secrets {
                let r = self.cycle.take_bare(self.rules);
                let s = self.secret(r);
                d.planted.push((d.data.len(), r, s.clone(), "binary"));
                d.data.extend_from_slice(s.as_bytes());
                d.data.extend_from_slice(b"\0\0");
            }
        }
        d
    }

    /// A large file with secrets straddling 256 KiB chunk boundaries, one
    /// of them in the middle of a very long line.
    fn large_file(&mut self, path: String, chunks: usize, long_line: bool) -> Draft {
        let mut d = Draft::new(path);
        let words = [
            "alpha", "beta", "gamma", "return", "value", "index", "count", "apply", "render", "map",
        ];
        for k in 1..=chunks {
            let r = self.cycle.take_bare(self.rules);
            let s = self.secret(r);
            // Secret start from just before the boundary minus its length
            // to just after the boundary.
            let back = self.rng.range(0, s.len() + 3);
            let target = (k * CHUNK_SIZE).saturating_sub(back).max(d.data.len() + 2);
            while d.data.len() + 1 < target {
                d.data.extend_from_slice(self.rng.pick(&words).as_bytes());
                let sep = if long_line {
                    b';'
                } else if self.rng.chance(1, 10) {
                    b'\n'
                } else {
                    b' '
                };
                d.data.push(sep);
            }
            d.data.truncate(target - 1);
            d.data.push(b' ');
            let placement = if long_line {
                "long-line"
            } else {
                "chunk-boundary"
            };
            d.planted.push((d.data.len(), r, s.clone(), placement));
            d.data.extend_from_slice(s.as_bytes());
            d.data.push(b' ');
        }
        d.data.extend_from_slice(b"end\n");
        d
    }
}

fn line_col(data: &[u8], off: usize) -> (u64, u64) {
    let before = &data[..off];
    let line = memchr::memchr_iter(b'\n', before).count() as u64 + 1;
    let col = off - memchr::memrchr(b'\n', before).map_or(0, |p| p + 1) + 1;
    (line, col as u64)
}

fn finish(d: &Draft, prefix: &str, rules: &RuleSet, in_archive: bool, truth: &mut GroundTruth) {
    let path = format!("{prefix}{}", d.path);
    for (off, r, secret, placement) in &d.planted {
        let (line, column) = line_col(&d.data, *off);
        let info = rules.rule(*r);
        truth.secrets.push(Planted {
            path: path.clone(),
            line,
            column,
            offset: *off as u64,
            family: info.family.clone(),
            rule: info.id.clone(),
            secret: secret.clone(),
            in_binary: *placement == "binary",
            placement: if in_archive {
                "archive".into()
            } else {
                (*placement).into()
            },
        });
    }
    for (off, kind, text) in &d.decoys {
        truth.decoys.push(Decoy {
            path: path.clone(),
            line: line_col(&d.data, *off).0,
            kind: kind.clone(),
            text: text.clone(),
        });
    }
}

fn zip_bytes(members: &[(String, Vec<u8>)]) -> std::io::Result<Vec<u8>> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .last_modified_time(zip::DateTime::default())
        .unix_permissions(0o644);
    for (name, data) in members {
        w.start_file(name.as_str(), opts)
            .map_err(std::io::Error::other)?;
        w.write_all(data)?;
    }
    Ok(w.finish().map_err(std::io::Error::other)?.into_inner())
}

fn tar_gz_bytes(members: &[(String, Vec<u8>)]) -> std::io::Result<Vec<u8>> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut b = tar::Builder::new(gz);
    for (name, data) in members {
        let mut h = tar::Header::new_gnu();
        h.set_path(name)?;
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_mtime(0);
        h.set_uid(0);
        h.set_gid(0);
        h.set_cksum();
        b.append(&h, data.as_slice())?;
    }
    b.into_inner()?.finish()
}

/// Relative paths and contents of a corpus's files.
pub type Tree = Vec<(String, Vec<u8>)>;

/// Generates the corpus in memory: every file's relative path and bytes,
/// and the ground truth.
pub fn build(seed: u64, files: usize) -> std::io::Result<(Tree, GroundTruth)> {
    let rules = RuleSet::builtin();
    let mut rng = Rng::new(seed);
    let cycle = RuleCycle::new(&rules, &mut rng);
    let mut decoy_pool: Vec<(String, String)> = PLACEHOLDER_DECOYS
        .iter()
        .map(|d| (d.to_string(), "placeholder".to_string()))
        .collect();
    for id in rules.ids() {
        let info = rules.rule(id);
        for c in &info.counter_examples {
            decoy_pool.push((c.clone(), format!("counter-example:{}", info.id)));
        }
    }
    let mut g = Gen {
        rules: &rules,
        rng,
        cycle,
        decoy_pool,
    };
    let mut truth = GroundTruth {
        seed,
        files: 0,
        rules: rules.len(),
        secrets: Vec::new(),
        decoys: Vec::new(),
    };
    let mut out: Vec<(String, Vec<u8>)> = Vec::new();
    let mut used = std::collections::BTreeSet::new();
    let draft = |g: &mut Gen<'_>, n: usize| {
        let kind = *g.rng.pick(KINDS);
        let dir = directory(&mut g.rng);
        let name = file_name(kind, &mut g.rng, n);
        let path = if dir.is_empty() {
            name
        } else {
            format!("{dir}/{name}")
        };
        let secrets = g.rng.range(0, 3);
        if kind == Kind::Bin {
            g.binary_file(path, secrets.min(1))
        } else {
            let decoys = g.rng.range(0, 2);
            g.text_file(path, kind, secrets, decoys)
        }
    };
    for n in 0..files {
        let d = draft(&mut g, n);
        if used.insert(d.path.clone()) {
            finish(&d, "", &rules, false, &mut truth);
            out.push((d.path, d.data));
        }
    }
    // Large files: secrets across 256 KiB boundaries, one with a long line.
    for (i, long) in [(0, false), (1, true), (2, false)] {
        let d = g.large_file(
            format!("data/large_{i}.{}", if long { "min.js" } else { "log" }),
            3,
            long,
        );
        finish(&d, "", &rules, false, &mut truth);
        out.push((d.path, d.data));
    }
    // Rules the cycle skipped (bare-secret placements pass over multi-line
    // and context rules) are planted here, so every rule appears.
    let planted: std::collections::BTreeSet<&str> =
        truth.secrets.iter().map(|s| s.rule.as_str()).collect();
    let missing: Vec<RuleId> = rules
        .ids()
        .filter(|&r| !planted.contains(rules.rule(r).id.as_str()))
        .collect();
    if !missing.is_empty() {
        let mut d = Draft::new("misc/remaining.txt".into());
        for r in missing {
            d.line("----");
            let s = g.secret(r);
            let text = g.example(r, &s);
            d.plant(&text, &s, r, "line");
        }
        finish(&d, "", &rules, false, &mut truth);
        out.push((d.path, d.data));
    }
    // Archives: a zip, a tar.gz, and a tar.gz holding a zip (one level).
    let members = |g: &mut Gen<'_>, base: usize, count: usize| -> Vec<Draft> {
        (0..count)
            .map(|k| {
                let mut d = draft(g, base + k);
                d.path = format!("inner/{}", d.path);
                d
            })
            .collect()
    };
    let zip_members = members(&mut g, 10_000, 5);
    for d in &zip_members {
        finish(d, "archives/bundle.zip!", &rules, true, &mut truth);
    }
    out.push((
        "archives/bundle.zip".into(),
        zip_bytes(
            &zip_members
                .iter()
                .map(|d| (d.path.clone(), d.data.clone()))
                .collect::<Vec<_>>(),
        )?,
    ));
    let tar_members = members(&mut g, 20_000, 4);
    let nested = members(&mut g, 30_000, 3);
    for d in &tar_members {
        finish(d, "archives/release.tar.gz!", &rules, true, &mut truth);
    }
    for d in &nested {
        finish(
            d,
            "archives/release.tar.gz!pkg/nested.zip!",
            &rules,
            true,
            &mut truth,
        );
    }
    let mut tar_list: Vec<(String, Vec<u8>)> = tar_members
        .iter()
        .map(|d| (d.path.clone(), d.data.clone()))
        .collect();
    tar_list.push((
        "pkg/nested.zip".into(),
        zip_bytes(
            &nested
                .iter()
                .map(|d| (d.path.clone(), d.data.clone()))
                .collect::<Vec<_>>(),
        )?,
    ));
    out.push(("archives/release.tar.gz".into(), tar_gz_bytes(&tar_list)?));
    truth.files = out.len();
    Ok((out, truth))
}

/// Writes the corpus under `out_dir` (created if missing) and returns its
/// ground truth, also written to `out_dir/ground-truth.json`.
pub fn generate(out_dir: &Path, seed: u64, files: usize) -> std::io::Result<GroundTruth> {
    let (tree, truth) = build(seed, files)?;
    for (rel, data) in &tree {
        let p = out_dir.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&p, data)?;
    }
    std::fs::create_dir_all(out_dir)?;
    let json = serde_json::to_string_pretty(&truth).map_err(std::io::Error::other)?;
    std::fs::write(out_dir.join(GROUND_TRUTH), json + "\n")?;
    Ok(truth)
}
