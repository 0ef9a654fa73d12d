#!/usr/bin/env bash
# Every GPU check of docs/GPU.md in one command, for a session on a GPU machine:
#
#   scripts/gpu_check.sh [--bundle FILE] [--logs DIR] [PHASE...]
#
# PHASE: env, test, train, bench (default: these four, in that order), sanitize
# (asked for by name: slow). Each phase
# prints a short summary and keeps its whole output in DIR (default
# build/gpu-logs): env.log, tests/<binary>.log, train.log, bench.log; the last
# lines printed are a table of every phase's outcome.
#   env    the GPU, the driver, nvcc, and whether every binary finds its libraries
#   test   the CUDA parity tests (tests/cuda/*: what `make test-cuda` runs)
#   train  the trainers on the GPU against the same runs on the CPU: CharLSTM
#          (200 steps), ResNet-20 on a generated image folder (40 steps, and 2
#          workers with TernGrad); where a GPU step's time goes (ResNet-110,
#          batch 128, fp32, 3lc and dgc: scripts/step_breakdown.py); WordLSTM
#          throughput (PTB, 50 steps)
#   bench  bench/resnet_gpu.sh (gcx against PyTorch eager), bench/codecs_gpu and
#          bench/exchange (the exchange's host time on this machine's cores)
#   sanitize  compute-sanitizer memcheck and racecheck (shared-memory races, which
#          the host emulation cannot show) on the kernel tests, each run capped at
#          GCX_SANITIZE_SECONDS (default 240)
# --bundle FILE: unpack a bundle made by scripts/gpu_bundle.sh (on a machine with
# gcx's build dependencies, same commit) instead of building here; its libraries
# and datasets are used (it unpacks into this checkout, replacing binaries built
# here: after trying it on a development machine, run make all bench build-cuda-tests).
# Without it the binaries are built with make.
# Environment: DEPTHS, ROUNDS, STEPS for bench/resnet_gpu.sh; GCX_TRAIN_STEPS
# (default 200) for the CharLSTM comparison.
set -uo pipefail
BUNDLE=""
LOGS=""
phases=()
while [ $# -gt 0 ]; do
    case "$1" in
    --bundle) BUNDLE=$2; shift 2 ;;
    --logs) LOGS=$2; shift 2 ;;
    -h | --help) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; exit 0 ;;
    env | test | train | bench | sanitize) phases+=("$1"); shift ;;
    *) echo "gpu_check: unknown argument '$1' (phases: env test train bench sanitize; --bundle FILE, --logs DIR)" >&2; exit 2 ;;
    esac
