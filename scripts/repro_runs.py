#!/usr/bin/env python3
"""The runs behind docs/REPRODUCING.md: their commands, and a queue that runs them.

    scripts/repro_runs.py list                  every run, its state and command
    scripts/repro_runs.py run [NAME ...]        run these (default: every CPU run not done), in order
    scripts/repro_runs.py cmd NAME              print one run's command

A run writes its CSV log, its stdout and a checkpoint every epoch into --work-dir
(default dev/out/repro-work, ignored by git, so that nothing git does can touch a file
a run is writing); when the trainer ends the whole run with exit 0, the log and the
stdout are copied to docs/runs/GROUP/NAME.{csv,txt}, and the run is done. A run that
was cut short (a session ending, a reboot) continues from its last checkpoint with
--resume, exactly as if it had not stopped, when the queue is started again.
The binaries are copied once into --bin-dir, so rebuilding the tree while the queue
runs does not change the program under a run; every .txt starts with the command
and the commit it was built from.

Runs go at low priority (nice 10) one at a time: each uses every core.
scripts/repro_tables.py turns the logs into the tables and figures.
"""
import argparse
import os
import shlex
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNS = os.path.join(ROOT, "docs", "runs")

# ResNet-20 on CIFAR-10, 4 workers x batch 32 (global 128), a 20-epoch cosine schedule from
# lr 0.1, momentum 0.9, weight decay 5e-4 (the papers' 1e-4 is for 160+ epochs), an
# evaluation every epoch; the network model at 100 Mbit/s (the log's wire_max_bytes and
# hops model any other bandwidth).
R20 = ("train_resnet --depth 20 --workers 4 --batch 32 --epochs 20 --lr 0.1 --schedule cosine "
       "--momentum 0.9 --wd 5e-4 --eval-every 1 --print-every 78 --bandwidth 100mbit --latency 0.5ms")

# (group, name, common flags, the row's own flags). Each method with its paper's defaults
# (its default topology and memory: docs/DIST.md). The order is the queue's: the five
# papers' methods first.
RESNET_ROWS = [
    ("fp32", "--codec fp32"),
    ("3lc_s1.0", "--codec 3lc:s=1.0"),
    ("dgc", "--codec dgc"),
    ("sbc2", "--codec sbc:p=0.01 --delay 10"),
    ("3lc_s1.9", "--codec 3lc:s=1.9"),
    ("sbc1", "--codec sbc:p=0.001"),
    ("terngrad", "--codec terngrad"),
    ("gcomp", "--codec gcomp"),
]
SECOND_SEED = ["fp32", "3lc_s1.0", "dgc", "sbc2", "terngrad", "gcomp"]
BASELINE_ROWS = [
    ("int8", "--codec int8"),
    ("stoch3", "--codec stoch3"),
    ("onebit", "--codec onebit"),
    ("topk", "--codec topk"),
    ("graddrop", "--codec graddrop"),
    ("fedavg", "--codec fp32 --delay 10"),
    ("sbc3", "--codec sbc:p=0.01 --delay 100"),
    # 3LC's bits per state change against s (3LC section 4.5), and GCOMP with the paper's
    # own metric thresholds (guard=0) against our default guard=1
    ("3lc_s1.5", "--codec 3lc:s=1.5"),
    ("3lc_s1.75", "--codec 3lc:s=1.75"),
    ("gcomp_guard0", "--codec gcomp --optim sgd:momentum=0.9,guard=0"),
    # why 3LC at s = 1.9 falls short in 20 epochs: the same pushes without the compressed pull
    ("3lc_s1.9_allgather", "--codec 3lc:s=1.9 --topology allgather"),
    # why stochastic 3-value loses more than in 3LC's Table 1: the same pushes without the
    # server's second stochastic rounding of the pull
    ("stoch3_allgather", "--codec stoch3 --topology allgather"),
    # why SBC (3) falls short in 20 epochs: its 100 local steps between exchanges, without
    # its sparsification
    ("fedavg_d100", "--codec fp32 --delay 100"),
]


