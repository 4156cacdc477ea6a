"""The torch.distributed backend "coll" on CUDA tensors (the GPU check, tests/gpu/run.sh):
two ranks sharing GPU 0 train a DDP MLP and an FSDP2 (fully_shard) transformer through
"cpu:gloo,cuda:coll", then through PyTorch's own "nccl" in the same processes; each run's
final parameters must equal one process training the same model on both ranks' data
(within TOL), and the step times of both backends are printed with their ratio.
NVIDIA's NCCL refuses two ranks on one GPU ("Duplicate GPU detected"): where it does, the
line says so and coll is checked against the one-process run alone.
    python3 tests/gpu/torch_coll_cuda.py          (torch_coll on PYTHONPATH; run.sh sets it)
Prints one line per model and backend, "TORCH-COLL-CUDA <model> <backend> PASS|FAIL|SKIP ...",
and exits 1 when a coll line failed."""
import datetime
import os
import socket
import statistics
import sys
import time
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

WORLD = 2
STEPS = 20
WARMUP = 3
TOL = 1e-4  # fp32 sums of two ranks' gradients in another order, over 20 SGD steps


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(),
                                          torch.nn.Linear(256, 256), torch.nn.ReLU(),
                                          torch.nn.Linear(256, 10))

    def forward(self, x):
        return self.layers(x)


def transformer():
    layer = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128,
                                             dropout=0.0, batch_first=True)
    return torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)


def batch(kind, rank, step):
    g = torch.Generator().manual_seed(1000 * step + rank)
    if kind == "ddp":
        return torch.randn(64, 784, generator=g), torch.randint(0, 10, (64,), generator=g)
    return torch.randn(8, 16, 64, generator=g), torch.randn(8, 16, 64, generator=g)


def loss_of(kind, model, x, y):
    out = model(x)
    if kind == "ddp":
        return torch.nn.functional.cross_entropy(out, y)
    return torch.nn.functional.mse_loss(out, y)


def fresh_model(kind):
    torch.manual_seed(1234)
    return (Mlp() if kind == "ddp" else transformer()).cuda()


def one_process(kind):
    """The reference: one process, both ranks' batches together (the mean of the two
    ranks' mean losses is the mean over the joined batch, as DDP and FSDP average)."""
    model = fresh_model(kind)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(STEPS):
        xs, ys = zip(*(batch(kind, r, step) for r in range(WORLD)))
        x, y = torch.cat(xs).cuda(), torch.cat(ys).cuda()
        loss_of(kind, model, x, y).backward()
        opt.step()
        opt.zero_grad()
    return {k: v.detach().cpu() for k, v in model.state_dict().items()}


def train(kind, rank):
    """One run on the current default group; returns (full parameters, step times in ms)."""
    model = fresh_model(kind)
    if kind == "ddp":
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[0])
    else:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        mesh = init_device_mesh("cuda", (WORLD,))
        for layer in model.layers:
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    times = []
    for step in range(STEPS):
        x, y = (t.cuda() for t in batch(kind, rank, step))
        torch.cuda.synchronize()
        start = time.perf_counter()
        loss_of(kind, model, x, y).backward()
        opt.step()
        opt.zero_grad()
        torch.cuda.synchronize()
        if step >= WARMUP:
            times.append((time.perf_counter() - start) * 1e3)
    state = {}
    module = model.module if kind == "ddp" else model
    for k, v in module.state_dict().items():
        v = v.full_tensor() if hasattr(v, "full_tensor") else v
        state[k] = v.detach().cpu()
    return state, times


def compare(got, want):
    worst = max((got[k] - want[k]).abs().max().item() for k in want)
    return worst <= TOL, worst


def worker(rank, ports, results):
    torch.cuda.set_device(0)
    import torch_coll  # noqa: F401  (registers "coll")
    out = {}
    for backend, port in zip(("cpu:gloo,cuda:coll", "nccl"), ports):
        name = "coll" if "coll" in backend else "nccl"
        try:
            dist.init_process_group(backend, init_method="tcp://127.0.0.1:%d" % port, rank=rank,
                                    world_size=WORLD, timeout=datetime.timedelta(seconds=120))
            for kind in ("ddp", "fsdp2"):
                out[(kind, name)] = train(kind, rank)
            dist.destroy_process_group()
        except Exception:  # nccl refusing two ranks on one GPU lands here
            out[("error", name)] = traceback.format_exc().strip().splitlines()[-1]
            if dist.is_initialized():
                dist.destroy_process_group()
    if rank == 0:
        results.put(out)


def main():
    if not torch.cuda.is_available():
        print("TORCH-COLL-CUDA SKIP: no CUDA device")
        return 77
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    ports = (free_port(), free_port())  # one store for each backend's group
    procs = [ctx.Process(target=worker, args=(r, ports, results)) for r in range(WORLD)]
    for p in procs:
        p.start()
    try:
        out = results.get(timeout=600)
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
    print("torch %s, %s, 2 ranks on GPU 0" % (torch.__version__, torch.cuda.get_device_name(0)))
    bad = 0
    for kind in ("ddp", "fsdp2"):
        want = one_process(kind)
        coll_ms = None
        for name in ("coll", "nccl"):
            if (kind, name) not in out:
                print("TORCH-COLL-CUDA %s %s %s: %s" % (kind, name, "FAIL" if name == "coll"
                      else "SKIP", out.get(("error", name), "did not run")))
                bad += name == "coll"
                continue
            state, times = out[(kind, name)]
            ok, worst = compare(state, want)
            ms = statistics.median(times)
            line = "TORCH-COLL-CUDA %s %s %s max |diff| %.2e vs one process, step %.3f ms" % (
                kind, name, "PASS" if ok else "FAIL", worst, ms)
            if name == "coll":
                coll_ms = ms
                bad += not ok
            elif coll_ms:
                line += " (nccl/coll step time %.2fx)" % (ms / coll_ms)
            print(line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
