#!/bin/sh
# Host emulation of the GPU models of nn/ (see README.md here):
#   tests/emulation/nn/build.sh [OUT]      (OUT default build/emu/nn)
# builds, each against the real nn/*.cu rewritten to C++ (kernels run as fibers),
# the real host code of the GPU models, cuBLAS as a reference sgemm and cuDNN as
# reference loops (emu_cudnn.c), all on tracked device memory (emu_device.c):
#   OUT/test_lstm_lm_emu       tests/cuda/test_lstm_lm_cuda.c
#   OUT/test_lstm_lm_calib     the same test, the "GPU" model a CPU model whose parameters
#                              are perturbed by PERTURB (default 1e-6) relative
#   OUT/test_nn_cuda_ops_emu   tests/cuda/test_nn_cuda_ops.c (every image op)
#   OUT/test_resnet_cuda_emu   tests/cuda/test_resnet_cuda.c
#   OUT/test_nn_cuda_lenet_emu tests/cuda/test_nn_cuda_lenet.c
#   OUT/train_resnet_emu, OUT/train_lenet_emu, OUT/train_lstm_emu (with the GPU codecs, in
#                              small launches as ../build.sh makes them, and
#                              dist/exchange_cuda for the device-resident step)
#                              the trainers, whose --device cuda runs on the emulation
#                              (several local workers share the emulated device)
#   OUT/train_resnet_nccl_emu  with MPI: train_resnet whose --backend nccl runs on ../nccl's
#                              NCCL over MPI (its buffers in host memory), under mpirun
#   OUT/test_exchange_cuda_emu tests/cuda/test_exchange_cuda.c (the device-resident exchange)
#   OUT/resnet_gpu_emu         bench/resnet_gpu.c (runs; its timings mean nothing here)
#   OUT/exchange_emu           bench/exchange.c, whose --device cuda counts the waits and the
#                              operations a device-resident step issues (its codecs' blocks of
#                              256 threads, as test_exchange_cuda_emu's; timings mean nothing)
# All link a NO_CUDA build of the library made in OUT.
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
EMU=$(cd "$HERE/.." && pwd)
OUT=${1:-$EMU/../../build/emu/nn}
. "$EMU/lib.sh"
# EMU_ASAN=1: the emulation, the GPU models' host code and the tests under AddressSanitizer
# (the library itself is not instrumented, but its malloc and memcpy are checked)
SAN=${EMU_ASAN:+-fsanitize=address -fno-omit-frame-pointer}
CXX="g++ $SAN"
CCS="gcc $SAN"
DEFS="-DHAVE_CUDA -DHAVE_CUDNN"
cu() { # nn/X.cu or optim/X.cu -> $O/X.o
  python3 "$HERE/transform.py" "$REPO/$1" "$O/$(basename "$1" .cu).cpp"
  $CXX -std=c++17 -O1 -g -w -D__CUDACC__ $DEFS -include "$HERE/cuda_runtime.h" -I"$HERE" -I"$REPO" \
    -c "$O/$(basename "$1" .cu).cpp" -o "$O/$(basename "$1" .cu).o"
}
for f in lstm_cuda linear softmax_ce cuda_ctx model_cuda activation layout pool resnet_cuda conv2d batchnorm; do
  cu nn/$f.cu
done
cu optim/optim_cuda.cu
cu dist/exchange_cuda.cu
# the GPU codecs, for the device-resident exchange (CUB's stand-ins from ..): X.o as written
# (blocks of 256 threads, a thread per value up to 65536 blocks), for test_exchange_cuda_emu;
# X_small.o with ../build.sh's blocks of 64 threads and at most 3 blocks (as test_codec_emu
# runs them; their frames do not depend on it), for the trainers and the benchmark: a codec
# kernel with warp shuffles costs a fiber switch per thread and shuffle, and at a thread per
# value that made LeNet's 3lc steps 6 times as slow
for f in codec_cuda sparse_cuda gcomp_cuda; do
  python3 "$HERE/transform.py" "$REPO/compress/$f.cu" "$O/$f.cpp"
  python3 "$EMU/transform.py" "$REPO/compress/$f.cu" "$O/${f}_small.cpp"
  for v in "$f" "${f}_small"; do
    $CXX -std=c++17 -O1 -g -w -include "$HERE/cuda_runtime.h" -I"$HERE" -I"$EMU" -I"$REPO" -c "$O/$v.cpp" -o "$O/$v.o"
  done
done
$CXX -std=c++17 -O2 -g -w -I"$EMU" -c "$EMU/emu_sched.cpp" -o "$O/emu_sched.o"
CF="-std=c11 -O1 -g -Wall -Wextra -D_GNU_SOURCE -fno-math-errno $DEFS -fopenmp -DHAVE_OPENMP -I$HERE -I$REPO"
CF="$CF -I/usr/include/x86_64-linux-gnu/openblas-openmp"
$CCS $CF -O2 -march=native -c "$HERE/emu_cublas.c" -o "$O/emu_cublas.o" # native: fmaf inline
$CCS $CF -O3 -march=native -c "$HERE/emu_cudnn.c" -o "$O/emu_cudnn.o"
$CCS $CF -c "$HERE/emu_device.c" -o "$O/emu_device.o"
$CCS $CF -DEMU_NO_PROTECT -c "$HERE/emu_device.c" -o "$O/emu_device_open.o"
$CCS $CF -c "$HERE/perturb_shim.c" -o "$O/perturb_shim.o"
for f in nn/model_cuda nn/lstm_lm_cuda nn/resnet_cuda nn/lenet_cuda dist/exchange_cuda tests/cuda/test_lstm_lm_cuda tests/cuda/test_nn_cuda_ops \
         tests/cuda/test_resnet_cuda tests/cuda/test_nn_cuda_lenet; do
  $CCS $CF -c "$REPO/$f.c" -o "$O/$(basename $f)_c.o"
