#!/usr/bin/python3
"""PyTorch reference for train_lenet's default run: LeNet5-Caffe on MNIST, Adam
lr 0.001, 2000 steps of a global batch of 512 (4 workers x 128 averaged is one
batch of 512), PyTorch's default initialization, the same normalization.
Prints the test accuracy, to compare with ./train_lenet --steps 2000.

    DATA_DIR=../shared/data /usr/bin/python3 dev/lenet_torch.py [steps] [threads]
"""
import gzip
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def idx(path):
    for p in (path, path + ".gz"):
        if os.path.exists(p):
            data = (gzip.open if p.endswith(".gz") else open)(p, "rb").read()
            ndim = data[3]
            dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
            return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)
    raise SystemExit("missing " + path)


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    torch.set_num_threads(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
    torch.manual_seed(0)
    d = os.path.join(os.environ.get("DATA_DIR", "data"), "mnist")
    norm = lambda a: (torch.tensor(a, dtype=torch.float32) / 255 - 0.1307) / 0.3081
    xtr, ytr = norm(idx(d + "/train-images-idx3-ubyte")).unsqueeze(1), torch.tensor(idx(d + "/train-labels-idx1-ubyte"), dtype=torch.long)
    xte, yte = norm(idx(d + "/t10k-images-idx3-ubyte")).unsqueeze(1), torch.tensor(idx(d + "/t10k-labels-idx1-ubyte"), dtype=torch.long)
    net = nn.Sequential(nn.Conv2d(1, 20, 5), nn.MaxPool2d(2), nn.Conv2d(20, 50, 5), nn.MaxPool2d(2), nn.Flatten(),
                        nn.Linear(800, 500), nn.ReLU(), nn.Linear(500, 10))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    perm, at = torch.randperm(len(xtr)), 0
    for step in range(steps):
        if at + 512 > len(perm):
            perm, at = torch.randperm(len(xtr)), 0
        b = perm[at:at + 512]
        at += 512
        loss = F.cross_entropy(net(xtr[b]), ytr[b])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if (step + 1) % 500 == 0:
            print(f"step {step + 1} loss {loss.item():.4f}", flush=True)
    with torch.no_grad():
        acc = (net(xte).argmax(1) == yte).float().mean().item()
    print(f"test accuracy {100 * acc:.2f}% after {steps} steps")


if __name__ == "__main__":
    main()
