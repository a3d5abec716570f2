"""The import graph of the operation modules (arrayad/_ops, and the modules built on them that
the package re-exports): no import of the package itself, no cycle among them, and each
importable first in a fresh interpreter. NOTE [internal namespace] in arrayad/_ops/_namespace.py
says how the rules reach other operations without importing the package.

Imports are read from the source (module level and inside functions). ``import a.b`` and
``from a import b`` import the package ``a`` too; a module's own enclosing packages, which
Python has imported before it, count only when named explicitly (``from .. import x``).
"""
import ast
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = os.path.join(ROOT, "arrayad")

OWNED = ["arrayad._ops"] + [
    f"arrayad._ops.{f[:-3]}" for f in sorted(os.listdir(os.path.join(PKG, "_ops")))
    if f.endswith(".py") and f != "__init__.py"
] + ["arrayad._info", "arrayad._dtypes", "arrayad.linalg", "arrayad.fft", "arrayad.testing"]

# Imports of the package left in place on purpose, with the reason.
EXEMPT = {}


def _path(module):
    rel = module.replace(".", os.sep)
    p = os.path.join(ROOT, rel + ".py")
    return p if os.path.exists(p) else os.path.join(ROOT, rel, "__init__.py")


def _imports(module):
    """The arrayad modules ``module`` imports (with the packages that implies)."""
    path = _path(module)
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    ancestors = {module.rsplit(".", k)[0] for k in range(1, module.count(".") + 1)}
    out = set()
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, ast.Import):
            named = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            else:
                base = node.module
            named = [base] + [f"{base}.{a.name}" for a in node.names
                              if os.path.exists(_path(f"{base}.{a.name}"))]
        else:
            continue
        for name in named:
            if name != "arrayad" and not name.startswith("arrayad."):
                continue
            parts = name.split(".")
            for k in range(1, len(parts) + 1):
                target = ".".join(parts[:k])
                if target != module and (target == name or target not in ancestors):
                    out.add(target)
    return out


def test_no_module_imports_the_package():
    bad = {(m, t): "" for m in OWNED for t in _imports(m) if t == "arrayad"}
    unexpected = sorted(set(bad) - set(EXEMPT))
    assert not unexpected, f"modules that import the package arrayad itself: {unexpected}"
    stale = sorted(set(EXEMPT) - set(bad))
    assert not stale, f"EXEMPT lists imports that are gone: {stale}"


def test_no_cycle_among_the_operation_modules():
    """Among these modules and the package's __init__ (which re-exports them), the exempt
    imports aside."""
    nodes = set(OWNED) | {"arrayad"}
    edges = {m: {t for t in _imports(m) & nodes if (m, t) not in EXEMPT} for m in nodes}
    state = {}

    def visit(m, path):
        state[m] = "open"
        for t in sorted(edges[m]):
            if state.get(t) == "open":
                cycle = path[path.index(t):] + [t]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if t not in state:
                visit(t, path + [t])
        state[m] = "done"

    for m in sorted(nodes):
        if m not in state:
            visit(m, [m])


def test_the_namespace_module_is_a_leaf():
    assert _imports("arrayad._ops._namespace") <= {"arrayad._dtypes"}


@pytest.mark.parametrize("module", OWNED)
def test_importable_first(module):
    subprocess.run([sys.executable, "-c", f"import {module}"], cwd=ROOT, check=True,
                   capture_output=True)
