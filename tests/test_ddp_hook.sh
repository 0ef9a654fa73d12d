#!/usr/bin/env bash
# gcx.ddp, the PyTorch DistributedDataParallel communication hook (python/gcx/ddp.py):
# tests/ddp_hook.py trains a small model in 2 processes over torch's gloo backend on
# the CPU, plain and through the hook with several codecs, and checks parameters,
# convergence, the exchange and the bytes against gcx.stats and ./gcx stats. Needs
# `make` and `make lib`; runs Debian's /usr/bin/python3 (python3-torch, python3-numpy).
# Skipped, with a message and no failure, where `import torch` fails.
# Ends with "RESULT passed failed" (tests/run.sh).
set -u
cd "$(dirname "$0")/.." || exit 1
PY=/usr/bin/python3
if ! "$PY" -c 'import torch, numpy, torch.distributed as d; assert d.is_available() and d.is_gloo_available()' \
        >/dev/null 2>&1; then
    echo "SKIP: $PY cannot import torch with torch.distributed's gloo backend, and numpy (install python3-torch:"
    echo "scripts/deps.sh --torch); nothing checked"
    echo "RESULT 0 0"
    exit 0
fi
for f in ./gcx build/lib/libgcx.so; do
    if [ ! -e "$f" ]; then echo "FAIL: $f not found: build it first (make; make lib)"; echo "RESULT 0 1"; exit 1; fi
done
unset GCX_LIB
OMP_WAIT_POLICY=passive OMP_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE=1 exec "$PY" tests/ddp_hook.py
