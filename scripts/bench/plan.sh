#!/usr/bin/env bash
# Planning against the node floor (issue 26): `compactd plan` on a generated ~21 MB v3 session,
# whole process, against node's bare `JSON.parse` of every line of the same file (what any
# JavaScript agent pays just to read it), in interleaved rounds (ROUNDS, 11 by default): the best
# and the median of each. Node is the pinned node 22 of scripts/agents.sh
# (target/agents/bin/node22), or NODE=/path/to/node.
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
# Interleaved rounds, node then compactd, so that both see the same moments of a machine whose
# speed drifts (a VM's first touch of memory is slow at some moments and not at others).
rounds=${ROUNDS:-11}
{ read -r node_best node_median; read -r plan_best plan_median; } < <(
  python3 scripts/bench/plan/rounds.py "$rounds" \
    "$node scripts/bench/plan/node-parse.js $work/session.jsonl" \
    "./target/release/compactd plan $work/session.jsonl")
awk -v nb="$node_best" -v nm="$node_median" -v pb="$plan_best" -v pm="$plan_median" -v b="$bytes" -v r="$rounds" 'BEGIN {
  printf "session: %d bytes, %d interleaved rounds (best, median)\n", b, r
  printf "node JSON.parse of every line (whole process): %.3f s, %.3f s (%.0f MB/s best)\n", nb, nm, b / nb / 1e6
  printf "compactd plan (whole process):                 %.3f s, %.3f s (%.0f MB/s best)\n", pb, pm, b / pb / 1e6
  printf "compactd plan is x%.2f the node floor (best against best), x%.2f (median against median)\n", nb / pb, nm / pm
}'
