"""gcx.ddp, the DistributedDataParallel communication hook, with torch's gloo backend on the
CPU (run by tests/test_ddp_hook.sh from the repository root, after `make` and `make lib`).

Two processes train a small MLP on a synthetic task (the labels of a random teacher network)
for STEPS steps of SGD, once with plain DDP (fp32 allreduce) and once through the hook per
codec. Checked:
 - fp32 through the hook gives plain DDP's parameters (both average the two gradients);
 - every run ends with the same parameters on both ranks;
 - the compressed runs converge: the final loss over the whole training set is below
   LOSS_DROP times the initial one and within LOSS_FACTOR of plain DDP's;
 - bytes: each rank encodes every bucket again from the gradient DDP gave the hook, with the
   memories of docs/DIST.md written here in torch (and the seeds of state.frame_seed); per
   step, state.last_step's sent is the sum of those frames, which gcx.stats counts too and
   `./gcx stats` for one tensor per codec; received is the other rank's sent, padded the
   larger frame of each bucket + 8; values, fp32, totals and the step count add up;
 - exchange: for the first REF_STEPS steps the average DDP got back is the mean of both
   ranks' frames (so the hook did exchange, in rank order, with those seeds), bucket
   rebuild after the first step included;
 - the default memories are docs/DIST.md's table; bad specs, memories and dtypes raise;
 - the README's example runs as printed and its loss falls.
Ends with "RESULT passed failed" (tests/run.sh).
"""
import atexit
import datetime
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import gcx  # noqa: E402
import gcx.ddp  # noqa: E402

GCX = os.environ.get("GCX_BIN", "./gcx")
WORLD, STEPS, BATCH, LR, REF_STEPS = 2, 300, 32, 0.05, 5
DIM, CLASSES, SAMPLES = 32, 4, 2048
LOSS_DROP, LOSS_FACTOR = 0.45, 2.0
# a codec spec, " nesterov" for DGC's Nesterov momentum correction; None is plain DDP
RUNS = [None, "fp32", "sbc:p=0.01", "3lc", "dgc:density=0.01", "dgc:density=0.01 nesterov", "terngrad",
        "gcomp:every=4"]
from checks import check, raises, result  # noqa: E402  (tests/checks.py)


def task():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(SAMPLES, DIM, generator=g)
    w1, w2 = torch.randn(DIM, 16, generator=g), torch.randn(16, CLASSES, generator=g)
    return x, (torch.tanh(x @ w1) @ w2).argmax(1)


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(DIM, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64),
                               torch.nn.ReLU(), torch.nn.Linear(64, CLASSES))


class Reference:
    """The hook's frames made again from the buckets' gradients: docs/DIST.md's memories
    in torch, one codec instance per bucket, the seeds of state.frame_seed."""

    def __init__(self, state, rank):
        self.state, self.rank = state, rank
        self.mem = {}  # (bucket index, its parameters) -> [codec, residual or v, u]
        self.sent = 0  # this step's frame bytes
        self.steps = []  # per step: sent, [frame bytes per bucket], stats() bytes, saved buckets
        self.buckets = []

    def frame(self, index, params, g):
        st = self.state
        key = (index, params)
        if key not in self.mem:  # a new bucket (DDP rebuilds them after the first step)
            self.mem[key] = [gcx.Codec(st.spec), torch.zeros_like(g), torch.zeros_like(g)]
        codec, r, u = self.mem[key]
        if st.memory == "none":
            x = g
        elif st.memory == "residual":
            x = g + r
        elif st.nesterov:  # DGC appendix B: u = m (u + g), v = v + u + g
            u.add_(g).mul_(float(st.momentum))
            r.add_(u + g)
            x = r.clone()
        else:  # DGC section 3.2 eq. 7: u = m u + g, v = v + u
            u.mul_(float(st.momentum)).add_(g)
            r.add_(u)
            x = r.clone()
        seed = st.frame_seed(len(self.steps), index, self.rank)
        frame, rep = codec.encode(x, seed=seed, return_repr=True)
        if st.memory != "none":
            r.copy_(x - rep)
        if st.memory == "dgc":
            u[rep != 0] = 0  # DGC section 3.3: momentum factor masking
        return x, seed, frame, rep


