#!/usr/bin/python3
"""PyTorch's own NCCL backend on GPU 0, two ranks sharing it: five DDP steps of a small
model, the final parameters checked against one process applying the mean of both ranks'
gradients, and saved for nccl_check.sh to compare between libraries. Which libnccl.so.2
runs is chosen outside (LD_PRELOAD for ours; none for the wheel's NVIDIA NCCL).
    torch_nccl_ddp.py OUT.pt [EXPECTED_RUNTIME_VERSION]   (e.g. 2.32.3)
get_runtime_nccl_version() (ncclGetVersion) must then be that version; torch.cuda.nccl
.version() is the header torch was built with and is only printed. NVIDIA's NCCL refuses
two ranks on one GPU ("Duplicate GPU detected"): then this exits 3 saying so."""
import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

WORLD, STEPS, LR, TOL = 2, 5, 0.1, 1e-5


def batch(rank, step):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(8, 16, generator=g)


def fresh_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))


def worker(rank, port, out, want_version):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", rank=rank, world_size=WORLD, device_id=torch.device("cuda", 0))
    from torch._C._distributed_c10d import ProcessGroupNCCL
    runtime = ".".join(map(str, ProcessGroupNCCL.get_runtime_nccl_version()))
    if want_version and runtime != want_version:
        raise SystemExit(f"rank {rank}: runtime NCCL {runtime}, want {want_version}")
    model = fresh_model().cuda()
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[0])
    opt = torch.optim.SGD(ddp.parameters(), lr=LR)
    for step in range(STEPS):
        opt.zero_grad()
        (ddp(batch(rank, step).cuda()) ** 2).mean().backward()
        opt.step()
    torch.cuda.synchronize()
    if rank == 0:
        torch.save({k: v.cpu() for k, v in model.state_dict().items()}, out)
        print(f"torch {torch.__version__}, runtime NCCL {runtime} (built against "
              f"{torch.cuda.nccl.version()}), {torch.cuda.get_device_name(0)}")
    dist.destroy_process_group()


def one_process():
    """The same steps in one process: each step's gradient is the mean of both ranks'."""
    model = fresh_model()
    for step in range(STEPS):
        grads = []
        for rank in range(WORLD):
            model.zero_grad()
            (model(batch(rank, step)) ** 2).mean().backward()
            grads.append([p.grad.clone() for p in model.parameters()])
        with torch.no_grad():
            for i, p in enumerate(model.parameters()):
                p -= LR * sum(g[i] for g in grads) / WORLD
    return model.state_dict()


def main():
    out = sys.argv[1]
    want = sys.argv[2] if len(sys.argv) > 2 else ""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    try:
        mp.spawn(worker, args=(port, out, want), nprocs=WORLD, join=True)
    except Exception as e:  # a rank's failure, with its traceback's last line
        msg = str(e).strip().splitlines()
        text = "\n".join(msg[-6:])
        print(text)
        if "Duplicate GPU" in str(e):
            print("NVIDIA's NCCL refuses two ranks on one GPU")
            return 3
        return 1
    got = torch.load(out)
    worst = max((got[k] - v).abs().max().item() for k, v in one_process().items())
    print(f"DDP {STEPS} steps, 2 ranks on GPU 0: max |diff| {worst:.2e} against one process")
    return 0 if worst <= TOL else 1


if __name__ == "__main__":
    sys.exit(main())
