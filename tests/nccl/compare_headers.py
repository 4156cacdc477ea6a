#!/usr/bin/python3
"""Our nccl.h against one of NVIDIA's, through the compiler: what NVIDIA's header declares
is read from its text (enumerators, NCCL_* macros, typedefs, struct fields, function
declarations), then small programs compiled once against each header print every value,
size and offset, and a C++ unit that includes ours redeclares each of NVIDIA's functions
word for word inside extern "C" (g++ rejects a C function declared twice with different
parameter or return types). Every difference is printed with its name.

  compare_headers.py OUR_NCCL_H NVIDIA_INCLUDE_DIR CUDA_INCLUDE_DIR exact|subset [LABEL]

exact:  the same version (2.32.3): values, sizes, offsets, initializers and the set of
        functions must be equal both ways.
subset: an older version (2.28.9, 2.30.7): each of its functions must be declared by
        ours with the same prototype, its enumerators and macros must keep their values
        (the version macros and the ncclNum* counters excepted), and each struct field
        must lie at the same offset with the same size (ours may have appended fields).
Environment: CC (default cc), CXX (default c++).
"""
import os
import re
import shlex
import subprocess
import sys
import tempfile

CC = shlex.split(os.environ.get("CC", "cc"))
CXX = shlex.split(os.environ.get("CXX", "c++"))
# Preprocessor symbols defined for both headers: NVIDIA's declares ncclResetDebugInit as a
# function only under NCCL_OS_LINUX (otherwise as an empty macro).
DEFINES = ["-DNCCL_OS_LINUX"]
VERSION_MACROS = {"NCCL_MAJOR", "NCCL_MINOR", "NCCL_PATCH", "NCCL_VERSION_CODE", "NCCL_SUFFIX"}


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def join_continuations(text):
    return re.sub(r"\\\n", " ", text)


def top_level_statements(text):
    """Split C text (no preprocessor lines) at ';' outside braces."""
    out, depth, cur = [], 0, []
    for ch in text:
        cur.append(ch)
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == ";" and depth == 0:
            out.append("".join(cur).strip())
            cur = []
    return out


def drop_attributes(decl):
    while True:
        m = re.search(r"__attribute__\s*\(", decl)
        if not m:
            return decl
        i, depth = m.end() - 1, 0
        for j in range(i, len(decl)):
            depth += decl[j] == "("
            depth -= decl[j] == ")"
            if depth == 0:
                break
        decl = decl[: m.start()] + decl[j + 1 :]


def struct_fields(body, prefix=""):
    """Field paths of a struct body ('key.vendorId' for nested anonymous aggregates)."""
    fields = []
    for decl in top_level_statements(body):
        decl = decl.rstrip(";").strip()
        if not decl:
            continue
        if "{" in decl:
            inner = decl[decl.index("{") + 1 : decl.rindex("}")]
            name = decl[decl.rindex("}") + 1 :].strip()
            fields.append(prefix + name)
            fields += struct_fields(inner, prefix + name + ".")
            continue
        # `int a, b[4], *c`: each declarator's name.
        head, *rest = decl.split(",")
        for d in [head] + rest:
            m = re.search(r"(\w+)\s*(\[[^\]]*\])?\s*$", d)
            if m:
                fields.append(prefix + m.group(1))
    return fields


class Header:
    """The facts NVIDIA's header states, read from its text."""

    def __init__(self, path, cuda_include):
        raw = join_continuations(strip_comments(open(path).read()))
        self.macros, self.function_macros = {}, set()
        for m in re.finditer(r"^[ \t]*#[ \t]*define[ \t]+(NCCL_\w+)(\()?([^\n]*)$", raw, re.M):
            name, is_function, value = m.group(1), m.group(2), m.group(3).strip()
            if is_function:
                self.function_macros.add(name)
            elif value:
                self.macros[name] = value
        # The C text as a C compiler sees it on Linux, with CUDA's headers left out.
        with tempfile.TemporaryDirectory() as stubs:
            for h in ("cuda_runtime.h", "cuda_fp16.h", "cuda_bf16.h", "cuda_fp8.h", "limits.h",
                      "stdint.h", "stddef.h"):
                open(os.path.join(stubs, h), "w").close()
            text = subprocess.run(
                CC + ["-E", "-P", "-x", "c", "-nostdinc", "-I", stubs, "-DCUDART_VERSION=13000"]
                + DEFINES + [path], check=True, capture_output=True, text=True).stdout
        self.enums, self.structs, self.typedefs, self.functions = {}, {}, [], {}
        for stmt in top_level_statements(text):
            flat = " ".join(stmt.split())
            m = re.match(r"typedef enum\s*\w*\s*\{(.*)\}\s*(\w+)\s*;$", flat)
            if m:
                names = [re.match(r"\s*(\w+)", e).group(1) for e in m.group(1).split(",")
                         if e.strip()]
                self.enums[m.group(2)] = names
                self.typedefs.append(m.group(2))
                continue
            m = re.match(r"typedef (struct|union)\s*\w*\s*\{(.*)\}\s*(\w+)\s*;$", flat)
            if m:
                self.structs[m.group(3)] = struct_fields(m.group(2))
                self.typedefs.append(m.group(3))
                continue
            m = re.match(r"typedef .*?(\w+)\s*;$", flat)
            if m:
                self.typedefs.append(m.group(1))
                continue
            m = re.search(r"\b(p?nccl\w+)\s*\(", flat)
            if m and "{" not in flat and not flat.startswith("#"):
                self.functions[m.group(1)] = drop_attributes(flat)
        if len(self.functions) < 30:
            raise SystemExit(f"{path}: only {len(self.functions)} functions found")


