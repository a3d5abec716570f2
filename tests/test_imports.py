"""The package's modules import in one direction (no cycle among them), and each one can be the
first arrayad module a fresh interpreter imports.

The graph is read from the source with ``ast``: every ``import`` / ``from ... import`` of every
``.py`` module under ``arrayad/``, at module level and inside functions (a function-level import is
still a dependency, only a later one), relative imports resolved. An edge M -> T means that
importing M runs T's code or needs T's namespace:

* ``import a.b.c`` needs ``a.b.c``, and runs the packages ``a`` and ``a.b`` on the way;
* ``from P import n`` needs ``P.n`` when ``n`` is a submodule, and ``P``'s namespace otherwise;
  the packages above ``P`` run on the way;
* a package that M only passes through on the way to a submodule and that is one of M's own
  parent packages is not an edge: it is imported before M's body runs, so reaching
  ``arrayad._core`` from ``arrayad._ops.elementwise`` through ``arrayad`` runs nothing. Naming it
  (``import arrayad as ad``, ``from arrayad import tensor``) is an edge: M uses its namespace.

The compiled core (the modules ``arrayad/_core/*.pyx``) is not made of ``.py`` modules and is not
in the graph; it imports nothing from arrayad but its own modules, which the last test checks.
"""
import ast
import concurrent.futures
import importlib.util
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PKG = ROOT / "arrayad"

# Modules that need an optional library to import at all: skipped where it is not installed.
NEEDS = {"arrayad.backends.torch": "torch", "arrayad.backends.cupy": "cupy",
         "arrayad.backends.jax": "jax", "arrayad.backends.dask": "dask",
         "arrayad.backends.array_api_strict": "array_api_strict"}


def module_name(path):
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PKG.rglob("*.py"))}
PACKAGES = {m for m, p in MODULES.items() if p.name == "__init__.py"}


def parents(name):
    """'a.b.c' -> ['a', 'a.b'] (outermost first)."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _under_type_checking(node, parent_of):
    while node in parent_of:
        node = parent_of[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def is_submodule(name):
    """Whether ``name`` (arrayad.x.y) is a module or package of the source tree (.py, a compiled
    extension, or a directory), as opposed to a name defined inside a module."""
    rel = pathlib.Path(*name.split(".")[1:]) if "." in name else pathlib.Path()
    if name in MODULES or (PKG / rel).is_dir():
        return True
    return any(p.suffix in (".py", ".pyx", ".so", ".pyd")
               for p in (PKG / rel).parent.glob(rel.name + ".*"))


def imports_of(module, source=None):
    """[(target module, line, statement)] for every edge out of ``module`` (see the docstring);
    ``source`` is the module's text (read from its file by default)."""
    if source is None:
        source = MODULES[module].read_text()
    tree = ast.parse(source)
    parent_of = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    own_parents = set(parents(module))
    package = module if module in PACKAGES else module.rpartition(".")[0]
    edges = []

    def add(target, node, passed_through=()):
        for p in passed_through:
            if p not in own_parents:
                edges.append((p, node.lineno, ast.unparse(node)))
        edges.append((target, node.lineno, ast.unparse(node)))

    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)) or _under_type_checking(node, parent_of):
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node, parents(alias.name))
            continue
        if node.level:
            base = package.split(".")
            base = base[:len(base) - (node.level - 1)]
            origin = ".".join(base + ([node.module] if node.module else []))
        else:
            origin = node.module
        names = [a.name for a in node.names]
        submodules = [f"{origin}.{n}" for n in names if n != "*" and is_submodule(f"{origin}.{n}")]
        for sub in submodules:
            add(sub, node)
        if len(submodules) == len(names):    # only submodules: origin is passed through
            for p in parents(origin) + [origin]:
                if p not in own_parents:
                    edges.append((p, node.lineno, ast.unparse(node)))
        else:                                # names from origin's namespace
            add(origin, node, parents(origin))
    # Only arrayad's own .py modules (namespace packages without __init__ run nothing), no self-loops.
    return [(t, line, stmt) for t, line, stmt in edges if t in MODULES and t != module]


def import_graph():
    graph = {}
    for m in MODULES:
        graph[m] = {}
        for target, line, stmt in imports_of(m):
            graph[m].setdefault(target, f"{MODULES[m].relative_to(ROOT)}:{line}: {stmt}")
    return graph


