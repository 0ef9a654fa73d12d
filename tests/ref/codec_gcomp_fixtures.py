#!/usr/bin/python3
"""Reference payloads for the GCOMP codec (tests/test_codec_gcomp_ref.c): an
independent encoder written in Python + PyTorch from docs/FORMAT.md section 10 and
the paper (Li et al., SoCC 2024, sections 4-6), sharing no code with
compress/gcomp.c. The C test runs the same encoder sequences and must produce
byte-identical payloads, flags, and decoded values.

Run from the repository root with Debian's PyTorch:
    /usr/bin/python3 tests/ref/codec_gcomp_fixtures.py [outdir]   (default tests/fixtures)
It writes tests/fixtures/codec_gcomp.bin.

What is computed here:
  - exponent e, sign s, mantissa m of each value with torch integer ops on
    x.view(torch.int32); the exponent histogram with torch.bincount;
  - native Huffman code lengths over all 256 exponents (weights = counts,
    unseen = 0), two-queue merge, leaves ordered by (weight, symbol), a leaf
    taken before an internal node of equal weight (section 4.2);
  - the n_theta cap: codes longer than n_theta dropped, canonical codes of
    the rest, escape = sum of 2^(n_theta - len) over kept codes, an escaped
    exponent sent as escape + 8 raw bits (section 4.3);
  - the table schedule: bootstrap from the first tensor, rebuild every K
    encodes from the histogram since the last rebuild, carry when changed
    (section 4.4); table id = CRC-32C (computed bitwise here) of the table;
  - levels forced to 0 for exponents 0 and 255; mantissa with sign (s<<23|m)
    >> 6L on 24 - 6L bits; exponent-0 values carry a sign bit only when the
    tensor has a negative zero (flag ZSIGN); the expected decoded bits
    (torch ops: low 6L bits cleared, exponent 0 -> signed zero, 255 exact);
  - block header, chunk headers, byte-aligned segments (section 6.1).

File format (little-endian), the layout of tests/ref/codec_dense_fixtures.py:
  magic "GCXFIXT\\0", u32 version 1, u32 count, then count records:
    u32 name_len, name, u32 dtype (0 = float32, 1 = int32), u32 ndim,
    u32 dims[ndim], prod(dims) 4-byte values.
Records, for encoder sequence E in {A, B} and frame k:
  "E.spec" i32[3] = (ntheta, every, chunk); "E.frames" i32[1];
  "E.k.meta" i32[4] = (n, has_levels, flags, payload length);
  "E.k.xb" i32[n] the input float32 bit patterns (NaN payloads included);
  "E.k.lv" i32[n] levels (when has_levels); "E.k.want" i32[n] decoded bits;
  "E.k.pay" i32[ceil(len/4)] the payload bytes packed little-endian.
"""
import os
import struct
import sys

import torch

MAGIC = b"GCXFIXT\0"
VERSION = 1


# ---------------------------------------------------------------- crc32c ----
def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283


# ---------------------------------------------------------------- huffman ---
def huffman_lengths(w):
    """native Huffman lengths of 256 symbols, the documented deterministic rule"""
    leaves = sorted(range(256), key=lambda s: (w[s], s))
    weight = {("L", s): w[s] for s in range(256)}
    parent = {}
    li, internal, ii = 0, [], 0

    def take():
        nonlocal li, ii
        if li < len(leaves) and (ii >= len(internal) or weight[("L", leaves[li])] <= weight[internal[ii]]):
            node = ("L", leaves[li])
            li += 1
        else:
            node = internal[ii]
            ii += 1
        return node

    for j in range(255):
        a = take()
        b = take()
        node = ("I", j)
        weight[node] = weight[a] + weight[b]
        parent[a] = parent[b] = node
        internal.append(node)
    depth = {("I", 254): 0}
    for j in range(253, -1, -1):
        depth[("I", j)] = depth[parent[("I", j)]] + 1
    return [depth[parent[("L", s)]] + 1 for s in range(256)]


def limited_code(native, ntheta):
    """kept lengths (0 = escaped), canonical codes, escape (or None)"""
    lens = [l if l <= ntheta else 0 for l in native]
    codes = {}
    code = 0
    for length in range(1, ntheta + 1):
        for s in range(256):
            if lens[s] == length:
                codes[s] = code
                code += 1
        code <<= 1
    kraft = sum(1 << (ntheta - l) for l in lens if l)
    escape = kraft if any(l == 0 for l in lens) else None
    return lens, codes, escape


