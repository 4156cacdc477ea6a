"""Functional collectives (torch.distributed._functional_collectives) on the "coll" backend
against gloo, in the same rank processes with the same data, eager and under
torch.compile.

Eager (worlds 2 and 4): all_reduce (sum, avg, max, min, product; float32, float64,
bfloat16, int64), all_gather_single / all_gather_tensor (gather_dim 0 and 1),
reduce_scatter_single / reduce_scatter_tensor (scatter_dim 0 and 1; sum, avg, max),
all_to_all_single (even and uneven splits), broadcast, the coalesced forms
(all_reduce_coalesced, all_gather_single_coalesced / all_gather_into_tensor_coalesced,
reduce_scatter_single_coalesced / reduce_scatter_tensor_coalesced) and the autograd forms
(all_gather_single_autograd, reduce_scatter_single_autograd, all_to_all_single_autograd,
with a backward). Every rank's input is a known function of its rank, so each result is also
checked against the value computed locally from all ranks' inputs.

Compiled: a function that all-reduces (functional and in-place dist.all_reduce, which
dynamo turns into the functional op), all-gathers and reduce-scatters, under
torch.compile(fullgraph=True) with backend "inductor" (g++ compiles its C++ kernels; about a
minute per rank on a 2-CPU machine with a cold cache, so at world 2 only), and a larger
function with every collective above under backend "aot_eager" (AOTAutograd's graph run
eagerly, no C++ compile: cheap enough for worlds 2 and 4). fullgraph=True raises on any
graph break; a recording backend checks that the one captured graph holds the
_c10d_functional ops, the graph-break counter stays empty, and for inductor, that the
generated code calls the collectives. Results equal the same function run eagerly over gloo.

Exactness: all data are small integers held in floating point (and int64), so sums,
averages over 2 or 4 ranks (a division by a power of two), products, minima and maxima
are exact in any order: results must be equal bit for bit."""
import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import coll_harness  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.distributed._functional_collectives as funcol  # noqa: E402

# all_gather_tensor, reduce_scatter_tensor and their _coalesced forms are deprecated names in
# torch 2.15 (of all_gather_single etc.), tested here on purpose
warnings.filterwarnings("ignore", category=FutureWarning, message=".*is deprecated.*")


def data(rank, shape=(8, 6), dtype=torch.float32, low=-8, high=9, seed=0):
    g = torch.Generator().manual_seed(1000 * seed + 17 * rank + 3)
    return torch.randint(low, high, shape, generator=g).to(dtype)


def everyone(ctx, **kw):
    """Every rank's input (the same function the ranks use), to compute expected values."""
    return [data(r, **kw) for r in range(ctx.world)]


def reduce_all(tensors, op):
    s = torch.stack(tensors)
    if op == "sum":
        return s.sum(0).to(s.dtype)
    if op == "avg":
        return s.sum(0).to(s.dtype) / len(tensors)
    if op == "max":
        return s.amax(0)
    if op == "min":
        return s.amin(0)
    if op == "product":
        return s.prod(0).to(s.dtype)
    raise ValueError(op)


def waited(x):
    if isinstance(x, (list, tuple)):
        return [funcol.wait_tensor(t) if isinstance(t, funcol.AsyncCollectiveTensor) else t
                for t in x]
    return funcol.wait_tensor(x) if isinstance(x, funcol.AsyncCollectiveTensor) else x


def both(ctx, fn):
    """fn(group) over gloo, then over coll (the default group); returns (gloo's, coll's)."""
    want = waited(fn(ctx.gloo))
    got = waited(fn(dist.group.WORLD))
    return want, got


def check(what, got, want, expected):
    if isinstance(expected, (list, tuple)):
        assert len(got) == len(want) == len(expected), what
        for i, (g, w, e) in enumerate(zip(got, want, expected)):
            check("%s[%d]" % (what, i), g, w, e)
        return
    assert got.dtype == expected.dtype and got.shape == expected.shape, \
        "%s: got %s %s, expected %s %s" % (what, got.dtype, tuple(got.shape), expected.dtype,
                                           tuple(expected.shape))
    assert torch.equal(got, want), "%s: coll differs from gloo:\n%s\n%s" % (what, got, want)
    assert torch.equal(got, expected), "%s: wrong:\n%s\nexpected\n%s" % (what, got, expected)


