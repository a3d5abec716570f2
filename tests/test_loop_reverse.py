"""Reverse mode through loops run from snapshots (NOTE [loop reverse]): ``while_loop`` and
``fori_loop`` with array bounds, whose trip count depends on the values, and ``scan``/``fori_loop``
with a snapshot budget (``checkpoint=k``).

The reference for a while loop is the same loop written in Python and differentiated eagerly
(the tape sees the operations each step runs); for a scan with a budget, the scan that keeps
every carry (checked against JAX in test_control_flow.py) and central differences.
"""
import tracemalloc
import weakref

import numpy as np
import pytest

import arrayad as ad
from arrayad import func as F
from arrayad._core import _core
from arrayad._loop_reverse import reverse_sweep, sweeps

from conftest import to_numpy
from reference import fd_grad


def _close(a, b, tol=1e-10):
    np.testing.assert_allclose(to_numpy(a), to_numpy(b), rtol=tol, atol=tol)


def _python_while(cond, body, v):
    """while_loop as the plain Python loop (the reference, differentiated step by step)."""
    while cond(v):
        v = body(v)
    return v


# -- the schedule ------------------------------------------------------------------------------

class _State:
    live = 0

    def __init__(self, p):
        self.p = p
        _State.live += 1
        weakref.finalize(self, _State._gone)

    @staticmethod
    def _gone():
        _State.live -= 1


@pytest.mark.parametrize("n, held", [(1, 1), (9, 1), (10, 2), (10, 3), (100, 5), (1000, 10),
                                     (4000, 32), (7, 7), (8, 7), (300, 300)])
def test_reverse_sweep_visits_each_step_once_in_reverse_within_the_budget(n, held):
    visited, advanced, peak = [], [0], [0]

    def advance(c, p, k):
        assert c.p == p
        advanced[0] += k
        out = _State(p + k)
        peak[0] = max(peak[0], _State.live)
        return out

    def visit(p, c):
        assert c.p == p
        visited.append(p)
    start = _State.live
    c0 = _State(0)
    reverse_sweep(advance, visit, 0, c0, n, held)
    assert visited == list(range(n - 1, -1, -1))
    assert peak[0] - start <= held + 1                 # (c0 counted, and the one visited)
    t = sweeps(n, held)
    assert advanced[0] <= max(t, 1) * n                # (Griewank's binomial bound)


def test_sweeps_is_the_binomial_repetition_number():
    # C(32 + 6, 6) = 2,760,681 >= 10**6 > C(32 + 5, 5) = 435,897
    assert sweeps(10 ** 6, 32) == 6
    assert sweeps(1025, 1024) == 1 and sweeps(1026, 1024) == 2   # (C(1024 + 1, 1) = 1025)


# -- while_loop: a data-dependent trip count --------------------------------------------------

def _grow(xp_sin):
    def cond(v):
        return ad.sum(v[0]) < 10.0

    def body(v):
        a, b = v
        return a * 1.5 + xp_sin(b), b * 1.1
    return cond, body


def loop_while(x, checkpoint=None):
    cond, body = _grow(ad.sin)
    a, b = F.while_loop(cond, body, (x[:2], x[2:]), checkpoint=checkpoint)
    return ad.sum(a * b) + ad.sum(a ** 2)


def loop_python(x):
    cond, body = _grow(ad.sin)
    v = (x[:2], x[2:])
    while cond(v):
        v = body(v)
    a, b = v
    return ad.sum(a * b) + ad.sum(a ** 2)


X = np.array([0.3, 0.2, 0.7, -0.4])


def _trips(x):
    cond, body = _grow(np.sin)
    v, n = (x[:2], x[2:]), 0
    while cond(v):
        v, n = body(v), n + 1
    return n


