#!/usr/bin/env bash
# The long soak of docs/DIST.md ("Failures"): LeNet on MNIST, 4 workers, a compressing
# codec, STEPS steps (default 20,000) with a checkpoint every 1,000, in four parts joined
# by --resume. Every 10 s the trainer's resident memory (VmRSS) and open descriptors are
# written to OUT/soak.tsv; OUT/summary.txt gives each part's first and last sample after
# its warm-up. tests/test_soak.sh is the short version that make test runs.
#
#   DATA_DIR=... dev/soak.sh [OUT [CODEC [STEPS]]]     (defaults: dev/out/soak, sbc, 20000)
set -u
cd "$(dirname "$0")/.." || exit 1
OUT=${1:-dev/out/soak} CODEC=${2:-sbc} STEPS=${3:-20000}
mkdir -p "$OUT"
: "${DATA_DIR:?set DATA_DIR (the folder with mnist/)}"
export OMP_WAIT_POLICY=passive
printf 'part\tstep_time_s\trss_kib\tfds\n' >"$OUT/soak.tsv"
: >"$OUT/summary.txt"
part=0
for stop in $((STEPS / 4)) $((STEPS / 2)) $((3 * STEPS / 4)) "$STEPS"; do
    part=$((part + 1))
    resume=()
    [ $part -gt 1 ] && resume=(--resume "$OUT/soak.ckpt")
    ./train_lenet --workers 4 --batch 16 --codec "$CODEC" --steps "$STEPS" --stop-at "$stop" \
        --eval-every 1000 --print-every 500 --save "$OUT/soak.ckpt" --save-every 1000 \
        --log "$OUT/soak.csv" --quiet "${resume[@]}" >>"$OUT/out.txt" 2>&1 &
    pid=$!
    t0=$SECONDS
    while kill -0 $pid 2>/dev/null; do
        rss=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null)
        fds=$(ls "/proc/$pid/fd" 2>/dev/null | wc -l)
        [ -n "$rss" ] && printf '%d\t%d\t%s\t%s\n' $part $((SECONDS - t0)) "$rss" "$fds" >>"$OUT/soak.tsv"
        sleep 10
    done
    wait $pid
    rc=$?
    echo "part $part (to step $stop): exit $rc" >>"$OUT/summary.txt"
    [ $rc -eq 0 ] || exit $rc
done
# per part: the first sample after 60 s (the first evaluation and save allocate their
# buffers once) and the last
awk -F'\t' 'NR > 1 && $2 >= 60 { if (!($1 in f)) f[$1] = $3 " KiB, " $4 " fds"; l[$1] = $3 " KiB, " $4 " fds" }
    END { for (p = 1; p <= 4; p++) if (p in f) printf "part %d: after warm-up %s; last %s\n", p, f[p], l[p] }' \
    "$OUT/soak.tsv" >>"$OUT/summary.txt"
cat "$OUT/summary.txt"