def recording_hook(rec, bucket):
    """gcx.ddp.hook, with what it was given and what it returned written down"""
    g = bucket.buffer().detach().clone()
    params = tuple(p.data_ptr() for p in bucket.parameters())
    step = len(rec.steps)
    fut = gcx.ddp.hook(rec.state, bucket)
    x, seed, frame, rep = rec.frame(bucket.index(), params, g)
    rec.sent += len(frame)
    sb = gcx.stats(rec.state.spec, x.numpy(), seed=seed)["bytes"]
    saved = (x.numpy().copy(), seed, rep.numpy().copy(), fut.value().numpy().copy()) if step < REF_STEPS else None
    rec.buckets.append((len(frame), sb, saved))
    if bucket.is_last():
        rec.steps.append((rec.sent, rec.buckets))
        rec.sent, rec.buckets = 0, []
    return fut


def flat_params(net):
    return torch.cat([p.detach().reshape(-1) for p in net.parameters()]).numpy().copy()


def worker(rank, store_path, out_dir):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", store=dist.FileStore(store_path, WORLD), rank=rank, world_size=WORLD,
                            timeout=datetime.timedelta(seconds=120))
    x, y = task()
    xr, yr = x[rank::WORLD], y[rank::WORLD]
    dist._DEFAULT_FIRST_BUCKET_BYTES = 8192  # several buckets after DDP's rebuild (the first is 8 KB)
    results = {}
    for run in RUNS:
        net = mlp()
        model = torch.nn.parallel.DistributedDataParallel(net, bucket_cap_mb=16384 / 2 ** 20)
        rec = None
        momentum = 0.9
        if run is not None:
            spec = run.split()[0]
            rec = Reference(gcx.ddp.GcxHookState(spec, nesterov=run.endswith("nesterov")), rank)
            model.register_comm_hook(rec, recording_hook)
            if rec.state.memory == "dgc":
                momentum = 0.0
        opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=momentum)
        with torch.no_grad():
            loss0 = torch.nn.functional.cross_entropy(net(x), y).item()
        t0, per_step = time.time(), []
        for s in range(STEPS):
            at = (s * BATCH) % len(xr)
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(xr[at:at + BATCH]), yr[at:at + BATCH]).backward()
            opt.step()
            if rec is not None:
                per_step.append(dict(rec.state.last_step))
        seconds = time.time() - t0
        with torch.no_grad():
            loss1 = torch.nn.functional.cross_entropy(net(x), y).item()
        r = {"loss0": loss0, "loss1": loss1, "params": flat_params(net), "seconds": seconds}
        if rec is not None:
            st = rec.state
            r.update(memory=st.memory, per_step=per_step, total=dict(st.total), steps=st.steps, ref=rec.steps)
        results[run] = r
        # the DDP model goes before the process group: a DistributedDataParallel destroyed after
        # destroy_process_group() can hang in ProcessGroupGloo's destructor (torch 1.13)
        del model, opt, rec
    torch.save(results, os.path.join(out_dir, "rank%d.pt" % rank))
    dist.destroy_process_group()


def run_workers(out_dir):
    ctx = mp.spawn(worker, args=(os.path.join(out_dir, "store"), out_dir), nprocs=WORLD, join=False)
    deadline = time.time() + 240
    try:
        while not ctx.join(timeout=5):
            if time.time() > deadline:
                for p in ctx.processes:
                    p.kill()
                return "the workers still ran after 240 s (stopped)"
    except Exception as e:  # noqa: BLE001  (a worker's exception, with its traceback)
        return str(e)
    return None


def cli_bytes(spec, x, seed, path):
    """the frame bytes `./gcx stats` reports for x (bits/value x n / 8)"""
    x.astype(np.float32).tofile(path)
    out = subprocess.run([GCX, "stats", "--codec", spec, "--seed", str(seed), path], capture_output=True,
                         text=True, check=True).stdout
    row = [ln for ln in out.splitlines() if ln.startswith(spec.split(":")[0])][0].split()
    return round(float(row[1]) * x.size / 8)