def test_while_loop_gradient_equals_the_python_loop(backend):
    x = backend(X)
    want = F.grad(loop_python)(x)
    _close(F.grad(loop_while)(x), want, 1e-12)
    _close(F.grad(loop_while)(x), fd_grad(loop_python, X), 1e-6)
    _close(ad.jit(F.grad(loop_while))(x), want, 1e-12)
    _close(F.jacrev(loop_while)(x), want, 1e-12)
    out, pull = F.vjp(loop_while, x)
    _close(pull(ad.asarray(2.0) if backend.name == "numpy" else out * 0 + 2.0)[0],
           2 * to_numpy(want), 1e-12)


def test_jit_grad_follows_the_trip_count_of_each_call():
    g = ad.jit(F.grad(loop_while))
    points = [X, X * 3.0, X * 0.05, np.array([2.0, 1.0, 0.1, 0.2])]
    assert len({_trips(p) for p in points}) == len(points)   # (every call its own count)
    for p in points:
        _close(g(p), F.grad(loop_python)(p), 1e-12)


def test_vmap_of_grad_per_lane_trip_counts():
    xs = np.stack([X, X * 3.0, X * 0.05, np.array([2.0, 1.0, 0.1, 0.2])])
    want = np.stack([to_numpy(F.grad(loop_python)(p)) for p in xs])
    _close(F.vmap(F.grad(loop_while))(xs), want, 1e-12)
    _close(ad.jit(F.vmap(F.grad(loop_while)))(xs), want, 1e-12)
    _close(F.vmap(F.grad(lambda x: loop_while(x, checkpoint=2)))(xs), want, 1e-12)


def test_second_order_through_a_while_loop():
    h = F.hessian(loop_python)(X)
    _close(F.hessian(loop_while)(X), h, 1e-10)                      # forward over reverse
    _close(F.jacrev(F.jacrev(loop_while))(X), h, 1e-10)            # reverse over reverse
    _close(F.jacrev(F.jacrev(lambda x: loop_while(x, 2)))(X), h, 1e-10)
    _close(ad.jit(F.hessian(loop_while))(X), h, 1e-10)
    _close(F.jacfwd(F.jacfwd(loop_while))(X), h, 1e-10)


@pytest.mark.parametrize("checkpoint", ["all", 1, 2, 3, 1024])
def test_snapshot_budgets_give_the_same_gradient(checkpoint):
    x = X * 0.01      # (a longer loop: 17 steps, more than the small budgets)
    assert _trips(x) > 10
    _close(F.grad(lambda x: loop_while(x, checkpoint))(x), F.grad(loop_python)(x), 1e-11)


def test_nested_while_loops_and_a_cond_in_the_body():
    def inner(a):
        return F.while_loop(lambda v: ad.sum(v) < 2.0, lambda v: v * 1.3 + 0.01, a)

    def body(v):
        a, k = v
        a = F.cond(ad.sum(a) > 5.0, lambda a: ad.cos(a) + a, lambda a: inner(a) * 1.1, a)
        return a, k + 1

    def f(x, loop):
        a, _ = loop(lambda v: v[1] < 6, body, (x, ad.asarray(0)))
        return ad.sum(a ** 2)

    x = np.array([0.2, 0.4])
    want = F.grad(lambda x: f(x, _python_while))(x)
    _close(F.grad(lambda x: f(x, F.while_loop))(x), want, 1e-11)
    _close(ad.jit(F.grad(lambda x: f(x, F.while_loop)))(x), want, 1e-11)
    _close(want, fd_grad(lambda x: f(x, _python_while), x), 1e-6)


def test_a_custom_vjp_body_keeps_its_rule():
    # a straight-through rounding: the rule, not the derivative of floor, must reach x
    @F.custom_vjp
    def st_round(x):
        return ad.floor(x * 4.0) / 4.0

    def fwd(x):
        return st_round(x), None

    def bwd(_, g):
        return (g * 0.5,)
    st_round.defvjp(fwd, bwd)

    def step(v):
        return st_round(v * 1.7) + 0.3

    def f(x, loop):
        return ad.sum(loop(lambda v: ad.sum(v) < 20.0, step, x))

    x = np.array([0.4, 0.9])
    want = F.grad(lambda x: f(x, _python_while))(x)
    assert np.all(to_numpy(want) != 0.0)
    _close(F.grad(lambda x: f(x, F.while_loop))(x), want, 1e-12)
    _close(ad.jit(F.grad(lambda x: f(x, F.while_loop)))(x), want, 1e-12)


