#!/usr/bin/env python3
"""Recall of a scanner's report against a planted corpus's ground-truth.json.

usage: recall.py CORPUS_DIR REPORT --tool magpie|kingfisher [--strict]

A planted secret counts as found when the report has a finding in the same
file (archive members joined with '!') whose secret equals the planted one
(kingfisher: whose snippet contains it) on the planted line. magpie's own
report must also have the planted column and byte offset (checked with
--strict). A decoy counts as reported when any finding sits on its line.
Prints found/planted, recall, decoys reported and findings outside the
ground truth, as JSON on the last line.
"""
import json
import os
import sys


def norm(path, root):
    """Path relative to the corpus root, '/'-separated, no leading './'."""
    p = path.replace("\\", "/")
    for prefix in (os.path.abspath(root) + "/", root.rstrip("/") + "/", "./"):
        if p.startswith(prefix):
            p = p[len(prefix):]
    return p


def load_magpie(report, root):
    text = open(report, encoding="utf-8", errors="surrogateescape").read()
    out = []
    if text.lstrip().startswith("{\"findings\""):
        items = json.loads(text)["findings"]
    else:
        items = [json.loads(line) for line in text.splitlines() if line.strip()]
    for f in items:
        out.append({
            "path": norm(f["path"], root),
            "line": f["line"],
            "column": f["column"],
            "offset": f["offset"],
            "rule": f["rule"],
            "secret": f["secret"],
        })
    return out


def load_kingfisher(report, root):
    """Kingfisher 2.x JSON: a list of findings (or {"findings": [...]}) whose
    'finding' holds path, line, snippet/fingerprint. Archive members are
    reported as extracted temp paths; we keep what follows the archive name."""
    data = json.load(open(report))
    if isinstance(data, dict):
        data = data.get("findings", data.get("matches", []))
    out = []
    for item in data:
        f = item.get("finding", item)
        path = f.get("path") or f.get("file") or ""
        line = f.get("line") or f.get("line_num") or 0
        snippet = f.get("snippet") or f.get("match") or ""
        out.append({
            "path": norm(path, root),
            "line": int(line),
            "column": None,
            "offset": None,
            "rule": (item.get("rule") or {}).get("id", "") if isinstance(item.get("rule"), dict) else "",
            "secret": snippet,
        })
    return out


def main():
    args = sys.argv[1:]
    if len(args) < 4 or args[2] != "--tool":
        sys.exit(__doc__)
    root, report, tool = args[0], args[1], args[3]
    strict = "--strict" in args
    truth = json.load(open(os.path.join(root, "ground-truth.json")))
    found = load_magpie(report, root) if tool == "magpie" else load_kingfisher(report, root)
    # The ground truth itself lists every secret: not part of the corpus.
    found = [f for f in found if f["path"] != "ground-truth.json"]
    by_line = {}
    for f in found:
        by_line.setdefault((f["path"], f["line"]), []).append(f)
    hit = 0
    missed = []
    matched = set()
    for s in truth["secrets"]:
        cands = by_line.get((s["path"], s["line"]), [])
        ok = None
        for i, f in enumerate(cands):
            if tool == "magpie":
                good = f["secret"] == s["secret"]
                if strict:
                    good = good and f["column"] == s["column"] and f["offset"] == s["offset"]
            else:
                good = s["secret"] in f["secret"] or f["secret"] in s["secret"] and len(f["secret"]) >= 8
            if good:
                ok = (s["path"], s["line"], i)
                break
        if ok:
            hit += 1
            matched.add(ok)
        else:
            missed.append(s)
    decoy_lines = {(d["path"], d["line"]) for d in truth["decoys"]}
    decoys_hit = sum(1 for k in decoy_lines if k in by_line)
    extra = sum(len(v) for v in by_line.values()) - len(matched)
    total = len(truth["secrets"])
    for m in missed[:20]:
        print("missed", m["path"], m["line"], m["rule"], m["placement"], file=sys.stderr)
    print(json.dumps({
        "tool": tool,
        "planted": total,
        "found": hit,
        "recall": round(hit / total, 4) if total else 1.0,
        "decoys_reported": decoys_hit,
        "other_findings": extra,
    }))


if __name__ == "__main__":
    main()
