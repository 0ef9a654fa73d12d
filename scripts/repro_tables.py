#!/usr/bin/env python3
"""Makes the tables and figures of docs/REPRODUCING.md from the committed run logs
(docs/runs/, written by scripts/repro_runs.py). Nothing here trains or hard-codes a
result of ours: every number of ours is computed from a log. The papers' numbers are
quoted from their text, with table and section.

    scripts/repro_tables.py            rewrite the tables in REPRODUCING.md and the figures
                                       (figures need matplotlib: /usr/bin/python3 with
                                       Debian's python3-matplotlib)
    scripts/repro_tables.py --check    exit 1 if a table in REPRODUCING.md differs from what
                                       the logs give (make test runs this; no matplotlib)
    scripts/repro_tables.py --print    print the tables

A table sits in REPRODUCING.md between the lines
    <!-- table NAME: scripts/repro_tables.py -->   and   <!-- end table NAME -->
"""
import argparse
import csv
import math
import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RUNS = os.path.join(ROOT, "docs", "runs")
DOC = os.path.join(ROOT, "docs", "REPRODUCING.md")
FIGS = os.path.join(ROOT, "docs", "figures")
sys.path.insert(0, HERE)
import repro_runs  # noqa: E402  (the run list: names and commands)
import netlab_runs  # noqa: E402  (the lab's runs)

BANDWIDTHS = [("10 Mbit/s", 10e6), ("100 Mbit/s", 100e6), ("1 Gbit/s", 1e9)]
LATENCY = 0.5e-3  # seconds per message hop, as in the runs' own model
TARGET = 0.85     # ResNet-20 time-to-accuracy target (test accuracy)


# ------------------------------------------------------------------ logs ----
class Run:
    """one run's log: its training rows (per print interval) and evaluations"""

    def __init__(self, group, name):
        self.group, self.name = group, name
        base = os.path.join(RUNS, group, name)
        self.train, self.evals = [], []
        self.done = False
        self.cmd = ""
        if not os.path.exists(base + ".csv"):
            return
        with open(base + ".csv") as f:
            for row in csv.DictReader(ln for ln in f if not ln.startswith("#")):  # '# run:' records
                kind = row.pop("kind")
                vals = {k: float(v) for k, v in row.items() if v not in (None, "")}
                (self.train if kind == "train" else self.evals).append(vals)
        if os.path.exists(base + ".txt"):
            with open(base + ".txt") as f:
                txt = f.read()
            self.done = repro_runs.DONE in txt
            m = re.search(r"^# command: (.*)$", txt, re.M)
            self.cmd = m.group(1) if m else ""
        # steps each training row covers
        prev = 0
        for r in self.train:
            r["w"] = r["step"] - prev
            prev = r["step"]

    def ok(self):
        return self.done and self.train and self.evals

    def total(self, key):
        """sum over the run of a per-step column (the rows hold per-step means)"""
        return sum(r.get(key, 0.0) * r["w"] for r in self.train)

    @property
    def steps(self):
        return int(self.train[-1]["step"])

    def final_acc(self):
        return self.evals[-1]["acc"]

    def nvalues(self):
        r = next(r for r in self.train if r["bits_up"] > 0)
        return 8 * r["up_bytes"] / r["bits_up"]

    def curve(self):
        """(epoch, test accuracy) at every evaluation"""
        return [(e["epoch"], e["acc"]) for e in self.evals]

    def step_time(self, compute_s, bw):
        """modeled seconds of each training row's steps: compute + codec + network"""
        return [r["w"] * (compute_s + r["codec_s"] + r.get("wire_max_bytes", 0) * 8 / bw + r.get("hops", 0) * LATENCY)
                for r in self.train]

    def time_to(self, target, compute_s, bw):
        """modeled seconds until the first evaluation at or above target (None: never)"""
        t, times, i = 0.0, self.step_time(compute_s, bw), 0
        for e in self.evals:
            while i < len(self.train) and self.train[i]["step"] <= e["step"]:
                t += times[i]
                i += 1
            if e["acc"] >= target:
                return t
        return None


_cache = {}


def run(group, name):
    key = (group, name)
    if key not in _cache:
        _cache[key] = Run(group, name)
    return _cache[key]


def fmt(v, nd=2):
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{nd}f}"


def fmt_g(v, sig=3):
    if v is None or math.isnan(v):
        return "-"
    return f"{v:.{sig}g}" if v < 1000 else f"{v:,.0f}"


def fmt_time(s):
    if s is None:
        return "not reached"
    if s >= 3600:
        return f"{s / 3600:.1f} h"
    return f"{s / 60:.0f} min" if s >= 600 else f"{s / 60:.1f} min"


# ------------------------------------------------------- ResNet-20 rows ----
# (row, run name without the seed, the paper's accuracy difference against its fp32
# baseline, where it comes from)
RESNET_TABLE = [
    ("fp32 (ring allreduce)", "fp32", "", ""),
    ("3LC s=1.0 (ps)", "3lc_s1.0", "-0.05", "3LC Table 1, ResNet-110"),
    ("3LC s=1.9 (ps)", "3lc_s1.9", "-0.27", "3LC Table 1"),
    ("3LC s=1.9 (allgather: no compressed pull)", "3lc_s1.9_allgather", "none",
     "not a paper configuration: isolates the pull's share of the s=1.9 row"),
    ("TernGrad (ps)", "terngrad", "-0.92 / -0.39", "TernGrad Table 1, CifarNet, 2 / 16 workers (no ResNet in the paper)"),
    ("DGC (warm-up 4 epochs)", "dgc", "+0.12", "DGC Table 2, ResNet-110, 4 GPUs"),
    ("SBC (1) p=0.001", "sbc1", "-0.3", "SBC Table II, ResNet-32"),
    ("SBC (2) p=0.01, delay 10", "sbc2", "-0.7", "SBC Table II"),
    ("GCOMP (ring, guard=1)", "gcomp", "none", "GCOMP 7.6 shows loss curves only"),
    ("GCOMP (ring, guard=0: the paper's rule)", "gcomp_guard0", "none", "GCOMP 7.6"),
    ("int8 (ps)", "int8", "-0.04", "3LC Table 1"),
    ("stoch3 (ps)", "stoch3", "-1.31", "3LC Table 1"),
    ("stoch3 (allgather: no compressed pull)", "stoch3_allgather", "none",
     "not a paper configuration: isolates the pull's share of the stoch3 row"),
    ("MQE 1-bit (ps)", "onebit", "-0.16", "3LC Table 1"),
    ("top-k 5% (ps)", "topk", "-0.50", "3LC Table 1"),
    ("Gradient Dropping 0.1%", "graddrop", "-1.00 / +0.1", "DGC Table 2 (4 GPUs) / SBC Table II (column inferred)"),
    ("FedAvg, delay 10", "fedavg", "-0.7", "SBC Table II (column and delay inferred)"),
    ("SBC (3) p=0.01, delay 100", "sbc3", "-0.4", "SBC Table II"),
    ("FedAvg, delay 100", "fedavg_d100", "none",
     "not a paper configuration: isolates SBC (3)'s delay from its sparsification"),
    ("3LC s=1.5 (ps)", "3lc_s1.5", "-0.08", "3LC Table 1"),
    ("3LC s=1.75 (ps)", "3lc_s1.75", "+0.14", "3LC Table 1"),
]