def funcol_all_reduce_matches_gloo(ctx):
    for dtype, ops in [(torch.float32, ("sum", "avg", "max", "min", "product")),
                       (torch.float64, ("sum", "avg", "max")),
                       (torch.bfloat16, ("sum", "max")),
                       (torch.int64, ("sum", "max", "min", "product"))]:
        for op in ops:
            kw = dict(dtype=dtype, low=-2, high=3) if op == "product" else dict(dtype=dtype)
            x = data(ctx.rank, **kw)
            before = x.clone()
            want, got = both(ctx, lambda g: funcol.all_reduce(x, op, g))
            assert torch.equal(x, before), "all_reduce changed its input"
            check("all_reduce %s %s" % (op, dtype), got, want, reduce_all(everyone(ctx, **kw), op))


def funcol_all_gather_matches_gloo(ctx):
    x = data(ctx.rank, (4, 6))
    for dim in (0, 1):
        expected = torch.cat(everyone(ctx, shape=(4, 6)), dim)
        want, got = both(ctx, lambda g: funcol.all_gather_single(x, dim, g))
        check("all_gather_single dim %d" % dim, got, want, expected)
        want, got = both(ctx, lambda g: funcol.all_gather_tensor(x, dim, g))
        check("all_gather_tensor dim %d" % dim, got, want, expected)
    y = data(ctx.rank, (5,), torch.int64)
    want, got = both(ctx, lambda g: funcol.all_gather_single(y, 0, g))
    check("all_gather_single int64", got, want, torch.cat(everyone(ctx, shape=(5,),
                                                                   dtype=torch.int64)))


def funcol_reduce_scatter_matches_gloo(ctx):
    shape = (4 * ctx.world, 2 * ctx.world)
    x = data(ctx.rank, shape)
    for dim in (0, 1):
        for op in ("sum", "avg", "max"):
            full = reduce_all(everyone(ctx, shape=shape), op)
            expected = full.chunk(ctx.world, dim)[ctx.rank]
            want, got = both(ctx, lambda g: funcol.reduce_scatter_single(x, op, dim, g))
            check("reduce_scatter_single %s dim %d" % (op, dim), got, want, expected)
        want, got = both(ctx, lambda g: funcol.reduce_scatter_tensor(x, "sum", dim, g))
        check("reduce_scatter_tensor sum dim %d" % dim, got, want,
              reduce_all(everyone(ctx, shape=shape), "sum").chunk(ctx.world, dim)[ctx.rank])


def split_rows(src, dst):
    return (src + 2 * dst) % 3 + 1  # rows that rank src sends rank dst: uneven, never 0


def funcol_all_to_all_single_matches_gloo(ctx):
    w, r = ctx.world, ctx.rank
    x = data(r, (2 * w, 3))
    expected = torch.cat([t.chunk(w)[r] for t in everyone(ctx, shape=(2 * w, 3))])
    want, got = both(ctx, lambda g: funcol.all_to_all_single(x, None, None, g))
    check("all_to_all_single even", got, want, expected)
    ins = [split_rows(r, j) for j in range(w)]
    outs = [split_rows(j, r) for j in range(w)]
    x = data(r, (sum(ins), 3), seed=1)
    expected = torch.cat([
        data(j, (sum(split_rows(j, k) for k in range(w)), 3), seed=1).split(
            [split_rows(j, k) for k in range(w)])[r] for j in range(w)])
    want, got = both(ctx, lambda g: funcol.all_to_all_single(x, outs, ins, g))
    check("all_to_all_single uneven", got, want, expected)


def funcol_broadcast_matches_gloo(ctx):
    src = ctx.world - 1
    x = data(ctx.rank, (3, 5))
    want, got = both(ctx, lambda g: funcol.broadcast(x, src, g))
    check("broadcast", got, want, data(src, (3, 5)))


