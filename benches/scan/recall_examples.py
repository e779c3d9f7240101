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
of rules kingfisher marks visible, over the examples that are not
placeholder-shaped (`not-plh`: the example's value, its longest token-like
run with a digit, passes magpie's placeholder test, so it has no
`abcdef`/`123456` run and no word such as `example`, and is not a typed
walk such as `a1b2c3d4…` or `abcd1234efgh5678…`, see `walk_shaped`), and
over the `honest` set; then the number of
families with at least one example found, and the families magpie finds
none of.

The `honest` set leaves out the examples that no scanner should report:
those of rules kingfisher itself marks invisible (account ids, host names,
user names: kingfisher uses them only to validate another rule's secret),
the placeholder-shaped ones, and those whose token is a published
documentation value (`DOC_VALUES`: the example UUID of RFC 4122, in any
of its edited forms `123e4567-e89b-12d3-a456-426614174xyz`). Every
column is printed; none replaces another. The data is read from
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


def value_run(example, chars=r"[A-Za-z0-9+/=_.~-]"):
    """The longest token-like run of 12+ characters that holds a digit (a
    value rather than a key name such as `eagleeyenetworks`), else the
    longest run; None if there is none."""
    runs = re.findall(chars + "{12,}", example)
    if not runs:
        return None
    with_digit = [r for r in runs if any(c.isdigit() for c in r)]
    return max(with_digit or runs, key=len)


def placeholder_shaped(example):
    s = value_run(example)
    if s is None:
        return False
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


# Published example values: the UUID of RFC 4122's (and Wikipedia's)
# example, with the last three digits edited or not.
DOC_VALUES = [re.compile(r"123e4567-?e89b-?12d3-?a456-?426614174", re.I)]


def doc_value(example):
    return any(r.search(example) for r in DOC_VALUES)


def _steps_near(chars):
    """Share of neighbouring characters that are equal or one apart."""
    pairs = list(zip(chars, chars[1:]))
    return sum(1 for a, b in pairs if abs(ord(a) - ord(b)) <= 1) / len(pairs) if pairs else 0.0


def walk_shaped(example):
    """A typed pattern rather than a random value, in the longest token run:
    the alphabet and the digits walked in step (`a1b2c3d4…`,
    `abcd1234efgh5678…`, `xyz987uvw654…`), letters walked alone
    (`aaaabbbbcccc…`), or one short unit repeated (`xyzxyzxyz…`,
    `ABCDE12-ABCDE12-…`). Random tokens almost never have most of their
    neighbouring letters one apart (about 3 in 26 pairs do)."""
    # Key and value split at `=` and `:`, so `NAME_KEY=a1b2c3…` is judged
    # by its value.
    s = value_run(example, r"[A-Za-z0-9+/_.~-]")
    if s is None:
        return False
    letters = [c for c in s.lower() if c.isalpha()]
    digits = [c for c in s if c.isdigit()]
    # Hex letters (a-f) are one apart by chance in 16 of 36 pairs: ask more.
    hexonly = set(letters) <= set("abcdef")
    if len(letters) >= 8 and _steps_near(letters) >= (0.9 if hexonly else 0.8):
        return True
    if len(letters) >= 6 and len(digits) >= 4 and _steps_near(digits) >= 0.6 \
            and _steps_near(letters) >= (0.9 if hexonly else 0.6):
        return True
    # One unit of 2 to 8 characters repeated over most of the run.
    return any(len(m.group(0)) >= 0.6 * len(s) for m in re.finditer(r"(.{2,8}?)\1{2,}", s))


# Examples judged by hand (kingfisher ee7c0db) not to be credentials a
# scanner should report, with the reason. Keyed by the tree path without
# `.txt`. Each is counted in its own column and left out of `honest`; a
# reviewer who disagrees can delete a line.
NOT_CREDENTIALS = {
    "age/kingfisher.age.1.0": "an age public key (a recipient, published by design)",
    "azuresearchquery/kingfisher.azuresearch.url.1.0": "a service URL with no secret in it",
    "gcp/kingfisher.gcp.1.0": "random text in auth_provider_x509_cert_url, a public certificate URL field",
    "generic/kingfisher.generic.5.2": "code that concatenates variables",
    "linkedin/kingfisher.linkedin.1.0": "prose: a form's field labels",
    "mapbox/kingfisher.mapbox.1.0": "a Mapbox public (pk.) token, made to be sent to browsers",
    "squareup/kingfisher.squareup.1.0": "a Square application id (public)",
    "squareup/kingfisher.squareup.1.1": "a Square application id (public)",
    "twitter/kingfisher.twitter.1.0": "an account id",
    "ftp/kingfisher.ftp.1.2": "an anonymous FTP login",
    **{f"generic/kingfisher.weak_password.1.{i}": "a bare word: nothing marks it as a password"
       for i in range(5)},
    **{f"react/kingfisher.reactapp.1.{i}": "a user name" for i in range(6)},
    # Published documentation values.
    **{f"generic/kingfisher.generic.{i}": "RFC 7617's example credentials (Aladdin, open sesame)"
       for i in ("3.4", "4.0", "4.1", "8.4")},
    "snowflake/kingfisher.snowflake.3.0": "P@ssw0rd123, the stock example password",
    "mongodb/kingfisher.mongodb.3.2": "contoso, Microsoft's documentation name, as the password",
    # Placeholder words and template expressions as the value.
    "generic/kingfisher.generic.4.2": "placeholder password ######",
    **{f"gradle/kingfisher.gradle.1.{i}": "placeholder password (password, SOME_PASSWORD)" for i in range(4)},
    **{f"odbc/kingfisher.odbc.1.{i}": "placeholder password (secret, myPassword)" for i in range(2, 7)},
    "odbc/kingfisher.odbc.1.8": "a template expression as the password",
    "psexec/kingfisher.psexec.1.2": "a variable ($Password) as the password",
    "psexec/kingfisher.psexec.1.3": "a variable (%nothing%) as the password",
    "psexec/kingfisher.psexec.1.4": "placeholder password PASSWORD",
    "react/kingfisher.reactapp.2.5": "placeholder password smtp_password",
    "ftp/kingfisher.ftp.1.1": "placeholder password secret",
    "travisci/kingfisher.travisci.1.0": "placeholder value (RANDOMCONTENT)",
    "telegrambottoken/kingfisher.telegram.1.0": "placeholder bot id 1234567890",
    "telegrambottoken/kingfisher.telegram.1.1": "placeholder bot id 12345678",
    "recaptcha/kingfisher.recaptcha.1.0": "a drawn pattern of w and - as the key",
    "recaptcha/kingfisher.recaptcha.1.1": "a drawn pattern of w and - as the key",
    "netrc/kingfisher.netrc.1.0": "placeholder password 012345abcdef",
}


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
                      "placeholder": placeholder_shaped(text) or walk_shaped(text),
                      "doc_value": doc_value(text),
                      "not_credential": NOT_CREDENTIALS.get(rel[:-4])}
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
    honest = [p for p, t in truth.items()
              if t["visible"] and not t["placeholder"] and not t["doc_value"]
              and not t["not_credential"]]
    print(f"kingfisher {rev}: {len(truth)} examples ({len(visible)} of visible rules, "
          f"{len(real)} not placeholder-shaped, {len(honest)} honest), {len(families)} families")
    print(f"{'tool':<24} {'found':>6} {'total':>6} {'recall':>7} {'visible':>8} "
          f"{'not-plh':>8} {'honest':>8} {'families':>9}")
    for tool, fs in found.items():
        fs = fs & truth.keys()
        vis = sum(1 for p in visible if p in fs)
        rl = sum(1 for p in real if p in fs)
        hn = sum(1 for p in honest if p in fs)
        fams = {truth[p]["family"] for p in fs}
        print(f"{tool:<24} {len(fs):>6} {len(truth):>6} {len(fs) / len(truth):>7.3f} "
              f"{vis / len(visible):>8.3f} {rl / len(real):>8.3f} {hn / len(honest):>8.3f} "
              f"{len(fams):>5}/{len(families)}")
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
