# Layering test for libcoll (issue 14): every folder of libcoll/src may include and call only
# itself and the folders before it in the order written in docs/architecture.md, and no more
# than two files may call each other in a circle. Includes are read from the sources; calls
# from the object files' symbol tables (nm) of libcoll's internal static libraries, mapped
# back to their sources through the build directory's compile_commands.json.
#
#   check_layering.py --build BUILD_DIR --src libcoll/src --doc docs/architecture.md
#   check_layering.py --self-test      (runs the checks on an in-memory example)
#
# Exit status: 0 when nothing is wrong, 1 on any violation, 2 when it could not run.
# Standard library only; needs nm and ar (binutils).

import argparse
import collections
import json
import os
import re
import subprocess
import sys

ORDER_PREFIX = 'Layers, lowest first:'
SOURCE_EXTS = ('.c', '.h', '.cu')
ALWAYS_ALLOWED_INCLUDES = ('coll.h', 'coll_config.h')
# nm symbol types: global definitions (text, data, bss, read-only, weak) and undefined uses.
DEFINED_TYPES = set('TDBRWVCGSi')
STRONG_TYPES = set('TDBRCGSi')
USED_TYPES = set('U')
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


class Failure(Exception):
    """The checker could not run (bad arguments, missing build); not a layering verdict."""


# ---------------------------------------------------------------------------------------------
# The order


def parse_order(doc_text):
    """Returns the list of layer names from the 'Layers, lowest first:' line, or None."""
    for line in doc_text.splitlines():
        pos = line.find(ORDER_PREFIX)
        if pos < 0:
            continue
        names = re.findall(r'`([^`]+)`', line[pos + len(ORDER_PREFIX):])
        if names:
            return [n.strip().strip('/') for n in names]
    return None


def check_order(order, present_folders):
    """Violations for an order that names a folder twice or misses a folder of libcoll/src."""
    out = []
    seen = set()
    for name in order:
        if name in seen:
            out.append('order line names %s twice' % name)
        seen.add(name)
    for folder in sorted(present_folders):
        if folder not in seen:
            out.append('libcoll/src/%s/ is not in the order line of docs/architecture.md '
                       '(add it where it belongs)' % folder)
    return out


# ---------------------------------------------------------------------------------------------
# The model the checks run on: files (relative to libcoll/src), their includes, and which file
# defines and uses which symbol. Built from the tree and the build, or in memory (self-test).


class Model:
    def __init__(self):
        self.files = []            # every source file, 'core/comm.c'
        self.includes = {}         # file -> [(line number, include text, target file or None)]
        self.defs = {}             # file -> {symbol: nm type}
        self.uses = {}             # file -> set of symbols
        self.objects = 0


def layer_of(path):
    """'transport/shm/shm.c' -> 'transport'; a file directly in libcoll/src has no layer."""
    parts = path.split('/')
    return parts[0] if len(parts) > 1 else None


def resolve_include(src_root, including, text):
    """The file under libcoll/src that `#include "text"` in `including` names, or None."""
    candidates = [os.path.join(os.path.dirname(including), text), text]
    for rel in candidates:
        rel = os.path.normpath(rel)
        if rel.startswith('..'):
            continue
        if os.path.isfile(os.path.join(src_root, rel)):
            return rel.replace(os.sep, '/')
    return None


def scan_sources(src_root, model):
    for dirpath, dirnames, filenames in os.walk(src_root):
        dirnames.sort()
        for name in sorted(filenames):
            if not name.endswith(SOURCE_EXTS):
                continue
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, src_root).replace(os.sep, '/')
            incs = []
            try:
                with open(full, encoding='utf-8', errors='replace') as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE_RE.match(line)
                        if m:
                            incs.append((lineno, m.group(1),
                                         resolve_include(src_root, rel, m.group(1))))
            except FileNotFoundError:
                continue  # moved away while the tree was read
            model.files.append(rel)
            model.includes[rel] = incs


def run_tool(argv, cwd=None):
    try:
        res = subprocess.run(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             universal_newlines=True)
    except OSError as e:
        raise Failure('cannot run %s: %s' % (argv[0], e))
    if res.returncode != 0:
        raise Failure('%s failed (%d): %s' % (' '.join(argv), res.returncode, res.stderr.strip()))
    return res.stdout