def check_run(run, rs, tmp):
    """the checks of one hook run; rs: both ranks' results"""
    spec = run.split()[0]
    name = spec.split(":")[0]
    st0 = rs[0]["per_step"]
    n = rs[0]["params"].size
    stateless = gcx.Codec(spec).state_save() == b""  # gcx.stats encodes with a new instance: gcomp's first frame
    check(rs[0]["steps"] == STEPS and len(st0) == STEPS and len(rs[0]["ref"]) == STEPS,
          "%s: %d steps counted (%d), %d recorded" % (run, rs[0]["steps"], STEPS, len(rs[0]["ref"])))
    bad_sent = bad_stats = bad_recv = bad_pad = bad_vals = 0
    for t in range(STEPS):
        for k in range(WORLD):
            sent, buckets = rs[k]["ref"][t]
            s = rs[k]["per_step"][t]
            bad_sent += s["sent"] != sent
            bad_stats += stateless and any(fb != sb for fb, sb, _ in buckets)
            bad_vals += s["values"] != n or s["fp32"] != 4 * n
            bad_recv += s["received"] != rs[1 - k]["ref"][t][0]
            pad = sum(max(a[0], b[0]) + 8 for a, b in zip(rs[0]["ref"][t][1], rs[1]["ref"][t][1]))
            bad_pad += s["padded"] != pad
    check(bad_sent == 0, "%s: the bytes sent per step are the reference frames' (%d of %d steps differ)"
          % (run, bad_sent, 2 * STEPS))
    check(bad_stats == 0, "%s: gcx.stats counts the frames' bytes (%d steps differ)" % (run, bad_stats))
    check(bad_recv == 0, "%s: received is the other rank's sent (%d steps differ)" % (run, bad_recv))
    check(bad_pad == 0, "%s: padded is the larger frame of each bucket + 8 (%d steps differ)" % (run, bad_pad))
    check(bad_vals == 0, "%s: values and fp32 bytes are the model's (%d steps differ)" % (run, bad_vals))
    for k in range(WORLD):
        tot = rs[k]["total"]
        want = {key: sum(s[key] for s in rs[k]["per_step"]) for key in ("values", "fp32", "sent", "received")}
        check(all(tot[key] == v for key, v in want.items()) and abs(tot["ratio"] - tot["fp32"] / tot["sent"]) < 1e-9,
              "%s rank %d: total %s is the sum of the steps %s" % (run, k, tot, want))
    # the exchange: what DDP got is the mean of what both ranks' frames represent
    worst, nb = 0.0, []
    for t in range(REF_STEPS):
        b0, b1 = rs[0]["ref"][t][1], rs[1]["ref"][t][1]
        nb.append(len(b0))
        for (_, _, (_, _, rep0, got0)), (_, _, (_, _, rep1, got1)) in zip(b0, b1):
            want = (rep0 + rep1) * np.float32(0.5)
            worst = max(worst, float(np.abs(got0 - want).max()), float(np.abs(got1 - want).max()))
    check(worst == 0.0, "%s: the first %d steps' averages are the mean of both ranks' frames (max diff %g)"
          % (run, REF_STEPS, worst))
    check(nb[0] == 1 and nb[1] > 1, "%s: DDP rebuilt its buckets after the first step (%s buckets)" % (run, nb))
    if name != "fp32":
        _, _, (x0, seed, _, _) = rs[0]["ref"][0][1][0]
        fb = rs[0]["ref"][0][1][0][0]
        cb = cli_bytes(spec, x0, seed, os.path.join(tmp, "x.f32"))
        check(cb == fb, "%s: ./gcx stats counts %d bytes for step 0's bucket, the hook sent %d" % (run, cb, fb))


def readme_example(tmp):
    """README's "Compressing PyTorch DDP gradients" example, run as printed"""
    text = open("README.md").read().split("### Compressing PyTorch DDP gradients")[1]
    path = os.path.join(tmp, "readme_ddp.py")
    with open(path, "w") as f:
        f.write(text.split("```python\n")[1].split("```")[0])
    env = dict(os.environ, PYTHONPATH=os.path.abspath("python"))
    p = subprocess.run([sys.executable, path], capture_output=True, text=True, env=env, timeout=300)
    losses = [float(m) for m in re.findall(r"^\d+ ([0-9.]+) \{", p.stdout, re.M)]
    check(p.returncode == 0 and len(losses) == 4 and losses[-1] < 0.5 * losses[0] and
          re.search(r"^sent \d+ bytes in 200 steps, \d+x less than fp32$", p.stdout, re.M),
          "the README's DDP example runs and learns: exit %d, losses %s\n%s" % (p.returncode, losses,
                                                                               (p.stdout + p.stderr)[-2000:]))
    print("README example: losses %s; %s" % (losses, p.stdout.strip().splitlines()[-1] if p.stdout else ""))


