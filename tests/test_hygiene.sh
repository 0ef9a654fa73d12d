#!/usr/bin/env bash
# What a new checkout and a build leave behind, and the files a user looks for:
# `make` writes nothing at the root but the binaries (dependency files go under
# build/), and `make clean` removes what make wrote; the default dependencies pin
# no compiler version; LICENSE and CITATION.cff exist, the citation names the five
# papers of docs/PAPERS.md; the README says how to run mpirun as root.
# Ends with "RESULT passed failed" (tests/run.sh).
set -u
cd "$(dirname "$0")/.." || exit 1
passed=0 failed=0
check() { # condition-status, message
    if [ "$1" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $2"; fi
}
stray=$(ls -- *.d *.o 2>/dev/null | tr '\n' ' ')
check "$([ -z "$stray" ]; echo $?)" "no build files at the root after make (found: $stray)"
# what `make clean` would remove covers every file make writes outside build/
cleans=$(make -n clean 2>/dev/null)
for b in train_resnet train_lenet train_lstm gcx; do
    check "$(echo "$cleans" | grep -q -- " $b\b"; echo $?)" "make clean removes $b"
done
check "$(echo "$cleans" | grep -q -- "rm -rf build"; echo $?)" "make clean removes build/"
default=$(sed -n '/^pkgs=(/,/^)/p' scripts/deps.sh)
check "$(echo "$default" | grep -qE -- '-[0-9]+(-dev)?\b'; [ $? -ne 0 ]; echo $?)" \
    "scripts/deps.sh's default packages pin no version: $(echo "$default" | grep -E -- '-[0-9]+' | head -2)"
check "$([ -s LICENSE ] && grep -q "Permission is hereby granted" LICENSE; echo $?)" "LICENSE"
for t in "3LC: Lightweight and Effective Traffic Compression" "Sparse Binary Compression" \
         "Near-Lossless Gradient Compression" "TernGrad: Ternary Gradients" "Deep Gradient Compression"; do
    check "$(grep -q "$t" CITATION.cff && grep -q "$t" docs/PAPERS.md; echo $?)" "CITATION.cff and docs/PAPERS.md cite '$t'"
done
check "$(grep -q "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1" README.md; echo $?)" \
    "README says how to run mpirun as root"
echo "RESULT $passed $failed"
[ "$failed" -eq 0 ]
