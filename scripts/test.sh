#!/usr/bin/env bash
# The full test tier of README.md (`cargo test` alone is the fast one, which skips what needs
# more than Rust): makes sure PostgreSQL answers (scripts/ensure-postgres.sh), then
# runs the whole test suite, then the Docker smoke test (scripts/docker-test.sh). Storage tests run on PostgreSQL (a fresh database per test, created
# from DATABASE_URL) and on SQLite. Set DATABASE_URL to use another server. The console's
# end-to-end tests drive Debian's headless chromium through chromedriver: both are installed
# here when missing (CHROMIUM and CHROMEDRIVER name others). The real coding agents the gateway
# tests run come from npm (scripts/agents.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${DATABASE_URL:-}" ]; then
  scripts/ensure-postgres.sh
  export DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres
fi
if ! command -v "${CHROMEDRIVER:-chromedriver}" >/dev/null || [ ! -x "${CHROMIUM:-/usr/bin/chromium}" ]; then
  echo "installing chromium and chromium-driver for the console's browser tests" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
fi
# The real agents the gateway's end-to-end tests run (Claude Code, Codex, OpenCode; pinned, from
# npm, once, under target/agents).
COMPACTD_AGENTS_BIN="$(scripts/agents.sh install)"
export COMPACTD_AGENTS_BIN
# The providers' official SDKs the compaction wires are tested with (pinned, from PyPI, once,
# under target/sdks).
scripts/sdks.sh install >/dev/null
# The full tier: a test whose part is missing fails instead of skipping (crates/compactd-testkit/src/tiers.rs).
export COMPACTD_TEST_FULL=1
cargo test --locked "$@"
# The Docker smoke test (docs/operations.md's Docker commands, built and run); COMPACTD_TEST_DOCKER=0 skips
# it for a quick run of the suite alone.
if [ "${COMPACTD_TEST_DOCKER:-1}" != 0 ] && [ $# -eq 0 ]; then
  scripts/docker-test.sh
fi
