"""Starting the "coll" backend the ways PyTorch programs do: torchrun (env://) with an
unchanged script, importing torch_coll twice, destroy_process_group followed by a second
init_process_group (with a timeout) over a new store in the same processes, and (where the
group lives on torch's store, 2.10+) a group made again over torchrun's one agent store."""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import coll_harness  # noqa: E402

SCRIPT = r'''
import os, sys, datetime, importlib, torch, torch.distributed as dist
import torch_coll
importlib.reload(torch_coll)               # a second registration must not raise
import torch_coll as again                 # noqa: F401
dist.init_process_group("coll")            # env:// as torchrun sets it
rank, world = dist.get_rank(), dist.get_world_size()
assert dist.get_backend() == "coll", dist.get_backend()
t = torch.full((5,), float(rank + 1))
dist.all_reduce(t)
assert torch.equal(t, torch.full((5,), world * (world + 1) / 2.0)), t
dist.destroy_process_group()
if torch_coll.features().get("c10d_store"):
    # again over torchrun's one store: libcoll numbers the communicators made there
    dist.init_process_group("coll")
    t = torch.full((2,), float(rank))
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((2,), world * (world - 1) / 2.0)), t
    dist.destroy_process_group()
# a second default group in the same processes, over a store of its own (torch 1.13's
# store-based barrier cannot run twice in one store)
store = dist.TCPStore("127.0.0.1", int(os.environ["SECOND_STORE_PORT"]), world, rank == 0,
                      datetime.timedelta(seconds=20))
dist.init_process_group("coll", store=store, rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=20))
t = torch.full((3,), float(rank))
dist.broadcast(t, world - 1)
assert torch.equal(t, torch.full((3,), float(world - 1))), t
dist.destroy_process_group()
print("LAUNCH ok rank", rank, flush=True)
'''


def main():
    bad = 0
    for world in (2, 4):
        port = coll_harness.free_port()
        start = time.monotonic()
        path = os.path.join(os.environ.get("TMPDIR", "/tmp"),
                            "torch_coll_launch_%d.py" % os.getpid())
        with open(path, "w") as f:  # torchrun runs a file
            f.write(SCRIPT)
        # Debian's torchrun (torch 1.13) on Python 3.11 fails at its default --redirects 0
        # and --tee 0 (its Std flag lookup never matches 0); any other value works.
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(world),
               "--redirects", "2", "--tee", "2",
               "--master_addr", "127.0.0.1", "--master_port", str(port), path]
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                                 env=dict(os.environ, OMP_NUM_THREADS="1",
                                          SECOND_STORE_PORT=str(coll_harness.free_port())))
            text = out.stdout + out.stderr
            ok = out.returncode == 0 and text.count("LAUNCH ok") == world
        except subprocess.TimeoutExpired as e:
            ok, text = False, "timed out after 120 s: %s" % e
        finally:
            os.unlink(path)
        print("torchrun --nproc_per_node %d: %s, %.1f s" % (world, "ok" if ok else "FAILED",
                                                            time.monotonic() - start))
        if not ok:
            bad += 1
            print(text)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
