# Sourced by build.sh and nn/build.sh with EMU (this folder) and OUT set: makes a
# NO_CUDA build of the library in OUT and sets REPO, O (object folder), LIB, LIBS
# (link flags) and, with MPI, NCCL_CF (compile flags against nccl/'s NCCL over MPI).
REPO=$(cd "$EMU/../.." && pwd)
O="$OUT/obj"
mkdir -p "$O"
make -s -C "$REPO" NO_CUDA=1 BUILD="$OUT/build-nocuda" "$OUT/build-nocuda/libgcx.a"
LIB="$OUT/build-nocuda/libgcx.a"
LIBS="-L/usr/lib/x86_64-linux-gnu/openblas-openmp -Wl,-rpath,/usr/lib/x86_64-linux-gnu/openblas-openmp -lopenblas"
LIBS="$LIBS -lz -lm -lpthread -lstdc++ $(mpicc --showme:link 2>/dev/null || true)"
NCCL_CF=
if command -v mpicc >/dev/null 2>&1; then
  NCCL_CF="-std=c11 -O1 -g -D_GNU_SOURCE -DHAVE_CUDA -DHAVE_NCCL -DHAVE_MPI -I$EMU/nccl -I$REPO"
  NCCL_CF="$NCCL_CF $(mpicc --showme:compile)"
fi
