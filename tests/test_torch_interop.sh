#!/usr/bin/env bash
# Weights between gcx and PyTorch through safetensors (--export, --init-from):
# tests/torch_interop.py with Debian's PyTorch, on the trainers built by `make`
# and build/tests/tool_logits (BUILD=DIR for another build folder). Skipped, with
# a message and no failure, where `import torch` fails. Ends with "RESULT passed failed".
set -u
cd "$(dirname "$0")/.." || exit 1
PY=/usr/bin/python3
BUILD=${BUILD:-build}
for b in train_resnet train_lenet train_lstm "$BUILD/tests/tool_logits"; do
    if [ ! -x "./$b" ] && [ ! -x "$b" ]; then echo "FAIL: $b not found: build it first (make test builds it)"; echo "RESULT 0 1"; exit 1; fi
done
if ! "$PY" -c 'import torch, numpy' >/dev/null 2>&1; then
    echo "SKIP: $PY cannot import torch and numpy (install python3-torch: scripts/deps.sh --torch); nothing checked"
    echo "RESULT 0 0"
    exit 0
fi
BUILD=$BUILD OMP_WAIT_POLICY=passive OMP_NUM_THREADS=1 exec "$PY" tests/torch_interop.py
