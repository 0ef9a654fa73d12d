#!/usr/bin/env python3
"""Plots training logs (--log FILE, CSV or JSON lines) of one or more runs on one figure.

    scripts/plot.py [options] LOG [LOG ...]
    scripts/plot.py --layers LAYERS.csv [-o FILE.png] [--top N]
      -o FILE.png         where to write the figure (default plot.png)
      --x step|epoch|mb|time
                          the horizontal axis: training step (default), epoch, MB sent per
                          worker (log scale), or modeled time in minutes
      --bandwidth BW      for --x time: the link rate of the network model, e.g. 10mbit,
                          1gbit (default: the time each run's own model logged, comm_model_s)
      --latency T         for --x time with --bandwidth: seconds per message (default 0.5ms)
      --label TEXT        one per LOG, in order (default: the file names)
      --layers FILE       instead: a --log-layers file, bytes per step and relative error of
                          the --top N tensors (default 8) that sent the most, against step

Two panels: the training loss (each progress line) and the evaluation metric (test or
validation accuracy, or perplexity for language models). The modeled time is each
step's compute_s + codec_s + the network model of docs/DIST.md (wire_max_bytes x 8 /
bandwidth + hops x latency). Needs matplotlib (scripts/deps.sh --plots); uses only the
logs, so a plot can be redrawn at any time.
"""
import argparse
import csv
import json
import math
import os
import re
import sys

UNITS = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "kb": 8e3, "mb": 8e6, "gb": 8e9}


def parse_rate(s):
    m = re.fullmatch(r"([0-9.eE+-]+)\s*([a-zA-Z/]*)", s.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"{s}: expected a rate such as 100mbit")
    unit = m.group(2).lower().replace("/s", "").replace("ps", "")
    if unit not in UNITS and unit != "":
        raise argparse.ArgumentTypeError(f"{s}: unknown unit '{m.group(2)}'")
    return float(m.group(1)) * UNITS.get(unit, 1)


def parse_seconds(s):
    m = re.fullmatch(r"([0-9.eE+-]+)\s*(us|ms|s)?", s.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"{s}: expected a duration such as 0.5ms")
    return float(m.group(1)) * {"us": 1e-6, "ms": 1e-3, "s": 1, None: 1}[m.group(2)]


def read_log(path):
    """(training rows, evaluation rows) as dicts of floats; lines starting with # are skipped"""
    train, evals = [], []
    with open(path) as f:
        lines = [ln for ln in f if ln.strip() and not ln.startswith("#")]
    if not lines:
        return train, evals
    if lines[0].lstrip().startswith("{"):
        rows = [json.loads(ln) for ln in lines]
    else:
        rows = list(csv.DictReader(lines))
    for r in rows:
        kind = r.pop("kind", "train")
        vals = {}
        for k, v in r.items():
            try:
                vals[k] = float(v) if v not in (None, "") else math.nan  # JSON's null: non-finite
            except (TypeError, ValueError):
                vals[k] = math.nan
        vals["_kind"] = kind
        (train if kind == "train" else evals).append(vals)
    prev = 0
    for r in train:
        r["w"] = r.get("step", 0) - prev
        prev = r.get("step", 0)
    return train, evals


def xs_of(train, mode, bw, lat):
    """x of each training row: cumulative over the steps each row covers"""
    out, acc = [], 0.0
    for r in train:
        if mode == "step":
            out.append(r["step"])
            continue
        if mode == "epoch":
            out.append(r.get("epoch", math.nan))
            continue
        if mode == "mb":
            acc += r.get("up_bytes", 0) * r["w"] / 1e6
        else:
            comm = r.get("comm_model_s", 0)
            if bw:
                comm = r.get("wire_max_bytes", 0) * 8 / bw + r.get("hops", 0) * lat
            acc += r["w"] * (r.get("compute_s", 0) + r.get("codec_s", 0) + comm) / 60
        out.append(acc)
    return out


def at_steps(train, xs, steps):
    """x at each step of steps, from the training row that ends there (or the last before)"""
    out, j = [], 0
    for s in steps:
        while j + 1 < len(train) and train[j + 1]["step"] <= s:
            j += 1
        out.append(xs[j] if train else math.nan)
    return out