def test_fori_loop_with_array_bounds_under_every_reverse_transform():
    def f(x, n, checkpoint=None):
        return ad.sum(F.fori_loop(ad.asarray(0), n, lambda i, c: ad.sin(c) * x + c * 0.9, x,
                                  checkpoint=checkpoint))
    x = np.array([0.3, -0.2, 0.5])
    for n in (0, 1, 7):
        want = F.grad(lambda x: f(x, n))(x)              # (a scan: int bounds)
        _close(F.grad(lambda x: f(x, ad.asarray(n)))(x), want, 1e-12)
        _close(F.grad(lambda x: f(x, ad.asarray(n), 2))(x), want, 1e-12)
    jg = ad.jit(F.grad(f))
    for n in (3, 11):
        _close(jg(x, ad.asarray(n)), F.grad(lambda x: f(x, n))(x), 1e-12)


def test_eager_tape_backward_through_a_while_loop():
    x = ad.Tensor(X.copy()).requires_grad_()
    loop_while(x).backward()
    _close(x.grad, F.grad(loop_python)(X), 1e-12)


# -- scan and fori_loop with a snapshot budget --------------------------------------------------

XS = np.linspace(-1.0, 1.0, 40).reshape(20, 2)


def scan_case(p, checkpoint="all", reverse=False):
    def step(c, x):
        c = ad.sin(c) * p[:2] + x * c * p[2]
        return c, ad.sum(c * x)
    c, ys = F.scan(step, p[:2], XS, reverse=reverse, checkpoint=checkpoint)
    return ad.sum(c ** 2) + ad.sum(ys * ad.cos(ys))


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("checkpoint", [1, 3, 7])
def test_scan_budget_equals_keeping_every_carry(checkpoint, reverse):
    p = np.array([0.9, -0.6, 0.4])
    f = lambda p: scan_case(p, checkpoint, reverse)         # noqa: E731
    ref = lambda p: scan_case(p, "all", reverse)            # noqa: E731
    _close(F.grad(f)(p), F.grad(ref)(p), 1e-12)
    _close(F.grad(f)(p), fd_grad(ref, p), 1e-6)
    _close(ad.jit(F.grad(f))(p), F.grad(ref)(p), 1e-12)
    _close(F.hessian(f)(p), F.hessian(ref)(p), 1e-10)
    _close(F.jacrev(F.jacrev(f))(p), F.hessian(ref)(p), 1e-10)
    ps = np.stack([p, -p, 2 * p])
    _close(F.vmap(F.grad(f))(ps), F.vmap(F.grad(ref))(ps), 1e-12)


def test_scan_budget_with_gradients_to_xs(backend):
    if backend.name == "dask":
        pytest.skip("Dask: scans are covered in test_dask")
    xs = backend(XS)

    def f(xs, checkpoint):
        c, ys = F.scan(lambda c, x: (ad.tanh(c + x), c * x), backend(np.array([0.1, 0.2])), xs,
                       checkpoint=checkpoint)
        return ad.sum(c) + ad.sum(ys ** 2)
    _close(F.grad(lambda xs: f(xs, 4))(xs), F.grad(lambda xs: f(xs, "all"))(xs), 1e-12)


@pytest.mark.parametrize("bad", [0, -3, "some", True, 2.5])
def test_a_budget_that_cannot_hold_says_which_parameter(bad):
    with pytest.raises(ValueError, match="checkpoint must be 'all'.*positive int"):
        F.scan(lambda c, x: (c + x, c), np.array(0.0), XS[:, 0], checkpoint=bad)
    with pytest.raises(ValueError, match="while_loop.*checkpoint must be"):
        F.while_loop(lambda v: v < 3.0, lambda v: v + 1.0, np.array(0.0), checkpoint=bad)
    with pytest.raises(ValueError, match="fori_loop.*checkpoint must be"):
        F.fori_loop(ad.asarray(0), ad.asarray(3), lambda i, v: v + 1.0, np.array(0.0),
                    checkpoint=bad)
    assert not _core.interpreters()                  # (nothing left behind)


