#!/usr/bin/python3
"""Reference values for the dataset tests (tests/test_data_text.c, tests/test_data_folder.c).

Writes tests/fixtures/data_ref.bin:
  - antialiased bilinear resizes by torch.nn.functional.interpolate(mode="bilinear",
    align_corners=False, antialias=True) of small random images, cropped, windowed, flipped
    and normalized with the ImageNet mean/std (what datasets/transform.c must reproduce);
  - word-level tokenization of a generated text exactly as PyTorch's word_language_model
    data.py does it (file iteration in text mode, line.split() + ['<eos>']), with the
    vocabulary taken from the training file and other words mapped to <unk>;
  - batchify + get_batch windows of that stream for several (workers, worker, columns, bptt),
    the stream first cut into W contiguous equal parts (SBC section IV-A);
  - character-level ids (sorted distinct bytes) and the 90/10 train/validation split.

Run with /usr/bin/python3 (Debian python3-torch 1.13):  /usr/bin/python3 tests/ref/data_fixtures.py

File format (little-endian): magic "GCXDFIX1", u32 entry count, then per entry:
name (32 bytes, NUL-padded), u32 dtype (0 int32, 1 float32, 2 uint8), u32 count, data.
"""
import os
import random
import struct
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "data_ref.bin")
entries = []


def put(name, arr, dtype):
    arr = np.ascontiguousarray(np.asarray(arr).reshape(-1))
    code = {"int32": 0, "float32": 1, "uint8": 2}[dtype]
    arr = arr.astype(dtype)
    assert len(name) < 32
    entries.append((name, code, arr))


def write():
    with open(OUT, "wb") as f:
        f.write(b"GCXDFIX1")
        f.write(struct.pack("<I", len(entries)))
        for name, code, arr in entries:
            f.write(name.encode().ljust(32, b"\0"))
            f.write(struct.pack("<II", code, arr.size))
            f.write(arr.astype("<" + arr.dtype.str[1:]).tobytes())


# ---------------------------------------------------------------- resize
MEAN = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)

rng = np.random.default_rng(1234)
# H, W, y0, x0, h, w, OH, OW, oy0, ox0, oh, ow, flip
cases = [
    (37, 53, 0, 0, 37, 53, 7, 9, 0, 0, 7, 9, 0),        # downscale ~5x
    (5, 6, 0, 0, 5, 6, 13, 11, 0, 0, 13, 11, 1),        # enlarge, flipped
    (20, 8, 3, 1, 15, 6, 9, 15, 0, 0, 9, 15, 0),        # crop, shrink rows, enlarge cols
    (40, 30, 0, 0, 40, 30, 21, 16, 4, 1, 14, 14, 0),    # eval: short side 16, center 14
    (12, 10, 0, 0, 12, 10, 12, 10, 0, 0, 12, 10, 1),    # identity size, flipped
    (4, 400, 1, 7, 3, 390, 2, 5, 0, 1, 2, 3, 0),        # 78x horizontal shrink, window
    (33, 31, 2, 5, 29, 17, 24, 24, 0, 0, 24, 24, 1),    # random-resized-crop like
]
put("rs.count", [len(cases)], "int32")
for k, (H, W, y0, x0, h, w, OH, OW, oy0, ox0, oh, ow, flip) in enumerate(cases):
    img = rng.integers(0, 256, size=(H, W, 3), dtype=np.uint8)
    t = torch.from_numpy(img).permute(2, 0, 1)[None].float() / 255.0
    t = t[:, :, y0:y0 + h, x0:x0 + w]
    r = F.interpolate(t, size=(OH, OW), mode="bilinear", align_corners=False, antialias=True)
    r = r[0, :, oy0:oy0 + oh, ox0:ox0 + ow]
    if flip:
        r = torch.flip(r, dims=[2])
    r = (r - MEAN) / STD
    put("rs%d.img" % k, img, "uint8")
    put("rs%d.geom" % k, [H, W, 3, y0, x0, h, w, OH, OW, oy0, ox0, oh, ow, flip], "int32")
    put("rs%d.out" % k, r.numpy(), "float32")

