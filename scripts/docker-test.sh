#!/usr/bin/env bash
# The Docker smoke test: the commands of docs/operations.md's "Running with Docker", run as written, and checked.
#
# 1. The image alone: builds it, runs its `docker run` (SQLite in a named volume), reads the
#    key made on the first start, checks /readyz, a /v1/compact call, that the process is not
#    root, that a session survives a new container on the same volume, and that SIGTERM stops it
#    cleanly within the grace period.
# 2. Compose (v2 `docker compose` and v1 `docker-compose`, each that is installed): up with
#    PostgreSQL, upload a session and compact it, down, up, the compaction is still there, `keys
#    create` through compose.
#
# It leaves no container, volume or network behind (images stay, as a build cache). It needs a
# Docker engine and the base images of the Dockerfile and the compose file; where Docker Hub
# cannot be reached, STANDIN_IMAGES (by default ../shared/docker/standin-images.sh next to this
# repository) installs the engine and builds local images under those tags, and is stopped again
# at the end if it started the daemon.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
standin=${STANDIN_IMAGES:-$repo/../shared/docker/standin-images.sh}
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

log() { printf '== %s\n' "$*" >&2; }
fail() { printf 'docker-test: %s\n' "$*" >&2; exit 1; }

# --- the engine and the base images ----------------------------------------------------------
started_daemon=""
images_present() {
  command -v docker >/dev/null && docker info >/dev/null 2>&1 \
    && docker image inspect rust:1.95-slim-bookworm debian:bookworm-slim postgres:16-alpine >/dev/null 2>&1
}
if ! images_present; then
  [ -x "$standin" ] || fail "no Docker engine with the base images, and no $standin to make them (set STANDIN_IMAGES)"
  daemon_before=$(docker info >/dev/null 2>&1 && echo yes || echo no)
  log "making the base images with $standin"
  $sudo "$standin"
  [ "$daemon_before" = no ] && started_daemon=yes
fi
images_present || fail "the base images are still missing"

# Debian packages compose v1 only: there `docker compose …` runs as `docker-compose …`.
composes=()
command docker compose version >/dev/null 2>&1 && composes+=("v2")
command -v docker-compose >/dev/null && composes+=("v1")
[ ${#composes[@]} -gt 0 ] || fail "neither docker compose (v2) nor docker-compose (v1) is installed"
use_compose() {
  if [ "$1" = v1 ]; then
    docker() { if [ "$1" = compose ]; then shift; docker-compose "$@"; else command docker "$@"; fi; }
  else
    unset -f docker 2>/dev/null || true
  fi
}

for name in compactd; do
  if docker container inspect "$name" >/dev/null 2>&1; then
    fail "a container named $name exists already: this test would replace it"
  fi
done
docker volume inspect compactd-data >/dev/null 2>&1 && fail "a volume compactd-data exists already"
[ -e .env ] && fail ".env exists: this test writes its own from .env.example"

work=$(mktemp -d)
cleanup() {
  set +e
  command docker rm -f compactd >/dev/null 2>&1
  command docker volume rm compactd-data >/dev/null 2>&1
  for version in "${composes[@]}"; do
    use_compose "$version"
    docker compose down -v --remove-orphans >/dev/null 2>&1
  done
  rm -f "$repo/.env"
  rm -rf "$work"
  if [ -n "$started_daemon" ]; then
    $sudo "$standin" --stop >/dev/null 2>&1
  fi
}
trap cleanup EXIT

wait_ready() { # url
  for _ in $(seq 1 120); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$1/readyz")" = 200 ] && return 0
    sleep 1
  done
  return 1
}
python3 - "$work/session.jsonl" <<'PY'
import json, sys
lines = [{"type": "session", "version": 3, "id": "docker", "timestamp": "2026-11-25T10:00:00.000Z", "cwd": "/work/docker"}]
parent = None
for i in range(8):
    lines.append({"type": "message", "id": f"u{i}", "parentId": parent, "timestamp": "2026-11-25T10:00:01.000Z",
                  "message": {"role": "user", "content": f"step {i}: change src/file{i}.rs " + "x" * 300, "timestamp": 1}})
    lines.append({"type": "message", "id": f"a{i}", "parentId": f"u{i}", "timestamp": "2026-11-25T10:00:02.000Z",
                  "message": {"role": "assistant", "content": [{"type": "text", "text": f"done {i} " + "y" * 300}],
                              "provider": "p", "model": "m", "stopReason": "stop", "timestamp": 2}})
    parent = f"a{i}"
open(sys.argv[1], "w").write("".join(json.dumps(line) + "\n" for line in lines))
PY
json() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }

