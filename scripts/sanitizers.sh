#!/usr/bin/env bash
# The store and engine test suites (SatchelTests, SatchelSyncTests: the stress test included)
# under ThreadSanitizer and AddressSanitizer, each in a build folder of its own
# (.build-tsan, .build-asan). Any sanitizer report fails the run. See docs/RELIABILITY.md.
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
    case "$sanitizer" in
        thread) scratch=.build-tsan ;;
        address) scratch=.build-asan ;;
        *) echo "sanitizers.sh: unknown sanitizer '$sanitizer' (thread, address)" >&2; exit 2 ;;
    esac
    log=$(mktemp)
    echo "sanitizer $sanitizer: building and running SatchelTests and SatchelSyncTests in $scratch" >&2
    if swift test --scratch-path "$scratch" --sanitize="$sanitizer" --filter 'SatchelTests|SatchelSyncTests' >"$log" 2>&1; then
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
    rm -f "$log"
done
exit $status