def seeds_of(group, base):
    out = []
    for s in range(4):
        r = run(group, f"{base}.s{s}")
        if r.ok():
            out.append(r)
    return out


def compute_time():
    """seconds of forward + backward per step of one worker on its own host: the median
    print interval of the single-worker benchmark run (batch 32, this machine's 2 cores)"""
    r = run("resnet20", "compute.w1")
    if not (r.done and r.train):
        return None
    return min(x["compute_s"] for x in r.train)


def table_resnet():
    base = seeds_of("resnet20", "fp32")
    base_acc = {int(r.name.split(".s")[1]): r.final_acc() for r in base}
    C = compute_time()
    head = ("| method | seeds | final test accuracy | vs fp32 (same seeds) | paper: vs its fp32 | bits/value up: compressed tensors "
            "per exchange / all tensors per step | bits/value down: compressed / all | MB up per worker | "
            + " | ".join(f"time to {100 * TARGET:.0f}% @ {b}" for b, _ in BANDWIDTHS) + " |")
    lines = [head, "|" + "---|" * (8 + len(BANDWIDTHS))]
    for label, name, pdiff, pwhere in RESNET_TABLE:
        paper = f"{pdiff} ({pwhere})" if pdiff and pdiff != "none" else ("none given" if pdiff else "-")
        rs = seeds_of("resnet20", name)
        if not rs:
            lines.append(f"| {label} | - | not run yet | | {paper} |" + " |" * (3 + len(BANDWIDTHS)))
            continue
        accs = [r.final_acc() for r in rs]
        sd = [int(r.name.split(".s")[1]) for r in rs]
        acc_txt = " / ".join(f"{100 * a:.2f}%" for a in accs)
        diffs = [a - base_acc[s] for a, s in zip(accs, sd) if s in base_acc]
        diff_txt = "-" if name == "fp32" or not diffs else f"{100 * statistics.mean(diffs):+.2f}"
        r0 = rs[0]
        comp_raw = r0.total("comp_raw_bytes")
        cu = 8 * r0.total("comp_up_bytes") / (comp_raw / 4) if comp_raw > 0 else float("nan")
        cd = 8 * r0.total("comp_down_bytes") / (comp_raw / 4) if comp_raw > 0 else float("nan")
        nv = r0.nvalues()
        au = 8 * r0.total("up_bytes") / (nv * r0.steps)
        ad = 8 * r0.total("down_bytes") / (nv * r0.steps)
        mb = r0.total("up_bytes") / 1e6
        times = [fmt_time(r0.time_to(TARGET, C, bw)) if C else "-" for _, bw in BANDWIDTHS]
        lines.append(f"| {label} | {', '.join(map(str, sd))} | {acc_txt} | {diff_txt} | {paper} | {fmt_g(cu)} / {fmt_g(au)} | "
                     f"{fmt_g(cd)} / {fmt_g(ad)} | {fmt_g(mb)} | " + " | ".join(times) + " |")
    return "\n".join(lines)


def last_epoch_fit(r):
    """the training loss and accuracy over the run's last epoch (step-weighted means of its
    training rows: the workers' own batches, augmented, as the model was updated)"""
    rows = [x for x in r.train if x["epoch"] > r.train[-1]["epoch"] - 1 + 1e-9]
    w = sum(x["w"] for x in rows)
    return sum(x["loss"] * x["w"] for x in rows) / w, sum(x["acc"] * x["w"] for x in rows) / w


def table_resnet_fit():
    """seed 0 of every ResNet-20 row: how far its training loss and accuracy in the last
    epoch, and its final test accuracy, are from fp32's (seed 0)"""
    b = run("resnet20", "fp32.s0")
    if not b.ok():
        return "fp32 seed 0 has not run yet"
    _, ba = last_epoch_fit(b)
    bt = b.final_acc()
    lines = ["| method (seed 0) | training loss, last epoch | training accuracy, last epoch | final test accuracy | "
             "training accuracy vs fp32 | test accuracy vs fp32 |", "|---|---|---|---|---|---|"]
    for label, name, _, _ in RESNET_TABLE:
        r = run("resnet20", f"{name}.s0")
        if not r.ok():
            continue
        l, a = last_epoch_fit(r)
        t = r.final_acc()
        vs = ("-", "-") if name == "fp32" else (f"{100 * (a - ba):+.2f}", f"{100 * (t - bt):+.2f}")
        lines.append(f"| {label} | {l:.3f} | {100 * a:.2f}% | {100 * t:.2f}% | {vs[0]} | {vs[1]} |")
    return "\n".join(lines)


def mean_diff(group, name, base="fp32"):
    """final accuracy minus the baseline's with the same seed, averaged over seeds (None: not run)"""
    b = {r.name.split(".s")[1]: r.final_acc() for r in seeds_of(group, base)}
    d = [r.final_acc() - b[r.name.split(".s")[1]] for r in seeds_of(group, name) if r.name.split(".s")[1] in b]
    return statistics.mean(d) if d else None