def read_symbols(obj_paths):
    """{object: (defined {symbol: type}, used set)}, from nm's POSIX output ('-P -A': one
    'object: symbol type value size' line per symbol), a few nm runs for all objects."""
    table = {o: ({}, set()) for o in obj_paths}
    for i in range(0, len(obj_paths), 200):
        for line in run_tool(['nm', '-P', '-A'] + obj_paths[i:i + 200]).splitlines():
            name, _, rest = line.rpartition(': ')
            fields = rest.split()
            if name not in table or len(fields) < 2:
                continue
            sym, kind = fields[0], fields[1]
            defined, used = table[name]
            if kind in DEFINED_TYPES:
                defined[sym] = kind
            elif kind in USED_TYPES:
                used.add(sym)
    return table


def under(path, root):
    return os.path.commonpath([path, root]) == root


def build_prefix_of_src(build_root, src_root, entries):
    """Where libcoll/src's objects go in the build tree ('libcoll/src'): meson mirrors the
    source tree, so it is src_root relative to the project's source directory."""
    try:
        with open(os.path.join(build_root, 'meson-info', 'meson-info.json')) as f:
            source = json.load(f)['directories']['source']
        rel = os.path.relpath(src_root, os.path.realpath(source))
        if not rel.startswith('..'):
            return rel
    except (OSError, ValueError, KeyError):
        pass
    for obj, src in entries.items():
        built = os.path.relpath(os.path.dirname(os.path.dirname(obj)), build_root)
        sdir = os.path.dirname(src)
        if sdir and built.endswith('/' + sdir):
            return built[:-len(sdir) - 1]
    return None


def find_objects(build_root, src_root):
    """[(object path, source path relative to libcoll/src)] for every object of a static
    library built from libcoll/src: compile_commands.json maps objects to sources, and the
    archives' member lists add objects made by custom commands (the .cu kernels)."""
    cc_path = os.path.join(build_root, 'compile_commands.json')
    try:
        with open(cc_path) as f:
            entries = json.load(f)
    except (OSError, ValueError) as e:
        raise Failure('cannot read %s: %s (configure the build first)' % (cc_path, e))
    objects = {}
    archives = set()
    for e in entries:
        if 'output' not in e or 'file' not in e:
            continue
        directory = e.get('directory', build_root)
        src = os.path.realpath(os.path.join(directory, e['file']))
        obj = os.path.realpath(os.path.join(directory, e['output']))
        if not under(src, src_root):
            continue
        privdir = os.path.dirname(obj)
        # meson puts a static library's objects in '<library>.a.p/' next to the library.
        if not privdir.endswith('.a.p'):
            continue
        archives.add(privdir[:-2])
        objects[obj] = os.path.relpath(src, src_root).replace(os.sep, '/')
    if not objects:
        raise Failure('no object of a static library built from %s in %s' % (src_root, cc_path))
    prefix = build_prefix_of_src(build_root, src_root, objects)
    for archive in sorted(archives):
        if not os.path.exists(archive):
            raise Failure('%s is missing: build first (ninja -C %s)' % (archive, build_root))
        for member in run_tool(['ar', 't', archive], cwd=build_root).split():
            for cand in (os.path.join(build_root, member),
                         os.path.join(os.path.dirname(archive), member),
                         os.path.join(archive + '.p', member)):
                cand = os.path.realpath(cand)
                if os.path.isfile(cand):
                    break
            else:
                continue
            if cand in objects or prefix is None:
                continue
            # An object made by a custom command (mem/cuda_reduce.o from mem/cuda_reduce.cu):
            # the source of the same stem in the matching folder of libcoll/src.
            built_dir = os.path.relpath(os.path.dirname(cand), build_root)
            if built_dir != prefix and not built_dir.startswith(prefix + '/'):
                continue
            sdir = os.path.join(src_root, built_dir[len(prefix) + 1:])
            stem = os.path.basename(cand).split('.')[0]
            for ext in ('.cu', '.c'):
                guess = os.path.realpath(os.path.join(sdir, stem + ext))
                if under(guess, src_root) and os.path.isfile(guess):
                    objects[cand] = os.path.relpath(guess, src_root).replace(os.sep, '/')
                    break
    missing = [o for o in objects if not os.path.isfile(o)]
    if missing:
        raise Failure('%d object(s) missing, e.g. %s: build first (ninja -C %s)'
                      % (len(missing), missing[0], build_root))
    return sorted(objects.items())