def components(graph):
    """The strongly connected components of more than one module (Tarjan): each holds cycles."""
    index, low, on_stack, stack, sccs = {}, {}, set(), [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                sccs.append(sorted(scc))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sccs


def shortest_cycle(graph, scc, start):
    """A shortest cycle through ``start`` inside ``scc`` (breadth first), first == last."""
    prev, frontier = {start: None}, [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v]):
                if w == start:
                    path = [v]
                    while prev[path[-1]] is not None:
                        path.append(prev[path[-1]])
                    return path[::-1] + [start]
                if w in scc and w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"no cycle through {start}")


def find_cycles(graph):
    """For each component, one shortest cycle through each of its modules (without repeats)."""
    out = []
    for scc in components(graph):
        cycles = []
        for m in scc:
            c = shortest_cycle(graph, set(scc), m)
            i = c.index(min(c[:-1]))
            c = c[i:-1] + c[:i] + [c[i]]       # rotated so that equal cycles compare equal
            if c not in cycles:
                cycles.append(c)
        out.append((scc, cycles))
    return out


def describe(scc, cycles, graph):
    lines = [f"{len(scc)} modules import each other: {', '.join(scc)}"]
    for cycle in cycles:
        lines.append("  " + " -> ".join(cycle))
        for a, b in zip(cycle, cycle[1:]):
            why = graph[a][b]
            lines.append(f"      {a} -> {b}   ({why if len(why) < 110 else why[:107] + '...'})")
    return "\n".join(lines)


def targets(module, source):
    return sorted({t for t, _, _ in imports_of(module, source)})


def test_the_graph_reader():
    el = "arrayad._ops.elementwise"
    # naming a package is an edge; passing through one's own parent package to a submodule is not
    assert targets(el, "import arrayad as ad") == ["arrayad"]
    assert targets(el, "import arrayad") == ["arrayad"]
    assert targets(el, "import arrayad.func") == ["arrayad.func"]
    assert targets(el, "from arrayad import func") == ["arrayad.func"]
    assert targets(el, "from arrayad import tensor") == ["arrayad"]
    # relative imports; arrayad._core has an __init__ (an edge), the compiled _core is no .py
    assert targets(el, "from .._core._core import bind") == ["arrayad._core"]
    assert targets(el, "from .. import _dtypes, func") == ["arrayad._dtypes", "arrayad.func"]
    assert targets(el, "from ._rules import defvjp") == ["arrayad._ops._rules"]
    assert targets(el, "from . import reductions") == ["arrayad._ops.reductions"]
    assert targets(el, "from ..autograd.function import Function") == [
        "arrayad.autograd", "arrayad.autograd.function"]
    assert targets("arrayad.backends.torch", "from . import Backend") == ["arrayad.backends"]
    assert targets("arrayad.autograd", "from .function import Function") == [
        "arrayad.autograd.function"]
    assert targets("arrayad", "from ._ops.creation import *") == [
        "arrayad._ops", "arrayad._ops.creation"]
    assert targets("arrayad", "from . import autograd") == ["arrayad.autograd"]
    # inside functions too; not under `if TYPE_CHECKING:`; other libraries are not in the graph
    assert targets(el, "def f():\n    import arrayad.linalg\n") == ["arrayad.linalg"]
    assert targets(el, "if TYPE_CHECKING:\n    import arrayad\n") == []
    assert targets(el, "import numpy as np\nfrom array_api_compat import numpy") == []

    graph = import_graph()
    assert set(graph) == set(MODULES) and "arrayad._ops.elementwise" in graph
    assert {"arrayad.autograd", "arrayad.func", "arrayad._ops.elementwise"} <= set(graph["arrayad"])


def test_no_import_cycle():
    graph = import_graph()
    cycles = find_cycles(graph)
    if cycles:
        pytest.fail("import cycles among arrayad's modules (an edge means importing the first runs "
                    "or needs the second):\n"
                    + "\n".join(describe(scc, cs, graph) for scc, cs in cycles), pytrace=False)


def test_the_internal_namespace_is_a_leaf():
    # every rule reaches other operations through it (NOTE [internal namespace]), so it must not
    # import any of them
    assert set(import_graph()["arrayad._ops._namespace"]) <= {"arrayad._dtypes"}


def _importable(module):
    lib = NEEDS.get(module)
    return lib is None or importlib.util.find_spec(lib) is not None


