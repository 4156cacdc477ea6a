#!/usr/bin/python3
"""PyTorch's own binary on our libnccl.so.2, without a GPU: every nccl* symbol that the
wheel's libtorch_cuda.so imports is defined by ours; then, with ours in LD_PRELOAD, `import
torch` works with every symbol bound at load (LD_BIND_NOW: a symbol missing anywhere fails
the import), each of libtorch_cuda.so's nccl symbols is bound to ours (the loader's own
account, LD_DEBUG=bindings), and ProcessGroupNCCL.get_runtime_nccl_version() (which calls
ncclGetVersion) reports the version our nccl.h states.

Two facts of PyTorch this is written around (torch 2.15, read from its sources and seen):
- torch.cuda.nccl.version() is the version of the nccl.h torch was compiled with
  (get_build_nccl_version), whatever library is loaded; it is printed, not checked.
- torch/__init__.py opens the wheel's nvidia/nccl/lib/libnccl.so.2 by its path with
  ctypes (RTLD_LOCAL) before importing torch._C, so NVIDIA's library is mapped beside ours;
  nothing binds to it, which is what is checked. Likewise two libcudart.so.13 are mapped
  when ours is linked to the CUDA toolkit's: the one every caller binds to is printed.
  With the wheel's own libcudart.so.13 preloaded before ours (docs/nccl.md's recipe), only that
  one is mapped, and it is checked.

  check_torch_nccl.py OUR_LIBNCCL OUR_NCCL_H TORCH_PYTHON
"""
import glob
import os
import re
import subprocess
import sys
import tempfile

PROBE = r"""
import re
import torch
from torch._C._distributed_c10d import ProcessGroupNCCL
maps = open("/proc/self/maps").read()
for lib in sorted({l.split()[-1] for l in maps.splitlines() if re.search(r"/lib(nccl|cudart)[^/]*\.so", l)}):
    print("MAPPED", lib)
print("RUNTIME", tuple(ProcessGroupNCCL.get_runtime_nccl_version()))
print("BUILD", tuple(ProcessGroupNCCL.get_build_nccl_version()), torch.cuda.nccl.version())
print("TORCH", torch.__version__, torch.version.cuda)
"""


def bindings(logdir, client):
    """{symbol: library} that the loader bound `client`'s symbols to."""
    out = {}
    for path in glob.glob(os.path.join(logdir, "ld.*")):
        for m in re.finditer(r"binding file (\S+) \[\d+\] to (\S+) \[\d+\]: normal symbol `([^']+)'",
                             open(path, errors="replace").read()):
            if os.path.basename(m.group(1)) == client:
                out[m.group(3)] = m.group(2)
    return out


def main():
    lib, header, python = sys.argv[1:4]
    lib = os.path.realpath(lib)
    text = open(header).read()
    want = tuple(int(re.search(rf"#define NCCL_{k} (\d+)", text).group(1))
                 for k in ("MAJOR", "MINOR", "PATCH"))
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    torch_cuda = os.path.join(site, "torch", "lib", "libtorch_cuda.so")
    if not os.path.exists(torch_cuda):
        print(f"{torch_cuda} not found: {python}'s torch has no CUDA")
        return 1
    bad = 0
    nm = lambda *a: subprocess.run(["nm", "-D", *a], check=True, capture_output=True,
                                   text=True).stdout
    imports = sorted({l.split()[-1] for l in nm("--undefined-only", torch_cuda).splitlines()
                      if re.match(r"p?nccl", l.split()[-1])})
    ours = {l.split()[2] for l in nm("--defined-only", lib).splitlines() if len(l.split()) == 3}
    for name in imports:
        if name not in ours:
            print(f"{name}: imported by libtorch_cuda.so, not defined by ours")
            bad += 1
    print(f"libtorch_cuda.so imports {len(imports)} nccl symbols, {bad} missing from ours")
    if len(imports) < 20:
        print("too few nccl imports: is this libtorch_cuda.so built with NCCL?")
        bad += 1

    def probe(preload):
        """One import of torch with `preload` in LD_PRELOAD; the number of failures."""
        bad = 0
        print(f"-- LD_PRELOAD={':'.join(preload)}")
        with tempfile.TemporaryDirectory() as logdir:
            env = dict(os.environ, LD_PRELOAD=":".join(preload), LD_BIND_NOW="1",
                       LD_DEBUG="bindings", LD_DEBUG_OUTPUT=os.path.join(logdir, "ld"))
            p = subprocess.run([python, "-c", PROBE], env=env, capture_output=True, text=True,
                               timeout=300)
            bound = bindings(logdir, "libtorch_cuda.so")
        print(p.stdout, end="")
        if p.returncode != 0:
            print(f"import torch with LD_PRELOAD={':'.join(preload)} LD_BIND_NOW=1 failed "
                  f"(exit {p.returncode}):")
            print(p.stderr[-4000:])
            return bad + 1
        mapped = [os.path.realpath(m) for m in re.findall(r"^MAPPED (.*)$", p.stdout, re.M)]
        if lib not in mapped:
            print(f"{lib} is not mapped")
            bad += 1
        nccl_bound = {n: l for n, l in bound.items() if re.match(r"p?nccl", n)}
        elsewhere = {n: l for n, l in nccl_bound.items() if os.path.realpath(l) != lib}
        for n, l in sorted(elsewhere.items()):
            print(f"{n}: libtorch_cuda.so bound it to {l}, not ours")
        print(f"libtorch_cuda.so: {len(nccl_bound) - len(elsewhere)} of {len(nccl_bound)} nccl "
              f"symbols bound to ours")
        if len(nccl_bound) != len(imports) or elsewhere:
            bad += 1
        cudart = sorted({l for n, l in bound.items() if n.startswith("cuda")})
        print(f"libtorch_cuda.so's cuda* runtime symbols bound to: {cudart}")
        if len(cudart) > 1:
            print("libtorch_cuda.so binds to two CUDA runtimes")
            bad += 1
        got = re.search(r"^RUNTIME (.*)$", p.stdout, re.M).group(1)
        if got != str(want):
            print(f"get_runtime_nccl_version() is {got}, our nccl.h says {want}")
            bad += 1
        else:
            print(f"get_runtime_nccl_version() is {got}: ours (torch was built against "
                  f"{re.search(r'^BUILD (.*)$', p.stdout, re.M).group(1)})")
        if len(preload) > 1:
            # The wheel's runtime preloaded first: our library's libcudart.so.13 is that
            # one (the loader matches the soname), so one runtime is mapped and bound.
            runtimes = sorted({m for m in mapped if re.search(r"/libcudart\.so", m)})
            if runtimes != [os.path.realpath(preload[0])]:
                print(f"mapped CUDA runtimes {runtimes}, want only {preload[0]}")
                bad += 1
        return bad

    bad += probe([lib])
    # docs/nccl.md's recipe for a torch wheel's process: its own CUDA runtime first.
    wheel_cudart = sorted(glob.glob(os.path.join(site, "nvidia", "*", "lib", "libcudart.so.*")))
    if not wheel_cudart:
        print(f"no libcudart.so.* in {site}/nvidia/*/lib")
        bad += 1
    else:
        bad += probe([os.path.realpath(wheel_cudart[0]), lib])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
