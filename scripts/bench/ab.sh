#!/usr/bin/env bash
# Two compactd binaries on the miss path, interleaved (issue 26): on a VM whose throughput swings
# ±20–50 % between back-to-back runs, A-then-B rounds and compactd's own CPU time per request
# (utime + stime from /proc, divided by the requests wrk counted) tell two builds apart where one
# run of each cannot. Each round starts each binary on a fresh data directory, warms it for 1 s,
# then sends DURATION of misses (scripts/bench/vary.lua: every body different, every default
# stage on) through wrk, 2 threads, 32 connections, to the instant fake upstream of service.sh.
#   scripts/bench/ab.sh OLD_BINARY NEW_BINARY [rounds] [duration] [NAME=value…]
# Recall's conversations kept are counted in the database afterwards (with the sqlite3 shell).
# The NAME=value settings go to both servers (COMPACTD_RECALL_RETENTION=0 COMPACTD_CACHE_BYTES=0:
# the request path without recall and the cache's writes). To get an old binary:
#   git worktree add /tmp/old <rev> && (cd /tmp/old && CARGO_TARGET_DIR=$PWD/../main/target \
#     cargo build --release --bin compactd) && cp target/release/compactd /tmp/compactd-old
set -euo pipefail
cd "$(dirname "$0")/../.."
old=${1:?old binary}
new=${2:?new binary}
rounds=${3:-3}
duration=${4:-8s}
shift $(( $# < 4 ? $# : 4 ))
command -v wrk >/dev/null || { echo "wrk is needed: apt-get install wrk" >&2; exit 1; }
cargo build --release --quiet --example bench_upstream

work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
python3 scripts/bench/service/bodies.py "$work"
SUMMARY_FILE="$work/summary.md" ./target/release/examples/bench_upstream 127.0.0.1:9001 &
until curl -s -o /dev/null http://127.0.0.1:9001/; do sleep 0.1; done
tick=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }

for round in $(seq "$rounds"); do
  for side in old new; do
    binary=$old
    [ "$side" = new ] && binary=$new
    rm -rf "$work/data"
    env COMPACTD_MODELS=openai:bench COMPACTD_OPENAI_BASE_URL=http://127.0.0.1:9001/v1 \
      COMPACTD_RATE_LIMIT_PER_MINUTE=0 COMPACTD_MAX_CONCURRENT_PER_KEY=0 COMPACTD_MAX_CONCURRENT=1024 \
      COMPACTD_MAX_QUEUE=4096 COMPACTD_LOG=error COMPACTD_LISTEN=127.0.0.1:9002 \
      COMPACTD_DATA_DIR="$work/data" "$@" "$binary" &
    pid=$!
    until curl -s -o /dev/null http://127.0.0.1:9002/; do sleep 0.1; done
    VARY_PREFIX="w$round$side" BODY_FILE="$work/body.json" \
      wrk -t2 -c32 -d1s -s scripts/bench/vary.lua http://127.0.0.1:9002/v1/compact > /dev/null
    before=$(cpu $pid)
    report=$(VARY_PREFIX="m$round$side" BODY_FILE="$work/body.json" \
      wrk -t2 -c32 -d"$duration" --latency -s scripts/bench/vary.lua http://127.0.0.1:9002/v1/compact)
    after=$(cpu $pid)
    requests=$(echo "$report" | awk '/requests in/ {print $1}')
    rate=$(echo "$report" | awk '/Requests\/sec/ {print $2}')
    p50=$(echo "$report" | awk '$1 == "50%" {print $2}')
    dropped=$(curl -s http://127.0.0.1:9002/metrics \
      | awk '/^compactd_(call_log|recall)_dropped_total/ {sub(/compactd_/, "", $1); printf " %s=%s", $1, $2}')
    awk -v s="$side" -v r="$round" -v c=$((after - before)) -v t="$tick" -v q="$requests" -v x="$rate" \
      -v p="$p50" -v d="$dropped" \
      'BEGIN {printf "round %d %s: %6.0f req/s, p50 %s, compactd CPU %4.0f us/request;%s\n", r, s, x, p, 1e6 * c / t / q, d}'
    kill $pid
    wait $pid 2>/dev/null || true
    # What recall kept (written by the time the server stops: it flushes its queues on the way
    # out), when the sqlite3 shell is here to count it.
    if command -v sqlite3 >/dev/null; then
      echo "  recall kept $(sqlite3 "$work/data/compactd.db" 'select count(*) from recalls') conversations"
    fi
  done
done
