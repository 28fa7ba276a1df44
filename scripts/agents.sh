#!/usr/bin/env bash
# The real coding-agent CLIs the gateway's end-to-end tests run (tests/it/real_agents.rs), from
# npm, pinned: their native packages are fetched with `npm pack` (no install scripts run) and
# unpacked under target/agents, once; their binaries are linked in target/agents/bin.
#
#   scripts/agents.sh install    fetch and unpack what is missing; prints the bin directory
#
# Versions are the ones the gateway was verified with (README "Point an agent at it").
set -euo pipefail
cd "$(dirname "$0")/.."

CLAUDE_CODE=2.1.330
CODEX=0.169.0
OPENCODE=1.18.33

home="$PWD/target/agents"
bin="$home/bin"
mkdir -p "$bin"

# fetch PACKAGE@VERSION DIR BINARY-PATH-IN-PACKAGE NAME
fetch() {
  local spec="$1" dir="$home/$2" path="$3" name="$4"
  if [ ! -x "$dir/package/$path" ]; then
    echo "agents: fetching $spec" >&2
    rm -rf "$dir" && mkdir -p "$dir"
    local tarball
    tarball=$(cd "$dir" && npm pack --silent "$spec" | tail -n 1)
    tar xzf "$dir/$tarball" -C "$dir"
    rm -f "$dir/$tarball"
    chmod +x "$dir/package/$path"
  fi
  ln -sf "$dir/package/$path" "$bin/$name"
}

case "${1:-install}" in
  install)
    fetch "@anthropic-ai/claude-code-linux-x64@$CLAUDE_CODE" "claude-code-$CLAUDE_CODE" claude claude
    fetch "@openai/codex@$CODEX-linux-x64" "codex-$CODEX" vendor/x86_64-unknown-linux-musl/bin/codex codex
    fetch "opencode-linux-x64@$OPENCODE" "opencode-$OPENCODE" bin/opencode opencode
    echo "$bin"
    ;;
  *)
    echo "usage: scripts/agents.sh install" >&2
    exit 2
    ;;
esac