def read_build(build_root, src_root, model):
    objects = find_objects(build_root, src_root)
    table = read_symbols([obj for obj, _ in objects])
    for obj, src in objects:
        defined, used = table[obj]
        model.defs.setdefault(src, {}).update(defined)
        model.uses.setdefault(src, set()).update(used)
        model.objects += 1
        if src not in model.includes:
            model.files.append(src)
            model.includes[src] = []


# ---------------------------------------------------------------------------------------------
# The checks


def check_includes(model, rank):
    out = []
    known = set(rank) | {layer_of(f) for f in model.files}
    count = 0
    for f in sorted(model.includes):
        own = layer_of(f)
        if own not in rank:
            continue  # reported as a folder missing from the order (or a file with no folder)
        for lineno, text, target in model.includes[f]:
            if text in ALWAYS_ALLOWED_INCLUDES or '/' not in text:
                continue
            if target is not None:
                tl = layer_of(target)
            elif text.split('/')[0] in known:
                tl = text.split('/')[0]  # names a folder of libcoll/src, but no file there
            else:
                continue  # a header from outside libcoll/src
            count += 1
            if tl is None or tl == own:
                continue
            if tl not in rank:
                out.append('libcoll/src/%s:%d includes "%s", in folder %s which is not in the '
                           'order' % (f, lineno, text, tl))
            elif rank[tl] > rank[own]:
                out.append('libcoll/src/%s:%d includes "%s": %s is above %s'
                           % (f, lineno, text, tl, own))
    return out, count


def build_edges(model):
    """{user: {definer: [symbols]}} for every used symbol defined by another file of
    libcoll/src (a strong definition wins over weak ones)."""
    definers = collections.defaultdict(list)
    for f, syms in model.defs.items():
        for s, kind in syms.items():
            definers[s].append((f, kind))
    edges = collections.defaultdict(lambda: collections.defaultdict(list))
    symbols = set()
    for user in sorted(model.uses):
        for s in sorted(model.uses[user]):
            cands = definers.get(s)
            if not cands:
                continue  # defined outside libcoll/src (libc, CUDA, ibverbs)
            strong = [f for f, k in cands if k in STRONG_TYPES]
            for d in sorted(set(strong or [f for f, _ in cands])):
                if d != user:
                    edges[user][d].append(s)
                    symbols.add(s)
    return edges, symbols


def check_calls(edges, rank):
    out = []
    for user in sorted(edges):
        ul = layer_of(user)
        if ul not in rank:
            continue
        for d in sorted(edges[user]):
            dl = layer_of(d)
            if dl in rank and rank[dl] > rank[ul]:
                for s in edges[user][d]:
                    out.append('libcoll/src/%s calls %s, defined in libcoll/src/%s: %s is above %s'
                               % (user, s, d, dl, ul))
    return out