def check_against_native(native, lens, codes, escape, ntheta):
    """section 4.3: the escape is the first overly long native (canonical) code, truncated"""
    if escape is None:
        return
    code, first_long = 0, None
    for length in range(1, max(native) + 1):
        for s in range(256):
            if native[s] == length:
                if length > ntheta and first_long is None:
                    first_long = (code, length)
                code += 1
        code <<= 1
    c, length = first_long
    assert c >> (length - ntheta) == escape, "escape is not the truncated first long code"


# ---------------------------------------------------------------- encoder ---
class Encoder:
    def __init__(self, ntheta, every, chunk):
        self.ntheta, self.every, self.chunk = ntheta, every, chunk
        self.lens = None
        self.id = 0
        self.hist = [0] * 256
        self.since = 0

    def encode(self, xb, lv):
        """xb: int64 tensor of float32 bit patterns; lv: int64 tensor or None.
        Returns (payload bytes, flags, expected decoded bits as int64 tensor)."""
        n = xb.numel()
        nt = self.ntheta
        e = (xb >> 23) & 0xFF
        s = (xb >> 31) & 1
        m = xb & 0x7FFFFF
        L = torch.zeros(n, dtype=torch.int64) if lv is None else lv.clone()
        L = torch.where((e >= 1) & (e <= 254), L, torch.zeros_like(L))
        cleared = xb & ~((torch.ones_like(L) << (6 * L)) - 1)
        want = torch.where(e == 0, xb & 0x80000000, torch.where(e == 255, xb, cleared))
        block = bytearray(b"GP") + bytes([1, nt])
        if n == 0:
            block += struct.pack("<IIQQ", 0, 0, 0, 0)
            return bytes(block), 0, want
        fh = torch.bincount(e, minlength=256).tolist()
        zsign = bool(((e == 0) & (s == 1)).any())
        rebuilt = carry = False
        if self.lens is None:
            source, rebuilt, carry = fh, True, True
        elif self.since >= self.every:
            source, rebuilt = self.hist, True
        else:
            source = None
        if source is not None:
            native = huffman_lengths(source)
            lens, codes, escape = limited_code(native, nt)
            check_against_native(native, lens, codes, escape, nt)
            carry = carry or lens != self.lens
        else:
            lens, codes, escape = limited_code(self.lens, nt)  # the held table
        table = struct.pack("<H", sum(1 for l in lens if l))
        for sym in range(256):
            if lens[sym]:
                table += bytes([sym, lens[sym]])
        tid = crc32c(table) if carry else self.id

        def bits_of(v, width):
            return format(v, "0%db" % width) if width else ""

        def pad(bitstr):
            bitstr += "0" * (-len(bitstr) % 8)
            return bytes(int(bitstr[i:i + 8], 2) for i in range(0, len(bitstr), 8))

        headers, datas, total = b"", b"", 0
        el, sl, ml, Ll = e.tolist(), s.tolist(), m.tolist(), L.tolist()
        nch = (n + self.chunk - 1) // self.chunk
        for c in range(nch):
            lo, hi = c * self.chunk, min(n, (c + 1) * self.chunk)
            es, ls, ms, nnz = "", "", "", 0
            for i in range(lo, hi):
                ex = el[i]
                if lens[ex]:
                    es += bits_of(codes[ex], lens[ex])
                else:
                    es += bits_of(escape, nt) + bits_of(ex, 8)
                if ex:
                    nnz += 1
                    ls += bits_of(Ll[i], 2)
                    ms += bits_of(((sl[i] << 23) | ml[i]) >> (6 * Ll[i]), 24 - 6 * Ll[i])
                elif zsign:
                    ms += str(sl[i])
            bits = len(es) + len(ls) + len(ms)
            total += bits
            headers += struct.pack("<IIIII", lo, hi - lo, bits, len(es), nnz)
            datas += pad(es) + pad(ls) + pad(ms)
        block += struct.pack("<IIQQ", tid, nch, total, 32 * n)
        payload = bytes(block) + (table if carry else b"") + headers + datas
        # commit
        if carry:
            self.lens, self.id = lens, tid
        if rebuilt:
            self.hist = [0] * 256
            self.since = 0
        self.hist = [a + b for a, b in zip(self.hist, fh)]
        self.since += 1
        return payload, (1 if carry else 0) | (2 if zsign else 0), want


