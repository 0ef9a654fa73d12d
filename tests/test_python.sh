#!/usr/bin/env bash
# The Python package (python/gcx over build/lib/libgcx.so) against ./gcx: frames
# byte-identical to `gcx encode` for every codec, decode and stats as the CLI's,
# exceptions for bad input (tests/python_gcx.py says what it checks). Needs `make`
# and `make lib`; runs Debian's /usr/bin/python3 (python3-numpy, python3-torch)
# when it has numpy, else python3; skipped when neither imports numpy.
# Ends with "RESULT passed failed" (tests/run.sh).
set -u
cd "$(dirname "$0")/.." || exit 1
PY=
for p in /usr/bin/python3 python3; do
    if "$p" -c 'import numpy' >/dev/null 2>&1; then PY=$p; break; fi
done
if [ -z "$PY" ]; then
    echo "numpy is not importable by /usr/bin/python3 or python3: the Python tests skipped (apt install python3-numpy)"
    echo "RESULT 0 0"
    exit 0
fi
for f in ./gcx build/lib/libgcx.so; do
    if [ ! -e "$f" ]; then echo "FAIL: $f not found: build it first (make; make lib)"; echo "RESULT 0 1"; exit 1; fi
done
export OMP_WAIT_POLICY=passive OMP_NUM_THREADS=2 PYTHONDONTWRITEBYTECODE=1
unset GCX_LIB
exec "$PY" tests/python_gcx.py
