#!/usr/bin/env python3
"""Runs one trainer once per codec configuration with the same seed, data and
schedule, and prints a markdown table of what each configuration achieved:
test accuracy (or perplexity), bits per value up and down per step, the
compression ratio, compute / codec / modeled communication time per step.

    bench/dist_table.py -- --steps 400 --workers 4 --batch 32
    bench/dist_table.py --binary ./train_lenet --configs lenet -- --steps 2000

Every run's CSV log and stdout go to --out (default dev/out/dist_table/); the
table is printed and written to --out/table.md. Nothing here is a hard-coded
result: each row comes from parsing that run's log.
"""
import argparse
import csv
import math
import os
import shlex
import subprocess
import sys
import time

# (label, extra trainer flags): every codec with its paper defaults
CONFIGS = {
    "resnet": [
        ("fp32 (allreduce)", "--codec fp32"),
        ("fp16", "--codec fp16"),
        ("int8 (ps)", "--codec int8"),
        ("terngrad", "--codec terngrad"),
        ("stoch3 (ps)", "--codec stoch3"),
        ("3lc s=1.0 (ps)", "--codec 3lc:s=1.0"),
        ("3lc s=1.9 (ps)", "--codec 3lc:s=1.9"),
        ("onebit (ps)", "--codec onebit"),
        ("topk 5% (ps)", "--codec topk"),
        ("dgc (warm-up 4 ep)", "--codec dgc"),
        ("dgc (no warm-up)", "--codec dgc:warmup=0"),
        ("graddrop 0.1%", "--codec graddrop"),
        ("sbc (1) p=0.001", "--codec sbc:p=0.001"),
        ("sbc (2) p=0.01 delay 10", "--codec sbc:p=0.01 --delay 10"),
        ("sbc (3) p=0.01 delay 100", "--codec sbc:p=0.01 --delay 100"),
        ("gcomp (ring)", "--codec gcomp"),
        ("fedavg delay 10", "--codec fp32 --delay 10"),
    ],
    "lenet": [
        ("baseline fp32", "--codec fp32"),
        ("sbc (1) p=0.001", "--codec sbc:p=0.001"),
        ("sbc (2) p=0.01 delay 10", "--codec sbc:p=0.01 --delay 10"),
        ("sbc (3) p=0.01 delay 100", "--codec sbc:p=0.01 --delay 100"),
        ("graddrop 0.1%", "--codec graddrop"),
        ("terngrad", "--codec terngrad"),
        ("3lc (ps)", "--codec 3lc"),
        ("fedavg delay 10", "--codec fp32 --delay 10"),
        # DGC's momentum correction is defined for momentum SGD (DGC section 3.2), so
        # its row and a baseline for it use momentum SGD instead of SBC's Adam
        ("baseline fp32 (momentum sgd lr 0.01)", "--codec fp32 --optim momentum --lr 0.01"),
        ("dgc (momentum sgd lr 0.01)", "--codec dgc --optim momentum --lr 0.01"),
    ],
    "lstm": [
        ("baseline fp32", "--codec fp32"),
        ("sbc (1) p=0.001", "--codec sbc:p=0.001"),
        ("sbc (2) p=0.01 delay 10", "--codec sbc:p=0.01 --delay 10"),
        ("sbc (3) p=0.01 delay 100", "--codec sbc:p=0.01 --delay 100"),
        # DGC's language model warms up for 1 epoch (DGC section 5); runs shorter
        # than an epoch use the final density from the start
        ("dgc (warm-up 1 ep)", "--codec dgc:warmup=1"),
        ("dgc (no warm-up)", "--codec dgc:warmup=0"),
    ],
}


