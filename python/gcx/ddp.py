"""gcx.ddp: a PyTorch DistributedDataParallel communication hook that compresses every
gradient bucket with a gcx codec, with error feedback, and exchanges the frames.

    import torch, torch.distributed as dist, gcx.ddp
    dist.init_process_group("gloo")
    model = torch.nn.parallel.DistributedDataParallel(net)
    state = gcx.ddp.GcxHookState("sbc:p=0.01")  # any spec of gcx.codecs()
    model.register_comm_hook(state, gcx.ddp.hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for x, y in loader:
        opt.zero_grad(); loss_fn(model(x), y).backward(); opt.step()
        print(state.last_step["sent"], state.total["ratio"])
    del model                                   # before destroy_process_group (see Limits)
    dist.destroy_process_group()

Per bucket and step, on every rank (the allgather topology of dist/exchange.c, docs/DIST.md):

 1. memory in: x = g (memory "none"), x = g + r ("residual"), or the momentum
    correction of Deep Gradient Compression ("dgc"; Lin et al., ICLR 2018: DGC section
    3.2, eq. 7): u = m u + g, v = v + u, x = v (Nesterov, DGC appendix B, eq. 10:
    u = m (u + g), v = v + u + g);
 2. the codec encodes x into one frame (seed from step, bucket and rank);
 3. memory out: r = x - repr, where repr is what the frame represents; under "dgc" also
    u = 0 where the frame sent a value (momentum factor masking, DGC section 3.3);
 4. the frames' sizes, then the frames padded to the largest, go through
    torch.distributed.all_gather;
 5. every rank decodes every frame in rank order (one decoder per sender, so gcomp's
    stateful frames decode), sums them and multiplies by 1/N: every rank gets the same
    average, which DDP writes into the gradients.

The memory defaults to the one gcx's trainers give the codec (dist/exchange.c,
default_memory): "residual" for int8, 3lc, onebit, topk and sbc, "dgc" for dgc, "none" for
the rest (fp32, fp16, terngrad, stoch3, gcomp). Under "dgc" the momentum lives in the
memory: train with plain SGD (torch.optim.SGD with momentum=0), as the trainers do.

What differs from gcx's own exchange (dist/exchange.c):
 - a frame holds a whole DDP bucket (several tensors, about 25 MB by default), not one
   tensor: a sparsifier selects over the bucket, and no tensor is left uncompressed (the
   trainers send batch-norm tensors and biases as fp32); smaller buckets
   (DistributedDataParallel(bucket_cap_mb=...)) come closer;
 - every codec goes over allgather: 3LC's and TernGrad's parameter server (compressed pull,
   scalar sharing) and GCOMP's ring with its optimizer-aware truncation metric are not
   run; gcomp truncates without the metric, as `gcx encode` does;
 - gradients every step: SBC's communication delay (weight deltas after n local steps)
   and its momentum masking of the optimizer are not run (sbc's p defaults to 0.001,
   the SBC (1) configuration);
 - DGC's local gradient clipping (section 3.2), its warm-up of the density (section 3.3)
   and the trainers' folding of weight decay into the gradient before the momentum
   correction are not run: the hook sees the bucket alone (an optimizer's weight_decay
   acts on the averaged gradient, after the exchange);
 - momentum factor masking takes "sent" to be where repr is nonzero, exactly the values
   the sparsifiers dgc, topk and sbc select (never zeros); other codecs report no
   selection and mask nothing, as in the trainers.

Statistics (this rank, bytes): state.last_step for the last completed step and state.total
over all steps, dicts with
    values    gradient values exchanged
    fp32      4 * values: the uncompressed gradient
    sent      the bytes of this rank's frames, headers included (what `gcx stats` counts
              for the same tensors)
    received  the bytes of the other ranks' frames
    padded    what this rank put into the collectives: each bucket's frame padded to the
              largest of the ranks' frames of that bucket, plus 8 bytes for its size
    ratio     fp32 / sent
and state.steps, the steps completed (a step ends with DDP's last bucket).

Limits: the codecs run on the host, so a GPU bucket is copied to the host, encoded,
decoded and the average copied back; the sizes and frames cross the collectives on the
bucket's device, so that an NCCL group can carry them (this path has not run on a GPU
yet). Float32 buckets only (a bucket of another dtype raises TypeError). Delete the
DistributedDataParallel model before dist.destroy_process_group(): in torch 1.13 a model
destroyed after it can hang the process, its gloo group's destructor waiting for a worker
thread that waits for the GIL (seen in about one run in three with this hook; none with the
model deleted first).
"""

