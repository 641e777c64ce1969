#!/usr/bin/env bash
# Fuzzing campaign: builds the SatchelFuzz driver with AddressSanitizer and libFuzzer into
# .build-fuzz, runs each target for a fixed time from a scratch copy of its seed corpus and its
# committed findings (Tests/Fuzz/Corpus/<target> and Regressions/<target>, with
# Tests/Fuzz/<target>.dict when there is one), and prints one summary line per target. Exits 1
# when any target found something: the inputs are then in .build-fuzz/findings/<target>/, and
# `swift run SatchelFuzz <target> <file>` replays one.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET…]    (60 s each, every target, by default)
set -euo pipefail
cd "$(dirname "$0")/.."

all_targets=(json key import rhoconnect kinto parse salesforce encryption)
seconds=${1:-60}
if [ $# -gt 0 ]; then shift; fi
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then targets=("${all_targets[@]}"); fi
case "$seconds" in
'' | *[!0-9]*)
    echo "usage: scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET…] (targets: ${all_targets[*]})" >&2
    exit 2
    ;;
esac

scratch=.build-fuzz
mkdir -p "$scratch"

# SwiftPM links an executable with `main` renamed to `<Target>_main`, which collides with the main
# of -sanitize=fuzzer's runtime. So the driver is built with coverage instrumentation only, links
# the runtime without its main, and calls LLVMFuzzerRunDriver itself (-DSATCHEL_FUZZING).
toolchain=$(dirname "$(dirname "$(readlink -f "$(command -v swift)")")")
arch=$(uname -m)
fuzzer_runtime="$toolchain/lib/swift/clang/lib/linux/libclang_rt.fuzzer_no_main-$arch.a"
if [ ! -f "$fuzzer_runtime" ]; then
    echo "error: no libFuzzer runtime at $fuzzer_runtime (a Linux Swift toolchain ships one)" >&2
    exit 1
fi
flags=(
    --scratch-path "$scratch"
    -Xswiftc -sanitize=address
    -Xswiftc -sanitize-coverage=edge,trace-cmp,inline-8bit-counters,pc-table
    -Xswiftc -DSATCHEL_FUZZING
    -Xlinker "$fuzzer_runtime" -Xlinker -lstdc++
)
started=$(date +%s)
if ! swift build --product SatchelFuzz "${flags[@]}" > "$scratch/build.log" 2>&1; then
    tail -n 40 "$scratch/build.log" >&2
    echo "error: the fuzzing build failed (the whole log: $scratch/build.log)" >&2
    exit 1
fi
echo "fuzz build: $(($(date +%s) - started)) s"
driver="$(swift build "${flags[@]}" --show-bin-path)/SatchelFuzz"

# libFuzzer reports a crash itself; Swift's backtracer would run first and trip AddressSanitizer.
export SWIFT_BACKTRACE=enable=no
found_any=0
for target in "${targets[@]}"; do
    if [ ! -d "Tests/Fuzz/Corpus/$target" ]; then
        echo "error: no seed corpus for target '$target' (targets: ${all_targets[*]})" >&2
        exit 2
    fi
    # A scratch copy of the seeds, so that what libFuzzer adds never reaches the committed corpus;
    # artifacts start empty, so that what is there was found by this run.
    corpus="$scratch/corpus/$target"
    # Not under `artifacts`: that folder is SwiftPM's own, and a build into the same scratch path
    # (another run of this script) empties it.
    artifacts="$scratch/findings/$target"
    log="$scratch/logs/$target.log"
    rm -rf "$corpus" "$artifacts"
    mkdir -p "$corpus" "$artifacts" "$scratch/logs"
    cp Tests/Fuzz/Corpus/"$target"/* "$corpus"/
    # The committed findings too, so that each run replays them under the sanitizers first (a
    # leak shows only there).
    if [ -d "Tests/Fuzz/Regressions/$target" ]; then cp Tests/Fuzz/Regressions/"$target"/* "$corpus"/; fi
    options=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$artifacts/" -print_final_stats=1)
    if [ -f "Tests/Fuzz/$target.dict" ]; then options+=(-dict="Tests/Fuzz/$target.dict"); fi
    # The output goes to a file, never a pipe: a tool waiting on the pipe could outlive the run.
    status=0
    run_started=$(date +%s)
    "$driver" "$target" "${options[@]}" "$corpus" > "$log" 2>&1 < /dev/null || status=$?
    run_time=$(($(date +%s) - run_started))

    # libFuzzer ends a clean run with `Done N runs in S second(s)` and a `#N DONE cov: … corp:
    # C/…` line. A run stopped by a finding has neither: its runs are the final statistics'
    # executed units (or the last `#N` status line), its time the run's wall time.
    runs=$(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\1/p' "$log" | tail -n 1)
    time=$(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\2/p' "$log" | tail -n 1)
    if [ -z "$runs" ]; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -n 1)
        if [ -z "$runs" ]; then runs=$(sed -n 's/^#\([0-9]*\).*/\1/p' "$log" | tail -n 1); fi
        time=$run_time
    fi
    items=$(sed -n 's/^#[0-9]*.*corp: \([0-9]*\)\/.*/\1/p' "$log" | tail -n 1)
    findings=$(find "$artifacts" -type f | wc -l)
    # A run that stopped with an error and left no input behind is a finding too (the log says).
    if [ "$status" -ne 0 ] && [ "$findings" -eq 0 ]; then findings=1; fi
    echo "fuzz $target: ${runs:-0} runs in ${time:-?} s, ${items:-0} corpus items, findings: $findings"
    if [ "$findings" -gt 0 ]; then
        found_any=1
        find "$artifacts" -type f | sed 's/^/    /'
        echo "    log: $log"
        # What stopped it, so that a run on another machine (CI) can be read without the log:
        # the sanitizer's or Swift's error line and the first frames of its stack.
        awk '/==ERROR|Fatal error|^SUMMARY|-- leak|ALARM|out-of-memory/ { print "    " $0; frames = 12; next }
             frames > 0 && /^ *#[0-9]+ / { print "    " $0; frames-- }' "$log" | head -n 40
    fi
done
exit "$found_any"