def summarize(log_path):
    train, evals = [], []
    with open(log_path) as f:
        for row in csv.DictReader(ln for ln in f if not ln.startswith("#")):  # '# run:' records
            (train if row["kind"] == "train" else evals).append(row)
    if not train:
        return None

    def mean(key):
        vals = [float(r[key]) for r in train]
        return sum(vals) / len(vals)

    # byte counters are per step averaged over each print interval; weight by
    # the steps each row covers
    steps = [int(r["step"]) for r in train]
    weights = [s - p for s, p in zip(steps, [0] + steps[:-1])]
    total = sum(weights)

    def wmean(key):
        return sum(float(r[key]) * w for r, w in zip(train, weights)) / total

    up, down = wmean("up_bytes"), wmean("down_bytes")
    last_eval = evals[-1] if evals else None
    # language models end with validation then test; report both
    last_valid = ([r for r in evals if r["kind"] == "valid"] or [None])[-1]
    last_test = ([r for r in evals if r["kind"] == "test"] or [None])[-1]
    return {
        "steps": steps[-1],
        "loss": float(train[-1]["loss"]),
        "eval_acc": float(last_eval["acc"]) if last_eval else float("nan"),
        "valid_ppl": float(last_valid["ppl"]) if last_valid else float("nan"),
        "test_ppl": float(last_test["ppl"]) if last_test else float("nan"),
        "bits_up": wmean("bits_up"),
        "bits_down": wmean("bits_down"),
        "up": up,
        # total bytes one worker sent over the whole run (SBC Table II's "upstream per client")
        "total_up": sum(float(r["up_bytes"]) * w for r, w in zip(train, weights)),
        "down": down,
        # codec ratio over the frames actually sent: raw = ratio * up per row
        "ratio": (sum(float(r["ratio"]) * float(r["up_bytes"]) * w for r, w in zip(train, weights)) / (up * total))
        if up > 0 else float("nan"),
        # over the compressed tensors alone: the raw size of one exchange of them is
        # fixed, so the total ratio is the step-weighted harmonic mean of the
        # intervals' ratios (intervals that sent nothing are left out)
        "ratio_c": (lambda rw: sum(w for _, w in rw) / sum(w / r for r, w in rw) if rw else float("nan"))(
            [(float(r["ratio_compressed"]), w) for r, w in zip(train, weights) if float(r["ratio_compressed"]) > 0]),
        # against sending every value as fp32 every step (delay counts too)
        "effective": 32.0 / wmean("bits_up") if wmean("bits_up") > 0 else float("nan"),
        "compute_s": wmean("compute_s"),
        "codec_s": wmean("codec_s"),
        "comm_s": wmean("comm_model_s"),
        "step_s": wmean("step_s"),
        "total_s": float(train[-1]["total_s"]),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default="./train_resnet")
    ap.add_argument("--configs", default="resnet", choices=sorted(CONFIGS))
    ap.add_argument("--only", default="", help="comma-separated labels (prefix match) to run")
    ap.add_argument("--out", default="dev/out/dist_table")
    ap.add_argument("--bandwidth", default="100mbit")
    ap.add_argument("--latency", default="0.5ms")
    ap.add_argument("--lm", action="store_true", help="report perplexity instead of accuracy")
    ap.add_argument("--no-run", action="store_true", help="only tabulate the logs already in --out")
    ap.add_argument("trainer_args", nargs=argparse.REMAINDER, help="-- then flags for every run")
    a = ap.parse_args()
    extra = [x for x in a.trainer_args if x != "--"]
    os.makedirs(a.out, exist_ok=True)
    rows = []
    wanted = [w for w in a.only.split(",") if w]
    for label, flags in CONFIGS[a.configs]:
        if wanted and not any(label.startswith(w) for w in wanted):
            continue
        tag = "".join(c if c.isalnum() else "_" for c in label)
        log = os.path.join(a.out, tag + ".csv")
        cmd = [a.binary] + extra + shlex.split(flags) + [
            "--bandwidth", a.bandwidth, "--latency", a.latency, "--log", log, "--quiet"]
        t0 = time.time()
        if a.no_run:
            rc = 0
        else:
            print("==", " ".join(cmd), flush=True)
            with open(os.path.join(a.out, tag + ".txt"), "w") as out:
                rc = subprocess.call(cmd, stdout=out, stderr=subprocess.STDOUT)
        s = summarize(log) if rc == 0 and os.path.exists(log) else None
        if s is None:
            print(f"   failed (exit {rc}); see {os.path.join(a.out, tag + '.txt')}", flush=True)
            continue
        s["label"], s["cmd"], s["wall"] = label, " ".join(cmd), time.time() - t0
        if not a.no_run:
            print(f"   {s['steps']} steps in {s['wall']:.0f} s: eval acc {s['eval_acc']:.4f} ppl {s['valid_ppl']:.2f} "
                  f"(test {s['test_ppl']:.2f}), "
                  f"ratio {s['ratio']:.1f}x", flush=True)
        rows.append(s)
    metric = "val ppl | test ppl" if a.lm else "test acc"

    def x(v):
        return "-" if math.isnan(v) else f"{v:.1f}x"

    lines = [
        f"| configuration | steps | {metric} | bits/value up | bits/value down | ratio (all / compressed tensors) | 32 / bits up | MB up per worker | compute s/step "
        f"| codec s/step | modeled comm s/step @ {a.bandwidth} |",
        "|---|---|---|---|---|---|---|---|---|---|---|" + ("---|" if a.lm else ""),
    ]
    for s in rows:
        m = f"{s['valid_ppl']:.2f} | {s['test_ppl']:.2f}".replace("nan", "-") if a.lm else f"{100 * s['eval_acc']:.2f}%"
        lines.append(f"| {s['label']} | {s['steps']} | {m} | {s['bits_up']:.4g} | {s['bits_down']:.4g} | "
                     f"{x(s['ratio'])} / {x(s['ratio_c'])} | {x(s['effective'])} | {s['total_up'] / 1e6:.4g} | {s['compute_s']:.3f} | {s['codec_s']:.4f} | {s['comm_s']:.4f} |")
    table = "\n".join(lines)
    print()
    print(table)
    with open(os.path.join(a.out, "table.md"), "w") as f:
        f.write("command: " + " ".join([a.binary] + extra) + " + per-row flags\n\n" + table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
