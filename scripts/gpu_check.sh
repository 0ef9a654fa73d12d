#!/usr/bin/env bash
# Every GPU check of docs/GPU.md in one command, for a session on a GPU machine:
#
#   scripts/gpu_check.sh [--bundle FILE] [--logs DIR] [--quick] [--deadline SEC] [PHASE...]
#
# PHASE: env, test, cifar, bench, train (default: these five, in that order), sanitize
# (asked for by name: slow). Each phase
# prints a short summary and keeps its whole output in DIR (default
# build/gpu-logs): env.log, tests/<binary>.log, cifar.log, bench.log, train.log; the
# last lines printed are a table of every phase's outcome.
#   env    the GPU, the driver, nvcc, and whether every binary finds its libraries
#   test   the CUDA parity tests (tests/cuda/*: what `make test-cuda` runs)
#   cifar  ResNet-20 on CIFAR-10 (a bundle carries GPU_CIFAR_RECORDS images of each
#          file) for 4 epochs, on the CPU and on the GPU from the same seed, the GPU's
#          step on the device: fp32 on one worker and 3lc on two; the test accuracy
#          after every epoch side by side
#   train  the trainers on the GPU against the same runs on the CPU: CharLSTM
#          (200 steps), ResNet-20 on a generated image folder (40 steps, and 2
#          workers with TernGrad over allgather, with SBC --delay 10 and with
#          federated averaging, fp32 --delay 10: these, CharLSTM (its --clip),
#          the one-worker fp32 run and 3lc over NCCL as one process (its parameter
#          server) must keep the step on the GPU, dist/exchange_cuda.h); whether --resume
#          continues bit for bit (20 steps against 10 + 10, each --cudnn
#          ranking); where a GPU step's time goes (ResNet-110,
#          batch 128, fp32, 3lc, dgc and sbc: scripts/step_breakdown.py; 3lc
#          again with its frames in host memory and with the host step, fp32 with
#          --cudnn fast); WordLSTM throughput (PTB, 50 steps)
#   bench  bench/resnet_gpu.sh (gcx against PyTorch eager; once more, one round,
#          with both ranking cuDNN's algorithms by heuristic), bench/exchange --device
#          cuda (the device-resident exchange of ResNet-110 per step: every codec on one
#          worker, 3lc, dgc, sbc, terngrad and gcomp on four sharing the GPU), bench/codecs_gpu,
#          bench/exchange --device cuda --arch resnet50 (dgc, topk, 3lc, sbc on ResNet-50's
#          table) and bench/exchange (the host exchange on this machine's cores)
#   sanitize  compute-sanitizer memcheck and racecheck (shared-memory races, which
#          the host emulation cannot show) on the kernel tests, each run capped at
#          GCX_SANITIZE_SECONDS (default 240)
# --quick: the same steps at toy sizes (a few steps of ResNet-8 instead of ResNet-110,
# 4k-value codec runs, ...), to check that every phase runs end to end; its figures
# mean nothing (tests/emulation/gpu_check_dry.sh runs it on the host emulation).
# GCX_RUN_SECONDS=SEC: stop any one trainer run after SEC seconds (a hang costs no more).
# --deadline SEC: stop SEC seconds after the start, with the summary written: each
# step still to come is skipped (and says so in the summary), the one under way is
# stopped; for a command whose time is limited, e.g. --deadline 560 under a 600 s cap.
# --bundle FILE: unpack a bundle made by scripts/gpu_bundle.sh (on a machine with
# gcx's build dependencies, same commit) instead of building here; its libraries
# and datasets are used (it unpacks into this checkout, replacing binaries built
# here: after trying it on a development machine, run make all bench build-cuda-tests).
# Without it the binaries are built with make.
# Environment: DEPTHS, ROUNDS, STEPS for bench/resnet_gpu.sh; GCX_TRAIN_STEPS
# (default 200) for the CharLSTM comparison; GCX_CHECK_TESTS="test_codec_cuda ..."
# runs only those tests in the test phase (default: all of tests/cuda).
set -uo pipefail
BUNDLE=""
LOGS=""
QUICK=0
DEADLINE=""
phases=()
while [ $# -gt 0 ]; do
    case "$1" in
    --bundle) BUNDLE=$2; shift 2 ;;
    --logs) LOGS=$2; shift 2 ;;
    --quick) QUICK=1; shift ;;
    --deadline)
        [[ "${2:-}" =~ ^[0-9]+$ ]] || { echo "gpu_check: --deadline needs a number of seconds" >&2; exit 2; }
        DEADLINE=$((EPOCHSECONDS + $2)); shift 2 ;;
    -h | --help) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; exit 0 ;;
    env | test | cifar | train | bench | sanitize) phases+=("$1"); shift ;;
    *) echo "gpu_check: unknown argument '$1' (phases: env test cifar train bench sanitize; --bundle FILE, --logs DIR, --quick, --deadline SEC)" >&2; exit 2 ;;
    esac
