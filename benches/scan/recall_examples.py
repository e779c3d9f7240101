#!/usr/bin/env python3
"""Recall on the example tokens published in kingfisher's rule files.

usage: recall_examples.py KINGFISHER_CHECKOUT GITLEAKS_CONFIG [options]

  KINGFISHER_CHECKOUT  a checkout of mongodb/kingfisher (its data/rules/*.yml),
                       or a bare clone (data/rules is read from its HEAD)
  GITLEAKS_CONFIG      gitleaks' default config (scan/tests/data/gitleaks-default.toml)

options:
  --scan BIN           magpie's scan binary (default: target/release/scan under
                       $CARGO_TARGET_DIR or ./target)
  --gitleaks BIN       the gitleaks binary (default: `gitleaks` on PATH, if any)
  --kingfisher BIN     the kingfisher binary (default: `kingfisher` on PATH, if any)
  --tree DIR           write the example tree here and keep it (default: a temp dir)
  --json FILE          also write the per-example results as JSON
  --show-misses N      print up to N missed examples of magpie (default 0)

Every `examples:` entry of every rule in data/rules/*.yml becomes one file,
`<family>/<rule-id>.<n>.txt`, where the family is the rule file's name
(`github.yml` -> `github`). Nothing else is in the tree, so an example counts
as found by a tool when the tool reports at least one finding in its file.
The ground truth (family, rule id, example string, the rule's `visible`
flag) is kept outside the tree. Each tool scans the tree once:

  magpie                  scan --format json TREE (built-in rules)
  magpie+gitleaks-config  scan -c GITLEAKS_CONFIG --format json TREE
  gitleaks                gitleaks dir -c GITLEAKS_CONFIG -f json TREE
  kingfisher              kingfisher scan --no-validate --format json TREE

and the script prints found/total per tool: over all examples, over those
of rules kingfisher marks visible, and over the examples that are not
placeholder-shaped (`not-plh`: the longest token-like run of the example
passes magpie's placeholder test, so it has no `abcdef`/`123456` run and no
word such as `example`); then the number of families with at least one
example found, and the families magpie finds none of. The data is read from
the checkout at run time; none of it is copied into this repository.
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

try:
    import yaml
except ImportError:  # pragma: no cover
    sys.exit("recall_examples.py needs PyYAML (pip install pyyaml)")


def examples(checkout):
    """[(family, rule_id, index, text, visible)] from data/rules/*.yml."""
    out = []
    files = sorted(glob.glob(os.path.join(checkout, "data", "rules", "*.yml")))
    if not files:
        sys.exit(f"no data/rules/*.yml under {checkout}")
    for path in files:
        family = os.path.splitext(os.path.basename(path))[0]
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f) or {}
        for rule in doc.get("rules") or []:
            rid = str(rule.get("id", "rule"))
            visible = rule.get("visible", True) is not False
            for i, ex in enumerate(rule.get("examples") or []):
                if isinstance(ex, str) and ex.strip():
                    out.append((family, rid, i, ex, visible))
    return out


# magpie's placeholder test (scan/src/rules/filters.rs), applied to the
# longest token-like run of an example: a published example that fails it
# (`abcdef1234567890...`, `123456...`, `xxxx`) is one that magpie's rules
# reject on purpose. Reported as a separate column, never left out.
PLACEHOLDER_WORDS = ["example", "xxxx", "placeholder", "changeme", "change_me", "change-me",
                     "your_", "your-", "yourkey", "yourtoken", "yoursecret", "yourapi",
                     "yourpass", "dummy", "redacted", "replace", "insert", "sample", "fake",
                     "notreal", "not_real", "not-real", "****", "..."]


def placeholder_shaped(example):
    runs = re.findall(r"[A-Za-z0-9+/=_.~-]{12,}", example)
    if not runs:
        return False
    s = max(runs, key=len)
    low = s.lower()
    if any(w in low for w in PLACEHOLDER_WORDS):
        return True
    same = up = down = best = 1
    for a, b in zip(s, s[1:]):
        same = same + 1 if a == b else 1
        aln = a.isascii() and b.isascii() and a.isalnum() and b.isalnum()
        up = up + 1 if aln and ord(b) == ord(a) + 1 else 1
        down = down + 1 if aln and ord(a) == ord(b) + 1 else 1
        best = max(best, same, up, down)
    return best >= 6


def safe(name):
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def write_tree(root, exs):
    truth = {}
    for family, rid, i, text, visible in exs:
        rel = f"{safe(family)}/{safe(rid)}.{i}.txt"
        full = os.path.join(root, rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8", newline="") as f:
            f.write(text if text.endswith("\n") else text + "\n")
        truth[rel] = {"family": family, "rule": rid, "example": text, "visible": visible,
                      "placeholder": placeholder_shaped(text)}
    return truth


def norm(path, root):
    p = path.replace("\\", "/")
    for prefix in (os.path.realpath(root) + "/", os.path.abspath(root) + "/", "./"):
        if p.startswith(prefix):
            p = p[len(prefix):]
    return p


def run(cmd, cwd=None):
    r = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode not in (0, 1, 200, 205):
        err = r.stderr.decode("utf-8", "replace")[-2000:]
        print(f"warning: {' '.join(cmd)} exited {r.returncode}: {err}", file=sys.stderr)
    return r


def paths_magpie(report, root):
    with open(report, encoding="utf-8", errors="surrogateescape") as f:
        data = json.load(f)
    # An example found only inside an archive member is still its file's.
    return {norm(x["path"], root).split("!")[0] for x in data["findings"]}


def paths_gitleaks(report, root):
    with open(report, encoding="utf-8") as f:
        data = json.load(f) or []
    return {norm(x["File"], root) for x in data}


def paths_kingfisher(report, root, truth):
    """Kingfisher's JSON layout changes between versions: take every string
    that names a file of the tree, wherever it sits."""
    with open(report, encoding="utf-8", errors="replace") as f:
        text = f.read()
    found = set()

    def walk(v):
        if isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
        elif isinstance(v, str) and v.endswith(".txt"):
            p = norm(v, root)
            if p in truth:
                found.add(p)

    try:
        walk(json.loads(text))
    except json.JSONDecodeError:  # jsonl
        for line in text.splitlines():
            if line.strip():
                walk(json.loads(line))
    return found


def default_scan():
    tgt = os.environ.get("CARGO_TARGET_DIR", "target")
    return os.path.join(tgt, "release", "scan")


def main():
    args = sys.argv[1:]
    opts = {"--scan": None, "--gitleaks": shutil.which("gitleaks"),
            "--kingfisher": shutil.which("kingfisher"), "--tree": None,
            "--json": None, "--show-misses": "0"}
    pos = []
    while args:
        a = args.pop(0)
        if a in opts:
            if not args:
                sys.exit(f"{a} needs a value")
            opts[a] = args.pop(0)
        elif a.startswith("-"):
            sys.exit(__doc__)
        else:
            pos.append(a)
    if len(pos) != 2:
        sys.exit(__doc__)
    checkout, gl_config = pos
    scan = opts["--scan"] or default_scan()
    if not os.path.exists(scan):
        sys.exit(f"no scan binary at {scan} (cargo build --release -p scan, or --scan BIN)")

    rev = subprocess.run(["git", "-C", checkout, "rev-parse", "HEAD"], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL).stdout.decode().strip() or "unknown"
    if not os.path.isdir(os.path.join(checkout, "data", "rules")) and rev != "unknown":
        # A bare clone: export data/rules of HEAD.
        export = tempfile.mkdtemp(prefix="kingfisher-rules-")
        arch = subprocess.run(["git", "-C", checkout, "archive", "HEAD", "data/rules"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=True).stdout
        subprocess.run(["tar", "x", "-C", export], input=arch, check=True)
        checkout = export
    exs = examples(checkout)
    if checkout.startswith(tempfile.gettempdir()) and "kingfisher-rules-" in checkout:
        shutil.rmtree(checkout)
    keep = opts["--tree"] is not None
    root = opts["--tree"] or tempfile.mkdtemp(prefix="recall-examples-")
    if keep and os.path.exists(root):
        shutil.rmtree(root)
    os.makedirs(root, exist_ok=True)
    work = tempfile.mkdtemp(prefix="recall-reports-")
    truth = write_tree(root, exs)

    found = {}
    rep = os.path.join(work, "magpie.json")
    run([scan, "--format", "json", "-o", rep, "."], cwd=root)
    found["magpie"] = paths_magpie(rep, root)
    rep = os.path.join(work, "magpie-gl.json")
    run([scan, "-c", os.path.abspath(gl_config), "--format", "json", "-o", rep, "."], cwd=root)
    found["magpie+gitleaks-config"] = paths_magpie(rep, root)
    if opts["--gitleaks"]:
        rep = os.path.join(work, "gitleaks.json")
        run([opts["--gitleaks"], "dir", "-c", os.path.abspath(gl_config), "--no-banner",
             "--exit-code", "0", "-f", "json", "-r", rep, "."], cwd=root)
        found["gitleaks"] = paths_gitleaks(rep, root)
    if opts["--kingfisher"]:
        rep = os.path.join(work, "kingfisher.json")
        run([opts["--kingfisher"], "scan", "--no-validate", "--format", "json",
             "--output", rep, "."], cwd=root)
        found["kingfisher"] = paths_kingfisher(rep, root, truth)

    families = sorted({t["family"] for t in truth.values()})
    visible = [p for p, t in truth.items() if t["visible"]]
    real = [p for p, t in truth.items() if not t["placeholder"]]
    print(f"kingfisher {rev}: {len(truth)} examples ({len(visible)} of visible rules, "
          f"{len(real)} not placeholder-shaped), {len(families)} families")
    print(f"{'tool':<24} {'found':>6} {'total':>6} {'recall':>7} {'visible':>8} "
          f"{'not-plh':>8} {'families':>9}")
    for tool, fs in found.items():
        fs = fs & truth.keys()
        vis = sum(1 for p in visible if p in fs)
        rl = sum(1 for p in real if p in fs)
        fams = {truth[p]["family"] for p in fs}
        print(f"{tool:<24} {len(fs):>6} {len(truth):>6} {len(fs) / len(truth):>7.3f} "
              f"{vis / len(visible):>8.3f} {rl / len(real):>8.3f} {len(fams):>5}/{len(families)}")
    got = found["magpie"]
    missed = sorted({t["family"] for t in truth.values()} - {truth[p]["family"] for p in got})
    print(f"families magpie finds no example of ({len(missed)}):")
    print(" ".join(missed))
    n = int(opts["--show-misses"])
    if n:
        shown = 0
        for p in sorted(truth):
            if p not in got and shown < n:
                print(f"missed {p}: {truth[p]['example'][:160]!r}")
                shown += 1
    if opts["--json"]:
        with open(opts["--json"], "w", encoding="utf-8") as f:
            json.dump({"kingfisher_commit": rev,
                       "examples": [dict(t, path=p, found={k: p in v for k, v in found.items()})
                                    for p, t in sorted(truth.items())]}, f, indent=1)
    shutil.rmtree(work)
    if not keep:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