def pts(v):
    return "not run yet" if v is None else f"{100 * v:+.2f}"


def comp_bits(r, rows=None, key="comp_up_bytes"):
    """bits per value of the compressed tensors' frames, per exchange (up or down)"""
    rows = r.train if rows is None else rows
    raw = wsum(rows, "comp_raw_bytes") / 4
    return 8 * wsum(rows, key) / raw if raw else float("nan")


def speedup(name, bw, group="resnet20"):
    """fp32's modeled time to the target over the method's, seed 0"""
    C = compute_time()
    a, b = run(group, "fp32.s0"), run(group, f"{name}.s0")
    if not (C and a.ok() and b.ok()):
        return None
    ta, tb = a.time_to(TARGET, C, bw), b.time_to(TARGET, C, bw)
    return ta / tb if ta and tb else None


def xfmt(v):
    return "-" if v is None or math.isnan(v) else f"{v:.1f}x"


class NotRun(Exception):
    pass


def req(group, name):
    """the run, which must be done (else the claim's cell says so)"""
    r = run(group, name)
    if not r.ok():
        raise NotRun(name)
    return r


def claims(rows):
    lines = ["| claim | paper | ours |", "|---|---|---|"]
    for claim, paper, ours in rows:
        try:
            o = ours()
        except NotRun:
            o = "not run yet"
        lines.append(f"| {claim} | {paper} | {o} |")
    return "\n".join(lines)


def table_claims_3lc():
    def acc(names):
        return " / ".join(pts(mean_diff("resnet20", n)) for n in names)

    def bits():
        out = []
        for s in ("1.0", "1.5", "1.75", "1.9"):
            r = run("resnet20", f"3lc_s{s}.s0")
            if r.ok():
                b = (comp_bits(r) + comp_bits(r, key="comp_down_bytes")) / 2
                out.append(f"s = {s}: {b:.2f} ({32 / b:.0f}x)")
        return "; ".join(out) or "not run yet"

    def crossing():
        out = []
        for s in ("1.0", "1.75"):
            r = run("resnet20", f"3lc_s{s}.s0")
            if not r.ok():
                continue
            pe = per_epoch(r, lambda rows: comp_bits(rows=rows, r=r) - comp_bits(rows=rows, r=r, key="comp_down_bytes"))
            first = next((i + 1 for i, d in enumerate(pe) if d > 0), None)
            out.append(f"s = {s}: " + (f"pushes larger from epoch {first} of {len(pe)}" if first else
                                       "pushes smaller than pulls in every epoch"))
        return "; ".join(out) or "not run yet"

    def speed(bw):
        return " / ".join(xfmt(speedup(n, bw)) for n in ("3lc_s1.0", "3lc_s1.75"))

    return claims([
        ("accuracy against 32-bit float, s = 1.00 / 1.50 / 1.75 / 1.90", "-0.05 / -0.08 / +0.14 / -0.27 "
         "(Table 1: ResNet-110, 10 workers, 163.84 epochs, mean of 5 runs)",
         lambda: acc(["3lc_s1.0", "3lc_s1.5", "3lc_s1.75", "3lc_s1.9"])),
        ("its baselines: 8-bit int / stochastic 3-value / MQE 1-bit / 5% sparsification", "-0.04 / -1.31 / -0.16 / "
         "-0.50 (Table 1)", lambda: acc(["int8", "stoch3", "onebit", "topk"])),
        ("bits per state change, (push + pull) / 2 over the run", "0.3-0.8 bits, 39-107x (abstract, section 1); "
         "s = 1.90: 0.2 bits, 160x (section 4.5; Table 2, per s, is lost in our copy)", bits),
        ("without zero-run encoding", "1.6 bits; zero-run encoding halves it at s = 1.00 (section 4.5)",
         lambda: f"1.6 bits (base-3^5); s = 1.00 with it: {(comp_bits(req('resnet20', '3lc_s1.0.s0')) + comp_bits(req('resnet20', '3lc_s1.0.s0'), key='comp_down_bytes')) / 2:.2f}"
         if run("resnet20", "3lc_s1.0.s0").ok() else "not run yet"),
        ("pushes against pulls", "pushes smaller than pulls until about 70% of training, then larger (section 4.5, "
         "Figure 6)", crossing),
        ("training time against the baseline at 10 Mbit/s, s = 1.00 / 1.75", "15.9x / 22.8x (Table 1; estimated from "
         "short runs)", lambda: speed(10e6) + " (modeled, time to 85%)"),
        ("the same at 100 Mbit/s and 1 Gbit/s", "7.97x / 9.04x and 1.53x / 1.53x (Table 1; which column is which "
         "bandwidth is garbled in our copy: inferred)", lambda: speed(100e6) + " and " + speed(1e9)),
    ])


def table_claims_dgc():
    def ratio_after(e0):
        r = req("resnet20", "dgc.s0")
        rows = [x for x in r.train if x["epoch"] > e0 + 1e-9]
        c = comp_bits(r, rows)
        nv = r.nvalues()
        allb = 8 * wsum(rows, "up_bytes") / (nv * sum(x["w"] for x in rows))
        return f"{32 / c:.0f}x over the compressed tensors, {32 / allb:.0f}x over all"

    def warm():
        r = req("resnet20", "dgc.s0")
        dens = per_epoch(r, lambda rows: wsum(rows, "density") / sum(x["w"] for x in rows))
        return " / ".join(f"{100 * d:.3g}%" for d in dens[:5]) + " in epochs 1-5"

    return claims([
        ("accuracy against the baseline", "+0.12 (Table 2: ResNet-110, 4 GPUs x 32, 164 epochs)",
         lambda: pts(mean_diff("resnet20", "dgc"))),
        ("Gradient Dropping against the baseline", "-1.00 (Table 2, 4 GPUs)",
         lambda: pts(mean_diff("resnet20", "graddrop"))),
        ("compression ratio after the warm-up (32-bit values + 16-bit zero runs)", "270x-600x on ImageNet, PTB "
         "and LibriSpeech (abstract, Tables 3-4); none given for CIFAR-10; 0.1% density at 48 bits a value is "
         "667x at best", lambda: ratio_after(4)),
        ("warm-up density", "75%, 93.75%, 98.4375%, 99.6%, 99.9% sparsity over the first 4 epochs (section 4.1)",
         warm),
    ])