def funcol_coalesced_match_gloo(ctx):
    w, r = ctx.world, ctx.rank
    shapes = [(2 * w, 3), (w,), (w, 2, 2)]
    xs = [data(r, s, seed=i) for i, s in enumerate(shapes)]
    alls = [[data(k, s, seed=i) for k in range(w)] for i, s in enumerate(shapes)]
    for op in ("sum", "max"):
        want, got = both(ctx, lambda g: funcol.all_reduce_coalesced(xs, op, g))
        check("all_reduce_coalesced " + op, got, want, [reduce_all(a, op) for a in alls])
    gathered = [torch.cat(a) for a in alls]
    want, got = both(ctx, lambda g: funcol.all_gather_single_coalesced(xs, g))
    check("all_gather_single_coalesced", got, want, gathered)
    want, got = both(ctx, lambda g: funcol.all_gather_into_tensor_coalesced(xs, g))
    check("all_gather_into_tensor_coalesced", got, want, gathered)
    dims = [0, 0, 1] if w == 2 else [0, 0, 0]  # dim 1 of (w, 2, 2) divides by 2 only
    for op in ("sum", "avg"):
        expected = [reduce_all(a, op).chunk(w, d)[r] for a, d in zip(alls, dims)]
        # a fresh list each call: torch's reduce_scatter_single_coalesced replaces the
        # list's entries whose scatter dim is not 0 by their reshuffled copies
        want, got = both(ctx, lambda g: funcol.reduce_scatter_single_coalesced(
            list(xs), op, dims, g))
        check("reduce_scatter_single_coalesced " + op, got, want, expected)
        want, got = both(ctx, lambda g: funcol.reduce_scatter_tensor_coalesced(
            list(xs), op, dims, g))
        check("reduce_scatter_tensor_coalesced " + op, got, want, expected)


def funcol_autograd_matches_gloo(ctx):
    w, r = ctx.world, ctx.rank

    def grad_of(fn, x, weight_seed):
        x = x.clone().requires_grad_(True)
        out = waited(fn(x))
        weight = data(r, out.shape, seed=weight_seed)
        (out * weight).sum().backward()
        return [out.detach(), x.grad]

    # all_gather: out = cat(x_k); d/dx_r = sum over ranks k of weight_k's chunk r
    x = data(r, (3, 4))
    want, got = both(ctx, lambda g: grad_of(
        lambda t: funcol.all_gather_single_autograd(t, 0, g), x, 5))
    weights = [data(k, (3 * w, 4), seed=5) for k in range(w)]
    check("all_gather_single_autograd", got, want,
          [torch.cat(everyone(ctx, shape=(3, 4))), sum(wt.chunk(w)[r] for wt in weights)])
    # reduce_scatter: out = chunk r of sum(x_k); d/dx_r = cat over k of weight_k
    x = data(r, (2 * w, 4))
    want, got = both(ctx, lambda g: grad_of(
        lambda t: funcol.reduce_scatter_single_autograd(t, "sum", 0, g), x, 6))
    check("reduce_scatter_single_autograd", got, want,
          [reduce_all(everyone(ctx, shape=(2 * w, 4)), "sum").chunk(w)[r],
           torch.cat([data(k, (2, 4), seed=6) for k in range(w)])])
    # all_to_all: the backward is the all_to_all of the weights
    x = data(r, (2 * w, 4))
    want, got = both(ctx, lambda g: grad_of(
        lambda t: funcol.all_to_all_single_autograd(t, None, None, g), x, 7))
    check("all_to_all_single_autograd", got, want,
          [torch.cat([t.chunk(w)[r] for t in everyone(ctx, shape=(2 * w, 4))]),
           torch.cat([data(k, (2 * w, 4), seed=7).chunk(w)[r] for k in range(w)])])


