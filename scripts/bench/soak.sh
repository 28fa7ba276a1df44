#!/usr/bin/env bash
# Soak: /v1/compact at a fixed rate for a fixed time, against a fake upstream that fails a share
# of its calls (retries and the extractive fallback absorb them). The per-key limits are off: one
# anonymous caller sends everything, and the soak is about upstream faults, not the rate limit.
#   scripts/bench/soak.sh [seconds] [rate per second] [failure rate]
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-600}
rate=${2:-20}
fail=${3:-0.1}
cargo build --release --quiet --bin compactd --example bench_upstream --example soak
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
python3 - "$work/body.json" <<'PY'
import json, sys
turns = "\n\n".join(f"[User]: change src/file{i}.rs please\n\n[Assistant tool calls]: edit(path=\"src/file{i}.rs\", oldText=\"a\", newText=\"b\")\n\n[Tool result]: error: build failed in src/file{i}.rs" for i in range(40))
prompt = f"<conversation>\n{turns}\n</conversation>\n\n## Goal ... ## Critical Context"
json.dump({"systemPrompt": "You summarize coding sessions.", "prompt": prompt, "maxTokens": 2000}, open(sys.argv[1], "w"))
PY
FAIL_RATE=$fail DELAY_MS=20 ./target/release/examples/bench_upstream 127.0.0.1:9011 &
COMPACTD_LISTEN=127.0.0.1:9012 COMPACTD_MODELS=openai:bench COMPACTD_OPENAI_BASE_URL=http://127.0.0.1:9011/v1 \
  COMPACTD_DATA_DIR="$work/data" COMPACTD_LOG=error \
  COMPACTD_RATE_LIMIT_PER_MINUTE=0 COMPACTD_MAX_CONCURRENT_PER_KEY=0 ./target/release/compactd &
pid=$!
until curl -s -o /dev/null http://127.0.0.1:9012/healthz; do sleep 0.1; done
./target/release/examples/soak http://127.0.0.1:9012/v1/compact "$work/body.json" "$rate" "$seconds" "$pid"
curl -s http://127.0.0.1:9012/metrics | grep -E '^compactd_(upstream_calls_total|fallbacks_total|summarizer_rejections_total|call_log_dropped_total)'
