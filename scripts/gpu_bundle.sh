#!/usr/bin/env bash
# Packs gcx's CUDA build for a GPU machine that has the NVIDIA libraries but
# not gcx's build dependencies (OpenBLAS, Open MPI, cuDNN headers, ...):
#
#   scripts/gpu_bundle.sh [FILE]        (default build/gcx-gpu.tar.xz)
#
# Builds (make: the binaries, the CUDA tests, bench/resnet_gpu, bench/codecs_gpu,
# bench/exchange)
# here, where nvcc is, then packs, with paths relative to the repository root:
#   the binaries: ./train_resnet ./train_lstm ./train_lenet ./gcx,
#                 build/tests/cuda/*, build/bench/resnet_gpu, build/bench/codecs_gpu,
#                 build/bench/exchange;
#   build/gpu-libs/: every shared library they load that is neither part of the
#                 C runtime nor NVIDIA's (CUDA runtime, cuBLAS, cuDNN, NCCL come
#                 from the GPU machine, matching its driver);
#   build/gpu-data/: the small text datasets (shakespeare, ptb) from $DATA_DIR,
#                 when they are there.
# scripts/gpu_check.sh --bundle FILE unpacks it in a checkout of the same commit
# on the GPU machine and runs the checks (docs/GPU.md).
set -euo pipefail
cd "$(dirname "$0")/.."
OUTF=${1:-build/gcx-gpu.tar.xz}
command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || { echo "gpu_bundle: nvcc not found: nothing to bundle" >&2; exit 1; }
export PATH=$PATH:/usr/local/cuda/bin
make -s -j"$(nproc)" all build-cuda-tests build/bench/resnet_gpu build/bench/codecs_gpu build/bench/exchange
bins=(train_resnet train_lstm train_lenet gcx build/bench/resnet_gpu build/bench/codecs_gpu build/bench/exchange)
for t in tests/cuda/test_*.c; do bins+=("build/tests/cuda/$(basename "$t" .c)"); done
for b in "${bins[@]}"; do
    [ -x "$b" ] || { echo "gpu_bundle: $b was not built" >&2; exit 1; }
done

# libraries: what ldd resolves, minus the C runtime and NVIDIA's own
rm -rf build/gpu-libs build/gpu-data
mkdir -p build/gpu-libs
skip='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|libcuda|libcudart|libcublas|libcublasLt|libcudnn.*|libnccl|libnvidia.*)\.so'
ldd "${bins[@]}" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u | while read -r name path; do
    if [[ "$name" =~ $skip ]]; then continue; fi
    cp -L "$path" "build/gpu-libs/$name"
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
        mkdir -p build/gpu-data
        cp -r "$DD/$d" build/gpu-data/
        data+=(build/gpu-data/"$d")
    fi
done

git rev-parse HEAD >build/gpu-commit 2>/dev/null || echo unknown >build/gpu-commit
tar -cJf "$OUTF" "${bins[@]}" build/gpu-libs "${data[@]}" build/gpu-commit
echo "gpu_bundle: $OUTF ($(du -h "$OUTF" | cut -f1)): ${#bins[@]} binaries, $(ls build/gpu-libs | wc -l) libraries ($(ls build/gpu-libs | tr '\n' ' ')), data: ${data[*]:-none}, commit $(cat build/gpu-commit)"
