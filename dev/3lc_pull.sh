#!/bin/bash
# 3LC s=1.9's compressed pull on ResNet-20: how far the workers' models lag the server's
# global model, and what each tests at, from checkpoints of the REPRODUCING run
# (resnet20/3lc_s1.9.s0, whose checkpoint after epoch E is copied to DIR/eE.ckpt during
# the run; run it with --save DIR/run.ckpt --save-every 390 and copy after each epoch):
#
#   dev/3lc_pull.sh DIR E...      e.g. dev/3lc_pull.sh /tmp/s19 1 15 20
#
# For each epoch: |global|, |worker 0|, |global - worker 0| (L2 over all parameters, the
# difference being the server's pull memory: 3LC section 3.1); then the test accuracy of
# the server's model and of worker 0's, each with its batch-norm statistics re-estimated
# by 50 steps at learning rate 0 (dev/ckpt_global.py: the models do not move).
set -e
cd "$(dirname "$0")/.."
dir=$1
shift
F="--depth 20 --workers 4 --batch 32 --epochs 20 --lr 0 --schedule cosine --momentum 0.9 --wd 5e-4 --eval-every 0
   --print-every 1000 --bandwidth 100mbit --latency 0.5ms --codec 3lc:s=1.9 --seed 0 --quiet"
for e in "$@"; do
    c=$dir/e$e.ckpt
    /usr/bin/python3 - "$c" "$e" <<'PY'
import sys
sys.path.insert(0, "scripts")
import numpy as np
import ckpt_diff
s = ckpt_diff.sections(sys.argv[1])
g = np.frombuffer(s["w0.ex.global"], np.float32)
p = np.frombuffer(s["w0.params"], np.float32)
step = int.from_bytes(s["step"], "little")
print(f"epoch {sys.argv[2]} (step {step}): |global| {np.linalg.norm(g):.4g}, |worker 0| {np.linalg.norm(p):.4g}, "
      f"|global - worker 0| {np.linalg.norm(g - p):.4g}")
PY
    step=$(/usr/bin/python3 -c "import sys; sys.path.insert(0, 'scripts'); import ckpt_diff
print(int.from_bytes(ckpt_diff.sections('$c')['step'], 'little'))")
    for m in global worker; do
        python3 dev/ckpt_global.py $m "$c" "$dir/e${e}_$m.ckpt" >/dev/null
        acc=$(./train_resnet $F --steps $((step + 50)) --resume "$dir/e${e}_$m.ckpt" 2>&1 | grep '^eval')
        echo "  $m model, batch-norm statistics re-estimated: $acc"
    done
done
