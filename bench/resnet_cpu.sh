#!/usr/bin/env bash
# ResNet training throughput on the CPU: gcx (build/bench/resnet_cpu) against
# PyTorch (bench/resnet_torch.py) in one run, same model, batch and threads.
# The two alternate for ROUNDS rounds so that load from other processes hits
# both alike; per engine the best and the median step over all rounds count.
#
#   bench/resnet_cpu.sh   with environment THREADS=2 BATCH=128 DEPTH=20 STEPS=10 ROUNDS=3
#                         TORCH_ARGS="--channels-last" (PyTorch's faster layout on CPU)
#                         OMP_WAIT_POLICY=passive (both engines use libgomp; on a loaded
#                         machine spinning threads at barriers cost both 30-60%)
#   e.g. THREADS=2 ROUNDS=5 bench/resnet_cpu.sh
set -eu
cd "$(dirname "$0")/.."
THREADS=${THREADS:-2}
BATCH=${BATCH:-128}
DEPTH=${DEPTH:-20}
STEPS=${STEPS:-10}
ROUNDS=${ROUNDS:-3}
PY=${PY:-/usr/bin/python3}
TORCH_ARGS=${TORCH_ARGS:---channels-last}
BIN=build/bench/resnet_cpu
if [ -z "${NO_BUILD:-}" ]; then make -s "$BIN" >/dev/null; fi
[ -x "$BIN" ] || { echo "missing $BIN (make bench)"; exit 1; }
CORES=$(nproc --all)
export OMP_NUM_THREADS=$THREADS
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
echo "ResNet-$DEPTH, batch $BATCH, $THREADS threads, $ROUNDS rounds of $STEPS steps, torch $TORCH_ARGS, OMP_WAIT_POLICY=$OMP_WAIT_POLICY; $CORES cores, load: $(cut -d' ' -f1-3 /proc/loadavg)"
g_best=0; t_best=0; g_all=""; t_all=""
for r in $(seq 1 "$ROUNDS"); do
    g=$("$BIN" --depth "$DEPTH" --batch "$BATCH" --threads "$THREADS" --steps "$STEPS" | grep '^gcx images/s')
    # shellcheck disable=SC2086
    t=$("$PY" bench/resnet_torch.py --depth "$DEPTH" --batch "$BATCH" --threads "$THREADS" --steps "$STEPS" $TORCH_ARGS | grep '^torch images/s')
    echo "round $r: $g | $t"
    gb=$(echo "$g" | awk '{print $3}'); gm=$(echo "$g" | awk '{print $5}' | tr -d ')')
    tb=$(echo "$t" | awk '{print $3}'); tm=$(echo "$t" | awk '{print $5}' | tr -d ')')
    g_all="$g_all $gm"; t_all="$t_all $tm"
    g_best=$(awk -v a="$g_best" -v b="$gb" 'BEGIN{print (b>a)?b:a}')
    t_best=$(awk -v a="$t_best" -v b="$tb" 'BEGIN{print (b>a)?b:a}')
done
med() { echo "$@" | tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END{print (NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2}'; }
g_med=$(med $g_all); t_med=$(med $t_all)
echo "gcx   images/s: best $g_best, median of round medians $g_med"
echo "torch images/s: best $t_best, median of round medians $t_med"
awk -v a="$g_best" -v b="$t_best" -v c="$g_med" -v d="$t_med" \
    'BEGIN{printf "ratio gcx/torch: best %.2fx, median %.2fx\n", a/b, c/d}'
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
