#!/bin/sh
# Host emulation of the GPU codecs and optimizers (see README.md here):
#   tests/emulation/build.sh [OUT]      (OUT default build/emu/codec)
# builds OUT/test_emu_sched (the scheduler's own test, test_emu_sched.cpp), OUT/test_emu_async
# (the tracked runtime's ordering checks: copies through page-locked memory, two threads'
# streams; nn/test_emu_async.c),
# OUT/test_codec_emu (tests/cuda/test_codec_cuda.c against compress/*.cu),
# OUT/test_optim_emu (tests/cuda/test_optim_cuda.c against optim/optim_cuda.cu),
# OUT/fuzz_gcomp_state_emu (tests/fuzz/fuzz_gcomp_state.c's corpus replayed, the GPU
# codec's state loader against the CPU's), OUT/fuzz_frame_emu (tests/fuzz/fuzz_frame.c's,
# the GPU decoders of device frames against the CPU's), OUT/fuzz_gcomp_emu
# (tests/fuzz/fuzz_gcomp.c's: gcomp's GPU decoder, holding a table or not, alone and
# batched with its verdicts deferred, against the CPU's) and
# OUT/codecs_gpu_emu (bench/codecs_gpu.c; it runs, its timings mean nothing), the .cu
# files rewritten to C++ by transform.py (each block's threads run as fibers), linked
# to a NO_CUDA build of the library made in OUT; with MPI, OUT/test_comm_nccl_emu
# (tests/cuda/test_comm_nccl.c against dist/comm_nccl.c, NCCL emulated over MPI by
# nccl/fake_nccl.c; it starts itself under mpirun -np 2). The LSTM model and the image
# ops: nn/.
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
EMU=$HERE
OUT=${1:-$EMU/../../build/emu/codec}
. "$EMU/lib.sh"
# EMU_ASAN=1: the emulation, the kernels and the tests under AddressSanitizer
SAN=${EMU_ASAN:+-fsanitize=address -fno-omit-frame-pointer}
CXX="g++ $SAN"
CCS="gcc $SAN"
# device memory is tracked (nn/cuda_runtime.h, nn/emu_device.c): host code that
# touches it, or a copy whose kind does not match where its pointers live, stops
# the run; CUB's emulation (cub/) opens the device pages while it runs
TRACK="-include $HERE/nn/cuda_runtime.h -I$HERE/nn"
# a 16-, 32- or 64-bit load or store at an address its type does not divide stops a GPU
# kernel ("misaligned address"), not x86: UBSan's alignment check on the kernels stops the run
ALIGN="-fsanitize=alignment -fno-sanitize-recover=alignment"
for f in compress/codec_cuda compress/sparse_cuda compress/gcomp_cuda optim/optim_cuda; do
  b=$(basename "$f")
  python3 "$HERE/transform.py" "$REPO/$f.cu" "$O/$b.cpp"
  $CXX $ALIGN -std=c++17 -O1 -g -w $TRACK -I"$HERE" -I"$REPO" -c "$O/$b.cpp" -o "$O/$b.o"
done
$CXX -std=c++17 -O2 -g -w -I"$HERE" -c "$HERE/emu_sched.cpp" -o "$O/emu_sched.o"
# the scheduler's own test: legal warp and block barriers pass, misuse is caught
$CXX -std=c++17 -O1 -g -Wall -I"$HERE" "$HERE/test_emu_sched.cpp" "$O/emu_sched.o" -o "$OUT/test_emu_sched"
CF="-std=c11 -O2 -g -D_GNU_SOURCE -fno-math-errno -DHAVE_CUDA $TRACK -I$HERE -I$REPO -fopenmp -DHAVE_OPENMP"
CF="$CF -I/usr/include/x86_64-linux-gnu/openblas-openmp"
LF="-fsanitize=alignment" # the kernels' UBSan runtime
$CCS $CF -c "$HERE/nn/emu_device.c" -o "$O/emu_device.o"
EMU_OBJS="$O/emu_sched.o $O/emu_device.o"
$CCS $CF "$REPO/tests/cuda/test_codec_cuda.c" $O/codec_cuda.o $O/sparse_cuda.o $O/gcomp_cuda.o $EMU_OBJS \
  "$LIB" $LIBS $LF -fopenmp -o "$OUT/test_codec_emu"
