"""Data-parallel training that survives SIGKILL of any rank (rank 0 included) without
restarting anyone, takes replacements in, uses every sample once, and can train
bit-identically whatever the kills: an example to copy (examples/README.md explains it).

Each step trains on a fixed global batch, samples [s*G, (s+1)*G) of a synthetic dataset,
sliced among the current members. After the gradients are summed, every member calls
torch_coll.agree() (libcoll's coll_comm_agree: the same answer on every live member, also
after a failed call). The step is committed (optimizer.step) only when every member
succeeded; otherwise the members agree on who failed, decide the new membership (the
survivors plus the replacements waiting) through the store, first writer wins, make a new
communicator with PyTorch's dist._reconfigure, hand the training state to the newcomers
(hash checked) and redo the step. Replacements are also taken at a step boundary that
every member agrees on (a bit of the agreement's flag), without a failure.

Launch it with collrun (--replace starts a replacement for a dead rank) or with one
torchrun per rank (--max-restarts restarts only that rank's worker); the store must
outlive every rank (--store). Lines on stdout, each with a wall-clock time (time.time()):
  STEP <s> t=<time> world=<n> ...      a committed step (printed by rank 0)
  FAILURE t=<time> step=<s> ...        a failed step seen (rank 0, or the lowest survivor)
  GROW t=<time> step=<s> ...           replacements to take in after step s-1 (rank 0)
  RECOVERED t=<time> step=<s> ...      the new membership has the state (rank 0)
  JOINED t=<time> ...                  a replacement admitted (the replacement)
  FINAL step=<s> params_sha256=<hex>   at the end, on every member
"""
import argparse
import datetime
import hashlib
import io
import json
import math
import os
import signal
import sys
import time

# PyTorch's flight recorder dumps a trace at a process's first failure; with stack traces it
# takes seconds before the failure reaches this program (docs/pytorch.md).
os.environ.setdefault("TORCH_INCLUDE_STACK_TRACE", "0")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

import torch_coll  # noqa: E402,F401  (registers the "coll" backend)

KEY = "elastic_ddp/"   # this program's keys on the store, beside PyTorch's and libcoll's
STEP_OK = 1            # agreement flag bits: AND over the members
NO_JOINER_SEEN = 2     # AND of "saw none" is 0 when any member saw a replacement waiting
INPUT, HIDDEN = 16, 32


class Fatal(Exception):
    """A problem no membership change fixes (bad state, misuse): the process stops."""


def say(line):
    print(line, flush=True)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=200, help="steps to train (default 200)")
    p.add_argument("--shards", type=int, default=12,
                   help="the global batch is this many fixed shards (default 12) ...")
    p.add_argument("--shard-size", type=int, default=4, help="... of this many samples each")
    p.add_argument("--lr", type=float, default=1e-2, help="Adam's learning rate")
    p.add_argument("--seed", type=int, default=1, help="dataset and initial model seed")
    p.add_argument("--bit-identical", action="store_true",
                   help="sum each shard's gradient exactly (int64 fixed point), so the result "
                        "does not depend on the members or the kills; default: DDP's float "
                        "average")
    p.add_argument("--store", default="env",
                   help="env (init_process_group's env://: collrun's store, torchrun's agent store), file:PATH "
                        "(a fresh file per job) or tcp:HOST:PORT (a TCPStore hosted by a "
                        "process that is no rank: --host-store)")
    p.add_argument("--rank", type=int, help="this process's rank at the start (default $RANK)")
    p.add_argument("--world", type=int, help="ranks at the start (default $WORLD_SIZE)")
    p.add_argument("--timeout", type=float, default=30.0,
                   help="seconds a collective, the agreement or the store may wait (default 30)")
    p.add_argument("--reconfigure-timeout", type=float, default=5.0,
                   help="seconds a new membership may take to meet (default 5; a member lost "
                        "after the agreement costs this much, then the members decide again)")
    p.add_argument("--join-timeout", type=float, default=600.0,
                   help="seconds a replacement waits to be taken in (default 600)")
    p.add_argument("--step-delay", type=float, default=0.0,
                   help="seconds of simulated compute per step (default 0)")
    p.add_argument("--wait-for-replacements", type=float, default=0.0, metavar="SEC",
                   help="after losing a rank, wait up to SEC seconds at the next step boundary "
                        "for a replacement rather than training on with fewer (default 0)")
    p.add_argument("--sample-log", help="append every committed step's sample ids here")
    p.add_argument("--checkpoint", help="the restart-from-checkpoint reference: load this file "
                   "at start if it exists, rank 0 saves it every --checkpoint-every steps")
    p.add_argument("--checkpoint-every", type=int, default=10)
    p.add_argument("--host-store", type=int, metavar="PORT",
                   help="only host a TCPStore on PORT for --store tcp: (until killed)")
    a = p.parse_args(argv)
    if a.host_store is None:
        if a.steps < 1 or a.shards < 1 or a.shard_size < 1:
            p.error("--steps, --shards and --shard-size must be positive")
        a.rank = a.rank if a.rank is not None else int(os.environ.get("RANK", "-1"))
        a.world = a.world if a.world is not None else int(os.environ.get("WORLD_SIZE", "0"))
        if a.world < 1 or not 0 <= a.rank < a.world:
            p.error("rank %d of %d: give --rank/--world or $RANK/$WORLD_SIZE" % (a.rank, a.world))
        if not (a.store == "env" or a.store.startswith(("file:", "tcp:"))):
            p.error("--store %s: env, file:PATH or tcp:HOST:PORT" % a.store)
    return a