import numpy as np
import torch
import torch.distributed as dist

from . import Codec

__all__ = ["GcxHookState", "hook", "default_memory"]

MEMORIES = ("none", "residual", "dgc")
_RESIDUAL_CODECS = ("int8", "3lc", "onebit", "topk", "sbc")
_SELECTING_CODECS = ("dgc", "topk", "sbc")  # those whose frames carry a selection (momentum masking)
_STAT_KEYS = ("values", "fp32", "sent", "received", "padded")


def default_memory(codec_name):
    """The memory gcx's trainers give codec_name (dist/exchange.c, default_memory)."""
    if codec_name == "dgc":
        return "dgc"
    return "residual" if codec_name in _RESIDUAL_CODECS else "none"


def _stats():
    d = dict.fromkeys(_STAT_KEYS, 0)
    d["ratio"] = 0.0
    return d


class _Bucket:
    """What the hook keeps for one DDP bucket: its memory and codec instances."""

    def __init__(self, spec, key, n, world, memory):
        self.key = key
        self.enc = Codec(spec)
        self.dec = [Codec(spec) for _ in range(world)]  # one per sender: stateful codecs decode in order
        self.resid = np.zeros(n, np.float32) if memory != "none" else None  # r, or DGC's v
        self.vel = np.zeros(n, np.float32) if memory == "dgc" else None  # DGC's u


class GcxHookState:
    """The state of gcx.ddp.hook: the codec, the memories of every bucket, the statistics.

    codec_spec  a gcx codec spec, e.g. "sbc:p=0.01", "3lc", "dgc:density=0.001"
                (gcx.GcxError for a bad one)
    memory      "auto" (the codec's default, see default_memory), "none", "residual" or "dgc"
    momentum    m of DGC's momentum correction (memory "dgc"; the trainers pass --momentum, 0.9)
    nesterov    DGC's Nesterov momentum correction (appendix B)
    seed        the base of the frames' seeds: bucket b of step t on rank k is encoded with
                a seed fixed by (seed, t, b, k), so runs repeat (terngrad, stoch3 draw from it)
    process_group  the group to exchange over (None: the default group)
    """

    def __init__(self, codec_spec, memory="auto", momentum=0.9, nesterov=False, seed=0, process_group=None):
        self.name = Codec(codec_spec).name  # checks the spec
        self.spec = codec_spec
        if memory == "auto":
            memory = default_memory(self.name)
        if memory not in MEMORIES:
            raise ValueError("gcx.ddp: memory must be 'auto', 'none', 'residual' or 'dgc', not %r" % (memory,))
        if not 0 <= momentum < 1:
            raise ValueError("gcx.ddp: momentum must be in [0, 1), got %r" % (momentum,))
        self.memory = memory
        self.momentum = np.float32(momentum)
        self.nesterov = bool(nesterov)
        self.seed = int(seed)
        self.process_group = process_group
        self.buckets = {}  # bucket index -> _Bucket
        self.steps = 0
        self.last_step = _stats()
        self.total = _stats()
        self._step = _stats()

    def __repr__(self):
        return "gcx.ddp.GcxHookState(%r, memory=%r)" % (self.spec, self.memory)

    def frame_seed(self, step, index, rank):
        """The seed of bucket index's frame at step on rank (below 2^64)."""
        return (((self.seed * 1000003 + step) * 65537 + index) * 257 + rank) % 2 ** 64

    def _bucket(self, index, key, n, world):
        # DDP rebuilds its buckets once, after the first iteration, in the order the
        # gradients arrived: a bucket index may then hold other parameters. The key
        # (the parameters' storage) tells; a changed bucket starts with empty memories
        # and fresh codecs, on every rank at the same step.
        b = self.buckets.get(index)
        if b is None or b.key != key:
            b = self.buckets[index] = _Bucket(self.spec, key, n, world, self.memory)
        return b

    def _memory_in(self, b, g):
        """x to encode from the gradient g (dist/exchange.c, memory_in)"""
        if self.memory == "none":
            return g
        if self.memory == "residual":
            return g + b.resid
        u, v, m = b.vel, b.resid, self.momentum
        if self.nesterov:  # DGC appendix B, eq. 10
            u[:] = m * (u + g)
            v += u + g
        else:  # DGC section 3.2, eq. 7
            u[:] = m * u + g
            v += u
        return v

    def _memory_out(self, b, x, repr_):
        """keep what the frame did not represent (dist/exchange.c, memory_out)"""
        if self.memory == "none":
            return
        b.resid[:] = x - repr_
        if self.memory == "dgc" and self.name in _SELECTING_CODECS:
            b.vel[repr_ != 0] = 0.0  # DGC section 3.3, momentum factor masking

    def _count(self, sent, received, n, padded, last):
        s = self._step
        s["values"] += n
        s["fp32"] += 4 * n
        s["sent"] += sent
        s["received"] += received
        s["padded"] += padded
        if last:
            for k in _STAT_KEYS:
                self.total[k] += s[k]
            for d in (s, self.total):
                d["ratio"] = d["fp32"] / d["sent"] if d["sent"] else 0.0
            self.last_step, self._step = s, _stats()
            self.steps += 1


