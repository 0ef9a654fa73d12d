#!/usr/bin/env python3
"""Measured step times on real, bandwidth-limited links: the runs behind the "Measured on
links" table of docs/REPRODUCING.md.

    scripts/netlab_runs.py list                 every run and its state
    scripts/netlab_runs.py run [NAME ...]       run these (default: every one not done)

Each run starts 4 hosts in network namespaces joined by links shaped to 10 Mbit/s, 100
Mbit/s or 1 Gbit/s (scripts/netlab.sh; needs root), runs the trainer under mpirun across
them (one rank per host, TCP only) for a number of steps, and keeps its log and stdout in
docs/runs/netlab/NAME.{csv,txt}; the .txt ends with the bytes each host's link sent and
received. What a step costs on the link does not depend on how far training is, so a few
dozen steps measure it; accuracy does not depend on the link, so the time to an accuracy
is the measured step time times the steps the full-length run of the same configuration
(docs/runs/resnet20, docs/runs/lenet_sbc) needed. scripts/repro_tables.py makes the table.
Runs one at a time; a machine busy with other work inflates the compute part. A launch
that does not start within 2 minutes is started again (up to 3 times); a run that writes
nothing for 10 minutes (mpirun waits for ever once it has lost a daemon) is stopped, its
.txt says so, and the script goes on to the next run and exits 1 at the end.
"""
import argparse
import os
import shlex
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "docs", "runs", "netlab")
DONE = "# finished: exit 0"

BANDWIDTHS = [("10mbit", 10e6), ("100mbit", 100e6), ("1gbit", 1e9)]
# (model, codec name, the trainer's flags for it; the same as the full-length runs')
CODECS = {
    "lenet": [("fp32", "--codec fp32"), ("3lc", "--codec 3lc"), ("terngrad", "--codec terngrad"),
              ("dgc", "--codec dgc --optim momentum --lr 0.01"),
              ("dgc_post", "--codec dgc:warmup=0 --optim momentum --lr 0.01"),
              ("sbc2", "--codec sbc:p=0.01 --delay 10"), ("gcomp", "--codec gcomp")],
    "resnet20": [("fp32", "--codec fp32"), ("3lc", "--codec 3lc:s=1.0"), ("terngrad", "--codec terngrad"),
                 ("dgc", "--codec dgc"), ("dgc_post", "--codec dgc:warmup=0"),
                 ("sbc2", "--codec sbc:p=0.01 --delay 10"), ("gcomp", "--codec gcomp")],
}
# dgc_post: DGC's frames after its warm-up (the final density from the first step), so that the
# steps after the warm-up are timed at their own frame sizes (scripts/repro_tables.py, lab_time_to)
COMMON = {
    # SBC's MNIST protocol (train_lenet's defaults), as docs/runs/lenet_sbc
    "lenet": "train_lenet --workers 4 --print-every 5 --eval-every -1",
    # the ResNet-20 setting of docs/runs/resnet20
    "resnet20": "train_resnet --depth 20 --batch 32 --epochs 20 --lr 0.1 --schedule cosine --momentum 0.9 "
                "--wd 5e-4 --print-every 5 --eval-every -1",
}
# steps measured: enough for a few delayed exchanges (SBC (2) exchanges every 10th step)
STEPS = {"10mbit": 30, "100mbit": 60, "1gbit": 60}


# whole runs on the links, to check the table's step time x steps against a run's own clock:
# (model, link, codec name, steps or None for the whole run). SBC's MNIST protocol, its 2000
# steps and final evaluation, where a run takes minutes (NAME.full); ResNet-20's first epoch
# of the 20-epoch schedule, evaluated at its end (NAME.epoch, --stop-at)
FULL = [("lenet", bw, name, None) for bw in ("1gbit",) for name in ("fp32", "3lc", "terngrad", "dgc", "sbc2", "gcomp")] + \
       [("lenet", "10mbit", name, None) for name in ("sbc2", "3lc", "dgc")] + \
       [("lenet", "100mbit", name, None) for name in ("sbc2", "3lc", "dgc", "terngrad", "gcomp", "fp32")] + \
       [("resnet20", bw, name, 390) for bw in ("1gbit", "100mbit", "10mbit")
        for name in ("sbc2", "3lc", "terngrad", "dgc", "gcomp", "fp32")]


