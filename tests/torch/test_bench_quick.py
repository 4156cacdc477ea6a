"""The PyTorch benchmarks' plumbing, not their figures: bench/pytorch/torch_allreduce.py
(through bench/pytorch/torch_compare.sh, which picks this build's interpreter and module)
and bench/pytorch/torch_step_compare.py in their --quick modes, at 2 and 4 ranks, on this
interpreter's torch with this build's torch_coll (PYTHONPATH, as every test here).

  test_bench_quick.py [BUILD_ROOT]   (without it the wrapper is left out)

Each must exit 0 (every target met) or 1 (a target missed: expected on a busy 2-core
machine), never 2 or 3 or a crash, and print every cell: for each rank count a row per
size with both times, both busbws, the ratio with its per-round range, and a PASS/MISS
verdict where a target applies; a row per program and rank count with both step times, the
ratio and a verdict; and the summary line. The two copies of each model train on the same
batches, and at 2 ranks their parameters must end equal (float32 averages of two are
exact in any order). Bad options must exit 2. The scripts' figures are not checked."""
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "..", "bench", "pytorch")
BUILD = sys.argv[1] if len(sys.argv) > 1 else ""  # the build root, from meson
NUM = r"[0-9.]+(?:e[-+][0-9]+)?"
RANGE = rf"{NUM} \[{NUM}-{NUM}\]"
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL: " + what, flush=True)


def run(argv, timeout=240):
    start = time.monotonic()
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout)
    print("$ %s  (exit %d, %.1f s)\n%s" % (" ".join(argv), p.returncode,
                                           time.monotonic() - start, p.stdout), flush=True)
    return p.returncode, p.stdout


def allreduce():
    sh = os.path.join(BENCH, "torch_compare.sh")
    if BUILD and os.path.exists(os.path.join(BUILD, "meson-info", "intro-buildoptions.json")):
        # The wrapper: this build, its torch 2.x interpreter and module.
        rc, out = run(["/bin/sh", sh, BUILD, "allreduce", "--quick"])
    else:
        rc, out = run([sys.executable, os.path.join(BENCH, "torch_allreduce.py"), "--quick"])
    check(rc in (0, 1), "torch_allreduce --quick exited %d" % rc)
    sizes = ["8 B", "256 B", "8 KiB", "256 KiB", "1 MiB"]
    for n in (2, 4):
        block = out.split("# %d ranks:" % n, 1)
        check(len(block) == 2, "torch_allreduce: no table for %d ranks" % n)
        if len(block) < 2:
            continue
        lines = block[1].splitlines()
        for size in sizes:
            row = next((l for l in lines if l.strip().startswith(size + " ")), None)
            check(row is not None, "torch_allreduce %d ranks: no row for %s" % (n, size))
            if row is None:
                continue
            want = (rf"^\s*{re.escape(size)}\s+{RANGE}\s+{RANGE}\s+{RANGE}\s+{RANGE}\s+"
                    rf"{NUM}x \[{NUM}-{NUM}\]\s+")
            if size in ("8 B", "1 MiB"):
                want += r"(time<=0\.5x|bw>=1\.5x)\s+(PASS|MISS) \([0-2]/2\)$"
            else:
                want += r"-\s+-$"
            check(re.search(want, row) is not None,
                  "torch_allreduce %d ranks %s: malformed row %r" % (n, size, row))
    m = re.search(r"^targets met in ([0-4]) of 4 cells", out, re.M)
    check(m is not None, "torch_allreduce: no summary of 4 cells")
    if m:
        check((rc == 0) == (m.group(1) == "4"), "torch_allreduce: status %d, summary %s" % (rc, m.group(0)))
    rc, _ = run([sys.executable, os.path.join(BENCH, "torch_allreduce.py"), "-f", "1"])
    check(rc == 2, "torch_allreduce -f 1 exited %d, not 2" % rc)


def steps():
    rc, out = run([sys.executable, os.path.join(BENCH, "torch_step_compare.py"), "--quick"])
    check(rc in (0, 1), "torch_step_compare --quick exited %d" % rc)
    for kind, title in (("fsdp", "# FSDP2 transformer"), ("ddp", "# DDP MLP")):
        block = out.split(title, 1)
        check(len(block) == 2, "torch_step_compare: no table for " + kind)
        if len(block) < 2:
            continue
        lines = block[1].split("\n\n")[0].splitlines()
        for n in (2, 4):
            row = next((l for l in lines if re.match(r"^\s*%d\s" % n, l)), None)
            check(row is not None, "torch_step_compare %s: no row for %d ranks" % (kind, n))
            if row is None:
                continue
            m = re.search(rf"^\s*{n}\s+{RANGE}\s+{RANGE}\s+{NUM}x \[{NUM}-{NUM}\]\s+>=1\.2x\s+"
                          rf"(PASS|MISS) \([0-2]/2\)\s+{RANGE}\s+[-+]{NUM} / [-+]{NUM}\s+"
                          rf"({NUM}) after [0-9]+ steps$", row)
            check(m is not None, "torch_step_compare %s %d ranks: malformed row %r" % (kind, n, row))
            if m and n == 2:
                check(float(m.group(2)) == 0.0,
                      "%s at 2 ranks: coll's and gloo's models differ by %s" % (kind, m.group(2)))
    m = re.search(r"^targets met in ([0-4]) of 4 cells", out, re.M)
    check(m is not None, "torch_step_compare: no summary of 4 cells")
    if m:
        check((rc == 0) == (m.group(1) == "4"), "torch_step_compare: status %d, summary %s" % (rc, m.group(0)))
    rc, _ = run([sys.executable, os.path.join(BENCH, "torch_step_compare.py"), "--rounds", "0"])
    check(rc == 2, "torch_step_compare --rounds 0 exited %d, not 2" % rc)


def main():
    allreduce()
    steps()
    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