done
[ ${#phases[@]} -gt 0 ] || phases=(env test cifar bench train)
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

# --deadline: seconds left; late PHASE LABEL says (and notes) that LABEL is skipped
# when too little is left to start it; lim runs a command within what is left
left() { if [ -n "$DEADLINE" ]; then echo $((DEADLINE - EPOCHSECONDS)); else echo 999999; fi; }
late() {
    [ "$(left)" -gt 10 ] && return 1
    echo "--- $2: skipped, --deadline reached"
    note "$1" "$2: skipped (--deadline reached)"
    return 0
}
# (GCX_RUN_SECONDS caps each trainer run too, so one that hangs leaves time for the rest;
# the test phase and the benchmarks, which run many programs under one lim, set RUN_CAP=0)
lim() {
    local cap=${RUN_CAP:-${GCX_RUN_SECONDS:-0}} l
    if [ -z "$DEADLINE" ] && [ "$cap" = 0 ]; then "$@"; return; fi
    l=$(left)
    [ "$l" -ge 1 ] || return 124
    [ "$cap" -gt 0 ] && [ "$cap" -lt "$l" ] && l=$cap
    timeout "$l" "$@"
}
stopped() { [ "$1" = 124 ] && echo " (stopped at the --deadline)"; }
since() { awk -v a="$1" -v b="$EPOCHREALTIME" -v f="${2:-%.1f}" 'BEGIN{printf f, b - a}'; } # T0 [FORMAT]: seconds

# the sizes of each step: full, or toys with --quick
if [ "$QUICK" = 1 ]; then
    TRAIN_STEPS=${GCX_TRAIN_STEPS:-6}
    head -c 20000 README.md >"$LOGS/quick_text.txt" # the character model's text: 2k characters to evaluate
    CHAR_ARGS=(--text "$LOGS/quick_text.txt")
    RN=(--depth 8 --batch 8 --steps 4 --print-every 2) # the CPU/GPU ResNet pairs
    RESUME_STEPS=4
    DELAY=2 # an exchange every 2 of the 4 steps
    RN_NAME=resnet8
    CIFAR=(--depth 8 --epochs 2 --print-every 2 --eval-every 1) CIFAR_BATCH=8
    SHARE_NAME=resnet8
    SHARE=(--depth 8 --batch 8 --steps 4 --print-every 2)
    WORD_STEPS=2 WORD_ARGS=(--hidden 32 --emb 32 --bptt 5)
    FOLDER=$LOGS/quick-folder FOLDER_SIZES=(8 2)
    export DEPTHS=${DEPTHS:-8} BATCH=${BATCH:-8} STEPS=${STEPS:-2} ROUNDS=${ROUNDS:-1}
    CODECS_ARGS=(--sizes 4k --min-time 0)
    EXCHANGE_ARGS=(--depth 8 --steps 2 --warmup 1)
    EXCHANGE50_ARGS=(--arch resnet --depth 8 --steps 1 --warmup 1) # the command, on a toy model
else
    TRAIN_STEPS=${GCX_TRAIN_STEPS:-200}
    CHAR_ARGS=()
    RN=(--batch 32 --steps 40 --print-every 10)
    RESUME_STEPS=20
    DELAY=10 # SBC (2)'s communication delay (SBC IV-B): 4 exchanges in 40 steps
    RN_NAME=resnet20
    CIFAR=(--depth 20 --epochs 4 --lr 0.1 --schedule cosine --momentum 0.9 --wd 5e-4 --eval-every 1 --print-every 20)
    CIFAR_BATCH=128
    SHARE_NAME=resnet110
    SHARE=(--depth 110 --batch 128 --steps 30 --print-every 5)
    WORD_STEPS=50 WORD_ARGS=()
    FOLDER=/tmp/gcx-folder FOLDER_SIZES=(64 16)
    # 36k: ResNet-110's largest tensor (36,864 values), a frame of the one-block 3lc and
    # sparse encoders, what a small frame's launches and waits cost
    CODECS_ARGS=(--sizes 36k,1M,16M,64M)
    EXCHANGE_ARGS=(--steps 20)
    # ResNet-50's table: 42 of its 161 tensors above 65,535 values, the sparsifiers' general
    # selection (staged: the candidates' counts of a pass read at once)
    EXCHANGE50_ARGS=(--arch resnet50 --steps 10)
fi

# ---- binaries and libraries
DATA=${DATA_DIR:-data}
if [ -n "$BUNDLE" ]; then
    tar -xf "$BUNDLE" || { echo "gpu_check: cannot unpack $BUNDLE" >&2; exit 1; }
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
if [ -n "${GCX_CHECK_TESTS:-}" ]; then
    TESTS=()
    for t in $GCX_CHECK_TESTS; do
        [ -f "tests/cuda/$t.c" ] || { echo "gpu_check: GCX_CHECK_TESTS: no test tests/cuda/$t.c" >&2; exit 2; }
        TESTS+=("build/tests/cuda/$t")
    done
fi

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
    # the host CPU: the bundle is built without AVX-512 (gpu_bundle.sh), a build here with -march=native
    local cpu avx
    cpu=$(grep -m1 '^model name' /proc/cpuinfo 2>/dev/null | sed 's/^[^:]*: *//')
    avx=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | grep -ow -e avx2 -e avx512f | sort -u | paste -sd' ')
    note env "CPU: ${cpu:-unknown}, $(nproc) cores, ${avx:-neither avx2 nor avx512f}"
}

