#!/usr/bin/env python3
"""Training throughput of the CIFAR ResNet in PyTorch eager on the GPU, the
reference for bench/resnet_gpu.c: the same model (torchvision-style CIFAR
ResNet, option A shortcuts, kaiming_normal fan_out init), batch, step
(forward, backward, SGD with momentum 0.9, lr 0.01, weight decay 1e-4) and
fixed random batch; cudnn.benchmark on; strict fp32 (TF32 off for cuDNN and
cuBLAS) unless --tf32. Every step ends with torch.cuda.synchronize() so that
its wall time is the whole step.

    python3 bench/resnet_gpu_torch.py --depth 20 --batch 128 --steps 50

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
    ap.add_argument("--depth", type=int, default=20)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--tf32", action="store_true", help="allow TF32 tensor cores (default: strict fp32)")
    ap.add_argument("--channels-last", action="store_true", help="use torch.channels_last memory format")
    ap.add_argument("--no-benchmark", action="store_true",
                    help="cudnn.benchmark off: no timed search (compare with gcx --heuristic)")
    args = ap.parse_args()
    if args.depth < 8 or (args.depth - 2) % 6 != 0 or args.batch < 1 or args.steps < 1 or args.warmup < 0:
        ap.error("depth must be 6n+2 (>= 8), batch and steps >= 1, warmup >= 0")
    if not torch.cuda.is_available():
        print("torch %s: no CUDA device available" % torch.__version__, file=sys.stderr)
        sys.exit(1)
    dev = torch.device("cuda")
    torch.backends.cudnn.benchmark = not args.no_benchmark
    torch.backends.cudnn.allow_tf32 = args.tf32
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.manual_seed(0)
    model = ResNetCifar(args.depth).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    x = torch.randn(args.batch, 3, 32, 32, device=dev)
    y = torch.randint(0, 10, (args.batch,), device=dev)
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    model.train()
    times = []
    loss = None
    torch.cuda.synchronize()
    for step in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        if step >= args.warmup:
            times.append(dt)
    best, med = min(times), statistics.median(times)
    print("torch %s, ResNet-%d, batch %d, %s, fp32%s: step best %.2f ms, median %.2f ms, loss %.3f"
          % (torch.__version__, args.depth, args.batch, torch.cuda.get_device_name(dev),
             " (TF32 allowed)" if args.tf32 else " (no TF32)", best * 1e3, med * 1e3, loss.item()))
    print("torch images/s: %.1f (median %.1f)" % (args.batch / best, args.batch / med))


if __name__ == "__main__":
    main()
