"""A pytest plugin that adds arrayad to the backend lists of three peers' own test suites.

    python -m pytest -p tools.peer_plugin --peer-backend=arrayad --pyargs scipy.special ...

The suites are run from their installed copies, unedited:

- array-api-extra (``array_api_extra/tests``): its ``library`` fixture is parametrized over the
  ``Backend`` enum; an enum cannot grow, so arrayad is a look-alike object (``like()`` nothing:
  arrayad is its own backend) added to that fixture's parameters.
- SciPy (``SCIPY_ARRAY_API=1``): its ``xp`` fixture is parametrized over modules; the arrayad
  module is added. SciPy's ``skip_xp_backends(np_only=True)`` markers (tests of NumPy-only
  behaviour) skip arrayad as they skip every non-NumPy backend; with array-api-strict as
  arrayad's default backend (``ARRAYAD_BACKEND=array_api_strict``), the tests it skips or
  xfails on ``"array_api_strict"`` run on arrayad as non-strict xfails (what array-api-strict
  refuses, arrayad on it refuses too; a pass is reported as xpassed).
- scikit-learn: ``yield_namespace_device_dtype_combinations`` / ``yield_namespaces`` (read when
  its test modules are imported) also yield ``"arrayad"``.

Which of the backends runs is chosen with ``--peer-backend`` (``numpy``, ``array_api_strict`` or
``arrayad``): every other parametrization, and every test without a backend parameter, is
deselected. arrayad's own default backend comes from ``ARRAYAD_BACKEND``.
``--peer-report=FILE`` writes one ``outcome<TAB>test id`` line a test, the test id relative to
the installed package (``scipy/special/tests/test_x.py::test_y[arrayad]``).
"""
import functools
import os

import pytest

BACKENDS = ("numpy", "array_api_strict", "arrayad")


class ArrayadBackend:
    """Stands for arrayad among array-api-extra's ``Backend`` members (same attributes)."""
    name = "ARRAYAD"
    value = "arrayad"
    modname = "arrayad"

    def like(self, *others):
        return any(o is self for o in others)

    def pytest_param(self):
        return pytest.param(self, id="arrayad")

    def __repr__(self):
        return "<Backend.ARRAYAD: 'arrayad'>"

    __str__ = __repr__


ARRAYAD_BACKEND = ArrayadBackend()


def pytest_addoption(parser):
    group = parser.getgroup("peer suites (arrayad)")
    group.addoption("--peer-backend", default="arrayad", choices=BACKENDS,
                    help="the one backend whose parametrizations run")
    group.addoption("--peer-report", default=None, help="write outcome<TAB>test id lines here")


# -- scikit-learn: its generators of namespaces, read at import of its test modules -------------

def _patch_sklearn():
    try:
        from sklearn.utils import _array_api
    except ImportError:
        return
    if getattr(_array_api, "_arrayad_patched", False):
        return
    namespaces, combinations = (_array_api.yield_namespaces,
                                _array_api.yield_namespace_device_dtype_combinations)

    @functools.wraps(namespaces)
    def yield_namespaces(include_numpy_namespaces=True):
        yield from namespaces(include_numpy_namespaces)
        yield "arrayad"

    @functools.wraps(combinations)
    def yield_namespace_device_dtype_combinations(include_numpy_namespaces=True):
        yield from combinations(include_numpy_namespaces)
        yield "arrayad", None, None

    _array_api.yield_namespaces = yield_namespaces
    _array_api.yield_namespace_device_dtype_combinations = \
        yield_namespace_device_dtype_combinations
    # the modules that imported the names before this plugin ran (estimator_checks)
    import sys
    for mod in list(sys.modules.values()):
        if getattr(mod, "__name__", "").startswith("sklearn.") and mod is not _array_api:
            d = getattr(mod, "__dict__", {})
            if d.get("yield_namespaces") is namespaces:
                d["yield_namespaces"] = yield_namespaces
            if d.get("yield_namespace_device_dtype_combinations") is combinations:
                d["yield_namespace_device_dtype_combinations"] = \
                    yield_namespace_device_dtype_combinations
    _array_api._arrayad_patched = True


def pytest_configure(config):
    _patch_sklearn()
    config._peer_outcomes = []
    config._peer_paths = {}
    # the suites' own markers (registered in their configuration files, not shipped)
    for marker in ("skip_xp_backend", "xfail_xp_backend", "array_api_backends",
                   "thread_unsafe", "skip_xp_backends", "xfail_xp_backends"):
        config.addinivalue_line("markers", f"{marker}: a marker of the peer suite")


# -- SciPy and array-api-extra: their fixtures' parameter lists -------------------------------