def host_store(port):
    store = dist.TCPStore("0.0.0.0", port, is_master=True, wait_for_workers=False,
                          timeout=datetime.timedelta(seconds=60))
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    say("store listening on port %d (SIGINT or SIGTERM stops it)" % store.port)
    signal.sigwait({signal.SIGINT, signal.SIGTERM})


def open_store(a):
    """The store every process of the job meets at: it must outlive every rank."""
    timeout = datetime.timedelta(seconds=a.timeout)
    if a.store.startswith("file:"):
        return dist.FileStore(a.store[5:], -1)  # -1: never deleted by a departing process
    if a.store.startswith("tcp:"):
        host, _, port = a.store[4:].rpartition(":")
        return dist.TCPStore(host, int(port), is_master=False, timeout=timeout)
    return None  # env://: init_process_group makes it


def is_replacement(a):
    """collrun --replace marks its replacements; torchrun restarts a worker with a restart
    count. With --store env under torchrun every rank restarts (on a fresh store), so
    nobody joins a running job."""
    if os.environ.get("COLL_ELASTIC_JOIN") == "1":
        return True
    return a.store != "env" and int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")) > 0


# ---- data and model: synthetic, deterministic, no downloads -----------------------------

def teacher(a):
    """The function the synthetic samples follow."""
    return torch.randn(INPUT, 1, generator=torch.Generator().manual_seed(a.seed))


def step_samples(a, step, w):
    """Samples [step*G, (step+1)*G) of the synthetic dataset, made when needed (the same
    on every process: a generator seeded by the step), so no process holds it all."""
    g = torch.Generator().manual_seed(a.seed * 1000003 + step + 1)
    x = torch.randn(a.shards * a.shard_size, INPUT, generator=g)
    y = torch.tanh(x @ w) + 0.1 * torch.randn(a.shards * a.shard_size, 1, generator=g)
    return x, y


def make_model(a):
    torch.manual_seed(a.seed)
    return torch.nn.Sequential(torch.nn.Linear(INPUT, HIDDEN), torch.nn.Tanh(),
                               torch.nn.Linear(HIDDEN, 1))


def batch_ids(a, step, rank, world):
    """The sample ids this rank trains on at `step`: the step's shards k with k % world ==
    rank (every sample of the global batch on exactly one member)."""
    base = step * a.shards * a.shard_size
    return [[base + k * a.shard_size + i for i in range(a.shard_size)]
            for k in range(rank, a.shards, world)]


def params_sha256(model):
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def state_sha256(model, opt, step):
    """What every member must hold alike: the step, the parameters, the optimizer state."""
    h = hashlib.sha256(str(step).encode())
    h.update(params_sha256(model).encode())
    for i, p in enumerate(model.parameters()):
        for name, value in sorted(opt.state.get(p, {}).items()):
            h.update(("%d.%s" % (i, name)).encode())
            h.update(value.detach().contiguous().numpy().tobytes() if torch.is_tensor(value)
                     else repr(value).encode())
    return h.digest()


# ---- one step's gradients ---------------------------------------------------------------

def gradients_float(a, ddp, data, shards):
    """Default mode: DDP averages over the members; the loss is scaled so that the average
    is the global batch's mean loss whatever the slice sizes."""
    total = a.shards * a.shard_size
    x, y = data
    ids = torch.tensor([i % total for shard in shards for i in shard], dtype=torch.long)
    world = dist.get_world_size()
    loss = torch.nn.functional.mse_loss(ddp(x[ids]), y[ids], reduction="sum") * (world / total)
    loss.backward()  # DDP all-reduces the gradients during backward


