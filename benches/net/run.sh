#!/usr/bin/env bash
# The network benchmarks: TCP echo and hyper HTTP/1.1 keep-alive, tokio
# against magpie (native, and the async-io stand-in),
# alternating round by round. See benches/net/README.md.
#
#   benches/net/run.sh                      # every group, 5 s per run, >= 5 rounds
#   benches/net/run.sh --secs 2 --only echo # a quicker look at the echo groups
#
# Arguments go to net_run (src/bin/net_run.rs). The table is printed and
# saved to $CARGO_TARGET_DIR/net-runs/<UTC time>.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
target="${CARGO_TARGET_DIR:-$PWD/target}"
features=()
if [[ "${MAGPIE_NATIVE_NET:-0}" == 1 ]]; then
    features=(--features native-net)
fi
cargo build --release -p magpie-benches "${features[@]}" \
    --bin net_server --bin net_load --bin net_run
mkdir -p "$target/net-runs"
out="$target/net-runs/$(date -u +%Y%m%dT%H%M%SZ).md"
{
    echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown); $(uname -srm)"
    echo
    "$target/release/net_run" "$@"
} | tee "$out"
echo "saved $out" >&2
