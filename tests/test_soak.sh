#!/usr/bin/env bash
# A small soak (the long one is in docs/DIST.md, Failures): LeNet on a tiny image folder,
# 2 workers, 3lc, 3000 steps with a checkpoint every 200 steps, in three parts joined by
# --resume. In each part the trainer's resident memory and open file descriptors are
# sampled while it trains, after its first two evaluations and saves (which allocate
# their buffers once) and before its last 100 steps: the median of the second half of the
# samples may not exceed the first half's by more than 8 MiB (evaluation, saving, logging
# and the exchange keep nothing per step), nor may the descriptors grow.
# Ends with "RESULT passed failed" (tests/run.sh).
set -u
cd "$(dirname "$0")/.." || exit 1
passed=0 failed=0
check() { # condition-status, message
    if [ "$1" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $2"; fi
}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export OMP_WAIT_POLICY=passive OMP_NUM_THREADS=1
for sp in train val; do
    for c in a b; do
        mkdir -p "$TMP/imf/$sp/$c"
        for i in 1 2; do { printf 'P5\n8 8\n255\n'; head -c 64 /dev/urandom; } >"$TMP/imf/$sp/$c/$i.pgm"; done
    done
done
L="./train_lenet --dataset folder:$TMP/imf --batch 1 --workers 2 --codec 3lc --steps 3000 --quiet --eval-every 100
   --print-every 50 --save $TMP/s.ckpt --save-every 200 --log $TMP/s.csv"
rss() { awk '/^VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null; }
fds() { ls "/proc/$1/fd" 2>/dev/null | wc -l; }
part=0
for stop in 1000 2000 3000; do
    part=$((part + 1))
    resume=""
    [ "$part" -gt 1 ] && resume="--resume $TMP/s.ckpt"
    $L --stop-at $stop $resume >"$TMP/out" 2>"$TMP/err" &
    pid=$!
    : >"$TMP/samples"
    start=$(( (part - 1) * 1000 ))
    while kill -0 $pid 2>/dev/null; do
        step=$(tail -c 300 "$TMP/s.csv" 2>/dev/null | tail -1 | cut -d, -f2)
        case "$step" in ''|*[!0-9]*) step=0 ;; esac
        r=$(rss $pid) f=$(fds $pid)
        if [ -n "$r" ] && [ "$step" -ge $((start + 450)) ] && [ "$step" -lt $((stop - 100)) ]; then
            echo "$r $f" >>"$TMP/samples"
        fi
        sleep 0.05
    done
    wait $pid
    rc=$?
    check "$rc" "part $part (to step $stop): exit $rc: $(tail -c 300 "$TMP/err")"
    # the median of the first half of the samples against that of the second half (evaluations
    # and saves allocate and release in between; a leak raises the whole second half)
    n=$(wc -l <"$TMP/samples")
    half=$((n / 2))
    med() { sort -n | awk '{a[NR]=$1} END {print NR ? a[int((NR+1)/2)] : ""}'; }
    r0=$(head -n $half "$TMP/samples" | cut -d' ' -f1 | med)
    r1=$(tail -n $half "$TMP/samples" | cut -d' ' -f1 | med)
    f0=$(head -n $half "$TMP/samples" | cut -d' ' -f2 | med)
    f1=$(tail -n $half "$TMP/samples" | cut -d' ' -f2 | med)
    check "$([ "$half" -ge 5 ] && [ $((r1 - r0)) -le 8192 ]; echo $?)" \
        "part $part: resident memory (median of $half samples) ${r0:-?} KiB in its first half, ${r1:-?} KiB in its second (at most 8 MiB more)"
    check "$([ -n "$f0" ] && [ "$f1" -le "$f0" ]; echo $?)" "part $part: open descriptors (median) ${f0:-?} then ${f1:-?}"
    echo "part $part: RSS ${r0:-?} -> ${r1:-?} KiB, descriptors ${f0:-?} -> ${f1:-?}"
done
check "$(grep -q '^test,3000,' "$TMP/s.csv"; echo $?)" "the run reached step 3000 with an evaluation"
echo "RESULT $passed $failed"
[ "$failed" -eq 0 ]
