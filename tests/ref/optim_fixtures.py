#!/usr/bin/python3
"""Reference values for optim/ from PyTorch 1.13 (Debian python3-torch).

Writes tests/fixtures/optim_ref.bin, read by tests/test_optim.c:
  - optimizers: two parameter tensors (37 and 64 values), 10 steps with a
    per-step learning rate, for each optimizer spec below; the parameters
    after every step and the final optimizer state;
  - LR schedules: the learning rate used at each step for each schedule spec
    (warm-up = torch SequentialLR(LinearLR, main)); ReduceLROnPlateau with a
    scripted metric sequence;
  - gradient clipping: clip_grad_norm_ (norm types 2, 1, inf; clipping and
    not) and clip_grad_value_.

File format (little-endian):
  magic "GCXOPTF\\0" (8 bytes), u32 version (1), u32 record count R,
  R records: u32 name length L, L bytes of name (no NUL), u32 dtype
  (0 = float32, 1 = float64), u64 element count n, n elements.

Run: /usr/bin/python3 tests/ref/optim_fixtures.py   (from the repository root)
"""
import math
import os
import struct
import sys

import numpy as np
import torch

torch.set_num_threads(1)
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "optim_ref.bin")
records = []


def rec(name, arr, dtype):
    a = np.ascontiguousarray(np.asarray(arr, dtype=dtype).reshape(-1))
    records.append((name, 0 if dtype == np.float32 else 1, a))


# --------------------------------------------------------------- optimizers --
SIZES = (37, 64)
STEPS = 10

# (spec as optim/optim.h parses it, torch constructor, base lr)
OPT_CASES = [
    ("sgd", lambda p, lr: torch.optim.SGD(p, lr=lr), 0.1),
    ("sgd:wd=0.01", lambda p, lr: torch.optim.SGD(p, lr=lr, weight_decay=0.01), 0.1),
    ("momentum", lambda p, lr: torch.optim.SGD(p, lr=lr, momentum=0.9), 0.1),
    ("sgd:momentum=0.8,dampening=0.5,wd=5e-4",
     lambda p, lr: torch.optim.SGD(p, lr=lr, momentum=0.8, dampening=0.5, weight_decay=5e-4), 0.1),
    ("nesterov:wd=1e-3", lambda p, lr: torch.optim.SGD(p, lr=lr, momentum=0.9, nesterov=True, weight_decay=1e-3), 0.05),
    ("adam", lambda p, lr: torch.optim.Adam(p, lr=lr), 0.01),
    ("adam:beta1=0.8,beta2=0.99,eps=1e-6,wd=0.1",
     lambda p, lr: torch.optim.Adam(p, lr=lr, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1), 0.01),
    ("adamw", lambda p, lr: torch.optim.AdamW(p, lr=lr), 0.01),
    ("adamw:wd=0.1,beta2=0.95", lambda p, lr: torch.optim.AdamW(p, lr=lr, weight_decay=0.1, betas=(0.9, 0.95)), 0.02),
    ("adagrad", lambda p, lr: torch.optim.Adagrad(p, lr=lr), 0.1),
    ("adagrad:lr_decay=0.1,wd=0.01,init_acc=0.1",
     lambda p, lr: torch.optim.Adagrad(p, lr=lr, lr_decay=0.1, weight_decay=0.01, initial_accumulator_value=0.1), 0.1),
    ("rmsprop", lambda p, lr: torch.optim.RMSprop(p, lr=lr), 0.01),
    ("rmsprop:centered=1", lambda p, lr: torch.optim.RMSprop(p, lr=lr, centered=True), 0.01),
    ("rmsprop:momentum=0.9", lambda p, lr: torch.optim.RMSprop(p, lr=lr, momentum=0.9), 0.005),
    ("rmsprop:alpha=0.9,centered=1,momentum=0.5,wd=0.01",
     lambda p, lr: torch.optim.RMSprop(p, lr=lr, alpha=0.9, centered=True, momentum=0.5, weight_decay=0.01), 0.01),
]

STATE_KEYS = ["momentum_buffer", "exp_avg", "exp_avg_sq", "sum", "square_avg", "grad_avg"]

