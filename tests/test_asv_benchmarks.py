"""Every asv benchmark runs once (setup -> call -> teardown) on the NumPy backend.

asv is not needed: the test finds the benchmarks the way asv does (methods of module-level classes
whose names start with time_/peakmem_/track_/mem_) and calls them directly, with the
suite's smoke switch on (1000 elements instead of 1,000,000, 20 calls instead of 10,000), so a
broken benchmark fails here in seconds instead of in a long asv run.
"""
import importlib
import importlib.util
import inspect
import os
import pathlib
import sys

import pytest

BENCH_DIR = pathlib.Path(__file__).resolve().parent.parent / "asv_bench" / "benchmarks"
PREFIXES = ("time_", "peakmem_", "track_", "mem_", "timeraw_")
# Not named "benchmarks": the repository's top-level benchmarks/ (compare.py) would clash.
PACKAGE = "_arrayad_asv_benchmarks"


def _load_package():
    if PACKAGE in sys.modules:
        return sys.modules[PACKAGE]
    spec = importlib.util.spec_from_file_location(
        PACKAGE, BENCH_DIR / "__init__.py", submodule_search_locations=[str(BENCH_DIR)])
    pkg = importlib.util.module_from_spec(spec)
    sys.modules[PACKAGE] = pkg
    saved = dict(os.environ)  # the package pins thread counts; keep the test session's as is
    try:
        spec.loader.exec_module(pkg)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return pkg


MODULES = sorted(p.stem for p in BENCH_DIR.glob("*.py") if p.stem != "__init__")


def _cases():
    _load_package()
    cases = []
    for stem in MODULES:
        mod = importlib.import_module(f"{PACKAGE}.{stem}")
        for name, obj in vars(mod).items():
            if getattr(obj, "__module__", None) != mod.__name__:
                continue  # imported helpers such as common.chain
            if inspect.isclass(obj):
                for meth in sorted(vars(obj)):
                    if meth.startswith(PREFIXES):
                        cases.append(pytest.param(obj, meth, id=f"{stem}.{name}.{meth}"))
            elif callable(obj) and name.startswith(PREFIXES):
                # asv allows them, but this suite uses classes only; extend the test if that changes
                raise AssertionError(f"{stem}.{name}: module-level benchmark functions are not run here")
    return cases


def _numpy_params(cls):
    """The parameter combinations of ``cls`` that use the NumPy backend (asv's params rules)."""
    params = getattr(cls, "params", [])
    names = getattr(cls, "param_names", [])
    if not params:
        return [()]
    if not all(isinstance(p, (list, tuple)) for p in params):
        params = [params]  # a single parameter given as a flat list
    combos = [()]
    for name, values in zip(names, params):
        values = ["numpy"] if name == "backend" else list(values)
        combos = [c + (v,) for c in combos for v in values]
    return combos


@pytest.fixture(scope="module", autouse=True)
def smoke():
    common = importlib.import_module(f"{PACKAGE}.common")
    common.SMOKE = True
    yield
    common.SMOKE = False


def test_every_module_has_benchmarks():
    assert {"overhead", "transforms", "memory"} <= set(MODULES)
    assert len(_cases()) >= 20


@pytest.mark.parametrize("cls, name", _cases())
def test_benchmark_runs(cls, name):
    for args in _numpy_params(cls):
        obj = cls()
        if hasattr(obj, "setup"):
            obj.setup(*args)
        try:
            result = getattr(obj, name)(*args)
        finally:
            if hasattr(obj, "teardown"):
                obj.teardown(*args)
        if name.startswith("track_"):
            assert isinstance(result, (int, float)), result
