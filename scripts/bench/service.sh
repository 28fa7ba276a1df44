#!/usr/bin/env bash
# compactd's own cost on the request path, next to nginx in the same run (issue 26). One instant
# fake OpenAI upstream (examples/bench_upstream.rs) answers a summary that keeps every anchor, so
# every default stage runs (redaction, anchors, the fidelity gate, loops, budget, call log) and
# none repairs. Targets, one after another, each under wrk for DURATION:
#   nginx     proxy_pass of the body to the upstream (Debian's nginx): the baseline hop
#   miss      POST /v1/compact, every body different (vary.lua numbers the first user turn): each
#             one a cache miss, with every default stage on (the cache looked up and filled, the
#             conversation kept for recall, the call log)
#   hit       POST /v1/compact, one body, answered from the cache (primed)
#   chat      POST /v1/chat/completions (the chat wire), every body different, on a server of its
#             own: on the miss server it started behind the miss run's write-behind backlog
#             (recall and cache batches still being written), which cost it ~20 % in one run
#   miss-norecall, miss-nocache   misses again with recall off (COMPACTD_RECALL_RETENTION=0), then
#             with the summary cache off too: what those two stages cost a miss
# ROUNDS (1 by default) repeats the six in turn (each round its own bodies: a miss never repeats
# an earlier round's), and the ratios are of the medians: on a shared VM
# one run of a target moved by ±15 % between runs of the same code, more than most changes.
# Then nginx, misses and hits once more on one connection: a request's own added time, unqueued.
# Prints wrk's numbers per target, compactd's CPU time per request (and the share of it spent in
# SQLite's threads), and the ratios to nginx.
#   [ROUNDS=3] scripts/bench/service.sh [duration] [connections]
set -euo pipefail
cd "$(dirname "$0")/../.."
duration=${1:-10s}
connections=${2:-32}
threads=$(( connections < 2 ? connections : 2 ))
for tool in wrk nginx; do
  command -v $tool >/dev/null || [ -x /usr/sbin/$tool ] || { echo "$tool is needed: apt-get install $tool" >&2; exit 1; }
done
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
cargo build --release --quiet --bin compactd --example bench_upstream

# The upstream, the five compactd servers, nginx. A server left on one of these ports would be
# measured instead of the one started here.
ports=(9001 9002 9003 9004 9005 9006 9010)
for port in "${ports[@]}"; do
  if curl -s -o /dev/null "http://127.0.0.1:$port/"; then
    echo "port $port is taken (an earlier run still going?): stop it first" >&2; exit 1
  fi
done
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")"; rm -rf "$work"' EXIT
python3 scripts/bench/service/bodies.py "$work"
echo "body: $(wc -c < "$work/body.json") bytes (chat: $(wc -c < "$work/chat.json"))"

