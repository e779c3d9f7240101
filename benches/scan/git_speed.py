#!/usr/bin/env python3
"""`scan git` against `gitleaks git` and `kingfisher scan` on one
repository's history, in alternating rounds (the order flips every round),
with the per-round ratio to each peer.

    python3 benches/scan/git_speed.py REPO [--rounds 5] [--scan BIN]... [--arg X]...

REPO is a clone (bare or not) of a public repository, e.g. the mirror the
search tool's `fetch github:BurntSushi/ripgrep` leaves under
/work/.mirror/BurntSushi+ripgrep/repo. Each `--scan` names a magpie
binary (several: an old and a new build side by side, each its own row);
default: CARGO_TARGET_DIR's release `scan`; `--arg X` is passed to every
magpie run (e.g. `--arg=--whole-blobs`), `--variant BIN:X` adds a row for
BIN run with the extra argument X. gitleaks comes from GITLEAKS or PATH,
kingfisher from KINGFISHER, PATH, or the wheel unpacked under
/work/peers/kf (`pip download --no-deps kingfisher-bin`); a peer not found
is left out, with a line saying so. kingfisher runs `scan REPO` with
validation off (`--no-validate`: no network) and its update check off; one
unmeasured warm-up run of every tool comes first (kingfisher compiles and
caches its rule database on its first run). Every tool writes a JSON
report to a temporary file; wall time is the child's, CPU and peak RSS the
kernel's (os.wait4). Prints the load average before and after, the cores,
and per tool the median wall time, its range, and the median and range of
the per-round ratio to each peer. Numbers taken while other work runs are
first looks, not results.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_once(argv):
    start = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024, code, err


def findings(path, key):
    with open(path) as f:
        data = json.load(f)
    if callable(key):
        return key(data)
    return len(data[key]) if key else len(data)


def kingfisher_findings(data):
    """kingfisher's json envelope: a list of findings under `findings`
    (older releases: the top-level list)."""
    if isinstance(data, list):
        return len(data)
    return len(data.get("findings", []))


KF_WHEEL = "/work/peers/kf/kingfisher/bin/kingfisher"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("repo")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--scan", action="append", default=[])
    ap.add_argument("--arg", action="append", default=[])
    ap.add_argument("--variant", action="append", default=[])
    ap.add_argument("--gitleaks", default=os.environ.get("GITLEAKS") or shutil.which("gitleaks"))
    ap.add_argument("--kingfisher", default=os.environ.get("KINGFISHER") or shutil.which("kingfisher")
                    or (KF_WHEEL if os.path.exists(KF_WHEEL) else None))
    ap.add_argument("--warmup", type=int, default=1)
    a = ap.parse_args()
    scans = [(s, []) for s in a.scan] or [
        (os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "scan"), [])]
    for v in a.variant:
        binary, _, extra = v.partition(":")
        scans.append((binary, [extra] if extra else []))
    tmp = tempfile.mkdtemp(prefix="git_speed.")
    tools = {}
    for i, (s, extra) in enumerate(scans):
        out = os.path.join(tmp, f"magpie{i}.json")
        tools[f"magpie{i}" if len(scans) > 1 else "magpie"] = (
            [s, "git", "--no-progress", "-f", "json", "-o", out, "--exit-code", "0", *a.arg, *extra, a.repo],
            out, "findings", {0})
    peers = []
    if a.gitleaks:
        gl_out = os.path.join(tmp, "gitleaks.json")
        tools["gitleaks"] = ([a.gitleaks, "git", a.repo, "--report-format", "json", "--report-path", gl_out,
                              "--no-banner", "--log-level", "error", "--exit-code", "0"], gl_out, None, {0})
        peers.append("gitleaks")
    else:
        print("gitleaks: not found (GITLEAKS or PATH); left out")
    if a.kingfisher:
        kf_out = os.path.join(tmp, "kingfisher.json")
        # kingfisher exits 200 (findings) or 205 (validated findings).
        tools["kingfisher"] = ([a.kingfisher, "--no-update-check", "-q", "scan", a.repo, "--no-validate",
                                "-f", "json", "-o", kf_out], kf_out, kingfisher_findings, {0, 200, 205})
        peers.append("kingfisher")
    else:
        print("kingfisher: not found (KINGFISHER, PATH or the unpacked wheel); left out")
    names = list(tools)
    res = {k: {"wall": [], "cpu": [], "rss": [], "found": set()} for k in names}
    for _ in range(a.warmup):
        for k in names:
            run_once(tools[k][0])
    load_before = os.getloadavg()
    for r in range(a.rounds):
        for k in names if r % 2 == 0 else names[::-1]:
            argv, out, key, ok = tools[k]
            wall, cpu, rss, code, err = run_once(argv)
            if code not in ok:
                sys.exit(f"{k} exited {code}: {err.strip()[:400]}")
            res[k]["wall"].append(wall)
            res[k]["cpu"].append(cpu)
            res[k]["rss"].append(rss)
            res[k]["found"].add(findings(out, key))
    load_after = os.getloadavg()
    print(f"cores {os.cpu_count()}, load average {load_before[0]:.2f} before, {load_after[0]:.2f} after, "
          f"{a.rounds} alternating rounds")
    summary = {}
    for k in names:
        w = res[k]["wall"]
        summary[k] = {"wall_median_s": statistics.median(w), "wall_min_s": min(w), "wall_max_s": max(w),
                      "cpu_median_s": statistics.median(res[k]["cpu"]),
                      "peak_rss_mib": max(res[k]["rss"]) / 2**20, "findings": sorted(res[k]["found"])}
        s = summary[k]
        line = (f"{k:10} wall {s['wall_median_s']:6.3f} s ({s['wall_min_s']:.3f}-{s['wall_max_s']:.3f})  "
                f"cpu {s['cpu_median_s']:6.3f} s  peak RSS {s['peak_rss_mib']:6.1f} MiB")
        for p in peers:
            ratios = [x / b for x, b in zip(w, res[p]["wall"])]
            s[f"vs_{p}"] = {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)}
            if p != k:
                r = s[f"vs_{p}"]
                line += f"  vs {p} {r['median']:.3f} ({r['min']:.3f}-{r['max']:.3f})"
        print(f"{line}  findings {s['findings']}")
    print(json.dumps({"rounds": a.rounds, "load": [load_before[0], load_after[0]], "results": summary}))
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
