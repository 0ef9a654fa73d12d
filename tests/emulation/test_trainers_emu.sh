#!/usr/bin/env bash
# The trainers with --device cuda on the host emulation, against the same binaries with
# --device cpu from the same seed: ResNet-8 and LeNet on a generated image folder and the
# character LSTM on a short text, each with 2 local workers sharing the emulated device
# and a codec; with MPI, ResNet-8 over --backend nccl (NCCL emulated over MPI, one emulated
# GPU per process) against --backend mpi on the CPU. Checks per pair: both runs exit 0
# (under EMU_ASAN=1 builds: no ASan report, no leak), the same step lines, every printed
# loss within 1e-3 relative of the CPU's (rounding drift stays far below that in 3 steps
# at these learning rates), the same bytes up and down per step (from the runs' --log; within
# BYTES_TOL relative where a pair sets it), the same evaluation size, the host<->device
# copies of the logs (none on the CPU), and where the GPU run's step ran (on the device for
# the configurations dist/exchange_cuda.h covers; through the host otherwise). The
# device-resident step is also checked against the host step on the same GPU model (final
# checkpoints equal to the bit, the same losses and bytes per step; SBC with --delay 10
# and 3LC's parameter server among them, and GCOMP over the ring, the allgather and the
# parameter server with its tables in the checkpoints) and across --save/--resume.
# The pairs run in two lanes at once (about half the time on two cores).
#
#   tests/emulation/test_trainers_emu.sh [DIR]   DIR: nn/build.sh's output (build/emu/nn)
# Ends with "RESULT passed failed" (tests/run.sh); LOG_DIR=DIR keeps the runs' output.
set -u
REPO=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${1:-$REPO/build/emu/nn}
passed=0 failed=0
check() { # condition-status, message
    if [ "$1" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $2"; fi
}
for b in train_resnet_emu train_lenet_emu train_lstm_emu; do
    if [ ! -x "$BIN/$b" ]; then echo "missing $BIN/$b (sh tests/emulation/nn/build.sh first)"; echo "RESULT 0 1"; exit 1; fi
done
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export OMP_WAIT_POLICY=passive OMP_NUM_THREADS=1

# 10 classes of 32x32 PPM images (class-coloured stripes and noise): 8 to train, 2 to evaluate
python3 "$REPO/scripts/make_image_folder.py" "$TMP/folder" 8 2
check $? "generating the image folder"
head -c 6000 "$REPO/README.md" >"$TMP/text.txt"

# "step loss" per step line; "eval N" for the evaluation's sample count
digest() {
    awk '/^step / {l = ""; for (i = 1; i <= NF; i++) if ($i == "loss") l = $(i + 1)
                   print "step", $2, l}
         /^eval / {n = $0; sub(/.*\(/, "", n); sub(/ .*/, "", n); print "eval", n}' "$1"
}

# the train rows of two --log CSV files whose bytes up or down differ by more than tol
# relative (0: any difference), and a line if their steps differ
bytes_apart() { # tol, cpu.csv, cuda.csv
    awk -F, -v tol="$1" '
        function far(a, b) { return (a > b ? a - b : b - a) > tol * (a > b ? a : b) }
        /^kind,/ { delete col; for (i = 1; i <= NF; i++) col[$i] = i; next }
        $1 != "train" { next }
        NR == FNR { u[$2] = $(col["up_bytes"]); d[$2] = $(col["down_bytes"]); n++; next }
        { m++; U = $(col["up_bytes"]); D = $(col["down_bytes"])
          if (!($2 in u)) print "    step " $2 " is not in the CPU log"
          else if (far(u[$2], U) || far(d[$2], D))
              print "    step " $2 ": up " u[$2] " | " U ", down " d[$2] " | " D " bytes" }
        END { if (n == 0 || n != m) print "    " n " train rows in the CPU log, " m " in the GPU log" }' "$2" "$3" 2>&1
}

# the train rows of a --log CSV file whose host<->device copy columns (h2d_bytes, d2h_bytes,
# copy_s) are not all zero (want 0) or not all above zero (want 1), and a line if it has none
copies_off() { # want, log.csv
    awk -F, -v want="$1" '
        /^kind,/ { delete col; for (i = 1; i <= NF; i++) col[$i] = i; next }
        $1 != "train" { next }
        { n++; has = ("h2d_bytes" in col) && ("d2h_bytes" in col) && ("copy_s" in col)
          h = has ? $(col["h2d_bytes"]) + 0 : -1; d = has ? $(col["d2h_bytes"]) + 0 : -1; s = has ? $(col["copy_s"]) + 0 : -1
          if (!has || (want ? !(h > 0 && d > 0 && s > 0) : (h != 0 || d != 0 || s != 0)))
              print "    step " $2 ": h2d " h " d2h " d " copy_s " s }
        END { if (n == 0) print "    no train rows" }' "$2" 2>&1
}

# the bytes up of a --log CSV file's train rows, on one line
up() { awk -F, '/^kind,/ { for (i = 1; i <= NF; i++) if ($i == "up_bytes") c = i } $1 == "train" { printf "%s ", $c }' "$1" 2>/dev/null; }

# BYTES_TOL=X pair ...: the bytes per step may differ by X relative. Where a codec's frame
# size depends on the values (which ones a sparsifier selects, how long 3LC's zero runs
# are), a value at a threshold can go either way between the CPU's gradients and the GPU's,
# which differ in their last bits (LeNet with SBC: 3594 against 3595 bytes at step 1 on
# one machine, equal on another); the frames themselves are byte-identical for the same
# input (test_codec_emu).
pair() { # name, cpu command..., --, cuda command...
    local name=$1; shift
    local cpu=() gpu=()
    while [ "$1" != -- ]; do cpu+=("$1"); shift; done
    shift
    gpu=("$@" --log "$TMP/$name.cuda.csv")
    cpu+=(--log "$TMP/$name.cpu.csv")
    "${cpu[@]}" >"$TMP/$name.cpu" 2>&1
    check $? "$name: the CPU run failed (exit $?): ${cpu[*]}"
    "${gpu[@]}" >"$TMP/$name.cuda" 2>&1
    local rc=$?
    check $rc "$name: the emulated GPU run failed (exit $rc): ${gpu[*]}"
    [ $rc -eq 0 ] || tail -n 30 "$TMP/$name.cuda" | sed 's/^/    /'
    digest "$TMP/$name.cpu" >"$TMP/$name.dc"
    digest "$TMP/$name.cuda" >"$TMP/$name.dg"
    local nc ng
    nc=$(grep -c '^step' "$TMP/$name.dc") ng=$(grep -c '^step' "$TMP/$name.dg")
    [ "$nc" -gt 0 ] && [ "$nc" -eq "$ng" ]
    check $? "$name: $nc step lines on the CPU, $ng on the emulated GPU"
    local bad
    bad=$(paste -d' ' "$TMP/$name.dc" "$TMP/$name.dg" | awk '
        $1 == "step" { d = $3 - $6; if (d < 0) d = -d; m = $3 < 0 ? -$3 : $3
                       if ($2 != $5 || d > 1e-3 * m) print "   ", $0 }
        $1 == "eval" { if ($2 != $4) print "   ", $0 }')
    [ -z "$bad" ]
    check $? "$name: CPU and emulated GPU disagree (step, loss | the same on the GPU):
$bad"
    bad=$(bytes_apart "${BYTES_TOL:-0}" "$TMP/$name.cpu.csv" "$TMP/$name.cuda.csv")
    [ -z "$bad" ]
    check $? "$name: the bytes per step differ by more than ${BYTES_TOL:-0} relative (CPU | GPU):
$bad"
    grep -q '^eval' "$TMP/$name.dg"
    check $? "$name: no evaluation line on the emulated GPU"
    # the step's host<->device copies (--log h2d_bytes, d2h_bytes, copy_s): none on the CPU;
    # on the GPU at least the model state or the gradients cross (COPIES=0 where the pair's
    # GPU run keeps the whole step on the device and copies nothing)
    bad=$(copies_off 0 "$TMP/$name.cpu.csv")
    [ -z "$bad" ]
    check $? "$name: the CPU run's log reports host<->device copies:
$bad"
    # DEVICE_STEP=1 pair ...: the GPU run must keep its step on the device (dist/exchange_cuda.h),
    # else it must say that the step goes through the host
    if [ "${DEVICE_STEP:-0}" = 1 ]; then grep -q '^device: the step stays on the GPU' "$TMP/$name.cuda"
    else grep -q '^device: the step goes through the host: ' "$TMP/$name.cuda"; fi
    check $? "$name: the GPU run's step is not where it should be (DEVICE_STEP=${DEVICE_STEP:-0}): $(grep '^device:' "$TMP/$name.cuda")"
    bad=$(copies_off "${COPIES:-1}" "$TMP/$name.cuda.csv")
    [ -z "$bad" ]
    check $? "$name: the emulated GPU run's log does not report its host<->device copies as expected (${COPIES:-1}):
$bad"
    echo "$name: $nc steps, losses CPU | GPU: $(awk '$1 == "step" {printf "%s ", $3}' "$TMP/$name.dc")| $(awk '$1 == "step" {printf "%s ", $3}' "$TMP/$name.dg")"\
        "; bytes up CPU | GPU: $(up "$TMP/$name.cpu.csv")| $(up "$TMP/$name.cuda.csv")"
    if [ -n "${LOG_DIR:-}" ]; then mkdir -p "$LOG_DIR" && cp "$TMP/$name".cpu* "$TMP/$name".cuda* "$LOG_DIR/"; fi
}

DATA=(--dataset "folder:$TMP/folder" --batch 8 --steps 3 --print-every 1 --quiet)
IMG=("${DATA[@]}" --workers 2)

# --resume on the emulated GPU continues bit for bit: 4 steps straight, and 2 steps, --save,
# --resume, 2 more, end in the same checkpoint bytes. The default --cudnn heuristic makes the
# same convolution choice in every process; the emulated Find models timing noise, so under
# --cudnn find the resumed process may choose other algorithms (other last bits; not checked,
# as it holds only by chance).
# GCX_CUDNN_VERBOSE=1 on the uninterrupted run: its plans must say "(heuristic)"; one more
# step with --cudnn find must say "(find)", and (FAST=1) one with --cudnn fast "(find,
# non-deterministic, FFT/Winograd)". scripts/ckpt_diff.py must find the final
# checkpoints equal and the halfway one different, and refuse a truncated or foreign file.
resume_exact() { # name, command...
    local name=$1; shift
    GCX_CUDNN_VERBOSE=1 "$@" --steps 4 --save "$TMP/$name.a" >"$TMP/$name.ra" 2>&1
    check $? "$name: the uninterrupted run failed: $* --steps 4"
    if [ "${CONV:-1}" = 1 ]; then # CONV=0: a model without convolutions
        grep -q '^conv2d CUDA plan .*(heuristic)' "$TMP/$name.ra" && ! grep -q '^conv2d CUDA plan .*(find)' "$TMP/$name.ra"
        check $? "$name: the default run did not rank cuDNN's algorithms by the heuristic alone"
        GCX_CUDNN_VERBOSE=1 "$@" --steps 1 --cudnn find >"$TMP/$name.rf" 2>&1 && grep -q '^conv2d CUDA plan .*(find)' "$TMP/$name.rf"
        check $? "$name: --cudnn find did not rank by Find"
        if [ "${FAST:-0}" = 1 ]; then # (one model is enough)
            GCX_CUDNN_VERBOSE=1 "$@" --steps 1 --cudnn fast >"$TMP/$name.rq" 2>&1 &&
                grep -q '^conv2d CUDA plan .*(find, non-deterministic, FFT/Winograd)' "$TMP/$name.rq" &&
                ! grep -q '^conv2d CUDA plan .*(find)' "$TMP/$name.rq"
            check $? "$name: --cudnn fast did not rank every algorithm by Find"
        fi
    fi
    "$@" --steps 4 --stop-at 2 --save "$TMP/$name.b" >"$TMP/$name.rb" 2>&1
    check $? "$name: the first half failed: $* --stop-at 2"
    "$@" --steps 4 --resume "$TMP/$name.b" --save "$TMP/$name.c" >"$TMP/$name.rc" 2>&1
    check $? "$name: the resumed half failed: $* --resume"
    python3 "$REPO/scripts/ckpt_diff.py" "$TMP/$name.a" "$TMP/$name.c" >"$TMP/$name.diff" 2>&1
    check $? "$name: the resumed run's final checkpoint differs from the uninterrupted run's:
$(head -n 8 "$TMP/$name.diff")"
    python3 "$REPO/scripts/ckpt_diff.py" "$TMP/$name.a" "$TMP/$name.b" >/dev/null 2>&1
    [ $? -eq 1 ]
    check $? "$name: ckpt_diff.py found no difference between step 4 and step 2"
    # a truncated or foreign file is refused (exit 2) with a message
    head -c 3000 "$TMP/$name.a" >"$TMP/$name.t"
    for bad in "$TMP/$name.t" "$REPO/README.md"; do
        python3 "$REPO/scripts/ckpt_diff.py" "$bad" "$TMP/$name.a" >/dev/null 2>"$TMP/$name.err"
        [ $? -eq 2 ] && grep -q '^ckpt_diff: ' "$TMP/$name.err"
        check $? "$name: ckpt_diff.py did not refuse $(basename "$bad") with exit 2 and a message"
    done
    echo "$name: 4 steps straight and 2 + --resume 2: $(head -n 1 "$TMP/$name.diff")"
}

# --log-layers' rows of two runs (host | device) apart: every column but the last two equal, the
# frames' relative error (its sums in another order on the device) within 1e-5, the time ignored
layers_apart() { # host.csv, device.csv
    [ -s "$1" ] || { echo "no rows in $1"; return; }
    paste -d'|' "$1" "$2" | awk -F'|' '{
        nh = split($1, h, ","); nd = split($2, d, ",")
        bad = nh != nd
        for (i = 1; i <= nh - 2 && !bad; i++) bad = h[i] != d[i]
        e = h[nh - 1] - d[nh - 1]; if (e < 0) e = -e
        m = h[nh - 1] < 0 ? -h[nh - 1] : h[nh - 1]
        if (bad || e > 1e-5 * m + 1e-12) { print "  " $1 " | " $2; if (++n == 6) exit }
    }'
}

device_vs_host() { # name, command...: checkpoints equal to the bit, the same losses and bytes per step
    local name=$1 bad; shift
    local ldev=() lhost=() # LAYERS=1: --log-layers on both, their rows compared
    [ -n "${LAYERS:-}" ] && ldev=(--log-layers "$TMP/$name.dev.layers") lhost=(--log-layers "$TMP/$name.host.layers")
    "$@" "${ldev[@]}" --save "$TMP/$name.dev" --log "$TMP/$name.dev.csv" >"$TMP/$name.rdev" 2>&1 &&
        grep -q '^device: the step stays on the GPU' "$TMP/$name.rdev"
    check $? "$name: the device-resident run failed or went through the host: $(tail -n 3 "$TMP/$name.rdev")"
    if [ -n "${COPIES:-}" ]; then # every step, also after an evaluation or a checkpoint, on the device
        bad=$(copies_off "$COPIES" "$TMP/$name.dev.csv")
        [ -z "$bad" ]
        check $? "$name: the device-resident run's log does not report its host<->device copies as expected ($COPIES):
$bad"
    fi
    GCX_HOST_STEP=1 "$@" "${lhost[@]}" --save "$TMP/$name.host" --log "$TMP/$name.host.csv" >"$TMP/$name.rhost" 2>&1 &&
        grep -q '^device: the step goes through the host: GCX_HOST_STEP' "$TMP/$name.rhost"
    check $? "$name: the run with GCX_HOST_STEP=1 failed or stayed on the device: $(tail -n 3 "$TMP/$name.rhost")"
    cmp -s <(digest "$TMP/$name.rhost") <(digest "$TMP/$name.rdev") && grep -q '^step' "$TMP/$name.rdev"
    check $? "$name: the device-resident step's losses differ from the host step's:
$(diff <(digest "$TMP/$name.rhost") <(digest "$TMP/$name.rdev") | head -n 8)"
    bad=$(bytes_apart 0 "$TMP/$name.host.csv" "$TMP/$name.dev.csv")
    [ -z "$bad" ]
    check $? "$name: the bytes per step differ from the host step's (host | device):
$bad"
    if [ -n "${LAYERS:-}" ]; then
        bad=$(layers_apart "$TMP/$name.host.layers" "$TMP/$name.dev.layers")
        [ -z "$bad" ] && [ "$(wc -l <"$TMP/$name.host.layers")" = "$(wc -l <"$TMP/$name.dev.layers")" ]
        check $? "$name: --log-layers' rows differ from the host step's (host | device):
$bad"
    fi
    python3 "$REPO/scripts/ckpt_diff.py" "$TMP/$name.host" "$TMP/$name.dev" >"$TMP/$name.diff" 2>&1
    check $? "$name: the device-resident step's checkpoint differs from the host step's on the same GPU model:
$(head -n 8 "$TMP/$name.diff")"
    echo "$name: device-resident step against the host step: $(head -n 1 "$TMP/$name.diff")"
}

# The pairs run in two lanes at once, each a process of its own: an emulated GPU step runs
# on one core, and the two lanes take about the same time. Each lane counts its own checks
# and ends with "LANE passed failed"; its output is printed after both have ended.
lane_a() {
    passed=0 failed=0 t0=$SECONDS
    # (TernGrad's parameter server, its gradient pull: on the device, dist/exchange_cuda.h)
    DEVICE_STEP=1 pair resnet8_terngrad "$BIN/train_resnet_emu" --image-size 32 --depth 8 --lr 0.01 --codec terngrad "${IMG[@]}" \
        --device cpu -- "$BIN/train_resnet_emu" --image-size 32 --depth 8 --lr 0.01 --codec terngrad "${IMG[@]}" --device cuda
    # (SBC exchanges weight deltas, every step without --delay: on the device, dist/exchange_cuda.h)
    BYTES_TOL=0.005 COPIES=0 DEVICE_STEP=1 pair lenet_sbc "$BIN/train_lenet_emu" --codec sbc "${IMG[@]}" --device cpu -- \
        "$BIN/train_lenet_emu" --codec sbc "${IMG[@]}" --device cuda
    # (the step through the host: GCX_HOST_STEP=1)
    GCX_HOST_STEP=1 resume_exact resnet8_resume_gpu "$BIN/train_resnet_emu" --image-size 32 --depth 8 --lr 0.01 --codec 3lc \
        "${IMG[@]}" --eval-every -1 --device cuda
    grep -q '^device: the step goes through the host: GCX_HOST_STEP' "$TMP/resnet8_resume_gpu.rc"
    check $? "resnet8_resume_gpu: the resumed run's step did not go through the host"

    # The device-resident step (dist/exchange_cuda.h; fp32 over allreduce, local workers sharing
    # the GPU): LeNet (no model state) copies nothing between host and device; ResNet-8 copies its
    # batch-norm statistics only. Against the CPU as above, and against the same GPU model with the
    # step through the host (GCX_HOST_STEP=1: host arenas, the CPU optimizer, the local backend's
    # allreduce): the same sums in the same order and the optimizer's bit-exact kernels, so the
    # final checkpoints (parameters, optimizer state) must be equal to the bit.
    COPIES=0 DEVICE_STEP=1 pair lenet_fp32_dev "$BIN/train_lenet_emu" --codec fp32 "${IMG[@]}" --device cpu -- \
        "$BIN/train_lenet_emu" --codec fp32 "${IMG[@]}" --device cuda
    RN8=("$BIN/train_resnet_emu" --image-size 32 --depth 8 --lr 0.01 --optim momentum --wd 5e-4 "${IMG[@]}")
    DEVICE_STEP=1 pair resnet8_fp32_dev "${RN8[@]}" --device cpu -- "${RN8[@]}" --device cuda
    device_vs_host resnet8_dev_vs_host "${RN8[@]}" --steps 3 --eval-every -1 --device cuda
    # 6 steps: an evaluation after step 5 (the epoch's end) and checkpoints every 2 steps bring the
    # model to the host in the middle of the run and back; --ema's average kept on the device
    COPIES=0 device_vs_host lenet_dev_vs_host "$BIN/train_lenet_emu" --codec fp32 --optim adam --lr 0.001 "${IMG[@]}" --steps 6 --eval-every 1 \
        --save-every 2 --ema 0.9 --device cuda
    # --save/--resume on the device-resident step (the parameters and the optimizer state come
    # down for the checkpoint and go back up after the resume)
    FAST=1 resume_exact resnet8_resume_dev "${RN8[@]}" --eval-every -1 --device cuda
    grep -q '^device: the step stays on the GPU' "$TMP/resnet8_resume_dev.rc"
    check $? "resnet8_resume_dev: the resumed run's step did not stay on the GPU"
    # The device-resident allgather: the GPU codecs encode from device memory (the CPU codecs'
    # frames), the residual stays on the device, the bundles are decoded into device memory.
    # fp16 (its default topology, no memory) and int8 (residual) against the CPU with the same
    # bytes per step; top-k with its residual against the host step on the same GPU model
    # (checkpoints, residuals included, equal to the bit, with an evaluation and checkpoints
    # mid-run and no copy in any step); int8 across --save/--resume (the residual in the
    # checkpoint).
    COPIES=0 DEVICE_STEP=1 pair lenet_fp16_dev "$BIN/train_lenet_emu" --codec fp16 "${IMG[@]}" --device cpu -- \
        "$BIN/train_lenet_emu" --codec fp16 "${IMG[@]}" --device cuda
    RN8AG=("${RN8[@]}" --codec int8 --topology allgather)
    DEVICE_STEP=1 pair resnet8_int8_dev "${RN8AG[@]}" --device cpu -- "${RN8AG[@]}" --device cuda
    # (with --log-layers: the device exchange's per-tensor statistics, against the host step's)
    LAYERS=1 COPIES=0 device_vs_host lenet_topk_dev_vs_host "$BIN/train_lenet_emu" --codec topk --topology allgather --lr 0.01 \
        "${IMG[@]}" --steps 6 --eval-every 1 --save-every 2 --device cuda
    # DGC's memory on the device (momentum correction and masking, warm-up density, weight decay
    # folded in): ResNet-8 against the CPU, LeNet against the host step
    RN8DGC=("$BIN/train_resnet_emu" --image-size 32 --depth 8 --lr 0.01 --optim momentum --wd 5e-4 --codec dgc "${IMG[@]}")
    BYTES_TOL=0.005 DEVICE_STEP=1 pair resnet8_dgc_dev "${RN8DGC[@]}" --device cpu -- "${RN8DGC[@]}" --device cuda
    COPIES=0 device_vs_host lenet_dgc_dev_vs_host "$BIN/train_lenet_emu" --codec dgc --optim momentum --wd 1e-3 --lr 0.01 \
        "${IMG[@]}" --steps 6 --eval-every 1 --save-every 2 --device cuda
    resume_exact resnet8_int8_resume_dev "${RN8AG[@]}" --eval-every -1 --device cuda
    grep -q '^device: the step stays on the GPU' "$TMP/resnet8_int8_resume_dev.rc"
    check $? "resnet8_int8_resume_dev: the resumed run's step did not stay on the GPU"
    # Weight deltas on the device: SBC's default configuration (--codec sbc --delay 10, SBC (2):
    # the anchor, the delta, its residual and the momentum masking on the device) against the
    # host step, 12 steps, one exchange, evaluations and checkpoints mid-window (the anchor comes
    # down for the replicas' check); and across --save/--resume with --delay 2 (the anchor in
    # the checkpoint: exchanges after steps 2 and 4, the resumed half's against the saved anchor)
    COPIES=0 device_vs_host lenet_sbc_dev_vs_host "$BIN/train_lenet_emu" --codec sbc --delay 10 "${IMG[@]}" --steps 12 \
        --eval-every 1 --save-every 4 --device cuda
    resume_exact lenet_sbc_resume_dev "$BIN/train_lenet_emu" --codec sbc --delay 2 "${IMG[@]}" --eval-every -1 --device cuda
    grep -q '^device: the step stays on the GPU' "$TMP/lenet_sbc_resume_dev.rc"
    check $? "lenet_sbc_resume_dev: the resumed run's step did not stay on the GPU"
    echo "lane a: $((SECONDS - t0)) s"
    echo "LANE $passed $failed"
}

lane_b() {
    passed=0 failed=0 t0=$SECONDS
    # The parameter server on the device (3LC section 3.1, 3lc's default topology): the pushes
    # averaged on worker 0, its global model and optimizer state and the pull's error
    # accumulation on the device, the compressed model delta pulled by both workers; against
    # the host step (6 steps, an evaluation and checkpoints mid-run, no copy in any step) and
    # across --save/--resume (the global model and the pull memory in the checkpoint)
    COPIES=0 device_vs_host lenet_3lc_dev_vs_host "$BIN/train_lenet_emu" --codec 3lc "${IMG[@]}" --steps 6 --eval-every 1 \
        --save-every 2 --device cuda
    resume_exact lenet_3lc_resume_dev "$BIN/train_lenet_emu" --codec 3lc "${IMG[@]}" --eval-every -1 --device cuda
    grep -q '^device: the step stays on the GPU' "$TMP/lenet_3lc_resume_dev.rc"
    check $? "lenet_3lc_resume_dev: the resumed run's step did not stay on the GPU"
    # GCOMP on the device: its levels from the GPU optimizer's state (the ring's partial sums at
    # every hop, GCOMP section 6.2, and the allgather; the parameter server's push and pull: the
    # model delta's), its Huffman tables kept between steps (rebuilt every 2nd encode here, so
    # they change within the run) and in the checkpoints (the "codecs" section, equal to the
    # host step's); against the host step over its default ring, the allgather and the
    # parameter server, and across --save/--resume on the ring (the resumed half codes with
    # the saved tables)
    GC=("$BIN/train_lenet_emu" --codec gcomp:every=2 --optim momentum --lr 0.01 "${IMG[@]}")
    LAYERS=1 COPIES=0 device_vs_host lenet_gcomp_dev_vs_host "${GC[@]}" --steps 6 --eval-every 1 --save-every 2 \
        --print-every 2 --device cuda
    grep -q '^exchange: .*topology ring' "$TMP/lenet_gcomp_dev_vs_host.rdev"
    check $? "lenet_gcomp_dev_vs_host: gcomp's run is not on the ring"
    COPIES=0 device_vs_host lenet_gcomp_ag_dev_vs_host "${GC[@]}" --topology allgather --steps 4 --eval-every -1 --device cuda
    COPIES=0 device_vs_host lenet_gcomp_ps_dev_vs_host "${GC[@]}" --topology ps --steps 4 --eval-every -1 --device cuda
    resume_exact lenet_gcomp_resume_dev "${GC[@]}" --eval-every -1 --device cuda
    grep -q '^device: the step stays on the GPU' "$TMP/lenet_gcomp_resume_dev.rc"
    check $? "lenet_gcomp_resume_dev: the resumed run's step did not stay on the GPU"

    # the character LSTM with fp16 and --clip 0.1 (of the average, on the device; below its norm,
    # so the losses differ from --clip 0's), and with dgc, whose local gradient clipping at
    # train_lstm's default --clip 5 (5 x 2^-1/2: below the gradients' norm too) is on the device
    LMD=(--model char --text "$TMP/text.txt" --hidden 32 --emb 16 --layers 2 --bptt 16 --batch 4 --workers 2 --steps 3
         --print-every 1 --codec fp16 --clip 0.1 --quiet)
    COPIES=0 DEVICE_STEP=1 pair charlstm_fp16_dev "$BIN/train_lstm_emu" "${LMD[@]}" --device cpu -- \
        "$BIN/train_lstm_emu" "${LMD[@]}" --device cuda

    LM=(--model char --text "$TMP/text.txt" --hidden 32 --emb 16 --layers 2 --bptt 16 --batch 4 --workers 2 --steps 3
        --print-every 1 --codec dgc --quiet)
    BYTES_TOL=0.005 COPIES=0 DEVICE_STEP=1 pair charlstm_dgc "$BIN/train_lstm_emu" "${LM[@]}" --device cpu -- "$BIN/train_lstm_emu" "${LM[@]}" --device cuda
    # the carried state on the device with the parameters: against the host step (whose
    # copies of it are counted) with an evaluation at the end of the first epoch (7 steps;
    # the trainer keeps the carried state aside and restores it) and checkpoints mid-run, no
    # counted copy in any step; and across --save/--resume (the carried state in the checkpoint)
    head -c 2000 "$REPO/README.md" >"$TMP/short.txt"
    LMC=(--model char --text "$TMP/short.txt" --hidden 32 --emb 16 --layers 2 --bptt 32 --batch 4 --workers 2
         --print-every 1 --codec fp16 --quiet)
    COPIES=0 device_vs_host charlstm_dev_vs_host "$BIN/train_lstm_emu" "${LMC[@]}" --steps 12 --eval-every 1 \
        --save-every 3 --device cuda
    grep -q '^eval  valid step 7 ' "$TMP/charlstm_dev_vs_host.rdev"
    check $? "charlstm_dev_vs_host: no evaluation in the middle of the run"
    CONV=0 resume_exact charlstm_resume_dev "$BIN/train_lstm_emu" "${LMC[@]}" --eval-every -1 --device cuda
    grep -q '^device: the step stays on the GPU' "$TMP/charlstm_resume_dev.rc"
    check $? "charlstm_resume_dev: the resumed run's step did not stay on the GPU"

    if [ -x "$BIN/train_resnet_nccl_emu" ] && command -v mpirun >/dev/null 2>&1; then
        export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
        NC=(--image-size 32 --depth 8 --lr 0.01 --codec 3lc "${DATA[@]}")
        MP=(mpirun -np 2 "$BIN/train_resnet_nccl_emu")
        # (3lc's parameter server on the device: its pushes and pulls, device bundles, over NCCL)
        BYTES_TOL=0.005 DEVICE_STEP=1 pair resnet8_3lc_nccl "${MP[@]}" --backend mpi --device cpu "${NC[@]}" -- \
            "${MP[@]}" --backend nccl --device cuda "${NC[@]}"
        # the device-resident step across processes: fp32's allreduce by NCCL on the device
        # arenas, int8's allgather frames over NCCL (bundles in device memory) and over MPI
        # (page-locked host bundles), int8's ring over NCCL (device bundles, forwarded on the
        # device) and gcomp's, dgc's allgather (frames of varying size), against MPI on the
        # CPU; and fp32 over
        # NCCL against its host step on the same GPU models (the same NCCL sums:
        # checkpoints equal to the bit)
        NCD=(--image-size 32 --depth 8 --lr 0.01 --optim momentum "${DATA[@]}")
        DEVICE_STEP=1 pair resnet8_fp32_nccl_dev "${MP[@]}" --backend mpi --device cpu --codec fp32 "${NCD[@]}" -- \
            "${MP[@]}" --backend nccl --device cuda --codec fp32 "${NCD[@]}"
        DEVICE_STEP=1 pair resnet8_int8_nccl_dev "${MP[@]}" --backend mpi --device cpu --codec int8 --topology allgather \
            "${NCD[@]}" -- "${MP[@]}" --backend nccl --device cuda --codec int8 --topology allgather "${NCD[@]}"
        DEVICE_STEP=1 pair resnet8_int8_ring_nccl_dev "${MP[@]}" --backend mpi --device cpu --codec int8 \
            --topology ring "${NCD[@]}" -- "${MP[@]}" --backend nccl --device cuda --codec int8 --topology ring "${NCD[@]}"
        BYTES_TOL=0.005 DEVICE_STEP=1 pair resnet8_gcomp_ring_nccl_dev "${MP[@]}" --backend mpi --device cpu --codec gcomp \
            --topology ring "${NCD[@]}" -- "${MP[@]}" --backend nccl --device cuda --codec gcomp --topology ring "${NCD[@]}"
        BYTES_TOL=0.005 DEVICE_STEP=1 pair resnet8_dgc_nccl_dev "${MP[@]}" --backend mpi --device cpu --codec dgc \
            "${NCD[@]}" -- "${MP[@]}" --backend nccl --device cuda --codec dgc "${NCD[@]}"
        DEVICE_STEP=1 pair resnet8_int8_mpi_dev "${MP[@]}" --backend mpi --device cpu --codec int8 --topology allgather \
            "${NCD[@]}" -- "${MP[@]}" --backend mpi --device cuda --codec int8 --topology allgather "${NCD[@]}"
        device_vs_host resnet8_nccl_dev_vs_host "${MP[@]}" --backend nccl --device cuda --codec fp32 "${NCD[@]}" --eval-every -1
        # fp32's allreduce over MPI on the device-resident step: the gradient staged through pinned
        # host memory for MPI's allreduce (the host path's sums: checkpoints equal to the bit)
        device_vs_host resnet8_mpi_dev_vs_host "${MP[@]}" --backend mpi --device cuda --codec fp32 "${NCD[@]}" --eval-every -1
        # one process, no launcher: a NCCL communicator of one rank, without MPI
        BYTES_TOL=0.005 DEVICE_STEP=1 pair resnet8_3lc_nccl1 "$BIN/train_resnet_nccl_emu" --backend local --workers 1 --device cpu "${NC[@]}" -- \
            "$BIN/train_resnet_nccl_emu" --backend nccl --workers 1 --device cuda "${NC[@]}"
    else
        echo "no MPI: the --backend nccl pair skipped"
    fi
    echo "lane b: $((SECONDS - t0)) s"
    echo "LANE $passed $failed"
}

(lane_a) >"$TMP/lane_a.out" 2>&1 &
(lane_b) >"$TMP/lane_b.out" 2>&1
wait
for lane in a b; do
    grep -v '^LANE ' "$TMP/lane_$lane.out"
    counts=$(grep '^LANE ' "$TMP/lane_$lane.out" | tail -n 1)
    if [ -n "$counts" ]; then set -- $counts; passed=$((passed + $2)); failed=$((failed + $3))
    else check 1 "lane $lane ended without its counts"; fi
done
echo "RESULT $passed $failed"
[ "$failed" -eq 0 ]