# why stochastic 3-value loses more than in 3LC's Table 1 (section 4.3: 10 workers): the
# same schedule with 10 workers x batch 32 (global 320, 156 steps an epoch), fp32 and stoch3
# on the parameter server; if the mean of 10 workers' independent roundings is what the
# paper's -1.31 rests on, stoch3's gap to fp32 shrinks here against the 4 workers' -4.19
R20_W10 = R20.replace("--workers 4", "--workers 10")
R20_W10_ROWS = [("fp32", "--codec fp32"), ("stoch3", "--codec stoch3")]

# whether stoch3's gap to fp32 depends on the run's length (3LC Table 1 runs 164 epochs; 3LC
# section 4.4: "designs that achieve high accuracy with many training steps do not always
# yield high accuracy with fewer"): the same pair over a 10-epoch cosine schedule; if the
# gap grows as the schedule shortens, length is a cause of the gap at 20 epochs
R20_E10 = R20.replace("--epochs 20", "--epochs 10")
R20_E10_ROWS = [("fp32", "--codec fp32"), ("stoch3", "--codec stoch3")]

# why SBC (3) falls short in 20 epochs, at SBC's own learning rate (Table III: 0.01 for
# ResNet32): the same schedule from lr 0.01, fp32 every step, Federated Averaging and SBC (3)
# with delay 100; if our lr 0.1 (each worker's 100 local steps carry its model ten times as
# far) is what costs SBC (3) its 13.67 points, its gap to fp32 shrinks here
R20_LR001 = R20.replace("--lr 0.1 ", "--lr 0.01 ")
R20_LR001_ROWS = [("fp32", "--codec fp32"), ("sbc3", "--codec sbc:p=0.01 --delay 100"),
                  ("fedavg_d100", "--codec fp32 --delay 100")]


def _resnet_runs():
    flags = dict(RESNET_ROWS + BASELINE_ROWS)
    runs = [(n + ".s0", f) for n, f in RESNET_ROWS]
    runs += [(n + ".s1", flags[n] + " --seed 1") for n in SECOND_SEED]
    runs += [(n + ".s0", f) for n, f in BASELINE_ROWS]
    out = [("resnet20", n, R20, f if "--seed" in f else f + " --seed 0") for n, f in runs]
    # the compute time of one worker on its own host (this machine's cores), for the modeled
    # time to accuracy: forward and backward of batch 32, no exchange
    out.append(("resnet20", "compute.w1", "train_resnet --depth 20 --workers 1 --batch 32 --steps 400 "
                "--eval-every -1 --print-every 50", "--seed 0"))
    out += [("resnet20_w10", n + ".s0", R20_W10, f + " --seed 0") for n, f in R20_W10_ROWS]
    out += [("resnet20_lr0.01", n + ".s0", R20_LR001, f + " --seed 0") for n, f in R20_LR001_ROWS]
    out += [("resnet20_e10", n + ".s0", R20_E10, f + " --seed 0") for n, f in R20_E10_ROWS]
    return out


# TernGrad section 4.1, Figure 3 (a): LeNet on MNIST, momentum SGD 0.9, lr 0.01 decayed to zero
# by a polynomial of power 0.5, weight decay 5e-4, total batch 64, 10K iterations, evaluated on
# the exponential moving average of the parameters (decay 0.9999, section 4); every worker
# draws from the whole training set, and every layer is ternarized (the last layer is kept
# in fp32 only for the ImageNet networks of section 4.2).
LENET_TG = ("train_lenet --steps 10000 --optim momentum --lr 0.01 --momentum 0.9 --wd 5e-4 "
            "--schedule poly:power=0.5 --ema 0.9999 --shard epoch --eval-every 2 --print-every 250 "
            "--bandwidth 100mbit --latency 0.5ms")
LENET_TG_ROWS = [("fp32", "--codec fp32"), ("terngrad", "--codec terngrad --keep-last-fp32 0")]

