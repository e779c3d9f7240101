#!/bin/sh
# CPU of the rule engine on a source tree, built-in rules and gitleaks'
# config, in alternating rounds (benches/scan/alternate.py: user and
# user+sys CPU of each child, medians, ratios to the first binary).
#
# usage: rules_cpu.sh ROUNDS TREE GITLEAKS_CONFIG NAME=BIN...
#
# Each binary scans TREE as `.` (from inside it: gitleaks' global path
# allowlist holds `lib/python3.x/`, so an absolute path to a Python
# standard library would hide every finding) with 2 workers and jsonl
# output to /dev/null, once with the built-in rules (`NAME`) and once with
# `-c GITLEAKS_CONFIG` (`NAME-gl`). Ratios are to the first NAME's
# built-in run. Copy each binary first: a rebuild must not change it
# between rounds.
#
# Also writes the findings of each run (sorted jsonl lines) to
# $OUT/NAME.jsonl and $OUT/NAME-gl.jsonl (OUT defaults to a temp dir) so
# that runs can be compared for equal findings with cmp.
set -eu
rounds=$1 tree=$(cd "$2" && pwd) config=$(cd "$(dirname "$3")" && pwd)/$(basename "$3")
shift 3
out=${OUT:-$(mktemp -d)}
here=$(cd "$(dirname "$0")" && pwd)
base=

cmds=
for nb in "$@"; do
    name=${nb%%=*} bin=${nb#*=}
    [ -n "$base" ] || base=$name
    (cd "$tree" && "$bin" -j 2 --no-progress -f jsonl . 2>/dev/null | sort > "$out/$name.jsonl") || true
    (cd "$tree" && "$bin" -j 2 --no-progress -f jsonl -c "$config" . 2>/dev/null | sort > "$out/$name-gl.jsonl") || true
    cmds="$cmds $name=\"$bin -j 2 --no-progress -f jsonl -o /dev/null .\""
    cmds="$cmds $name-gl=\"$bin -j 2 --no-progress -f jsonl -o /dev/null -c $config .\""
done
echo "findings in $out:"
wc -l "$out"/*.jsonl
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
cd "$tree"
eval python3 "$here/alternate.py" "$rounds" "$base" $cmds
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
