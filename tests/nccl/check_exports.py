#!/usr/bin/python3
"""libnccl.so.2's exports: every function nccl.h declares appears twice in `nm -D`
(ncclX weak, pncclX strong, both defined), nothing else is exported, the SONAME is
libnccl.so.2, and no symbol carries a version.

  check_exports.py LIBRARY NCCL_H
"""
import re
import subprocess
import sys


def main():
    lib, header = sys.argv[1], sys.argv[2]
    declared = set(re.findall(r"NCCL_COLL_DECLARE\([^,]+,\s*(nccl\w+)", open(header).read()))
    if len(declared) < 30:
        print(f"only {len(declared)} functions found in {header}")
        return 1
    out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True, capture_output=True,
                         text=True).stdout
    exported = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3:
            exported[parts[2]] = parts[1]
    bad = 0
    for name in sorted(declared):
        if exported.get(name) not in ("W", "w"):
            print(f"{name}: {exported.get(name, 'missing')}, want W (weak, defined)")
            bad += 1
        if exported.get("p" + name) != "T":
            print(f"p{name}: {exported.get('p' + name, 'missing')}, want T (strong, defined)")
            bad += 1
    extra = sorted(set(exported) - declared - {"p" + n for n in declared})
    for name in extra:
        print(f"{name}: exported but not part of the NCCL API")
        bad += 1
    dyn = subprocess.run(["readelf", "-d", "-V", lib], check=True, capture_output=True,
                         text=True).stdout
    if "Library soname: [libnccl.so.2]" not in dyn:
        print("SONAME is not libnccl.so.2")
        bad += 1
    if "Version definition section" in dyn or re.search(r"nccl\w+@", out):
        print("the library defines symbol versions")
        bad += 1
    print(f"{len(declared)} functions, {len(exported)} exported symbols, {bad} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