def strongly_connected(nodes, succ):
    """Tarjan's algorithm, iterative. Returns the components (lists of nodes)."""
    index, low, on_stack = {}, {}, set()
    stack, comps = [], []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(succ.get(root, ())))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(succ.get(w, ()))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                u = work[-1][0]
                low[u] = min(low[u], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                comps.append(comp)
    return comps


def bfs_path(start, goal, succ, allowed, skip_edge=None):
    """Shortest path start .. goal inside `allowed` (goal only as the end), or None."""
    prev = {start: None}
    queue = collections.deque([start])
    while queue:
        v = queue.popleft()
        for w in sorted(succ.get(v, ())):
            if w not in allowed or (v, w) == skip_edge:
                continue
            if w == goal:
                path = [w, v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return path[::-1]
            if w not in prev:
                prev[w] = v
                queue.append(w)
    return None


def concrete_cycle(comp, succ):
    """A shortest cycle of at least three files in the component; failing that (a chain of
    mutual pairs), a closed walk through every file of it."""
    members = set(comp)
    best = None
    for s in sorted(comp):
        for a in sorted(w for w in succ.get(s, ()) if w in members):
            # s -> a, then a .. s without the direct edge a -> s and not through s.
            rest = bfs_path(a, s, succ, members, skip_edge=(a, s))
            if rest is None:
                continue
            cycle = [s] + rest
            if best is None or len(cycle) < len(best):
                best = cycle
    if best is not None:
        return best, True
    order = sorted(comp)
    walk = [order[0]]
    for target in order[1:] + [order[0]]:
        if target in walk and target != order[0]:
            continue
        walk += bfs_path(walk[-1], target, succ, members)[1:]
    return walk, False


def check_circles(edges, files):
    succ = {u: set(ds) for u, ds in edges.items()}
    nodes = sorted(set(files) | set(succ) | {d for ds in succ.values() for d in ds})
    out = []
    for comp in sorted(strongly_connected(nodes, succ), key=lambda c: sorted(c)):
        if len(comp) <= 2:
            continue
        comp = sorted(comp)
        cycle, simple = concrete_cycle(comp, succ)
        steps = []
        for a, b in zip(cycle, cycle[1:]):
            steps.append('libcoll/src/%s -(%s)->' % (a, edges[a][b][0]))
        steps.append('libcoll/src/%s' % cycle[-1])
        inner = sum(1 for u in comp for d in succ.get(u, ()) if d in comp)
        out.append('circle of %d files calling each other (%d edges): %s; %s: %s'
                   % (len(comp), inner, ', '.join('libcoll/src/' + f for f in comp),
                      'cycle' if simple else 'closed walk', ' '.join(steps)))
    return out


def check(model, order, present_folders):
    """All violations, and what was checked."""
    violations = []
    if order is None:
        return ['docs/architecture.md has no line "%s `a` < `b` < ..." giving the order of '
                'the folders of libcoll/src' % ORDER_PREFIX], {}
    violations += check_order(order, present_folders)
    rank = {name: i for i, name in enumerate(order)}
    for f in sorted(model.files):
        if layer_of(f) is None:
            violations.append('libcoll/src/%s is in no folder (every file belongs to a layer)' % f)
    inc_violations, inc_count = check_includes(model, rank)
    violations += inc_violations
    edges, symbols = build_edges(model)
    violations += check_calls(edges, rank)
    violations += check_circles(edges, model.files)
    stats = {
        'files': len(set(model.files)),
        'objects': model.objects,
        'includes': inc_count,
        'symbols': len(symbols),
        'edges': sum(len(ds) for ds in edges.values()),
    }
    return violations, stats


def report(violations, stats, order):
    for v in violations:
        print('LAYERING: ' + v)
    if violations:
        print('%d layering violation(s)' % len(violations))
        return 1
    print('layers point down: %s' % ' < '.join(order))
    print('checked %(files)d files (%(objects)d objects), %(includes)d includes inside '
          'libcoll/src, %(symbols)d symbols, %(edges)d file-to-file edges; no upward include '
          'or call, no circle of more than two files' % stats)
    return 0


# ---------------------------------------------------------------------------------------------
# Self-test: the checks on an in-memory example, so the checker can be seen to fail.


def self_test():
    order = parse_order('intro\n\nLayers, lowest first: `low` < `mid` < `top`\n')
    problems = []
    if order != ['low', 'mid', 'top']:
        problems.append('order line parsed as %r' % (order,))

    def model_of(spec):
        m = Model()
        for f, (incs, defs, uses) in spec.items():
            m.files.append(f)
            m.includes[f] = [(i + 1, t, t) for i, t in enumerate(incs)]
            m.defs[f] = {s: 'T' for s in defs}
            m.uses[f] = set(uses)
        return m

    bad = model_of({
        # a circle of three: a -> b -> c -> a
        'mid/a.c': ([], ['fa'], ['fb']),
        'mid/b.c': ([], ['fb'], ['fc']),
        'mid/c.c': ([], ['fc'], ['fa', 'up']),
        # low calls and includes up into top
        'low/x.c': (['top/t.h'], ['fx'], ['up', 'printf']),
        'top/t.c': ([], ['up'], ['fx']),
        'top/t.h': ([], [], []),
        # a mutual pair is allowed
        'top/p.c': ([], ['fp'], ['fq']),
        'top/q.c': ([], ['fq'], ['fp']),
    })
    violations, _ = check(bad, order, {'low', 'mid', 'top', 'extra'})
    want = [
        'low/x.c calls up, defined in libcoll/src/top/t.c: top is above low',
        'mid/c.c calls up, defined in libcoll/src/top/t.c: top is above mid',
        'low/x.c:1 includes "top/t.h": top is above low',
        'circle of 3 files',
        'mid/a.c -(fb)-> libcoll/src/mid/b.c -(fc)-> libcoll/src/mid/c.c -(fa)-> '
        'libcoll/src/mid/a.c',
        'libcoll/src/extra/ is not in the order line',
    ]
    for w in want:
        if not any(w in v for v in violations):
            problems.append('not reported: ' + w)
    if any('top/p.c' in v for v in violations):
        problems.append('a mutual pair (top/p.c, top/q.c) was reported as a circle')
    if len(violations) != len(want) - 1:  # the cycle is part of the circle's line
        problems.append('%d violations reported, %d expected: %r'
                        % (len(violations), len(want) - 1, violations))

    # A chain of mutual pairs is a circle of three files without a simple 3-cycle.
    chain = model_of({
        'low/a.c': ([], ['a'], ['b']),
        'low/b.c': ([], ['b'], ['a', 'c']),
        'low/c.c': ([], ['c'], ['b']),
    })
    v_chain, _ = check(chain, order, {'low'})
    if len(v_chain) != 1 or 'closed walk' not in v_chain[0]:
        problems.append('chain of mutual pairs: %r' % (v_chain,))

    good = model_of({
        'low/x.c': ([], ['fx'], []),
        'mid/a.c': (['low/x.h'], ['fa'], ['fx']),
        'top/t.c': (['mid/a.h', 'coll.h'], ['up'], ['fa', 'fx', 'printf']),
    })
    v_good, stats = check(good, order, {'low', 'mid', 'top'})
    if v_good or stats['edges'] != 3:
        problems.append('clean example: %r %r' % (v_good, stats))

    v_none, _ = check(good, parse_order('no order here'), {'low'})
    if len(v_none) != 1 or 'has no line' not in v_none[0]:
        problems.append('missing order line: %r' % (v_none,))

    # Tarjan on a long chain (iterative: no recursion limit) and on a big ring.
    n = 5000
    ring = {i: {(i + 1) % n} for i in range(n)}
    if len(strongly_connected(list(range(n)), ring)) != 1:
        problems.append('ring of %d not one component' % n)
    chain_succ = {i: {i + 1} for i in range(n - 1)}
    if len(strongly_connected(list(range(n)), chain_succ)) != n:
        problems.append('chain of %d not %d components' % (n, n))

    for v in violations + v_chain:
        print('self-test example reports: ' + v)
    if problems:
        for p in problems:
            print('SELF-TEST FAILED: ' + p)
        return 1
    print('self-test passed: the upward calls and include, the missing folder and the circles '
          'are reported; a mutual pair and a clean example are not')
    return 0


def main():
    ap = argparse.ArgumentParser(description='libcoll layering test (see the comment at the top)')
    ap.add_argument('--build', help='meson build directory (has compile_commands.json)')
    ap.add_argument('--src', help='libcoll/src')
    ap.add_argument('--doc', help='docs/architecture.md')
    ap.add_argument('--self-test', action='store_true')
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    if not (args.build and args.src and args.doc):
        ap.error('--build, --src and --doc are required (or --self-test)')
    try:
        src_root = os.path.realpath(args.src)
        build_root = os.path.realpath(args.build)
        try:
            with open(args.doc, encoding='utf-8') as f:
                order = parse_order(f.read())
        except OSError as e:
            raise Failure('cannot read %s: %s' % (args.doc, e))
        present = {d for d in os.listdir(src_root) if os.path.isdir(os.path.join(src_root, d))}
        model = Model()
        scan_sources(src_root, model)
        read_build(build_root, src_root, model)
    except Failure as e:
        print('check_layering: ' + str(e))
        return 2
    violations, stats = check(model, order, present)
    return report(violations, stats, order or [])


if __name__ == '__main__':
    sys.exit(main())