def test_a_budget_bounds_the_reverse_pass_memory():
    # 400 steps over 2,000 float64 values: every carry is 6.4 MB; 8 snapshots are 128 kB
    x = np.linspace(0.1, 1.0, 2000)

    def f(x, checkpoint):
        c = F.fori_loop(0, 400, lambda i, c: c * 0.999 + 0.001 * ad.sin(c), x,
                        checkpoint=checkpoint)
        return ad.sum(c)

    def peak(checkpoint):
        F.grad(lambda x: f(x, checkpoint))(x)      # (warm: traces, caches)
        tracemalloc.start()
        try:
            g = F.grad(lambda x: f(x, checkpoint))(x)
            return tracemalloc.get_traced_memory()[1], g
        finally:
            tracemalloc.stop()
    every, g_all = peak("all")
    budget, g_8 = peak(8)
    _close(g_8, g_all, 1e-12)
    assert every > 400 * x.nbytes * 0.9            # (every carry kept)
    assert budget < 0.1 * every


def test_float32_carries_keep_their_dtype_in_the_gradient():
    def f(x, loop):
        c = loop(lambda v: ad.sum(v) < 20.0, lambda v: v * 1.3 + ad.sin(v), x)
        return ad.sum(c * c)
    x = np.array([0.5, 0.25], np.float32)
    got = F.grad(lambda x: f(x, F.while_loop))(x)
    want = F.grad(lambda x: f(x, _python_while))(x)
    assert to_numpy(got).dtype == np.float32
    _close(got, want, 1e-5)


def test_complex_carries_against_the_python_loop():
    def f(x, loop):
        z = ad.astype(x, ad.complex128)
        c, _ = loop(lambda v: v[1] < 4, lambda v: (v[0] * (0.9 + 0.2j) + ad.sin(v[0]), v[1] + 1),
                    (z, ad.asarray(0)))
        return c
    x = np.array([0.3, -0.7], complex)
    ct = np.array([1 + 2j, -0.5j])
    got = F.vjp(lambda x: f(x, F.while_loop), x)[1](ct)[0]
    _close(got, F.vjp(lambda x: f(x, _python_while), x)[1](ct)[0], 1e-12)
    real = F.grad(lambda x: ad.sum(ad.abs(f(x, F.while_loop)) ** 2))(x.real)
    _close(real, F.grad(lambda x: ad.sum(ad.abs(f(x, _python_while)) ** 2))(x.real), 1e-12)


# -- the compiled sweep (NOTE [compiled sweep]) ------------------------------------------------

def _driven(monkeypatch, compiled, fn, *args):
    """``fn(*args)`` with the schedule run as one numba function (``compiled``) or from Python,
    and how many compiled sweeps it ran."""
    from arrayad._jit import scan as tiers
    monkeypatch.setattr(tiers, "SWEEP_MIN_CALLS", 0 if compiled else float("inf"))
    start = tiers.runs["sweep"]
    out = fn(*args)
    return out, tiers.runs["sweep"] - start


def _against_the_python_driver(monkeypatch, fn, *args, tol=1e-12):
    """The compiled sweep runs ``fn`` (at least once) and gives the Python driver's values."""
    pytest.importorskip("numba")
    before = [np.array(to_numpy(a), copy=True) for a in args]
    got, runs = _driven(monkeypatch, True, fn, *args)
    for a, b in zip(args, before):   # (the inputs are left as they were)
        np.testing.assert_array_equal(to_numpy(a), b)
    want, none = _driven(monkeypatch, False, fn, *args)
    assert runs >= 1 and none == 0
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,)):
        assert to_numpy(g).dtype == to_numpy(w).dtype
        _close(g, w, tol)
    return got


