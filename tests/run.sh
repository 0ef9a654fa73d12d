#!/usr/bin/env bash
# Runs test binaries (arguments), sums their "RESULT passed failed" lines and
# ends with "N passed, N failed". A binary that exits without a RESULT line, or
# with a non-zero status but no reported failure, counts as one failure.
# TEST_JOBS=N (default: the number of cores) runs up to N tests at once; their lines
# are printed in the order of the arguments, each as soon as it and those before it
# have ended. TEST_ALONE="T ..." names tests that run with no other test beside them
# (those whose own timeouts or busy-polling MPI ranks would suffer from a neighbour).
# TEST_LIGHT="T ..." names tests that mostly wait (on a shaped link) and use little of a
# core: they run beside the TEST_JOBS others without taking a place of theirs.
# LOG_DIR=DIR keeps each binary's whole output in DIR/<name>.log.
# TEST_TIMES=FILE appends a line per test to FILE: its start and end (seconds since the
# run began), its exit status and its name; the gaps show where a core waited.
# TEST_TIMEOUT=SECONDS (default 1200, 0 for none): a binary still running then is
# stopped (TERM, KILL 10 s later) and counts as a failure, so a hang costs one test,
# not the whole run.
# A binary whose run ends in LeakSanitizer's own crash ("Tracer caught signal":
# its stop-the-world thread faulted, e.g. in a stale thread stack, which the
# emulation's fibers avoid, tests/emulation/emu_sched.cpp; no leak was reported and
# the binary's output may be lost) runs again, up to three runs in all, and says so.
set -u
limit=${TEST_TIMEOUT:-1200}
jobs=${TEST_JOBS:-$(nproc 2>/dev/null || echo 1)}
case $jobs in '' | *[!0-9]*) ;; *) jobs=$((10#$jobs)) ;; esac
case $jobs in '' | *[!0-9]* | 0) echo "run.sh: TEST_JOBS must be a positive number, not '$jobs'"; exit 2 ;; esac
alone=" ${TEST_ALONE:-} "
light=" ${TEST_LIGHT:-} "
times=${TEST_TIMES:-}
unset TEST_TIMES # (a test that runs tests/run.sh itself writes its own times nowhere)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# interrupted: the running tests are stopped too (timeout passes the signal on), in three
# passes 0.3 s apart: a test just starting may have no .pid yet, or not yet be timeout
trap 'for _ in 1 2 3; do for f in "$work"/*.pid; do [ -e "$f" ] && kill -TERM "$(cat "$f")" 2>/dev/null; done; sleep 0.3; done; wait; exit 130' INT TERM
passed=0
failed=0
t0=$EPOCHREALTIME

# run INDEX TEST: runs one test; leaves its output in $work/INDEX.out, its process in
# INDEX.pid, any retry notes in INDEX.note, and "exit-status seconds" in INDEX.end
# (written last)
run() {
    local out=$work/$1.out start rc try
    start=$EPOCHREALTIME
    for try in 1 2 3; do
        # (timeout 0 sets no limit, but still runs the test in a process group of its own
        # and passes a TERM or INT on to it)
        timeout --kill-after=10 "$limit" "$2" >"$out" 2>&1 </dev/null &
        echo $! >"$work/$1.pid"
        wait $!
        rc=$?
        rm -f "$work/$1.pid"
        [ "$rc" -ne 0 ] && [ "$try" -lt 3 ] && grep -q 'Tracer caught signal' "$out" &&
            grep -q 'LeakSanitizer has encountered a fatal error' "$out" || break
        echo "run.sh: ${2#build/}: LeakSanitizer's tracer crashed (no leak reported); running it again" >>"$work/$1.note"
    done
    if [ "$limit" != 0 ] && { [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; }; then
        echo "run.sh: stopped after ${limit} s (TEST_TIMEOUT)" >>"$out"
    fi
    echo "$rc $(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.1f", b-a}')" >"$work/$1.end.tmp"
    if [ -n "$times" ]; then
        awk -v t0="$t0" -v a="$start" -v b="$EPOCHREALTIME" -v rc="$rc" -v n="$2" \
            'BEGIN{printf "%.1f %.1f %d %s\n", a-t0, b-t0, rc, n}' >>"$times"
    fi
    rm -f "$work/$1.light"
    mv "$work/$1.end.tmp" "$work/$1.end"
}

# report INDEX TEST: prints an ended test's line and adds up its counts
report() {
    local out=$work/$1.out name=${2#build/} rc secs line p f
    read -r rc secs <"$work/$1.end"
    [ -e "$work/$1.note" ] && cat "$work/$1.note"
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
        mkdir -p "$LOG_DIR" && cp "$out" "$LOG_DIR/$(basename "$2").log"
    fi
}

tests=("$@")
shown=0
# show: reports, in order, every test from the first not yet shown whose run has ended
show() {
    while [ "$shown" -lt "${#tests[@]}" ] && [ -e "$work/$shown.end" ]; do
        report "$shown" "${tests[$shown]}"
        shown=$((shown + 1))
    done
}
for i in "${!tests[@]}"; do
    t=${tests[$i]}
    if [[ $alone == *" $t "* ]]; then
        wait
        show
        run "$i" "$t" &
        wait $!
    elif [[ $light == *" $t "* ]]; then
        touch "$work/$i.light"
        run "$i" "$t" &
    else
        while [ $(($(jobs -pr | wc -l) - $(find "$work" -name '*.light' | wc -l))) -ge "$jobs" ]; do
            wait -n
            show
        done
        run "$i" "$t" &
    fi
    show
done
while [ -n "$(jobs -pr)" ]; do
    wait -n
    show
done
show
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