SUMMARY_FILE="$work/summary.md" ./target/release/examples/bench_upstream 127.0.0.1:9001 &
cat > "$work/nginx.conf" <<NGINX
worker_processes auto;
pid $work/nginx.pid;
error_log $work/nginx-error.log;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $work;
  upstream fake { server 127.0.0.1:9001; keepalive 64; }
  server {
    listen 127.0.0.1:9010;
    client_max_body_size 32m;
    location / {
      proxy_pass http://fake/v1/chat/completions;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
NGINX
"$nginx_bin" -c "$work/nginx.conf" -e "$work/nginx-error.log"

common=(COMPACTD_MODELS=openai:bench COMPACTD_OPENAI_BASE_URL=http://127.0.0.1:9001/v1
        COMPACTD_RATE_LIMIT_PER_MINUTE=0 COMPACTD_MAX_CONCURRENT_PER_KEY=0 COMPACTD_MAX_CONCURRENT=1024
        COMPACTD_MAX_QUEUE=4096 COMPACTD_LOG=error)
# `env` execs the server: `$!` is its process id, whose CPU time each run reads (see `cpu`).
declare -A pid
env "${common[@]}" COMPACTD_LISTEN=127.0.0.1:9002 COMPACTD_DATA_DIR="$work/miss" ./target/release/compactd &
pid[miss]=$!
env "${common[@]}" COMPACTD_LISTEN=127.0.0.1:9006 COMPACTD_DATA_DIR="$work/chat" ./target/release/compactd &
pid[chat]=$!
env "${common[@]}" COMPACTD_LISTEN=127.0.0.1:9003 COMPACTD_DATA_DIR="$work/hit" ./target/release/compactd &
pid[hit]=$!
env "${common[@]}" COMPACTD_LISTEN=127.0.0.1:9004 COMPACTD_DATA_DIR="$work/norecall" COMPACTD_RECALL_RETENTION=0 \
  ./target/release/compactd &
pid[miss-norecall]=$!
env "${common[@]}" COMPACTD_LISTEN=127.0.0.1:9005 COMPACTD_DATA_DIR="$work/nocache" COMPACTD_RECALL_RETENTION=0 \
  COMPACTD_CACHE_BYTES=0 ./target/release/compactd &
pid[miss-nocache]=$!
for port in "${ports[@]}"; do
  until curl -s -o /dev/null "http://127.0.0.1:$port/"; do sleep 0.1; done
done
sed 's/@@N@@/1/' "$work/body.json" > "$work/one.json"
curl -sf -X POST -H 'content-type: application/json' --data-binary @"$work/one.json" http://127.0.0.1:9003/v1/compact \
  | python3 -c 'import json,sys; r=json.load(sys.stdin); f=r["fidelity"]; print("anchors", f["anchors"], "kept", f["kept"], "repaired", f["repaired"]); assert f["repaired"] == 0'

# CPU time of a compactd in clock ticks: the whole process (exited threads included), and its
# SQLite worker threads (sqlx's, one per connection, alive as long as the pool). The rest is the
# runtime's threads: the requests themselves and the write-behind tasks building statements.
cpu() {
  local total sqlite=0 task
  total=$(sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13}')
  for task in /proc/"$1"/task/*; do
    [[ $(cat "$task/comm" 2>/dev/null) == sqlx-sqlite* ]] || continue
    sqlite=$(( sqlite + $(sed 's/.*) //' "$task/stat" | awk '{print $12 + $13}') ))
  done
  echo "$total $sqlite"
}
tick=$(getconf CLK_TCK)
declare -A rate p50
# wrk's median (its "50%" line, in us, ms or s) in milliseconds, from a report on stdin.
median_ms() {
  awk '$1 == "50%" {v=$2; if (v ~ /us$/) {sub(/us/,"",v); v/=1000} else if (v ~ /ms$/) {sub(/ms/,"",v)} else {sub(/s/,"",v); v*=1000}; print v}'
}
run() { # name, url, script, body
  local report before after
  [ -n "${pid[$1]:-}" ] && before=$(cpu "${pid[$1]}")
  report=$(VARY_PREFIX=$1-r${round:-1} BODY_FILE=$4 wrk -t"$threads" -c"$connections" -d"$duration" --latency -s "scripts/bench/$3" "$2")
  echo "== $1"; echo "$report" | grep -E "Requests/sec|Latency |50%|99%|Non-2xx|Socket errors"
  if [ -n "${pid[$1]:-}" ]; then
    # compactd's CPU per request: machine-bound, but steadier than requests/s on a shared VM,
    # and it says which threads spent it.
    after=$(cpu "${pid[$1]}")
    echo "$before $after $(echo "$report" | awk '/requests in/ {print $1}')" | awk -v hz="$tick" \
      '{printf "compactd CPU per request: %.0f µs (SQLite threads %.0f µs)\n", 1e6*($3-$1)/hz/$5, 1e6*($4-$2)/hz/$5}'
  fi
  rates[$1]+=" $(echo "$report" | awk '/Requests\/sec/ {print $2}')"
  p50s[$1]+=" $(echo "$report" | median_ms)"
}
declare -A rates p50s
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
for round in $(seq 1 "${ROUNDS:-1}"); do
  [ "${ROUNDS:-1}" -gt 1 ] && echo "==== round $round"
  run nginx http://127.0.0.1:9010/ post.lua "$work/one.json"
  run miss http://127.0.0.1:9002/v1/compact vary.lua "$work/body.json"
  run hit http://127.0.0.1:9003/v1/compact post.lua "$work/one.json"
  run chat http://127.0.0.1:9006/v1/chat/completions vary.lua "$work/chat.json"
  run miss-norecall http://127.0.0.1:9004/v1/compact vary.lua "$work/body.json"
  run miss-nocache http://127.0.0.1:9005/v1/compact vary.lua "$work/body.json"
done
for name in "${!rates[@]}"; do
  rate[$name]=$(echo "${rates[$name]}" | median)
  p50[$name]=$(echo "${p50s[$name]}" | median)
done
echo "== ratios (requests/s to nginx's; median added to nginx's; medians of ${ROUNDS:-1} round(s))"
for name in miss hit chat miss-norecall miss-nocache; do
  awk -v n="$name" -v r="${rate[$name]}" -v b="${rate[nginx]}" -v p="${p50[$name]}" -v q="${p50[nginx]}" \
    'BEGIN {printf "%-13s %5.1f %% of nginx, median +%.2f ms\n", n, 100*r/b, p-q}'
done
awk -v c="${rate[chat]}" -v m="${rate[miss]}" 'BEGIN {printf "chat wire / /v1/compact misses: %.1f %%\n", 100*c/m}'
# The same hop without a queue: one connection, one request at a time. At 32 connections both
# servers are saturated and a median is mostly waiting behind other requests (Little's law:
# connections / rate); here it is one request's own added time.
echo "== one connection, ${ONE_DURATION:-5s} each (a request's own time, no queue)"
one() { # url, script, body, prefix: wrk's median in ms
  VARY_PREFIX=$4 BODY_FILE=$3 wrk -t1 -c1 -d"${ONE_DURATION:-5s}" --latency -s "scripts/bench/$2" "$1" | median_ms
}
one_nginx=$(one http://127.0.0.1:9010/ post.lua "$work/one.json" one-nginx)
one_miss=$(one http://127.0.0.1:9002/v1/compact vary.lua "$work/body.json" one-miss)
one_hit=$(one http://127.0.0.1:9003/v1/compact post.lua "$work/one.json" one-hit)
awk -v n="$one_nginx" -v m="$one_miss" -v h="$one_hit" 'BEGIN {
  printf "median: nginx %.3f ms, miss %.3f ms (+%.3f ms), hit %.3f ms (%+.3f ms)\n", n, m, m-n, h, h-n }'
for port in 9002 9003 9006; do
  curl -s "http://127.0.0.1:$port/metrics" | awk -v p=":$port" '/^compactd_summary_cache_total/ {print "cache " p, $1, $2}'
  # Written behind the requests, bounded: what did not fit (call-log rows must all be kept).
  curl -s "http://127.0.0.1:$port/metrics" | awk -v p=":$port" '/^compactd_(call_log|recall|summary_cache_writes)_dropped_total/ {print "dropped " p, $1, $2}'
done
