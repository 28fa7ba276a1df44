#!/usr/bin/env bash
# The gateway's passthrough cost, in one run: an ordinary Claude Code turn (the recorded 50 KB
# request, tests/fixtures/agent-requests/claude-code-2.1.330.jsonl seq 2) sent with wrk through
#   1. nginx (Debian's) proxy_pass, buffering off as for any SSE proxy, and
#   2. compactd with COMPACTD_GATEWAY=on,
# both in front of an instant upstream that is faster than either: a second nginx answering an
# Anthropic SSE stream from memory. On two shared cores requests/s says more about the scheduler
# than about a proxy, so the figure is each proxy's CPU time per request (utime + stime of its
# processes over the run, from /proc, divided by the requests wrk completed), and compactd's as a
# ratio of nginx's. Then the time to the first byte of a stream whose upstream holds the rest for
# DRIP_MS (examples/bench_upstream.rs), over sequential requests through each proxy.
#   scripts/bench/gateway.sh [duration] [connections] [rounds]
set -euo pipefail
cd "$(dirname "$0")/../.."
duration=${1:-10s}
connections=${2:-32}
rounds=${3:-3}
for tool in wrk nginx curl; do
  command -v "$tool" >/dev/null || { echo "$tool is needed: apt-get install wrk nginx curl" >&2; exit 1; }
done
cargo build --release --quiet --bin compactd --example bench_upstream

