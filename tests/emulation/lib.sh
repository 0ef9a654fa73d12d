# Sourced by build.sh and nn/build.sh with EMU (this folder) and OUT set: makes a
# NO_CUDA build of the library in OUT and sets REPO, O (object folder), LIB, LIBS
# (link flags) and, with MPI, NCCL_CF (compile flags against nccl/'s NCCL over MPI).
# NO_MPI set (as by make NO_MPI=1): no MPI in the library and no NCCL-over-MPI programs.
# EMU_DEBUG=1: the library at -O0 without -march=native (DEBUG=1), for valgrind.
REPO=$(cd "$EMU/../.." && pwd)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
O="$OUT/obj"
mkdir -p "$O"
# a make of its own (not the calling make's jobs or variables)
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -j"$(nproc)" -C "$REPO" NO_CUDA=1 ${NO_MPI:+NO_MPI=1} ${EMU_DEBUG:+DEBUG=1} \
  BUILD="$OUT/build-nocuda" "$OUT/build-nocuda/libgcx.a"
LIB="$OUT/build-nocuda/libgcx.a"
LIBS="-L/usr/lib/x86_64-linux-gnu/openblas-openmp -Wl,-rpath,/usr/lib/x86_64-linux-gnu/openblas-openmp -lopenblas"
LIBS="$LIBS -lz -lm -lpthread -lstdc++"
NCCL_CF=
if [ -z "${NO_MPI:-}" ] && command -v mpicc >/dev/null 2>&1; then
  LIBS="$LIBS $(mpicc --showme:link)"
  NCCL_CF="-std=c11 -O1 -g -D_GNU_SOURCE -DHAVE_CUDA -DHAVE_NCCL -DHAVE_MPI -I$EMU/nccl -I$REPO"
  NCCL_CF="$NCCL_CF $(mpicc --showme:compile)"
fi