def gradients_exact(a, model, data, shards):
    """--bit-identical: each shard's gradient alone, then their sum in int64 fixed point (an
    all-reduce MAX for the common scale, an all-reduce SUM of integers, which is exact): the
    same bits whichever member computed which shard and in what order they are added."""
    x, y = data
    params = list(model.parameters())
    total = a.shards * a.shard_size
    per_shard = []
    for shard in shards:
        ids = torch.tensor(shard, dtype=torch.long) % total  # within the step's samples
        grads = torch.autograd.grad(
            torch.nn.functional.mse_loss(model(x[ids]), y[ids], reduction="sum") / total, params)
        per_shard.append(torch.cat([g.reshape(-1) for g in grads]).double())
    size = sum(p.numel() for p in params)
    biggest = torch.zeros(1, dtype=torch.float64)
    for g in per_shard:
        biggest = torch.maximum(biggest, g.abs().max().reshape(1))
    dist.all_reduce(biggest, op=dist.ReduceOp.MAX)
    exact = torch.zeros(size, dtype=torch.int64)
    shift = 0
    if biggest.item() > 0:
        # |g| < 2**e; the sum of up to 2**c shards stays below 2**62.
        e = math.frexp(biggest.item())[1]
        shift = 62 - e - math.ceil(math.log2(a.shards))
        for g in per_shard:
            exact += torch.round(torch.ldexp(g, torch.tensor(float(shift),
                                                              dtype=torch.float64))).long()
    dist.all_reduce(exact)
    summed = torch.ldexp(exact.double(), torch.tensor(float(-shift), dtype=torch.float64))
    offset = 0
    for p in params:
        p.grad = summed[offset:offset + p.numel()].reshape(p.shape).to(p.dtype)
        offset += p.numel()


# ---- the state handed to newcomers ------------------------------------------------------

def sync_state(model, opt, step, has_state):
    """Collective over the new membership: the lowest rank that holds the state sends it to
    every member whose state hash differs (a newcomer: all of it); every member checks the
    hash. Returns the step."""
    rank, world = dist.get_rank(), dist.get_world_size()
    src = torch.tensor([rank if has_state else world], dtype=torch.int64)
    dist.all_reduce(src, op=dist.ReduceOp.MIN)
    src = int(src.item())
    if src == world:
        raise Fatal("no member holds the training state (every member is new)")
    mine = state_sha256(model, opt, step) if has_state else bytes(32)
    digest = torch.frombuffer(bytearray(mine), dtype=torch.uint8).clone()
    dist.broadcast(digest, group_src=src)
    need = torch.tensor([int(bytes(digest.tolist()) != mine)], dtype=torch.int64)
    dist.all_reduce(need, op=dist.ReduceOp.MAX)
    if need.item():
        blob = io.BytesIO()
        if rank == src:
            torch.save({"step": step, "model": model.state_dict(), "optim": opt.state_dict()},
                       blob)
        length = torch.tensor([blob.getbuffer().nbytes], dtype=torch.int64)
        dist.broadcast(length, group_src=src)
        payload = torch.zeros(int(length.item()), dtype=torch.uint8)
        if rank == src:
            payload.copy_(torch.frombuffer(bytearray(blob.getvalue()), dtype=torch.uint8))
        dist.broadcast(payload, group_src=src)
        if rank != src and bytes(digest.tolist()) != mine:
            state = torch.load(io.BytesIO(payload.numpy().tobytes()), weights_only=True)
            model.load_state_dict(state["model"])
            opt.load_state_dict(state["optim"])
            step = state["step"]
    if state_sha256(model, opt, step) != bytes(digest.tolist()):
        raise Fatal("the training state received does not match its hash")
    return step


# ---- membership: who trains --------------------------------------------------------------