done
[ ${#phases[@]} -gt 0 ] || phases=(env test train bench)
# paths given relative to where the script was started from; then run in the checkout
abs() { case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
[ -n "$BUNDLE" ] && BUNDLE=$(abs "$BUNDLE")
[ -n "$LOGS" ] && LOGS=$(abs "$LOGS")
[ -n "${DATA_DIR:-}" ] && DATA_DIR=$(abs "$DATA_DIR")
cd "$(dirname "$0")/.." || exit 1
: "${LOGS:=build/gpu-logs}"
mkdir -p "$LOGS"
SUMMARY=$LOGS/summary.txt
: >"$SUMMARY"
note() { printf '%-6s %s\n' "$1" "$2" >>"$SUMMARY"; } # phases run in pipelines: subshells

# ---- binaries and libraries
DATA=${DATA_DIR:-data}
if [ -n "$BUNDLE" ]; then
    tar -xJf "$BUNDLE" || { echo "gpu_check: cannot unpack $BUNDLE" >&2; exit 1; }
    echo "gpu_check: unpacked $BUNDLE (built from $(cat build/gpu-commit); this checkout: $(git rev-parse HEAD 2>/dev/null || echo unknown))"
    [ -d build/gpu-data ] && DATA=build/gpu-data
    # the bundle's libraries, then NVIDIA's: the CUDA toolkit's, then those of
    # Python wheels (cuDNN, NCCL may only be there)
    libs=$PWD/build/gpu-libs
    for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do [ -d "$d" ] && libs=$libs:$d; done
    py=$(command -v python3 || true)
    if [ -n "$py" ]; then
        for d in $("$py" -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
            for l in "$d"/nvidia/*/lib; do [ -d "$l" ] && libs=$libs:$l; done
        done
    fi
    export LD_LIBRARY_PATH=$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export NO_BUILD=1
else
    export PATH=$PATH:/usr/local/cuda/bin
    make -s -j"$(nproc)" all build-cuda-tests build/bench/resnet_gpu build/bench/codecs_gpu build/bench/exchange 2>&1 | tail -n 20 | tee "$LOGS/build.log"
fi
export DATA_DIR=$DATA
TESTS=()
for t in tests/cuda/test_*.c; do TESTS+=("build/tests/cuda/$(basename "$t" .c)"); done
BINS=(./train_resnet ./train_lstm ./train_lenet ./gcx build/bench/resnet_gpu build/bench/codecs_gpu build/bench/exchange "${TESTS[@]}")

phase_env() {
    nvidia-smi || echo "nvidia-smi failed"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1
    (command -v nvcc && nvcc --version | tail -n 2) 2>&1 || echo "nvcc: not on PATH"
    echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
    local missing=0
    for b in "${BINS[@]}"; do
        if [ ! -x "$b" ]; then echo "missing binary $b"; missing=$((missing + 1)); continue; fi
        local nf
        nf=$(ldd "$b" | grep "not found" | sort -u)
        [ -n "$nf" ] && { echo "$b: $nf"; missing=$((missing + 1)); }
    done
    ldd ./train_resnet | grep -E "cudart|cublas|cudnn|nccl|openblas"
    gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
    note env "GPU: ${gpu:-none}; binaries with unresolved libraries or missing: $missing"
}

phase_test() {
    local out
    out=$(LOG_DIR="$LOGS/tests" tests/run.sh "${TESTS[@]}" 2>&1)
    echo "$out"
    note test "$(echo "$out" | tail -n 1) (per binary: $(echo "$out" | grep -E '^tests/cuda' | awk '{printf "%s %s/%s; ", $1, $2, ($4 == "FAILED" ? $4 "=" $3 : "ok")}'))"
}

# "step loss" of a trainer's progress lines
losses() { awk '/^step /{split($2, a, "/"); for (i = 1; i < NF; i++) if ($i == "loss") print a[1], $(i + 1)}' "$1"; }
last_eval() { grep -E '^eval' "$1" | tail -n 1 | tr -s ' ' | cut -c1-100; }

# a small image folder (10 classes of 32x32 PPM: class-coloured stripes + noise), for
# ResNet training without CIFAR-10 on this machine
make_folder() { python3 scripts/make_image_folder.py "$1" 64 16; }

run_pair() { # name, args...: the same run on the CPU and the GPU; losses side by side
    local name=$1; shift
    local rc_c rc_g
    for dev in cpu cuda; do
        local t0=$EPOCHREALTIME
        "$@" --device "$dev" --log "$LOGS/train_${name}_$dev.jsonl" >"$LOGS/train_${name}_$dev.log" 2>&1
        local rc=$?
        echo "--- $name on $dev: exit $rc, $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.1f", b-a}')s: $*"
        tail -n 3 "$LOGS/train_${name}_$dev.log"
        if [ "$dev" = cpu ]; then rc_c=$rc; else rc_g=$rc; fi
    done
    local table=$LOGS/train_${name}_losses.txt
    awk 'NR == FNR {c[$1] = $2; next} ($1 in c) {print $1, c[$1], $2}' <(losses "$LOGS/train_${name}_cpu.log") \
        <(losses "$LOGS/train_${name}_cuda.log") | awk '{d = $2 - $3; if (d < 0) d = -d; m = $2 < 0 ? -$2 : $2; printf "%8d %10s %10s %9.2e\n", $1, $2, $3, (m > 0 ? d / m : d)}' >"$table"
    printf '%8s %10s %10s %9s\n' step "cpu loss" "cuda loss" "rel diff"
    cat "$table"
    local worst
    worst=$(awk 'BEGIN{w = -1} {if ($4 > w) w = $4} END{if (w < 0) print "none compared"; else printf "%.2e", w}' "$table")
    note train "$name: exit cpu $rc_c, cuda $rc_g; largest relative loss difference over the printed steps: $worst"
    note train "  cpu  $(last_eval "$LOGS/train_${name}_cpu.log")"
    note train "  cuda $(last_eval "$LOGS/train_${name}_cuda.log")"
    note train "  $(python3 scripts/step_breakdown.py "$LOGS/train_${name}_cuda.jsonl")"
}

# where a GPU step's time goes (scripts/step_breakdown.py): the trainers encode and
# update on the host, so this measures what a device-side exchange could save
step_share() { # name, args...: one run on the GPU
    local name=$1; shift
    local t0=$EPOCHREALTIME
    "$@" --device cuda --log "$LOGS/share_$name.jsonl" >"$LOGS/share_$name.log" 2>&1
    echo "--- $name on cuda: exit $?, $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.1f", b-a}')s: $*"
    tail -n 2 "$LOGS/share_$name.log"
    note train "share $(python3 scripts/step_breakdown.py "$LOGS/share_$name.jsonl")"
}

phase_train() {
    local steps=${GCX_TRAIN_STEPS:-200}
    run_pair charlstm ./train_lstm --model char --workers 1 --steps "$steps" --print-every 20 --quiet
    local folder=/tmp/gcx-folder
    [ -d "$folder/train" ] || make_folder "$folder"
    run_pair resnet20 ./train_resnet --dataset "folder:$folder" --image-size 32 --workers 1 --batch 32 --lr 0.01 \
        --steps 40 --print-every 10 --eval-every 0 --quiet
    run_pair resnet20_terngrad_2w ./train_resnet --dataset "folder:$folder" --image-size 32 --workers 2 --batch 32 --lr 0.01 \
        --steps 40 --print-every 10 --eval-every 0 --codec terngrad --quiet
    for c in fp32 3lc dgc; do
        step_share "resnet110_$c" ./train_resnet --dataset "folder:$folder" --image-size 32 --depth 110 --workers 1 \
            --batch 128 --lr 0.01 --steps 30 --print-every 5 --eval-every 0 --codec "$c" --quiet
    done
    if [ -d "$DATA_DIR/ptb" ]; then
        local t0=$EPOCHREALTIME
        ./train_lstm --model word --workers 1 --steps 50 --print-every 10 --device cuda --quiet >"$LOGS/train_wordlstm_cuda.log" 2>&1
        echo "--- wordlstm on cuda: exit $?, $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.1f", b-a}')s"
        tail -n 4 "$LOGS/train_wordlstm_cuda.log"
        note train "wordlstm cuda, 50 steps: $(grep -E '^(step|done)' "$LOGS/train_wordlstm_cuda.log" | tail -n 2 | tr -s ' ' | cut -c1-100 | paste -sd'|')"
    fi
}

phase_bench() {
    local out
    out=$(bench/resnet_gpu.sh 2>&1)
    echo "$out"
    while IFS= read -r l; do note bench "$l"; done < <(echo "$out" | grep -E '^ResNet-[0-9]+ +gcx')
    out=$(build/bench/codecs_gpu 2>&1)
    echo "$out"
    while IFS= read -r l; do note bench "$l"; done < <(echo "$out" | grep -E '^(GPU codec|codec |[a-z0-9]+)' | head -n 60)
    # the exchange's host time with this host's cores (docs/DIST.md "Host time")
    out=$(OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-active} build/bench/exchange --steps 20 2>&1)
    echo "$out"
    while IFS= read -r l; do note bench "exchange $l"; done < <(echo "$out" | grep -E '^[a-z0-9]+ ')
}

phase_sanitize() {
    local cs
    cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
    if [ -z "$cs" ]; then
        note sanitize "compute-sanitizer not found"
        return
    fi
    local secs=${GCX_SANITIZE_SECONDS:-240}
    local ops=elementwise,swap01,avgpool,maxpool,shortcut,linear,softmax
    # tool, label, environment, binary
    local runs=(
        "memcheck ops GCX_TEST_OPS=$ops build/tests/cuda/test_nn_cuda_ops"
        "racecheck ops GCX_TEST_OPS=$ops build/tests/cuda/test_nn_cuda_ops"
        "memcheck lstm - build/tests/cuda/test_lstm_lm_cuda"
        "racecheck lstm - build/tests/cuda/test_lstm_lm_cuda"
        "memcheck optim - build/tests/cuda/test_optim_cuda"
        "memcheck codecs GCX_CODEC_CUDA_BIG=0 build/tests/cuda/test_codec_cuda"
        "racecheck codecs GCX_CODEC_CUDA_BIG=0 build/tests/cuda/test_codec_cuda"
        "memcheck resnet - build/tests/cuda/test_resnet_cuda"
    )
    for r in "${runs[@]}"; do
        set -- $r
        local tool=$1 label=$2 envv=$3 bin=$4 log="$LOGS/sanitize_$1_$2.log"
        local t0=$EPOCHREALTIME
        if [ "$envv" = - ]; then
            timeout "$secs" "$cs" --tool "$tool" --error-exitcode 99 "$bin" >"$log" 2>&1
        else
            env "$envv" timeout "$secs" "$cs" --tool "$tool" --error-exitcode 99 "$bin" >"$log" 2>&1
        fi
        local rc=$?
        local what="clean"
        [ $rc = 99 ] && what="ERRORS FOUND"
        [ $rc = 124 ] && what="stopped after ${secs}s (no error before)"
        [ $rc != 0 ] && [ $rc != 99 ] && [ $rc != 124 ] && what="exit $rc"
        local summ
        summ=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | tail -n 1)
        echo "$tool $label: $what, $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.0f", b-a}')s; $summ; $(grep -E '^RESULT' "$log" | tail -n 1)"
        note sanitize "$tool $label: $what; $summ $(grep -E '^RESULT' "$log" | tail -n 1)"
    done
}

for ph in "${phases[@]}"; do
    echo "=== $ph"
    case "$ph" in
    env) phase_env 2>&1 | tee "$LOGS/env.log" ;;
    test) phase_test 2>&1 | tee "$LOGS/test.log" ;;
    train) phase_train 2>&1 | tee "$LOGS/train.log" ;;
    bench) phase_bench 2>&1 | tee "$LOGS/bench.log" ;;
    sanitize) phase_sanitize 2>&1 | tee "$LOGS/sanitize.log" ;;
    esac
done
echo "=== summary (logs in $LOGS)"
cat "$SUMMARY"