def full_name(model, bw, name, stop):
    return f"{model}.{name}.{bw}.{'epoch' if stop else 'full'}"


def runs():
    """each configuration twice: its measured steps, and one step alone, whose link bytes
    (the start: mpirun's wiring, the model sent from worker 0) are taken off the first's;
    then the FULL runs (NAME.full, NAME.epoch)"""
    out = []
    for model, codecs in CODECS.items():
        for bw, bps in BANDWIDTHS:
            for name, flags in codecs:
                for steps, tag in ((STEPS[bw], ""), (1, ".1step")):
                    cmd = f"{COMMON[model]} {flags} --steps {steps} --bandwidth {bw} --latency 0 --quiet"
                    out.append((f"{model}.{name}.{bw}{tag}", cmd, bw))
    for model, bw, name, stop in FULL:
        flags = dict(CODECS[model])[name]
        if stop:
            common = COMMON[model].replace("--print-every 5 --eval-every -1", f"--print-every 39 --eval-every 1 --stop-at {stop}")
        else:
            common = COMMON[model].replace("--print-every 5 --eval-every -1", "--print-every 100")
        out.append((full_name(model, bw, name, stop), f"{common} {flags} --bandwidth {bw} --latency 0 --quiet", bw))
    return out


def done(name):
    txt = os.path.join(OUT, name + ".txt")
    return os.path.exists(txt) and DONE in open(txt).read()


STALL_S = 600  # no line in the run's log or output for this long: the run has hung


def last_write(*paths):
    return max(os.path.getmtime(p) for p in paths if os.path.exists(p))


def stop(p):
    """mpirun, its launch agents and Open MPI's daemons (in sessions of their own), and the lab"""
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    subprocess.call(["pkill", "-KILL", "-x", "orted"])
    subprocess.call([os.path.join(ROOT, "scripts", "netlab.sh"), "down"])


def run_one(name, cmd, bw):
    os.makedirs(OUT, exist_ok=True)
    log, txt = os.path.join(OUT, name + ".csv"), os.path.join(OUT, name + ".txt")
    for p in (log, txt):
        if os.path.exists(p):
            os.remove(p)
    args = shlex.split(cmd)
    full = [os.path.join(ROOT, "scripts", "netlab.sh"), "mpirun", "4", bw, "./" + args[0]] + args[1:] + ["--log", log]
    print(f"== {name}: ./{cmd}", flush=True)
    env = dict(os.environ, OMP_NUM_THREADS="1", OMP_WAIT_POLICY="passive")
    for attempt in range(3):
        t0 = time.time()
        with open(txt, "w") as out:
            out.write(f"# command: scripts/netlab.sh mpirun 4 {bw} ./{cmd}\n")
            out.flush()
            p = subprocess.Popen(full, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, env=env, start_new_session=True)
            rc = None
            while rc is None:
                time.sleep(1)
                rc = p.poll()
                # a launch that never starts (a daemon lost while mpirun wires the hosts): start again
                if rc is None and time.time() - t0 > 120 and not os.path.exists(log):
                    stop(p)
                    rc = -1
                # a run that stops writing (mpirun waits for ever once it has lost a daemon):
                # stopped and reported, not started again
                elif rc is None and os.path.exists(log) and time.time() - last_write(log, txt) > STALL_S:
                    stop(p)
                    out.write(f"# stalled: no output for {STALL_S} s; stopped\n")
                    rc = -2
            out.write(f"{DONE}\n" if rc == 0 else f"# stopped: exit {rc}\n")
        print(f"   exit {rc} after {time.time() - t0:.0f} s", flush=True)
        if rc != -1:
            break
        print("   the launch hung; again", flush=True)
    return rc


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["list", "run"])
    ap.add_argument("names", nargs="*")
    a = ap.parse_args()
    chosen = [r for r in runs() if not a.names or r[0] in a.names]
    if a.what == "list":
        for name, cmd, bw in chosen:
            print(f"{name:24s} {'done' if done(name) else 'new':5s} scripts/netlab.sh mpirun 4 {bw} ./{cmd}")
        return 0
    if not os.environ.get("DATA_DIR"):
        print("netlab_runs: set DATA_DIR", file=sys.stderr)
        return 2
    bad = 0
    for name, cmd, bw in chosen:
        if not done(name):
            bad += run_one(name, cmd, bw) != 0
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