# ---------------------------------------------------------------- word level text
random.seed(7)
lexicon = ["the", "a", "cat", "dog", "N", "$", "<unk>", "sat", "on", "mat", "'s", "ran", "x-y", "of", "and"]
seps = [" ", " ", " ", "  ", "\t", "\x0b", "\x0c", "\x1c", " \t "]
ends = ["\n", "\n", "\n", "\r\n", "\r"]


def gen_text(nlines, words, extra=()):
    lines = []
    for i in range(nlines):
        nw = random.choice([0, 1, 3, 5, 8, 12])
        ws = [random.choice(list(words) + list(extra)) for _ in range(nw)]
        s = random.choice(["", " ", "\t"])
        for j, wd in enumerate(ws):
            s += wd + (random.choice(seps) if j + 1 < nw else random.choice(["", " "]))
        lines.append(s + random.choice(ends))
    return "".join(lines)


train_text = " first line\n\n" + gen_text(150, lexicon) + "last line without newline"
valid_text = gen_text(30, lexicon, extra=["zzz", "unseen"])


def tokenize_pytorch(path, dictionary, add):
    """word_language_model/data.py Corpus.tokenize, with lookups for non-training files."""
    ids = []
    with open(path, "r", encoding="utf8") as f:
        for line in f:
            words = line.split() + ["<eos>"]
            for word in words:
                if add:
                    if word not in dictionary:
                        dictionary[word] = len(dictionary)
                    ids.append(dictionary[word])
                else:
                    ids.append(dictionary.get(word, dictionary["<unk>"]))
    return ids


with tempfile.TemporaryDirectory() as d:
    tp = os.path.join(d, "train.txt")
    vp = os.path.join(d, "valid.txt")
    with open(tp, "w", encoding="utf8", newline="") as f:
        f.write(train_text)
    with open(vp, "w", encoding="utf8", newline="") as f:
        f.write(valid_text)
    vocab = {}
    train_ids = tokenize_pytorch(tp, vocab, True)
    if "<unk>" not in vocab:
        vocab["<unk>"] = len(vocab)
    valid_ids = tokenize_pytorch(vp, vocab, False)

put("lm.train_text", np.frombuffer(train_text.encode(), dtype=np.uint8), "uint8")
put("lm.valid_text", np.frombuffer(valid_text.encode(), dtype=np.uint8), "uint8")
put("lm.train_ids", train_ids, "int32")
put("lm.valid_ids", valid_ids, "int32")
put("lm.V", [len(vocab)], "int32")


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    return data.view(bsz, -1).t().contiguous()


def get_batch(source, i, bptt):
    seq_len = min(bptt, len(source) - 1 - i)
    return source[i:i + seq_len], source[i + 1:i + 1 + seq_len]


lm_cfgs = [(1, 0, 4, 7), (2, 1, 3, 5), (3, 2, 5, 35), (4, 0, 2, 1)]
put("lm.ncfg", [len(lm_cfgs)], "int32")
stream = torch.tensor(train_ids, dtype=torch.long)
for k, (W, w, B, T) in enumerate(lm_cfgs):
    L = stream.size(0) // W
    part = stream[w * L:(w + 1) * L]  # SBC IV-A: contiguous 1/W of the training stream
    src = batchify(part, B)
    xs, ys, lens = [], [], []
    for i in range(0, src.size(0) - 1, T):
        x, y = get_batch(src, i, T)
        xs.append(x.reshape(-1))
        ys.append(y.reshape(-1))
        lens.append(x.size(0))
    put("lm.c%d.cfg" % k, [W, w, B, T], "int32")
    put("lm.c%d.x" % k, torch.cat(xs).numpy(), "int32")
    put("lm.c%d.y" % k, torch.cat(ys).numpy(), "int32")
    put("lm.c%d.lens" % k, lens, "int32")

# ---------------------------------------------------------------- character level
data = train_text.encode()
chars = sorted(set(data))
stoi = {c: i for i, c in enumerate(chars)}
n = len(data)
ntrain = int(n * 0.9)
put("ch.V", [len(chars)], "int32")
put("ch.train", [stoi[c] for c in data[:ntrain]], "int32")
put("ch.valid", [stoi[c] for c in data[ntrain:]], "int32")

write()
print("wrote %s (%d entries, %d bytes)" % (OUT, len(entries), os.path.getsize(OUT)))