def table_claims_terngrad():
    def lenet_range():
        d = []
        for n in (4, 8):
            for sd in (0, 1):
                a, b = run("lenet_terngrad", f"fp32.n{n}.s{sd}"), run("lenet_terngrad", f"terngrad.n{n}.s{sd}")
                if a.ok() and b.ok():
                    d.append(b.final_acc() - a.final_acc())
        return f"{100 * min(d):+.2f} to {100 * max(d):+.2f} ({len(d)} pairs: 4 and 8 workers, 2 seeds)" if d else "not run yet"

    def push_pull(key):
        r = req("resnet20", "terngrad.s0")
        b = comp_bits(r, key=key)
        return f"{b:.2f} bits ({32 / b:.1f}x) on ResNet-20"

    return claims([
        ("LeNet on MNIST, momentum SGD: TernGrad against float", "-0.22 to +0.15 over 1 to 64 workers (section 4.1, "
         "Figure 3; total batch 64, 10K iterations, moving average 0.9999)", lenet_range),
        ("a CIFAR-10 network", "-0.92 (2 workers) / -0.39 (16 workers) (Table 1, CifarNet with Adam)",
         lambda: pts(mean_diff("resnet20", "terngrad")) + " (ResNet-20, momentum SGD, 4 workers)"),
        ("push: 2 bits a value", "16x (32/log2 3 = 20.18x at the entropy; section 3.1)",
         lambda: push_pull("comp_up_bytes") + ", compressed tensors"),
        ("pull: the average in 2N+1 levels", "32/log2(2N+1): 10.1x for N = 4 (section 3.1)",
         lambda: push_pull("comp_down_bytes") + ", compressed tensors (ternsum, 4 workers)"),
    ])


def table_claims_sbc():
    def up_ratio(group, name):
        r = req(group, name)
        return 4 * r.nvalues() * r.steps / r.total("up_bytes")

    def up_sbc3():
        parts = []
        for group, model in (("resnet20", "ResNet-20"), ("lenet_sbc", "LeNet")):
            try:
                parts.append(f"{up_ratio(group, 'sbc3.s0'):,.0f}x on {model}")
            except NotRun:
                parts.append(f"{model} not run yet")
        return ", ".join(parts)

    return claims([
        ("ResNet on CIFAR-10, SBC (1) / (2) / (3) against the baseline", "-0.3 / -0.7 / -0.4 (Table II: ResNet-32, "
         "60,000 iterations, 4 clients)", lambda: " / ".join(pts(mean_diff("resnet20", n)) for n in ("sbc1", "sbc2", "sbc3"))),
        ("upstream per client against fp32 every step, SBC (3)", "more than four orders of magnitude (abstract); "
         "ResNet-50: 125 TB to 3.35 GB, about 37,000x (section IV-B)",
         up_sbc3),
    ])


def table_claims_gcomp():
    def size(group, name):
        r = run(group, name)
        p = gcomp_parts(r.train)
        return f"{100 * p['size']:.1f}% ({100 * p['zeros']:.0f}% zeros)"

    def sizes():
        out = []
        for label, g, n in (("ResNet-20 guard=1", "resnet20", "gcomp.s0"), ("guard=0", "resnet20", "gcomp_guard0.s0"),
                            ("WordLSTM guard=1", "wordlstm_gcomp", "guard1.s0"),
                            ("guard=0", "wordlstm_gcomp", "guard0.s0")):
            if run(g, n).ok():
                out.append(f"{label}: {size(g, n)}")
        return "; ".join(out) or "not run yet"

    return claims([
        ("message size against fp32", "32.9% (ResNet-50), 36.5% (Bert-base) (section 7.2)", sizes),
        ("zero gradients", "up to 50% of the values (section 1, OB-3)",
         lambda: f"{100 * gcomp_parts(req('wordlstm_gcomp', 'guard1.s0').train)['zeros']:.0f}% on the WordLSTM, "
                 f"{100 * gcomp_parts(req('resnet20', 'gcomp.s0').train)['zeros']:.2f}% on ResNet-20"),
        ("near-lossless", "training loss follows the baseline (section 7.6; no accuracy given)",
         lambda: pts(mean_diff("resnet20", "gcomp")) + " (guard=1), " + pts(mean_diff("resnet20", "gcomp_guard0"))
         + " (guard=0), final accuracy against fp32"),
    ])


# ------------------------------------------------------------ LeNet ----
def table_lenet_terngrad():
    lines = ["| workers x batch | seed | fp32 | TernGrad | TernGrad - fp32 | TernGrad bits/value up / down |",
             "|---|---|---|---|---|---|"]
    for n in (4, 8):
        for s in (0, 1):
            a, b = run("lenet_terngrad", f"fp32.n{n}.s{s}"), run("lenet_terngrad", f"terngrad.n{n}.s{s}")
            if not (a.ok() and b.ok()):
                lines.append(f"| {n} x {64 // n} | {s} | not run yet | | | |")
                continue
            nv = b.nvalues()
            up = 8 * b.total("up_bytes") / (nv * b.steps)
            down = 8 * b.total("down_bytes") / (nv * b.steps)
            lines.append(f"| {n} x {64 // n} | {s} | {100 * a.final_acc():.2f}% | {100 * b.final_acc():.2f}% | "
                         f"{100 * (b.final_acc() - a.final_acc()):+.2f} | {fmt_g(up)} / {fmt_g(down)} |")
    return "\n".join(lines)


SBC_MNIST = [("Baseline (fp32)", "fp32", "99.46"), ("Gradient Dropping", "graddrop", "99.4"),
             ("Federated Averaging, delay 10", "fedavg", "99.4"), ("SBC (1)", "sbc1", "99.4"),
             ("SBC (2)", "sbc2", "99.4"), ("SBC (3)", "sbc3", "99.1")]


