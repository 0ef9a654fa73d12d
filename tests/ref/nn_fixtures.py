#!/usr/bin/python3
"""Reference values for the CPU image layers and models (tests/test_nn_*.c).

Run from the repository root with Debian's PyTorch:
    /usr/bin/python3 tests/ref/nn_fixtures.py
It writes tests/fixtures/nn_*.bin. Everything is computed in float64 (the
reference is then exact to float32 storage), so a C test's difference is its
own float32 rounding and nothing else.

Fixture file format (little-endian), version 1:
    magic    8 bytes  "GCXNNFX\\0"
    version  u32      1
    count    u32      number of tensors
    count times:
        name_len u16, name (name_len bytes, no terminator)
        dtype    u8   0 = float32, 1 = int32
        ndim     u8   0..8
        dims     i32 x ndim
        data     prod(dims) values of dtype
Tensors are stored in PyTorch's layout (NCHW activations, [Out, In, KH, KW]
weights); the C tests convert to their CNHW layout themselves.

Models whose parameters are too large to store (LeNet's fc1, ResNet-50) use
"hash" weights that C recomputes bit-exactly (hash_uniform below and its twin
in tests/test_nn_fixture.h), and large gradients are stored as two checksums
per tensor: sum(g * h) with h a hash vector in [-1, 1), and sum(|g|).
"""
import os
import struct
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

MAGIC = b"GCXNNFX\0"
VERSION = 1
OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures")

torch.set_default_dtype(torch.float64)


def write_fixture(name, tensors):
    path = os.path.join(OUT_DIR, name)
    with open(path, "wb") as f:
        f.write(MAGIC)
        f.write(struct.pack("<II", VERSION, len(tensors)))
        for key, val in tensors:
            if isinstance(val, torch.Tensor):
                val = val.detach().cpu().numpy()
            val = np.asarray(val)
            if val.dtype.kind in "iu":
                arr, dt = val.astype("<i4"), 1
            else:
                arr, dt = val.astype("<f4"), 0
            kb = key.encode()
            f.write(struct.pack("<H", len(kb)))
            f.write(kb)
            f.write(struct.pack("<BB", dt, arr.ndim))
            f.write(struct.pack("<%di" % arr.ndim, *arr.shape))
            f.write(arr.tobytes())
    print("wrote %s (%d tensors, %d bytes)" % (path, len(tensors), os.path.getsize(path)))


# ---- hash weights: must match tests/test_nn_fixture.h exactly ----
M32 = 0xFFFFFFFF


def hash_uniform(seed, n):
    """float32 values in [-1, 1): a pure function of (seed, index)."""
    i = np.arange(n, dtype=np.uint64)
    x = (i * np.uint64(0x9E3779B1) + np.uint64((seed * 0x85EBCA77) & M32)) & np.uint64(M32)
    x ^= x >> np.uint64(16)
    x = (x * np.uint64(0x7FEB352D)) & np.uint64(M32)
    x ^= x >> np.uint64(15)
    x = (x * np.uint64(0x846CA68B)) & np.uint64(M32)
    x ^= x >> np.uint64(16)
    # (x >> 8) / 2^23 - 1: exact in float32
    return ((x >> np.uint64(8)).astype(np.float64) / 8388608.0 - 1.0).astype(np.float32)


def hash_fill(model):
    """Parameter t (state_dict order of named_parameters) gets hash_uniform(t)
    scaled: weights by float32(1/sqrt(fan_in)), bn weight 1 + v/4 (v/4 for a
    bottleneck's bn3), bn/other bias v/8. All products are single float32 operations, as in C."""
    for t, (name, p) in enumerate(model.named_parameters()):
        v = hash_uniform(t, p.numel())
        if p.dim() > 1:
            fan_in = p[0].numel()
            s = np.float32(1.0 / np.sqrt(float(fan_in)))
            w = (v * s).astype(np.float32)
        elif name.endswith("bn3.weight"):
            # last BN of a bottleneck: small gamma keeps the 50-layer network
            # well conditioned (as zero_init_residual), so float32 rounding
            # is not amplified
            w = (v * np.float32(0.25)).astype(np.float32)
        elif is_bn_name(name) and name.endswith(".weight"):
            w = (np.float32(1.0) + v * np.float32(0.25)).astype(np.float32)
        else:
            w = (v * np.float32(0.125)).astype(np.float32)
        with torch.no_grad():
            p.copy_(torch.from_numpy(w.astype(np.float64)).view_as(p))


