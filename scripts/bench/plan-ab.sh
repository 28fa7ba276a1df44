#!/usr/bin/env bash
# Two or more compactd binaries planning the same generated session, in interleaved rounds (issue
# 26): on a VM whose speed drifts by a third within minutes, only binaries run turn about are
# compared. Prints each binary's best and median wall time of `compactd plan`, whole process.
#   scripts/bench/plan-ab.sh ROUNDS BINARY… [MEGABYTES=21]
# Old binaries: see scripts/bench/ab.sh. For instructions, which do not drift, use callgrind:
#   valgrind --tool=callgrind BINARY plan SESSION > /dev/null
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:?rounds}
shift
[ $# -gt 0 ] || { echo "usage: $0 ROUNDS BINARY…" >&2; exit 1; }
cargo build --release --quiet --example make_session
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
./target/release/examples/make_session "$work/session.jsonl" "${MEGABYTES:-21}"
for _ in $(seq "$rounds"); do
  for i in $(seq $#); do
    binary=${!i}
    start=$(date +%s%N)
    "$binary" plan "$work/session.jsonl" > /dev/null
    end=$(date +%s%N)
    echo $(( (end - start) / 1000 )) >> "$work/$i.us"
  done
done
for i in $(seq $#); do
  sort -n "$work/$i.us" | awk -v name="${!i}" \
    '{t[NR] = $1} END {printf "%s: best %.1f ms, median %.1f ms\n", name, t[1] / 1000, t[int((NR + 1) / 2)] / 1000}'
done
