"""DTensor on the "coll" backend against gloo, in the same rank processes with the same data:
a DeviceMesh whose groups are coll (init_device_mesh("cpu", ...) over the default coll
group) beside the same mesh over gloo groups (init_device_mesh's backend_override).
World 4: a 2x2 mesh ("dp", "tp") and a 1-D mesh of 4; world 2: a 1-D mesh of 2.

- the coll mesh's groups run backend "coll" (and hold the ranks the mesh says);
- distribute_tensor from each dimension's first rank, every placement of Shard(0),
  Shard(1), Replicate on every mesh dimension;
- redistribute from every placement tuple to every other one (Shard(0), Shard(1),
  Replicate, Partial("sum") on each dimension: 256 pairs on the 2x2 mesh, 16 on a 1-D
  mesh), an even and an uneven shape, then full_tensor; Partial("avg"/"min"/"max"/
  "product") to Replicate and Shard on each dimension;
- tensor parallelism: parallelize_module with ColwiseParallel/RowwiseParallel on an MLP
  (on the 2x2 mesh: TP over "tp", each "dp" row its own half of the batch, gradients
  summed over "dp"), forward outputs and a backward's gradients against the unsharded
  module run on the whole batch.

Exactness: the tensors moved around are integer-valued (float32, small magnitudes) and the
MLP of the exact case is float64 with dyadic weights and inputs (multiples of 1/8 and 1/4
of small integers), so every sum and product is exact in any order: coll, gloo and the
unsharded module must agree bit for bit. A second MLP case uses random normal float32 data:
there the sharded module sums a row-wise matmul in another order than the unsharded one
(compared within rtol = atol = 1e-5), while coll and gloo must still agree exactly where
every reduction has two operands (a + b == b + a in IEEE arithmetic: the 2x2 mesh and world
2), and within float32's default tolerance on the 1-D mesh of 4 (where the two backends may
add four partial sums in different orders)."""
import itertools
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import coll_harness  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.distributed.device_mesh import init_device_mesh  # noqa: E402
from torch.distributed.tensor import (DTensor, Partial, Replicate, Shard,  # noqa: E402
                                      distribute_tensor)
from torch.distributed.tensor.parallel import (ColwiseParallel,  # noqa: E402
                                               RowwiseParallel, parallelize_module)

SHAPES = [(8, 12), (7, 5)]  # even on every mesh; uneven (torch.chunk's ragged shards)


def meshes(ctx):
    """{name: (coll mesh, gloo mesh)}, made once per process (every rank in the same order)."""
    if getattr(ctx, "meshes", None) is None:
        shapes = {"2x2": ((2, 2), ("dp", "tp")), "1d": ((ctx.world,), ("tp",))}
        if ctx.world != 4:
            del shapes["2x2"]
        ctx.meshes = {}
        for name, (shape, names) in shapes.items():
            coll = init_device_mesh("cpu", shape, mesh_dim_names=names)
            gloo = init_device_mesh("cpu", shape, mesh_dim_names=names,
                                    backend_override={n: "gloo" for n in names})
            ctx.meshes[name] = (coll, gloo)
    return ctx.meshes


