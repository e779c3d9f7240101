#!/usr/bin/env python3
"""Runs commands in alternating rounds and reports, per command, the median
wall time, CPU time (user+sys, and user alone) and peak RSS of the child, with ratios to a baseline.

usage: alternate.py ROUNDS BASELINE NAME=COMMAND...

Each round runs every command once (the order reverses every other round, so
neither side always runs right after the other). The CPU time and peak RSS
are the kernel's figures for that one child (os.wait4), not the process's
own report. Output is discarded. Prints a table, then the results as JSON on
the last line.
"""
import json
import os
import shlex
import statistics
import subprocess
import sys
import time


def run_once(argv):
    start = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - start
    p.returncode = os.waitstatus_to_exitcode(status)
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024, p.returncode, ru.ru_utime


def main():
    rounds, base = int(sys.argv[1]), sys.argv[2]
    cmds = dict(a.split("=", 1) for a in sys.argv[3:])
    res = {k: {"wall": [], "cpu": [], "user": [], "rss": [], "codes": set()} for k in cmds}
    names = list(cmds)
    for r in range(rounds):
        for k in names if r % 2 == 0 else names[::-1]:
            wall, cpu, rss, code, user = run_once(shlex.split(cmds[k]))
            res[k]["user"].append(user)
            res[k]["wall"].append(wall)
            res[k]["cpu"].append(cpu)
            res[k]["rss"].append(rss)
            res[k]["codes"].add(code)
    out = {}
    bw = statistics.median(res[base]["wall"])
    bc = statistics.median(res[base]["cpu"])
    bu = statistics.median(res[base]["user"])
    for k in names:
        w, c = statistics.median(res[k]["wall"]), statistics.median(res[k]["cpu"])
        rss = max(res[k]["rss"])
        u = statistics.median(res[k]["user"])
        out[k] = {"wall_median_s": w, "wall_min_s": min(res[k]["wall"]), "cpu_median_s": c,
                  "peak_rss_bytes": rss, "wall_vs_base": w / bw, "cpu_vs_base": c / bc,
                  "user_median_s": u, "user_all_s": res[k]["user"], "user_vs_base": u / bu,
                  "exit_codes": sorted(res[k]["codes"])}
        print(f"{k:16} wall median {w:7.3f} s (min {min(res[k]['wall']):.3f})  "
              f"cpu median {c:7.3f} s  user median {u:7.3f} s (min {min(res[k]['user']):.3f} max {max(res[k]['user']):.3f}, {u / bu:5.2f}x)  peak RSS {rss / 2**20:7.1f} MiB  "
              f"wall {w / bw:5.2f}x {base}  cpu {c / bc:5.2f}x {base}  exit {sorted(res[k]['codes'])}")
    print(json.dumps({"rounds": rounds, "baseline": base, "results": out}))


if __name__ == "__main__":
    main()
