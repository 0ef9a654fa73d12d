#!/usr/bin/env python3
"""Where a training step's time goes, from a trainer's --log FILE (CSV or JSON lines).

    scripts/step_breakdown.py [--skip K] LOG [LOG ...]

For each log: the mean step time and its parts over the progress rows after the
first K (default 1: the first window holds cuDNN's algorithm search and the
allocations), weighted by the steps each row covers:
  compute  forward + backward (on a GPU: with the parameter upload and the
           gradient download)
  codec    encoding and decoding in the exchange (on the host)
  data     fetching the batch (logs without data_s count it in host)
  host     the rest of the step: the exchange's error-feedback memory and
           topology, the optimizer, the statistics
and, for logs with the h2d_bytes, d2h_bytes and copy_s columns (a GPU model's
copies between host and device memory: parameters, state, gradients; 0 on the
CPU), what a step copied each way and the host's time in those copies (a part of
compute and codec, not added again). One line per log, e.g.
  resnet110_3lc_cuda: 30 steps, step 41.2 ms = compute 33.0 + codec 5.1 + data 1.0 + host 2.1 (host side 20%); copies 6.9 MB up + 6.9 MB down in 0.6 ms
"host side" is the share of the step outside compute: on a GPU, the time the
GPU waits for the host.
Exit status 1 when a log has no progress row to use.
"""
import csv
import json
import os
import sys


def breakdown(path, skip):
    rows = []
    with open(path) as f:
        lines = [ln.strip() for ln in f if ln.strip() and not ln.startswith("#")]
    if lines and not lines[0].startswith("{"):  # CSV: numbers from the header's columns
        for r in csv.DictReader(lines):
            if r.get("kind") == "train":
                rows.append({k: float(v) for k, v in r.items() if k != "kind" and v not in (None, "")})
        lines = []
    for line in lines:
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            continue
        if r.get("kind") == "train":
            rows.append(r)
    prev = rows[skip - 1]["step"] if 0 < skip <= len(rows) else 0
    steps = tot = comp = codec = data = h2d = d2h = copy = 0.0
    copies = bool(rows) and all("h2d_bytes" in r for r in rows[skip:])
    for r in rows[skip:]:
        k = r["step"] - prev
        prev = r["step"]
        if k <= 0:
            continue
        steps += k
        tot += k * r["step_s"]
        comp += k * r["compute_s"]
        codec += k * r["codec_s"]
        data += k * r.get("data_s", 0.0)
        if copies:
            h2d += k * r["h2d_bytes"]
            d2h += k * r["d2h_bytes"]
            copy += k * r["copy_s"]
    if steps == 0:
        return None
    tot, comp, codec, data = tot / steps, comp / steps, codec / steps, data / steps
    host = max(tot - comp - codec - data, 0.0)
    share = (tot - comp) / tot if tot > 0 else 0.0
    cp = (h2d / steps, d2h / steps, copy / steps) if copies else None
    return int(steps), tot, comp, codec, data, host, share, cp


def mb(b):
    return f"{b / 1e6:.3g} MB" if b >= 1e5 else f"{b:.0f} B"


def main(argv):
    skip = 1
    args = argv[1:]
    if args[:1] in (["-h"], ["--help"]):
        print(__doc__.strip())
        return 0
    if args[:1] == ["--skip"]:
        if len(args) < 2 or not args[1].isdigit():
            print("step_breakdown: --skip takes a count", file=sys.stderr)
            return 2
        skip = int(args[1])
        args = args[2:]
    if not args:
        print("usage: step_breakdown.py [--skip K] LOG.jsonl [...]", file=sys.stderr)
        return 2
    status = 0
    for path in args:
        name = os.path.basename(path)
        for ext in (".jsonl", ".csv"):
            if name.endswith(ext):
                name = name[: -len(ext)]
        try:
            b = breakdown(path, skip)
        except OSError as e:
            print(f"{name}: cannot read: {e.strerror}")
            status = 1
            continue
        except (KeyError, TypeError) as e:
            print(f"{name}: not a trainer log (a progress row lacks {e})")
            status = 1
            continue
        if b is None:
            print(f"{name}: no progress rows after the first {skip}")
            status = 1
            continue
        steps, tot, comp, codec, data, host, share, cp = b
        tail = f"; copies {mb(cp[0])} up + {mb(cp[1])} down in {1e3 * cp[2]:.2f} ms" if cp else ""
        print(f"{name}: {steps} steps, step {1e3 * tot:.1f} ms = compute {1e3 * comp:.1f} + codec {1e3 * codec:.1f}"
              f" + data {1e3 * data:.1f} + host {1e3 * host:.1f} (host side {100 * share:.0f}%){tail}")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
