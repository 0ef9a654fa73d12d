#!/usr/bin/env bash
# ResNet-CIFAR training throughput on one GPU: gcx (build/bench/resnet_gpu:
# forward + backward on the GPU, SGD on the host arenas, arena copies included)
# against PyTorch eager (bench/resnet_torch.py --device cuda: everything on the
# GPU, cudnn.benchmark on), same models (option A), batch, step and fp32 mode.
# The two alternate for ROUNDS rounds per depth; per engine the best step and
# the median of the round medians count. gcx runs in both of its designs (SGD
# variable): "host", the trainer's (parameters mastered on the host, SGD on the
# host arenas), and "device" (--device-optim: parameters stay on the GPU, SGD as
# a kernel, as PyTorch does). FFT_WINOGRAD=1 lets gcx's cuDNN choice take FFT
# and Winograd convolutions too (off by default for precision; PyTorch's
# cudnn.benchmark may take them). HEURISTIC=1 ranks the convolution algorithms
# by cuDNN's heuristic in both (gcx --heuristic, the trainers' default; torch
# with cudnn.benchmark off) instead of timing them.
#
#   bench/resnet_gpu.sh [DEPTHS="20 56 110"] [BATCH=128] [STEPS=50] [ROUNDS=3] [TF32=0] [FFT_WINOGRAD=0] [HEURISTIC=0] [SGD="host device"] [PY=python3] [TORCH_DEVICE=cuda]
#   e.g. ROUNDS=5 bench/resnet_gpu.sh
# PY must be a Python whose torch has CUDA; without one only gcx is measured.
# TORCH_DEVICE=cpu runs the PyTorch side on the CPU instead: a rehearsal of this
# script where there is no GPU (tests/emulation/gpu_check_dry.sh), not a comparison.
set -eu
cd "$(dirname "$0")/.."
DEPTHS=${DEPTHS:-"20 56 110"}
BATCH=${BATCH:-128}
STEPS=${STEPS:-50}
ROUNDS=${ROUNDS:-3}
TF32=${TF32:-0}
SGD=${SGD:-"host device"}
PY=${PY:-python3}
TORCH_DEVICE=${TORCH_DEVICE:-cuda}
case $TORCH_DEVICE in cpu | cuda) ;; *) echo "TORCH_DEVICE must be cpu or cuda, not '$TORCH_DEVICE'"; exit 2 ;; esac
BIN=${BIN:-build/bench/resnet_gpu}
if [ -z "${NO_BUILD:-}" ]; then make -s "$BIN" >/dev/null; fi
[ -x "$BIN" ] || { echo "missing $BIN (make bench on a machine with nvcc)"; exit 1; }
GFLAG=""; TFLAG=""
if [ "$TF32" = 1 ]; then GFLAG="--tf32"; TFLAG="--tf32"; fi
if [ "${FFT_WINOGRAD:-0}" = 1 ]; then GFLAG="$GFLAG --fft-winograd"; fi
RANKING=""
if [ "${HEURISTIC:-0}" = 1 ]; then GFLAG="$GFLAG --heuristic"; TFLAG="$TFLAG --no-benchmark"; RANKING=", heuristic"; fi
have_torch=1
if ! "$PY" -c 'import sys, torch; sys.exit(0 if sys.argv[1] == "cpu" or torch.cuda.is_available() else 1)' "$TORCH_DEVICE" 2>/dev/null; then
    echo "note: $PY has no torch$([ "$TORCH_DEVICE" = cuda ] && echo ' with CUDA'); measuring gcx only"
    have_torch=0
elif [ "$TORCH_DEVICE" = cpu ]; then
    echo "note: PyTorch runs on the CPU (TORCH_DEVICE=cpu): its figures and the ratios are no comparison"
fi
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1 || true)
echo "ResNet-CIFAR training, batch $BATCH, $ROUNDS rounds of $STEPS steps, fp32$([ "$TF32" = 1 ] && echo ' (TF32 allowed)')$([ "${FFT_WINOGRAD:-0}" = 1 ] && echo ', gcx: FFT/Winograd allowed'), cuDNN algorithms by $([ "${HEURISTIC:-0}" = 1 ] && echo 'heuristic' || echo 'timing'), GPU: ${gpu:-unknown}"
med() { echo "$@" | tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END{print (NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2}'; }
summary=""
for D in $DEPTHS; do
    declare -A g_best=() g_all=()
    t_best=0; t_all=""
    for r in $(seq 1 "$ROUNDS"); do
        line="ResNet-$D round $r:"
        for v in $SGD; do
            vflag=""; [ "$v" = device ] && vflag="--device-optim"
            gout=$("$BIN" --depth "$D" --batch "$BATCH" --steps "$STEPS" $GFLAG $vflag)
            g=$(echo "$gout" | grep '^gcx images/s')
            [ "$r" = 1 ] && echo "$gout" | grep '^  per step' | sed "s/^/ResNet-$D gcx ($v SGD$RANKING)/"
            gb=$(echo "$g" | awk '{print $3}'); gm=$(echo "$g" | awk '{print $5}' | tr -d ')')
            g_all[$v]="${g_all[$v]:-} $gm"
            g_best[$v]=$(awk -v a="${g_best[$v]:-0}" -v b="$gb" 'BEGIN{print (b>a)?b:a}')
            line="$line gcx ($v SGD$RANKING) ${g#gcx } |"
        done
        if [ "$have_torch" = 1 ]; then
            t=$("$PY" bench/resnet_torch.py --device "$TORCH_DEVICE" --depth "$D" --batch "$BATCH" --steps "$STEPS" $TFLAG | grep '^torch images/s')
            tb=$(echo "$t" | awk '{print $3}'); tm=$(echo "$t" | awk '{print $5}' | tr -d ')')
            t_all="$t_all $tm"
            t_best=$(awk -v a="$t_best" -v b="$tb" 'BEGIN{print (b>a)?b:a}')
            line="$line $t"
        fi
        echo "$line"
    done
    for v in $SGD; do
        g_med=$(med ${g_all[$v]})
        if [ "$have_torch" = 1 ]; then
            t_med=$(med $t_all)
            res=$(awk -v d="$D" -v v="$v" -v k="$RANKING" -v a="${g_best[$v]}" -v b="$t_best" -v c="$g_med" -v e="$t_med" \
                'BEGIN{printf "ResNet-%-4s gcx (%s SGD%s) %9.1f img/s (median %9.1f) | torch %9.1f img/s (median %9.1f) | gcx/torch best %.2fx, median %.2fx", d, v, k, a, c, b, e, a/b, c/e}')
        else
            res=$(awk -v d="$D" -v v="$v" -v k="$RANKING" -v a="${g_best[$v]}" -v c="$g_med" 'BEGIN{printf "ResNet-%-4s gcx (%s SGD%s) %9.1f img/s (median %9.1f)", d, v, k, a, c}')
        fi
        summary="$summary$res
"
    done
    unset g_best g_all
done
echo "== summary (images/s, higher is better)"
printf '%s' "$summary"