def _scipy_skip_or_xfail(original):
    """SciPy's marker reader, arrayad treated as a non-NumPy, CPU, eager backend; with
    array-api-strict as arrayad's default backend, also as array-api-strict."""
    def skip_or_xfail_xp_backends(request, skip_or_xfail):
        if getattr(request.param, "__name__", None) != "arrayad":
            return original(request, skip_or_xfail)
        strict = os.environ.get("ARRAYAD_BACKEND") == "array_api_strict"
        as_strict = None
        for marker in request.node.iter_markers(f"{skip_or_xfail}_xp_backends"):
            if marker.kwargs.get("np_only", False):
                reason = marker.kwargs.get("reason") or "do not run with non-NumPy backends"
                getattr(pytest, skip_or_xfail)(reason=reason)
            if strict and marker.args[:1] == ("array_api_strict",) and as_strict is None:
                as_strict = marker.kwargs.get("reason") or "do not run with array_api_strict"
        # SciPy's markers for array-api-strict name what the standard leaves out and the library
        # refuses (integer-float promotion, special functions off its CPU device, fancy
        # indexing): arrayad on that backend refuses the first two as it should, and does the
        # last itself, so the test runs as a non-strict xfail (xpassed where it passes)
        if as_strict is not None:
            request.applymarker(pytest.mark.xfail(reason=f"array_api_strict: {as_strict}",
                                                  strict=False))
    return skip_or_xfail_xp_backends


def _extend(fixturedef, param):
    if getattr(fixturedef, "_arrayad_added", False):
        return
    fixturedef.params = list(fixturedef.params) + [param]
    if fixturedef.ids is not None and not callable(fixturedef.ids):
        fixturedef.ids = list(fixturedef.ids) + ["arrayad"]
    fixturedef._arrayad_added = True


@pytest.hookimpl(tryfirst=True)
def pytest_generate_tests(metafunc):
    import arrayad
    defs = getattr(metafunc, "_arg2fixturedefs", {})
    for fixturedef in defs.get("xp", ()):          # SciPy: modules
        if fixturedef.params and any(getattr(getattr(p, "values", [None])[0], "__name__", "")
                                     == "numpy" for p in fixturedef.params):
            g = fixturedef.func.__globals__
            if "skip_or_xfail_xp_backends" in g and not getattr(
                    g["skip_or_xfail_xp_backends"], "_arrayad", False):
                g["skip_or_xfail_xp_backends"] = _scipy_skip_or_xfail(
                    g["skip_or_xfail_xp_backends"])
                g["skip_or_xfail_xp_backends"]._arrayad = True
            _extend(fixturedef, pytest.param(arrayad, id="arrayad",
                                             marks=pytest.mark.array_api_backends))
    for fixturedef in defs.get("library", ()):     # array-api-extra: Backend members
        if fixturedef.params and type(fixturedef.params[0].values[0]).__name__ == "Backend":
            _extend(fixturedef, ARRAYAD_BACKEND.pytest_param())


# -- one backend's parametrizations only -------------------------------------------------------

def _backend_of(item):
    """The backend an item runs on: "numpy", "array_api_strict", "arrayad", another, or None."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    if "xp" in params and hasattr(params["xp"], "__name__"):         # SciPy
        return params["xp"].__name__
    if "library" in params:                                          # array-api-extra
        b = params["library"]
        return "numpy" if getattr(b, "value", None) == "numpy" else getattr(b, "value", None)
    if "array_namespace" in params:                                  # scikit-learn
        return params["array_namespace"]
    check = params.get("check")                                      # scikit-learn estimators
    kw = getattr(check, "keywords", None) or {}
    if "array_namespace" in kw and "other_ns_and_device" not in kw:
        return kw["array_namespace"]
    return None


def pytest_collection_modifyitems(config, items):
    want = config.getoption("--peer-backend")
    keep, drop = [], []
    for item in items:
        (keep if _backend_of(item) == want else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
    config._peer_paths = {item.nodeid: str(item.path) for item in keep}


def _test_id(report, paths):
    """The test id relative to the installed package (independent of the rootdir)."""
    path, _, rest = report.nodeid.partition("::")
    path = paths.get(report.nodeid, path).replace(os.sep, "/")
    if "site-packages/" in path:
        path = path.rsplit("site-packages/", 1)[1]
    return f"{path}::{rest}"


def pytest_runtest_logreport(report):
    config = pytest_runtest_logreport.config
    if config is None:
        return
    if report.when == "call" or report.outcome != "passed":
        if report.when != "call" and report.outcome == "skipped":
            outcome = "skipped"
        elif report.when != "call" and report.outcome == "failed":
            outcome = "error"
        elif hasattr(report, "wasxfail"):
            outcome = "xfailed" if report.outcome == "skipped" else "xpassed"
        else:
            outcome = report.outcome
        config._peer_outcomes.append((outcome, _test_id(report, config._peer_paths)))


pytest_runtest_logreport.config = None


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session):
    pytest_runtest_logreport.config = session.config


def pytest_sessionfinish(session):
    path = session.config.getoption("--peer-report")
    if path:
        with open(path, "w") as f:
            for outcome, tid in session.config._peer_outcomes:
                f.write(f"{outcome}\t{tid}\n")
