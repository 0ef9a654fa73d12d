#!/usr/bin/python3
"""Reference fixtures for the LSTM layers and the LSTM language model.

Run:  /usr/bin/python3 tests/ref/lstm_fixtures.py [outdir]   (default tests/fixtures)
Needs python3-torch (Debian, 1.13). Writes
  tests/fixtures/lstm_layer.bin   embedding, one LSTM layer, two stacked layers
  tests/fixtures/lstm_lm.bin      the whole language model, untied and tied

Everything is computed in float64 by PyTorch from float32-representable
inputs, then stored as float32, so the fixture is the exact answer to within
float32 rounding and the C test measures only its own error.

File format (little-endian), read by tests/test_lstm.c:
  magic    8 bytes  "GCXFIXT\\0"
  version  u32      1
  count    u32      number of records
  count records:
    name_len u32, name (name_len bytes, no terminator)
    dtype    u32    0 = float32, 1 = int32
    ndim     u32, dims u32[ndim]
    data     prod(dims) values of 4 bytes

Conventions of the records:
  * sequences are time-major [T, N, ...], as torch.nn.LSTM with batch_first=False
  * a layer "loss" is sum(y * dy) for a fixed random dy, so d loss / d y = dy
  * batch 2 starts from batch 1's final state, DETACHED (truncated BPTT);
    its gradients are those of batch 2's loss alone
  * LM losses are the per-token mean cross-entropy (dropout 0)
"""
import os
import struct
import sys

import numpy as np
import torch

MAGIC = b"GCXFIXT\0"
VERSION = 1


class Writer:
    def __init__(self):
        self.recs = []

    def f32(self, name, t):
        a = t.detach().cpu().numpy() if torch.is_tensor(t) else np.asarray(t)
        self.recs.append((name, 0, np.ascontiguousarray(a, dtype="<f4")))

    def i32(self, name, t):
        a = t.detach().cpu().numpy() if torch.is_tensor(t) else np.asarray(t)
        self.recs.append((name, 1, np.ascontiguousarray(a, dtype="<i4")))

    def save(self, path):
        with open(path, "wb") as f:
            f.write(MAGIC)
            f.write(struct.pack("<II", VERSION, len(self.recs)))
            for name, dtype, a in self.recs:
                nb = name.encode()
                f.write(struct.pack("<I", len(nb)) + nb)
                f.write(struct.pack("<II", dtype, a.ndim))
                f.write(struct.pack("<%dI" % a.ndim, *a.shape))
                f.write(a.tobytes())
        print("wrote %s (%d records, %d bytes)" % (path, len(self.recs), os.path.getsize(path)))


def rand32(*shape, scale=1.0):
    """float32-representable random values, as a float64 tensor"""
    return (torch.rand(*shape, dtype=torch.float32) * 2 - 1).mul(scale).double()


def set_params32(module, scale):
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(rand32(*p.shape, scale=scale))


def embedding_section(w):
    V, E, N = 7, 4, 12
    emb = torch.nn.Embedding(V, E).double()
    set_params32(emb, 1.0)
    tokens = torch.tensor([3, 0, 6, 3, 3, 1, 6, 2, 0, 3, 5, 1], dtype=torch.long)  # repeats: scatter-add
    dout = rand32(N, E)
    out = emb(tokens)
    (out * dout).sum().backward()
    w.i32("emb.cfg", [V, E, N])
    w.i32("emb.tokens", tokens)
    w.f32("emb.w", emb.weight)
    w.f32("emb.dout", dout)
    w.f32("emb.out", out)
    w.f32("emb.dw", emb.weight.grad)


