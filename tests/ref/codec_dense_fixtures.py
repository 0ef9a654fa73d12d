#!/usr/bin/python3
"""Reference payloads for the dense codecs fp16, int8, 3lc, terngrad, stoch3
and onebit (tests/test_codec_dense.c), computed with PyTorch tensor ops that
follow the papers' definitions step by step, independently of the C code.

Run from the repository root with Debian's PyTorch:
    /usr/bin/python3 tests/ref/codec_dense_fixtures.py [outdir]   (default tests/fixtures)
It writes tests/fixtures/codec_dense.bin.

  fp16      torch's float32 -> float16 conversion (round to nearest even,
            overflow to inf, subnormals), on values chosen to hit every
            rounding case: ties in the normal and subnormal ranges, the
            overflow threshold 65520, the smallest subnormal, +-0, +-inf.
  int8      3LC section 4.2: scale = max|x| / 127, q = torch.round(x / scale)
            (half to even), payload f32 scale + q as int8.
  3lc       3LC section 3: m = max|x| * s, q = torch.round(x / m); base-3^5 by
            the paper's five steps (add 1, cast to uint8, flatten, pad with
            zeros to a multiple of 5, split into 5 equal parts P0..P4 and
            compute P0*81 + P1*27 + P2*9 + P3*3 + P4); zero-run encoding:
            every maximal run of r bytes 121 -> r//14 bytes 255, then
            243 + (r%14 - 2) if r%14 >= 2, or 121 if r%14 == 1.
  terngrad  TernGrad section 3: clip at c*sigma (sigma = population std,
  stoch3    float64), s = max|clipped x| (or a shared scalar), b_i = [u_i * s <
            |clipped x_i|] with u_i = rng_hash_uniform(seed, i) (common/rng.h,
            re-implemented below with numpy uint64); terngrad: 2-bit codes
            (0 = 0, 1 = +1, 2 = -1) LSB first, 4 per byte; stoch3: base-3^5 as
            for 3lc, without zero-run encoding.
  onebit    3LC section 4.2 / 1-bit SGD: bit = x >= 0, LSB first, 8 per byte;
            pos = mean of x >= 0, neg = mean of x < 0 (float64, rounded).

File format (little-endian), the layout of tests/ref/codec_sparse_fixtures.py:
  magic "GCXFIXT\\0", u32 version 1, u32 count, then count records:
    u32 name_len, name, u32 dtype (0 = float32, 1 = int32), u32 ndim,
    u32 dims[ndim], prod(dims) 4-byte values.
Records: "fp16.x" f32[n], "fp16.h" i32[n] (half bit patterns); "vec.j"
f32[n] the test vectors; for codec C and case k: "C.k.v" i32[2] = (vector
index j, payload length), "C.k.p" f32[nparams] (parameters, see below),
"C.k.pay" i32[ceil(len/4)] (the payload bytes, packed little-endian).
Parameters: int8: []; 3lc: [s]; terngrad/stoch3: [c, seed_lo, seed_hi, shared]
(seed = seed_lo + seed_hi * 2^24, both exact in float32; shared < 0 means no
shared scalar); onebit: [].
"""
import os
import struct
import sys

import numpy as np
import torch

MAGIC = b"GCXFIXT\0"
VERSION = 1
M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def rec(out, name, arr, dtype):
    arr = np.ascontiguousarray(arr)
    out.append((name, dtype, arr.shape, arr.astype(np.float32 if dtype == 0 else np.int32).tobytes()))


# ---------------------------------------------------------------- rng ------
def splitmix(x):
    """one rng_splitmix64 call on a uint64 array: returns (new state, output)"""
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        z = x
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x, z ^ (z >> np.uint64(31))