# SBC section IV-A, Table II (MNIST): LeNet5-Caffe, Adam lr 0.001, batch 128 per client, 4 clients
# on fixed random quarters, 2000 iterations (train_lenet's defaults)
LENET_SBC = "train_lenet --steps 2000 --workers 4 --print-every 100 --bandwidth 100mbit --latency 0.5ms"
LENET_SBC_ROWS = [
    ("fp32", "--codec fp32"),
    ("graddrop", "--codec graddrop"),
    ("fedavg", "--codec fp32 --delay 10"),
    ("sbc1", "--codec sbc:p=0.001"),
    ("sbc2", "--codec sbc:p=0.01 --delay 10"),
    ("sbc3", "--codec sbc:p=0.01 --delay 100"),
]
# the other papers' methods on the same protocol, seed 0 (the time to accuracy of the lab's
# LeNet rows, scripts/netlab_runs.py); DGC's momentum correction needs momentum SGD (DGC
# section 3.2), so DGC and a baseline for it run momentum SGD at lr 0.01 instead of Adam
LENET_SBC_MORE = [
    ("3lc", "--codec 3lc"),
    ("terngrad", "--codec terngrad"),
    ("gcomp", "--codec gcomp"),
    ("fp32_mom", "--codec fp32 --optim momentum --lr 0.01"),
    ("dgc_mom", "--codec dgc --optim momentum --lr 0.01"),
]


def _lenet_runs():
    runs = []
    for n in (4, 8):
        for seed in (0, 1):
            for name, f in LENET_TG_ROWS:
                runs.append(("lenet_terngrad", f"{name}.n{n}.s{seed}", LENET_TG,
                             f"{f} --workers {n} --batch {64 // n} --seed {seed}"))
    for seed in (0, 1):
        for name, f in LENET_SBC_ROWS:
            runs.append(("lenet_sbc", f"{name}.s{seed}", LENET_SBC, f"{f} --seed {seed}"))
    for name, f in LENET_SBC_MORE:
        runs.append(("lenet_sbc", f"{name}.s0", LENET_SBC, f"{f} --seed 0"))
    return runs


# GCOMP's size breakdown on a model with many zero gradients (GCOMP's observation that
# pruned zeros make much of its saving): SBC's WordLSTM on PTB (the embedding rows of words
# not in a batch get zero gradients), one epoch (1328 steps of 4 x 5 x 35 tokens), with our
# default guard=1 and the paper's rule (guard=0)
WORD_GCOMP = ("train_lstm --model word --steps 1328 --workers 4 --print-every 83 --eval-every 0 "
              "--bandwidth 100mbit --latency 0.5ms --codec gcomp")


def _word_runs():
    return [("wordlstm_gcomp", "guard1.s0", WORD_GCOMP, "--optim sgd:guard=1 --seed 0"),
            ("wordlstm_gcomp", "guard0.s0", WORD_GCOMP, "--optim sgd:guard=0 --seed 0")]


# The papers' own scale, for a GPU (--device cuda; local workers share GPU 0): prepared, not
# run on the 2-core machine (`run` leaves the gpu_ groups out unless they are named). Each
# follows its paper's section; what the text leaves open is chosen as noted.
GPU_3LC = ("train_resnet --device cuda --depth 110 --workers 10 --batch 32 --steps 25600 --lr 0.1 "
           "--schedule cosine:eta_min=0.001 --momentum 0.9 --wd 1e-4 --eval-every 8 --print-every 200")
# 3LC section 4.3: ResNet-110, 10 workers x batch 32, 25,600 steps (163.84 epochs), momentum 0.9,
# weight decay 1e-4, cosine from 0.1 to 0.001 (whether 0.1 is before or after the paper's
# scaling by the worker count is not said: 0.1 here)
GPU_3LC_ROWS = [("fp32", "--codec fp32"), ("3lc_s1.0", "--codec 3lc:s=1.0"), ("3lc_s1.5", "--codec 3lc:s=1.5"),
                ("3lc_s1.75", "--codec 3lc:s=1.75"), ("3lc_s1.9", "--codec 3lc:s=1.9"), ("int8", "--codec int8"),
                ("stoch3", "--codec stoch3"), ("onebit", "--codec onebit"), ("topk", "--codec topk"),
                ("local2", "--codec fp32 --delay 2")]