def table_lenet_sbc():
    lines = ["| method | SBC Table II (MNIST) | ours, seed 0 / 1 | ours - our baseline (mean) | "
             "upstream per client, whole run | fp32 every step / upstream |", "|---|---|---|---|---|---|"]
    base = seeds_of("lenet_sbc", "fp32")
    for label, name, paper in SBC_MNIST:
        rs = seeds_of("lenet_sbc", name)
        if not rs:
            lines.append(f"| {label} | {paper}% | not run yet | | | |")
            continue
        accs = " / ".join(f"{100 * r.final_acc():.2f}%" for r in rs)
        diff = statistics.mean(r.final_acc() for r in rs) - statistics.mean(r.final_acc() for r in base) if base else None
        r0 = rs[0]
        up = r0.total("up_bytes")
        fp32 = 4 * r0.nvalues() * r0.steps
        lines.append(f"| {label} | {paper}% | {accs} | {'-' if name == 'fp32' or diff is None else f'{100 * diff:+.2f}'} | "
                     f"{fmt_g(up / 1e6)} MB | {fmt_g(fp32 / up)}x |")
    return "\n".join(lines)


# ---------------------------------------------------- per-epoch traffic ----
def per_epoch(r, fn):
    """fn(rows of one epoch) for every whole epoch of r's training rows"""
    out, cur, ep = [], [], 1
    for row in r.train:
        cur.append(row)
        if row["epoch"] >= ep - 1e-9:
            out.append(fn(cur))
            cur, ep = [], ep + 1
    return out


def wsum(rows, key):
    return sum(x.get(key, 0.0) * x["w"] for x in rows)


def table_3lc():
    epochs = [1, 2, 5, 10, 15, 20]
    lines = ["| s | direction | " + " | ".join(f"epoch {e}" for e in epochs) + " | whole run |",
             "|---|---|" + "---|" * (len(epochs) + 1)]
    for s in ("1.0", "1.5", "1.75", "1.9"):
        r = run("resnet20", f"3lc_s{s}.s0")
        if not r.ok():
            lines.append(f"| {s} | | not run yet |" + " |" * len(epochs))
            continue
        for d, key in (("push", "comp_up_bytes"), ("pull", "comp_down_bytes"), ("(push+pull)/2", None)):
            def bits(rows, key=key):
                raw = wsum(rows, "comp_raw_bytes") / 4
                if key:
                    return 8 * wsum(rows, key) / raw
                return 4 * (wsum(rows, "comp_up_bytes") + wsum(rows, "comp_down_bytes")) / raw
            pe = per_epoch(r, bits)
            cells = [fmt(pe[e - 1], 3) if e <= len(pe) else "-" for e in epochs]
            lines.append(f"| {s} | {d} | " + " | ".join(cells) + f" | {fmt(bits(r.train), 3)} |")
    return "\n".join(lines)


def gcomp_parts(rows):
    v = wsum(rows, "gcomp_values")
    if v == 0:
        return None
    nz = v - wsum(rows, "gcomp_zeros")
    lv = [wsum(rows, f"gcomp_lv{i}") for i in range(4)]
    eb, lb, mb = (wsum(rows, k) for k in ("gcomp_exp_bits", "gcomp_level_bits", "gcomp_man_bits"))
    total = 8 * wsum(rows, "gcomp_bytes")
    return {"size": total / (32 * v), "zeros": 1 - nz / v, "lv": [x / nz if nz else 0 for x in lv],
            "exp": eb / v, "lev": lb / v, "man": mb / v, "hdr": (total - eb - lb - mb) / v, "bits": total / v}


def gcomp_row(label, when, p):
    return (f"| {label} | {when} | {100 * p['size']:.1f}% | {100 * p['zeros']:.2f}% | "
            + " / ".join(f"{100 * x:.1f}%" for x in p["lv"])
            + f" | {p['exp']:.2f} + {p['lev']:.2f} + {p['man']:.2f} + {p['hdr']:.3f} = {p['bits']:.2f} |")


