#!/usr/bin/env bash
# scripts/gpu_check.sh end to end on the host emulation, before a GPU session spends
# its device time on it: a bundle is packed from the emulated binaries (the trainers,
# the GPU benchmarks and two CUDA tests of nn/build.sh and build.sh, under the names
# scripts/gpu_bundle.sh gives the real ones), unpacked by gpu_check.sh --bundle in a
# scratch copy of the scripts, and every phase runs with --quick: env (a stand-in
# nvidia-smi), test (GCX_CHECK_TESTS: two tests), train (the CPU/GPU pairs, the step
# breakdowns, the word LSTM on PTB when $DATA_DIR has it), bench (resnet_gpu.sh,
# against PyTorch on the CPU when /usr/bin/python3 has torch, else gcx only;
# codecs_gpu, exchange) and sanitize (a stand-in compute-sanitizer
# that checks its arguments and the binary, and reports no error). Then a second run
# with --deadline 1 must skip every step and say so. Checks: the exit status, and the
# summary lines of every phase with the figures they should carry. A run with this build's
# own trainers, which find no GPU, must report each failed GPU run with its error.
#
#   tests/emulation/gpu_check_dry.sh [EMU_DIR]   EMU_DIR: build/emu (codec/ and nn/)
# Needs ./gcx (make all). Ends with "RESULT passed failed";
# LOG_DIR=DIR keeps gpu_check.sh's output and logs.
set -u
REPO=$(cd "$(dirname "$0")/../.." && pwd)
EMU=${1:-$REPO/build/emu}
passed=0 failed=0
check() { # condition-status, message
    if [ "$1" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $2"; fi
}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# the bundle: emulated binaries under the real binaries' paths
S=$TMP/stage
mkdir -p "$S/build/tests/cuda" "$S/build/bench" "$S/build/gpu-libs"
# train_resnet: the build with NCCL emulated over MPI when there is one (the train
# phase's --backend nccl pair runs it as one process, a communicator of one rank)
nccl=0
rn=$EMU/nn/train_resnet_emu
if [ -x "$EMU/nn/train_resnet_nccl_emu" ]; then nccl=1; rn=$EMU/nn/train_resnet_nccl_emu; fi
map=(
    "$rn train_resnet" "$EMU/nn/train_lstm_emu train_lstm" "$EMU/nn/train_lenet_emu train_lenet"
    "$REPO/gcx gcx" "$EMU/nn/resnet_gpu_emu build/bench/resnet_gpu" "$EMU/codec/codecs_gpu_emu build/bench/codecs_gpu"
    "$EMU/nn/exchange_emu build/bench/exchange"
    "$EMU/codec/test_optim_emu build/tests/cuda/test_optim_cuda"
    "$EMU/nn/test_nn_cuda_lenet_emu build/tests/cuda/test_nn_cuda_lenet"
)
for m in "${map[@]}"; do
    set -- $m
    if [ ! -x "$1" ]; then echo "missing $1 (make all bench build-emu)"; echo "RESULT 0 1"; exit 1; fi
    cp "$1" "$S/$2"
done
# the other tests exist in the bundle; GCX_CHECK_TESTS leaves them out of the test phase
for t in "$REPO"/tests/cuda/test_*.c; do
    b=$S/build/tests/cuda/$(basename "$t" .c)
    [ -e "$b" ] || printf '#!/bin/sh\necho "not run in the dry run"; exit 1\n' >"$b"
    chmod +x "$b"
done
echo dry-run >"$S/build/gpu-commit"
(cd "$S" && tar -cf "$TMP/bundle.tar" .)
check $? "packing the bundle"

# a scratch checkout: what gpu_check.sh reads besides the bundle
R=$TMP/repo
mkdir -p "$R/tests"
cp -r "$REPO/scripts" "$REPO/bench" "$REPO/README.md" "$R/"
cp -r "$REPO/tests/cuda" "$REPO/tests/run.sh" "$R/tests/"

# stand-ins for NVIDIA's tools
mkdir -p "$TMP/bin"
cat >"$TMP/bin/nvidia-smi" <<'EOF'
#!/bin/sh
case "$*" in
*--query-gpu=name,*) echo "name, driver_version, memory.total [MiB], clocks.max.sm [MHz]"; echo "gcx host emulation, none, 0 MiB, 0 MHz" ;;
*--query-gpu=name*) echo "gcx host emulation" ;;
*) echo "gcx host emulation (stand-in nvidia-smi)" ;;
esac
EOF
cat >"$TMP/bin/compute-sanitizer" <<'EOF'
#!/bin/sh
# --tool TOOL --error-exitcode N BINARY: what gpu_check.sh passes
[ "$1" = --tool ] && [ "$3" = --error-exitcode ] && [ -x "$5" ] && [ $# -eq 5 ] || { echo "bad arguments: $*"; exit 3; }
echo "========= $2 of $5 (stand-in)"
echo "RESULT 1 0"
echo "========= ERROR SUMMARY: 0 errors"
EOF
chmod +x "$TMP/bin/nvidia-smi" "$TMP/bin/compute-sanitizer"

export PATH=$TMP/bin:$PATH OMP_WAIT_POLICY=passive OMP_NUM_THREADS=1
# resnet_gpu.sh: its PyTorch half on the CPU where torch is installed, else gcx only
torch=0
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    torch=1
    export PY=/usr/bin/python3 TORCH_DEVICE=cpu
else
    export PY=/nonexistent-python
    echo "note: /usr/bin/python3 has no torch: resnet_gpu.sh runs gcx only (scripts/deps.sh --torch installs it)"
fi
LOGS=$TMP/logs
ptb=0 # the word LSTM step runs only with PTB
[ -d "${DATA_DIR:-/nonexistent}/ptb" ] && ptb=1
cifar=0 # the cifar phase, only with CIFAR-10
[ -f "${DATA_DIR:-/nonexistent}/cifar-10-batches-bin/test_batch.bin" ] && cifar=1
GCX_CHECK_TESTS="test_optim_cuda test_nn_cuda_lenet" "$R/scripts/gpu_check.sh" --bundle "$TMP/bundle.tar" \
    --logs "$LOGS" --quick env test cifar train bench sanitize >"$TMP/out.txt" 2>&1
rc=$?
check $rc "gpu_check.sh --quick exited $rc"
SUM=$LOGS/summary.txt
[ -s "$SUM" ]
check $? "no summary in $SUM"
has() { # pattern, message
    grep -Eq "$1" "$SUM"
    check $? "$2: no line matching '$1' in the summary"
}
has '^env +GPU: gcx host emulation; binaries with unresolved libraries or missing: 0$' "env"
has '^env +CPU: .+, [0-9]+ cores, (avx2|avx512f|avx2 avx512f|neither avx2 nor avx512f)$' "env, the CPU"
has '^test +[0-9]+ passed, 0 failed \(per binary: tests/cuda/test_optim_cuda [0-9]+/ok; tests/cuda/test_nn_cuda_lenet [0-9]+/ok; \)' "test"
if [ $cifar = 1 ]; then
    has '^cifar +CIFAR-10: 40 training images, 8 test images$' "cifar, the subset"
    for pair in cifar_fp32 cifar_3lc_2w; do
        has "^cifar +$pair: exit cpu 0, cuda 0; largest relative loss difference over the printed steps: [0-9.e+-]+$" \
            "cifar $pair"
    done
    n=$(grep -cE '^cifar +  epoch [12]\.00: test accuracy cpu [0-9.]+%, cuda [0-9.]+% \(loss [0-9.]+, [0-9.]+\)$' "$SUM")
    [ "$n" -eq 4 ]
    check $? "cifar: $n lines of accuracy after an epoch, expected 4 (2 runs, 2 epochs)"
    [ "$(grep -cE '^cifar +device-resident step: yes$' "$SUM")" -eq 2 ]
    check $? "cifar: the GPU runs' steps did not both stay on the device"
else
    has '^cifar +no CIFAR-10 in .*: skipped$' "cifar, without CIFAR-10"
fi
pairs="charlstm resnet8 resnet8_terngrad_2w resnet8_sbc_2w resnet8_fedavg_2w"
[ $nccl = 1 ] && pairs="$pairs resnet8_3lc_nccl1"
for pair in $pairs; do
    has "^train +$pair: exit cpu 0, cuda 0; largest relative loss difference over the printed steps: [0-9.e+-]+$" "train $pair"
done
# the pairs whose GPU step must stay on the device: charlstm (--clip), fp32, terngrad
# (allgather), sbc, fedavg, and with NCCL 3lc (its parameter server)
n=$(grep -cE '^train +device-resident step: yes$' "$SUM")
want=$((5 + nccl))
[ "$n" -eq "$want" ]
check $? "train: $n pairs say that their GPU step stayed on the device, expected $want"
has "^train +resume resnet8 --cudnn heuristic: 4 steps straight and 2 \+ --resume 2: identical checkpoints$" \
    "resume, heuristic ranking"
has "^train +resume resnet8 --cudnn find: 4 steps straight and 2 \+ --resume 2: (identical|different) checkpoints$" \
    "resume, Find"
for c in fp32 3lc dgc sbc 3lc_hostframes 3lc_hoststep fp32_fast; do
    has "^train +share share_resnet8_$c: [0-9]+ steps, step [0-9.]+ ms = compute.*; copies [0-9.]+ (MB|B) up \+ [0-9.]+ (MB|B) down in [0-9.]+ ms$" \
        "step breakdown with $c, with the host<->device copies"
done
if [ $ptb = 1 ]; then has '^train +wordlstm cuda, 2 steps, exit 0: step ' "word LSTM"; fi
vs=""
[ $torch = 1 ] && vs=' \| torch +[0-9.]+ img/s \(median +[0-9.]+\) \| gcx/torch best [0-9.]+x, median [0-9.]+x$'
has "^bench +ResNet-8 +gcx \(host SGD\) +[0-9.]+ img/s.*$vs" "resnet_gpu.sh, host SGD"
has "^bench +ResNet-8 +gcx \(device SGD\) +[0-9.]+ img/s.*$vs" "resnet_gpu.sh, device SGD"
has "^bench +ResNet-8 +gcx \(host SGD, heuristic\) +[0-9.]+ img/s.*$vs" "resnet_gpu.sh HEURISTIC=1"
has '^bench +3lc:s=1 +4096 ' "codecs_gpu"
has '^bench +exchange 3lc ' "exchange"
for c in fp32 3lc dgc sbc gcomp terngrad; do # (the emulation adds its waits and operations per step)
    has "^bench +exchange cuda $c +[0-9.]+ +[0-9.]+ +[0-9]+ +[0-9.]+ +[0-9.]+$" "exchange --device cuda, $c"
done
for c in 3lc dgc sbc; do has "^bench +exchange cuda 4w $c " "exchange --device cuda --workers 4, $c"; done
for c in dgc topk 3lc sbc; do has "^bench +exchange cuda r50 $c " "exchange --device cuda --arch resnet50, $c"; done
for r in "memcheck ops" "racecheck ops" "memcheck lstm" "memcheck codecs" "memcheck resnet"; do
    has "^sanitize $r: clean; ========= ERROR SUMMARY: 0 errors RESULT 1 0$" "sanitize $r"
done
# (without MPI the emulated trainer has no NCCL backend: its --backend nccl run fails)
! grep -Ev "$([ $nccl = 1 ] && echo '^$' || echo 'nccl1|^train +cuda failed: error: this build has no NCCL')" "$SUM" |
    grep -Evi '^cifar +no CIFAR-10 in' | grep -Eqi 'skipped|stopped|exit [1-9]'

check $? "something was skipped, stopped or failed"
# the logs of the runs are kept
for f in env.log test.log cifar.log train.log bench.log sanitize.log tests/test_optim_cuda.log train_charlstm_cuda.log; do
    [ -s "$LOGS/$f" ]
    check $? "no log $f"
done
if [ "$failed" -ne 0 ]; then sed 's/^/    | /' "$SUM"; tail -n 40 "$TMP/out.txt" | sed 's/^/    > /'; fi

# the trainers of this build, which find no GPU here: every GPU run of the train phase
# must be reported as failed, with its error, and the phase must go on
cp "$REPO/train_resnet" "$REPO/train_lstm" "$S/"
(cd "$S" && tar -cf "$TMP/nogpu.tar" .)
"$R/scripts/gpu_check.sh" --bundle "$TMP/nogpu.tar" --logs "$TMP/nogpu" --quick train >"$TMP/nogpu.txt" 2>&1
check $? "gpu_check.sh with GPU runs that fail exited $?"
n=$(grep -cE '^train +(cuda failed: |share [a-z0-9_]+: exit 1: |resume resnet8 --cudnn [a-z]+: exit 1: |wordlstm cuda, 2 steps, exit 1: )[a-z]+.*$' \
    "$TMP/nogpu/summary.txt")
want=$((15 + ptb)) # 6 pairs, 2 resume checks, 7 breakdowns, and the word LSTM
[ "$n" -eq "$want" ]
check $? "failing GPU runs: $n summary lines give the error, expected $want"
[ "$(grep -cE '^train +cpu +eval ' "$TMP/nogpu/summary.txt")" -eq 6 ]
check $? "failing GPU runs: the 6 CPU runs of the pairs still evaluate"
[ "$failed" -eq 0 ] || sed 's/^/    | /' "$TMP/nogpu/summary.txt"

# --deadline 1: every step is skipped, the summary says so, nothing fails
"$R/scripts/gpu_check.sh" --bundle "$TMP/bundle.tar" --logs "$TMP/late" --quick --deadline 1 test cifar train bench \
    >"$TMP/late.txt" 2>&1
check $? "gpu_check.sh --deadline 1 exited $?"
n=$(grep -c 'skipped (--deadline reached)' "$TMP/late/summary.txt")
want=$((23 + ptb + 2 * cifar)) # the tests, 6 pairs, 2 resume checks, 7 breakdowns, 7 benchmarks, the word LSTM, 2 CIFAR pairs
[ "$n" -eq "$want" ]
check $? "--deadline 1: $n steps said they were skipped, expected $want"
"$R/scripts/gpu_check.sh" --deadline x >/dev/null 2>&1
[ $? -eq 2 ]
check $? "--deadline x was accepted"
if [ -n "${LOG_DIR:-}" ]; then mkdir -p "$LOG_DIR" && cp -r "$TMP/out.txt" "$LOGS" "$LOG_DIR/"; fi
echo "RESULT $passed $failed"
[ "$failed" -eq 0 ]
