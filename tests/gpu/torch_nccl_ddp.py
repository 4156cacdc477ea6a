#!/usr/bin/python3
"""PyTorch's own NCCL backend over libcoll's libnccl.so.2 (run with LD_PRELOAD set to it):
two ranks on GPU 0, torch.cuda.nccl.version() must report our 2.27.7, then one DDP step
whose averaged gradients are checked against the mean computed here."""
import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", rank=rank, world_size=2)
    version = torch.cuda.nccl.version()
    if version not in ((2, 27, 7), 22707):
        raise SystemExit(f"rank {rank}: torch.cuda.nccl.version() is {version}, not 2.27.7")
    model = torch.nn.Linear(16, 4).cuda()
    torch.manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p))
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[0])
    x = torch.full((8, 16), float(rank + 1), device="cuda")
    ddp(x).sum().backward()
    # The gradient of sum(W x + b) over a batch of 8 rows of value v: dW = 8 v, db = 8.
    want_w = 8 * (1 + 2) / 2
    got_w = model.weight.grad
    if not torch.allclose(got_w, torch.full_like(got_w, want_w)):
        raise SystemExit(f"rank {rank}: weight grad {got_w.flatten()[:4]}, want {want_w}")
    if not torch.allclose(model.bias.grad, torch.full_like(model.bias.grad, 8.0)):
        raise SystemExit(f"rank {rank}: bias grad {model.bias.grad}")
    if rank == 0:
        print(f"torch {torch.__version__} nccl {version}: 2-rank DDP step OK")
    dist.destroy_process_group()


def main():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(port,), nprocs=2, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