def funcol_autograd_outputs_finished_after_the_op_returned(ctx):
    """The autograd forms when the result is copied into the output only after the op
    returned: the last rank joins each forward collective late, and the others look at
    their output only after the call ended meanwhile (on the backend's own threads). That
    copy must not enter the autograd graph: recorded as an in-place copy, it made the
    collective's backward get a zero gradient (CI once saw the gradient of
    reduce_scatter_single_autograd with one rank's block all zeros, on every rank)."""
    import time
    w, r = ctx.world, ctx.rank
    group = dist.group.WORLD.group_name
    ops = torch.ops._c10d_functional

    def grad_of(name, call, x, weight_seed):
        x = x.clone().requires_grad_(True)
        if r == w - 1:
            time.sleep(0.05)
        out = call(x)
        time.sleep(0.2)  # the call ends meanwhile, its result copied out by then
        assert "Copy" not in type(out.grad_fn).__name__, \
            "%s: the copy of the result is in the autograd graph: %s" % (name, out.grad_fn)
        out = ops.wait_tensor(out)
        weight = data(r, out.shape, seed=weight_seed)
        (out * weight).sum().backward()
        return [out.detach(), x.grad]

    def expect(name, got, expected):
        for what, g, e in zip(("result", "gradient"), got, expected):
            assert torch.equal(g, e), "%s: %s\n%s\nexpected\n%s" % (name, what, g, e)

    # all_gather: out = cat(x_k); d/dx_r = sum over ranks k of weight_k's chunk r
    x = data(r, (3, 4))
    weights = [data(k, (3 * w, 4), seed=5) for k in range(w)]
    got = grad_of("all_gather_into_tensor",
                  lambda t: ops.all_gather_into_tensor(t, w, group), x, 5)
    expected = [torch.cat(everyone(ctx, shape=(3, 4))), sum(wt.chunk(w)[r] for wt in weights)]
    expect("all_gather_into_tensor", got, expected)
    # reduce_scatter: out = chunk r of sum(x_k); d/dx_r = cat over k of weight_k
    x = data(r, (2 * w, 4))
    got = grad_of("reduce_scatter_tensor",
                  lambda t: ops.reduce_scatter_tensor(t, "sum", w, group), x, 6)
    expected = [reduce_all(everyone(ctx, shape=(2 * w, 4)), "sum").chunk(w)[r],
                torch.cat([data(k, (2, 4), seed=6) for k in range(w)])]
    expect("reduce_scatter_tensor", got, expected)
    # all_to_all: the backward is the all_to_all of the weights
    x = data(r, (2 * w, 4))
    got = grad_of("all_to_all_single",
                  lambda t: ops.all_to_all_single(t, [2] * w, [2] * w, group), x, 7)
    expected = [torch.cat([t.chunk(w)[r] for t in everyone(ctx, shape=(2 * w, 4))]),
                torch.cat([data(k, (2 * w, 4), seed=7).chunk(w)[r] for k in range(w)])]
    expect("all_to_all_single", got, expected)


# ---------------------------------------------------------------------------------------
# torch.compile


def small_body(x, group):
    """all_reduce (functional, then in place via c10d), all_gather, reduce_scatter."""
    y = funcol.all_reduce(x * 2, "sum", group)
    t = y + 1
    dist.all_reduce(t, group=group)  # dynamo traces this as the functional op
    z = funcol.all_gather_single(t, 0, group)
    return funcol.reduce_scatter_single(z * 3, "sum", 0, group) - 1


def small_expected(ctx, xs):
    """t = w * (sum_k 2 x_k + 1) on every rank, so cat(t, ..., t) * 3 summed over the w ranks
    has chunk r = 3 * w * t."""
    w = ctx.world
    t = (reduce_all([x * 2 for x in xs], "sum") + 1) * w
    return t * 3 * w - 1


def big_body(x, group):
    """Every functional collective of the eager cases, in one graph."""
    w = dist.get_world_size(group)
    a = funcol.all_reduce(x, "max", group)
    b = funcol.all_gather_single(x + a, 1, group)
    c = funcol.reduce_scatter_single(b.repeat(w, 1), "avg", 0, group)
    d = funcol.all_to_all_single(c, None, None, group)
    e, f = funcol.all_reduce_coalesced([d, x * 2], "sum", group)
    g, h = funcol.all_gather_single_coalesced([e, f], group)
    i, j = funcol.reduce_scatter_single_coalesced([g, h], "sum", [0, 0], group)
    k = funcol.broadcast(i.sum(1, keepdim=True) + j, 0, group)
    return k * 2 + 1


