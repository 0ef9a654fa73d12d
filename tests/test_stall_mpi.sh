#!/usr/bin/env bash
# Stall detection under mpirun (--timeout; dist/comm_mpi.c): one of 4 ranks is
# stopped with SIGSTOP in mid-run (a wedged node); the job must end within the
# timeout plus a few seconds, non-zero, with a message naming the step, the
# operation and the rank that did not arrive, and leave no process behind. Then
# the same with rank 0 stopped, which the others name. (The local backend's
# stalled thread is tested in test_dist_comm.) Skipped without mpirun.
# Ends with "RESULT passed failed" (tests/run.sh).
set -u
cd "$(dirname "$0")/.." || exit 1
passed=0 failed=0
check() { # condition-status, message
    if [ "$1" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $2"; fi
}
if ! command -v mpirun >/dev/null 2>&1 || ! ./train_lenet --help | grep -q -- --timeout; then
    echo "mpirun or the MPI build missing: skipped"
    echo "RESULT 0 0"
    exit 0
fi
TMP=$(mktemp -d)
trap 'pkill -KILL -f "$TMP/imf" 2>/dev/null; rm -rf "$TMP"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMP_WAIT_POLICY=passive OMP_NUM_THREADS=1
for sp in train val; do
    for c in a b; do
        mkdir -p "$TMP/imf/$sp/$c"
        for i in 1 2; do { printf 'P5\n8 8\n255\n'; head -c 64 /dev/urandom; } >"$TMP/imf/$sp/$c/$i.pgm"; done
    done
done
# the pid of rank R of the running job
rank_pid() {
    for p in $(pgrep -f "folder:$TMP/imf"); do
        if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1"; then echo "$p"; return; fi
    done
}
for stopped in 2 0; do
    timeout 120 mpirun --oversubscribe -np 4 ./train_lenet --dataset "folder:$TMP/imf" --batch 1 --steps 1000000 \
        --quiet --eval-every -1 --print-every 100000 --timeout 3 >"$TMP/out" 2>"$TMP/err" &
    job=$!
    pid=""
    for _ in $(seq 1 100); do
        pid=$(rank_pid $stopped)
        [ -n "$pid" ] && grep -q "^exchange:" "$TMP/out" 2>/dev/null && break
        sleep 0.2
    done
    sleep 1
    kill -STOP "$pid"
    t0=$(date +%s)
    wait $job
    rc=$?
    secs=$(($(date +%s) - t0))
    if [ "$stopped" -eq 2 ]; then
        want="worker 2 did not arrive"  # alone: a rank waiting on it is named apart, as answering
    else
        want="and worker 0 did not answer: worker 0 is stalled"
    fi
    check "$([ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$secs" -le 15 ] &&
             grep -q "error: .*step [0-9]*: .* did not complete within 3 s (--timeout)" "$TMP/err" &&
             grep -q "$want" "$TMP/err"; echo $?)" \
        "rank $stopped stopped: expected the job to end within 15 s naming it; exit $rc after $secs s: $(grep error "$TMP/err" | head -2)"
    sleep 0.5
    check "$([ -z "$(pgrep -f "folder:$TMP/imf")" ]; echo $?)" "rank $stopped stopped: no process left behind"
done
# the whole job stopped (every rank, as Ctrl-Z stops mpirun's) for 1.5 times the timeout and
# continued: not a stall (common/clock.h WaitClock); the job ends as it would have. The
# stop comes once the log holds step 20 of 200, so it lands in mid-run on any machine.
timeout 120 mpirun --oversubscribe -np 4 ./train_lenet --dataset "folder:$TMP/imf" --batch 1 --steps 200 --quiet \
    --eval-every -1 --print-every 1 --log "$TMP/pause.csv" --timeout 3 >"$TMP/out" 2>"$TMP/err" &
job=$!
for _ in $(seq 1 300); do
    n=$(grep -c '^train,' "$TMP/pause.csv" 2>/dev/null)
    [ "${n:-0}" -ge 20 ] && break
    sleep 0.1
done
pids=""
for r in 0 1 2 3; do pids="$pids $(rank_pid $r)"; done
kill -STOP $pids
sleep 4.5
kill -CONT $pids
wait $job
rc=$?
check "$([ "$(echo $pids | wc -w)" -eq 4 ] && [ "$rc" -eq 0 ] && ! grep -q "did not complete" "$TMP/err"; echo $?)" \
    "every rank stopped for 4.5 s under --timeout 3, then continued: expected the job to end normally; exit $rc: $(grep error "$TMP/err" | head -2)"
echo "RESULT $passed $failed"
[ "$failed" -eq 0 ]
