#!/usr/bin/env bash
# Planning against the node floor (issue 26): `compactd plan` on a generated ~21 MB v3 session,
# whole process, against node's bare `JSON.parse` of every line of the same file (what any
# JavaScript agent pays just to read it), best of five each. Node is the pinned node 22 of
# scripts/agents.sh (target/agents/bin/node22), or NODE=/path/to/node.
#   scripts/bench/plan.sh [megabytes]
set -euo pipefail
cd "$(dirname "$0")/../.."
megabytes=${1:-21}
node=${NODE:-target/agents/bin/node22}
[ -x "$node" ] || { echo "no node at $node: scripts/agents.sh install, or NODE=…" >&2; exit 1; }
cargo build --release --quiet --bin compactd --example make_session
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
./target/release/examples/make_session "$work/session.jsonl" "$megabytes"
bytes=$(wc -c < "$work/session.jsonl")
best() { # command…: the fastest of five runs, in seconds
  local fastest=""
  for _ in 1 2 3 4 5; do
    local start end
    start=$(date +%s.%N); "$@" > /dev/null; end=$(date +%s.%N)
    fastest=$(awk -v a="$fastest" -v b="$(echo "$end - $start" | bc)" 'BEGIN {print (a == "" || b < a) ? b : a}')
  done
  echo "$fastest"
}
node_s=$(best "$node" scripts/bench/plan/node-parse.js "$work/session.jsonl")
plan_s=$(best ./target/release/compactd plan "$work/session.jsonl")
awk -v n="$node_s" -v p="$plan_s" -v b="$bytes" 'BEGIN {
  printf "session: %d bytes\n", b
  printf "node JSON.parse of every line (whole process): %.3f s, %.0f MB/s\n", n, b / n / 1e6
  printf "compactd plan (whole process):                 %.3f s, %.0f MB/s\n", p, b / p / 1e6
  printf "compactd plan is x%.2f the node floor\n", n / p
}'
