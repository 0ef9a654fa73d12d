#!/usr/bin/env bash
# libgcx.so as a user gets it (make lib, lib/gcx.h): `make install PREFIX=<temp>`
# installs the library, its link, the header and gcx.pc; lib/example.c builds
# against the INSTALLED copy through pkg-config (no path into the repository)
# and runs every codec (encode, decode, repr == decode, a damaged frame
# refused); the library exports only gcx_* functions and needs neither CUDA nor
# MPI; a bad spec fails with the reason. Run from anywhere after `make lib`.
# Ends with "RESULT passed failed" (tests/run.sh).
set -u
cd "$(dirname "$0")/.." || exit 1
passed=0 failed=0
check() { # condition-status, message
    if [ "$1" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $2"; fi
}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export OMP_WAIT_POLICY=passive OMP_NUM_THREADS=1
P=$TMP/prefix

make -s --no-print-directory install PREFIX="$P" >"$TMP/install.log" 2>&1
check $? "make install PREFIX=$P: $(tail -3 "$TMP/install.log")"
for f in lib/libgcx.so.1 lib/libgcx.so include/gcx.h lib/pkgconfig/gcx.pc; do
    check "$([ -e "$P/$f" ]; echo $?)" "make install puts $f under PREFIX"
done
check "$([ -L "$P/lib/libgcx.so" ] && [ "$(readlink "$P/lib/libgcx.so")" = libgcx.so.1 ]; echo $?)" \
    "lib/libgcx.so links to libgcx.so.1"

# pkg-config names the installed prefix, not the repository
export PKG_CONFIG_PATH=$P/lib/pkgconfig
flags=$(pkg-config --cflags --libs gcx 2>&1 | sed 's/ *$//')
check "$([ "$flags" = "-I$P/include -L$P/lib -lgcx" ]; echo $?)" "pkg-config --cflags --libs gcx: '$flags'"

# the example, built in the temp folder with only what pkg-config gives
cp lib/example.c "$TMP/example.c"
(cd "$TMP" && ${CC:-cc} -std=c11 -Wall -Wextra -Werror example.c $(pkg-config --cflags --libs gcx) -lm -o example) \
    >"$TMP/cc.log" 2>&1
check $? "lib/example.c builds against the installed library: $(head -5 "$TMP/cc.log")"
LD_LIBRARY_PATH=$P/lib "$TMP/example" >"$TMP/out" 2>&1
check $? "the example runs every codec: $(tail -5 "$TMP/out")"
ncodecs=$(grep -c 'repr==decode yes  damaged frame: checksum mismatch' "$TMP/out")
listed=$(sed -n 's/^libgcx .*, \([0-9]*\) codecs$/\1/p' "$TMP/out")
check "$([ "$ncodecs" -ge 12 ] && [ "$ncodecs" = "$listed" ]; echo $?)" \
    "every codec ($listed listed) round-trips and refuses a damaged frame ($ncodecs did)"
check "$(LD_LIBRARY_PATH=$P/lib ldd "$TMP/example" | grep -q "$P/lib/libgcx.so.1"; echo $?)" \
    "the example loads the installed libgcx.so.1"
LD_LIBRARY_PATH=$P/lib "$TMP/example" "sbc:p=0.01" "3lc:s=1.0" "terngrad:seed=1" >"$TMP/out" 2>&1
check "$(grep -q 'sbc:p=0.01 ' "$TMP/out" && grep -q '3lc:s=1 ' "$TMP/out"; echo $?)" "specs with parameters"
LD_LIBRARY_PATH=$P/lib "$TMP/example" "sbc:q=1" >"$TMP/out" 2>&1
check "$([ $? -eq 1 ] && grep -q "codec sbc has no parameter 'q'" "$TMP/out"; echo $?)" \
    "a bad spec fails with the reason: $(cat "$TMP/out")"

# only the API is exported; no CUDA, no MPI
syms=$(nm -D --defined-only "$P/lib/libgcx.so.1" | awk '{print $3}' | grep -v '^gcx_' | grep -v '^_' | tr '\n' ' ')
check "$([ -z "$syms" ]; echo $?)" "libgcx.so exports only gcx_* (also: $syms)"
api=$(sed -n 's/^GCX_API [^(]*\b\(gcx_[a-z_]*\)(.*/\1/p' lib/gcx.h | sort)
exported=$(nm -D --defined-only "$P/lib/libgcx.so.1" | awk '{print $3}' | grep '^gcx_' | sort)
check "$([ -n "$api" ] && [ "$api" = "$exported" ]; echo $?)" "every function of gcx.h is exported, none else"
deps=$(ldd "$P/lib/libgcx.so.1" | grep -Ei 'cuda|cudnn|cublas|nccl|mpi|openblas' | tr '\n' ' ')
check "$([ -z "$deps" ]; echo $?)" "libgcx.so needs no CUDA, MPI or BLAS (found: $deps)"
# every function of the header has a comment right above it
undoc=$(awk '/^GCX_API/ { if (prev !~ /\*\/$/ && prev !~ /^ \*/) print $0 } { prev = $0 }' lib/gcx.h)
check "$([ -z "$undoc" ]; echo $?)" "lib/gcx.h documents every function (not: $undoc)"

echo "RESULT $passed $failed"
[ "$failed" -eq 0 ]
