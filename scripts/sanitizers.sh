#!/usr/bin/env bash
# The store and engine test suites (SatchelTests, SatchelSyncTests: the stress test included)
# under ThreadSanitizer and AddressSanitizer, each in a build folder of its own
# (.build-tsan, .build-asan), all but the differential query test (see below). Any sanitizer
# report fails the run. See docs/RELIABILITY.md.
#
#   bash scripts/sanitizers.sh                 both, the stress test at 4x its size
#   bash scripts/sanitizers.sh thread          ThreadSanitizer only
#   bash scripts/sanitizers.sh address         AddressSanitizer only
#
# SATCHEL_STRESS_SCALE overrides the stress test's size. A first build of each takes some
# minutes; later runs rebuild what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/bootstrap.sh
sanitizers=("$@")
if [ "${#sanitizers[@]}" -eq 0 ]; then sanitizers=(thread address); fi
export SATCHEL_STRESS_SCALE="${SATCHEL_STRESS_SCALE:-4}"
# A report ends the process with a non-zero status; TSan's also names both threads' stacks.
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
export ASAN_OPTIONS="halt_on_error=1 detect_leaks=0 ${ASAN_OPTIONS:-}"

status=0
for sanitizer in "${sanitizers[@]}"; do
    # Under ThreadSanitizer, Satchel's locks are pthread mutexes, which it sees (Locked.swift:
    # Synchronization.Mutex waits in the standard library's futex calls, which it cannot).
    flags=()
    case "$sanitizer" in
        thread) scratch=.build-tsan; flags=(-Xswiftc -DSATCHEL_TSAN) ;;
        address) scratch=.build-asan ;;
        *) echo "sanitizers.sh: unknown sanitizer '$sanitizer' (thread, address)" >&2; exit 2 ;;
    esac
    log=$(mktemp)
    echo "sanitizer $sanitizer: building and running SatchelTests and SatchelSyncTests in $scratch" >&2
    # The differential query test is left out: thousands of random queries against a naive
    # evaluator, single-threaded, which take minutes plain and the better part of an hour under
    # a sanitizer, for nothing a sanitizer would find that the other tests do not reach.
    if swift test --scratch-path "$scratch" --sanitize="$sanitizer" "${flags[@]}" --filter 'SatchelTests|SatchelSyncTests' \
        --skip 'QueryDifferentialTests' >"$log" 2>&1; then
        result=passed
    else
        result=failed
        status=1
    fi
    reports=$(grep -c -E "^(WARNING: ThreadSanitizer|==[0-9]+==ERROR: AddressSanitizer)" "$log" || true)
    summary=$(grep -E "^(✔|✘) Test run with" "$log" | tail -1 || true)
    stress=$(grep -E "^stress: " "$log" | tail -1 || true)
    echo "sanitizer $sanitizer: $result; reports: $reports; ${summary:-no test summary}"
    if [ -n "$stress" ]; then echo "sanitizer $sanitizer: $stress"; fi
    if [ "$result" = failed ] || [ "$reports" != 0 ]; then
        grep -E -A30 "^(WARNING: ThreadSanitizer|==[0-9]+==ERROR: AddressSanitizer)" "$log" | head -120 >&2 || true
        grep -E "^✘" "$log" | head -20 >&2 || true
        status=1
    fi
    if [ "$status" = 0 ]; then rm -f "$log"; else echo "sanitizer $sanitizer: the whole log is $log" >&2; fi
done
exit $status
