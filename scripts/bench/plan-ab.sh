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
commands=()
for binary in "$@"; do commands+=("$binary plan $work/session.jsonl"); done
python3 scripts/bench/plan/rounds.py "$rounds" "${commands[@]}" | paste -d' ' <(printf '%s\n' "$@") - \
  | awk '{printf "%s: best %.1f ms, median %.1f ms\n", $1, 1000 * $2, 1000 * $3}'
