#!/usr/bin/python3
"""Weights between gcx and PyTorch through safetensors (run by
tests/test_torch_interop.sh, from the repository root, with the built trainers
and build/tests/tool_logits):

  gcx -> PyTorch: each trainer trains a few steps on small data and --export's;
    the file loads with load_state_dict(strict=True) into the PyTorch model
    defined here (ResNetCifar of tests/ref/nn_fixtures.py; LeNet5-Caffe and the
    LSTM language model below, written after nn/lenet.c and nn/lstm_lm.c), and
    PyTorch's eval-mode logits on a random batch equal those gcx computes from
    the same file (tool_logits: model_import_safetensors, as --init-from, then
    an evaluation forward). For ResNet the same logits with fresh batch-norm
    statistics must differ, so the check sees the exported running statistics.
  PyTorch -> gcx: a PyTorch model with random weights (and random BN running
    statistics) is written as a state_dict in safetensors by hand (json +
    struct: the safetensors package is not needed); the trainer loads it with
    --init-from, runs --steps 0 and --export's it again: every tensor comes back
    bit for bit, and gcx's logits equal PyTorch's.
  A checkpoint converts: --resume, --steps 0 and --export write the same file
    as the run's own --export.
  Refusals: a file with a missing tensor, an extra one, a wrong shape or a
    float64 tensor makes the trainer exit 1 naming the tensor.

Prints one line per check and ends with "RESULT passed failed".
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "ref"))
from nn_fixtures import ResNetCifar  # noqa: E402  (sets float64 as torch's default dtype)

BUILD = os.environ.get("BUILD", "build")
TOOL = os.path.join(BUILD, "tests", "tool_logits")
import checks  # noqa: E402  (tests/checks.py)
from checks import check, result  # noqa: E402

checks.echo_passes = True


# ------------------------------------------------------------ safetensors ----
DTYPES = {"F32": np.dtype("<f4"), "F64": np.dtype("<f8"), "I64": np.dtype("<i8")}


def st_read(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    h.pop("__metadata__", None)
    data = b[8 + n:]
    out = {}
    for k, v in h.items():
        s, e = v["data_offsets"]
        out[k] = np.frombuffer(data[s:e], dtype=DTYPES[v["dtype"]]).reshape(v["shape"])
    return out


def st_write(path, tensors):
    """tensors: name -> numpy array (float32, float64 or int64)"""
    header, blobs, pos = {"__metadata__": {"format": "pt"}}, [], 0
    names = {np.dtype("<f4"): "F32", np.dtype("<f8"): "F64", np.dtype("<i8"): "I64"}
    for k, a in tensors.items():
        a = np.array(a, order="C")  # (ascontiguousarray would make a scalar 1-d)
        raw = a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[k] = {"dtype": names[a.dtype.newbyteorder("<")], "shape": list(a.shape),
                     "data_offsets": [pos, pos + len(raw)]}
        blobs.append(raw)
        pos += len(raw)
    hb = json.dumps(header).encode()
    hb += b" " * (-len(hb) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb + b"".join(blobs))


def state_dict_f32(model):
    """the state_dict as gcx stores it: float32, the counters int64"""
    return {k: v.detach().numpy().astype(np.int64 if k.endswith("num_batches_tracked") else np.float32)
            for k, v in model.state_dict().items()}


def load(model, path):
    model.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in st_read(path).items()}, strict=True)


# ----------------------------------------------------------------- models ----
class LeNet(nn.Module):
    """nn/lenet.c: conv5x5(20) - maxpool2 - conv5x5(50) - maxpool2 - fc500 - ReLU - fc"""

    def __init__(self, in_ch, classes, hw):
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, 20, 5)
        self.conv2 = nn.Conv2d(20, 50, 5)
        q = ((hw - 4) // 2 - 4) // 2
        self.fc1 = nn.Linear(50 * q * q, 500)
        self.fc2 = nn.Linear(500, classes)

    def forward(self, x):
        x = F.max_pool2d(self.conv1(x), 2)
        x = F.max_pool2d(self.conv2(x), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


class LstmLM(nn.Module):
    """nn/lstm_lm.c (word_language_model's RNNModel): encoder - LSTM - decoder"""

    def __init__(self, V, E, H, L, tie):
        super().__init__()
        self.encoder = nn.Embedding(V, E)
        self.rnn = nn.LSTM(E, H, L)
        self.decoder = nn.Linear(H, V)
        if tie:
            self.decoder.weight = self.encoder.weight

    def forward(self, tokens):  # [T, N] -> [T*N, V]
        out, _ = self.rnn(self.encoder(tokens))
        return self.decoder(out).reshape(-1, self.decoder.out_features)


# ------------------------------------------------------------------ runs ----
def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return r.returncode, r.stdout + r.stderr


def gcx_logits(args, path, inp, tmp):
    """tool_logits on a weights file; inp: float32 images or int32 tokens"""
    fin, fout = os.path.join(tmp, "in.bin"), os.path.join(tmp, "out.f32")
    inp.tofile(fin)
    if args[0] == "lstm":
        cmd = [TOOL, "lstm", args[1], path, fin, str(inp.shape[0]), str(inp.shape[1]), fout]
    else:
        cmd = [TOOL, args[0], "32", "32", path, fin, str(inp.shape[0]), fout]
    rc, out = run(cmd)
    if rc != 0:
        print(out)
        return None
    return np.fromfile(fout, dtype=np.float32)


def compare(what, got, want, tol=1e-4):
    """|got - want| <= tol * max|want| everywhere; returns the max difference"""
    if got is None:
        check(False, what + ": gcx gave no logits")
        return None
    want = want.reshape(-1)
    scale = float(np.abs(want).max())
    d = float(np.abs(got.astype(np.float64) - want).max())
    check(got.shape == want.shape and d <= tol * scale, "%s: max |diff| %.3g (of max |logit| %.3g)" % (what, d, scale))
    return d


def through_gcx(name, base, sd, tmp):
    """writes PyTorch's state_dict sd, has the trainer (command base) load it with --init-from
    and --export it again with --steps 0, and checks that every tensor comes back bit for bit
    (num_batches_tracked: only its presence; gcx keeps its own count). The file's path, or None
    when the trainer failed."""
    p = os.path.join(tmp, name + ".torch.safetensors")
    st_write(p, sd)
    b = os.path.join(tmp, name + ".back.safetensors")
    rc, out = run(base + ["--steps", "0", "--init-from", p, "--export", b])
    check(rc == 0, "%s: --init-from PyTorch's file, --steps 0, --export (exit %d) %s" % (name, rc, "" if rc == 0 else out[-400:]))
    if rc != 0:
        return None
    back = st_read(b)
    same = sorted(back) == sorted(sd) and all(
        k.endswith("num_batches_tracked") or np.array_equal(back[k].view(np.uint32), sd[k].view(np.uint32)) for k in sd)
    check(same, "%s: every tensor of PyTorch's file comes back bit for bit (%d tensors)" % (name, len(sd)))
    return p


def image_case(name, trainer, extra, make_model, tmp, folder):
    base = ["./" + trainer, "--dataset", "folder:" + folder, "--batch", "8", "--workers", "2", "--eval-every", "-1",
            "--quiet", "--lr", "0.01"] + extra
    kind = "resnet" if trainer == "train_resnet" else "lenet"
    torch.manual_seed(11)
    x = torch.rand(4, 3, 32, 32).float()
    # gcx -> PyTorch
    a = os.path.join(tmp, name + ".gcx.safetensors")
    ck = os.path.join(tmp, name + ".ckpt")
    rc, out = run(base + ["--steps", "3", "--export", a, "--save", ck])
    check(rc == 0 and os.path.exists(a), "%s: 3 steps and --export (exit %d) %s" % (name, rc, "" if rc == 0 else out[-400:]))
    if rc != 0:
        return
    # a checkpoint converts: --resume, --steps 0, --export gives the same file
    c = os.path.join(tmp, name + ".resumed.safetensors")
    rc, out = run(base + ["--steps", "0", "--resume", ck, "--export", c])
    check(rc == 0 and os.path.exists(c) and open(a, "rb").read() == open(c, "rb").read(),
          "%s: --resume its checkpoint, --steps 0, --export: the same bytes (exit %d) %s" % (name, rc, out[-300:] if rc else ""))
    model = make_model()
    try:
        load(model, a)
        check(True, "%s: the export loads into PyTorch with strict=True" % name)
    except Exception as e:  # noqa: BLE001
        check(False, "%s: load_state_dict: %s" % (name, e))
        return
    model.eval()
    with torch.no_grad():
        want = model(x.double()).numpy()
    got = gcx_logits([kind], a, x.numpy(), tmp)
    d = compare("%s: gcx's logits from its export = PyTorch's" % name, got, want)
    if kind == "resnet" and d is not None:
        fresh = make_model()
        sd = {k: v for k, v in model.state_dict().items() if "running" not in k and "num_batches" not in k}
        fresh.load_state_dict(sd, strict=False)
        fresh.eval()
        with torch.no_grad():
            other = fresh(x.double()).numpy().reshape(-1)
        d2 = float(np.abs(got - other).max())
        check(d2 > 100 * max(d, 1e-6), "%s: with fresh BN statistics the logits differ (%.3g): the check sees them" % (name, d2))
    # PyTorch -> gcx
    torch.manual_seed(12)
    model = make_model()
    with torch.no_grad():
        for k, v in model.state_dict().items():
            if k.endswith("running_mean"):
                v.copy_(torch.randn_like(v) * 0.2)
            elif k.endswith("running_var"):
                v.copy_(torch.rand_like(v) + 0.5)
            elif k.endswith("num_batches_tracked"):
                v.fill_(5)
            elif k.endswith(".weight") and v.dim() == 1:
                v.add_(torch.randn_like(v) * 0.2)
    sd = state_dict_f32(model)
    model.load_state_dict({k: torch.from_numpy(v) for k, v in sd.items()})  # the float32 values exactly
    p = through_gcx(name, base, sd, tmp)
    if p is None:
        return
    model.eval()
    with torch.no_grad():
        want = model(x.double()).numpy()
    compare("%s: gcx's logits from PyTorch's weights = PyTorch's" % name, gcx_logits([kind], p, x.numpy(), tmp), want)
    # refusals, each naming the tensor
    first = next(k for k in sd if k.endswith(".weight"))
    bads = [("missing", {k: v for k, v in sd.items() if k != first}, first),
            ("extra", dict(sd, **{"extra.weight": np.zeros(3, np.float32)}), "extra.weight"),
            ("mis-shaped", dict(sd, **{first: sd[first].reshape(-1)}), first),
            ("float64", dict(sd, **{first: sd[first].astype(np.float64)}), first)]
    for what, d, tensor in bads:
        q = os.path.join(tmp, name + ".bad.safetensors")
        st_write(q, d)
        rc, out = run(base + ["--steps", "0", "--init-from", q])
        check(rc == 1 and tensor in out and "--init-from" in out,
              "%s: refused with a %s tensor, naming %s (exit %d: %s)" % (name, what, tensor, rc, out.strip()[-200:]))


def lstm_case(name, extra, tie, tmp, text):
    base = ["./train_lstm", "--model", "char", "--text", text, "--bptt", "16", "--batch", "4", "--workers", "1",
            "--eval-every", "-1", "--quiet"] + extra
    a = os.path.join(tmp, name + ".gcx.safetensors")
    rc, out = run(base + ["--steps", "3", "--export", a])
    check(rc == 0, "%s: 3 steps and --export (exit %d) %s" % (name, rc, "" if rc == 0 else out[-400:]))
    if rc != 0:
        return
    sd = st_read(a)
    V, E = sd["encoder.weight"].shape
    H = sd["rnn.weight_hh_l0"].shape[1]
    L = sum(1 for k in sd if k.startswith("rnn.weight_hh_l"))
    model = LstmLM(V, E, H, L, tie)
    try:
        load(model, a)
        check(True, "%s: the export loads into PyTorch with strict=True (V %d, E %d, H %d, %d layers%s)" %
              (name, V, E, H, L, ", tied" if tie else ""))
    except Exception as e:  # noqa: BLE001
        check(False, "%s: load_state_dict: %s" % (name, e))
        return
    torch.manual_seed(13)
    tokens = torch.randint(0, V, (8, 3))
    model.eval()
    with torch.no_grad():
        want = model(tokens).numpy()
    compare("%s: gcx's logits from its export = PyTorch's" % name,
            gcx_logits(["lstm", str(tie)], a, tokens.numpy().astype(np.int32), tmp), want)
    # PyTorch -> gcx
    torch.manual_seed(14)
    model = LstmLM(V, E, H, L, tie)
    sd = state_dict_f32(model)
    p = through_gcx(name, base, sd, tmp)
    if p is None:
        return
    model.load_state_dict({k: torch.from_numpy(v) for k, v in sd.items()})
    model.eval()
    with torch.no_grad():
        want = model(tokens).numpy()
    compare("%s: gcx's logits from PyTorch's weights = PyTorch's" % name,
            gcx_logits(["lstm", str(tie)], p, tokens.numpy().astype(np.int32), tmp), want)
    if tie:  # a tied model refuses a decoder that is not its encoder
        d = dict(sd)
        d["decoder.weight"] = d["decoder.weight"] + np.float32(1)
        q = os.path.join(tmp, name + ".bad.safetensors")
        st_write(q, d)
        rc, out = run(base + ["--steps", "0", "--init-from", q])
        check(rc == 1 and "decoder.weight differs from encoder.weight" in out,
              "%s: an untied decoder.weight is refused (exit %d: %s)" % (name, rc, out.strip()[-200:]))


def main():
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    with tempfile.TemporaryDirectory() as tmp:
        folder = os.path.join(tmp, "folder")
        subprocess.run([sys.executable, "scripts/make_image_folder.py", folder, "8", "2"], check=True,
                       stdout=subprocess.DEVNULL)
        text = os.path.join(tmp, "text.txt")
        with open("README.md", "rb") as f, open(text, "wb") as g:
            g.write(f.read(6000))
        image_case("resnet8", "train_resnet", ["--depth", "8", "--image-size", "32"],
                   lambda: ResNetCifar(8, 16, 10, "A", 3), tmp, folder)
        image_case("resnet8-B", "train_resnet", ["--depth", "8", "--image-size", "32", "--shortcut", "B"],
                   lambda: ResNetCifar(8, 16, 10, "B", 3), tmp, folder)
        image_case("lenet", "train_lenet", ["--image-size", "32"], lambda: LeNet(3, 10, 32), tmp, folder)
        lstm_case("lstm", ["--hidden", "32", "--emb", "16", "--layers", "2"], 0, tmp, text)
        lstm_case("lstm-tied", ["--hidden", "32", "--emb", "32", "--layers", "1", "--tie", "1"], 1, tmp, text)
    return result()


if __name__ == "__main__":
    sys.exit(main())