gen = torch.Generator().manual_seed(1234)
for ci, (spec, make, base_lr) in enumerate(OPT_CASES):
    p0 = [torch.randn(n, generator=gen) * (0.5 + k) for k, n in enumerate(SIZES)]
    # gradients over several orders of magnitude, a few exact zeros
    grads = []
    for s in range(STEPS):
        gs = []
        for n in SIZES:
            g = torch.randn(n, generator=gen) * torch.exp(torch.randn(n, generator=gen) * 1.5) * 0.3
            g[torch.rand(n, generator=gen) < 0.05] = 0.0
            gs.append(g)
        grads.append(gs)
    lrs = [base_lr * (1.0 - 0.04 * s) for s in range(STEPS)]
    params = [torch.nn.Parameter(t.clone()) for t in p0]
    opt = make(params, lrs[0])
    after = []
    for s in range(STEPS):
        for g_ in opt.param_groups:
            g_["lr"] = lrs[s]
        for p, g in zip(params, grads[s]):
            p.grad = g.clone()
        opt.step()
        after.append(torch.cat([p.detach().clone() for p in params]))
    pre = "opt/%s/" % spec
    rec(pre + "p0", torch.cat(p0).numpy(), np.float32)
    rec(pre + "grads", torch.stack([torch.cat(gs) for gs in grads]).numpy(), np.float32)
    rec(pre + "lrs", lrs, np.float64)
    rec(pre + "params", torch.stack(after).numpy(), np.float32)
    for key in STATE_KEYS:
        st = [opt.state[p].get(key) for p in params]
        if st[0] is not None:
            rec(pre + "state/" + key, torch.cat([t.reshape(-1) for t in st]).numpy(), np.float32)

# ------------------------------------------------------------ LR schedules --
BASE_LR = 0.4


def lr_trace(spec, main_factory, warmup, warm_start, steps):
    """lr used at steps 0..steps-1 of torch's schedulers (main_factory(opt) or warm-up + main)."""
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=BASE_LR)
    if warmup:
        w = torch.optim.lr_scheduler.LinearLR(opt, start_factor=warm_start, end_factor=1.0, total_iters=warmup)
        m = main_factory(opt)
        sch = torch.optim.lr_scheduler.SequentialLR(opt, [w, m], milestones=[warmup])
    else:
        sch = main_factory(opt)
    out = []
    for _ in range(steps):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sch.step()
    rec("sched/%s" % spec, out, np.float64)


import warnings  # noqa: E402

warnings.filterwarnings("ignore")
L = torch.optim.lr_scheduler
lr_trace("constant", lambda o: L.LambdaLR(o, lambda e: 1.0), 0, 0, 30)
lr_trace("constant:warmup=8", lambda o: L.LambdaLR(o, lambda e: 1.0), 8, 1.0 / 3, 30)
lr_trace("multistep:milestones=10+25+25+40,gamma=0.5", lambda o: L.MultiStepLR(o, [10, 25, 25, 40], gamma=0.5), 0, 0, 60)
lr_trace("multistep:milestones=20+30,gamma=0.1,warmup=5,warmup_start=0.1",
         lambda o: L.MultiStepLR(o, [20, 30], gamma=0.1), 5, 0.1, 50)
lr_trace("cosine:T=50,eta_min=0.001", lambda o: L.CosineAnnealingLR(o, T_max=50, eta_min=0.001), 0, 0, 51)
lr_trace("cosine:T=40,warmup=10", lambda o: L.CosineAnnealingLR(o, T_max=40), 10, 1.0 / 3, 51)
lr_trace("poly:power=2,T=50", lambda o: L.PolynomialLR(o, total_iters=50, power=2.0), 0, 0, 60)
lr_trace("poly:power=0.5,T=30,warmup=5,warmup_start=0.2",
         lambda o: L.PolynomialLR(o, total_iters=30, power=0.5), 5, 0.2, 40)


