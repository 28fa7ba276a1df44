#!/usr/bin/env bash
# The console on a 20 MB session (issue 15): against a release compactd on each store, the
# median time to serve the session page (tree page, plan, compactions, pins) and a compaction
# page of a 20 MB session, against the same pages of a 200 KB session (the first lines of the same file), in the same run.
#   scripts/bench/console.sh [megabytes] [requests]
set -euo pipefail
cd "$(dirname "$0")/../.."
megabytes=${1:-20}
requests=${2:-30}
server=${BENCH_DATABASE_URL:-postgres://postgres@127.0.0.1:5432}
scripts/ensure-postgres.sh
cargo build --release --quiet --bin compactd --example make_session

work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
./target/release/examples/make_session "$work/big.jsonl" "$megabytes"
head -c 200000 "$work/big.jsonl" | head -n -1 > "$work/small.jsonl"
base=http://127.0.0.1:9032

median_ms() { # URL: median of $requests GETs, in ms
  for _ in $(seq "$requests"); do curl -s -o /dev/null -w '%{time_total}\n' "$1"; done |
    sort -n | awk '{a[NR]=$1} END {printf "%.1f", a[int((NR+1)/2)] * 1000}'
}

page_times() { # label file
  local id
  id=$(curl -s "$base/v1/sessions" -H 'content-type: application/x-ndjson' --data-binary @"$2" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
  curl -s -o /dev/null -X POST "$base/v1/sessions/$id/compactions" -H 'content-type: application/json' -d '{"keepRecentTokens": 1000}'
  local entry
  entry=$(curl -s "$base/v1/sessions/$id/compactions" | python3 -c 'import json,sys; print(json.load(sys.stdin)["compactions"][-1]["entryId"])')
  local session compaction
  session=$(median_ms "$base/ui/sessions/$id")
  compaction=$(median_ms "$base/ui/sessions/$id/compactions/$entry")
  echo "$1 $(wc -c < "$2") bytes: session page ${session} ms, compaction page ${compaction} ms"
  echo "$session $compaction" > "$work/$1.times"
}

run() { # store-name DATABASE_URL
  echo "== $1"
  DATABASE_URL=$2 COMPACTD_DATA_DIR="$work/data-$1" COMPACTD_LISTEN=127.0.0.1:9032 COMPACTD_LOG=warn \
    COMPACTD_RATE_LIMIT_PER_MINUTE=0 ./target/release/compactd &
  local pid=$!
  until curl -s -o /dev/null "$base/healthz"; do sleep 0.1; done
  page_times small "$work/small.jsonl"
  page_times big "$work/big.jsonl"
  read -r s_small c_small < "$work/small.times"
  read -r s_big c_big < "$work/big.times"
  python3 -c "print(f'ratio big/small: session page x{$s_big/$s_small:.2f}, compaction page x{$c_big/$c_small:.2f}')"
  kill "$pid"; wait "$pid" 2>/dev/null || true
}

run sqlite ""
psql "$server/postgres" -qc 'drop database if exists compactd_bench' -c 'create database compactd_bench' >/dev/null
run postgres "$server/compactd_bench"
