#!/usr/bin/env bash
# Packs gcx's CUDA build for a GPU machine that has the NVIDIA libraries but
# not gcx's build dependencies (OpenBLAS, Open MPI, cuDNN headers, ...):
#
#   scripts/gpu_bundle.sh [FILE]        (default build/gcx-gpu.tar.xz)
#
# Builds here, where nvcc is, a second build beside the usual one: in build/gpu,
# with GPU_OPT (default "-O3 -march=x86-64-v3 -g": AVX2 and FMA, which every x86
# host of a Hopper GPU has, and no AVX-512, which some lack; the usual build's
# -march=native would take this machine's instruction set along), the binaries,
# the CUDA tests, bench/resnet_gpu, bench/codecs_gpu and bench/exchange. It checks
# that none of them holds an AVX-512 instruction, then packs, with the paths they
# have in a checkout:
#   the binaries: ./train_resnet ./train_lstm ./train_lenet ./gcx,
#                 build/tests/cuda/*, build/bench/resnet_gpu, build/bench/codecs_gpu,
#                 build/bench/exchange;
#   build/gpu-libs/: every shared library they load that is neither part of the
#                 C runtime nor NVIDIA's (CUDA runtime, cuBLAS, cuDNN, NCCL come
#                 from the GPU machine, matching its driver);
#   build/gpu-data/: the small text datasets (shakespeare, ptb) from $DATA_DIR,
#                 when they are there, and the first GPU_CIFAR_RECORDS (default 2000;
#                 0: none) images of each CIFAR-10 file (gpu_check.sh's cifar phase:
#                 the whole of CIFAR-10 would not fit in what a device call carries).
# scripts/gpu_check.sh --bundle FILE unpacks it in a checkout of the same commit
# on the GPU machine and runs the checks (docs/GPU.md).
set -euo pipefail
cd "$(dirname "$0")/.."
OUTF=${1:-build/gcx-gpu.tar.xz}
GPU_OPT=${GPU_OPT:--O3 -march=x86-64-v3 -g}
command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || { echo "gpu_bundle: nvcc not found: nothing to bundle" >&2; exit 1; }
export PATH=$PATH:/usr/local/cuda/bin
G=build/gpu
# objects built with other flags are not reused
if [ "$(cat "$G/opt" 2>/dev/null)" != "$GPU_OPT" ]; then rm -rf "$G"; mkdir -p "$G"; echo "$GPU_OPT" >"$G/opt"; fi
make -s -j"$(nproc)" BUILD="$G" BIN_DIR="$G/bin/" OPT="$GPU_OPT" \
    all build-cuda-tests "$G/bench/resnet_gpu" "$G/bench/codecs_gpu" "$G/bench/exchange"

# the bundle's tree: path in the bundle, path built
S=$G/stage
rm -rf "$S"
map=()
for b in train_resnet train_lstm train_lenet gcx; do map+=("$b $G/bin/$b"); done
for b in resnet_gpu codecs_gpu exchange; do map+=("build/bench/$b $G/bench/$b"); done
for t in tests/cuda/test_*.c; do map+=("build/tests/cuda/$(basename "$t" .c) $G/tests/cuda/$(basename "$t" .c)"); done
bins=()
for m in "${map[@]}"; do
    set -- $m
    [ -x "$2" ] || { echo "gpu_bundle: $2 was not built" >&2; exit 1; }
    mkdir -p "$(dirname "$S/$1")"
    cp "$2" "$S/$1"
    bins+=("$S/$1")
done
# no AVX-512 (zmm registers, mask registers) in the code gcx compiled
avx512=()
for b in "${bins[@]}"; do
    if objdump -d --no-show-raw-insn "$b" | grep -Eq '%zmm|%k[1-7]'; then avx512+=("${b#"$S"/}"); fi
done
if [ ${#avx512[@]} -gt 0 ]; then
    echo "gpu_bundle: AVX-512 instructions in ${avx512[*]} (GPU_OPT=$GPU_OPT)" >&2
    exit 1
fi

# libraries: what ldd resolves, minus the C runtime and NVIDIA's own
mkdir -p "$S/build/gpu-libs"
skip='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|libcuda|libcudart|libcublas|libcublasLt|libcudnn.*|libnccl|libnvidia.*)\.so'
ldd "${bins[@]}" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u | while read -r name path; do
    if [[ "$name" =~ $skip ]]; then continue; fi
    cp -L "$path" "$S/build/gpu-libs/$name"
done
if ldd "${bins[@]}" | grep -q "not found"; then
    echo "gpu_bundle: some libraries are not found here:" >&2
    ldd "${bins[@]}" | grep "not found" | sort -u >&2
    exit 1
fi

data=()
DD=${DATA_DIR:-data}
for d in shakespeare ptb; do
    if [ -d "$DD/$d" ]; then
        mkdir -p "$S/build/gpu-data"
        cp -r "$DD/$d" "$S/build/gpu-data/"
        data+=(build/gpu-data/"$d")
    fi
done

CR=${GPU_CIFAR_RECORDS:-2000}
[[ "$CR" =~ ^[0-9]+$ ]] || { echo "gpu_bundle: GPU_CIFAR_RECORDS must be a number" >&2; exit 1; }
if [ "$CR" -gt 0 ] && [ -f "$DD/cifar-10-batches-bin/test_batch.bin" ]; then
    mkdir -p "$S/build/gpu-data/cifar-10-batches-bin"
    for f in "$DD"/cifar-10-batches-bin/data_batch_[1-5].bin "$DD/cifar-10-batches-bin/test_batch.bin"; do
        head -c $((CR * 3073)) "$f" >"$S/build/gpu-data/cifar-10-batches-bin/$(basename "$f")"
    done
    data+=("build/gpu-data/cifar-10-batches-bin ($CR images of each file)")
fi

git rev-parse HEAD >"$S/build/gpu-commit" 2>/dev/null || echo unknown >"$S/build/gpu-commit"
mkdir -p "$(dirname "$OUTF")"
out=$(cd "$(dirname "$OUTF")" && pwd)/$(basename "$OUTF")
(cd "$S" && tar -cJf "$out" ./*)
echo "gpu_bundle: $OUTF ($(du -h "$OUTF" | cut -f1)): ${#bins[@]} binaries built with $GPU_OPT, $(ls "$S/build/gpu-libs" | wc -l) libraries ($(ls "$S/build/gpu-libs" | tr '\n' ' ')), data: ${data[*]:-none}, commit $(cat "$S/build/gpu-commit")"