def is_bn_name(name):
    parts = name.split(".")
    return any(x.startswith("bn") for x in parts) or "downsample.1" in name


def checksums(name, g, t):
    """[sum(g*h), sum(|g|)] with h = hash_uniform(1000 + t)."""
    h = torch.from_numpy(hash_uniform(1000 + t, g.numel()).astype(np.float64))
    gf = g.flatten()
    return [(float((gf * h).sum()), float(gf.abs().sum()))]


def rnd(*shape, scale=1.0, shift=0.0):
    return torch.randn(*shape) * scale + shift


# ---------------------------------------------------------------- layers ----
def layers():
    torch.manual_seed(1)
    T = []
    # conv2d: (N, C, H, W, OC, KH, KW, stride, pad, bias)
    convs = [
        (2, 3, 7, 7, 4, 3, 3, 1, 1, 0),
        (2, 3, 8, 8, 5, 3, 3, 2, 1, 0),
        (3, 4, 5, 5, 6, 1, 1, 1, 0, 0),
        (2, 4, 7, 7, 3, 1, 1, 2, 0, 0),
        (2, 2, 9, 9, 3, 5, 5, 1, 0, 1),
        (2, 3, 11, 11, 4, 7, 7, 2, 3, 0),
        (2, 3, 6, 7, 2, 3, 2, 2, 1, 1),
        (1, 2, 6, 6, 3, 2, 2, 2, 0, 1),
        # 3x3 stride 1 pad 1 with H*W a multiple of 16: the direct AVX-512 kernels
        (2, 5, 8, 8, 7, 3, 3, 1, 1, 0),
        (2, 3, 8, 6, 9, 3, 3, 1, 1, 1),
        (3, 16, 4, 4, 16, 3, 3, 1, 1, 0),
        (1, 4, 16, 16, 11, 3, 3, 1, 1, 0),
    ]
    T.append(("conv.count", np.array([len(convs)], dtype=np.int32)))
    for i, (N, C, H, W, OC, KH, KW, st, pad, bias) in enumerate(convs):
        p = "conv%d." % i
        x = rnd(N, C, H, W).requires_grad_()
        w = rnd(OC, C, KH, KW, scale=0.3).requires_grad_()
        b = rnd(OC).requires_grad_() if bias else None
        y = F.conv2d(x, w, b, stride=st, padding=pad)
        dy = rnd(*y.shape)
        y.backward(dy)
        T += [(p + "shape", np.array([N, C, H, W, OC, KH, KW, st, pad, bias], dtype=np.int32)),
              (p + "x", x), (p + "w", w), (p + "y", y), (p + "dy", dy), (p + "dx", x.grad), (p + "dw", w.grad)]
        if bias:
            T += [(p + "b", b), (p + "db", b.grad)]

    # batchnorm2d: train (with running stats update), eval; plain and fused (res + relu)
    N, C, H, W = 4, 3, 5, 5
    x = rnd(N, C, H, W, scale=2.0, shift=3.0).requires_grad_()
    g = rnd(C, scale=0.5, shift=1.0).requires_grad_()
    b = rnd(C).requires_grad_()
    rm0, rv0 = rnd(C), rnd(C).abs() + 0.5
    rm, rv = rm0.clone(), rv0.clone()
    y = F.batch_norm(x, rm, rv, g, b, training=True, momentum=0.1, eps=1e-5)
    dy = rnd(*y.shape)
    y.backward(dy)
    ye = F.batch_norm(x, rm, rv, g, b, training=False, momentum=0.1, eps=1e-5)
    T += [("bn.shape", np.array([N, C, H, W], dtype=np.int32)), ("bn.x", x), ("bn.gamma", g), ("bn.beta", b),
          ("bn.rm0", rm0), ("bn.rv0", rv0), ("bn.y", y), ("bn.rm", rm), ("bn.rv", rv), ("bn.dy", dy),
          ("bn.dx", x.grad), ("bn.dgamma", g.grad), ("bn.dbeta", b.grad), ("bn.yeval", ye)]
    # fused: relu(bn(x) + r)
    x.grad = g.grad = b.grad = None
    r = rnd(N, C, H, W).requires_grad_()
    rm, rv = rm0.clone(), rv0.clone()
    y = F.relu(F.batch_norm(x, rm, rv, g, b, training=True, momentum=0.1, eps=1e-5) + r)
    dy = rnd(*y.shape)
    y.backward(dy)
    ye = F.relu(F.batch_norm(x, rm, rv, g, b, training=False, momentum=0.1, eps=1e-5) + r)
    T += [("bnf.r", r), ("bnf.y", y), ("bnf.dy", dy), ("bnf.dx", x.grad), ("bnf.dr", r.grad),
          ("bnf.dgamma", g.grad), ("bnf.dbeta", b.grad), ("bnf.yeval", ye)]

    # train-mode statistics of data far from zero (mean 1000, std 0.5): the
    # one-pass shifted sums must not lose the variance to cancellation
    xb = rnd(N, C, H, W, scale=0.5, shift=1000.0)
    rm, rv = rm0.clone(), rv0.clone()
    yb = F.batch_norm(xb, rm, rv, g.detach(), b.detach(), training=True, momentum=0.1, eps=1e-5)
    T += [("bnbig.x", xb), ("bnbig.y", yb), ("bnbig.rm", rm), ("bnbig.rv", rv)]

    # relu + add
    x = rnd(3, 17).requires_grad_()
    y = F.relu(x)
    dy = rnd(3, 17)
    y.backward(dy)
    T += [("relu.x", x), ("relu.y", y), ("relu.dy", dy), ("relu.dx", x.grad)]

    # max pool: (N, C, H, W, K, stride, pad)
    pools = [(2, 3, 8, 8, 2, 2, 0), (2, 3, 9, 9, 3, 2, 1), (1, 2, 7, 5, 3, 1, 1)]
    T.append(("maxpool.count", np.array([len(pools)], dtype=np.int32)))
    for i, (N, C, H, W, K, st, pad) in enumerate(pools):
        p = "maxpool%d." % i
        x = rnd(N, C, H, W).requires_grad_()
        y = F.max_pool2d(x, K, st, pad)
        dy = rnd(*y.shape)
        y.backward(dy)
        T += [(p + "shape", np.array([N, C, H, W, K, st, pad], dtype=np.int32)), (p + "x", x), (p + "y", y),
              (p + "dy", dy), (p + "dx", x.grad)]

    # global average pool
    x = rnd(3, 4, 5, 6).requires_grad_()
    y = F.adaptive_avg_pool2d(x, 1).flatten(1)
    dy = rnd(*y.shape)
    y.backward(dy)
    T += [("avgpool.shape", np.array([3, 4, 5, 6], dtype=np.int32)), ("avgpool.x", x), ("avgpool.y", y),
          ("avgpool.dy", dy), ("avgpool.dx", x.grad)]

    # linear
    N, IN, OUT = 5, 7, 3
    x = rnd(N, IN).requires_grad_()
    w = rnd(OUT, IN, scale=0.4).requires_grad_()
    b = rnd(OUT).requires_grad_()
    y = F.linear(x, w, b)
    dy = rnd(N, OUT)
    y.backward(dy)
    T += [("linear.shape", np.array([N, IN, OUT], dtype=np.int32)), ("linear.x", x), ("linear.w", w),
          ("linear.b", b), ("linear.y", y), ("linear.dy", dy), ("linear.dx", x.grad), ("linear.dw", w.grad),
          ("linear.db", b.grad)]

    # softmax cross-entropy (mean)
    N, V = 6, 5
    z = rnd(N, V, scale=2.0).requires_grad_()
    t = torch.randint(0, V, (N,))
    t[0] = int(z[0].argmax())  # at least one hit
    loss = F.cross_entropy(z, t)
    loss.backward()
    correct = int((z.argmax(1) == t).sum())
    T += [("ce.shape", np.array([N, V], dtype=np.int32)), ("ce.z", z), ("ce.t", t.numpy().astype(np.int32)),
          ("ce.loss", loss.reshape(1)), ("ce.probs", F.softmax(z, 1)), ("ce.dz", z.grad),
          ("ce.correct", np.array([correct], dtype=np.int32))]
    write_fixture("nn_layers.bin", T)

