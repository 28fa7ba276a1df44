#!/usr/bin/env bash
# The test command of README.md: runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo test --locked "$@"
