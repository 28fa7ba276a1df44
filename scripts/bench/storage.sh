#!/usr/bin/env bash
# Upload throughput of a 20 MB session into PostgreSQL, and the latency of planning it once
# stored. Uses a database `compactd_bench` on $BENCH_DATABASE_URL's server (default: the local
# trust-auth server of scripts/ensure-postgres.sh); BENCH_URL_PARAMS is appended to its URL
# (e.g. `?sslmode=disable`).
#   scripts/bench/storage.sh [megabytes] [uploads]
set -euo pipefail
cd "$(dirname "$0")/../.."
megabytes=${1:-20}
uploads=${2:-10}
server=${BENCH_DATABASE_URL:-postgres://postgres@127.0.0.1:5432}
scripts/ensure-postgres.sh
psql "$server/postgres" -qc "drop database if exists compactd_bench" -c "create database compactd_bench"
cargo build --release --quiet --bin compactd --example make_session

work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
./target/release/examples/make_session "$work/session.jsonl" "$megabytes"
bytes=$(wc -c < "$work/session.jsonl")
DATABASE_URL="$server/compactd_bench${BENCH_URL_PARAMS:-}" COMPACTD_LISTEN=127.0.0.1:9004 COMPACTD_LOG=warn ./target/release/compactd &
until curl -s -o /dev/null http://127.0.0.1:9004/; do sleep 0.1; done

echo "== upload of $bytes bytes, $uploads times"
total=0
for _ in $(seq "$uploads"); do
  t=$(curl -s -o "$work/upload.json" -w '%{time_total}' -X POST --data-binary @"$work/session.jsonl" \
      -H 'content-type: application/x-ndjson' http://127.0.0.1:9004/v1/sessions)
  echo "  ${t}s  $(python3 -c "print(f'{$bytes/$t/1e6:.1f} MB/s')")"
  total=$(python3 -c "print($total + $t)")
done
python3 -c "print(f'  mean: {$bytes*$uploads/$total/1e6:.1f} MB/s ({$total/$uploads*1000:.0f} ms per upload)')"

id=$(python3 -c "import json; print(json.load(open('$work/upload.json'))['id'])")
echo "== GET /v1/sessions/$id/plan, 10 times"
for _ in $(seq 10); do
  curl -s -o /dev/null -w '  %{time_total}s\n' "http://127.0.0.1:9004/v1/sessions/$id/plan"
done
