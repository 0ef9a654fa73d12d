#!/usr/bin/env bash
# tests/run.sh, the runner of make test, on small fake tests: the counts of their RESULT
# lines added up, a missing line or a bad exit status counted as a failure, the lines
# printed in the order given although later tests end first, TEST_JOBS=2 running two
# tests at once and never three, TEST_JOBS=1 one, a TEST_ALONE test with nothing beside it, a
# TEST_LIGHT test beside two others, TEST_TIMES' lines, a test
# past TEST_TIMEOUT stopped, LeakSanitizer's tracer crash run again, an interrupted run
# leaving no test and no process a test started behind (with a time limit and with
# TEST_TIMEOUT=0), and a bad TEST_JOBS (0, 00, x, -1) refused.
# Ends with "RESULT passed failed" (tests/run.sh).
set -u
cd "$(dirname "$0")/.." || exit 1
unset LOG_DIR VERBOSE TEST_TIMEOUT TEST_JOBS TEST_ALONE TEST_LIGHT TEST_TIMES
R=$PWD/tests/run.sh
passed=0 failed=0
check() { # condition-status, message
    if [ "$1" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $2"; fi
}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cd "$TMP" || exit 1

# fake NAME SECONDS PASSED FAILED: a test that marks itself running in run/, sleeps, writes
# the tests running beside it as it starts and ends into beside.NAME and how many tests run
# then into count.NAME, and reports its counts
fake() {
    cat >"$1" <<EOF
#!/bin/sh
mkdir -p run && touch run/$1
ls run | grep -vx $1 >>beside.$1
ls run | wc -l >>count.$1
sleep $2
ls run | grep -vx $1 >>beside.$1
ls run | wc -l >>count.$1
rm run/$1
echo "RESULT $3 $4"
EOF
    chmod +x "$1"
}
fake slow 2 1 0
fake fast 0.5 2 0
fake bad 0.2 3 1
fake mid 1 4 0
printf '#!/bin/sh\necho no result line\n' >noline
printf '#!/bin/sh\necho "RESULT 5 0"\nexit 3\n' >badexit
chmod +x noline badexit

out=$(TEST_JOBS=2 $R ./slow ./fast ./bad ./noline ./badexit ./mid 2>&1)
rc=$?
check "$([ "$rc" -ne 0 ]; echo $?)" "a run with failures exits non-zero (exit $rc)"
check "$([ "$(echo "$out" | tail -n 1)" = "15 passed, 3 failed" ]; echo $?)" \
    "the counts added up, a missing RESULT line and exit 3 each one failure: $(echo "$out" | tail -n 1)"
order=$(echo "$out" | grep -oE '^\./[a-z]+' | paste -sd' ')
check "$([ "$order" = "./slow ./fast ./bad ./noline ./badexit ./mid" ]; echo $?)" \
    "lines in the order given, though ./slow ended last: $order"
check "$(echo "$out" | grep -q '^\./bad .*1 FAILED' && echo "$out" | grep -q '    | RESULT 3 1'; echo $?)" \
    "a failed test's line and its output"
check "$(grep -qx slow beside.fast || grep -qx fast beside.slow; echo $?)" "TEST_JOBS=2: ./fast ran beside ./slow"
most=$(cat count.* | sort -n | tail -n 1)
check "$([ "$most" = 2 ]; echo $?)" "TEST_JOBS=2: at most two tests at once (the most seen: $most)"

rm -f beside.* count.*
out=$(TEST_JOBS=1 $R ./slow ./fast 2>&1)
check "$([ "$(echo "$out" | tail -n 1)" = "3 passed, 0 failed" ] && [ ! -s beside.slow ] && [ ! -s beside.fast ]; echo $?)" \
    "TEST_JOBS=1: one test at a time: $(echo "$out" | tail -n 1), beside: $(cat beside.* 2>/dev/null | paste -sd' ')"

rm -f beside.* count.*
out=$(TEST_JOBS=2 TEST_ALONE="./mid" $R ./slow ./mid ./fast 2>&1)
check "$([ "$(echo "$out" | tail -n 1)" = "7 passed, 0 failed" ] && [ ! -s beside.mid ] && ! grep -qx mid beside.*; echo $?)" \
    "TEST_ALONE: nothing beside ./mid: $(echo "$out" | tail -n 1), beside it: $(cat beside.mid 2>/dev/null)"

# TEST_LIGHT: ./light (not marked in run/) runs beside two others at TEST_JOBS=2, which
# stay two at a time; TEST_TIMES: a line per test, start <= end, in the run's seconds
rm -f beside.* count.*
printf '#!/bin/sh\nsleep 0.3\nls run >seen.light\nsleep 1.2\necho "RESULT 1 0"\n' >light
chmod +x light
out=$(TEST_JOBS=2 TEST_LIGHT="./light" TEST_TIMES="$TMP/times" $R ./light ./slow ./fast ./bad 2>&1)
check "$([ "$(echo "$out" | tail -n 1)" = "7 passed, 1 failed" ] && grep -qx slow seen.light && grep -qx fast seen.light; echo $?)" \
    "TEST_LIGHT: ./light beside ./slow and ./fast: $(echo "$out" | tail -n 1), beside it: $(paste -sd' ' seen.light)"
most=$(cat count.* | sort -n | tail -n 1)
check "$([ "$most" = 2 ]; echo $?)" "TEST_LIGHT: the others still at most two at once (the most seen: $most)"
check "$([ "$(wc -l <"$TMP/times")" = 4 ] && awk 'NF != 4 || $1 > $2 { bad = 1 } END { exit bad }' "$TMP/times" &&
         grep -q ' 0 \./slow$' "$TMP/times" && grep -q ' \./light$' "$TMP/times"; echo $?)" \
    "TEST_TIMES: one line per test: $(paste -sd'|' "$TMP/times")"

