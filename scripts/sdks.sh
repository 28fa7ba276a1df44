#!/usr/bin/env bash
# The official provider SDKs the gateway's compaction wires are tested with (tests/it/agents/sdks.rs
# runs scripts/sdk/*.py): OpenAI's and Anthropic's Python SDKs and OpenAI's Agents SDK, pinned,
# in a virtualenv under target/sdks, installed once. Prints the virtualenv's python.
#
#   scripts/sdks.sh install
#
# Versions are the ones docs/compatibility.md lists as checked.
set -euo pipefail
cd "$(dirname "$0")/.."

OPENAI=3.51.0
ANTHROPIC=2.10.0
AGENTS=0.24.0

venv="$PWD/target/sdks/venv"
stamp="$venv/.pinned-openai-$OPENAI-anthropic-$ANTHROPIC-agents-$AGENTS"
if [ ! -f "$stamp" ]; then
  echo "sdks: installing openai==$OPENAI anthropic==$ANTHROPIC openai-agents==$AGENTS into $venv" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "openai==$OPENAI" "anthropic==$ANTHROPIC" "openai-agents==$AGENTS" >&2
  touch "$stamp"
fi
echo "$venv/bin/python"
