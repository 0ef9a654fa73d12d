#!/usr/bin/python3
"""SBC's MNIST baseline (SBC Table III: LeNet5-Caffe, Adam lr 0.001, batch 128 per client,
4 clients on fixed random quarters of the training set, 2000 iterations) in PyTorch, to
tell whether our fp32 row's distance from the paper's 99.46% (docs/REPRODUCING.md, SBC)
comes from gcx or from the protocol. The 4 clients' mean gradient is one step on their
4 x 128 samples, so one model takes each step on a batch of 128 from each quarter.

    DATA_DIR=../shared/data /usr/bin/python3 dev/lenet_torch_baseline.py [--seed S] [--steps N]
        [--per-client B] [--lr LR] [--eval-every N] [--threads N]
Prints the test accuracy every --eval-every steps and at the end, and the best of them.
"""
import argparse
import gzip
import os
import struct

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    dims = struct.unpack(">" + "I" * (magic & 0xFF), data[4:4 + 4 * (magic & 0xFF)])
    return np.frombuffer(data, np.uint8, offset=4 + 4 * len(dims)).reshape(dims)


def load(d, split):
    x = idx(os.path.join(d, f"{split}-images-idx3-ubyte.gz")).astype(np.float32) / 255.0
    y = idx(os.path.join(d, f"{split}-labels-idx1-ubyte.gz")).astype(np.int64)
    x = (x - 0.1307) / 0.3081  # datasets/mnist.h MNIST_MEAN, MNIST_STD
    return torch.from_numpy(x[:, None]), torch.from_numpy(y)


class LeNet5Caffe(nn.Module):  # nn/lenet.h
    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 20, 5), nn.Conv2d(20, 50, 5)
        self.fc1, self.fc2 = nn.Linear(800, 500), nn.Linear(500, 10)

    def forward(self, x):
        x = F.max_pool2d(self.conv1(x), 2)
        x = F.max_pool2d(self.conv2(x), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def accuracy(model, x, y):
    model.eval()
    with torch.no_grad():
        right = sum((model(x[i:i + 1000]).argmax(1) == y[i:i + 1000]).sum().item() for i in range(0, len(x), 1000))
    model.train()
    return 100.0 * right / len(x)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--per-client", type=int, default=128)
    ap.add_argument("--lr", type=float, default=0.001)
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--threads", type=int, default=0, help="torch's CPU threads (0: its default)")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    d = os.path.join(os.environ.get("DATA_DIR", "../shared/data"), "mnist")
    xtr, ytr = load(d, "train")
    xte, yte = load(d, "t10k")
    torch.manual_seed(a.seed)
    g = np.random.default_rng(a.seed)
    shards = np.array_split(g.permutation(len(xtr)), a.clients)
    orders, pos = [g.permutation(s) for s in shards], [0] * a.clients
    model = LeNet5Caffe()
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    best = 0.0
    for step in range(1, a.steps + 1):
        batch = []
        for c in range(a.clients):  # each client's next batch of its own quarter, reshuffled each pass
            if pos[c] + a.per_client > len(orders[c]):
                orders[c], pos[c] = g.permutation(shards[c]), 0
            batch.append(orders[c][pos[c]:pos[c] + a.per_client])
            pos[c] += a.per_client
        b = torch.from_numpy(np.concatenate(batch))
        opt.zero_grad()
        F.cross_entropy(model(xtr[b]), ytr[b]).backward()
        opt.step()
        if step % a.eval_every == 0 or step == a.steps:
            acc = accuracy(model, xte, yte)
            best = max(best, acc)
            print(f"step {step}: test accuracy {acc:.2f}%", flush=True)
    print(f"seed {a.seed}, {a.clients} x {a.per_client}, lr {a.lr}, {a.steps} steps: final {acc:.2f}%, best {best:.2f}%")


if __name__ == "__main__":
    main()