work=$(mktemp -d)
cleanup() {
  for p in "$work"/*.pid; do [ -f "$p" ] && kill "$(cat "$p")" 2>/dev/null; done
  kill $(jobs -p) 2>/dev/null
  rm -rf "$work"
  return 0
}
trap cleanup EXIT
python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
for line in open("tests/fixtures/agent-requests/claude-code-2.1.330.jsonl"):
    r = json.loads(line)
    if r["seq"] == 2:
        json.dump(r["body"], open(f"{work}/body.json", "w"))
        keep = {k: v for k, v in r["headers"].items() if k.lower() not in ("host", "content-length", "connection", "accept-encoding")}
        open(f"{work}/headers.lua", "w").write("".join(f'wrk.headers["{k}"] = {json.dumps(v)}\n' for k, v in keep.items()))
        open(f"{work}/curl-headers", "w").write("".join(f"{k}: {v}\n" for k, v in keep.items()))
# The instant upstream's answer: a short Anthropic stream, as nginx's `return` writes it.
events = [
    ("message_start", {"type": "message_start", "message": {"id": "msg_b", "type": "message", "role": "assistant", "model": "claude-opus-5-5", "content": [], "stop_reason": None, "usage": {"input_tokens": 10, "output_tokens": 1}}}),
    ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "OK, noted."}}),
    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
    ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}}),
    ("message_stop", {"type": "message_stop"}),
]
sse = "".join(f"event: {n}\ndata: {json.dumps(e, separators=(',', ':'))}\n\n" for n, e in events)
open(f"{work}/answer.conf", "w").write("return 200 '" + sse.replace("\\", "\\\\").replace("'", "\\'") + "';\n")
PY
cat scripts/bench/post.lua "$work/headers.lua" > "$work/post.lua"
echo "body: $(wc -c < "$work/body.json") bytes (a Claude Code 2.1.330 turn)"

# nginx_conf NAME WORKERS SERVER-BLOCK: a config of its own, so that each nginx's CPU is its own.
nginx_conf() {
  mkdir -p "$work/$1"
  cat > "$work/$1.conf" <<NGINX
worker_processes $2;
pid $work/$1.pid;
error_log $work/$1/error.log;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $work/$1/body;
  proxy_temp_path $work/$1/proxy;
  client_max_body_size 32m;
  upstream model { server 127.0.0.1:9011; keepalive 64; }
  $3
}
NGINX
}
nginx_conf upstream 1 "server { listen 127.0.0.1:9011; location / { default_type text/event-stream; include $work/answer.conf; } }"
nginx_conf proxy 2 "server { listen 127.0.0.1:9014; location / { proxy_pass http://model; proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_buffering off; proxy_request_buffering off; } }"

wait_for() { until curl -s -o /dev/null "http://127.0.0.1:$1/"; do sleep 0.1; done; }
start_compactd() {
  COMPACTD_LISTEN=127.0.0.1:9012 COMPACTD_GATEWAY=on COMPACTD_GATEWAY_ANTHROPIC_UPSTREAM="$1" \
    COMPACTD_RATE_LIMIT_PER_MINUTE=0 COMPACTD_DATA_DIR="$work/data" COMPACTD_LOG="${COMPACTD_LOG:-info}" ./target/release/compactd 2>"$work/compactd.log" &
  echo $! > "$work/compactd.pid"
  wait_for 9012
}
stop_compactd() { kill "$(cat "$work/compactd.pid")"; wait "$(cat "$work/compactd.pid")" 2>/dev/null || true; }

# cpu_ticks PID: utime + stime of the process and its children that are alive (nginx's workers).
cpu_ticks() {
  local total=0 pid
  for pid in "$1" $(pgrep -P "$1" || true); do
    total=$((total + $(awk '{print $14 + $15}' "/proc/$pid/stat")))
  done
  echo "$total"
}
hz=$(getconf CLK_TCK)

nginx -c "$work/upstream.conf"
nginx -c "$work/proxy.conf"
start_compactd http://127.0.0.1:9011
wait_for 9011
wait_for 9014
export BODY_FILE="$work/body.json"
declare -A cpu
run() {  # run NAME URL PID
  local before after requests
  before=$(cpu_ticks "$3")
  wrk -t2 -c"$connections" -d"$duration" --latency -s "$work/post.lua" "$2" > "$work/out"
  after=$(cpu_ticks "$3")
  requests=$(awk '/requests in/ {print $1}' "$work/out")
  local us; us=$(python3 -c "print(round(($after - $before) / $hz / $requests * 1e6, 1))")
  printf '%-18s %8s req/s  %6s µs CPU/request  p50 %s  p99 %s  %s\n' "$1" \
    "$(awk '/Requests\/sec/ {print $2}' "$work/out")" "$us" \
    "$(awk '$1 == "50%" {print $2}' "$work/out")" "$(awk '$1 == "99%" {print $2}' "$work/out")" \
    "$(grep -E 'Non-2xx|Socket errors' "$work/out" | tr '\n' ' ')"
  cpu[$1]="${cpu[$1]:-} $us"
}
echo "== the instant upstream alone"
wrk -t2 -c"$connections" -d"$duration" -s "$work/post.lua" http://127.0.0.1:9011/v1/messages | grep Requests/sec
for round in $(seq "$rounds"); do
  echo "== round $round"
  run "nginx proxy_pass" http://127.0.0.1:9014/v1/messages "$(cat "$work/proxy.pid")"
  run "compactd gateway" http://127.0.0.1:9012/v1/messages "$(cat "$work/compactd.pid")"
done
python3 - "${cpu[nginx proxy_pass]}" "${cpu[compactd gateway]}" <<'PY'
import statistics, sys
nginx = [float(x) for x in sys.argv[1].split()]
compactd = [float(x) for x in sys.argv[2].split()]
ratios = sorted(c / n for c, n in zip(compactd, nginx))
print(f"== CPU per request: nginx median {statistics.median(nginx):.1f} µs, compactd median {statistics.median(compactd):.1f} µs; compactd / nginx per round {', '.join(f'{r:.2f}' for r in ratios)} (median {statistics.median(ratios):.2f})")
PY
stop_compactd
kill "$(cat "$work/proxy.pid")"

drip=${DRIP_MS:-50}
DRIP_MS=$drip ./target/release/examples/bench_upstream 127.0.0.1:9016 &
sed -i 's/127.0.0.1:9011;/127.0.0.1:9016;/' "$work/proxy.conf"
until curl -s -o /dev/null http://127.0.0.1:9016/; do sleep 0.1; done
nginx -c "$work/proxy.conf"
start_compactd http://127.0.0.1:9016
wait_for 9014
echo "== first byte of a stream whose upstream holds the rest ${drip} ms (sequential requests, median and p99 ms)"
# Over one kept-alive connection per proxy, as agents send their turns (interleaved, 300 each).
python3 - "$work" <<'PY'
import http.client, json, statistics, sys, time
work = sys.argv[1]
body = open(f"{work}/body.json", "rb").read()
headers = dict(line.split(": ", 1) for line in open(f"{work}/curl-headers").read().splitlines())
targets = {"nginx proxy_pass": 9014, "compactd gateway": 9012}
conns = {name: http.client.HTTPConnection("127.0.0.1", port) for name, port in targets.items()}
times = {name: [] for name in targets}
for _ in range(300):
    for name, conn in conns.items():
        started = time.perf_counter()
        conn.request("POST", "/v1/messages", body=body, headers=headers)
        response = conn.getresponse()
        times[name].append((time.perf_counter() - started) * 1000)
        response.read()
for name, t in times.items():
    t.sort()
    print(f"{name}, kept-alive connection: median {statistics.median(t):.2f} ms, p99 {t[int(len(t) * 0.99)]:.2f} ms")
PY
# A new connection for each (curl), interleaved, 200 each.
for _ in $(seq 200); do
  for target in "nginx proxy_pass|http://127.0.0.1:9014/v1/messages" "compactd gateway|http://127.0.0.1:9012/v1/messages"; do
    printf '%s|%s\n' "${target%%|*}" "$(curl -s -o /dev/null -w '%{time_starttransfer}' -H @"$work/curl-headers" --data-binary @"$work/body.json" "${target##*|}")"
  done
done | python3 -c '
import statistics, sys
times = {}
for line in sys.stdin:
    name, t = line.strip().split("|")
    times.setdefault(name, []).append(float(t) * 1000)
for name, t in times.items():
    t.sort()
    print(f"{name}, new connection: median {statistics.median(t):.2f} ms, p99 {t[int(len(t) * 0.99)]:.2f} ms")
'