class Membership:
    """The members (reconfigure handles, in rank order), the epoch (one per decided
    membership, the reconfigure uuid) and how many registered replacements were taken."""

    def __init__(self, a, store):
        self.a = a
        self.store = store
        self.handle = dist._get_reconfigure_handle()
        self.members = []
        self.epoch = 0
        self.consumed = 0
        # torchrun's restarts of every worker (--store env) reuse the group's store: the
        # reconfigure uuids (claimed there) of each attempt are its own.
        self.uuid_base = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")) << 32 \
            if a.store == "env" else 0

    def reconfigure(self, members):
        dist._reconfigure(self.uuid_base + self.epoch, members,
                          timeout=datetime.timedelta(seconds=self.a.reconfigure_timeout)).wait()
        self.members = members

    def start(self):
        """The ranks of the start: each publishes its handle; epoch 0 is all of them."""
        s, a = self.store, self.a
        if a.rank == 0:
            owner = s.compare_set(KEY + "owner", "", self.handle).decode()
            if owner != self.handle:
                raise Fatal("the store was used by another job already: give a fresh one")
        s.set(KEY + "start/%d" % a.rank, self.handle)
        self.reconfigure([s.get(KEY + "start/%d" % r).decode() for r in range(a.world)])

    def joiners_waiting(self):
        return int(self.store.add(KEY + "joiners", 0)) > self.consumed

    def change(self, failed):
        """Every member calls this with the same agreed failed ranks: the first member to
        write epoch+1's membership decides it (survivors in rank order, then the
        replacements registered so far), all adopt it and reconfigure. True on success; on
        failure the members stay on the current communicator (the next agreement decides
        again) and the replacements of the failed attempt register again."""
        s = self.store
        self.epoch += 1
        survivors = [h for r, h in enumerate(self.members) if r not in failed]
        registered = int(s.add(KEY + "joiners", 0))
        newcomers = []
        for i in range(self.consumed, registered):
            try:  # registered but dead before it wrote its handle: left out
                s.wait([KEY + "joiner/%d" % i], datetime.timedelta(seconds=2))
                newcomers.append((i, s.get(KEY + "joiner/%d" % i).decode()))
            except RuntimeError:
                pass
        proposal = json.dumps({"members": survivors + [h for _, h in newcomers],
                               "admitted": [i for i, _ in newcomers], "consumed": registered})
        decided = json.loads(s.compare_set(KEY + "epoch/%d" % self.epoch, "", proposal))
        self.consumed = decided["consumed"]
        for i in decided["admitted"]:
            s.set(KEY + "admitted/%d" % i, str(self.epoch))
        try:
            self.reconfigure(decided["members"])
            return True
        except RuntimeError as e:
            say("RECONFIGURE failed t=%.6f epoch=%d: %s" % (time.time(), self.epoch,
                                                             str(e).splitlines()[0][:200]))
            return False

    def join(self):
        """A replacement: register, wait to be admitted at some epoch, reconfigure into it;
        again if that attempt fails. False when the job ended first."""
        s = self.store
        while True:
            i = int(s.add(KEY + "joiners", 1)) - 1
            s.set(KEY + "joiner/%d" % i, self.handle)
            give_up = time.monotonic() + self.a.join_timeout
            while not s.check([KEY + "admitted/%d" % i]):
                if s.check([KEY + "done"]):
                    return False
                if time.monotonic() > give_up:
                    raise Fatal("not admitted within --join-timeout %g s: is the job "
                                "running?" % self.a.join_timeout)
                time.sleep(0.05)
            self.epoch = int(s.get(KEY + "admitted/%d" % i))
            decided = json.loads(s.get(KEY + "epoch/%d" % self.epoch))
            self.consumed = decided["consumed"]
            try:
                self.reconfigure(decided["members"])
                return True
            except RuntimeError as e:
                say("JOIN attempt failed at epoch %d: %s" % (self.epoch,
                                                            str(e).splitlines()[0][:200]))


# ---- the loop ----------------------------------------------------------------------------

def kill_points():
    """Test hook: EXAMPLE_KILL_AT="STEP:RANK[:recovery],..." makes the process that is group
    rank RANK at step STEP SIGKILL itself (at the step's start, or during the recovery that
    follows a failed STEP), once per entry in the whole job."""
    points = {}
    for entry in filter(None, os.environ.get("EXAMPLE_KILL_AT", "").split(",")):
        parts = entry.split(":")
        points[(int(parts[0]), int(parts[1]), parts[2] if len(parts) > 2 else "step")] = entry
    return points


def maybe_kill(store, points, step, where):
    entry = points.get((step, dist.get_rank(), where))
    if entry and int(store.add(KEY + "killed/" + entry, 1)) == 1:
        say("KILL t=%.6f step=%d rank=%d (%s): SIGKILL myself" % (time.time(), step,
                                                                dist.get_rank(), where))
        os.kill(os.getpid(), signal.SIGKILL)


def log_samples(a, step, shards):
    if a.sample_log:
        line = "%d %d %d %s\n" % (step, dist.get_world_size(), dist.get_rank(),
                                  ",".join(str(i) for shard in shards for i in shard))
        fd = os.open(a.sample_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())  # one write per line: lines of ranks do not mix
        finally:
            os.close(fd)