phase_test() {
    late test "the CUDA tests" && return
    local out rc
    # one at a time: the GPU's first run is no place to find out how the tests share it
    out=$(TEST_JOBS=1 LOG_DIR="$LOGS/tests" RUN_CAP=0 lim tests/run.sh "${TESTS[@]}" 2>&1)
    rc=$?
    echo "$out"
    note test "$(echo "$out" | tail -n 1)$(stopped $rc) (per binary: $(echo "$out" | grep -E '^tests/cuda' | awk '{printf "%s %s/%s; ", $1, $2, ($4 == "FAILED" ? $4 "=" $3 : "ok")}'))"
    # a test that finds no GPU (or no mpirun) passes with one check, and one that checked
    # part of what it covers (test_comm_nccl's 2-rank part needs 2 GPUs) says so: say which
    local skipped="" partly="" t log
    for t in "${TESTS[@]}"; do
        log=$LOGS/tests/$(basename "$t").log
        grep -qE 'skipped$' "$log" 2>/dev/null && skipped="$skipped $(basename "$t")"
        grep -qE 'part skipped\)$' "$log" 2>/dev/null && partly="$partly $(basename "$t")"
    done
    [ -z "$skipped" ] || note test "SKIPPED, nothing checked:$skipped (see their logs: no GPU visible, too few GPUs, or no mpirun)"
    [ -z "$partly" ] || note test "PARTLY SKIPPED:$partly (see their logs)"
}

# "step loss" of a trainer's progress lines
losses() { awk '/^step /{split($2, a, "/"); for (i = 1; i < NF; i++) if ($i == "loss") print a[1], $(i + 1)}' "$1"; }
last_eval() { grep -E '^eval' "$1" | tail -n 1 | tr -s ' ' | cut -c1-100; }

# a small image folder (10 classes of 32x32 PPM: class-coloured stripes + noise), for
# ResNet training without CIFAR-10 on this machine
make_folder() { python3 scripts/make_image_folder.py "$1" "${FOLDER_SIZES[@]}"; }

