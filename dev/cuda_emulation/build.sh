set -e
cd /work/main
for f in codec_cuda sparse_cuda gcomp_cuda; do python3 /tmp/fakecuda/transform.py compress/$f.cu /tmp/fakecuda/$f.cpp; g++ -std=c++17 -O1 -g -w -I/tmp/fakecuda -I. -c /tmp/fakecuda/$f.cpp -o /tmp/fakecuda/$f.o; done
gcc -std=c11 -O2 -g -D_GNU_SOURCE -fno-math-errno -DHAVE_CUDA -I/tmp/fakecuda -I. -fopenmp -DHAVE_OPENMP tests/cuda/test_codec_cuda.c /tmp/fakecuda/codec_cuda.o /tmp/fakecuda/sparse_cuda.o /tmp/fakecuda/gcomp_cuda.o /tmp/fakecuda/emu_sched.o build/libgcx.a -lm -lz -lstdc++ -fopenmp -o /tmp/fakecuda/test_codec_emu