def lstm_two_batches(w, prefix, In, H, L, T, N, forget_bias=None):
    """nn.LSTM with L layers; batch 1 from a random state (gradients w.r.t. it
    recorded), batch 2 from batch 1's detached final state."""
    rnn = torch.nn.LSTM(In, H, L).double()
    set_params32(rnn, 0.5)
    x1, x2 = rand32(T, N, In), rand32(T, N, In)
    h0, c0 = rand32(L, N, H, scale=0.8), rand32(L, N, H, scale=0.8)
    dy1, dy2 = rand32(T, N, H), rand32(T, N, H)
    w.i32(prefix + "cfg", [T, N, In, H, L])
    for name, p in rnn.named_parameters():
        w.f32(prefix + name, p)
    w.f32(prefix + "x1", x1)
    w.f32(prefix + "x2", x2)
    w.f32(prefix + "h0", h0)
    w.f32(prefix + "c0", c0)
    w.f32(prefix + "dy1", dy1)
    w.f32(prefix + "dy2", dy2)
    # batch 1
    x1r, h0r, c0r = x1.clone().requires_grad_(), h0.clone().requires_grad_(), c0.clone().requires_grad_()
    y1, (hn1, cn1) = rnn(x1r, (h0r, c0r))
    (y1 * dy1).sum().backward()
    w.f32(prefix + "y1", y1)
    w.f32(prefix + "hn1", hn1)
    w.f32(prefix + "cn1", cn1)
    w.f32(prefix + "dx1", x1r.grad)
    w.f32(prefix + "dh0_1", h0r.grad)
    w.f32(prefix + "dc0_1", c0r.grad)
    for name, p in rnn.named_parameters():
        w.f32(prefix + "g1." + name, p.grad)
    rnn.zero_grad()
    # batch 2 from the detached state of batch 1
    x2r = x2.clone().requires_grad_()
    y2, (hn2, cn2) = rnn(x2r, (hn1.detach(), cn1.detach()))
    (y2 * dy2).sum().backward()
    w.f32(prefix + "y2", y2)
    w.f32(prefix + "hn2", hn2)
    w.f32(prefix + "cn2", cn2)
    w.f32(prefix + "dx2", x2r.grad)
    for name, p in rnn.named_parameters():
        w.f32(prefix + "g2." + name, p.grad)


class LM(torch.nn.Module):
    """PyTorch word_language_model's RNNModel (LSTM), dropout 0."""

    def __init__(self, V, E, H, L, tie):
        super().__init__()
        self.encoder = torch.nn.Embedding(V, E)
        self.rnn = torch.nn.LSTM(E, H, L)
        self.decoder = torch.nn.Linear(H, V)
        if tie:
            self.decoder.weight = self.encoder.weight

    def forward(self, tokens, state):
        out, state = self.rnn(self.encoder(tokens), state)
        return self.decoder(out), state


def lm_section(w, prefix, V, E, H, L, T, N, tie):
    lm = LM(V, E, H, L, tie).double()
    set_params32(lm, 0.4)
    # a token stream cut into N columns, PTB style: targets are the next tokens
    stream = torch.randint(0, V, (N, 2 * T + 1))
    toks = [stream[:, k * T:(k + 1) * T].t().contiguous() for k in range(2)]
    tgts = [stream[:, k * T + 1:(k + 1) * T + 1].t().contiguous() for k in range(2)]
    w.i32(prefix + "cfg", [V, E, H, L, T, N, int(tie)])
    for name, p in lm.named_parameters():  # with tying, decoder.weight is listed once as encoder.weight
        w.f32(prefix + "p." + name, p)
    state = (torch.zeros(L, N, H, dtype=torch.float64), torch.zeros(L, N, H, dtype=torch.float64))
    for k in range(2):
        lm.zero_grad()
        logits, state = lm(toks[k], state)
        loss = torch.nn.functional.cross_entropy(logits.reshape(T * N, V), tgts[k].reshape(T * N))
        loss.backward()
        state = (state[0].detach(), state[1].detach())
        correct = (logits.reshape(T * N, V).argmax(1) == tgts[k].reshape(T * N)).sum()
        b = "%d." % (k + 1)
        w.i32(prefix + b + "tokens", toks[k])
        w.i32(prefix + b + "targets", tgts[k])
        w.f32(prefix + b + "loss", loss.reshape(1))
        w.i32(prefix + b + "correct", correct.reshape(1))
        w.f32(prefix + b + "h", state[0])
        w.f32(prefix + b + "c", state[1])
        for name, p in lm.named_parameters():
            w.f32(prefix + b + "g." + name, p.grad)


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "fixtures")
    os.makedirs(outdir, exist_ok=True)
    torch.manual_seed(20240601)
    w = Writer()
    embedding_section(w)
    lstm_two_batches(w, "l1.", In=5, H=6, L=1, T=7, N=3)
    lstm_two_batches(w, "l2.", In=4, H=5, L=2, T=5, N=2)
    w.save(os.path.join(outdir, "lstm_layer.bin"))
    w = Writer()
    lm_section(w, "untied.", V=13, E=5, H=7, L=2, T=6, N=3, tie=False)
    lm_section(w, "tied.", V=11, E=8, H=8, L=2, T=5, N=4, tie=True)
    w.save(os.path.join(outdir, "lstm_lm.bin"))


if __name__ == "__main__":
    main()