def plateau_trace(spec, metrics, **kw):
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=BASE_LR)
    sch = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, **kw)
    out = []
    for m in metrics:
        sch.step(m)
        out.append(opt.param_groups[0]["lr"])
    rec("plateau/%s/metrics" % spec, metrics, np.float64)
    rec("plateau/%s/lrs" % spec, out, np.float64)


# a loss that improves, stalls, improves a little (below / above threshold), stalls again
m_min = [5.0, 4.0, 3.5, 3.5, 3.6, 3.49999, 3.5, 3.4, 3.4, 3.41, 3.39, 3.2, 3.3, 3.3, 3.3, 3.3,
         3.1, 3.2, 3.2, 3.2, 3.2, 3.2, 3.2, 3.2, 3.2, 3.2, 3.2, 3.2, 3.2, 3.2]
plateau_trace("plateau:patience=2", m_min, patience=2)
plateau_trace("plateau:patience=1,factor=0.5,cooldown=2,threshold=0.01", m_min,
              patience=1, factor=0.5, cooldown=2, threshold=0.01)
plateau_trace("plateau:patience=0,factor=0.3,min_lr=0.01", m_min, patience=0, factor=0.3, min_lr=0.01)
m_max = [10.0, 20.0, 30.0, 30.5, 30.2, 31.5, 31.0, 31.0, 40.0, 40.0, 40.9, 41.1, 41.1, 41.1, 41.1, 41.1, 41.1, 41.1]
plateau_trace("plateau:mode=max,threshold_mode=abs,threshold=1,patience=1", m_max,
              mode="max", threshold_mode="abs", threshold=1.0, patience=1)
plateau_trace("plateau:mode=max,patience=2,cooldown=1,factor=0.2", m_max, mode="max", patience=2, cooldown=1, factor=0.2)
# eps: a reduction smaller than eps is skipped (0.4 -> 0.04 happens, 0.04 -> 0.004 differs by < 0.05)
plateau_trace("plateau:patience=0,eps=0.05", m_min, patience=0, eps=0.05)

# ------------------------------------------------------------------- clip --
CLIP_SIZES = (37, 64, 5)
for ci, (max_norm, norm_type) in enumerate([(1.0, 2.0), (100.0, 2.0), (0.5, 1.0), (0.3, math.inf), (2.0, 3.0)]):
    gs = [torch.randn(n, generator=gen) * 0.2 for n in CLIP_SIZES]
    params = [torch.nn.Parameter(torch.zeros(n)) for n in CLIP_SIZES]
    for p, g in zip(params, gs):
        p.grad = g.clone()
    total = torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type)
    pre = "clip/%d/" % ci
    rec(pre + "args", [max_norm, norm_type if norm_type != math.inf else -1.0], np.float64)
    rec(pre + "grads", torch.cat(gs).numpy(), np.float32)
    rec(pre + "total", [float(total)], np.float64)
    rec(pre + "clipped", torch.cat([p.grad for p in params]).numpy(), np.float32)
gs = [torch.randn(n, generator=gen) * 0.2 for n in CLIP_SIZES]
params = [torch.nn.Parameter(torch.zeros(n)) for n in CLIP_SIZES]
for p, g in zip(params, gs):
    p.grad = g.clone()
torch.nn.utils.clip_grad_value_(params, 0.15)
rec("clipvalue/args", [0.15], np.float64)
rec("clipvalue/grads", torch.cat(gs).numpy(), np.float32)
rec("clipvalue/clipped", torch.cat([p.grad for p in params]).numpy(), np.float32)

# ------------------------------------------------------------------- write --
os.makedirs(os.path.dirname(OUT), exist_ok=True)
with open(OUT, "wb") as f:
    f.write(b"GCXOPTF\0")
    f.write(struct.pack("<II", 1, len(records)))
    for name, dt, a in records:
        nb = name.encode()
        f.write(struct.pack("<I", len(nb)))
        f.write(nb)
        f.write(struct.pack("<IQ", dt, a.size))
        f.write(a.astype("<f4" if dt == 0 else "<f8").tobytes())
print("wrote %s: %d records, %d bytes" % (os.path.relpath(OUT), len(records), os.path.getsize(OUT)), file=sys.stderr)
