#!/usr/bin/env bash
# Sessions that scale (issue 14): on each store, against a release compactd, the cost of
# appending one entry to a 20 KB session and to a 20 MB one (same run, same server), planning the
# stored 20 MB session against planning the same file, compacting it against `compactd compact
# FILE`, upload throughput, and the server's memory after syncing many 20 MB sessions.
#   scripts/bench/sessions.sh [megabytes] [appends] [uploads] [sessions]
# PostgreSQL: a database `compactd_bench` on $BENCH_DATABASE_URL's server (default: the local
# trust-auth server of scripts/ensure-postgres.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
megabytes=${1:-20}
appends=${2:-200}
uploads=${3:-5}
sessions=${4:-50}
server=${BENCH_DATABASE_URL:-postgres://postgres@127.0.0.1:5432}
scripts/ensure-postgres.sh
cargo build --release --quiet --bin compactd --example make_session --example sessions_bench

work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
./target/release/examples/make_session "$work/big.jsonl" "$megabytes"
head -c 20000 "$work/big.jsonl" | head -n -1 > "$work/small.jsonl"
echo "small session: $(wc -c < "$work/small.jsonl") bytes, $(wc -l < "$work/small.jsonl") lines"

run() { # store-name DATABASE_URL
  echo "== $1"
  DATABASE_URL=$2 COMPACTD_DATA_DIR="$work/data-$1" COMPACTD_LISTEN=127.0.0.1:9031 COMPACTD_LOG=warn \
    COMPACTD_RATE_LIMIT_PER_MINUTE=0 ./target/release/compactd &
  local pid=$!
  until curl -s -o /dev/null http://127.0.0.1:9031/healthz; do sleep 0.1; done
  ./target/release/examples/sessions_bench http://127.0.0.1:9031 "$work/big.jsonl" "$work/small.jsonl" \
    "$appends" "$uploads" "$sessions" "$pid"
  kill "$pid"; wait "$pid" 2>/dev/null || true
  local started=$(date +%s%N)
  DATABASE_URL=$2 COMPACTD_DATA_DIR="$work/data-$1" COMPACTD_LOG=error \
    ./target/release/compactd compact "$work/big.jsonl" > /dev/null
  echo "compact the file (compactd compact FILE, process included): $(( ($(date +%s%N) - started) / 1000000 )) ms"
}

run sqlite ""
psql "$server/postgres" -qc "drop database if exists compactd_bench" -c "create database compactd_bench"
run postgres "$server/compactd_bench"
