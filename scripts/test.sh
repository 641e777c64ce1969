#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds everything (failing on any compiler
# warning in our own code), starts the Kinto test servers unless SATCHEL_KINTO_URL already names
# one (scripts/kinto.sh), runs every test, then the short modes of the reliability campaign
# (docs/RELIABILITY.md): the crash campaign, each fuzz target for a few seconds, and the store and
# engine suites under ThreadSanitizer. SATCHEL_QUICK=1 stops after the tests.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/bootstrap.sh

log=$(mktemp)
kinto_root=""
cleanup() {
    rm -f "$log"
    if [ -n "$kinto_root" ]; then bash scripts/kinto.sh down "$kinto_root"; fi
}
trap cleanup EXIT
swift build --build-tests 2>&1 | tee "$log"
if grep -E "^$PWD/(Sources|Tests)/.*: warning:" "$log"; then
    echo "error: compiler warnings in Satchel's code (listed above)" >&2
    exit 1
fi

if [ -z "${SATCHEL_KINTO_URL:-}" ]; then
    kinto_root=$(mktemp -d /tmp/satchel-kinto.XXXXXX)
    chmod 755 "$kinto_root" # the user postgres must reach the PostgreSQL cluster inside
    kinto_env=$(bash scripts/kinto.sh up "$kinto_root")
    eval "$kinto_env"
    export SATCHEL_KINTO_REQUIRED=1 # the Kinto tests now fail instead of skipping without a server
fi

swift test --skip-build

if [ "${SATCHEL_QUICK:-0}" = 1 ]; then exit 0; fi
bash scripts/crash-campaign.sh --short
bash scripts/fuzz.sh "${SATCHEL_FUZZ_SECONDS:-5}"
SATCHEL_STRESS_SCALE=1 bash scripts/sanitizers.sh thread