def hash_uniform(seed, n):
    """rng_hash_uniform(seed, i) for i = 0..n-1 as float32"""
    i = np.arange(n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        x = np.uint64(seed) ^ (i * np.uint64(0xD1B54A32D192ED03))
    x, _ = splitmix(x)
    x, h = splitmix(x)
    return torch.from_numpy(((h >> np.uint64(40)).astype(np.float32) * np.float32(1.0 / 16777216.0)))


# ------------------------------------------------------------- packing -----
def base3(q):
    """3LC 3.2: trits q (int tensor in {-1,0,1}) -> bytes, the paper's five steps"""
    d = (q + 1).to(torch.uint8).flatten()                 # (1) add 1, (2) uint8, (3) flatten
    n = d.numel()
    L = (n + 4) // 5
    d = torch.cat([d, torch.zeros(5 * L - n, dtype=torch.uint8)])  # (4) pad with zeros
    P = d.view(5, L).to(torch.int32)                      # (5) five equal parts
    return (P[0] * 81 + P[1] * 27 + P[2] * 9 + P[3] * 3 + P[4]).tolist()


def zero_run(b):
    """3LC 3.3, canonical: maximal runs of 121"""
    out = []
    i = 0
    while i < len(b):
        if b[i] != 121:
            out.append(b[i])
            i += 1
            continue
        r = 0
        while i < len(b) and b[i] == 121:
            r += 1
            i += 1
        out += [255] * (r // 14)
        r %= 14
        if r == 1:
            out.append(121)
        elif r >= 2:
            out.append(243 + r - 2)
    return out


def f32bytes(v):
    return list(struct.pack("<f", float(np.float32(v))))


# -------------------------------------------------------------- codecs -----
def int8_ref(x):
    t = torch.from_numpy(x)
    scale = t.abs().max() / torch.tensor(127.0, dtype=torch.float32)
    if scale.item() == 0:
        q = torch.zeros_like(t, dtype=torch.int8)
    else:
        q = torch.round(t / scale).clamp(-127, 127).to(torch.int8)
    return f32bytes(scale.item()) + [int(v) & 0xFF for v in q.tolist()]


def tlc_ref(x, s):
    t = torch.from_numpy(x)
    m = t.abs().max() * torch.tensor(s, dtype=torch.float32)   # m = max|T| * s (float32)
    q = torch.zeros_like(t) if m.item() == 0 else torch.round(t / m)
    return f32bytes(m.item()) + zero_run(base3(q.to(torch.int32)))


def tern_quant(x, c, seed, shared):
    t = torch.from_numpy(x)
    maxabs = t.abs().max()
    if c > 0:
        sigma = torch.std(t.double(), unbiased=False)
        thr = torch.tensor(c * sigma.item(), dtype=torch.float64).to(torch.float32)
        s = torch.minimum(maxabs, thr)
        a = torch.minimum(t.abs(), thr)                        # |f(g)|, eq. 21
    else:
        s = maxabs
        a = t.abs()
    if shared >= 0:
        s = torch.tensor(shared, dtype=torch.float32)
    u = hash_uniform(seed, x.size)
    b = (u * s) < a                                            # P(b=1) = |f(g)|/s, eq. 3
    q = torch.where(b, torch.sign(t), torch.zeros_like(t)).to(torch.int32)
    return s.item(), q


def terngrad_ref(x, c, seed, shared):
    s, q = tern_quant(x, c, seed, shared)
    code = torch.where(q == 1, 1, torch.where(q == -1, 2, 0)).tolist()
    code += [0] * ((-len(code)) % 4)
    by = [code[i] | code[i + 1] << 2 | code[i + 2] << 4 | code[i + 3] << 6 for i in range(0, len(code), 4)]
    return f32bytes(s) + by


def stoch3_ref(x, c, seed, shared):
    s, q = tern_quant(x, c, seed, shared)
    return f32bytes(s) + base3(q)


def onebit_ref(x):
    t = torch.from_numpy(x).double()
    nn = t >= 0
    pos = t[nn].mean().item() if nn.any() else 0.0
    neg = t[~nn].mean().item() if (~nn).any() else 0.0
    bits = nn.to(torch.int32).tolist()
    bits += [0] * ((-len(bits)) % 8)
    by = [sum(bits[i + k] << k for k in range(8)) for i in range(0, len(bits), 8)]
    return f32bytes(pos) + f32bytes(neg) + by


# ---------------------------------------------------------------- data -----
def vectors(rng):
    """named test vectors: sizes around multiples of 4, 5, 8 and runs of zeros"""
    v = []
    v.append(rng.standard_normal(1000).astype(np.float32))
    v.append((rng.standard_t(3, 1237) * 1e-3).astype(np.float32))
    x = rng.standard_normal(2003).astype(np.float32)
    x[rng.random(2003) < 0.9] = 0                      # long zero runs for 3lc
    v.append(x)
    x = np.zeros(777, dtype=np.float32)
    x[[3, 400, 776]] = [1.5, -2.0, 0.25]               # runs longer than 14 groups
    v.append(x)
    v.append(np.zeros(13, dtype=np.float32))           # all zero, partial last group
    v.append(np.array([0.7], dtype=np.float32))        # one value
    v.append(np.array([-1.0, 0.5, 0.49, -0.51, 1.0, 0.0, -0.0], dtype=np.float32))  # ties at m/2 for s=1
    v.append((rng.laplace(size=1603) * 1e-2).astype(np.float32))
    return v


def fp16_values(rng):
    vals = [0.0, -0.0, 1.0, -1.0, 65504.0, 65519.99, 65520.0, 65536.0, 1e6, -1e6, np.inf, -np.inf,
            2.0 ** -24, 2.0 ** -25, 2.0 ** -25 * 1.0000001, 2.0 ** -26, 3 * 2.0 ** -25, 5 * 2.0 ** -25,
            2.0 ** -14, 2.0 ** -14 * (1 - 2.0 ** -11), 2.0 ** -14 * (1 - 2.0 ** -12), 6.1e-5, 1e-8, 1e-30,
            3.4e38, -3.4e38, 1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11, 1.0 + 2.0 ** -11 + 2.0 ** -20,
            2048.0 + 1.0, 2048.0 + 3.0, 0.1, 0.2, 0.3, 1.0 / 3.0]
    vals = np.array(vals, dtype=np.float64)
    # exact ties between neighbouring halves, normal and subnormal
    h = np.arange(0, 0x7C00, 37, dtype=np.uint16)
    lo = h.view(np.float16).astype(np.float64)
    hi = (h + 1).view(np.float16).astype(np.float64)
    ties = ((lo + hi) / 2)[np.isfinite(hi)]
    rnd = np.concatenate([rng.standard_normal(400) * 10.0 ** rng.integers(-9, 6, 400),
                          rng.uniform(-70000, 70000, 100)])
    x = np.concatenate([vals, -vals, ties, -ties, rnd]).astype(np.float32)
    return x


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures"
    rng = np.random.default_rng(20240531)
    out = []
    x = fp16_values(rng)
    rec(out, "fp16.x", x, 0)
    rec(out, "fp16.h", torch.from_numpy(x).half().view(torch.int16).numpy().astype(np.int32) & 0xFFFF, 1)

    vs = vectors(rng)
    for j, x in enumerate(vs):
        rec(out, "vec.%d" % j, x, 0)

    def case(name, k, j, params, pay):
        rec(out, "%s.%d.v" % (name, k), np.array([j, len(pay)]), 1)
        rec(out, "%s.%d.p" % (name, k), np.array(params, np.float32), 0)
        pay = bytes(pay) + bytes((-len(pay)) % 4)
        rec(out, "%s.%d.pay" % (name, k), np.frombuffer(pay, dtype="<i4"), 1)

    k = 0
    for j, x in enumerate(vs):
        case("int8", k, j, [], int8_ref(x))
        k += 1
    k = 0
    for j, x in enumerate(vs):
        for s in (1.0, 1.5, 1.9):
            case("3lc", k, j, [s], tlc_ref(x, s))
            k += 1
    for name, fn in (("terngrad", terngrad_ref), ("stoch3", stoch3_ref)):
        k = 0
        for j, x in enumerate(vs):
            for c, seed, shared in ((2.5, 1 + j, -1.0), (0.0, 0x123456789A + j, -1.0), (2.5, 99, 4.0)):
                case(name, k, j, [c, seed & 0xFFFFFF, seed >> 24, shared], fn(x, c, seed, shared))
                k += 1
    k = 0
    for j, x in enumerate(vs):
        case("onebit", k, j, [], onebit_ref(x))
        k += 1

    path = os.path.join(outdir, "codec_dense.bin")
    with open(path, "wb") as f:
        f.write(MAGIC)
        f.write(struct.pack("<II", VERSION, len(out)))
        for name, dtype, shape, data in out:
            nb = name.encode()
            f.write(struct.pack("<I", len(nb)) + nb)
            f.write(struct.pack("<II", dtype, len(shape)))
            f.write(struct.pack("<%dI" % len(shape), *shape))
            f.write(data)
    print("wrote %s (%d records, %d bytes)" % (path, len(out), os.path.getsize(path)))


if __name__ == "__main__":
    main()