def int_tensor(shape, seed, low=-8, high=9, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(low, high, shape, generator=g).to(dtype)


def partial_part(x, op, n, c, seed):
    """This rank's (coordinate c of n) part of x under Partial(op): the n parts reduce to x
    exactly. Every rank computes the same parts (the seed is the same everywhere)."""
    noise = [int_tensor(x.shape, seed * 10 + j, dtype=x.dtype) for j in range(n)]
    if op == "sum":
        parts = noise[:n - 1] + [x - sum(noise[:n - 1])]
    elif op == "avg":  # sum n * x: x + noise_j, the last takes the noise back
        parts = [x + e for e in noise[:n - 1]] + [x - sum(noise[:n - 1])]
    elif op == "max":
        parts = [x if j == n - 1 else x - e.abs() - 1 for j, e in enumerate(noise)]
    elif op == "min":
        parts = [x if j == 0 else x + e.abs() + 1 for j, e in enumerate(noise)]
    elif op == "product":  # signs that cancel: +-1 on all but the first, x times their product
        signs = [torch.where(e < 0, -1.0, 1.0).to(x.dtype) for e in noise[1:]]
        first = x
        for s in signs:
            first = first * s
        parts = [first] + signs
    else:
        raise ValueError(op)
    return parts[c]


def make_dtensor(mesh, placements, full, seed):
    """A DTensor whose global value is `full`, with the given placements (Partial ones as
    parts that reduce to it), built locally on every rank without communication."""
    x = full
    for dim, p in enumerate(placements):
        if p.is_partial():
            x = partial_part(x, p.reduce_op, mesh.size(dim), mesh.get_local_rank(dim), seed + dim)
    plain = [Replicate() if p.is_partial() else p for p in placements]
    local = distribute_tensor(x, mesh, plain, src_data_rank=None).to_local()
    return DTensor.from_local(local, mesh, placements, shape=full.shape, stride=full.stride())


def expected_local(mesh, placements, full):
    """The local shard of `full` for non-Partial placements (computed without communication)."""
    return distribute_tensor(full, mesh, placements, src_data_rank=None).to_local()


def describe(placements):
    return "[" + ", ".join(str(p) for p in placements) + "]"


def call_both(fn, coll_mesh, gloo_mesh):
    """fn(mesh) on gloo's mesh and on coll's: both results, or both errors (which must be the
    same: such a refusal is DTensor's, before any backend sees the call)."""
    out = []
    for mesh in (gloo_mesh, coll_mesh):
        try:
            out.append((fn(mesh), None))
        except (RuntimeError, ValueError, NotImplementedError, AssertionError) as e:
            out.append((None, e))
    (want, want_err), (got, got_err) = out
    if want_err is not None or got_err is not None:
        assert want_err is not None and got_err is not None and \
            (type(want_err), str(want_err)) == (type(got_err), str(got_err)), \
            "gloo: %r, coll: %r" % (want_err, got_err)
        return None, None, want_err
    return want, got, None


def mesh_groups_run_coll(ctx):
    for name, (coll, gloo) in meshes(ctx).items():
        for dim in range(coll.ndim):
            for mesh, backend in ((coll, "coll"), (gloo, "gloo")):
                pg = mesh.get_group(dim)
                assert dist.get_backend(pg) == backend, (name, dim, dist.get_backend(pg))
                assert pg._get_backend(torch.device("cpu")).name() == backend
                ranks = dist.get_process_group_ranks(pg)
                assert pg.size() == mesh.size(dim) == len(ranks), (name, dim, ranks)
                # the group's members are the ranks that share this rank's other coordinates
                coord = list(mesh.get_coordinate())
                want = []
                for i in range(mesh.size(dim)):
                    coord[dim] = i
                    want.append(int(mesh.mesh[tuple(coord)]))
                assert sorted(ranks) == sorted(want), (name, dim, ranks, want)
                t = torch.tensor([float(ctx.rank)])
                dist.all_reduce(t, group=pg)  # a call on the group reaches exactly those ranks
                assert t.item() == float(sum(want)), (name, dim, t, want)


def distribute_tensor_matches_gloo(ctx):
    plain = [Shard(0), Shard(1), Replicate()]
    for name, (coll, gloo) in meshes(ctx).items():
        for shape in SHAPES:
            full = int_tensor(shape, 5)
            mine = full + 100 * ctx.rank  # only each dimension's first rank's data may count
            for placements in itertools.product(plain, repeat=coll.ndim):
                want, got, _ = call_both(
                    lambda mesh: distribute_tensor(mine, mesh, list(placements)),
                    coll, gloo)
                what = "%s %s %s" % (name, shape, describe(placements))
                assert got.placements == tuple(placements), what
                assert torch.equal(got.to_local(), want.to_local()), what
                assert torch.equal(got.to_local(), expected_local(coll, placements, full)), what
                assert torch.equal(got.full_tensor(), full), what


def redistribute_every_pair_matches_gloo(ctx):
    kinds = [Shard(0), Shard(1), Replicate(), Partial("sum")]
    for name, (coll, gloo) in meshes(ctx).items():
        tuples = list(itertools.product(kinds, repeat=coll.ndim))
        refused = []
        for shape in SHAPES:
            full = int_tensor(shape, 11)
            for i, src in enumerate(tuples):
                for dst in tuples:
                    what = "%s %s %s -> %s" % (name, shape, describe(src), describe(dst))

                    def run(mesh, src=src, dst=dst):
                        out = make_dtensor(mesh, src, full, 40 + i).redistribute(mesh, dst)
                        return out, out.full_tensor()

                    want, got, err = call_both(run, coll, gloo)
                    if err is not None:
                        refused.append("%s: %s" % (what, str(err).splitlines()[0]))
                        continue
                    (w_out, w_full), (g_out, g_full) = want, got
                    assert g_out.placements == tuple(dst), (what, g_out.placements)
                    assert torch.equal(g_out.to_local(), w_out.to_local()), what
                    assert torch.equal(g_full, full), what
                    assert torch.equal(w_full, full), what
                    if not any(p.is_partial() for p in dst):
                        assert torch.equal(g_out.to_local(), expected_local(coll, dst, full)), what
        if refused and ctx.rank == 0:  # DTensor's own refusals, the same for both backends
            print("%s: %d pairs refused by DTensor for both backends, e.g. %s" %
                  (name, len(refused), refused[0]), flush=True)


def redistribute_partial_ops_match_gloo(ctx):
    for name, (coll, gloo) in meshes(ctx).items():
        full = int_tensor((8, 12), 23, low=-4, high=5)
        for op in ("avg", "min", "max", "product"):
            for dim in range(coll.ndim):
                for dst_kind in (Replicate(), Shard(0), Shard(1)):
                    src = [Replicate()] * coll.ndim
                    src[dim] = Partial(op)
                    dst = list(src)
                    dst[dim] = dst_kind
                    what = "%s %s -> %s" % (name, describe(src), describe(dst))

                    def run(mesh, src=src, dst=dst):
                        out = make_dtensor(mesh, src, full, 60 + dim).redistribute(mesh, dst)
                        return out.to_local(), out.full_tensor()

                    want, got, err = call_both(run, coll, gloo)
                    assert err is None, "%s: %s" % (what, err)
                    assert torch.equal(got[0], want[0]), what
                    assert torch.equal(got[0], expected_local(coll, dst, full)), what
                    assert torch.equal(got[1], full), what


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 16)
        self.fc3 = torch.nn.Linear(16, 32)
        self.fc4 = torch.nn.Linear(32, 8)

    def forward(self, x):
        r = torch.nn.functional.relu
        return self.fc4(r(self.fc3(r(self.fc2(r(self.fc1(x)))))))


