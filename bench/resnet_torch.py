#!/usr/bin/python3
"""Training throughput of the CIFAR ResNet in PyTorch eager, the reference for
bench/resnet_cpu.c (--device cpu, the default) and bench/resnet_gpu.c
(--device cuda): the same model (torchvision-style CIFAR ResNet, option A
shortcuts, kaiming_normal fan_out init), batch, step (forward, backward, SGD
with momentum 0.9, lr 0.01, weight decay 1e-4) and fixed random batch.

On the GPU: cudnn.benchmark on unless --no-benchmark, strict fp32 (TF32 off for
cuDNN and cuBLAS) unless --tf32, and every step ends with
torch.cuda.synchronize() so that its wall time is the whole step. On the CPU:
torch.set_num_threads(--threads), and the CPU time of the best step is printed
too.

    /usr/bin/python3 bench/resnet_torch.py --depth 20 --batch 128 --threads 2 --steps 20
    python3 bench/resnet_torch.py --device cuda --depth 56 --batch 128 --steps 50 [--tf32]

Prints per-step times and a final line "torch images/s: <best> (median <m>)".
"""
import argparse
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class BasicBlock(nn.Module):
    def __init__(self, cin, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.need = stride != 1 or cin != planes
        self.lo = (planes - cin) // 2
        self.hi = planes - cin - self.lo
        self.stride = stride

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        sc = x
        if self.need:  # option A: subsample + zero-pad channels
            sc = F.pad(x[:, :, ::self.stride, ::self.stride], (0, 0, 0, 0, self.lo, self.hi))
        return F.relu(out + sc)


class ResNetCifar(nn.Module):
    def __init__(self, depth, width=16, num_classes=10):
        super().__init__()
        assert depth >= 8 and (depth - 2) % 6 == 0, "depth must be 6n+2"
        n = (depth - 2) // 6
        self.conv1 = nn.Conv2d(3, width, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        layers, cin = [], width
        for s in range(3):
            for i in range(n):
                layers.append(BasicBlock(cin, width << s, 2 if (s > 0 and i == 0) else 1))
                cin = width << s
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        x = self.layers(F.relu(self.bn1(self.conv1(x))))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--depth", type=int, default=20)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2, help="CPU threads (--device cpu)")
    ap.add_argument("--steps", type=int, default=None, help="timed steps (default: 20 on the CPU, 50 on the GPU)")
    ap.add_argument("--warmup", type=int, default=None, help="untimed first steps (default: 3 on the CPU, 5 on the GPU)")
    ap.add_argument("--channels-last", action="store_true", help="use torch.channels_last memory format")
    ap.add_argument("--tf32", action="store_true", help="allow TF32 tensor cores (--device cuda; default: strict fp32)")
    ap.add_argument("--no-benchmark", action="store_true",
                    help="cudnn.benchmark off (--device cuda): no timed search (compare with gcx --heuristic)")
    args = ap.parse_args()
    gpu = args.device == "cuda"
    if args.steps is None:
        args.steps = 50 if gpu else 20
    if args.warmup is None:
        args.warmup = 5 if gpu else 3
    if args.depth < 8 or (args.depth - 2) % 6 != 0 or args.batch < 1 or args.steps < 1 or args.warmup < 0 \
            or args.threads < 1:
        ap.error("depth must be 6n+2 (>= 8), batch, steps and threads >= 1, warmup >= 0")
    if gpu:
        if not torch.cuda.is_available():
            print("torch %s: no CUDA device available" % torch.__version__, file=sys.stderr)
            sys.exit(1)
        torch.backends.cudnn.benchmark = not args.no_benchmark
        torch.backends.cudnn.allow_tf32 = args.tf32
        torch.backends.cuda.matmul.allow_tf32 = args.tf32
        sync = torch.cuda.synchronize
    else:
        torch.set_num_threads(args.threads)
        sync = lambda: None  # noqa: E731 (CPU ops are synchronous)
    dev = torch.device(args.device)
    torch.manual_seed(0)
    model = ResNetCifar(args.depth).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    x = torch.randn(args.batch, 3, 32, 32, device=dev)
    y = torch.randint(0, 10, (args.batch,), device=dev)
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    model.train()
    times, cpu = [], []
    loss = None
    sync()
    for step in range(args.warmup + args.steps):
        t0, c0 = time.perf_counter(), time.process_time()
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        sync()
        dt = time.perf_counter() - t0
        if step >= args.warmup:
            times.append(dt)
            cpu.append(time.process_time() - c0)
    best, med = min(times), statistics.median(times)
    if gpu:
        where = "%s, fp32%s" % (torch.cuda.get_device_name(dev), " (TF32 allowed)" if args.tf32 else " (no TF32)")
        extra = ""
    else:
        where = "%d threads" % args.threads
        extra = " (CPU time best %.1f ms)" % (min(cpu) * 1e3)
    print("torch %s, ResNet-%d, batch %d, %s: step best %.2f ms, median %.2f ms%s, loss %.3f"
          % (torch.__version__, args.depth, args.batch, where, best * 1e3, med * 1e3, extra, loss.item()))
    print("torch images/s: %.1f (median %.1f)" % (args.batch / best, args.batch / med))


if __name__ == "__main__":
    main()