done
EMU_OBJS="$O/emu_sched.o $O/emu_cublas.o $O/emu_cudnn.o $O/emu_device.o"
KERNELS="$O/activation.o $O/layout.o $O/pool.o $O/resnet_cuda.o $O/linear.o $O/softmax_ce.o $O/conv2d.o $O/batchnorm.o"
KERNELS="$KERNELS $O/cuda_ctx.o $O/model_cuda.o $O/model_cuda_c.o $O/optim_cuda.o"
$CXX -fopenmp $O/test_lstm_lm_cuda_c.o $O/lstm_lm_cuda_c.o $O/lstm_cuda.o $KERNELS $EMU_OBJS "$LIB" $LIBS \
  -o "$OUT/test_lstm_lm_emu"
$CCS -fopenmp $O/test_lstm_lm_cuda_c.o $O/perturb_shim.o $O/emu_device_open.o "$LIB" $LIBS -o "$OUT/test_lstm_lm_calib"
$CXX -fopenmp $O/test_nn_cuda_ops_c.o $KERNELS $EMU_OBJS "$LIB" $LIBS -o "$OUT/test_nn_cuda_ops_emu"
$CXX -fopenmp $O/test_resnet_cuda_c.o $O/resnet_cuda_c.o $KERNELS $EMU_OBJS "$LIB" $LIBS -o "$OUT/test_resnet_cuda_emu"
$CXX -fopenmp $O/test_nn_cuda_lenet_c.o $O/lenet_cuda_c.o $KERNELS $EMU_OBJS "$LIB" $LIBS -o "$OUT/test_nn_cuda_lenet_emu"
MODELS="$O/resnet_cuda_c.o $O/lenet_cuda_c.o $O/lstm_lm_cuda_c.o $O/lstm_cuda.o"
# the trainers' loop and the files beside it as a CUDA build compiles them (its device check
# and cuDNN setting, the device-resident step of dist/exchange_cuda.h), linked ahead of the
# library's NO_CUDA copy
TRAINER=""
for f in trainer train_options train_ckpt train_log; do
  $CCS $CF -c "$REPO/examples/$f.c" -o "$O/${f}_cuda.o"
  TRAINER="$TRAINER $O/${f}_cuda.o"
done
MODELS="$MODELS $O/exchange_cuda.o $O/exchange_cuda_c.o"
SMALL="$MODELS $O/codec_cuda_small.o $O/sparse_cuda_small.o $O/gcomp_cuda_small.o"
MODELS="$MODELS $O/codec_cuda.o $O/sparse_cuda.o $O/gcomp_cuda.o"
for t in train_resnet train_lenet train_lstm; do
  $CCS $CF -c "$REPO/examples/$t.c" -o "$O/${t}_main.o"
  $CXX -fopenmp "$O/${t}_main.o" $TRAINER $SMALL $KERNELS $EMU_OBJS "$LIB" $LIBS -o "$OUT/${t}_emu"
done
$CCS $CF -c "$REPO/tests/cuda/test_exchange_cuda.c" -o "$O/test_exchange_cuda_c.o"
$CXX -fopenmp "$O/test_exchange_cuda_c.o" $MODELS $KERNELS $EMU_OBJS "$LIB" $LIBS -o "$OUT/test_exchange_cuda_emu"
$CCS $CF -c "$REPO/bench/resnet_gpu.c" -o "$O/resnet_gpu_main.o"
$CXX -fopenmp "$O/resnet_gpu_main.o" $SMALL $KERNELS $EMU_OBJS "$LIB" $LIBS -o "$OUT/resnet_gpu_emu"
built="test_lstm_lm_emu test_lstm_lm_calib test_nn_cuda_ops_emu test_resnet_cuda_emu test_nn_cuda_lenet_emu"
$CCS $CF -c "$REPO/bench/exchange.c" -o "$O/exchange_main.o"
$CXX -fopenmp "$O/exchange_main.o" $MODELS $KERNELS $EMU_OBJS "$LIB" $LIBS -o "$OUT/exchange_emu"
built="$built train_resnet_emu train_lenet_emu train_lstm_emu resnet_gpu_emu test_exchange_cuda_emu exchange_emu"
if [ -n "$NCCL_CF" ]; then
  $CCS $NCCL_CF -c "$REPO/dist/comm_nccl.c" -o "$O/comm_nccl.o"
  $CCS $NCCL_CF -c "$EMU/nccl/fake_nccl.c" -o "$O/fake_nccl.o"
  $CXX -fopenmp "$O/train_resnet_main.o" $TRAINER "$O/comm_nccl.o" "$O/fake_nccl.o" $SMALL $KERNELS $EMU_OBJS "$LIB" $LIBS \
    -o "$OUT/train_resnet_nccl_emu"
  built="$built train_resnet_nccl_emu"
fi
echo "built in $OUT: $built"