def train(a):
    torch.set_num_threads(1)  # the same arithmetic on every process (--bit-identical)
    store = open_store(a)
    timeout = datetime.timedelta(seconds=a.timeout)
    if store is None:
        dist.init_process_group("coll", init_method="env://", rank=a.rank, world_size=a.world,
                                timeout=timeout, enable_reconfigure=True)
        # torchrun restarts every worker on the same agent store: keys of this attempt only
        store = dist.PrefixStore("attempt%s/" % os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"),
                                 dist.distributed_c10d._get_default_store())
    else:
        dist.init_process_group("coll", store=store, rank=a.rank, world_size=a.world,
                                timeout=timeout, enable_reconfigure=True)
    w = teacher(a)
    model = make_model(a)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    step = 0
    if a.checkpoint and os.path.exists(a.checkpoint):
        state = torch.load(a.checkpoint, weights_only=True)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optim"])
        step = state["step"]
        say("RESUMED t=%.6f step=%d from %s" % (time.time(), step, a.checkpoint))
    members = Membership(a, store)
    has_state = not is_replacement(a)
    if has_state:
        members.start()
    elif not members.join():
        say("the job ended before this replacement was needed")
        return
    else:
        say("JOINED t=%.6f rank=%d world=%d" % (time.time(), dist.get_rank(),
                                                dist.get_world_size()))
    points = kill_points()
    need_sync, ddp, wait_until = True, None, 0.0
    while step < a.steps:
        # A policy, not a protocol step: members that see a replacement sooner than
        # others only make the agreement take it in sooner.
        while (dist.get_world_size() < a.world and time.monotonic() < wait_until and
               not members.joiners_waiting()):
            time.sleep(0.05)
        ok, shards = True, []
        try:
            if need_sync:
                step = sync_state(model, opt, step, has_state)
                has_state = True
                if not a.bit_identical:
                    ddp = DistributedDataParallel(model)
            maybe_kill(store, points, step, "step")
            opt.zero_grad(set_to_none=True)
            shards = batch_ids(a, step, dist.get_rank(), dist.get_world_size())
            if a.step_delay:
                time.sleep(a.step_delay)
            data = step_samples(a, step, w)
            if a.bit_identical:
                gradients_exact(a, model, data, shards)
            else:
                gradients_float(a, ddp, data, shards)
        except RuntimeError as e:
            ok = False
            error = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
        flag = (STEP_OK if ok else 0) | (0 if members.joiners_waiting() else NO_JOINER_SEEN)
        agreed, failed, _ = torch_coll.agree(flag=flag)
        if agreed & STEP_OK:
            opt.step()
            log_samples(a, step, shards)
            if need_sync and members.epoch > 0 and dist.get_rank() == 0:
                say("RECOVERED t=%.6f step=%d world=%d epoch=%d" % (
                    time.time(), step, dist.get_world_size(), members.epoch))
            need_sync = False
            if dist.get_rank() == 0:
                say("STEP %d t=%.6f world=%d" % (step, time.time(), dist.get_world_size()))
            step += 1
            if a.checkpoint and dist.get_rank() == 0 and step % a.checkpoint_every == 0:
                torch.save({"step": step, "model": model.state_dict(),
                            "optim": opt.state_dict()}, a.checkpoint + ".tmp")
                os.replace(a.checkpoint + ".tmp", a.checkpoint)
            if agreed & NO_JOINER_SEEN:
                continue
        if dist.get_rank() == 0 or (failed and dist.get_rank() == min(
                set(range(dist.get_world_size())) - set(failed))):
            if agreed & STEP_OK:
                say("GROW t=%.6f step=%d world=%d: replacements waiting" % (
                    time.time(), step, dist.get_world_size()))
            else:
                say("FAILURE t=%.6f step=%d failed_ranks=%s world=%d %s" % (
                    time.time(), step, failed, dist.get_world_size(),
                    "error: " + error if not ok else "a peer's step failed"))
        maybe_kill(store, points, step, "recovery")
        ddp = None
        if failed:
            wait_until = time.monotonic() + a.wait_for_replacements
        members.change(set(failed))
        need_sync = True  # on the new communicator, or the old one if that attempt failed
    store.set(KEY + "done", "1")  # replacements still waiting go home
    say("FINAL step=%d world=%d params_sha256=%s" % (step, dist.get_world_size(),
                                                     params_sha256(model)))
    dist.destroy_process_group()


def main():
    a = parse_args(sys.argv[1:])
    if a.host_store is not None:
        return host_store(a.host_store)
    try:
        train(a)
    except Fatal as e:
        say("FATAL: %s" % e)
        sys.exit(2)


if __name__ == "__main__":
    main()
