#!/usr/bin/env bash
# The test command of README.md: makes sure PostgreSQL answers (scripts/ensure-postgres.sh), then
# runs the whole test suite. Storage tests run on PostgreSQL (a fresh database per test, created
# from DATABASE_URL) and on SQLite. Set DATABASE_URL to use another server.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${DATABASE_URL:-}" ]; then
  scripts/ensure-postgres.sh
  export DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres
fi
exec cargo test --locked "$@"
