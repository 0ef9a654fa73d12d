#!/usr/bin/env bash
# Installs the Debian packages gcx needs. The README and .ci/run both use this.
#   scripts/deps.sh            build + test dependencies (options may be combined)
#   scripts/deps.sh --torch    also PyTorch (regenerating fixtures, bench/ comparisons)
#   scripts/deps.sh --plots    also matplotlib (scripts/plot.py, the figures of docs/REPRODUCING.md)
#   scripts/deps.sh --fuzz     also clang with its runtime (make fuzz: libFuzzer + sanitizers)
set -euo pipefail
pkgs=(
    gcc make                 # compiler and build
    g++ python3              # the host emulation of the CUDA code (tests/emulation)
    libopenblas-openmp-dev   # CBLAS (OpenMP threading, shares our thread pool)
    openmpi-bin libopenmpi-dev  # mpi backend
    libstb-dev               # stb_image for image folders
    zlib1g-dev               # gzipped MNIST IDX files
    pkg-config python3-numpy # libgcx installed and used as a user would (tests/test_lib.sh, test_python.sh)
)
for flag in "$@"; do
    case "$flag" in
    --torch) pkgs+=(python3-torch python3-numpy) ;;
    --plots) pkgs+=(python3-matplotlib) ;;
    --fuzz)
        # libFuzzer ships in the clang runtime package of clang's own major version
        pkgs+=(clang)
        major=$(clang --version 2>/dev/null | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -1)
        if [ -z "$major" ]; then
            major=$(apt-cache depends clang 2>/dev/null | sed -n 's/.*Depends: clang-\([0-9]*\)$/\1/p' | head -1)
        fi
        pkgs+=("libclang-rt-${major:-14}-dev")
        ;;
    *) echo "deps: unknown option $flag (--torch, --plots, --fuzz)" >&2; exit 2 ;;
    esac
done

missing=()
for p in "${pkgs[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "deps: all ${#pkgs[@]} packages present"
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
echo "deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
