#!/bin/sh
# Host emulation of the GPU LSTM language model (see README.md here):
#   dev/cuda_emulation/lstm/build.sh [OUT]      (OUT default /tmp/gcx-lstm-emu)
# builds OUT/test_lstm_lm_emu: tests/cuda/test_lstm_lm_cuda.c against the real
# nn/lstm_lm_cuda.c and nn/{lstm_cuda,linear,softmax_ce,cuda_ctx,model_cuda}.cu
# rewritten to C++ (kernels run as fibers, cuBLAS is a reference sgemm), and
# OUT/test_lstm_lm_calib: the same test with the "GPU" model replaced by a CPU
# model whose parameters are perturbed by PERTURB (default 1e-6) relative, to
# calibrate the tolerances, and OUT/test_nn_cuda_ops_emu: tests/cuda/test_nn_cuda_ops.c
# against the image ops' kernels (run it with GCX_TEST_OPS=elementwise,swap01,avgpool,
# maxpool,shortcut,linear,softmax: cuDNN is not emulated, so conv and batchnorm refuse).
# All link a NO_CUDA build of the library made in OUT.
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
OUT=${1:-/tmp/gcx-lstm-emu}
mkdir -p "$OUT/obj"
make -s -C "$REPO" NO_CUDA=1 BUILD="$OUT/build-nocuda" "$OUT/build-nocuda/libgcx.a"
LIB="$OUT/build-nocuda/libgcx.a"
for f in lstm_cuda linear softmax_ce cuda_ctx model_cuda activation layout pool resnet_cuda conv2d batchnorm; do
  python3 "$HERE/transform.py" "$REPO/nn/$f.cu" "$OUT/obj/$f.cpp"
  g++ -std=c++17 -O1 -g -w -D__CUDACC__ -DHAVE_CUDA -include "$HERE/cuda_runtime.h" -I"$HERE" -I"$REPO" \
    -c "$OUT/obj/$f.cpp" -o "$OUT/obj/$f.o"
done
python3 "$HERE/transform.py" "$REPO/optim/optim_cuda.cu" "$OUT/obj/optim_cuda.cpp"
g++ -std=c++17 -O1 -g -w -D__CUDACC__ -DHAVE_CUDA -include "$HERE/cuda_runtime.h" -I"$HERE" -I"$REPO" \
  -c "$OUT/obj/optim_cuda.cpp" -o "$OUT/obj/optim_cuda.o"
g++ -std=c++17 -O1 -g -w -I"$HERE/.." -c "$HERE/../emu_sched.cpp" -o "$OUT/obj/emu_sched.o"
CF="-std=c11 -O1 -g -Wall -Wextra -D_GNU_SOURCE -fno-math-errno -DHAVE_CUDA -fopenmp -DHAVE_OPENMP -I$HERE -I$REPO"
CF="$CF -I/usr/include/x86_64-linux-gnu/openblas-openmp"
gcc $CF -c "$HERE/emu_cublas.c" -o "$OUT/obj/emu_cublas.o"
gcc $CF -c "$HERE/emu_device.c" -o "$OUT/obj/emu_device.o"
gcc $CF -DEMU_NO_PROTECT -c "$HERE/emu_device.c" -o "$OUT/obj/emu_device_open.o"
gcc $CF -c "$HERE/perturb_shim.c" -o "$OUT/obj/perturb_shim.o"
gcc $CF -c "$REPO/nn/lstm_lm_cuda.c" -o "$OUT/obj/lstm_lm_cuda.o"
gcc $CF -c "$REPO/tests/cuda/test_lstm_lm_cuda.c" -o "$OUT/obj/test_lstm_lm_cuda.o"
gcc $CF -c "$REPO/tests/cuda/test_nn_cuda_ops.c" -o "$OUT/obj/test_nn_cuda_ops.o"
LIBS="-L/usr/lib/x86_64-linux-gnu/openblas-openmp -Wl,-rpath,/usr/lib/x86_64-linux-gnu/openblas-openmp -lopenblas"
LIBS="$LIBS -lz -lm -lpthread $(mpicc --showme:link 2>/dev/null || true)"
O="$OUT/obj"
g++ -fopenmp $O/test_lstm_lm_cuda.o $O/lstm_lm_cuda.o $O/lstm_cuda.o $O/linear.o $O/softmax_ce.o $O/cuda_ctx.o \
  $O/model_cuda.o $O/optim_cuda.o $O/emu_sched.o $O/emu_cublas.o $O/emu_device.o "$LIB" $LIBS -o "$OUT/test_lstm_lm_emu"
gcc -fopenmp $O/test_lstm_lm_cuda.o $O/perturb_shim.o $O/emu_device_open.o "$LIB" $LIBS -o "$OUT/test_lstm_lm_calib"
g++ -fopenmp $O/test_nn_cuda_ops.o $O/activation.o $O/layout.o $O/pool.o $O/resnet_cuda.o $O/linear.o $O/softmax_ce.o \
  $O/conv2d.o $O/batchnorm.o $O/cuda_ctx.o $O/emu_sched.o $O/emu_cublas.o $O/emu_device.o "$LIB" $LIBS \
  -o "$OUT/test_nn_cuda_ops_emu"
echo "built $OUT/test_lstm_lm_emu, $OUT/test_lstm_lm_calib and $OUT/test_nn_cuda_ops_emu"