def table_gcomp():
    lines = ["| run | when | size / fp32 | zeros | nonzero values at level 0 / 1 / 2 / 3 (0/6/12/18 bits cut) | "
             "bits per value: exponent + level + mantissa + headers = total |", "|---|---|---|---|---|---|"]
    runs = (("ResNet-20, guard=1 (default)", "resnet20", "gcomp.s0"),
            ("ResNet-20, guard=0 (the paper's rule)", "resnet20", "gcomp_guard0.s0"),
            ("WordLSTM, guard=1", "wordlstm_gcomp", "guard1.s0"),
            ("WordLSTM, guard=0", "wordlstm_gcomp", "guard0.s0"))
    for label, group, name in runs:
        r = run(group, name)
        if not r.ok() or not any(x.get("gcomp_values", 0) for x in r.train):
            lines.append(f"| {label} | | not run yet | | | |")
            continue
        if group == "resnet20":
            pe = per_epoch(r, gcomp_parts)
            for e in (1, 5, 10, 15, 18, 19, 20):
                if e <= len(pe) and pe[e - 1]:
                    lines.append(gcomp_row(label, f"epoch {e}", pe[e - 1]))
        else: # quarters of the run
            n = len(r.train)
            for q in range(4):
                rows = r.train[n * q // 4:n * (q + 1) // 4]
                lines.append(gcomp_row(label, f"steps {int(rows[0]['step'] - rows[0]['w']) + 1}-{int(rows[-1]['step'])}",
                                       gcomp_parts(rows)))
        lines.append(gcomp_row(label, "whole run", gcomp_parts(r.train)))
    return "\n".join(lines)


# ------------------------------------------------------ measured on links ----
LAB_BW = [("10mbit", "10 Mbit/s"), ("100mbit", "100 Mbit/s"), ("1gbit", "1 Gbit/s")]
LAB_ROWS = {
    # (lab name, label, full-length run (group, name), the paper's speed-up at 10 / 100 / 1000 Mbit/s)
    "resnet20": [("fp32", "fp32", ("resnet20", "fp32.s0"), ""),
                 ("3lc", "3LC s=1.0", ("resnet20", "3lc_s1.0.s0"), "15.9x / 7.97x / 1.53x (3LC Table 1, ResNet-110)"),
                 ("terngrad", "TernGrad", ("resnet20", "terngrad.s0"), "3.04x at 1 Gbit/s (TernGrad 5, AlexNet, 8 GPUs)"),
                 ("dgc", "DGC", ("resnet20", "dgc.s0"), "none for CIFAR-10"),
                 ("sbc2", "SBC (2)", ("resnet20", "sbc2.s0"), "none"),
                 ("gcomp", "GCOMP", ("resnet20", "gcomp.s0"), "1.5x per iteration at 10 Gbit/s (GCOMP 7.5, ResNet-50)")],
    "lenet": [("fp32", "fp32 (Adam)", ("lenet_sbc", "fp32.s0"), ""),
              ("3lc", "3LC s=1.0", ("lenet_sbc", "3lc.s0"), ""),
              ("terngrad", "TernGrad", ("lenet_sbc", "terngrad.s0"), ""),
              ("dgc", "DGC (momentum SGD)", ("lenet_sbc", "dgc_mom.s0"), ""),
              ("sbc2", "SBC (2)", ("lenet_sbc", "sbc2.s0"), ""),
              ("gcomp", "GCOMP", ("lenet_sbc", "gcomp.s0"), "")],
}
LAB_TARGET = {"resnet20": 0.85, "lenet": 0.985}


def link_bytes(group, name):
    """per host (tx, rx) bytes from a lab run's stdout"""
    path = os.path.join(RUNS, group, name + ".txt")
    out = []
    if os.path.exists(path):
        for ln in open(path):
            m = re.match(r"netlab:\s+(198\.18\.0\.\d+) (\d+) (\d+)", ln)
            if m:
                out.append((int(m.group(2)), int(m.group(3))))
    return out


def lab_measure(model, codec, bw):
    """(measured s/step, modeled s/step, busiest link's bytes per step measured, accounted) or None"""
    r, one = run("netlab", f"{model}.{codec}.{bw}"), run("netlab", f"{model}.{codec}.{bw}.1step")
    if not (r.done and r.train and one.done):
        return None
    rows = r.train[1:] or r.train  # the first interval holds the start
    w = sum(x["w"] for x in rows)
    step = sum(x["step_s"] * x["w"] for x in rows) / w
    modeled = sum((x["compute_s"] + x["codec_s"] + x["comm_model_s"]) * x["w"] for x in rows) / w
    a, b = link_bytes("netlab", f"{model}.{codec}.{bw}"), link_bytes("netlab", f"{model}.{codec}.{bw}.1step")
    k = r.steps - one.steps
    meas = max(max(x[0] - y[0], x[1] - y[1]) for x, y in zip(a, b)) / k if a and len(a) == len(b) and k > 0 else float("nan")
    acc = r.total("wire_max_bytes") / r.steps
    return step, modeled, meas, acc


def steps_to(group, name, target):
    r = run(group, name)
    if not r.ok():
        return None
    return next((e["step"] for e in r.evals if e["acc"] >= target), None)


def lab_time_to(model, codec, full, bw):
    """seconds to LAB_TARGET[model] on the lab: the measured step time x the steps the
    full-length run needed. Where the lab also measured the method's later frame sizes
    (codec + "_post": DGC after its warm-up, whose frames shrink about 50-fold), each of
    the full run's print intervals takes the step time interpolated linearly in its
    busiest link's bytes between the two measurements."""
    st = steps_to(*full, LAB_TARGET[model])
    return lab_time_over(model, codec, full, bw, st) if st else None


def lab_time_over(model, codec, full, bw, st):
    """the lab's estimate of the first st steps' seconds (lab_time_to)"""
    m = lab_measure(model, codec, bw)
    if not m:
        return None
    post = lab_measure(model, codec + "_post", bw)
    if not post or post[3] == m[3]:
        return m[0] * st
    slope = (m[0] - post[0]) / (m[3] - post[3])
    t = 0.0
    for row in run(*full).train:
        first = row["step"] - row["w"]
        if first >= st:
            break
        t += min(row["w"], st - first) * (post[0] + slope * (row["wire_max_bytes"] - post[3]))
    return t


def table_netlab():
    lines = ["| model | method | " + " | ".join(f"{b}: s/step measured (model) | busiest link bytes/step measured "
                                              f"(accounted) | time to target, speed-up over fp32" for _, b in LAB_BW)
             + " | paper's speed-up |", "|---|---|" + "---|" * (3 * len(LAB_BW) + 1)]
    for model, rows in LAB_ROWS.items():
        base = {bw: lab_time_to(model, "fp32", rows[0][2], bw) for bw, _ in LAB_BW}
        for codec, label, full, paper in rows:
            cells = []
            for bw, _ in LAB_BW:
                m = lab_measure(model, codec, bw)
                if not m:
                    cells += ["not run yet", "", ""]
                    continue
                t = lab_time_to(model, codec, full, bw)
                sp = f", {base[bw] / t:.1f}x" if t and base[bw] and codec != "fp32" else ""
                s_cell, b_cell = f"{m[0]:.3f} ({m[1]:.3f})", f"{fmt_g(m[2])} ({fmt_g(m[3])})"
                post = lab_measure(model, codec + "_post", bw)
                if post:  # warm-up -> after
                    s_cell += f" -> {post[0]:.3f} ({post[1]:.3f})"
                    b_cell += f" -> {fmt_g(post[2])} ({fmt_g(post[3])})"
                cells += [s_cell, b_cell,
                          (fmt_time(t) if t else ("full run not done" if not run(*full).ok() else "not reached")) + sp]
            lines.append(f"| {model} | {label} | " + " | ".join(cells) + f" | {paper or '-'} |")
    return "\n".join(lines)


def table_netlab_full():
    """whole runs on the links, and ResNet-20's first epoch (scripts/netlab_runs.py FULL),
    against the table's estimate"""
    lines = ["| model | method | link | steps | training time on the links (the run's clock) | "
             "estimate: lab s/step x steps | estimate - measured | test accuracy at the end (the same run on "
             "threads at that step) |",
             "|---|---|---|---|---|---|---|---|"]
    labels = {(model, c): (lb, full) for model, rows in LAB_ROWS.items() for c, lb, full, _ in rows}
    for model, bw, codec, stop in netlab_runs.FULL:
        r = run("netlab", netlab_runs.full_name(model, bw, codec, stop))
        label, full = labels[(model, codec)]
        bname = dict(LAB_BW)[bw]
        if not r.ok():
            lines.append(f"| {model} | {label} | {bname} | {stop or ''} | not run yet | | | |")
            continue
        measured = r.train[-1]["total_s"]
        est = lab_time_over(model, codec, full, bw, r.steps)
        ref = [e["acc"] for e in run(*full).evals if int(e["step"]) == r.steps]
        acc = f"{100 * r.final_acc():.2f}%" + (f" ({100 * ref[-1]:.2f}%)" if ref else "")
        diff = f"{100 * (est - measured) / measured:+.0f}%" if est else "-"
        lines.append(f"| {model} | {label} | {bname} | {r.steps} | {fmt_time(measured)} | "
                     f"{fmt_time(est) if est else '-'} | {diff} | {acc} |")
    return "\n".join(lines)


def table_stoch3_workers():
    """stoch3 on the parameter server against fp32 (seed 0) with 4 and 10 workers, and over
    10 and 20 epochs: whether the mean of more workers' independent roundings (3LC section
    4.3: 10) or a longer schedule (3LC Table 1: 164 epochs) closes the gap"""
    lines = ["| workers x batch | epochs | steps | fp32 | stoch3 (ps) | test accuracy vs fp32 | "
             "training accuracy, last epoch, vs fp32 | paper (3LC Table 1, 10 workers, 164 epochs) |",
             "|---|---|---|---|---|---|---|---|"]
    for group, wb in (("resnet20_e10", "4 x 32 | 10"), ("resnet20", "4 x 32 | 20"), ("resnet20_w10", "10 x 32 | 20")):
        b, r = run(group, "fp32.s0"), run(group, "stoch3.s0")
        if not b.ok():
            lines.append(f"| {wb} | - | not finished | not finished | - | - | -1.31 |")
            continue
        _, ba = last_epoch_fit(b)
        if not r.ok():
            lines.append(f"| {wb} | {b.steps:,} | {100 * b.final_acc():.2f}% | not finished | - | - | -1.31 |")
            continue
        _, a = last_epoch_fit(r)
        lines.append(f"| {wb} | {b.steps:,} | {100 * b.final_acc():.2f}% | {100 * r.final_acc():.2f}% | "
                     f"{100 * (r.final_acc() - b.final_acc()):+.2f} | {100 * (a - ba):+.2f} | -1.31 |")
    return "\n".join(lines)


def table_sbc3_lr():
    """SBC (3) and Federated Averaging with delay 100 against fp32 (seed 0) from lr 0.1 and
    from SBC's own 0.01 (its Table III): whether our larger learning rate is what costs
    SBC (3) its points at this length"""
    lines = ["| learning rate | fp32 | FedAvg, delay 100 | vs fp32 | SBC (3) | vs fp32 | SBC (3) vs FedAvg | "
             "SBC (3) training accuracy, last epoch, vs fp32 | paper (SBC Table II, ResNet32) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for group, lr in (("resnet20", "0.1"), ("resnet20_lr0.01", "0.01")):
        b, f, r = run(group, "fp32.s0"), run(group, "fedavg_d100.s0"), run(group, "sbc3.s0")
        acc = [f"{100 * x.final_acc():.2f}%" if x.ok() else "not finished" for x in (b, f, r)]
        diff = [f"{100 * (x.final_acc() - b.final_acc()):+.2f}" if x.ok() and b.ok() else "-" for x in (f, r)]
        sf = f"{100 * (r.final_acc() - f.final_acc()):+.2f}" if r.ok() and f.ok() else "-"
        fit = f"{100 * (last_epoch_fit(r)[1] - last_epoch_fit(b)[1]):+.2f}" if r.ok() and b.ok() else "-"
        lines.append(f"| {lr} | {acc[0]} | {acc[1]} | {diff[0]} | {acc[2]} | {diff[1]} | {sf} | {fit} | -0.4 |")
    return "\n".join(lines)


def table_commands():
    """the command of every run behind the tables"""
    lines = ["| run | command |", "|---|---|"]
    for group, name, _, _ in repro_runs.RUN_LIST:
        r = run(group, name)
        if r.ok():
            lines.append(f"| {group}/{name} | `{r.cmd}` |")
    return "\n".join(lines)


TABLES = {
    "resnet20": table_resnet,
    "resnet20_fit": table_resnet_fit,
    "claims_3lc": table_claims_3lc,
    "claims_dgc": table_claims_dgc,
    "claims_terngrad": table_claims_terngrad,
    "claims_sbc": table_claims_sbc,
    "claims_gcomp": table_claims_gcomp,
    "lenet_terngrad": table_lenet_terngrad,
    "lenet_sbc": table_lenet_sbc,
    "3lc_bits": table_3lc,
    "stoch3_workers": table_stoch3_workers,
    "sbc3_lr": table_sbc3_lr,
    "gcomp_parts": table_gcomp,
    "netlab": table_netlab,
    "netlab_full": table_netlab_full,
    "commands": table_commands,
}


# -------------------------------------------------------------- figures ----
def figures():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    os.makedirs(FIGS, exist_ok=True)
    rows = [(label, rs[0]) for label, name, _, _ in RESNET_TABLE for rs in [seeds_of("resnet20", name)] if rs]
    if not rows:
        return
    styles = ["-", "--", ":", "-."]
    # 1: test accuracy against epoch
    fig, axes = plt.subplots(1, 2, figsize=(13, 5), sharey=True)
    for i, (label, r) in enumerate(rows):
        ax = axes[0] if i < 9 else axes[1]
        ep, acc = zip(*r.curve())
        ax.plot(ep, [100 * a for a in acc], styles[i % 4], label=label)
    for ax, title in zip(axes, ("the papers' methods", "baselines and other settings")):
        ax.set_xlabel("epoch")
        ax.set_title(f"ResNet-20 / CIFAR-10, 4 workers: {title}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        ax.set_ylim(30, 95)
    axes[0].set_ylabel("test accuracy (%)")
    fig.tight_layout()
    fig.savefig(os.path.join(FIGS, "resnet20_accuracy_epoch.png"), dpi=90)
    plt.close(fig)
    # 2: test accuracy against MB sent per worker
    fig, ax = plt.subplots(figsize=(9, 6))
    for i, (label, r) in enumerate(rows):
        pts, mb, j = [], 0.0, 0
        for e in r.evals:
            while j < len(r.train) and r.train[j]["step"] <= e["step"]:
                mb += r.train[j]["up_bytes"] * r.train[j]["w"] / 1e6
                j += 1
            pts.append((mb, 100 * e["acc"]))
        ax.plot(*zip(*pts), styles[i % 4], marker=".", label=label)
    ax.set_xscale("log")
    ax.set_xlabel("MB sent per worker (log scale)")
    ax.set_ylabel("test accuracy (%)")
    ax.set_ylim(30, 95)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    ax.set_title("ResNet-20 / CIFAR-10, 4 workers: accuracy against traffic")
    fig.tight_layout()
    fig.savefig(os.path.join(FIGS, "resnet20_accuracy_mb.png"), dpi=90)
    plt.close(fig)
    # 3: time to the target accuracy at each bandwidth
    C = compute_time()
    if C:
        fig, ax = plt.subplots(figsize=(11, 5))
        width = 0.8 / len(BANDWIDTHS)
        for k, (bname, bw) in enumerate(BANDWIDTHS):
            ts = [r.time_to(TARGET, C, bw) for _, r in rows]
            ax.bar([i + k * width for i in range(len(rows))], [t / 60 if t else 0 for t in ts], width, label=bname)
        ax.set_xticks([i + width for i in range(len(rows))])
        ax.set_xticklabels([lb for lb, _ in rows], rotation=40, ha="right", fontsize=7)
        ax.set_yscale("log")
        ax.set_ylabel(f"modeled minutes to {100 * TARGET:.0f}% test accuracy")
        ax.grid(alpha=0.3, axis="y", which="both")
        ax.legend()
        ax.set_title("ResNet-20, 4 workers: time to accuracy (no bar: not reached)")
        fig.tight_layout()
        fig.savefig(os.path.join(FIGS, "resnet20_time_to_accuracy.png"), dpi=90)
        plt.close(fig)
    # 4: measured on shaped links (scripts/netlab_runs.py): time to the target and speed-up over fp32
    for model, lab in LAB_ROWS.items():
        bars = []  # (label, [minutes per bandwidth or None])
        for codec, label, full, _ in lab:
            ts = []
            for bw, _ in LAB_BW:
                t = lab_time_to(model, codec, full, bw)
                ts.append(t / 60 if t else None)
            if any(ts):
                bars.append((label, ts))
        if len(bars) < 2:
            continue
        fig, ax = plt.subplots(figsize=(11, 5))
        width = 0.8 / len(LAB_BW)
        for k, (_, bname) in enumerate(LAB_BW):
            xs = [i + k * width for i in range(len(bars))]
            ys = [ts[k] or 0 for _, ts in bars]
            ax.bar(xs, ys, width, label=bname)
            base = bars[0][1][k] if bars[0][0].startswith("fp32") else None
            for x, y in zip(xs[1:], ys[1:]):
                if base and y:
                    ax.text(x, y, f"{base / y:.1f}x", ha="center", va="bottom", fontsize=7)
        ax.set_xticks([i + width for i in range(len(bars))])
        ax.set_xticklabels([lb for lb, _ in bars], fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel(f"minutes to {100 * LAB_TARGET[model]:g}% test accuracy")
        ax.grid(alpha=0.3, axis="y", which="both")
        ax.legend()
        ax.set_title(f"{model}, 4 hosts on shaped links: measured step time x steps to the target "
                     "(label: speed-up over fp32; no bar: full run not done)", fontsize=9)
        fig.tight_layout()
        fig.savefig(os.path.join(FIGS, f"{model}_links_time_to_accuracy.png"), dpi=90)
        plt.close(fig)


# ----------------------------------------------------------------- main ----
BLOCK = re.compile(r"(<!-- table (\S+): scripts/repro_tables.py -->\n)(.*?)(<!-- end table \2 -->)", re.S)


def render(doc):
    def sub(m):
        name = m.group(2)
        if name not in TABLES:
            raise SystemExit(f"repro_tables: REPRODUCING.md names an unknown table '{name}'")
        return m.group(1) + TABLES[name]() + "\n" + m.group(4)
    return BLOCK.sub(sub, doc)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--check", action="store_true")
    g.add_argument("--print", action="store_true")
    ap.add_argument("--no-figures", action="store_true")
    a = ap.parse_args()
    if a.print:
        for name, fn in TABLES.items():
            print(f"## {name}\n\n{fn()}\n")
        return 0
    with open(DOC) as f:
        doc = f.read()
    new = render(doc)
    found = {m.group(2) for m in BLOCK.finditer(doc)}
    if a.check:
        bad = 0
        for m_old, m_new in zip(BLOCK.finditer(doc), BLOCK.finditer(new)):
            if m_old.group(3) != m_new.group(3):
                bad += 1
                print(f"FAIL: table {m_old.group(2)} in docs/REPRODUCING.md differs from its logs; "
                      f"run scripts/repro_tables.py. The logs give:\n{m_new.group(3)}")
        missing = sorted(set(TABLES) - found)
        for name in missing:
            print(f"FAIL: docs/REPRODUCING.md has no table {name}")
        print(f"checked {len(found)} tables against docs/runs/")
        ok = len(found) - bad
        print(f"RESULT {ok} {bad + len(missing)}")
        return 1 if bad or missing else 0
    if new != doc:
        with open(DOC, "w") as f:
            f.write(new)
    if not a.no_figures:
        figures()
    return 0


if __name__ == "__main__":
    sys.exit(main())
