#!/usr/bin/env bash
# Runs test binaries (arguments), sums their "RESULT passed failed" lines and
# ends with "N passed, N failed". A binary that exits without a RESULT line, or
# with a non-zero status but no reported failure, counts as one failure.
# LOG_DIR=DIR keeps each binary's whole output in DIR/<name>.log.
# TEST_TIMEOUT=SECONDS (default 1200, 0 for none): a binary still running then is
# stopped (TERM, KILL 10 s later) and counts as a failure, so a hang costs one test,
# not the whole run.
# A binary whose run ends in LeakSanitizer's own crash ("Tracer caught signal":
# its stop-the-world thread faulted, e.g. in a stale thread stack, which the
# emulation's fibers avoid, tests/emulation/emu_sched.cpp; no leak was reported and
# the binary's output may be lost) runs again, up to three runs in all, and says so.
set -u
limit=${TEST_TIMEOUT:-1200}
passed=0
failed=0
for t in "$@"; do
    name=${t#build/}
    out=$(mktemp)
    start=$EPOCHREALTIME
    for try in 1 2 3; do
        if [ "$limit" != 0 ]; then
            timeout --kill-after=10 "$limit" "$t" >"$out" 2>&1
        else
            "$t" >"$out" 2>&1
        fi
        rc=$?
        [ "$rc" -ne 0 ] && [ "$try" -lt 3 ] && grep -q 'Tracer caught signal' "$out" &&
            grep -q 'LeakSanitizer has encountered a fatal error' "$out" || break
        echo "run.sh: $name: LeakSanitizer's tracer crashed (no leak reported); running it again"
    done
    if [ "$limit" != 0 ] && { [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; }; then
        echo "run.sh: stopped after ${limit} s (TEST_TIMEOUT)" >>"$out"
    fi
    secs=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.1f", b-a}')
    line=$(grep -E '^RESULT [0-9]+ [0-9]+$' "$out" | tail -n 1)
    if [ -n "$line" ]; then
        p=$(echo "$line" | cut -d' ' -f2)
        f=$(echo "$line" | cut -d' ' -f3)
    else
        p=0
        f=1
    fi
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
    passed=$((passed + p))
    failed=$((failed + f))
    if [ "$f" -ne 0 ]; then
        printf '%-36s %4d passed %3d FAILED  (%ss, exit %d)\n' "$name" "$p" "$f" "$secs" "$rc"
        sed 's/^/    | /' "$out" | tail -n 60
    else
        printf '%-36s %4d passed  (%ss)\n' "$name" "$p" "$secs"
        [ -n "${VERBOSE:-}" ] && sed 's/^/    | /' "$out"
    fi
    if [ -n "${LOG_DIR:-}" ]; then
        mkdir -p "$LOG_DIR" && cp "$out" "$LOG_DIR/$(basename "$t").log"
    fi
    rm -f "$out"
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