run_pair() { # name, args...: the same run on the CPU and the GPU; losses side by side
    # (CUDA_ARGS="..." run_pair ...: words added to the GPU run only; DEVICE_STEP=1 run_pair
    # ...: the GPU run must keep its step on the device, dist/exchange_cuda.h)
    local name=$1; shift
    late "$PH" "$name" && return
    local rc_c rc_g
    for dev in cpu cuda; do
        local t0=$EPOCHREALTIME extra=()
        [ "$dev" = cuda ] && [ -n "${CUDA_ARGS:-}" ] && read -ra extra <<<"$CUDA_ARGS"
        lim "$@" --device "$dev" ${extra[@]+"${extra[@]}"} --log "$LOGS/train_${name}_$dev.jsonl" >"$LOGS/train_${name}_$dev.log" 2>&1
        local rc=$?
        echo "--- $name on $dev: exit $rc$(stopped $rc), $(since "$t0")s: $*${extra[*]:+ (GPU run: ${extra[*]})}"
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
    note "$PH" "$name: exit cpu $rc_c, cuda $rc_g; largest relative loss difference over the printed steps: $worst"
    for dev in cpu cuda; do
        local r=$rc_c
        [ $dev = cuda ] && r=$rc_g
        if [ "$r" = 0 ]; then note "$PH" "  $(printf '%-4s' $dev) $(last_eval "$LOGS/train_${name}_$dev.log")"
        else note "$PH" "  $(printf '%-4s' $dev) failed: $(tail -n 1 "$LOGS/train_${name}_$dev.log" | cut -c1-160)"; fi
    done
    [ "$rc_g" = 0 ] && note "$PH" "  $(python3 scripts/step_breakdown.py "$LOGS/train_${name}_cuda.jsonl")"
    if [ "$rc_g" = 0 ] && [ "${DEVICE_STEP:-0}" = 1 ]; then
        if grep -q '^device: the step stays on the GPU' "$LOGS/train_${name}_cuda.log"; then
            note "$PH" "  device-resident step: yes"
        else
            note "$PH" "  device-resident step: NO, expected ($(grep -m1 '^device:' "$LOGS/train_${name}_cuda.log" | cut -c1-120))"
        fi
    fi
}

# where a GPU step's time goes (scripts/step_breakdown.py): fp32, 3lc (its parameter server)
# and dgc keep the step on the device (dist/exchange_cuda.h): what is left on the host
step_share() { # name, args...: one run on the GPU
    local name=$1; shift
    late train "share $name" && return
    local t0=$EPOCHREALTIME
    lim "$@" --device cuda --log "$LOGS/share_$name.jsonl" >"$LOGS/share_$name.log" 2>&1
    local rc=$?
    echo "--- $name on cuda: exit $rc$(stopped $rc), $(since "$t0")s: $*"
    tail -n 2 "$LOGS/share_$name.log"
    if [ $rc = 0 ]; then note train "share $(python3 scripts/step_breakdown.py "$LOGS/share_$name.jsonl")"
    else note train "share $name: exit $rc$(stopped $rc): $(tail -n 1 "$LOGS/share_$name.log" | cut -c1-160)"; fi
}

# --resume on the GPU continues bit for bit: RESUME_STEPS straight against half of them,
# --save, --resume, the rest; the final checkpoints compared byte for byte, under each
# --cudnn ranking. heuristic (the default) must give identical ones; find is timed, so the
# resumed process may choose other algorithms: reported either way.
resume_check() { # name, args...
    local name=$1; shift
    local mode
    for mode in heuristic find; do
        late train "resume $name --cudnn $mode" && continue
        local t0=$EPOCHREALTIME f=$LOGS/resume_${name}_$mode rc=0 half=$((RESUME_STEPS / 2))
        local what="$RESUME_STEPS steps straight and $half + --resume $((RESUME_STEPS - half))"
        local run=("$@" --steps "$RESUME_STEPS" --device cuda --cudnn "$mode")
        lim "${run[@]}" --save "$f.a" >"$f.log" 2>&1 || rc=$?
        [ $rc = 0 ] && { lim "${run[@]}" --stop-at "$half" --save "$f.b" >>"$f.log" 2>&1 || rc=$?; }
        [ $rc = 0 ] && { lim "${run[@]}" --resume "$f.b" --save "$f.c" >>"$f.log" 2>&1 || rc=$?; }
        echo "--- resume $name --cudnn $mode: exit $rc$(stopped $rc), $(since "$t0")s: $* --steps $RESUME_STEPS"
        if [ $rc != 0 ]; then
            note train "resume $name --cudnn $mode: exit $rc$(stopped $rc): $(tail -n 1 "$f.log" | cut -c1-160)"
        elif cmp -s "$f.a" "$f.c"; then
            note train "resume $name --cudnn $mode: $what: identical checkpoints"
        elif [ $mode = heuristic ]; then # kept for a look (scripts/ckpt_diff.py)
            note train "resume $name --cudnn $mode: $what: DIFFERENT checkpoints (expected identical; kept: $f.a, $f.c)"
        else
            note train "resume $name --cudnn $mode: $what: different checkpoints"
        fi
        if [ $mode = heuristic ] && [ $rc = 0 ] && ! cmp -s "$f.a" "$f.c"; then rm -f "$f.b"
        else rm -f "$f.a" "$f.b" "$f.c"; fi
    done
}

