#!/usr/bin/env bash
# The scanner benchmark (docs/parts/bench-scan.md): magpie's scan against
# kingfisher and ripgrep on a real source tree, warm cache, 2 workers/jobs.
#
# usage: benches/scan/bench.sh [TREE] [RUNS]
#   TREE  default: this machine's Python standard library
#   RUNS  hyperfine runs per command (default 5)
#   ROUNDS (env) alternating rounds of magpie/kingfisher/ripgrep (default 7)
#
# Needs: target/release/scan and scan-plant (cargo build --release -p scan -p scan-plant),
# hyperfine, rg, python3, and kingfisher at $KINGFISHER (default
# /work/peers/kingfisher/bin/kingfisher; `pip download --no-deps
# kingfisher-bin` and unzip the wheel to get it).
set -euo pipefail

cd "$(dirname "$0")/../.."
TREE=${1:-$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')}
RUNS=${2:-5}
ROUNDS=${ROUNDS:-7}
SCAN=${CARGO_TARGET_DIR:-$PWD/target}/release/scan
PLANT=${CARGO_TARGET_DIR:-$PWD/target}/release/scan-plant
KF=${KINGFISHER:-/work/peers/kingfisher/bin/kingfisher}
OUT=${OUT:-$PWD/target/bench-scan}
mkdir -p "$OUT"

echo "== machine"
echo "cores: $(nproc)"
uptime
echo "tree: $TREE ($(du -sh "$TREE" | cut -f1), $(find "$TREE" -type f | wc -l) files)"

# ripgrep searches the rules' keywords (the literals our prefilter looks
# for), case-insensitively, as fixed strings: the prefilter stage alone.
"$PLANT" --list-rules | awk -F'|' 'NR > 2 { print $5 }' | grep -o '`[^`]*`' | tr -d '`' | sort -u > "$OUT/keywords.txt"
echo "keywords: $(wc -l < "$OUT/keywords.txt")"

echo "== warming the page cache"
find "$TREE" -type f -print0 | xargs -0 cat > /dev/null

MAGPIE="$SCAN --workers 2 --no-progress --format json -o /dev/null $TREE"
KFCMD="$KF scan --no-validate --no-update-check -j 2 $TREE --format json -o /dev/null"
RG="rg -j 2 --hidden -uuu -i -F -f $OUT/keywords.txt -c $TREE"

echo "== wall time, CPU and peak RSS, alternating rounds (benches/scan/alternate.py)"
# The headline numbers: each round runs every command once, CPU and peak RSS
# are the kernel's per-child figures (wait4).
uptime
python3 benches/scan/alternate.py "$ROUNDS" kingfisher \
  "magpie=$MAGPIE" "kingfisher=$KFCMD" "ripgrep=$RG" | tee "$OUT/alternate.txt"
uptime

echo "== wall time per command (hyperfine; the prefilter engines too)"
hyperfine -N --warmup 1 --runs "$RUNS" -i --export-json "$OUT/hyperfine.json" \
  -n magpie "$MAGPIE" \
  -n magpie-ac-dfa "$MAGPIE --prefilter dfa" \
  -n magpie-ac-teddy "$MAGPIE --prefilter teddy" \
  -n kingfisher "$KFCMD" \
  -n ripgrep "$RG"
uptime

echo "== start-up on an empty directory"
EMPTY=$(mktemp -d)
hyperfine -N --warmup 5 --runs 30 -i --export-json "$OUT/startup.json" \
  -n magpie "$SCAN --workers 2 --no-progress $EMPTY" \
  -n kingfisher "$KF scan --no-validate --no-update-check -j 2 $EMPTY --format json -o /dev/null" \
  -n ripgrep "rg -j 2 -i -F -f $OUT/keywords.txt -c $EMPTY"
rmdir "$EMPTY"

echo "== medians and ratios (hyperfine)"
python3 - "$OUT/hyperfine.json" "$OUT/startup.json" <<'PY'
import json, sys
for path in sys.argv[1:]:
    res = {r["command"]: r for r in json.load(open(path))["results"]}
    base = res.get("kingfisher")
    for name, r in res.items():
        ratio = f"{r['median'] / base['median']:.3f}x kingfisher" if base else ""
        print(f"{path.split('/')[-1]:16} {name:16} median {r['median']*1000:9.1f} ms  "
              f"(min {r['min']*1000:.1f}, max {r['max']*1000:.1f})  {ratio}")
PY

echo "== recall on the planted corpus (benches/scan/recall.py)"
CORPUS=$OUT/corpus
rm -rf "$CORPUS" "$OUT/corpus-truth"
"$PLANT" "$CORPUS" --seed 7 > /dev/null
# kingfisher reports a secret once per run: keep the ground truth (which
# lists every secret) out of the scanned tree so it cannot absorb them.
mkdir -p "$OUT/corpus-truth"
mv "$CORPUS/ground-truth.json" "$OUT/corpus-truth/"
(cd "$CORPUS" && "$SCAN" --no-progress --format jsonl -o "$OUT/magpie-corpus.jsonl" . || true)
(cd "$CORPUS" && "$KF" scan --no-validate --no-update-check -j 2 . --format json -o "$OUT/kingfisher-corpus.json" > /dev/null 2>&1 || true)
ln -sf "$OUT/corpus-truth/ground-truth.json" "$CORPUS/ground-truth.json"
python3 benches/scan/recall.py "$CORPUS" "$OUT/magpie-corpus.jsonl" --tool magpie --strict 2>/dev/null
python3 benches/scan/recall.py "$CORPUS" "$OUT/kingfisher-corpus.json" --tool kingfisher 2>/dev/null
uptime