printf '#!/bin/sh\nsleep 30\n' >hang
chmod +x hang
out=$(TEST_TIMEOUT=1 $R ./hang ./fast 2>&1)
check "$(echo "$out" | grep -q '^\./hang .*1 FAILED.*exit 124' && echo "$out" | grep -q 'stopped after 1 s' &&
         [ "$(echo "$out" | tail -n 1)" = "2 passed, 1 failed" ]; echo $?)" "a test past TEST_TIMEOUT stopped and counted: $out"

# LeakSanitizer's tracer crash on the first run only
cat >lsan <<'EOF'
#!/bin/sh
if [ ! -e lsan.once ]; then
    touch lsan.once
    echo "Tracer caught signal 11"; echo "==1==LeakSanitizer has encountered a fatal error."; exit 1
fi
echo "RESULT 6 0"
EOF
chmod +x lsan
out=$($R ./lsan 2>&1)
check "$(echo "$out" | grep -q "LeakSanitizer's tracer crashed (no leak reported); running it again" &&
         [ "$(echo "$out" | tail -n 1)" = "6 passed, 0 failed" ]; echo $?)" "a tracer crash runs the test again: $out"

# an interrupted run stops its tests and what they started (a child process), with a time
# limit and without one (TEST_TIMEOUT=0)
printf '#!/bin/sh\necho $$ >pid.$1\nsleep 60 &\necho $! >child.$1\nwait\n' >long
printf '#!/bin/sh\nexec ./long a\n' >long_a
printf '#!/bin/sh\nexec ./long b\n' >long_b
chmod +x long long_a long_b
# running: the process exists and is not a zombie (an orphan's exit status may wait for
# an init that reaps late)
running() { local s; s=$(ps -o stat= -p "$1" 2>/dev/null) && [ "${s#Z}" = "$s" ]; }
for lim in 1200 0; do
    rm -f pid.* child.*
    TEST_TIMEOUT=$lim TEST_JOBS=2 $R ./long_a ./long_b >/dev/null 2>&1 &
    runner=$!
    for _ in $(seq 50); do [ -e child.a ] && [ -e child.b ] && break; sleep 0.1; done
    kill -TERM $runner
    wait $runner
    rc=$?
    sleep 0.5
    alive=""
    for p in pid.a pid.b child.a child.b; do [ -e $p ] && running "$(cat $p)" && alive="$alive $p"; done
    check "$([ -e child.a ] && [ -e child.b ] && [ -z "$alive" ] && [ "$rc" -ne 0 ]; echo $?)" \
        "TEST_TIMEOUT=$lim: TERM to run.sh stops the running tests and their children (exit $rc; still running:${alive:- none})"
    for p in pid.a pid.b child.a child.b; do [ -e $p ] && kill "$(cat $p)" 2>/dev/null; done
done

for j in 0 00 x -1; do
    out=$(TEST_JOBS=$j $R ./fast 2>&1)
    rc=$?
    check "$([ "$rc" -eq 2 ] && echo "$out" | grep -q 'TEST_JOBS must be a positive number'; echo $?)" \
        "TEST_JOBS='$j' refused: exit $rc: $out"
done
echo "RESULT $passed $failed"
[ "$failed" -eq 0 ]
