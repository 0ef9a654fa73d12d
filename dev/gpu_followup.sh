#!/usr/bin/env bash
# The follow-up of a first scripts/gpu_check.sh run on a GPU, in one short command:
#   dev/gpu_followup.sh BUNDLE OUTDIR DEADLINE_SECONDS
# 1. where ResNet-20/110's GPU step goes against PyTorch's: bench/resnet_gpu in its
#    cuDNN choices (deterministic or not, FFT/Winograd or not, host or device SGD),
#    PyTorch eager (cudnn.benchmark) beside them;
# 2. the trainers' step breakdown, forward and backward now timed to the end of their
#    kernels (model_cuda_sync): ResNet-110 fp32 and 3lc, 10 steps each;
# 3. the sanitize phase of scripts/gpu_check.sh for what time is left.
set -u
B=$1 O=$2 D=$3
T0=$EPOCHSECONDS
left() { echo $((D - (EPOCHSECONDS - T0))); }
mkdir -p "$O"
scripts/gpu_check.sh --bundle "$B" --logs "$O/env" env >"$O/env.txt" 2>&1
export LD_LIBRARY_PATH=$(grep -m1 '^LD_LIBRARY_PATH=' "$O/env/env.log" | cut -d= -f2-)
R=$O/resnet.txt
for d in 20 110; do
    for v in "" "--nondeterministic" "--fft-winograd" "--nondeterministic --fft-winograd"; do
        for o in "" "--device-optim"; do
            echo "== gcx depth $d $v $o" >>"$R"
            timeout 60 build/bench/resnet_gpu --depth $d --batch 128 --steps 30 $v $o 2>&1 | grep -E '^(gcx|  per step|error)' >>"$R"
        done
    done
    echo "== torch depth $d" >>"$R"
    timeout 90 python3 bench/resnet_torch.py --device cuda --depth $d --batch 128 --steps 30 2>&1 | tail -n 2 >>"$R"
    echo "== torch depth $d --no-benchmark" >>"$R"
    timeout 90 python3 bench/resnet_torch.py --device cuda --depth $d --batch 128 --steps 30 --no-benchmark 2>&1 | tail -n 2 >>"$R"
done
echo "resnet done at $((EPOCHSECONDS - T0)) s" >>"$R"
python3 scripts/make_image_folder.py /tmp/gcx-folder 64 16 >/dev/null 2>&1
S=$O/share.txt
for c in fp32 3lc sbc; do
    timeout 60 ./train_resnet --dataset folder:/tmp/gcx-folder --image-size 32 --workers 1 --depth 110 --batch 128 \
        --steps 10 --print-every 5 --lr 0.01 --eval-every 0 --codec $c --quiet --device cuda --log "$O/share_$c.jsonl" \
        >"$O/share_$c.log" 2>&1
    echo "$c exit $?: $(python3 scripts/step_breakdown.py "$O/share_$c.jsonl" 2>&1)" >>"$S"
done
echo "share done at $((EPOCHSECONDS - T0)) s" >>"$S"
l=$(left)
[ "$l" -gt 30 ] && GCX_SANITIZE_SECONDS=${GCX_SANITIZE_SECONDS:-22} scripts/gpu_check.sh --bundle "$B" --logs "$O/san" \
    --deadline "$l" sanitize >"$O/san.txt" 2>&1
cat "$R" "$S" "$O/san/summary.txt" 2>/dev/null