# ResNet-20 on CIFAR-10 (the part of it the bundle carries: gpu_bundle.sh's
# GPU_CIFAR_RECORDS of each file), CPU and GPU from the same seed, the GPU step on the
# device: fp32 on one worker, and 3lc on two (its parameter server); the test accuracy
# after every epoch side by side
epoch_evals() { grep -E '^eval +test ' "$1" | sed -E 's/.*epoch ([0-9.]+): loss ([0-9.]+) +accuracy ([0-9.]+)%.*/\1 \3 \2/'; }
phase_cifar() {
    local src=$DATA/cifar-10-batches-bin dir=$DATA
    if [ ! -f "$src/test_batch.bin" ]; then
        echo "--- no CIFAR-10 in $src"
        note cifar "no CIFAR-10 in $src: skipped"
        return
    fi
    if [ "$QUICK" = 1 ]; then # 8 images of each file
        dir=$LOGS/quick-cifar
        mkdir -p "$dir/cifar-10-batches-bin"
        local f
        for f in "$src"/data_batch_[1-5].bin "$src/test_batch.bin"; do
            head -c $((8 * 3073)) "$f" >"$dir/cifar-10-batches-bin/$(basename "$f")"
        done
    fi
    local ntrain ntest
    ntrain=$(cat "$dir"/cifar-10-batches-bin/data_batch_[1-5].bin 2>/dev/null | wc -c)
    ntest=$(wc -c <"$dir/cifar-10-batches-bin/test_batch.bin")
    note cifar "CIFAR-10: $((ntrain / 3073)) training images, $((ntest / 3073)) test images"
    local name
    for name in fp32 3lc_2w; do
        local w=1 codec=fp32
        [ $name = 3lc_2w ] && w=2 codec=3lc
        DEVICE_STEP=1 run_pair "cifar_$name" ./train_resnet --data-dir "$dir" "${CIFAR[@]}" --workers $w \
            --batch $((CIFAR_BATCH / w)) --codec $codec --seed 0 --quiet
        local t=$LOGS/train_cifar_${name}_epochs.txt
        join <(epoch_evals "$LOGS/train_cifar_${name}_cpu.log") <(epoch_evals "$LOGS/train_cifar_${name}_cuda.log") >"$t"
        local e a b la lb
        while read -r e a la b lb; do
            note cifar "  epoch $e: test accuracy cpu $a%, cuda $b% (loss $la, $lb)"
        done <"$t"
    done
}

