#!/usr/bin/env bash
# The gateway's passthrough cost, in one run: an ordinary Claude Code turn (the recorded 50 KB
# request, tests/fixtures/agent-requests/claude-code-2.1.330.jsonl seq 2) sent with wrk to
#   1. the instant upstream itself (examples/bench_upstream.rs, an Anthropic SSE answer),
#   2. nginx (Debian's) proxy_pass to it, buffering off as for any SSE proxy,
#   3. compactd with COMPACTD_GATEWAY=on and that upstream,
#   4. LiteLLM's proxy (a pass-through endpoint), when LITELLM=/path/to/litellm is given (pip
#      install 'litellm[proxy]');
# then the time to the first byte of a stream whose upstream holds the rest for DRIP_MS, over
# sequential requests through nginx and through compactd. Prints requests/s and the ratios.
#   scripts/bench/gateway.sh [duration] [connections]
set -euo pipefail
cd "$(dirname "$0")/../.."
duration=${1:-10s}
connections=${2:-32}
for tool in wrk nginx curl; do
  command -v "$tool" >/dev/null || { echo "$tool is needed: apt-get install wrk nginx curl" >&2; exit 1; }
done
cargo build --release --quiet --bin compactd --example bench_upstream

work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null; rm -rf "$work"' EXIT
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
PY
cat scripts/bench/post.lua "$work/headers.lua" > "$work/post.lua"
echo "body: $(wc -c < "$work/body.json") bytes (a Claude Code 2.1.330 turn)"

cat > "$work/nginx.conf" <<NGINX
worker_processes 2;
pid $work/nginx.pid;
error_log $work/nginx-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $work/body-temp;
  proxy_temp_path $work/proxy-temp;
  client_max_body_size 32m;
  upstream model { server 127.0.0.1:9011; keepalive 64; }
  server {
    listen 127.0.0.1:9014;
    location / {
      proxy_pass http://model;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_request_buffering off;
    }
  }
}
NGINX

start_all() {
  DRIP_MS=${1:-0} ./target/release/examples/bench_upstream 127.0.0.1:9011 &
  COMPACTD_LISTEN=127.0.0.1:9012 COMPACTD_GATEWAY=on COMPACTD_GATEWAY_ANTHROPIC_UPSTREAM=http://127.0.0.1:9011 \
    COMPACTD_RATE_LIMIT_PER_MINUTE=0 COMPACTD_DATA_DIR="$work/data" COMPACTD_LOG=warn ./target/release/compactd &
  nginx -c "$work/nginx.conf"
  for port in 9011 9012 9014; do
    until curl -s -o /dev/null "http://127.0.0.1:$port/"; do sleep 0.1; done
  done
}
stop_all() {
  kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
  kill $(jobs -p) 2>/dev/null || true
  wait 2>/dev/null || true
}

rate() { awk '/Requests\/sec/ {print $2}'; }
start_all 0
declare -A rps
targets=("upstream alone|http://127.0.0.1:9011/v1/messages" \
         "nginx proxy_pass|http://127.0.0.1:9014/v1/messages" \
         "compactd gateway|http://127.0.0.1:9012/v1/messages")
if [ -n "${LITELLM:-}" ]; then
  # A pass-through route of its own (its /v1/messages is its Anthropic API, which needs its keys).
  printf 'general_settings:\n  pass_through_endpoints:\n    - path: "/bench/v1/messages"\n      target: "http://127.0.0.1:9011/v1/messages"\n      auth: false\nmodel_list: []\n' > "$work/litellm.yaml"
  LITELLM_MASTER_KEY="sk-bench-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')" \
    "$LITELLM" --config "$work/litellm.yaml" --port 9015 >"$work/litellm.log" 2>&1 &
  until curl -s -o /dev/null http://127.0.0.1:9015/health/liveliness; do sleep 0.5; done
  targets+=("LiteLLM pass-through|http://127.0.0.1:9015/bench/v1/messages")
fi
export BODY_FILE="$work/body.json"
for target in "${targets[@]}"; do
  name=${target%%|*}
  echo "== $name"
  wrk -t2 -c"$connections" -d"$duration" --latency -s "$work/post.lua" "${target##*|}" > "$work/out"
  grep -E "Requests/sec|Latency|50%|99%|Non-2xx|Socket errors" "$work/out"
  rps[$name]=$(rate < "$work/out")
done
echo "== ratios"
echo "compactd / nginx requests/s: $(python3 -c "print(f'{${rps[compactd gateway]} / ${rps[nginx proxy_pass]}:.2f}')")"
if [ -n "${rps[LiteLLM pass-through]:-}" ]; then
  echo "compactd / LiteLLM requests/s: $(python3 -c "print(f'{${rps[compactd gateway]} / ${rps[LiteLLM pass-through]}:.2f}')")"
fi
stop_all

drip=${DRIP_MS:-50}
start_all "$drip"
echo "== first byte of a stream whose upstream holds the rest ${drip} ms (200 sequential requests, median and p99 ms)"
for target in "nginx proxy_pass|http://127.0.0.1:9014/v1/messages" "compactd gateway|http://127.0.0.1:9012/v1/messages"; do
  for _ in $(seq 200); do
    curl -s -o /dev/null -w '%{time_starttransfer}\n' -H @"$work/curl-headers" --data-binary @"$work/body.json" "${target##*|}"
  done | sort -n | awk -v name="${target%%|*}" '{a[NR]=$1*1000} END {printf "%s: median %.2f ms, p99 %.2f ms\n", name, a[int(NR/2)], a[int(NR*0.99)]}'
done
stop_all
