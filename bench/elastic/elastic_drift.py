#!/usr/bin/env python3
"""How far train --elastic's default mode ends from an undisturbed run when a rank dies.

The default mode lets each rank accumulate its shards' gradients and all-reduces the sums:
a lost rank changes how the floats are grouped, so the step's gradient differs in its last
bits, and SGD carries that difference on to every later step. This runs, on Fashion-MNIST
(784-256-256-10, --batch 64 --shards 8, the elastic bench's model), an undisturbed run
and runs where the last rank is SIGKILLed in step K (TRAIN_TEST_DIE_AT), each writing its
final --checkpoint, and prints per run: the largest parameter difference to the
undisturbed run, its root mean square, the largest parameter, and the test accuracy of
both (computed here from the checkpoints). Also an undisturbed run on one rank fewer: the
same regrouping from step 0, without any failure.

The accuracy needs numpy (the PyTorch venv of ./dev has it); without it only the
parameters are compared.
  bench/elastic/elastic_drift.py [--build build] [--ranks 3] [--epochs 3] [--kills 5,50,150,330]
                                 [--lr-schedule cosine|constant]
"""
import argparse
import array
import gzip
import math
import os
import re
import struct
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    np = None

DATA = "/usr/share/datasets/fashion-mnist"
DIMS = (784, 256, 256, 10)
MEAN, STD = 0.2860, 0.3530


def read_params(path):
    """The flat parameters and, with numpy, per layer (W out x in, b), from a checkpoint:
    SGD's parameters, momentum, CRC-32."""
    n = sum(DIMS[i] * DIMS[i + 1] + DIMS[i + 1] for i in range(len(DIMS) - 1))
    data = open(path, "rb").read()
    start = len(data) - 4 - 2 * n * 4
    flat = array.array("f", data[start:start + n * 4])
    if np is None:
        return flat, None
    flat = np.frombuffer(data[start:start + n * 4], dtype=np.float32)
    layers, off = [None] * (len(DIMS) - 1), 0
    for i in reversed(range(len(DIMS) - 1)):  # stored last layer first
        nw = DIMS[i] * DIMS[i + 1]
        layers[i] = (flat[off:off + nw].reshape(DIMS[i + 1], DIMS[i]),
                     flat[off + nw:off + nw + DIMS[i + 1]])
        off += nw + DIMS[i + 1]
    return flat, layers


def test_set():
    with gzip.open(os.path.join(DATA, "t10k-images-idx3-ubyte.gz")) as f:
        _, n, rows, cols = struct.unpack(">IIII", f.read(16))
        x = np.frombuffer(f.read(), dtype=np.uint8).reshape(n, rows * cols)
    with gzip.open(os.path.join(DATA, "t10k-labels-idx1-ubyte.gz")) as f:
        f.read(8)
        y = np.frombuffer(f.read(), dtype=np.uint8)
    return (x.astype(np.float32) / 255.0 - MEAN) / STD, y


def accuracy(layers, x, y):
    if np is None:
        return float("nan")
    a = x
    for i, (w, b) in enumerate(layers):
        a = a @ w.T + b
        if i < len(layers) - 1:
            a = np.maximum(a, 0.0)
    return float((a.argmax(axis=1) == y).mean())


def run(args, tmp, name, ranks, die=None):
    ck = os.path.join(tmp, name)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAIN_TEST_")}
    env.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    if die is not None:
        env["TRAIN_TEST_DIE_AT"] = "%d:%d" % (ranks - 1, die)
    cmd = [os.path.join(args.build, "tools/collrun"), "-n", str(ranks), "--elastic", "--timeout",
           "1800", os.path.join(args.build, "tools/train"), "--elastic", "--data", DATA,
           "--no-eval", "--quiet", "--batch", "64", "--shards", "8", "--epochs",
           str(args.epochs), "--blas-threads", "1", "--lr-schedule", args.lr_schedule,
           "--checkpoint", ck]
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    done = re.findall(r"done at step (\d+), params hash (\w+)", p.stdout)
    if p.returncode != 0 or not done:
        sys.exit("%s: collrun exit %d\n%s" % (name, p.returncode, p.stdout[-3000:]))
    return ck, int(done[0][0])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(os.path.dirname(__file__), "../../build"))
    ap.add_argument("--ranks", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--kills", default="5,50,150,330")
    ap.add_argument("--lr-schedule", default="cosine", help="train's --lr-schedule")
    args = ap.parse_args()
    x, y = test_set() if np is not None else (None, None)
    with tempfile.TemporaryDirectory(prefix="elastic_drift.") as tmp:
        ref, steps = run(args, tmp, "ref", args.ranks)
        p0, l0 = read_params(ref)
        acc0 = accuracy(l0, x, y)
        print("%d ranks, %d epochs = %d steps of 512 samples, %s learning rate; undisturbed: "
              "largest parameter %.3g, test accuracy %s"
              % (args.ranks, args.epochs, steps, args.lr_schedule, max(map(abs, p0)),
                 "%.2f%%" % (100 * acc0) if np is not None else "? (no numpy)"))
        cases = [("kill in step %d" % k, args.ranks, k) for k in map(int, args.kills.split(","))]
        cases.append(("%d ranks, undisturbed" % (args.ranks - 1), args.ranks - 1, None))
        for name, ranks, die in cases:
            ck, _ = run(args, tmp, re.sub(r"\W+", "_", name), ranks, die)
            p, layers = read_params(ck)
            d = [float(a) - float(b) for a, b in zip(p, p0)]
            acc = accuracy(layers, x, y)
            print("%-22s largest difference %.3g, rms %.3g%s"
                  % (name, max(map(abs, d)), math.sqrt(sum(v * v for v in d) / len(d)),
                     "; test accuracy %.2f%% (%+.2f points)" % (100 * acc, 100 * (acc - acc0))
                     if np is not None else ""))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