def rk4_case(th, checkpoint, steps=40):
    """A few RK4 steps of a linear 4-state ODE, with a second carry (a scalar of the path)."""
    def rhs(y):
        return ad.stack([y[1], -th[0] * y[0] - th[1] * y[1], y[3], -th[2] * y[2] + 0.1 * y[0]])

    def step(i, c):
        y, s = c
        dt = 0.01
        k1 = rhs(y)
        k2 = rhs(y + dt / 2 * k1)
        k3 = rhs(y + dt / 2 * k2)
        k4 = rhs(y + dt * k3)
        return y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4), s + ad.sum(y * y) * dt
    y, s = F.fori_loop(0, steps, step, (np.array([1.0, 0.0, 0.5, 0.1]), np.asarray(0.0)),
                       checkpoint=checkpoint)
    return ad.sum(y * y) + s


# (budgets under 8 reverse single steps; 8, 12 and 32 units of 2, 3 and 8 steps, a part of
# units and the last unit shorter; 64 every unit at once)
@pytest.mark.parametrize("checkpoint, steps", [(1, 40), (2, 40), (3, 40), (5, 40), (8, 40),
                                               (12, 40), (32, 301), (64, 40)])
def test_compiled_sweep_equals_the_python_driver_and_every_carry(monkeypatch, checkpoint, steps):
    th = np.array([1.0, 0.1, 2.0])
    f = lambda th: rk4_case(th, checkpoint, steps)           # noqa: E731
    got = _against_the_python_driver(monkeypatch, F.grad(f), th)
    _close(got, F.grad(lambda th: rk4_case(th, "all", steps))(th), 1e-12)
    _close(got, fd_grad(lambda th: rk4_case(th, "all", steps), th), 1e-6)
    _against_the_python_driver(monkeypatch, ad.jit(F.grad(f)), th)   # (cached on the trace)


@pytest.mark.parametrize("reverse", [False, True])
def test_compiled_sweep_of_a_scan_with_xs_and_ys(monkeypatch, reverse):
    xs = (np.linspace(-1.0, 1.0, 46).reshape(23, 2), np.linspace(0.5, 2.0, 23))

    def f(p, a, b, c0, checkpoint):
        def step(c, x):
            a, b = x
            c = ad.tanh(c * p[:2] + a) + p[2] * b
            return c, (ad.sum(c * a), c * b)
        c, (y1, y2) = F.scan(step, c0, (a, b), reverse=reverse, checkpoint=checkpoint)
        return c, y1, y2
    p, c0 = np.array([0.9, -0.6, 0.4]), np.array([0.1, 0.2])
    cts = (np.array([1.0, -2.0]), np.linspace(0.0, 1.0, 23), np.ones((23, 2)))

    def pull(checkpoint):
        return lambda *args: F.vjp(lambda *a: f(*a, checkpoint), *args)[1](cts)
    got = _against_the_python_driver(monkeypatch, pull(4), p, *xs, c0)
    for g, w in zip(got, pull("all")(p, *xs, c0)):
        _close(g, w, 1e-12)


def test_compiled_sweep_of_a_while_loop(monkeypatch):
    # (the count is known once the loop has run; an int carry counts the steps)
    def f(x, checkpoint):
        c, k = F.while_loop(lambda v: ad.sum(v[0]) < 30.0,
                            lambda v: (v[0] * 1.05 + 0.1 * ad.sin(v[0] * x), v[1] + 1),
                            (x, ad.asarray(0)), checkpoint=checkpoint)
        return ad.sum(c) + ad.sum(c * c) * 0.01

    def g(x, checkpoint=3):
        return F.grad(lambda x: f(x, checkpoint))(x)
    x = np.array([0.3, 0.7, 1.1])
    got = _against_the_python_driver(monkeypatch, g, x)
    _close(got, F.grad(lambda x: f(x, "all"))(x), 1e-12)
    _close(got, fd_grad(lambda x: f(x, "all"), x), 1e-6)
    _against_the_python_driver(monkeypatch, g, x, 1)
    _against_the_python_driver(monkeypatch, g, x, 9)