# DGC section 4.1, Table 2: ResNet-110 on 4 GPUs x batch 32, 164 epochs with fb.resnet.torch's
# schedule (lr 0.1, divided by 10 after epochs 81 and 122; 390 steps an epoch), warm-up 4 epochs
GPU_DGC = ("train_resnet --device cuda --depth 110 --workers 4 --batch 32 --epochs 164 --lr 0.1 "
           "--schedule multistep:milestones=31590+47580,gamma=0.1 --momentum 0.9 --wd 1e-4 --eval-every 4 "
           "--print-every 200")
GPU_DGC_ROWS = [("fp32", "--codec fp32"), ("graddrop", "--codec graddrop"), ("dgc", "--codec dgc")]
# DGC Table 4: the 2 x 1500 tied LSTM on PTB, 4 nodes, 40 epochs, 1 warm-up epoch (train_lstm's preset)
GPU_DGC_PTB = "train_lstm --device cuda --model word --preset dgc-ptb --workers 4 --epochs 40 --print-every 500"
# SBC Table III: ResNet32, momentum 0.9, batch 128 (taken per client, as train_lenet takes SBC's
# MNIST batch), lr 0.01 divided by 10 at 30,000 and 50,000 of 60,000 iterations, 4 clients
GPU_SBC = ("train_resnet --device cuda --depth 32 --workers 4 --batch 128 --steps 60000 --lr 0.01 "
           "--schedule multistep:milestones=30000+50000,gamma=0.1 --momentum 0.9 --wd 1e-4 --eval-every 10 "
           "--print-every 500")
GPU_SBC_ROWS = [("fp32", "--codec fp32"), ("graddrop", "--codec graddrop"), ("fedavg", "--codec fp32 --delay 10"),
                ("sbc1", "--codec sbc:p=0.001"), ("sbc2", "--codec sbc:p=0.01 --delay 10"),
                ("sbc3", "--codec sbc:p=0.01 --delay 100")]
# SBC Table III: WordLSTM, 60,000 iterations, decay 0.8 (its step is lost in our copy of the
# paper: per epoch from epoch 6, as TensorFlow's PTB "medium" model; 1328 steps an epoch)
GPU_SBC_PTB = ("train_lstm --device cuda --model word --workers 4 --steps 60000 "
               "--schedule step:size=1328,gamma=0.8,start=7968 --print-every 500")


def _gpu_runs():
    runs = [("gpu_3lc", n, GPU_3LC, f + " --seed 0") for n, f in GPU_3LC_ROWS]
    runs += [("gpu_dgc", n, GPU_DGC, f + " --seed 0") for n, f in GPU_DGC_ROWS]
    runs += [("gpu_dgc_ptb", n, GPU_DGC_PTB, f + " --seed 0") for n, f in (("fp32", "--codec fp32"),
                                                                           ("dgc", "--codec dgc"))]
    runs += [("gpu_sbc", n, GPU_SBC, f + " --seed 0") for n, f in GPU_SBC_ROWS]
    runs += [("gpu_sbc_ptb", n, GPU_SBC_PTB, f + " --seed 0") for n, f in GPU_SBC_ROWS if n != "graddrop"]
    return runs


RUN_LIST = _resnet_runs() + _lenet_runs() + _word_runs() + _gpu_runs()


def find(name):
    for r in RUN_LIST:
        if r[1] == name or f"{r[0]}/{r[1]}" == name:
            return r
    return None


def paths(run, work_dir):
    """the committed log and stdout of a run, and where it runs: its log, stdout and
    checkpoint under work_dir (ignored by git), copied into docs/runs when done"""
    group, name = run[0], run[1]
    base, work = os.path.join(RUNS, group, name), os.path.join(work_dir, group, name)
    return base + ".csv", base + ".txt", work + ".csv", work + ".txt", work + ".ckpt"


def command(run, bin_dir="."):
    """the trainer's argument list for a run, without its log, checkpoint and resume flags"""
    common = shlex.split(run[2])
    return [os.path.join(bin_dir, common[0])] + common[1:] + shlex.split(run[3]) + ["--quiet"]


def state(run, work_dir):
    """'done' (the trainer ended the whole run with exit 0 and its logs are in docs/runs),
    'partial' (a checkpoint to resume from) or 'new'"""
    log, txt, wlog, _, ckpt = paths(run, work_dir)
    if os.path.exists(txt) and os.path.exists(log):
        with open(txt) as f:
            if DONE in f.read():
                return "done"
    return "partial" if os.path.exists(ckpt) and os.path.exists(wlog) else "new"


