#!/bin/sh
# Builds dev/emu_conv.c against tests/emulation/nn/emu_cudnn.c as make test does (EMU_ASAN=1:
# under AddressSanitizer; EMU_ASAN= without) and runs it; OUT (default /tmp/emu_conv) holds
# the build. Two runs' outputs compared line by line, less the times, show whether a change
# of the reference loops kept their bits:
#   sh dev/emu_conv.sh | awk '/^total/ {next} {NF -= 2; print}' > before.txt
set -e
REPO=$(cd "$(dirname "$0")/.." && pwd)
E=$REPO/tests/emulation/nn
OUT=${OUT:-/tmp/emu_conv}
mkdir -p "$OUT"
SAN=${EMU_ASAN-1}
SAN=${SAN:+-fsanitize=address -fno-omit-frame-pointer}
CF="-std=c11 -O1 -g -Wall -Wextra -D_GNU_SOURCE -fno-math-errno -DHAVE_CUDA -DHAVE_CUDNN -fopenmp -DHAVE_OPENMP -I$E -I$REPO"
gcc $SAN $CF -O3 -march=native -c "$E/emu_cudnn.c" -o "$OUT/emu_cudnn.o"
gcc $SAN $CF -c "$E/emu_device.c" -o "$OUT/emu_device.o"
gcc $SAN $CF -c "$REPO/dev/emu_conv.c" -o "$OUT/emu_conv.o"
gcc $SAN -fopenmp "$OUT/emu_conv.o" "$OUT/emu_cudnn.o" "$OUT/emu_device.o" -lm -o "$OUT/emu_conv"
OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} "$OUT/emu_conv"
