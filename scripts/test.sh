#!/usr/bin/env bash
# The whole test suite: installs what is missing, checks the code's layout (swift-format, in
# lint mode), builds everything (failing on any compiler warning in our own code), starts the
# Kinto test servers unless SATCHEL_KINTO_URL already names one (scripts/kinto.sh), runs every
# test, then the short modes of the reliability campaign
# (docs/RELIABILITY.md): the crash campaign, each fuzz target for a few seconds, and the store and
# engine suites under ThreadSanitizer. SATCHEL_QUICK=1 stops after the tests.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/bootstrap.sh

log=$(mktemp)
kinto_root=""
test_tmp=""
cleanup() {
    rm -f "$log"
    if [ -n "$test_tmp" ]; then rm -rf "$test_tmp"; fi
    if [ -n "$kinto_root" ]; then bash scripts/kinto.sh down "$kinto_root"; fi
}
trap cleanup EXIT
# The code's layout (.swift-format: 4 spaces, lines of at most 150 columns where they can break).
if ! swift format lint --strict --recursive --parallel Sources Tests Plugins Package.swift; then
    echo "error: swift-format found lines to re-format (swift format --in-place --recursive Sources Tests Plugins Package.swift)" >&2
    exit 1
fi
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

# The tests' temporary stores go to a RAM-backed directory when there is one with room. Opening
# a LevelDB database syncs its files, and on a disk busy with the suite's own writes one sync took
# tens of seconds (ext4 flushing gigabytes of dirty pages), holding a thread of the concurrency
# pool, which has two on two cores: two such opens at once stalled every in-process server, and
# the tests waiting on them timed out. What the tests check does not depend on the disk (the crash
# campaign below stays on it).
if [ -d /dev/shm ] && [ "$(df -Pk /dev/shm | awk 'NR == 2 { print $4 }')" -gt $((4 * 1024 * 1024)) ]; then
    test_tmp=$(mktemp -d /dev/shm/satchel-tests.XXXXXX)
    chmod 755 "$test_tmp" # as /tmp lets it: the user postgres must reach a test's own Kinto cluster inside
fi

# At most 32 tests at once (Swift Testing starts every test at once otherwise). Each loopback
# server (FlyingFox) keeps one of libdispatch's threads waiting in epoll_wait while it lives, and
# libdispatch lends a process about 255: started all at once, the suite's tests held ~120 servers
# (210 threads in all) in its first minute, and where a run met the limit every server and every
# URLSession stalled together and the clients timed out after a minute. With 32 at once the run
# peaks at ~75 threads and ends sooner (113 s against 126-132 s).
export SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH="${SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH:-32}"
TMPDIR="${test_tmp:-${TMPDIR:-/tmp}}" swift test --skip-build

if [ "${SATCHEL_QUICK:-0}" = 1 ]; then exit 0; fi
bash scripts/crash-campaign.sh --short
bash scripts/fuzz.sh "${SATCHEL_FUZZ_SECONDS:-5}"
TMPDIR="${test_tmp:-${TMPDIR:-/tmp}}" SATCHEL_STRESS_SCALE=1 bash scripts/sanitizers.sh thread
