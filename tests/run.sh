#!/usr/bin/env bash
# Runs test binaries (arguments), sums their "RESULT passed failed" lines and
# ends with "N passed, N failed". A binary that exits without a RESULT line, or
# with a non-zero status but no reported failure, counts as one failure.
# LOG_DIR=DIR keeps each binary's whole output in DIR/<name>.log.
set -u
passed=0
failed=0
for t in "$@"; do
    name=${t#build/}
    out=$(mktemp)
    start=$EPOCHREALTIME
    "$t" >"$out" 2>&1
    rc=$?
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