def compile_and_run(source, include_dirs, workdir, name, cxx=False, run=True):
    """Compile (and run) one program; returns (output or None, {line: message})."""
    src = os.path.join(workdir, name + (".cc" if cxx else ".c"))
    exe = os.path.join(workdir, name)
    open(src, "w").write(source)
    incs = []
    for d in include_dirs:
        incs += ["-I", d]
    cmd = (CXX + ["-std=c++17"] if cxx else CC + ["-std=gnu11"]) + DEFINES + incs + [
        "-fmax-errors=0", "-w", src]
    cmd += ["-o", exe] if run else ["-fsyntax-only"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    errors = {}
    for m in re.finditer(re.escape(src) + r":(\d+):\d+: error: ([^\n]*)", p.stderr):
        errors.setdefault(int(m.group(1)), m.group(2))
    if p.returncode != 0:
        if not errors:
            raise SystemExit(f"compiling {name} failed:\n{p.stderr[-3000:]}")
        return None, errors
    if not run:
        return "", {}
    out = subprocess.run([exe], check=True, capture_output=True, text=True).stdout
    return out, {}


PRELUDE = r"""#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include "nccl.h"
#define KIND(x) _Generic((x), char: "char", signed char: "schar", unsigned char: "uchar", \
  short: "short", unsigned short: "ushort", int: "int", unsigned: "uint", long: "long", \
  unsigned long: "ulong", long long: "llong", unsigned long long: "ullong", float: "float", \
  double: "double", char *: "char*", const char *: "const char*", void *: "void*", \
  default: "other")
static void show_value(const char *name, const char *kind, long double v) {
  printf("%s = %.21Lg (%s)\n", name, v, kind);
}
/* Every branch of a _Generic must compile for every type: these pick the operand only
 * where it has the right kind. */
#define AS_NUM(x) _Generic((x), char *: 0, const char *: 0, void *: 0, default: (x))
#define AS_PTR(x) _Generic((x), char *: (x), const char *: (x), void *: (x), default: (void *)0)
#define SHOW(name, x) _Generic((x), \
  char *: printf("%s = \"%s\"\n", name, (const char *)AS_PTR(x)), \
  const char *: printf("%s = \"%s\"\n", name, (const char *)AS_PTR(x)), \
  void *: printf("%s = pointer %p\n", name, (void *)AS_PTR(x)), \
  default: show_value(name, KIND(x), (long double)AS_NUM(x)))
static void show_bytes(const char *name, const void *p, size_t n) {
  printf("%s =", name);
  for (size_t i = 0; i < n; i++) printf(" %02x", ((const unsigned char *)p)[i]);
  printf("\n");
}
int main(void) {
"""


def facts_program(h, skip):
    """One line per fact, each printing 'name = value'; skip: lines left out."""
    lines = []
    for name, value in sorted(h.macros.items()):
        if value.lstrip().startswith("{"):
            m = re.search(r"sizeof\((\w+)\)", value)
            if m:
                lines.append((f"initializer {name}",
                              f'{{ static const {m.group(1)} v = {name}; '
                              f'show_bytes("initializer {name}", &v, sizeof v); }}'))
            continue
        lines.append((f"macro {name}",
                      f'\n#ifdef {name}\nSHOW("macro {name}", {name});\n#else\n'
                      f'printf("macro {name} = <not defined>\\n");\n#endif\n'))
    for name in sorted(h.function_macros):
        if name == "NCCL_VERSION":
            for args in ((2, 8, 4), (2, 9, 0), (2, 27, 7), (2, 32, 3), (3, 0, 0)):
                a = ", ".join(map(str, args))
                lines.append((f"macro {name}", f'SHOW("macro NCCL_VERSION({a})", NCCL_VERSION({a}));'))
    for enum, names in sorted(h.enums.items()):
        for e in names:
            lines.append((f"enumerator {e} ({enum})", f'SHOW("enumerator {e}", (long long){e});'))
    for t in sorted(set(h.typedefs)):
        lines.append((f"type {t}", f'printf("sizeof({t}) = %zu\\n", sizeof({t}));'))
    for s, fields in sorted(h.structs.items()):
        for f in fields:
            lines.append((f"field {s}.{f}",
                          f'printf("field {s}.{f}: offset %zu size %zu kind %s\\n", '
                          f'offsetof({s}, {f}), sizeof(((({s} *)0)->{f})), KIND((({s} *)0)->{f}));'))
    kept = [(what, code) for what, code in lines if what not in skip]
    src = PRELUDE
    where = {}
    for what, code in kept:
        first = src.count("\n") + 1
        src += code + "\n"
        for n in range(first, src.count("\n") + 1):
            where[n] = what
    return src + "return 0;\n}\n", where


def facts(h, include_dirs, workdir, label):
    """{fact: value} compiled against include_dirs; facts that do not compile are named."""
    skip, broken = set(), {}
    for attempt in range(6):
        src, where = facts_program(h, skip)
        out, errors = compile_and_run(src, include_dirs, workdir, f"facts_{label}")
        if out is not None:
            break
        for line, msg in errors.items():
            what = where.get(line)
            if what is None:
                raise SystemExit(f"facts_{label}: error outside the facts, line {line}: {msg}")
            skip.add(what)
            broken.setdefault(what, msg)
    else:
        raise SystemExit(f"facts_{label}: still failing after {attempt + 1} rounds")
    values = {}
    for line in out.splitlines():
        key, _, value = line.partition(" = ") if " = " in line else line.partition(": ")
        values[key] = value
    return values, broken


def prototype_check(h, our_dir, cuda_include, workdir):
    """{function: message} for each of NVIDIA's functions ours lacks or declares otherwise."""
    names = sorted(h.functions)
    src = '#include "nccl.h"\nstatic void declared_here() {\n'
    where = {}
    for n in names:
        where[src.count("\n") + 1] = (n, "not declared by ours")
        src += f"  (void)&{n};\n"
    src += "}\nextern \"C\" {\n"
    for n in names:
        where[src.count("\n") + 1] = (n, "declared differently")
        src += h.functions[n] + "\n"
    src += "}\n"
    _, errors = compile_and_run(src, [our_dir, cuda_include], workdir, "prototypes", cxx=True,
                                run=False)
    found = {}
    for line, msg in sorted(errors.items()):
        if line not in where:
            raise SystemExit(f"prototypes: error outside the declarations, line {line}: {msg}")
        n, what = where[line]
        found.setdefault(n, f"{what}: {msg}; NVIDIA's: {h.functions[n]}")
    return found


def main():
    our_h, nv_dir, cuda_include, mode = sys.argv[1:5]
    label = sys.argv[5] if len(sys.argv) > 5 else nv_dir
    our_dir = os.path.dirname(os.path.abspath(our_h))
    nv = Header(os.path.join(nv_dir, "nccl.h"), cuda_include)
    ours = Header(our_h, cuda_include)
    problems = []
    with tempfile.TemporaryDirectory() as work:
        theirs, _ = facts(nv, [nv_dir, cuda_include], work, "nvidia")
        mine, broken = facts(nv, [our_dir, cuda_include], work, "ours")
        for what, msg in sorted(broken.items()):
            if mode == "subset" and what.startswith("initializer"):
                continue
            problems.append(f"{what}: missing or different in ours ({msg})")
        for key, want in sorted(theirs.items()):
            if key not in mine:
                continue
            got = mine[key]
            if got == want:
                continue
            name = key.split()[1] if " " in key else key
            if mode == "subset":
                if name in VERSION_MACROS or key.startswith("initializer"):
                    continue
                if key.startswith("enumerator ncclNum") and float(got.split()[0]) >= float(want.split()[0]):
                    continue
                if key.startswith("sizeof(") and int(got) >= int(want):
                    continue  # a struct ours has grown at its end
            problems.append(f"{key}: ours {got}, NVIDIA's {want}")
        for n, msg in sorted(prototype_check(nv, our_dir, cuda_include, work).items()):
            problems.append(f"function {n}: {msg}")
    if mode == "exact":
        for n in sorted(set(ours.functions) - set(nv.functions)):
            problems.append(f"function {n}: declared by ours, not by NVIDIA's {label}")
        for e in sorted({x for v in ours.enums.values() for x in v} -
                        {x for v in nv.enums.values() for x in v}):
            problems.append(f"enumerator {e}: declared by ours, not by NVIDIA's {label}")
    for p in problems:
        print(p)
    nfields = sum(len(f) for f in nv.structs.values())
    print(f"{label} ({mode}): {len(nv.functions)} functions, "
          f"{sum(len(v) for v in nv.enums.values())} enumerators, {len(nv.macros)} macros, "
          f"{len(nv.structs)} structs ({nfields} fields), {len(set(nv.typedefs))} types compared: "
          f"{len(problems)} differences")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