phase_train() {
    local every=$((TRAIN_STEPS / 10 > 0 ? TRAIN_STEPS / 10 : 1))
    # (its --clip 5 on the device: the step stays there)
    DEVICE_STEP=1 run_pair charlstm ./train_lstm --model char "${CHAR_ARGS[@]}" --workers 1 --steps "$TRAIN_STEPS" \
        --print-every "$every" --quiet
    local folder=$FOLDER
    [ -d "$folder/train" ] || make_folder "$folder"
    DEVICE_STEP=1 run_pair "$RN_NAME" ./train_resnet --dataset "folder:$folder" --image-size 32 --workers 1 --lr 0.01 \
        "${RN[@]}" --eval-every 0 --quiet
    # the device-resident step's allgather with TernGrad's shared scalars, and its weight
    # deltas: SBC's default configuration and federated averaging (fp32's allreduce)
    DEVICE_STEP=1 run_pair "${RN_NAME}_terngrad_2w" ./train_resnet --dataset "folder:$folder" --image-size 32 \
        --workers 2 --lr 0.01 "${RN[@]}" --eval-every 0 --codec terngrad --topology allgather --quiet
    DEVICE_STEP=1 run_pair "${RN_NAME}_sbc_2w" ./train_resnet --dataset "folder:$folder" --image-size 32 --workers 2 \
        --lr 0.01 "${RN[@]}" --eval-every 0 --codec sbc --delay "$DELAY" --quiet
    DEVICE_STEP=1 run_pair "${RN_NAME}_fedavg_2w" ./train_resnet --dataset "folder:$folder" --image-size 32 --workers 2 \
        --lr 0.01 "${RN[@]}" --eval-every 0 --codec fp32 --delay "$DELAY" --quiet
    # the NCCL backend as one process (a communicator of one rank, no MPI) against the local
    # one; 3lc's parameter server on the device
    DEVICE_STEP=1 CUDA_ARGS="--backend nccl" run_pair "${RN_NAME}_3lc_nccl1" ./train_resnet --dataset "folder:$folder" --image-size 32 \
        --workers 1 --backend local --lr 0.01 "${RN[@]}" --eval-every 0 --codec 3lc --quiet
    resume_check "$RN_NAME" ./train_resnet --dataset "folder:$folder" --image-size 32 --workers 2 --lr 0.01 \
        "${RN[@]}" --eval-every -1 --codec 3lc --quiet
    for c in fp32 3lc dgc sbc; do
        step_share "${SHARE_NAME}_$c" ./train_resnet --dataset "folder:$folder" --image-size 32 --workers 1 \
            "${SHARE[@]}" --lr 0.01 --eval-every 0 --codec "$c" --quiet
    done
    # 3lc's frames in page-locked host bundles instead of device memory: which costs less
    step_share "${SHARE_NAME}_3lc_hostframes" env GCX_HOST_FRAMES=1 ./train_resnet --dataset "folder:$folder" \
        --image-size 32 --workers 1 "${SHARE[@]}" --lr 0.01 --eval-every 0 --codec 3lc --quiet
    # the host step (gradients down, the CPU exchange, parameters up) against the device's
    step_share "${SHARE_NAME}_3lc_hoststep" env GCX_HOST_STEP=1 ./train_resnet --dataset "folder:$folder" \
        --image-size 32 --workers 1 "${SHARE[@]}" --lr 0.01 --eval-every 0 --codec 3lc --quiet
    # fp32 with every cuDNN algorithm admitted (--cudnn fast) against the default's
    step_share "${SHARE_NAME}_fp32_fast" ./train_resnet --dataset "folder:$folder" --image-size 32 --workers 1 \
        "${SHARE[@]}" --lr 0.01 --eval-every 0 --codec fp32 --cudnn fast --quiet
    if [ -d "$DATA_DIR/ptb" ] && ! late train wordlstm; then
        local t0=$EPOCHREALTIME
        lim ./train_lstm --model word "${WORD_ARGS[@]}" --eval-every -1 --workers 1 --steps "$WORD_STEPS" --print-every $((WORD_STEPS / 5 > 0 ? WORD_STEPS / 5 : 1)) \
            --device cuda --quiet >"$LOGS/train_wordlstm_cuda.log" 2>&1
        local rc=$?
        echo "--- wordlstm on cuda: exit $rc$(stopped $rc), $(since "$t0")s"
        tail -n 4 "$LOGS/train_wordlstm_cuda.log"
        local what
        what=$(grep -E '^(step|done)' "$LOGS/train_wordlstm_cuda.log" | tail -n 2 | tr -s ' ' | cut -c1-100 | paste -sd'|')
        [ $rc = 0 ] || what=$(tail -n 1 "$LOGS/train_wordlstm_cuda.log" | cut -c1-160)
        note train "wordlstm cuda, $WORD_STEPS steps, exit $rc$(stopped $rc): $what"
    fi
}

