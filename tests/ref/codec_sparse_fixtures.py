#!/usr/bin/python3
"""Reference selections for the sparsifying codecs topk, dgc and sbc
(tests/test_codec_sparse.c).

Run from the repository root with Debian's PyTorch:
    /usr/bin/python3 tests/ref/codec_sparse_fixtures.py [outdir]   (default tests/fixtures)
It writes tests/fixtures/codec_sparse.bin.

For each case, a float32 vector x and, computed with torch.topk (a full
selection, no sampling):
  topk / dgc: the indices of the k = max(1, round(d*n)) largest |x|
              (3LC section 4.2; DGC section 3.1), sorted
  sbc:        Algorithm 2 of the SBC paper: the k largest positive values and
              the k most negative values, the mean of each side (float64), the
              side with the larger absolute mean (positive on a tie); its
              sorted indices and its mean rounded to float32
The vectors have no ties in |x|, so torch.topk's unspecified tie order does not
matter. Cases with n > 8192 exercise the codecs' sampled threshold path.

File format (little-endian), the same record layout as lstm_fixtures.py:
  magic    8 bytes  "GCXFIXT\\0"
  version  u32      1
  count    u32      number of records
  count records:
    name_len u32, name (name_len bytes, no terminator)
    dtype    u32    0 = float32, 1 = int32
    ndim     u32, dims u32[ndim]
    data     prod(dims) values of 4 bytes
Records per case c: "x.c" f32[n], "dens.c" f32[3] (topk ratio, dgc density,
sbc p), "topk.c" i32[k], "dgc.c" i32[k], "sbc.c" i32[m], "sbcmean.c" f32[1].
"""
import math
import os
import struct
import sys

import numpy as np
import torch

MAGIC = b"GCXFIXT\0"
VERSION = 1


def count(d, n):
    """select_count(): max(1, round(d*n)) capped at n (round half away from zero)."""
    if n == 0:
        return 0
    v = d * n
    if v < 1:
        return 1
    if v >= n:
        return n
    return min(n, max(1, int(math.floor(v + 0.5))))


def topk_indices(x, k):
    return torch.sort(torch.topk(x.abs(), k).indices).values


def sbc_ref(x, k):
    vp, ip = torch.topk(x, k)
    vn, i_n = torch.topk(-x, k)
    ip, vp = ip[vp > 0], vp[vp > 0]
    i_n, vn = i_n[vn > 0], vn[vn > 0]
    mu_p = vp.double().mean().item() if len(vp) else 0.0
    mu_n = vn.double().mean().item() if len(vn) else 0.0
    if len(vp) and mu_p >= mu_n:
        return torch.sort(ip).values, np.float32(mu_p)
    return torch.sort(i_n).values, np.float32(-mu_n)


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures"
    g = torch.Generator().manual_seed(20180523)
    cases = [
        # n, kind, topk ratio, dgc density, sbc p
        (1000, "normal", 0.05, 0.01, 0.01),
        (12000, "heavy", 0.05, 0.001, 0.001),
        (20000, "negskew", 0.1, 0.005, 0.01),
    ]
    recs = []
    for c, (n, kind, r_topk, d_dgc, p_sbc) in enumerate(cases):
        while True:
            z = torch.randn(n, generator=g, dtype=torch.float64)
            if kind == "heavy":
                z = z * torch.exp(torch.randn(n, generator=g, dtype=torch.float64))
            elif kind == "negskew":
                z = torch.where(z < 0, 2.0 * z, z) - 0.1
            x = z.float()
            if len(torch.unique(x.abs())) == n:  # no ties in |x|
                break
        sidx, smean = sbc_ref(x, count(p_sbc, n))
        recs.append((f"x.{c}", 0, x.numpy()))
        recs.append((f"dens.{c}", 0, np.array([r_topk, d_dgc, p_sbc], dtype="<f4")))
        recs.append((f"topk.{c}", 1, topk_indices(x, count(r_topk, n)).numpy()))
        recs.append((f"dgc.{c}", 1, topk_indices(x, count(d_dgc, n)).numpy()))
        recs.append((f"sbc.{c}", 1, sidx.numpy()))
        recs.append((f"sbcmean.{c}", 0, np.array([smean], dtype="<f4")))
    os.makedirs(outdir, exist_ok=True)
    path = os.path.join(outdir, "codec_sparse.bin")
    with open(path, "wb") as f:
        f.write(MAGIC + struct.pack("<II", VERSION, len(recs)))
        for name, dtype, a in recs:
            a = np.ascontiguousarray(a, dtype="<f4" if dtype == 0 else "<i4")
            nb = name.encode()
            f.write(struct.pack("<I", len(nb)) + nb + struct.pack("<II", dtype, a.ndim))
            f.write(struct.pack(f"<{a.ndim}I", *a.shape))
            f.write(a.tobytes())
    print(f"wrote {path} ({os.path.getsize(path)} bytes, {len(recs)} records)")


if __name__ == "__main__":
    main()