SMOKE = "import arrayad as ad; assert float(ad.func.grad(ad.sin)(0.0)) == 1.0"


def _run(code):
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def test_each_module_can_be_imported_first():
    """One fresh interpreter per module (a few at a time): ``import <module>`` first, then a
    gradient through the package."""
    modules = [m for m in sorted(MODULES) if _importable(m)]
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        procs = dict(zip(modules, pool.map(lambda m: _run(f"import {m}\n{SMOKE}"), modules)))
    failed = {m: p.stderr.strip().splitlines()[-1:] for m, p in procs.items() if p.returncode}
    assert not failed, "modules that fail when imported first in a fresh interpreter:\n" + "\n".join(
        f"  {m}: {procs[m].stderr}" for m in failed)


@pytest.mark.parametrize("order", ["forward", "reversed"])
def test_all_modules_in_one_interpreter(order):
    modules = [m for m in sorted(MODULES) if _importable(m)]
    if order == "reversed":
        modules.reverse()
    proc = _run("".join(f"import {m}\n" for m in modules) + SMOKE)
    assert proc.returncode == 0, f"importing the modules in {order} order failed:\n{proc.stderr}"


def test_the_compiled_core_imports_nothing_from_arrayad():
    paths = sorted((PKG / "_core").glob("*.pyx"))
    core = {p.stem for p in paths}
    assert "_core" in core and len(core) > 1, core
    for path in paths:
        bad = []
        for line in path.read_text().splitlines():
            if not re.match(r"\s*(from\s+(arrayad\b|\.)\S*\s+c?import\b|c?import\s+arrayad\b)", line):
                continue
            sibling = re.match(r"\s*from\s+\.(\w+)\s+c?import\b", line)   # another core module
            if sibling is None or sibling.group(1) not in core:
                bad.append(line.strip())
        assert not bad, f"arrayad/_core/{path.name} imports from arrayad: {bad}"


# The op modules of arrayad._ops (every .py of the package but its __init__).
OP_MODULES = sorted(p.stem for p in (PKG / "_ops").glob("*.py") if p.stem != "__init__")

# In a fresh interpreter: ``arrayad._ops``'s __init__ runs with ``from . import <m>`` for every op
# module of ORDER prepended, so that the op modules are first imported in that order, whatever
# order the __init__ itself lists them in; then a gradient through the package.
_REORDERED = '''
import ast, importlib.machinery, sys
ORDER = {order!r}

class _Loader(importlib.machinery.SourceFileLoader):
    def get_code(self, fullname):
        tree = ast.parse(self.get_source(fullname))
        tree.body[:0] = [ast.ImportFrom(None, [ast.alias(m)], 1) for m in ORDER]
        return compile(ast.fix_missing_locations(tree), self.path, "exec")

class _Finder:
    def find_spec(self, name, path, target=None):
        if name != "arrayad._ops":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        spec.loader = _Loader(name, spec.origin)
        return spec

sys.meta_path.insert(0, _Finder())
'''


def _op_module_orders():
    """Every op module once first and once last (module k first, module k + 1 last, the rest in
    between), and a few random orders (a fixed seed)."""
    import random
    mods, orders = OP_MODULES, []
    for k, first in enumerate(mods):
        last = mods[(k + 1) % len(mods)]
        orders.append([first] + [m for m in mods if m not in (first, last)] + [last])
    rng = random.Random(23)
    orders += [rng.sample(mods, len(mods)) for _ in range(3)]
    return orders


def test_op_modules_import_in_any_order():
    """The op modules do not depend on the order arrayad._ops's __init__ lists them in: each
    imports (or reads at call time) what it uses."""
    assert len(OP_MODULES) > 10 and "linalg_ext" in OP_MODULES
    orders = _op_module_orders()
    assert all(sorted(o) == OP_MODULES for o in orders)
    assert {o[0] for o in orders} == {o[-1] for o in orders} == set(OP_MODULES)
    code = [_REORDERED.format(order=o) + SMOKE + "\nassert sys.modules['arrayad._ops'].ops.linalg.svd"
            for o in orders]
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        procs = list(pool.map(_run, code))
    failed = [(o, p.stderr.strip().splitlines()[-1:]) for o, p in zip(orders, procs) if p.returncode]
    assert not failed, "import orders of arrayad._ops's modules that fail:\n" + "\n".join(
        f"  {o}: {err}" for o, err in failed)
