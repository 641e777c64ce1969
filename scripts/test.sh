#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds everything (failing on any compiler
# warning in our own code), then runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/bootstrap.sh

log=$(mktemp)
trap 'rm -f "$log"' EXIT
swift build --build-tests 2>&1 | tee "$log"
if grep -E "^$PWD/(Sources|Tests)/.*: warning:" "$log"; then
    echo "error: compiler warnings in Satchel's code (listed above)" >&2
    exit 1
fi

swift test --skip-build
