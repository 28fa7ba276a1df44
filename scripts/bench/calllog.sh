#!/usr/bin/env bash
# Call-log rows kept at the service's peak rate: /v1/compact with the extractive summarizer (the
# fastest summary compactd makes, so the highest request rate), the summary cache, the request
# rate and the concurrency caps off, under wrk for DURATION; then the rows in the store are
# counted and compared with the requests wrk saw answered. On SQLite and, when DATABASE_URL
# names a server, on a fresh PostgreSQL database there.
#   scripts/bench/calllog.sh [duration] [connections]
set -euo pipefail
cd "$(dirname "$0")/../.."
duration=${1:-10s}
connections=${2:-64}
command -v wrk >/dev/null || { echo "wrk is needed: apt-get install wrk" >&2; exit 1; }
cargo build --release --quiet --bin compactd

work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
python3 - "$work/body.json" <<'PY'
import json, sys
turns = "\n\n".join(f"[User]: change src/file{i}.rs please\n\n[Tool result]: Edited src/file{i}.rs" for i in range(12))
json.dump({"systemPrompt": "You summarize.", "prompt": f"<conversation>\n{turns}\n</conversation>"}, open(sys.argv[1], "w"))
PY
export BODY_FILE="$work/body.json"

run() { # name, database url, count command
  local name=$1 url=$2
  COMPACTD_LISTEN=127.0.0.1:9031 DATABASE_URL="$url" COMPACTD_MODELS=extractive COMPACTD_CACHE_BYTES=0 \
    COMPACTD_RATE_LIMIT_PER_MINUTE=0 COMPACTD_MAX_CONCURRENT_PER_KEY=0 COMPACTD_MAX_CONCURRENT=1024 \
    COMPACTD_MAX_QUEUE=4096 COMPACTD_LOG=warn ./target/release/compactd 2>"$work/$name.log" &
  local pid=$!
  until curl -s -o /dev/null http://127.0.0.1:9031/healthz; do sleep 0.1; done
  local report
  report=$(wrk -t2 -c"$connections" -d"$duration" -s scripts/bench/post.lua http://127.0.0.1:9031/v1/compact)
  local served rate dropped
  served=$(echo "$report" | awk '/requests in/ {print $1}')
  rate=$(echo "$report" | awk '/Requests\/sec/ {print $2}')
  non2xx=$(echo "$report" | awk '/Non-2xx/ {print $NF}')
  # Let the writer finish its last batch, then stop compactd cleanly.
  sleep 2
  dropped=$(curl -s http://127.0.0.1:9031/metrics | awk '/^compactd_call_log_dropped_total/ {print $2}')
  kill -TERM "$pid"; wait "$pid" || true
  local rows
  rows=$(eval "$3")
  grep -h "call log" "$work/$name.log" | cut -c1-200 || true
  echo "$name: $served requests answered (${non2xx:-0} non-2xx) at $rate/s; $rows call-log rows; dropped $dropped"
}

run sqlite "sqlite:$work/calls.db" "sqlite3 $work/calls.db 'select count(*) from summarization_calls'"
if [ -n "${DATABASE_URL:-}" ]; then
  db=compactd_bench_calllog_$$
  psql -q "$DATABASE_URL" -c "drop database if exists $db" -c "create database $db"
  pg="${DATABASE_URL%/*}/$db"
  run postgres "$pg" "psql -tA $pg -c 'select count(*) from summarization_calls'"
  psql -q "$DATABASE_URL" -c "drop database $db"
fi