def compiled_run(body, backend, x):
    """body(x, WORLD) under torch.compile(fullgraph=True) with `backend`, through a recording
    backend: (result, call_function targets of the captured graphs, generated code)."""
    from torch._dynamo.utils import counters
    graphs = []

    def recording(gm, example_inputs):
        graphs.append(gm)
        if backend == "inductor":
            from torch._inductor.compile_fx import compile_fx
            return compile_fx(gm, example_inputs)
        from torch._dynamo.backends.debugging import aot_eager
        return aot_eager(gm, example_inputs)

    torch._dynamo.reset()
    counters.clear()
    world = dist.group.WORLD
    fn = torch.compile(lambda t: body(t, world), backend=recording, fullgraph=True)
    code = []
    if backend == "inductor":
        from torch._inductor.utils import run_and_get_code
        out, code = run_and_get_code(fn, x)
    else:
        out = fn(x)
    out2 = fn(x)  # the cached compiled function again: no recompilation
    assert torch.equal(out, out2)
    assert len(graphs) == 1, "%d graphs captured (a graph break or a recompile)" % len(graphs)
    assert not counters["graph_break"], dict(counters["graph_break"])
    targets = [str(n.target).replace(".default", "") for n in graphs[0].graph.nodes
               if n.op == "call_function"]
    return out, targets, "\n".join(code)


def compiled_small_inductor_matches_gloo_eager(ctx):
    import shutil
    assert shutil.which("g++") or shutil.which("c++"), \
        "torch.compile's inductor backend needs a C++ compiler (g++) for CPU kernels"
    x = data(ctx.rank, (4, 3))
    got, targets, code = compiled_run(small_body, "inductor", x)
    for op in ("all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor", "wait_tensor"):
        assert "_c10d_functional." + op in targets, "%s not in the graph: %s" % (op, targets)
    assert targets.count("_c10d_functional.all_reduce") == 2, targets
    for op in ("_c10d_functional.all_reduce", "_c10d_functional.all_gather_into_tensor",
               "_c10d_functional.reduce_scatter_tensor"):
        assert op in code, "inductor's code does not call %s:\n%s" % (op, code)
    want = waited(small_body(x, ctx.gloo))
    check("compiled (inductor)", got, want, small_expected(ctx, everyone(ctx, shape=(4, 3))))


def compiled_every_collective_aot_eager_matches_gloo_eager(ctx):
    x = data(ctx.rank, (2 * ctx.world, 2))
    got, targets, _ = compiled_run(big_body, "aot_eager", x)
    for op in ("all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor",
               "all_to_all_single", "all_reduce_coalesced", "all_gather_into_tensor_coalesced",
               "reduce_scatter_tensor_coalesced", "broadcast", "wait_tensor"):
        assert "_c10d_functional." + op in targets, "%s not in the graph: %s" % (op, targets)
    want = waited(big_body(x, ctx.gloo))
    assert torch.equal(got, want), "compiled on coll differs from eager on gloo:\n%s\n%s" % (
        got, want)


CASES = {f.__name__: f for f in [
    funcol_all_reduce_matches_gloo,
    funcol_all_gather_matches_gloo,
    funcol_reduce_scatter_matches_gloo,
    funcol_all_to_all_single_matches_gloo,
    funcol_broadcast_matches_gloo,
    funcol_coalesced_match_gloo,
    funcol_autograd_matches_gloo,
    funcol_autograd_outputs_finished_after_the_op_returned,
    compiled_small_inductor_matches_gloo_eager,
    compiled_every_collective_aot_eager_matches_gloo_eager,
]}
EAGER = [n for n in CASES if not n.startswith("compiled_")]

if __name__ == "__main__":
    coll_harness.main(CASES, worlds={
        2: list(CASES),
        4: EAGER + ["compiled_every_collective_aot_eager_matches_gloo_eager"]},
        timeout_s=300)
