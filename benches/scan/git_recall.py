#!/usr/bin/env python3
"""Recall on planted git histories: magpie's `scan git` beside gitleaks, on the
same seeded
repositories (`scan-plant --git`, tools/scan-plant/src/history.rs).

    python3 benches/scan/git_recall.py [--seeds 1,2,3] [--rounds 4]

Needs `git`. Builds `scan` and `scan-plant` (release) unless SCAN and
SCAN_PLANT name binaries. gitleaks comes from GITLEAKS or PATH (see
docs/parts/bench-scan.md for where to get it); a missing peer is named and
skipped.

A planted secret counts as found by a tool when one of its findings carries
the secret (gitleaks' `Secret`) and names
the planted commit (unreachable blobs: any commit). "Anywhere" drops the
commit condition. magpie runs with `--all-objects`; gitleaks with its
default `gitleaks git` (its `git log -p` walks refs only, so a dangling
commit or an unreachable blob is out of its reach by design, as without
`--all-objects` for magpie: the table says so per scenario).
"""
import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def build():
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    scan = os.environ.get("SCAN")
    plant = os.environ.get("SCAN_PLANT")
    if not (scan and plant):
        subprocess.run(
            ["cargo", "build", "--release", "-q", "-p", "scan", "-p", "scan-plant"],
            cwd=ROOT,
            check=True,
        )
        scan = scan or os.path.join(target, "release", "scan")
        plant = plant or os.path.join(target, "release", "scan-plant")
    return scan, plant


def magpie(scan, repo):
    out = subprocess.run(
        [scan, "git", "--no-progress", "--all-objects", "-f", "json", repo],
        capture_output=True,
        check=False,
    )
    if out.returncode not in (0, 1):
        sys.exit(f"scan failed: {out.stderr.decode()}")
    return [(f["commit"], f["secret"]) for f in json.loads(out.stdout)["findings"]]


def magpie_dir(scan, d):
    out = subprocess.run([scan, "--no-progress", "-f", "json", d], capture_output=True, check=False)
    return [("", f["secret"]) for f in json.loads(out.stdout)["findings"]]


def gitleaks_run(binary, mode, target, report):
    """`gitleaks git REPO` or `gitleaks dir DIR`: (commit, secret) pairs."""
    subprocess.run(
        [binary, mode, target, "--report-format", "json", "--report-path", report,
         "--no-banner", "--log-level", "error", "--exit-code", "0"],
        capture_output=True,
        check=True,
    )
    with open(report) as f:
        return [(x.get("Commit", ""), x.get("Secret", "") or x.get("Match", "")) for x in json.load(f)]


def gitleaks_dir(binary, d):
    return gitleaks_run(binary, "dir", d, d + ".gitleaks.json")


def gitleaks(binary, repo, tmp):
    return gitleaks_run(binary, "git", repo, os.path.join(tmp, "gitleaks.json"))


def coverage(tool, truth, tmp):
    """The secrets `tool` finds when their planted lines sit in plain files:
    its rule coverage, apart from history. Returns the set of secrets."""
    d = os.path.join(tmp, "plain")
    os.makedirs(d, exist_ok=True)
    for i, e in enumerate(truth["expected"]):
        name = os.path.basename(e["path"].split("!")[-1])
        if e["commit"] == "unreachable":
            name = "blob.txt"
        with open(os.path.join(d, f"{i}-{name}"), "w") as f:
            f.write(e["line"] + "\n")
    findings = tool(d)
    return {e["secret"] for e in truth["expected"] if any(e["secret"] in s for _, s in findings)}


def score(truth, findings, detectable):
    """Per planted secret (a `changed` round plants two, a `many-commits`
    secret counts once): found at one of the commits that introduced it
    (unreachable blobs: anywhere), found anywhere, and planted; the last
    column counts only secrets the tool finds in a plain file."""
    by_secret = collections.defaultdict(lambda: {"commits": set(), "scenario": None})
    for e in truth["expected"]:
        x = by_secret[e["secret"]]
        x["commits"].add(e["commit"])
        x["scenario"] = e["scenario"]
    at, anywhere, total, det_at, det = (collections.Counter() for _ in range(5))
    for secret, x in by_secret.items():
        sc = x["scenario"]
        total[sc] += 1
        hits = {c for c, s in findings if secret in s}
        found = bool(hits) and ("unreachable" in x["commits"] or bool(hits & x["commits"]))
        at[sc] += found
        anywhere[sc] += bool(hits)
        if secret in detectable:
            det[sc] += 1
            det_at[sc] += found
    return total, at, anywhere, det_at, det


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--rounds", type=int, default=4)
    args = ap.parse_args()
    if not shutil.which("git"):
        sys.exit("git_recall: needs the git binary")
    scan, plant = build()
    tools = {"magpie": (lambda repo, tmp: magpie(scan, repo), lambda d: magpie_dir(scan, d))}
    gl = os.environ.get("GITLEAKS") or shutil.which("gitleaks")
    if gl:
        tools["gitleaks"] = (lambda repo, tmp: gitleaks(gl, repo, tmp), lambda d: gitleaks_dir(gl, d))
    else:
        print("gitleaks: not found (GITLEAKS or PATH); skipped")
    sums = {n: [collections.Counter() for _ in range(5)] for n in tools}
    for seed in [int(s) for s in args.seeds.split(",")]:
        with tempfile.TemporaryDirectory() as tmp:
            repo = os.path.join(tmp, "repo")
            subprocess.run([plant, "--git", repo, "--seed", str(seed), "--rounds", str(args.rounds)],
                           check=True, capture_output=True)
            with open(os.path.join(tmp, "history-truth.json")) as f:
                truth = json.load(f)
            for name, (hist, plain) in tools.items():
                detectable = coverage(plain, truth, tmp)
                for acc, part in zip(sums[name], score(truth, hist(repo, tmp), detectable)):
                    acc.update(part)
    names = list(tools)
    total = sums["magpie"][0]
    print(f"seeds {args.seeds}, {args.rounds} rounds each; per planted secret: found at its "
          "introducing commit / among those the tool finds in a plain file (found anywhere in brackets)")
    print("| scenario | secrets | " + " | ".join(names) + " |")
    print("| --- | ---: | " + " | ".join("---" for _ in names) + " |")
    for sc in total:
        cells = [f"{sums[n][1][sc]} / {sums[n][4][sc]} ({sums[n][2][sc]})" for n in names]
        print(f"| {sc} | {total[sc]} | " + " | ".join(cells) + " |")
    n_all = sum(total.values())
    cells = []
    for n in names:
        at, det_at, det = sum(sums[n][1].values()), sum(sums[n][3].values()), sum(sums[n][4].values())
        cells.append(f"**{at / n_all:.3f}** of all; {det_at / max(det, 1):.3f} of the {det} it can detect")
    print(f"| recall | {n_all} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