DONE = "# finished: exit 0"


def git_rev():
    try:
        rev = subprocess.check_output(["git", "-C", ROOT, "rev-parse", "--short=12", "HEAD"], text=True).strip()
        dirty = subprocess.call(["git", "-C", ROOT, "diff", "--quiet", "HEAD", "--", ".", ":!docs/runs"]) != 0
        return rev + ("+changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def snapshot_bins(bin_dir):
    os.makedirs(bin_dir, exist_ok=True)
    stamp = os.path.join(bin_dir, "COMMIT")
    if not os.path.exists(stamp):
        for b in ("train_resnet", "train_lenet", "train_lstm"):
            src = os.path.join(ROOT, b)
            if not os.path.exists(src):
                sys.exit(f"repro_runs: {src} is missing: run make first")
            shutil.copy2(src, os.path.join(bin_dir, b))
        with open(stamp, "w") as f:
            f.write(git_rev() + "\n")
    with open(stamp) as f:
        return f.read().strip()


def run_one(run, a, rev):
    log, txt, wlog, wtxt, ckpt = paths(run, a.work_dir)
    st = state(run, a.work_dir)
    if st == "done":
        return 0
    os.makedirs(os.path.dirname(ckpt), exist_ok=True)
    cmd = command(run, a.bin_dir) + ["--log", wlog, "--save", ckpt, "--save-every", str(a.save_every)]
    if st == "partial":
        cmd += ["--resume", ckpt]
    else:
        for p in (wlog, wtxt):
            if os.path.exists(p):
                os.remove(p)
    shown = " ".join(command(run))
    print(f"== {run[0]}/{run[1]} ({'resumed' if st == 'partial' else 'new'}): {shown}", flush=True)
    with open(wtxt, "a") as out:
        out.write(f"# command: {shown}\n# built from: {rev}; started {time.strftime('%Y-%m-%d %H:%M:%S')}"
                  f"{' (resume)' if st == 'partial' else ''}\n")
        out.flush()
        t0 = time.time()
        rc = subprocess.call(["nice", "-n", "10"] + cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
        out.write(f"{DONE}\n" if rc == 0 else f"# stopped: exit {rc}\n")
    if rc == 0:  # the finished run's logs go where the tables read them
        os.makedirs(os.path.dirname(log), exist_ok=True)
        shutil.copyfile(wlog, log)
        shutil.copyfile(wtxt, txt)
    print(f"   exit {rc} after {time.time() - t0:.0f} s; {state(run, a.work_dir)}", flush=True)
    return rc


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["list", "run", "cmd"])
    ap.add_argument("names", nargs="*")
    ap.add_argument("--work-dir", default=os.path.join(ROOT, "dev", "out", "repro-work"),
                    help="where runs write their logs and checkpoints until they are done")
    ap.add_argument("--bin-dir", default=os.path.join(ROOT, "dev", "out", "repro-bin"))
    ap.add_argument("--save-every", type=int, default=390)
    a = ap.parse_args()
    chosen = [r for r in RUN_LIST if a.what == "list" or not r[0].startswith("gpu_")]
    if a.names:
        chosen = [find(n) for n in a.names]
        bad = [n for n, r in zip(a.names, chosen) if r is None]
        if bad:
            print(f"repro_runs: no run named {', '.join(bad)}; 'list' shows them", file=sys.stderr)
            return 2
    if a.what == "list":
        for r in chosen:
            print(f"{r[0]}/{r[1]:16s} {state(r, a.work_dir):8s} {' '.join(command(r))}")
        return 0
    if a.what == "cmd":
        for r in chosen:
            print(" ".join(command(r)))
        return 0
    if not os.environ.get("DATA_DIR"):
        print("repro_runs: set DATA_DIR to the folder with cifar-10-batches-bin/ and mnist/", file=sys.stderr)
        return 2
    rev = snapshot_bins(a.bin_dir)
    failed = 0
    for r in chosen:
        if run_one(r, a, rev) != 0:
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