def main():
    # the checks that need no processes
    table = open(os.path.join("docs", "DIST.md")).read()
    for mem in gcx.ddp.MEMORIES:
        row = re.search(r"^\| `%s` \|.*\| ([^|]*) \|$" % mem, table, re.M)
        for codec in re.findall(r"[a-z0-9]+", row.group(1)) if row else []:
            check(gcx.ddp.default_memory(codec) == mem and gcx.ddp.GcxHookState(codec).memory == mem,
                  "%s's default memory is %s (docs/DIST.md), not %s" % (codec, mem, gcx.ddp.default_memory(codec)))
        check(row is not None, "docs/DIST.md's memory table has a row for %s" % mem)
    raises(lambda: gcx.ddp.GcxHookState("nope"), gcx.GcxError, "unknown codec", "nope")
    raises(lambda: gcx.ddp.GcxHookState("sbc", memory="momentum"), ValueError, "unknown memory", "momentum")
    raises(lambda: gcx.ddp.GcxHookState("dgc", momentum=1.5), ValueError, "momentum 1.5", "momentum")

    class Float64Bucket:
        def buffer(self):
            return torch.zeros(10, dtype=torch.float64)

        def index(self):
            return 0

    raises(lambda: gcx.ddp.hook(gcx.ddp.GcxHookState("sbc"), Float64Bucket()), TypeError, "float64 bucket",
           "float32")
    st = gcx.ddp.GcxHookState("terngrad", seed=3)
    seeds = {st.frame_seed(t, b, k) for t in range(50) for b in range(4) for k in range(4)}
    check(len(seeds) == 800, "frame seeds differ across steps, buckets and ranks (%d of 800 distinct)" % len(seeds))

    # the training runs
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    tmp = tempfile.mkdtemp()
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    t0 = time.time()
    err = run_workers(tmp)
    secs = time.time() - t0
    if err:
        check(False, "the workers failed: " + err[-3000:])
        return
    rs = [torch.load(os.path.join(tmp, "rank%d.pt" % k)) for k in range(WORLD)]
    print("%d processes, %d runs of %d steps in %.1f s" % (WORLD, len(RUNS), STEPS, secs))
    base = rs[0][None]
    print("%-26s %-8s %8s %8s %9s %9s %7s %7s" % ("run", "memory", "loss0", "loss", "sent/step", "fp32/step",
                                                   "ratio", "time s"))
    for run in RUNS:
        a, b = rs[0][run], rs[1][run]
        mem = a.get("memory", "-")
        sent = a["total"]["sent"] / STEPS if run else 0
        ratio = a["total"]["ratio"] if run else 1
        print("%-26s %-8s %8.4f %8.4f %9.0f %9.0f %7.1f %7.2f" % (run or "plain DDP", mem, a["loss0"], a["loss1"], sent,
                                                                  4 * a["params"].size, ratio, a["seconds"]))
        check(np.array_equal(a["params"], b["params"]), "%s: both ranks end with the same parameters (max diff %g)"
              % (run, np.abs(a["params"] - b["params"]).max()))
        if run is None:
            check(a["loss1"] < LOSS_DROP * a["loss0"], "plain DDP learns the task (loss %.4f -> %.4f)"
                  % (a["loss0"], a["loss1"]))
            continue
        if run == "fp32":
            d = np.abs(a["params"] - base["params"]).max()
            check(d <= 1e-6, "fp32 through the hook gives plain DDP's parameters (max diff %g)" % d)
            print("fp32 hook vs plain DDP: max parameter difference %g" % d)
        check(a["loss1"] < LOSS_DROP * a["loss0"] and a["loss1"] < LOSS_FACTOR * base["loss1"],
              "%s converges: loss %.4f -> %.4f, plain DDP %.4f (want < %g x initial, < %g x DDP's)"
              % (run, a["loss0"], a["loss1"], base["loss1"], LOSS_DROP, LOSS_FACTOR))
        check_run(run, (a, b), tmp)
    readme_example(tmp)


if __name__ == "__main__":
    main()
    sys.exit(result())