PLAN = {"fc1": ColwiseParallel(), "fc2": RowwiseParallel(),
        "fc3": ColwiseParallel(), "fc4": RowwiseParallel()}


def make_mlp(exact):
    torch.manual_seed(3)
    model = MLP()
    if exact:  # float64, multiples of 1/8 of small integers: every sum exact
        model = model.double()
        with torch.no_grad():
            for i, p in enumerate(model.parameters()):
                p.copy_(int_tensor(p.shape, 300 + i, -4, 5, torch.float64) / 8)
    return model


def make_batch(exact, rows):
    if exact:
        return (int_tensor((rows, 16), 7, -4, 5, torch.float64) / 4,
                int_tensor((rows, 8), 8, -2, 3, torch.float64))
    g = torch.Generator().manual_seed(7)
    return torch.randn(rows, 16, generator=g), torch.randn(rows, 8, generator=g)


def tp_run(mesh, exact):
    """The MLP tensor-parallel over mesh["tp"]; each "dp" coordinate (if any) takes its rows
    of the batch. Returns this rank's output rows and the full gradients summed over "dp"."""
    dims = mesh.mesh_dim_names
    dp = mesh.size(dims.index("dp")) if "dp" in dims else 1
    dp_rank = mesh.get_local_rank("dp") if "dp" in dims else 0
    x, g = make_batch(exact, 4 * dp)
    rows = slice(4 * dp_rank, 4 * dp_rank + 4)
    model = parallelize_module(make_mlp(exact), mesh["tp"], PLAN)
    for p in model.parameters():
        assert isinstance(p, DTensor) and p.device_mesh.get_group().size() == mesh.size(
            dims.index("tp"))
    out = model(x[rows])
    assert not isinstance(out, DTensor)
    (out * g[rows]).sum().backward()
    grads = {}
    for n, p in model.named_parameters():
        local = p.grad.to_local().clone()
        if dp > 1:
            dist.all_reduce(local, group=mesh.get_group("dp"))
        grads[n] = DTensor.from_local(local, p.grad.device_mesh, p.grad.placements,
                                      shape=p.shape, stride=p.stride()).full_tensor()
    return out.detach(), grads, rows


def tp_reference(exact, rows_total):
    model = make_mlp(exact)
    x, g = make_batch(exact, rows_total)
    out = model(x)
    (out * g).sum().backward()
    return out.detach(), {n: p.grad for n, p in model.named_parameters()}


def tp_compare(ctx, exact):
    for name, (coll, gloo) in meshes(ctx).items():
        dp = coll.size(0) if coll.ndim == 2 else 1
        ref_out, ref_grads = tp_reference(exact, 4 * dp)
        want, got, err = call_both(lambda mesh: tp_run(mesh, exact), coll, gloo)
        assert err is None, "%s: %r" % (name, err)
        (w_out, w_grads, rows), (g_out, g_grads, _) = want, got
        two_operands = coll.size(coll.ndim - 1) == 2 and dp in (1, 2)
        for what, got, want, ref in [("output", g_out, w_out, ref_out[rows])] + [
                ("grad " + n, g_grads[n], w_grads[n], ref_grads[n]) for n in ref_grads]:
            what = "%s %s %s" % ("exact" if exact else "random", name, what)
            if exact:
                assert torch.equal(got, ref), what
                assert torch.equal(got, want), what
            else:
                torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5,
                                           msg=lambda m, w=what: "%s vs unsharded: %s" % (w, m))
                if two_operands:
                    assert torch.equal(got, want), what + ": coll differs from gloo"
                else:
                    torch.testing.assert_close(got, want,
                                               msg=lambda m, w=what: "%s vs gloo: %s" % (w, m))


def tp_mlp_exact_matches_unsharded_and_gloo(ctx):
    tp_compare(ctx, exact=True)


def tp_mlp_random_matches_unsharded_and_gloo(ctx):
    tp_compare(ctx, exact=False)


CASES = {f.__name__: f for f in [
    mesh_groups_run_coll,
    distribute_tensor_matches_gloo,
    redistribute_every_pair_matches_gloo,
    redistribute_partial_ops_match_gloo,
    tp_mlp_exact_matches_unsharded_and_gloo,
    tp_mlp_random_matches_unsharded_and_gloo,
]}

if __name__ == "__main__":
    coll_harness.main(CASES, worlds=(4, 2), timeout_s=240)
