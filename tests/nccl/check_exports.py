#!/usr/bin/python3
"""libnccl.so.2's exports, in two checks (two tests).

The default check: every function nccl.h declares appears twice in `nm -D` (ncclX weak,
pncclX strong, both defined), the SONAME is libnccl.so.2, and no symbol carries a version.
Each NVIDIA library named after the header is a reference: every nccl*/pnccl* symbol it
defines must be defined by ours too, with the same binding (W or T), unless EXCEPTIONS
names it and says why.

--no-stray: ours exports nothing that is neither declared by our header nor exported by a
reference (the device API's host functions are exported by NVIDIA's library and declared
in its nccl_device headers, not in nccl.h). Only a library of our version knows them all:
the build passes the references only with -Dnccl_reference, and without any this check
skips (exit 77, meson's skip) saying so.

  check_exports.py [--no-stray] LIBRARY NCCL_H [NVIDIA_LIBNCCL LABEL]...
"""
import re
import subprocess
import sys

# NVIDIA's exports ours leaves out on purpose: name -> why.
EXCEPTIONS = {}
SKIP = 77


def defined_symbols(lib):
    out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True, capture_output=True,
                         text=True).stdout
    symbols = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3:
            symbols[parts[2]] = parts[1]
    return symbols, out


def nccl_symbols_of(ref):
    """The nccl*/pnccl* symbols NVIDIA's library `ref` defines: name -> nm type."""
    theirs, _ = defined_symbols(ref)
    return {n: t for n, t in theirs.items() if re.match(r"p?nccl", n)}


def check_declared(declared, exported):
    bad = 0
    for name in sorted(declared):
        if exported.get(name) not in ("W", "w"):
            print(f"{name}: {exported.get(name, 'missing')}, want W (weak, defined)")
            bad += 1
        if exported.get("p" + name) != "T":
            print(f"p{name}: {exported.get('p' + name, 'missing')}, want T (strong, defined)")
            bad += 1
    return bad


def check_reference(exported, theirs, label):
    """Every symbol of NVIDIA's library is ours too, with the same binding."""
    missing = 0
    for name, kind in sorted(theirs.items()):
        if name in EXCEPTIONS:
            print(f"{name}: exported by NVIDIA's {label}, not by ours: {EXCEPTIONS[name]}")
        elif name not in exported:
            print(f"{name}: exported by NVIDIA's {label} ({kind}), missing from ours")
            missing += 1
        elif exported[name].upper() != kind.upper():
            print(f"{name}: ours {exported[name]}, NVIDIA's {label} {kind}")
            missing += 1
    print(f"NVIDIA's {label}: {len(theirs)} nccl symbols, {missing} missing or different in ours")
    return missing


def check_elf(lib, nm_out):
    bad = 0
    dyn = subprocess.run(["readelf", "-d", "-V", lib], check=True, capture_output=True,
                         text=True).stdout
    if "Library soname: [libnccl.so.2]" not in dyn:
        print("SONAME is not libnccl.so.2")
        bad += 1
    if "Version definition section" in dyn or re.search(r"nccl\w+@", nm_out):
        print("the library defines symbol versions")
        bad += 1
    return bad


def main():
    args = sys.argv[1:]
    no_stray = args[:1] == ["--no-stray"]
    if no_stray:
        args = args[1:]
    lib, header = args[0], args[1]
    refs = list(zip(args[2::2], args[3::2]))
    if no_stray and not refs:
        print("skipped: which exports beyond nccl.h are NVIDIA's (the device API's host "
              "functions) only NVIDIA's library of our version says: -Dnccl_reference=DIR "
              "not given (./dev test fetches the NCCL pinned in tests/nccl/reference-nccl.txt)")
        return SKIP
    declared = set(re.findall(r"NCCL_COLL_DECLARE\([^,]+,\s*(nccl\w+)", open(header).read()))
    if len(declared) < 30:
        print(f"only {len(declared)} functions found in {header}")
        return 1
    exported, out = defined_symbols(lib)
    bad = 0 if no_stray else check_declared(declared, exported)
    allowed = declared | {"p" + n for n in declared}
    for ref, label in refs:
        theirs = nccl_symbols_of(ref)
        if len(theirs) < 60:
            print(f"{ref}: only {len(theirs)} nccl symbols, not a NCCL library")
            bad += 1
        allowed |= set(theirs)
        if not no_stray:
            bad += check_reference(exported, theirs, label)
    if no_stray:
        for name in sorted(set(exported) - allowed):
            print(f"{name}: exported but neither declared by nccl.h nor exported by a reference")
            bad += 1
    else:
        bad += check_elf(lib, out)
    print(f"{len(declared)} functions, {len(exported)} exported symbols, {bad} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
