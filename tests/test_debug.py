"""arrayad.debug: print and callback run with each call's values eagerly, under every transform
and at every call of a jitted function, in order (NOTE [debug callback]); detect_nans names the
operation that made the first NaN or infinity, in the forward pass, in a derivative rule and in
a jitted program, and leaves no state behind (NOTE [nan detection])."""

import importlib.util
import sys

import numpy as np
import pytest

import arrayad as ad
from arrayad._core import _core
from arrayad._jit import replay
from arrayad.func import grad, jacfwd, jvp, vmap

from conftest import to_numpy

BACKENDS = ["numpy", "array_api_strict"] + (
    ["torch"] if importlib.util.find_spec("torch") is not None else [])


def _xp(name):
    return pytest.importorskip(name)


def _seen_under(transform, backend):
    """The values a callback saw, one list per call, with ``transform`` applied to a function
    that reports ``x * 2`` and returns ``sum(sin(x))``."""
    xp = _xp(backend)
    seen = []

    def f(x):
        ad.debug.callback(lambda v: seen.append((type(v), to_numpy(v))), x * 2)
        return ad.sum(ad.sin(x))

    fn = transform(f)
    for k in range(2):
        fn(xp.asarray(np.array([1.0, 2.0]) + k))
    return seen, xp


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name, transform", [
    ("eager", lambda f: f),
    ("grad", grad),
    ("jacfwd", jacfwd),
    ("jvp", lambda f: lambda x: jvp(f, (x,), (x,))),
    ("jit", ad.jit),
    ("jit(grad)", lambda f: ad.jit(grad(f))),
], ids=lambda v: v if isinstance(v, str) else "")
def test_callback_sees_each_calls_primal_values_as_backend_arrays(backend, name, transform):
    seen, xp = _seen_under(transform, backend)
    raw = type(xp.asarray([1.0]))
    assert [s[0] for s in seen] == [raw, raw], name   # (once per call, backend arrays)
    np.testing.assert_array_equal(seen[0][1], [2.0, 4.0])
    np.testing.assert_array_equal(seen[1][1], [4.0, 6.0])   # (the second call's, under jit too)


@pytest.mark.parametrize("backend", BACKENDS)
def test_callback_under_vmap_runs_per_lane_in_order_also_under_jit(backend):
    xp = _xp(backend)
    seen = []

    def f(x):
        ad.debug.callback(lambda v, tag: seen.append((tag, float(to_numpy(v)))), x, tag="x")
        return x * 2

    vmap(f)(xp.asarray([0.0, 1.0, 2.0]))
    jf = ad.jit(vmap(f))
    jf(xp.asarray([3.0, 4.0]))
    jf(xp.asarray([5.0, 6.0]))
    assert seen == [("x", float(v)) for v in range(7)]


def test_print_under_vmap_prints_each_lane(capsys):
    vmap(lambda x: (ad.debug.print("lane {} of {n}", x, n=2), x)[1])(np.array([0.5, 1.5]))
    assert capsys.readouterr().out == "lane 0.5 of 2\nlane 1.5 of 2\n"


def test_print_in_a_jitted_function_runs_at_every_call_and_is_never_dropped(capsys):
    f = ad.jit(lambda x: (ad.debug.print("{:.1f}", ad.sum(x)), x * 1.0)[1])
    for v in (1.0, 2.0, 3.0):
        f(np.full(4, v))
    assert capsys.readouterr().out.split() == ["4.0", "8.0", "12.0"]
    assert "debug_callback" in f.lower(np.ones(4)).primitive_names()


def test_print_of_python_values_only_prints_now(capsys):
    ad.debug.print("plain {}", 3)
    assert capsys.readouterr().out == "plain 3\n"


# -- detect_nans ---------------------------------------------------------------------------------

def _clean_state():
    assert _core.thread_state().staging is None
    assert replay.EVALUATING[0] == 0
    assert not _core.interpreters()


def _raises_naming(prim, fn, *args, rule=False, at_call=False):
    """``fn(*args)`` raises naming ``prim`` and the line of the user's code: the caller's (where
    ``fn``, a lambda, was written) or, ``at_call``, the line below calling ``fn`` (a derivative
    rule's or a jitted program's operation: the call that ran them)."""
    line = sys._getframe(1).f_lineno
    with pytest.raises(FloatingPointError) as e:
        with ad.debug.detect_nans():
            call_line = sys._getframe().f_lineno + 1
            fn(*args)
    if at_call:
        line = call_line
    msg = str(e.value)
    assert f"detect_nans: {prim} made a NaN or an infinity" in msg, msg
    assert f"test_debug.py:{line}" in msg, msg
    assert ("derivative rule" in msg) == rule, msg
    _clean_state()


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("backend", BACKENDS)
def test_detect_nans_names_the_operation_and_the_line(backend):
    xp = _xp(backend)
    x = xp.asarray([1.0, -1.0])
    _raises_naming("log", lambda v: ad.log(v), x)
    _raises_naming("log", lambda v: ad.sum(ad.log(v) * 2), x)
    _raises_naming("divide", grad(lambda v: ad.sum(ad.sqrt(v))), xp.asarray([1.0, 0.0]),
                   rule=True, at_call=True)   # (sqrt's derivative 0.5 / sqrt(0): backward)
    jitted = ad.jit(lambda v: ad.log(v) + 1.0)
    jitted(xp.asarray([1.0, 2.0]))   # (traced and cached outside the block)
    _raises_naming("log", jitted, x, at_call=True)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_detect_nans_lets_carried_nans_pass_and_costs_nothing_after():
    from arrayad._core import _small_arith
    with ad.debug.detect_nans():
        out = ad.log(np.array([np.nan, 1.0])) * 2   # (the NaN came in: not reported)
        g = grad(lambda v: ad.sum(ad.sin(v)))(np.array([0.5]))
    assert np.isnan(out[0]) and out[1] == 0.0
    np.testing.assert_allclose(g, np.cos([0.5]))
    _clean_state()
    assert _small_arith.multiply(np.ones(2), np.ones(2)).tolist() == [1.0, 1.0]
    with ad.debug.detect_nans(False):   # (a no-op block)
        assert _core.thread_state().staging is None
    f = ad.jit(lambda v: ad.log(v))
    f(np.ones(3))
    with ad.debug.detect_nans():
        pass
    assert np.isnan(f(np.array([-1.0, 1.0, 1.0]))[0])   # (replayed again, unchecked)