def _exchange(frame, device, group, world):
    """every rank's frame, in rank order: all_gather of the sizes, then of the frames
    padded to the largest (on device, so NCCL takes them too)"""
    size = torch.tensor([len(frame)], dtype=torch.int64, device=device)
    sizes = [torch.empty_like(size) for _ in range(world)]
    dist.all_gather(sizes, size, group=group)
    sizes = [int(s.item()) for s in sizes]
    pad = max(sizes)
    buf = torch.zeros(pad, dtype=torch.uint8)
    buf[:len(frame)] = torch.frombuffer(bytearray(frame), dtype=torch.uint8)
    buf = buf.to(device)
    bufs = [torch.empty_like(buf) for _ in range(world)]
    dist.all_gather(bufs, buf, group=group)
    frames = [t.cpu().numpy()[:s].tobytes() for t, s in zip(bufs, sizes)]
    return frames, pad + 8


def hook(state, bucket):
    """The communication hook (DistributedDataParallel.register_comm_hook(state, hook)):
    compresses bucket's gradient with state's codec and memory, exchanges the frames and
    returns a completed future holding the average over the ranks (see the module)."""
    grad = bucket.buffer()
    if grad.dtype != torch.float32:
        raise TypeError("gcx.ddp: bucket %d holds %s gradients; the codecs take float32 (train the model in "
                        "float32, or register another hook for this model)" % (bucket.index(), grad.dtype))
    group = state.process_group
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    g = grad.detach().cpu().numpy().reshape(-1)
    key = tuple(p.data_ptr() for p in bucket.parameters())
    b = state._bucket(bucket.index(), key, g.size, world)

    x = state._memory_in(b, g)
    frame, repr_ = b.enc.encode(x, seed=state.frame_seed(state.steps, bucket.index(), rank), return_repr=True)
    state._memory_out(b, x, repr_)
    frames, padded = _exchange(frame, grad.device, group, world)

    avg = np.zeros(g.size, np.float32)
    for dec, f in zip(b.dec, frames):
        dec.decode_acc(f, avg)
    avg *= np.float32(1) / np.float32(world)  # as dist/exchange.c: the sum times 1.0f / N
    state._count(len(frame), sum(len(f) for k, f in enumerate(frames) if k != rank), g.size, padded,
                 bucket.is_last())

    out = torch.from_numpy(avg).reshape(grad.shape).to(grad.device)
    fut = torch.futures.Future(devices=[grad.device] if grad.device.type == "cuda" else None)
    fut.set_result(out)
    return fut