# bench_run LABEL PATTERN PREFIX COMMAND...: runs COMMAND within the deadline and
# notes its output lines matching PATTERN (at most 60), each after PREFIX
bench_run() {
    local label=$1 pat=$2 pre=$3 out rc l
    shift 3
    late bench "$label" && return
    out=$(RUN_CAP=0 lim "$@" 2>&1)
    rc=$?
    echo "$out"
    while IFS= read -r l; do note bench "$pre$l"; done < <(echo "$out" | grep -E "$pat" | head -n 60)
    [ $rc = 0 ] || note bench "$label: exit $rc$(stopped $rc)"
}

phase_bench() {
    bench_run resnet_gpu.sh '^ResNet-[0-9]+ +gcx' "" bench/resnet_gpu.sh
    # what the trainers' reproducible default (--cudnn heuristic) costs, against torch's
    bench_run "resnet_gpu.sh HEURISTIC=1" '^ResNet-[0-9]+ +gcx' "" env HEURISTIC=1 ROUNDS=1 SGD=host bench/resnet_gpu.sh
    # the device-resident exchange per step: what a GPU trainer's step spends after its
    # backward (docs/GPU.md "Waits and launches"), without the model
    bench_run "exchange --device cuda" '^[a-z0-9]+ ' "exchange cuda " build/bench/exchange --device cuda \
        "${EXCHANGE_ARGS[@]}"
    bench_run "exchange --device cuda --workers 4" '^[a-z0-9]+ ' "exchange cuda 4w " build/bench/exchange \
        --device cuda --workers 4 --codec 3lc --codec dgc --codec sbc --codec terngrad --codec gcomp "${EXCHANGE_ARGS[@]}"
    bench_run codecs_gpu '^(GPU codec|codec |[a-z0-9]+)' "" build/bench/codecs_gpu "${CODECS_ARGS[@]}"
    bench_run "exchange --device cuda --arch resnet50" '^[a-z0-9]+ ' "exchange cuda r50 " build/bench/exchange \
        --device cuda --codec dgc --codec topk --codec 3lc --codec sbc "${EXCHANGE50_ARGS[@]}"
    # the exchange's host time with this host's cores (docs/DIST.md "Host time")
    bench_run exchange '^[a-z0-9]+ ' "exchange " env OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-active}" \
        build/bench/exchange "${EXCHANGE_ARGS[@]}"
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
        late sanitize "$tool $label" && continue
        local cap=$secs l
        l=$(left)
        [ "$l" -lt "$cap" ] && cap=$l
        local t0=$EPOCHREALTIME
        if [ "$envv" = - ]; then
            timeout "$cap" "$cs" --tool "$tool" --error-exitcode 99 "$bin" >"$log" 2>&1
        else
            env "$envv" timeout "$cap" "$cs" --tool "$tool" --error-exitcode 99 "$bin" >"$log" 2>&1
        fi
        local rc=$?
        local what="clean"
        [ $rc = 99 ] && what="ERRORS FOUND"
        [ $rc = 124 ] && what="stopped after ${cap}s (no error before)"
        [ $rc != 0 ] && [ $rc != 99 ] && [ $rc != 124 ] && what="exit $rc"
        local summ
        summ=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | tail -n 1)
        echo "$tool $label: $what, $(since "$t0" %.0f)s; $summ; $(grep -E '^RESULT' "$log" | tail -n 1)"
        note sanitize "$tool $label: $what; $summ $(grep -E '^RESULT' "$log" | tail -n 1)"
    done
}

for ph in "${phases[@]}"; do
    echo "=== $ph"
    PH=$ph # run_pair's summary label
    case "$ph" in
    env) phase_env 2>&1 | tee "$LOGS/env.log" ;;
    test) phase_test 2>&1 | tee "$LOGS/test.log" ;;
    cifar) phase_cifar 2>&1 | tee "$LOGS/cifar.log" ;;
    train) phase_train 2>&1 | tee "$LOGS/train.log" ;;
    bench) phase_bench 2>&1 | tee "$LOGS/bench.log" ;;
    sanitize) phase_sanitize 2>&1 | tee "$LOGS/sanitize.log" ;;
    esac
done
echo "=== summary (logs in $LOGS)"
cat "$SUMMARY"