# the tracked runtime's own test: copies through page-locked memory kept pending to the wait
$CCS $CF "$HERE/nn/test_emu_async.c" $O/emu_device.o $LF -lpthread -o "$OUT/test_emu_async"
$CCS $CF "$REPO/tests/cuda/test_optim_cuda.c" $O/optim_cuda.o $EMU_OBJS "$LIB" $LIBS $LF -fopenmp -o "$OUT/test_optim_emu"
$CCS $CF "$REPO/bench/codecs_gpu.c" $O/codec_cuda.o $O/sparse_cuda.o $O/gcomp_cuda.o $EMU_OBJS \
  "$LIB" $LIBS $LF -fopenmp -o "$OUT/codecs_gpu_emu"
# the fuzz target of gcomp's state blob, its corpus replayed (tests/fuzz/replay_main.c), with
# the GPU codec's loader against the CPU's
$CCS $CF -DCORPUS_DIR='"tests/fuzz/corpus/fuzz_gcomp_state"' "$REPO/tests/fuzz/fuzz_gcomp_state.c" \
  "$REPO/tests/fuzz/replay_main.c" $O/codec_cuda.o $O/sparse_cuda.o $O/gcomp_cuda.o $EMU_OBJS "$LIB" $LIBS $LF \
  -fopenmp -o "$OUT/fuzz_gcomp_state_emu"
# the frames' fuzz target, its corpus replayed, with the GPU decoders of device frames against the CPU's
$CCS $CF -DCORPUS_DIR='"tests/fuzz/corpus/fuzz_frame"' "$REPO/tests/fuzz/fuzz_frame.c" \
  "$REPO/tests/fuzz/replay_main.c" $O/codec_cuda.o $O/sparse_cuda.o $O/gcomp_cuda.o $EMU_OBJS "$LIB" $LIBS $LF \
  -fopenmp -o "$OUT/fuzz_frame_emu"
# gcomp's payloads' fuzz target, its corpus replayed, with the GPU decoders (one frame at a time, and
# batched with deferred verdicts) of decoders holding a table against the CPU's
$CCS $CF -DCORPUS_DIR='"tests/fuzz/corpus/fuzz_gcomp"' "$REPO/tests/fuzz/fuzz_gcomp.c" \
  "$REPO/tests/fuzz/replay_main.c" $O/codec_cuda.o $O/sparse_cuda.o $O/gcomp_cuda.o $EMU_OBJS "$LIB" $LIBS $LF \
  -fopenmp -o "$OUT/fuzz_gcomp_emu"
built="$OUT/test_emu_sched $OUT/test_emu_async $OUT/test_codec_emu $OUT/test_optim_emu $OUT/codecs_gpu_emu $OUT/fuzz_gcomp_state_emu"
built="$built $OUT/fuzz_frame_emu $OUT/fuzz_gcomp_emu"
if [ -n "$NCCL_CF" ]; then
  NF="$NCCL_CF -fopenmp"
  $CCS $NF -c "$REPO/dist/comm_nccl.c" -o "$O/comm_nccl.o"
  $CCS $NF -c "$HERE/nccl/fake_nccl.c" -o "$O/fake_nccl.o"
  $CCS $NF -c "$REPO/tests/cuda/test_comm_nccl.c" -o "$O/test_comm_nccl.o"
  $CCS -fopenmp "$O/test_comm_nccl.o" "$O/comm_nccl.o" "$O/fake_nccl.o" "$LIB" $LIBS -o "$OUT/test_comm_nccl_emu"
  built="$built $OUT/test_comm_nccl_emu"
fi
echo "built $built"
