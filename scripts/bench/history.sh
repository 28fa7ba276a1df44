#!/usr/bin/env bash
# A session compacted N times (default 60,000: a chain of user messages each compacted): the
# median time of its pages — the console's session page, a compaction's page, history pages of
# 100 and 1000 — and /healthz latency while the heaviest requests run at once (console pages,
# thousand-compaction history pages, plans of the whole 20 MB file), against a release compactd
# with one runtime thread on SQLite.
#   scripts/bench/history.sh [compactions] [repeats]
set -euo pipefail
cd "$(dirname "$0")/../.."
n=${1:-60000}
repeats=${2:-20}
cargo build --release --quiet --bin compactd
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
COMPACTD_LISTEN=127.0.0.1:9041 COMPACTD_DATA_DIR="$work" COMPACTD_WORKER_THREADS=1 COMPACTD_LOG=error \
  ./target/release/compactd &
until curl -s -o /dev/null http://127.0.0.1:9041/healthz; do sleep 0.1; done
python3 - "$n" "$repeats" "$work/session.jsonl" <<'PY'
import json, sys, threading, time, urllib.request
n, repeats, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
base = "http://127.0.0.1:9041"
with open(path, "w") as f:
    f.write(json.dumps({"type": "session", "version": 3, "id": "long", "timestamp": "2026-11-20T10:00:00.000Z", "cwd": "/work/long"}) + "\n")
    parent = None
    for i in range(n):
        f.write(json.dumps({"type": "message", "id": f"u{i}", "parentId": parent, "timestamp": "2026-11-20T10:00:00.000Z",
                            "message": {"role": "user", "content": f"step {i}", "timestamp": 1}}, separators=(",", ":")) + "\n")
        f.write(json.dumps({"type": "compaction", "id": f"c{i}", "parentId": f"u{i}", "timestamp": "2026-11-20T10:00:00.000Z",
                            "summary": f"## Goal\nstep {i}", "firstKeptEntryId": f"u{i}", "tokensBefore": 1000}, separators=(",", ":")) + "\n")
        parent = f"c{i}"
body = open(path, "rb").read()
def post(url, data):
    request = urllib.request.Request(url, data=data, headers={"content-type": "application/x-ndjson"})
    return urllib.request.urlopen(request).read()
started = time.time()
sid = json.loads(post(f"{base}/v1/sessions", body))["id"]
print(f"{n} compactions, {len(body) / 1e6:.1f} MB: uploaded in {time.time() - started:.2f} s")
def median_ms(path):
    urllib.request.urlopen(base + path).read()  # warm
    times = []
    for _ in range(repeats):
        t = time.time(); urllib.request.urlopen(base + path).read(); times.append(time.time() - t)
    times.sort()
    return times[len(times) // 2] * 1000
for name, path in [("console session page", f"/ui/sessions/{sid}"),
                   ("console compaction page", f"/ui/sessions/{sid}/compactions/c{n // 2}"),
                   ("history page of 100", f"/v1/sessions/{sid}/compactions?limit=100&cursor={n}"),
                   ("history page of 1000", f"/v1/sessions/{sid}/compactions?limit=1000&cursor={n}")]:
    print(f"  {name}: median {median_ms(path):.1f} ms")
def heavy(k):
    if k % 3 == 0: urllib.request.urlopen(f"{base}/ui/sessions/{sid}").read()
    elif k % 3 == 1: urllib.request.urlopen(f"{base}/v1/sessions/{sid}/compactions?limit=1000&cursor={k * 2000}").read()
    else: post(f"{base}/v1/plan", body)
latencies, done = [], False
def probe():
    while not done:
        t = time.time(); urllib.request.urlopen(base + "/healthz").read(); latencies.append(time.time() - t); time.sleep(0.005)
prober = threading.Thread(target=probe); prober.start()
started = time.time()
workers = [threading.Thread(target=heavy, args=(k,)) for k in range(12)]
[w.start() for w in workers]; [w.join() for w in workers]
took = time.time() - started
done = True; prober.join()
latencies.sort()
p = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000
print(f"  12 heavy requests at once took {took * 1000:.0f} ms; /healthz meanwhile: {len(latencies)} answers, "
      f"p50 {p(0.5):.1f} ms, p99 {p(0.99):.1f} ms, max {latencies[-1] * 1000:.1f} ms")
PY