def test_compiled_sweep_keeps_float32():
    pytest.importorskip("numba")

    def f(x, checkpoint):
        return ad.sum(F.fori_loop(0, 30, lambda i, c: c * 0.97 + 0.05 * ad.sin(c), x,
                                  checkpoint=checkpoint) ** 2)
    x = np.array([0.5, 0.25, -1.0], np.float32)
    with pytest.MonkeyPatch.context() as mp:
        got = _against_the_python_driver(mp, F.grad(lambda x: f(x, 4)), x, tol=1e-6)
    assert to_numpy(got).dtype == np.float32
    _close(got, F.grad(lambda x: f(x, "all"))(x), 1e-5)


def test_a_body_numba_cannot_take_runs_the_schedule_from_python(monkeypatch):
    from arrayad._jit import scan as tiers

    def f(x, checkpoint):   # (a sort: no rule in the lowerer)
        return ad.sum(F.fori_loop(0, 12, lambda i, c: ad.sort(c) * 0.9 + 0.1 * ad.sin(c), x,
                                  checkpoint=checkpoint))
    x = np.array([0.3, -0.2, 0.8])
    got, runs = _driven(monkeypatch, True, F.grad(lambda x: f(x, 3)), x)
    assert runs == 0 and "sort" in tiers.refused
    _close(got, F.grad(lambda x: f(x, "all"))(x), 1e-12)


# -- online snapshots of a while loop (NOTE [online snapshots]) ---------------------------------

def _grow_until(limit):
    def f(x, checkpoint):
        c = F.while_loop(lambda v: ad.sum(v) < limit, lambda v: v * 1.02 + 0.05 * ad.sin(v), x,
                         checkpoint=checkpoint)
        return ad.sum(c * c)
    return f


@pytest.mark.parametrize("checkpoint", [2, 3, 4, 8, 16, 64])
def test_online_snapshots_give_the_python_loop_gradient(checkpoint):
    # (39 steps: from 2 to 16 states the spacing of the parts doubles, once or more)
    f = _grow_until(6.0)
    x = np.array([0.3, 0.7])
    want = F.grad(lambda x: ad.sum(_python_while(lambda v: ad.sum(v) < 6.0,
                                                 lambda v: v * 1.02 + 0.05 * ad.sin(v), x) ** 2))(x)
    _close(F.grad(lambda x: f(x, checkpoint))(x), want, 1e-12)
    _close(ad.jit(F.grad(lambda x: f(x, checkpoint)))(x), want, 1e-12)


def test_online_snapshots_run_no_counting_pass(monkeypatch):
    """The reverse pass of a while loop runs each step forward twice (its parts' first carries
    with the count, then each part keeping its carries), where counting first, then the blocks'
    starts, then the blocks ran it three times."""
    import arrayad._control as ctl
    from arrayad._jit import scan as tiers
    monkeypatch.setattr(tiers, "SWEEP_MIN_CALLS", float("inf"))   # (the Python driver's steps)
    steps = {"while": 0, "scan": 0}
    run_while, scan_impl = ctl._run_while, ctl._scan_impl

    def counted_while(*a, **k):
        c, n = run_while(*a, **k)
        steps["while"] += n
        return c, n

    def counted_scan(xp, *a, **k):
        if not k["reverse"]:   # (the loop's steps; its pullback runs the other way)
            steps["scan"] += k["length"]
        return scan_impl(xp, *a, **k)
    x = np.array([0.3, 0.7])
    # (39 steps from 32 states: parts of 8 steps from 16 first carries, each reversed as one
    # block of the other 16)
    out, pull = F.vjp(lambda x: _grow_until(6.0)(x, 32), x)
    monkeypatch.setattr(ctl, "_run_while", counted_while)
    monkeypatch.setattr(ctl, "_scan_impl", counted_scan)
    pull(ad.asarray(1.0))
    n = _trips_of(lambda v: v.sum() < 6.0, lambda v: v * 1.02 + 0.05 * np.sin(v), x)
    assert n == 39 and steps == {"while": n, "scan": n}


def _trips_of(cond, body, v):
    n = 0
    while cond(v):
        v, n = body(v), n + 1
    return n
