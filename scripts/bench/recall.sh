#!/usr/bin/env bash
# Recall's search latency over 100,000 stored turns (examples/recall_bench.rs), on SQLite and, when
# DATABASE_URL names a PostgreSQL server, on a fresh database there.
#   scripts/bench/recall.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release --quiet --example recall_bench
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
DATABASE_URL="sqlite:$work/recall.db" ./target/release/examples/recall_bench
if [ -n "${DATABASE_URL:-}" ]; then
  db=compactd_bench_recall_$$
  psql -q "$DATABASE_URL" -c "drop database if exists $db" -c "create database $db"
  DATABASE_URL="${DATABASE_URL%/*}/$db" ./target/release/examples/recall_bench
  psql -q "$DATABASE_URL" -c "drop database $db"
fi
