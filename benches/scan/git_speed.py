#!/usr/bin/env python3
"""`scan git` against `gitleaks git` on one repository's history, in
alternating rounds (the order flips every round), with the per-round ratio.

    python3 benches/scan/git_speed.py REPO [--rounds 5] [--scan BIN]...

REPO is a clone (bare or not) of a public repository, e.g. the mirror the
search tool's `fetch github:BurntSushi/ripgrep` leaves under
/work/.mirror/BurntSushi+ripgrep/repo. Each `--scan` names a magpie
binary (several: an old and a new build side by side, each its own row);
default: CARGO_TARGET_DIR's release `scan`. gitleaks comes from GITLEAKS
or PATH. Both write a JSON report to a temporary file; wall time is the
child's, CPU and peak RSS the kernel's (os.wait4). Prints the load
average before and after, the cores, and per tool the median wall time,
its range, and the median and range of the per-round ratio to gitleaks.
Numbers taken while other work runs are first looks, not results.
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
    return len(data[key]) if key else len(data)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("repo")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--scan", action="append", default=[])
    ap.add_argument("--gitleaks", default=os.environ.get("GITLEAKS") or shutil.which("gitleaks"))
    a = ap.parse_args()
    if not a.gitleaks:
        sys.exit("gitleaks not found: set GITLEAKS or put it on PATH")
    scans = a.scan or [os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")),
                                    "release", "scan")]
    tmp = tempfile.mkdtemp(prefix="git_speed.")
    tools = {}
    for i, s in enumerate(scans):
        out = os.path.join(tmp, f"magpie{i}.json")
        tools[f"magpie{i}" if len(scans) > 1 else "magpie"] = (
            [s, "git", "--no-progress", "-f", "json", "-o", out, "--exit-code", "0", a.repo], out, "findings")
    gl_out = os.path.join(tmp, "gitleaks.json")
    tools["gitleaks"] = ([a.gitleaks, "git", a.repo, "--report-format", "json", "--report-path", gl_out,
                          "--no-banner", "--log-level", "error", "--exit-code", "0"], gl_out, None)
    names = list(tools)
    res = {k: {"wall": [], "cpu": [], "rss": [], "found": set()} for k in names}
    load_before = os.getloadavg()
    for r in range(a.rounds):
        for k in names if r % 2 == 0 else names[::-1]:
            argv, out, key = tools[k]
            wall, cpu, rss, code, err = run_once(argv)
            if code != 0:
                sys.exit(f"{k} exited {code}: {err.strip()[:400]}")
            res[k]["wall"].append(wall)
            res[k]["cpu"].append(cpu)
            res[k]["rss"].append(rss)
            res[k]["found"].add(findings(out, key))
    load_after = os.getloadavg()
    print(f"cores {os.cpu_count()}, load average {load_before[0]:.2f} before, {load_after[0]:.2f} after, "
          f"{a.rounds} alternating rounds")
    base = res["gitleaks"]["wall"]
    summary = {}
    for k in names:
        w = res[k]["wall"]
        ratios = [x / b for x, b in zip(w, base)]
        summary[k] = {"wall_median_s": statistics.median(w), "wall_min_s": min(w), "wall_max_s": max(w),
                      "cpu_median_s": statistics.median(res[k]["cpu"]),
                      "peak_rss_mib": max(res[k]["rss"]) / 2**20,
                      "ratio_median": statistics.median(ratios), "ratio_min": min(ratios),
                      "ratio_max": max(ratios), "findings": sorted(res[k]["found"])}
        s = summary[k]
        print(f"{k:10} wall {s['wall_median_s']:6.3f} s ({s['wall_min_s']:.3f}-{s['wall_max_s']:.3f})  "
              f"cpu {s['cpu_median_s']:6.3f} s  peak RSS {s['peak_rss_mib']:6.1f} MiB  "
              f"vs gitleaks {s['ratio_median']:.3f} ({s['ratio_min']:.3f}-{s['ratio_max']:.3f})  "
              f"findings {s['findings']}")
    print(json.dumps({"rounds": a.rounds, "load": [load_before[0], load_after[0]], "results": summary}))
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
