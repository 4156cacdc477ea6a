#!/usr/bin/python3
"""PyTorch DDP reference for bench/training/ddp_compare.sh: the same 784-256-256-10 MLP, SGD
with momentum, per-rank batch, DistributedSampler on CPU, one thread per rank, over
PyTorch's gloo or (--backend coll) libcoll's torch_coll backend: the script is the same
but for that one word. Prints one line 'torch_ddp backend=B ranks=N steps=S
samples_per_s=X' from rank 0."""
import argparse
import gzip
import os
import socket
import struct
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data.distributed import DistributedSampler


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    zero, dtype, ndims = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    dims = struct.unpack(">" + "I" * ndims, data[4:4 + 4 * ndims])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndims).reshape(dims)


def find(data_dir, name):
    for candidate in (name + ".gz", name):
        path = os.path.join(data_dir, candidate)
        if os.path.exists(path):
            return path
    raise FileNotFoundError(f"{data_dir}: no {name}[.gz]")


def worker(rank, args):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(args.port)
    if args.backend == "coll":
        sys.path.insert(0, os.path.join(args.build, "torch_coll"))
        import torch_coll  # noqa: F401  (registers the "coll" backend)
    dist.init_process_group(args.backend, rank=rank, world_size=args.nproc)
    images = read_idx(find(args.data, "train-images-idx3-ubyte"))
    labels = read_idx(find(args.data, "train-labels-idx1-ubyte"))
    # Same normalisation as libtrain: (x/255 - mean) / std, done once up front.
    x_all = (torch.from_numpy(images.reshape(len(images), -1).astype(np.float32)) / 255.0
             - 0.2860) / 0.3530
    y_all = torch.from_numpy(labels.astype(np.int64))
    torch.manual_seed(args.seed)
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                          nn.Linear(256, 10))
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    sampler = DistributedSampler(range(len(x_all)), num_replicas=args.nproc, rank=rank,
                                 shuffle=True, seed=args.seed)
    steps_done, epoch, start = 0, 0, None
    while steps_done < args.steps + args.warmup:
        sampler.set_epoch(epoch)
        indices = torch.tensor(list(iter(sampler)))
        for first in range(0, len(indices), args.batch):
            if steps_done == args.warmup:
                dist.barrier()
                start = time.perf_counter()
            if steps_done == args.steps + args.warmup:
                break
            idx = indices[first:first + args.batch]
            xb, yb = x_all[idx], y_all[idx]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(ddp(xb), yb)
            loss.backward()
            opt.step()
            steps_done += 1
        epoch += 1
    dist.barrier()
    elapsed = time.perf_counter() - start
    if rank == 0:
        rate = args.steps * args.batch * args.nproc / elapsed
        print(f"torch_ddp backend={args.backend} ranks={args.nproc} steps={args.steps} samples_per_s={rate:.0f} "
              f"final_loss={loss.item():.4f}", flush=True)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--nproc", type=int, default=1)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--backend", choices=("gloo", "coll"), default="gloo")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    p.add_argument("--build", default=os.path.join(root, "build"),
                   help="meson build directory holding torch_coll/ (for --backend coll)")
    args = p.parse_args()
    args.port = free_port()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    mp.spawn(worker, args=(args,), nprocs=args.nproc, join=True)


if __name__ == "__main__":
    main()