# --- 1. the image alone: the documented commands ----------------------------------------------------
log "docker build"
build_started=$(date +%s)
# The documented build, in the `dev` profile (DOCKER_PROFILE; the image's default is `dist`): the
# same Dockerfile, commands and image but for the compiler's optimizations, built in about four
# minutes on two cores where `dist` takes twelve and `release` ten and a half (BENCHMARKS.md):
# what this checks is the image, not the optimizer. DOCKER_PROFILE=dist builds it as users do.
docker build --build-arg PROFILE="${DOCKER_PROFILE:-dev}" -t compactd .
# compose builds the same layers with the same profile: from the cache.
export COMPACTD_BUILD_PROFILE="${DOCKER_PROFILE:-dev}"
log "built in $(( $(date +%s) - build_started )) s; $(docker image inspect -f '{{.Size}}' compactd | awk '{printf "%.0f MB", $1 / 1e6}')"

docker run -d --name compactd -p 127.0.0.1:8080:8080 -v compactd-data:/var/lib/compactd/data compactd
wait_ready http://127.0.0.1:8080 || { docker logs compactd; fail "the container never became ready"; }
KEY=$(docker logs compactd | grep -o 'cmpd_[0-9a-f]*' | head -1)
[ -n "$KEY" ] || { docker logs compactd; fail "no key was printed on the first start"; }
curl -s http://127.0.0.1:8080/readyz | grep -q '"status":"ready"' || fail "/readyz is not ready"

log "checks of the running container"
[ "$(docker exec compactd id -u)" != 0 ] || fail "compactd runs as root"
summary=$(curl -s "http://127.0.0.1:8080/k/$KEY/v1/compact" -H 'content-type: application/json' \
  -d '{"systemPrompt": "You summarize.", "prompt": "<conversation>\n[User]: fix the crash in src/parse.rs\n</conversation>"}' | json '["summary"]')
grep -q "src/parse.rs" <<<"$summary" || fail "/v1/compact did not summarize: $summary"
# Without the key, beyond loopback inside the container: refused (404 on the agent wire).
[ "$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:8080/v1/compact -H 'content-type: application/json' -d '{"prompt":"x"}')" = 404 ] \
  || fail "/v1/compact answered without a key"
id=$(curl -s http://127.0.0.1:8080/v1/sessions -H "authorization: Bearer $KEY" \
  -H 'content-type: application/x-ndjson' --data-binary @"$work/session.jsonl" | json '["id"]')

log "a new container on the same volume keeps the session and the key"
docker rm -f compactd >/dev/null
docker run -d --name compactd -p 127.0.0.1:8080:8080 -v compactd-data:/var/lib/compactd/data compactd
wait_ready http://127.0.0.1:8080 || { docker logs compactd; fail "the second container never became ready"; }
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:8080/v1/sessions/$id" -H "authorization: Bearer $KEY")" = 200 ] \
  || fail "the session did not survive a new container on the volume"
docker logs compactd | grep -q 'cmpd_' && fail "a second key was made although one was stored"

log "SIGTERM stops it cleanly within the grace period"
stop_started=$(date +%s)
docker stop -t 40 compactd >/dev/null
stopped_in=$(( $(date +%s) - stop_started ))
[ "$(docker inspect -f '{{.State.ExitCode}}' compactd)" = 0 ] || { docker logs compactd; fail "exit code $(docker inspect -f '{{.State.ExitCode}}' compactd) after SIGTERM"; }
[ "$stopped_in" -lt 40 ] || fail "SIGTERM took $stopped_in s"
docker logs compactd 2>&1 | grep -q 'compactd stopped' || fail "no clean stop in the log"
docker rm compactd >/dev/null
docker volume rm compactd-data >/dev/null

# --- 2. compose: the documented commands, with each compose that is installed -----------------------
for version in "${composes[@]}"; do
  use_compose "$version"
  log "compose ($version)"
  cp .env.example .env
  docker compose up -d --build
  wait_ready http://127.0.0.1:8080 || { docker compose logs; fail "compose ($version): never ready"; }
  curl -s http://127.0.0.1:8080/readyz | grep -q '"backend":"postgres"' || fail "compose ($version): not on PostgreSQL"
  id=$(curl -s http://127.0.0.1:8080/v1/sessions -H 'content-type: application/x-ndjson' \
    --data-binary @"$work/session.jsonl" | json '["id"]')
  entry=$(curl -s "http://127.0.0.1:8080/v1/sessions/$id/compactions" -H 'content-type: application/json' \
    -d '{"keepRecentTokens": 200}' | json '["entry"]["id"]')
  docker compose down
  docker compose up -d
  wait_ready http://127.0.0.1:8080 || { docker compose logs; fail "compose ($version): never ready after down/up"; }
  kept=$(curl -s "http://127.0.0.1:8080/v1/sessions/$id/compactions" | json '["compactions"][-1]["entryId"]')
  [ "$kept" = "$entry" ] || fail "compose ($version): the compaction did not survive down/up ($kept, not $entry)"
  docker compose run --rm compactd keys create --tenant alice | grep -q 'cmpd_' || fail "compose ($version): keys create printed no key"
  docker compose down -v
  rm -f .env
done
log "docker test passed"
