#!/usr/bin/env bash
# Load test of /v1/compact against an instant fake upstream, next to a trivial axum handler
# (the ceiling), with wrk. Prints wrk's reports; BENCHMARKS.md records them.
#   scripts/bench/service.sh [duration] [connections]
set -euo pipefail
cd "$(dirname "$0")/../.."
duration=${1:-20s}
connections=${2:-32}
command -v wrk >/dev/null || { echo "wrk is needed: apt-get install wrk" >&2; exit 1; }
cargo build --release --quiet --bin compactd --example bench_upstream

work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
# A 4 KB prompt shaped like the agent's: serialized conversation, then instructions.
python3 - "$work/body.json" <<'PY'
import json, sys
turns = "\n\n".join(f"[User]: change src/file{i}.rs please\n\n[Assistant tool calls]: edit(path=\"src/file{i}.rs\", oldText=\"a\", newText=\"b\")\n\n[Tool result]: Edited src/file{i}.rs" for i in range(24))
prompt = f"<conversation>\n{turns}\n</conversation>\n\n## Goal ... ## Critical Context"
json.dump({"systemPrompt": "You summarize coding sessions.", "prompt": prompt, "maxTokens": 2000}, open(sys.argv[1], "w"))
PY
echo "body: $(wc -c < "$work/body.json") bytes"

./target/release/examples/bench_upstream 127.0.0.1:9001 &
COMPACTD_LISTEN=127.0.0.1:9002 COMPACTD_MODELS=openai:bench COMPACTD_OPENAI_BASE_URL=http://127.0.0.1:9001/v1 \
  COMPACTD_MAX_CONCURRENT=256 COMPACTD_MAX_QUEUE=1024 COMPACTD_LOG=warn ./target/release/compactd &
COMPACTD_LISTEN=127.0.0.1:9003 COMPACTD_MODELS=extractive COMPACTD_MAX_CONCURRENT=256 COMPACTD_MAX_QUEUE=1024 \
  COMPACTD_LOG=warn ./target/release/compactd &
for port in 9001 9002 9003; do
  until curl -s -o /dev/null "http://127.0.0.1:$port/"; do sleep 0.1; done
done
curl -sf -X POST -H 'content-type: application/json' --data-binary @"$work/body.json" http://127.0.0.1:9002/v1/compact >/dev/null

export BODY_FILE="$work/body.json"
for target in "ceiling (trivial axum handler)|http://127.0.0.1:9001/ceiling" \
              "compactd /v1/compact -> instant fake OpenAI upstream|http://127.0.0.1:9002/v1/compact" \
              "compactd /v1/compact, extractive summarizer|http://127.0.0.1:9003/v1/compact"; do
  echo "== ${target%%|*}"
  wrk -t2 -c"$connections" -d"$duration" --latency -s scripts/bench/post.lua "${target##*|}" \
    | grep -E "Requests/sec|Latency|50%|99%|Non-2xx|Socket errors"
done
