#!/usr/bin/env python3
"""Plots the alternating-run results the benches write to
target/bench-results/*.csv into docs/img/*.png (the figures of
docs/benchmarks.md).

    cargo bench -p magpie-benches --bench typed      # writes typed.csv
    cargo bench -p magpie-benches --bench async_rt   # writes async_rt.csv
    python3 benches/plot.py

Each figure shows, per workload, every peer's median time divided by the
reference peer's (the seed-000 crossbeam design, cb_seed000, for typed;
tokio for async), with the
issue's target drawn as a dashed line. Lower is better.
"""

import csv
import os
import sys
from collections import OrderedDict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
RESULTS = os.path.join(ROOT, "target", "bench-results")
OUT = os.path.join(ROOT, "docs", "img")

# (csv, title, reference peer, {group: target ratio})
FIGURES = [
    (
        "typed.csv",
        "Typed executor, 2 workers: time / the seed-000 crossbeam design (lower is better)",
        "cb_seed000",
        {"tree_d20_empty": 0.33, "inject_1m_batch1024": 0.5},
    ),
    (
        "async_rt.csv",
        "Async runtime, 2 workers: time / tokio (lower is better)",
        "tokio",
        {
            g: 0.7
            for g in [
                "spawn_many_local",
                "spawn_many_remote_idle",
                "spawn_many_remote_busy1",
                "ping_pong",
                "yield_many",
                "chained_spawn",
                "skynet",
            ]
        },
    ),
]


def read(path):
    groups = OrderedDict()
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row["ratio"]:
                groups.setdefault(row["group"], OrderedDict())[row["peer"]] = float(row["ratio"])
    return groups


def plot(name, title, ref, targets):
    path = os.path.join(RESULTS, name)
    if not os.path.exists(path):
        print(f"skipping {name}: run its bench first", file=sys.stderr)
        return
    groups = read(path)
    peers = []
    for g in groups.values():
        for p in g:
            if p != ref and p not in peers:
                peers.append(p)
    fig, ax = plt.subplots(figsize=(10, 4.5))
    width = 0.8 / max(1, len(peers))
    for i, p in enumerate(peers):
        xs = [j + i * width for j in range(len(groups))]
        ys = [g.get(p, 0.0) for g in groups.values()]
        ax.bar(xs, ys, width, label=p)
        for x, y in zip(xs, ys):
            if y:
                ax.text(x, y, f"{y:.2f}", ha="center", va="bottom", fontsize=7)
    for j, g in enumerate(groups):
        if g in targets:
            x0 = j - width / 2
            x1 = j + (len(peers) - 0.5) * width
            ax.hlines(targets[g], x0, x1, colors="black", linestyles="dashed", linewidth=1)
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_xticks([j + (len(peers) - 1) * width / 2 for j in range(len(groups))])
    ax.set_xticklabels(list(groups), rotation=15, fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel(f"median time / {ref} (log)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, ncol=3)
    fig.tight_layout()
    os.makedirs(OUT, exist_ok=True)
    out = os.path.join(OUT, name.replace(".csv", ".png"))
    fig.savefig(out, dpi=110)
    print(f"wrote {os.path.relpath(out, ROOT)}")


for fig in FIGURES:
    plot(*fig)