# ---------------------------------------------------------------- data ------
def bits(x):
    return x.view(torch.int32).to(torch.int64) & 0xFFFFFFFF


def gradient(gen, n, scale, zeros):
    x = torch.randn(n, generator=gen) * scale
    x[torch.rand(n, generator=gen) < zeros] = 0.0
    return bits(x)


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures"
    gen = torch.Generator().manual_seed(20241120)
    out = []

    def rec(name, dtype, values):
        values = [int(v) if dtype == 1 else v for v in values]
        if dtype == 1:
            values = [v - (1 << 32) if v >= (1 << 31) else v for v in values]
            data = struct.pack("<%di" % len(values), *values)
        else:
            data = struct.pack("<%df" % len(values), *values)
        out.append((name, dtype, [len(values)], data))

    def levels(n):
        return torch.randint(0, 4, (n,), generator=gen, dtype=torch.int64)

    seqs = {}
    # A: n_theta 8, rebuild every 2 encodes, 256-value chunks
    a = []
    x0 = gradient(gen, 1000, 1e-3, 0.3)
    x0[7] = 0x80000000  # -0.0: ZSIGN
    x0[11] = 0x00000123  # a denormal
    a.append((x0, levels(1000)))
    a.append((gradient(gen, 600, 1e2, 0.1), None))  # unseen exponents: escapes
    a.append((gradient(gen, 700, 1e-3, 0.0), levels(700)))  # rebuilt from frames 0 and 1
    a.append((gradient(gen, 1, 1.0, 0.0), levels(1)))
    a.append((gradient(gen, 513, 1e-2, 0.5), levels(513)))  # rebuilt again
    seqs["A"] = ((8, 2, 256), a)
    # B: n_theta 3 (many escapes), specials, 64-value chunks, an empty tensor
    b = []
    xs = bits(torch.exp(torch.randn(300, generator=gen) * 20.0) * torch.sign(torch.randn(300, generator=gen)))
    special = [0x7F800000, 0xFF800000, 0x7FC00001, 0xFFA00000, 0x7F7FFFFF, 0x00000001, 0x807FFFFF, 0x80000000,
               0x00000000, 0x3F800000]
    for i, v in enumerate(special):
        xs[30 * i] = v
    b.append((xs, levels(300)))
    b.append((torch.zeros(0, dtype=torch.int64), None))
    b.append((gradient(gen, 200, 1e-3, 0.3), None))
    seqs["B"] = ((3, 50, 64), b)

    for name, ((nt, every, chunk), frames) in seqs.items():
        enc = Encoder(nt, every, chunk)
        rec(name + ".spec", 1, [nt, every, chunk])
        rec(name + ".frames", 1, [len(frames)])
        for k, (xb, lv) in enumerate(frames):
            pay, flags, want = enc.encode(xb, lv)
            n = xb.numel()
            p = "%s.%d." % (name, k)
            rec(p + "meta", 1, [n, lv is not None, flags, len(pay)])
            rec(p + "xb", 1, xb.tolist())
            if lv is not None:
                rec(p + "lv", 1, lv.tolist())
            rec(p + "want", 1, want.tolist())
            padded = pay + b"\0" * (-len(pay) % 4)
            rec(p + "pay", 1, list(struct.unpack("<%di" % (len(padded) // 4), padded)))
            print("%s frame %d: n=%d flags=%d payload %d bytes (%.2f bits/value)" %
                  (name, k, n, flags, len(pay), 8.0 * len(pay) / max(n, 1)))

    os.makedirs(outdir, exist_ok=True)
    path = os.path.join(outdir, "codec_gcomp.bin")
    with open(path, "wb") as f:
        f.write(MAGIC)
        f.write(struct.pack("<II", VERSION, len(out)))
        for nm, dtype, shape, data in out:
            nb = nm.encode()
            f.write(struct.pack("<I", len(nb)) + nb)
            f.write(struct.pack("<II", dtype, len(shape)))
            f.write(struct.pack("<%dI" % len(shape), *shape))
            f.write(data)
    print("wrote", path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