# ---------------------------------------------------------------- models ----
class BasicBlock(nn.Module):
    """He et al. 2016 section 4.2 basic block; shortcut 'A' (subsample + zero-pad
    channels, (planes - in)/2 each side) or 'B' (1x1 conv + BN, torchvision names)."""

    def __init__(self, cin, planes, stride, option):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.option, self.stride, self.cin, self.planes = option, stride, cin, planes
        self.need = stride != 1 or cin != planes
        if self.need and option == "B":
            self.downsample = nn.Sequential(nn.Conv2d(cin, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def shortcut(self, x):
        if not self.need:
            return x
        if self.option == "B":
            return self.downsample(x)
        lo = (self.planes - self.cin) // 2
        hi = self.planes - self.cin - lo
        return F.pad(x[:, :, ::self.stride, ::self.stride], (0, 0, 0, 0, lo, hi))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNetCifar(nn.Module):
    def __init__(self, depth, width=16, num_classes=10, option="A", in_ch=3):
        super().__init__()
        n = (depth - 2) // 6
        self.conv1 = nn.Conv2d(in_ch, width, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        cin = width
        for s in range(3):
            blocks = []
            for i in range(n):
                blocks.append(BasicBlock(cin, width << s, 2 if (s > 0 and i == 0) else 1, option))
                cin = width << s
            setattr(self, "layer%d" % (s + 1), nn.Sequential(*blocks))
        self.fc = nn.Linear(cin, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class Bottleneck(nn.Module):
    """torchvision ResNet v1.5 bottleneck: stride on the 3x3 conv."""

    def __init__(self, cin, w, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, w, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(w)
        self.conv2 = nn.Conv2d(w, w, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(w)
        self.conv3 = nn.Conv2d(w, 4 * w, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(4 * w)
        self.downsample = None
        if stride != 1 or cin != 4 * w:
            self.downsample = nn.Sequential(nn.Conv2d(cin, 4 * w, 1, stride, bias=False), nn.BatchNorm2d(4 * w))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + (self.downsample(x) if self.downsample is not None else x))


class ResNet50(nn.Module):
    def __init__(self, num_classes=1000, width=64, in_ch=3):
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, width, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        cin = width
        for s, nb in enumerate([3, 4, 6, 3]):
            w = width << s
            blocks = []
            for i in range(nb):
                blocks.append(Bottleneck(cin, w, 2 if (s > 0 and i == 0) else 1))
                cin = 4 * w
            setattr(self, "layer%d" % (s + 1), nn.Sequential(*blocks))
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 3, 2, 1)
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class LeNet5Caffe(nn.Module):
    """Caffe's MNIST LeNet (SBC's LeNet5-Caffe): conv5x5(20) - maxpool2 -
    conv5x5(50) - maxpool2 - fc500 - ReLU - fc10, convolutions with bias."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 20, 5)
        self.conv2 = nn.Conv2d(20, 50, 5)
        self.fc1 = nn.Linear(800, 500)
        self.fc2 = nn.Linear(500, 10)

    def forward(self, x):
        x = F.max_pool2d(self.conv1(x), 2)
        x = F.max_pool2d(self.conv2(x), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def nparams(m):
    return sum(p.numel() for p in m.parameters())


def bn_states(model, keep=None):
    out = []
    for name, buf in model.named_buffers():
        if keep and not any(name.startswith(k) for k in keep):
            continue
        if name.endswith("running_mean") or name.endswith("running_var"):
            out.append(("state." + name, buf))
    return out


def train_step_tensors(model, x, y, full_grads=True, checksum=False, big=20000, keep_states=None):
    """forward in train mode, backward of the mean cross-entropy; then an eval
    forward with the updated running statistics"""
    model.train()
    model.zero_grad()
    logits = model(x)
    loss = F.cross_entropy(logits, y)
    loss.backward()
    T = [("logits", logits), ("loss", loss.reshape(1)),
         ("correct", np.array([int((logits.argmax(1) == y).sum())], dtype=np.int32))]
    for t, (name, p) in enumerate(model.named_parameters()):
        if full_grads and (not checksum or p.numel() <= big):
            T.append(("grad." + name, p.grad))
        if checksum:
            T.append(("gsum." + name, np.array(checksums(name, p.grad, t)[0])))
    T += bn_states(model, keep_states)
    model.eval()
    with torch.no_grad():
        T.append(("eval_logits", model(x)))
    return T


def resnet_cifar_fixture(fname, option):
    torch.manual_seed(2 if option == "A" else 3)
    depth, width, N, H, W = 8, 8, 4, 16, 16
    model = ResNetCifar(depth, width, 10, option)
    # perturb BN affine parameters away from 1/0 so the test sees gamma and beta
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1 and is_bn_name(name):
                p.add_(torch.randn_like(p) * (0.2 if name.endswith("weight") else 0.1))
    x = torch.randn(N, 3, H, W)
    y = torch.randint(0, 10, (N,))
    T = [("cfg", np.array([depth, width, 10, 3, H, W, 0 if option == "A" else 1, N], dtype=np.int32)), ("x", x),
         ("y", y.numpy().astype(np.int32))]
    T += [("param." + n, p) for n, p in model.named_parameters()]
    T += train_step_tensors(model, x, y)
    # parameter counts of the full-size models
    T += [("count.resnet20A", np.array([nparams(ResNetCifar(20))], dtype=np.int32)),
          ("count.resnet110A", np.array([nparams(ResNetCifar(110))], dtype=np.int32)),
          ("count.resnet20B", np.array([nparams(ResNetCifar(20, option="B"))], dtype=np.int32)),
          ("count.resnet56A", np.array([nparams(ResNetCifar(56))], dtype=np.int32))]
    write_fixture(fname, T)


def resnet_a():
    resnet_cifar_fixture("nn_resnet8a.bin", "A")


def resnet_b():
    resnet_cifar_fixture("nn_resnet8b.bin", "B")


def resnet50():
    torch.manual_seed(4)
    N, H, W, classes = 2, 64, 64, 10
    model = ResNet50(classes)
    hash_fill(model)
    # input from the hash too (seed 999), not stored
    x = torch.from_numpy(hash_uniform(999, N * 3 * H * W).astype(np.float64)).view(N, 3, H, W)
    y = torch.randint(0, classes, (N,))
    T = [("cfg", np.array([classes, 3, H, W, 64, N], dtype=np.int32)), ("y", y.numpy().astype(np.int32)),
         ("count.resnet50", np.array([nparams(ResNet50(1000))], dtype=np.int32))]
    T += train_step_tensors(model, x, y, full_grads=True, checksum=True, big=64,
                            keep_states=["bn1.", "layer1.0.", "layer4.0.downsample"])
    write_fixture("nn_resnet50.bin", T)


def lenet():
    torch.manual_seed(5)
    N = 3
    model = LeNet5Caffe()
    hash_fill(model)
    x = torch.rand(N, 1, 28, 28)
    y = torch.randint(0, 10, (N,))
    T = [("x", x), ("y", y.numpy().astype(np.int32)), ("count.lenet", np.array([nparams(model)], dtype=np.int32))]
    T += train_step_tensors(model, x, y, full_grads=True, checksum=True, big=30000)
    write_fixture("nn_lenet.bin", T)


if __name__ == "__main__":
    os.makedirs(OUT_DIR, exist_ok=True)
    which = sys.argv[1:] or ["layers", "resnet_a", "resnet_b", "resnet50", "lenet"]
    for w in which:
        globals()[w]()
