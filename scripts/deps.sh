#!/usr/bin/env bash
# Installs the Debian packages gcx needs. The README and .ci/run both use this.
#   scripts/deps.sh            build + test dependencies
#   scripts/deps.sh --torch    also PyTorch (regenerating fixtures, bench/ comparisons)
#   scripts/deps.sh --plots    also matplotlib (the figures of docs/REPRODUCING.md: scripts/repro_tables.py)
set -euo pipefail
pkgs=(
    gcc make                 # compiler and build
    g++ python3              # the host emulation of the CUDA code (tests/emulation)
    libopenblas-openmp-dev   # CBLAS (OpenMP threading, shares our thread pool)
    openmpi-bin libopenmpi-dev  # mpi backend
    libstb-dev               # stb_image for image folders
    zlib1g-dev               # gzipped MNIST IDX files
    clang libclang-rt-14-dev # make fuzz (libFuzzer + sanitizers)
)
if [ "${1:-}" = "--torch" ]; then pkgs+=(python3-torch python3-numpy); fi
if [ "${1:-}" = "--plots" ]; then pkgs+=(python3-matplotlib); fi

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