def plot_layers(plt, a):
    """bytes per step and relative error of the tensors that sent the most"""
    try:
        with open(a.layers) as f:
            rows = list(csv.DictReader(ln for ln in f if not ln.startswith("#")))
    except OSError as e:
        print(f"plot: cannot read {a.layers}: {e}", file=sys.stderr)
        return 1
    if not rows or "bytes_per_step" not in rows[0]:
        print(f"plot: {a.layers} is not a --log-layers file", file=sys.stderr)
        return 1
    series = {}
    for r in rows:
        series.setdefault(r["tensor"], []).append(r)
    top = sorted(series, key=lambda t: -sum(float(r["bytes_per_step"]) for r in series[t]))[:a.top]
    fig, (ax_b, ax_e) = plt.subplots(1, 2, figsize=(12, 4.5))
    for t in top:
        rs = series[t]
        steps = [float(r["step"]) for r in rs]
        ax_b.plot(steps, [float(r["bytes_per_step"]) for r in rs], label=f"{t} ({rs[0]['codec']})")
        ax_e.plot(steps, [float(r["rel_error"]) if r["rel_error"] else math.nan for r in rs], label=t)
    ax_b.set_yscale("log")
    for ax, title in ((ax_b, "bytes per step (worker 0)"), (ax_e, "relative error |x - decoded| / |x|")):
        ax.set_xlabel("step")
        ax.set_title(title)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(a.out, dpi=90)
    print(f"plot: wrote {a.out}")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logs", nargs="*")
    ap.add_argument("--layers")
    ap.add_argument("--top", type=int, default=8)
    ap.add_argument("-o", "--out", default="plot.png")
    ap.add_argument("--x", choices=["step", "epoch", "mb", "time"], default="step")
    ap.add_argument("--bandwidth", type=parse_rate)
    ap.add_argument("--latency", type=parse_seconds, default=0.5e-3)
    ap.add_argument("--label", action="append", default=[])
    a = ap.parse_args()
    if not a.logs and not a.layers:
        ap.error("give LOG files, or --layers FILE")
    if a.label and len(a.label) != len(a.logs):
        ap.error(f"{len(a.label)} --label for {len(a.logs)} logs")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot: needs matplotlib (scripts/deps.sh --plots; Debian's python3-matplotlib, "
              "run with /usr/bin/python3)", file=sys.stderr)
        return 1
    if a.layers:
        return plot_layers(plt, a)
    fig, (ax_loss, ax_eval) = plt.subplots(1, 2, figsize=(12, 4.5))
    xlabel = {"step": "step", "epoch": "epoch", "mb": "MB sent per worker",
              "time": "modeled minutes" + (f" at {a.bandwidth / 1e6:g} Mbit/s" if a.bandwidth else "")}[a.x]
    metric = "test accuracy (%)"
    for i, path in enumerate(a.logs):
        try:
            train, evals = read_log(path)
        except (OSError, ValueError, csv.Error) as e:
            print(f"plot: cannot read {path}: {e}", file=sys.stderr)
            return 1
        if not train:
            print(f"plot: {path} has no training rows", file=sys.stderr)
            return 1
        label = a.label[i] if a.label else os.path.basename(path)
        xs = xs_of(train, a.x, a.bandwidth, a.latency)
        ax_loss.plot(xs, [r.get("loss", math.nan) for r in train], label=label)
        if evals:
            lm = any(e["_kind"] == "valid" for e in evals)  # language models report validation
            evals = [e for e in evals if e["_kind"] == ("valid" if lm else "test")]
            ys = [e["ppl"] if lm else 100 * e.get("acc", math.nan) for e in evals]
            if lm:
                metric = "perplexity"
            ex = [e.get("epoch", math.nan) for e in evals] if a.x == "epoch" else \
                at_steps(train, xs, [e["step"] for e in evals])
            ax_eval.plot(ex, ys, marker=".", label=label)
    for ax, title in ((ax_loss, "training loss"), (ax_eval, metric)):
        ax.set_xlabel(xlabel)
        ax.set_title(title)
        ax.grid(alpha=0.3, which="both")
        if a.x == "mb":
            ax.set_xscale("log")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(a.out, dpi=90)
    print(f"plot: wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
