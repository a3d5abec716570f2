"""``scan`` on NumPy with its whole loop run by the register machine or compiled by numba (NOTE
[compiled scan]): each tier against the replay, a plain Python loop and JAX's ``lax.scan`` (values
and gradients), every transform of a compiled scan, the tiering, the fallbacks to the replay, and
the other backends (replayed)."""
import sys
from pathlib import Path

import numpy as np
import pytest

import arrayad as ad
from arrayad import func as F
from arrayad import _control
from arrayad._pytree import tree_flatten, tree_unflatten

from conftest import to_numpy

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks" / "gradbench"))
from arrayad_tool import ode as gradbench_ode

try:   # (the control-flow suite's table of cases, run below with every scan compiled)
    import test_control_flow as control_cases
except pytest.skip.Exception:   # (it needs JAX)
    control_cases = None

from arrayad._jit import lower_numba, scan as tiers, scan_lower, scan_numba

try:
    import jax
    jax.config.update("jax_enable_x64", True)
    jnp, lax = jax.numpy, jax.lax
except ImportError:   # pragma: no cover
    jax = None

needs_jax = pytest.mark.skipif(jax is None, reason="JAX is the reference")


@pytest.fixture(params=["machine", "numba", "array"])
def compiled(request, monkeypatch):
    """Every scan on NumPy compiled, whatever its length (and traced: no plain Python loop): by
    the machine (numba only for the bodies the machine does not take), by numba at once, or by
    numba's loop of array statements (NOTE [array scan]) at once; counts the compiled runs."""
    monkeypatch.setattr(tiers, "MIN_STEPS", 0)
    monkeypatch.setattr(tiers, "REPLAY_US", float("inf"))   # (the machine always pays)
    monkeypatch.setattr(_control, "_PLAIN_STEPS", 0)
    monkeypatch.setattr(tiers, "NUMBA_MIN_WORK", 0)
    if request.param == "array":
        if not lower_numba.available():
            pytest.skip("numba is not installed")
        # (no body is worth the scalar tiers; the array tier compiles at its first call)
        monkeypatch.setattr(tiers, "REPLAY_US", 0.0)
        monkeypatch.setattr(tiers, "NUMBA_MIN_WORK", float("inf"))
        monkeypatch.setattr(tiers, "ARRAY_AFTER", 0.0)
    if request.param == "numba":
        if not lower_numba.available():
            pytest.skip("numba is not installed")
        monkeypatch.setattr(tiers, "NUMBA_AFTER", 0.0)
    else:
        monkeypatch.setattr(tiers, "NUMBA_AFTER", float("inf"))

    class Count:
        tier = request.param
        start = dict(tiers.runs)

        @property
        def runs(self):
            """Compiled runs of either tier."""
            return sum(tiers.runs.values()) - sum(self.start.values())

        @property
        def tier_runs(self):
            """Compiled runs of this fixture's tier."""
            return tiers.runs[self.tier] - self.start[self.tier]
    with ad.config.scan_compiled(True), ad.config.scan_numba(True):
        yield Count()


def replayed(fn, *args):
    """``fn(*args)`` with the compiled loop switched off (the replay)."""
    with ad.config.scan_compiled(False):
        return fn(*args)


def python_scan(f, init, xs, length=None, reverse=False):
    """The reference: a plain Python loop on NumPy with lax.scan's signature."""
    n = length if xs is None else len(xs)
    idx = range(n - 1, -1, -1) if reverse else range(n)
    c, ys = init, []
    for i in idx:
        c, y = f(c, None if xs is None else xs[i])
        ys.append(y)
    if reverse:
        ys.reverse()
    spec = tree_flatten(ys[0])[1]
    cols = zip(*[tree_flatten(y)[0] for y in ys])
    return c, tree_unflatten([np.stack(col) for col in cols], spec)


# A body with elementwise arithmetic and math functions, indexing, stack and concat, reshape,
# broadcast_to, sum, where, a comparison, a cast, written once for arrayad (ad), NumPy and jnp.
def make_step(xp):
    def step(c, x):
        u, v = c["u"], c["v"]
        a = xp.sin(u) * x[0] - 0.1 * xp.exp(-v[1] ** 2) + xp.sqrt(1.5 + xp.cos(v[0]))
        b = xp.where(u > 0, xp.tanh(u), -0.5 * u) + xp.log1p(xp.abs(x[1]))
        w = xp.stack([a, b, a * b])
        m = xp.reshape(xp.concat([w, xp.broadcast_to(xp.sum(v) / 3.0, (1,))]), (2, 2))
        v_new = v + 0.1 * xp.sum(m, axis=0) - 0.05 * v[::-1]
        u_new = 0.9 * u + 0.1 * xp.astype(a, u.dtype) / (1.0 + b ** 2)
        return {"u": u_new, "v": v_new}, (w, u_new * v_new)
    return step


def test_values_forward_and_reverse_against_the_replay_python_and_jax(compiled):
    rng = np.random.default_rng(0)
    init = {"u": np.array(0.3), "v": np.array([0.2, -0.4])}
    xs = rng.normal(size=(7, 2))
    for reverse in (False, True):
        got = F.scan(make_step(ad), init, xs, reverse=reverse)
        assert compiled.tier_runs == compiled.runs == 1 + reverse
        rep = replayed(F.scan, make_step(ad), init, xs, None, reverse)
        ref = python_scan(make_step(np), init, xs, reverse=reverse)
        got_l, rep_l = leaves(got), leaves(rep)
        for g, r, p in zip(got_l, rep_l, leaves(ref)):
            np.testing.assert_allclose(to_numpy(g), to_numpy(r), rtol=1e-14, atol=1e-15)
            np.testing.assert_allclose(to_numpy(g), p, rtol=1e-13, atol=1e-14)
        if jax is not None:
            jr = lax.scan(make_step(jnp), init, xs, reverse=reverse)
            for g, j in zip(got_l, leaves(jr)):
                np.testing.assert_allclose(to_numpy(g), np.asarray(j), rtol=1e-13, atol=1e-14)


def leaves(tree):
    return tree_flatten(tree)[0]


def loss(xp, scan, reverse=False):
    step = make_step(xp)

    def f(p, xs):
        init = {"u": p[0], "v": p[1:3]}
        c, (w, y) = scan(step, init, xs, reverse=reverse)
        return xp.sum(c["v"] ** 2) + c["u"] + xp.sum(w * y[:, None, :1])
    return f


@needs_jax
@pytest.mark.parametrize("reverse", [False, True])
def test_grad_against_jax(compiled, reverse):
    rng = np.random.default_rng(1)
    p, xs = np.array([0.3, 0.2, -0.4]), rng.normal(size=(9, 2))
    g = F.grad(loss(ad, F.scan, reverse), argnums=(0, 1))(p, xs)
    assert compiled.tier_runs == compiled.runs == 2   # (the forward and the backward scan)
    ref = jax.grad(loss(jnp, lax.scan, reverse), argnums=(0, 1))(p, xs)
    for a, b in zip(g, ref):
        np.testing.assert_allclose(to_numpy(a), np.asarray(b), rtol=1e-12, atol=1e-13)
    rep = replayed(F.grad(loss(ad, F.scan, reverse), argnums=(0, 1)), p, xs)
    for a, b in zip(g, rep):
        np.testing.assert_allclose(to_numpy(a), to_numpy(b), rtol=1e-13, atol=1e-14)


def test_grad_against_central_differences(compiled):
    rng = np.random.default_rng(2)
    p, xs = np.array([0.3, 0.2, -0.4]), rng.normal(size=(6, 2))
    f = loss(ad, F.scan)
    g = to_numpy(F.grad(f)(p, xs))
    assert compiled.runs == 2
    fn = loss(np, python_scan)
    h = 1e-6
    fd = [(fn(p + h * e, xs) - fn(p - h * e, xs)) / (2 * h) for e in np.eye(3)]
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-7)


@needs_jax
@pytest.mark.parametrize("transform", ["jvp", "vmap", "jit", "jit_grad"])
def test_transforms_of_a_compiled_scan(compiled, transform):
    rng = np.random.default_rng(3)
    p, xs = np.array([0.3, 0.2, -0.4]), rng.normal(size=(5, 2))
    f, fj = loss(ad, F.scan), loss(jnp, lax.scan)
    t = np.array([1.0, -0.5, 0.25])
    if transform == "jvp":
        got = F.jvp(lambda q: f(q, xs), (p,), (t,))
        ref = jax.jvp(lambda q: fj(q, xs), (p,), (t,))
    elif transform == "vmap":
        ps = p + 0.1 * rng.normal(size=(4, 3))
        got = F.vmap(f, in_dims=(0, None))(ps, xs)
        ref = jax.vmap(fj, in_axes=(0, None))(ps, xs)
    elif transform == "jit":
        got = ad.jit(f)(p, xs)
        got = ad.jit(f)(p, xs)   # (the cached program)
        ref = fj(p, xs)
    else:
        g = ad.jit(F.grad(f))
        got = g(p, xs)
        got = g(p, xs)
        ref = jax.grad(fj)(p, xs)
    assert compiled.runs >= 1
    got = got if isinstance(got, tuple) else (got,)
    ref = ref if isinstance(ref, tuple) else (ref,)
    for a, b in zip(got, ref):
        np.testing.assert_allclose(to_numpy(a), np.asarray(b), rtol=1e-11, atol=1e-12)


@needs_jax
def test_hessian(compiled):
    def f(xp, scan):
        return lambda p, xs: scan(lambda c, x: (c * p[0] + xp.sin(x * p[1]), c), 1.0, xs)[0]
    p, xs = np.array([0.9, 0.5]), np.linspace(-1.0, 1.0, 6)
    got = F.hessian(f(ad, F.scan))(p, xs)
    assert compiled.runs >= 4   # (the forward, the backward, and their forward derivatives)
    ref = jax.hessian(f(jnp, lax.scan))(p, xs)
    np.testing.assert_allclose(to_numpy(got), np.asarray(ref), rtol=1e-12, atol=1e-13)


def test_float32_stays_float32(compiled):

    if compiled.tier == "array":
        pytest.skip('the array tier computes float64, int64 and bool')
    rng = np.random.default_rng(4)
    init = {"u": np.float32(0.3) * np.ones((), np.float32),
            "v": np.array([0.2, -0.4], np.float32)}
    xs = rng.normal(size=(20, 2)).astype(np.float32)
    got = leaves(F.scan(make_step(ad), init, xs))
    assert compiled.tier_runs == compiled.runs == 1
    rep = leaves(replayed(F.scan, make_step(ad), init, xs))
    ref = leaves(python_scan(make_step(np), init, xs))
    for g, r, p in zip(got, rep, ref):
        g = to_numpy(g)
        assert g.dtype == np.float32 and to_numpy(r).dtype == np.float32
        # (libm's float32 functions against NumPy's: a few ulps after 20 steps)
        np.testing.assert_allclose(g, to_numpy(r), rtol=2e-6, atol=1e-6)
        np.testing.assert_allclose(g, p, rtol=2e-6, atol=1e-6)


def test_float32_gradient(compiled):

    if compiled.tier == "array":
        pytest.skip('the array tier computes float64, int64 and bool')
    p = np.array([0.3, 0.2, -0.4], np.float32)
    xs = np.random.default_rng(5).normal(size=(6, 2)).astype(np.float32)
    g = to_numpy(F.grad(loss(ad, F.scan))(p, xs))
    assert compiled.tier_runs == compiled.runs == 2 and g.dtype == np.float32
    ref = to_numpy(F.grad(loss(ad, F.scan))(p.astype(np.float64), xs.astype(np.float64)))
    np.testing.assert_allclose(g, ref, rtol=1e-4, atol=1e-5)


def test_rk4_integrator_and_its_gradient(compiled):
    """The benchmark's system: 4 states, 4 parameters, Python float literals."""
    dt = 1e-3

    def rhs(xp, th, y):
        x1, v1, x2, v2 = y[0], y[1], y[2], y[3]
        a1 = -th[0] * x1 - th[1] * v1 + th[2] * (x2 - x1) - th[3] * x1 ** 3
        a2 = -th[0] * x2 - th[1] * v2 + th[2] * (x1 - x2)
        return xp.stack([v1, a1, v2, a2])

    def f(xp, scan):
        def loss_(th, y0):
            def step(y, _):
                k1 = rhs(xp, th, y)
                k2 = rhs(xp, th, y + dt / 2 * k1)
                k3 = rhs(xp, th, y + dt / 2 * k2)
                k4 = rhs(xp, th, y + dt * k3)
                return y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4), None
            y, _ = scan(step, y0, None, length=200)
            return xp.sum(y ** 2)
        return loss_

    th, y0 = np.array([1.0, 0.1, 0.5, 0.2]), np.array([1.0, 0.0, -0.5, 0.2])
    g = to_numpy(F.grad(f(ad, F.scan))(th, y0))
    assert compiled.tier_runs == compiled.runs == 2
    rep = to_numpy(replayed(F.grad(f(ad, F.scan)), th, y0))
    np.testing.assert_allclose(g, rep, rtol=1e-14, atol=1e-15)
    if jax is not None:
        ref = jax.grad(f(jnp, lax.scan))(th, y0)
        np.testing.assert_allclose(g, np.asarray(ref), rtol=1e-12)


def test_int_carry_of_fori_loop(compiled):
    def body(i, c):
        return c * 0.5 + ad.astype(i, c.dtype) * c[::-1]
    got = F.fori_loop(0, 6, body, np.array([1.0, 2.0]))
    assert compiled.runs == 1
    c = np.array([1.0, 2.0])
    for i in range(6):
        c = c * 0.5 + i * c[::-1]
    np.testing.assert_allclose(to_numpy(got), c, rtol=1e-15)


def test_length_zero_and_ys_only(compiled):
    c, ys = F.scan(lambda c, x: (c, ad.sin(x) * c), np.array(2.0), np.zeros((0, 3)))
    assert to_numpy(ys).shape == (0, 3) and to_numpy(c) == 2.0
    c, ys = F.scan(lambda c, x: (c, ad.sin(x) * c), np.array(2.0), np.ones((4, 3)))
    np.testing.assert_allclose(to_numpy(ys), 2 * np.sin(np.ones((4, 3))), rtol=1e-15)
    assert compiled.runs == 2


def test_unsupported_instruction_falls_back_to_the_replay(compiled):
    def step(c, x):   # (a sort: no rule in the lowerer)
        return c + ad.sort(x), ad.sum(c)
    xs = np.arange(12.0).reshape(4, 3)[:, ::-1]
    c, ys = F.scan(step, np.zeros(3), xs)
    assert compiled.runs == 0 and "sort" in tiers.refused
    ref = python_scan(lambda c, x: (c + np.sort(x), np.sum(c)), np.zeros(3), xs)
    np.testing.assert_allclose(to_numpy(c), ref[0])
    np.testing.assert_allclose(to_numpy(ys), ref[1])


def test_the_cost_model():
    """Short scans of large values stay replayed (lowering them would cost more than the
    replay, and NumPy's own loops do their arithmetic); long scans of small values run in the
    machine."""
    start = dict(tiers.runs)
    xs = np.ones((40, 200))
    F.grad(lambda p: ad.sum(F.scan(lambda c, x: (ad.sin(c) * p + x, None), np.zeros(200),
                                   xs)[0]))(0.5)
    assert tiers.runs == start
    F.grad(lambda p: F.scan(lambda c, x: (ad.sin(c) * p + x, None), 1.0, np.ones(200))[0])(0.5)
    assert tiers.runs["machine"] == start["machine"] + 2   # (the forward and the backward scan)


def test_switched_off(compiled):
    with ad.config.scan_compiled(False):
        F.scan(lambda c, x: (c + x, None), 0.0, np.ones(40))
    assert compiled.runs == 0


def test_other_backends_replay(compiled, backend):
    xs = backend(np.linspace(0.0, 1.0, 6))
    c, ys = F.scan(lambda c, x: (ad.sin(c) + x, c * x), backend(np.asarray(0.5)), xs)
    ref = python_scan(lambda c, x: (np.sin(c) + x, c * x), 0.5, np.linspace(0.0, 1.0, 6))
    np.testing.assert_allclose(to_numpy(c), ref[0], rtol=1e-14)
    np.testing.assert_allclose(to_numpy(ys), ref[1], rtol=1e-14)
    assert compiled.runs == (1 if backend.name == "numpy" else 0)


def test_a_compiler_error_falls_back_to_the_machine_then_the_replay(compiled, monkeypatch):

    if compiled.tier == "array":
        pytest.skip("the scalar tiers' fallbacks")
    def broken(src):
        raise RuntimeError("no compiler today")
    monkeypatch.setattr(tiers, "NUMBA_AFTER", 0.0)
    monkeypatch.setattr(lower_numba, "available", lambda: True)
    monkeypatch.setattr(scan_numba, "_load", broken)
    step = lambda c, x: (c * 0.5 + x, ad.exp(c))  # noqa: E731
    ref = python_scan(lambda c, x: (c * 0.5 + x, np.exp(c)), 1.0, np.arange(5.0))
    for machine_too in (False, True):
        if machine_too:
            def refuse(*args):
                raise tiers.Unsupported("no machine today")
            monkeypatch.setattr(tiers, "ScanMachine", refuse)
        start = dict(tiers.runs)
        c, ys = F.scan(step, np.array(1.0), np.arange(5.0))
        assert "no compiler today" in tiers.refused
        assert tiers.runs["numba"] == start["numba"]
        assert tiers.runs["machine"] == start["machine"] + (not machine_too)
        np.testing.assert_allclose(to_numpy(c), ref[0], rtol=1e-15)
        np.testing.assert_allclose(to_numpy(ys), ref[1], rtol=1e-15)


def test_eager_tape(compiled):
    p, xs = np.array([0.3, 0.2, -0.4]), np.random.default_rng(6).normal(size=(5, 2))
    t = ad.Tensor(p).requires_grad_()
    loss(ad, F.scan)(t, xs).backward()
    assert compiled.tier_runs == compiled.runs == 2   # (the forward keeps its history; the backward)
    ref = replayed(F.grad(loss(ad, F.scan)), p, xs)
    np.testing.assert_allclose(to_numpy(t.grad), to_numpy(ref), rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_special_values_as_the_replay(compiled, dtype):
    """inf, nan, signed zeros: NumPy's semantics (a power of exponent 0.5 is its sqrt, nan for
    -inf; sign; maximum's nan; division by zero)."""
    if compiled.tier == "array" and dtype == np.float32:
        pytest.skip("the array tier computes float64, int64 and bool")
    xs = np.array([[-np.inf, 0.5], [-0.0, 0.5], [4.0, 2.0], [np.nan, 0.5], [0.0, -1.0],
                   [np.inf, 3.0]], dtype)

    def step(c, x):
        a, e = x[0], x[1]
        ys = ad.stack([a ** 0.5, a ** e, a ** c, ad.sign(a), ad.maximum(a, c), 1.0 / a,
                       ad.where(a > c, a, c), ad.sqrt(a), ad.exp(a), ad.log(ad.abs(a))])
        return c, ys
    c0 = np.asarray(0.5, dtype)
    with np.errstate(all="ignore"):   # (the trace runs on the first step's -inf)
        got = to_numpy(F.scan(step, c0, xs)[1])
        rep = to_numpy(replayed(F.scan, step, c0, xs)[1])
    assert compiled.runs == 1 and got.dtype == dtype
    np.testing.assert_array_equal(got, rep)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(rep))


def test_structural_instructions_and_integers(compiled):
    """permute_dims, flip, roll, tile, repeat, concat along an axis, sum over an axis with
    keepdims, broadcast_to, integer and bool carries, logical operations and casts."""
    if compiled.tier == "array":
        pytest.skip('int32: the array tier computes float64, int64 and bool')
    def step(c, x):
        m, k, flag = c
        t = ad.permute_dims(m, (1, 0)) + ad.flip(x, axis=0)[:, None]
        r = ad.roll(t, 1, axis=1) * 0.5 + ad.tile(x[:1], (3,))[:, None]
        q = ad.concat([r[:, :1], ad.repeat(x[1:2], 1)[:, None] + r[:, 1:2]], axis=1)
        s = ad.sum(q, axis=1, keepdims=True)
        m_new = ad.broadcast_to(s, (3, 2)).T * 0.25 + ad.astype(k, m.dtype) * 1e-3
        big = ad.logical_and(ad.sum(m_new) > 0, ad.logical_not(flag))
        return (m_new, k + ad.astype(big, k.dtype) * 2 - 1, ad.logical_or(big, flag)), s[:, 0]
    init = (np.arange(6.0).reshape(2, 3) / 7, np.asarray(3, np.int32), np.asarray(False))
    xs = np.random.default_rng(7).normal(size=(8, 3))
    got = leaves(F.scan(step, init, xs))
    assert compiled.runs == 1
    rep = leaves(replayed(F.scan, step, init, xs))
    for g, r in zip(got, rep):
        assert to_numpy(g).dtype == to_numpy(r).dtype
        np.testing.assert_allclose(to_numpy(g), to_numpy(r), rtol=1e-15, atol=0)


def _tier_runs():
    return dict(tiers.runs)


@pytest.mark.skipif(not lower_numba.available(), reason="numba is not installed")
def test_numba_compiles_once_the_machine_has_spent_its_time(compiled, monkeypatch):
    """The tiers: the machine at the first calls, numba from the call after the machine has
    spent ``NUMBA_AFTER`` seconds in that scan; both give the replay's values."""
    if compiled.tier == "array":
        pytest.skip("the scalar tiers' tiering")
    monkeypatch.setattr(tiers, "NUMBA_AFTER", 1e-9)
    f = ad.jit(lambda c, xs: F.scan(lambda c, x: (ad.sin(c) * 0.5 + x, c * x), c, xs))
    c0, xs = np.array([0.5, -0.25]), np.linspace(0.0, 1.0, 14).reshape(7, 2)
    ref = leaves(replayed(f, c0, xs))
    seen = []
    for _ in range(3):
        before = _tier_runs()
        got = leaves(f(c0, xs))
        seen.append("machine" if tiers.runs["machine"] > before["machine"] else "numba")
        for g, r in zip(got, ref):
            np.testing.assert_allclose(to_numpy(g), to_numpy(r), rtol=1e-15, atol=1e-16)
    assert seen == ["machine", "numba", "numba"]


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integers_stay_numpy_integers(compiled, dtype):
    """Integer values run in the machine while they stay exact in a double and within their
    dtype; a run that leaves that range (NumPy's arithmetic wraps around) is replayed, as is a
    scan whose integer input is already too large for a double."""
    if compiled.tier == "array":
        pytest.skip("the machine's exact range of integers")
    step = lambda c, x: (c * 3 + x, c - 1)  # noqa: E731
    ref_step = lambda c, x: (c * dtype(3) + x, c - dtype(1))  # noqa: E731
    cases = [(dtype(1), np.arange(12, dtype=dtype), True),    # (3 ** 12: in range)
             (dtype(1), np.arange(45, dtype=dtype), False)]   # (3 ** 45: wraps around)
    if dtype == np.int64:
        cases.append((dtype(2 ** 60), np.arange(3, dtype=dtype), False))   # (not exact)
        cases.append((np.iinfo(dtype).min, np.arange(3, dtype=dtype), False))   # (nor its abs)
    for init, xs, taken in cases:
        before = _tier_runs()
        with np.errstate(over="ignore"), ad.config.scan_numba(False):
            c, ys = F.scan(step, init, xs)
            ref = python_scan(ref_step, init, xs)
        assert (_tier_runs()["machine"] == before["machine"] + 1) == taken
        assert to_numpy(c).dtype == dtype and to_numpy(ys).dtype == dtype
        np.testing.assert_array_equal(to_numpy(c), ref[0])
        np.testing.assert_array_equal(to_numpy(ys), ref[1])


def test_bool_values_on_the_machine(compiled):
    """Comparisons, logical operations, where, casts between bool and float64, a bool carry and
    bool ys: the machine keeps bools as 0.0 and 1.0."""
    def step(c, x):
        v, flag = c
        up = ad.logical_xor(x > v[0], flag)
        both = ad.logical_and(up, ad.logical_not(v[1] >= 0.25))
        v_new = ad.where(both, v * 0.5, v + ad.astype(up, v.dtype) * x) \
            - ad.astype(ad.logical_or(x == 0.0, x != x), v.dtype)
        return (v_new, ad.astype(v_new[0] - v_new[1], ad.bool)), ad.stack([up, both])
    init = (np.array([0.1, 0.3]), np.asarray(True))
    xs = np.array([0.2, 0.0, -0.3, 0.7, np.nan, 0.05, 0.9, -1.0])
    got = leaves(F.scan(step, init, xs))
    assert compiled.tier_runs == compiled.runs == 1
    rep = leaves(replayed(F.scan, step, init, xs))
    for g, r in zip(got, rep):
        assert to_numpy(g).dtype == to_numpy(r).dtype
        np.testing.assert_array_equal(to_numpy(g), to_numpy(r))


def test_bitwise_operations_of_bools_on_the_machine(compiled):
    """&, |, ^ and ~ of bools (the masks the strong zeros' rules combine: grad of a body with a
    maximum takes them) run as the logical operations, with the replay's values."""
    def step(c, x):
        up, down = x > c[0], x < c[1]
        keep = (up & ~down) | (up ^ (c[0] > 0.5))
        return ad.where(keep, c * 0.5, c + x), ad.stack([up & down, up | down])
    init = np.array([0.1, 0.3])
    xs = np.array([0.2, 0.0, -0.3, 0.7, np.nan, 0.05, 0.9, -1.0])
    got = leaves(F.scan(step, init, xs))
    assert compiled.tier_runs == compiled.runs == 1
    for g, r in zip(got, leaves(replayed(F.scan, step, init, xs))):
        assert to_numpy(g).dtype == to_numpy(r).dtype
        np.testing.assert_array_equal(to_numpy(g), to_numpy(r))
    # the gradient of a maximum in a recurrence (its rule's masks meet with &), against JAX
    loss = lambda c0: ad.sum(F.scan(lambda c, x: (ad.maximum(c, x) * 0.9, c), c0, xs[:4])[1])
    g = F.grad(loss)(np.array([0.25, 0.15]))
    assert compiled.runs >= 2
    if jax is not None:
        jl = lambda c0: jnp.sum(lax.scan(lambda c, x: (jnp.maximum(c, x) * 0.9, c), c0,
                                         jnp.asarray(xs[:4]))[1])
        np.testing.assert_allclose(g, jax.grad(jl)(jnp.array([0.25, 0.15])), rtol=1e-14)


def test_setitem_and_bool_fills_on_the_scalar_tiers(compiled):
    """``x[key] = v`` with a key of slices and integers (the VJP of a getitem writes into
    zeros) and a bool value filled with a number (zeros_like of a mask) run in the scalar
    tiers, with the replay's values."""
    if compiled.tier == "array":
        pytest.skip("the scalar tiers' instructions")

    def step(c, x):
        m = ad.zeros_like(c)
        m[1:3] = c[:2] * x
        m[0] = ad.sum(c) * 0.5
        off = ad.zeros_like(c > 0.0)
        return ad.where(off | (m > 1.0), c * 0.25, m), ad.sum(m)
    init = np.array([0.3, -0.2, 0.9, 0.4])
    xs = np.linspace(-1.0, 2.0, 9)
    got = leaves(F.scan(step, init, xs))
    assert compiled.tier_runs == compiled.runs == 1
    for g, r in zip(got, leaves(replayed(F.scan, step, init, xs))):
        np.testing.assert_array_equal(to_numpy(g), to_numpy(r))


def test_any_and_all_on_the_scalar_tiers(compiled):
    """``any`` and ``all`` (of bools and of numbers, over an axis and whole) in the scalar
    tiers, with the replay's values: a batched while loop's predicate is any of its lanes'."""
    if compiled.tier == "array":
        pytest.skip("the scalar tiers' instructions")

    def step(c, x):
        m = c * x
        rows = ad.any(ad.reshape(m, (2, 2)) > 0.5, axis=1)
        every = ad.all(m)
        some = ad.any(ad.reshape(m, (2, 2)) > 0.0) & ~ad.all(m > 0.0)
        return ad.where(rows[0] | every, c * 0.5, c + x) + ad.astype(some, c.dtype), rows
    init = np.array([0.3, -0.2, 0.9, 0.0])
    xs = np.linspace(-1.0, 2.0, 9)
    got = leaves(F.scan(step, init, xs))
    assert compiled.tier_runs == compiled.runs == 1
    for g, r in zip(got, leaves(replayed(F.scan, step, init, xs))):
        assert to_numpy(g).dtype == to_numpy(r).dtype
        np.testing.assert_array_equal(to_numpy(g), to_numpy(r))


def test_while_loop_runs_in_chunks_of_its_masked_step(compiled):
    """NOTE [compiled while]: after a few replayed steps a while loop runs chunks of a scan of
    its masked step in the compiled tiers; its value and number of steps are the plain loop's,
    and so is its gradient (reversed from its count)."""
    if compiled.tier == "array":
        pytest.skip("the scalar tiers")

    def run(x):
        return F.while_loop(lambda v: v[0] < 1e4, lambda v: (v[0] * 1.01 + ad.sin(v[1]), v[1]
                                                             * 0.99, v[2] + 1), x)
    x = (np.asarray(1.0), np.asarray(0.5), np.asarray(0))
    want = (1.0, 0.5, 0)
    while want[0] < 1e4:
        want = (want[0] * 1.01 + np.sin(want[1]), want[1] * 0.99, want[2] + 1)
    got = ad.jit(run)(x)
    assert compiled.runs >= 1 and to_numpy(got[2]) == want[2] > 100
    np.testing.assert_allclose([float(to_numpy(g)) for g in got[:2]], want[:2], rtol=1e-13)
    loss = lambda a: run((a[0], a[1], np.asarray(0)))[0]   # noqa: E731
    g = F.grad(loss)(np.array([1.0, 0.5]))
    np.testing.assert_allclose(g, replayed(F.grad(loss), np.array([1.0, 0.5])), rtol=1e-12)


_EDGES = np.array([-np.inf, -3.5, -1.0, -0.5, -0.0, 0.0, 1e-300, 0.5, 0.999, 1.0, 2.0, 7.25,
                   800.0, np.inf, np.nan])


@pytest.mark.parametrize("name", sorted(set(scan_lower.OPERATIONS) - set(scan_lower._COMPARE)
                                        - set(scan_lower._LOGICAL)
                                        - {"copy", "where", "pow_or_sqrt", "positive"}))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_each_operation_against_the_replay(compiled, name, dtype):
    """Every arithmetic operation of the compiled tiers on edge values (infinities, signed
    zeros, nan, out of the domain), as ys of a scan, against the replay: the same nans, the same
    zeros' signs, the values within an ulp or two (libm's functions against NumPy's loops; in
    float32, NumPy's own float32 approximations against libm's double rounded to float32)."""
    if compiled.tier == "array" and dtype == np.float32:
        pytest.skip('the array tier computes float64, int64 and bool')
    fn = getattr(ad, name)
    binary = name in lower_numba._BINARY or name in ("maximum", "minimum")
    edges = _EDGES.astype(dtype)
    xs = np.stack(np.meshgrid(edges, edges), -1).reshape(-1, 2) if binary else edges[:, None]

    def step(c, x):
        return c, (fn(x[0], x[1]) if binary else fn(x[0])) * c
    with np.errstate(all="ignore"):
        got = to_numpy(F.scan(step, np.asarray(1.0, dtype), xs)[1])
        rep = to_numpy(replayed(F.scan, step, np.asarray(1.0, dtype), xs)[1])
    assert compiled.runs == 1 and got.dtype == rep.dtype == dtype
    np.testing.assert_array_equal(np.isnan(got), np.isnan(rep))
    np.testing.assert_array_equal(np.signbit(got[got == 0]), np.signbit(rep[rep == 0]))
    ulp = np.finfo(dtype).eps
    np.testing.assert_allclose(got, rep, rtol=2.5 * ulp if dtype == np.float64 else 4 * ulp,
                               atol=0)


@pytest.mark.parametrize("shapes", ["matrix-vector", "vector-matrix", "batched"])
def test_matrix_products_in_a_recurrence_against_jax_and_the_replay(compiled, shapes):
    """A recurrent cell (tanh(W @ h + U @ x + b)) and its gradient: the products' elements as
    in-order sums of products, in both tiers, against the replay and JAX."""
    if compiled.tier == "array" and shapes == "batched":
        pytest.skip("the array tier multiplies vectors and matrices, not batches of them")
    rng = np.random.default_rng(8)
    H, D = 5, 3
    W, U, b = 0.4 * rng.standard_normal((H, H)), 0.4 * rng.standard_normal((H, D)), \
        0.1 * rng.standard_normal(H)
    xs = rng.standard_normal((12, D))

    def loss(xp, scan):
        def f(W, U, b):
            def step(h, x):
                if shapes == "matrix-vector":
                    z = W @ h + U @ x
                elif shapes == "vector-matrix":
                    z = h @ W.T + x @ U.T
                else:   # (a stack of two matrices times a stack of two columns)
                    z = xp.sum(xp.stack([W, W.T]) @ xp.stack([h, h])[:, :, None], axis=0)[:, 0] \
                        / 2 + U @ x
                h = xp.tanh(z + b)
                return h, xp.sum(h * h)
            h, ys = scan(step, xp.zeros(H), xs)
            return xp.sum(ys) + xp.sum(h)
        return f

    g = F.grad(loss(ad, F.scan), argnums=(0, 1, 2))(W, U, b)
    assert compiled.tier_runs == compiled.runs == 2
    rep = replayed(F.grad(loss(ad, F.scan), argnums=(0, 1, 2)), W, U, b)
    for a, r in zip(g, rep):
        np.testing.assert_allclose(to_numpy(a), to_numpy(r), rtol=1e-13, atol=1e-14)
    if jax is not None:
        ref = jax.grad(loss(jnp, lax.scan), argnums=(0, 1, 2))(W, U, b)
        for a, r in zip(g, ref):
            np.testing.assert_allclose(to_numpy(a), np.asarray(r), rtol=1e-12, atol=1e-13)


@needs_jax
@pytest.mark.parametrize("case", control_cases.ALL if control_cases else [],
                         ids=lambda c: c.__name__)
def test_control_flow_cases_in_the_compiled_tiers(compiled, case):
    """The control-flow suite's cases (scan, fori_loop, while_loop, cond and switch inside
    them...) with every scan compiled: values, jit, and the gradients, against JAX."""
    jp = jnp.asarray(control_cases.P)
    f, g = control_cases._ad(case), control_cases._jx(case)
    control_cases._close(f(control_cases.P), g(jp))
    control_cases._close(ad.jit(f)(control_cases.P), g(jp))
    control_cases._close(F.jacfwd(f)(control_cases.P), jax.jacfwd(g)(jp))
    if case in control_cases.REV:
        g = control_cases._jrev(case)   # (JAX refuses reverse mode through a while_loop)
        control_cases._close(F.grad(f)(control_cases.P), jax.grad(g)(jp))
        control_cases._close(ad.jit(F.grad(f))(control_cases.P), jax.grad(g)(jp))


def test_reductions_against_the_replay_and_jax(compiled):
    """sum, prod, max and min over axes, with keepdims, the cumulative sum and product (with
    include_initial), in the body and in its gradient (max's ties share the cotangent; prod's
    VJP is made of cumulative products), nan and signed zeros kept as NumPy keeps them."""
    if compiled.tier == "array":
        pytest.skip("the array tier sums; max, min, prod and the cumulative ones are replayed")
    def step(xp):
        def f(c, x):
            m = xp.reshape(x, (2, 3)) * c
            y = xp.max(m, axis=1) + xp.min(m, axis=0, keepdims=True)[0, :2] \
                + xp.prod(m[:, :2] * 0.5 + 1.0, axis=0) + xp.sum(m, axis=1)
            w = xp.cumulative_prod(m * 0.3, axis=1, include_initial=True)[:, 1:] \
                + xp.cumulative_sum(m, axis=0)
            return c * 0.9 + 0.1 * xp.max(y) + 0.01 * xp.sum(w), \
                xp.stack([xp.max(x), xp.min(x), xp.prod(x[:3]), xp.cumulative_sum(x)[-1]])
        return f
    xs = np.random.default_rng(9).standard_normal((10, 6))
    xs[3, 2] = xs[3, 4]   # (a tie for max and min)
    got = leaves(F.scan(step(ad), np.array(1.0), xs))
    assert compiled.tier_runs == compiled.runs == 1
    rep = leaves(replayed(F.scan, step(ad), np.array(1.0), xs))
    for g, r in zip(got, rep):
        np.testing.assert_allclose(to_numpy(g), to_numpy(r), rtol=1e-14, atol=1e-15)
    loss = lambda xp, scan: lambda c0, xs: xp.sum(scan(step(xp), c0, xs)[1])  # noqa: E731
    g = F.grad(loss(ad, F.scan), argnums=(0, 1))(np.array(1.0), xs)
    assert compiled.tier_runs == compiled.runs == 3, tiers.refused
    rep = replayed(F.grad(loss(ad, F.scan), argnums=(0, 1)), np.array(1.0), xs)
    for a, b in zip(g, rep):
        np.testing.assert_allclose(to_numpy(a), to_numpy(b), rtol=1e-13, atol=1e-14)
    if jax is not None:
        ref = jax.grad(loss(jnp, lax.scan), argnums=(0, 1))(1.0, xs)
        for a, b in zip(g, ref):
            np.testing.assert_allclose(to_numpy(a), np.asarray(b), rtol=1e-12, atol=1e-13)
    nan_edges = np.array([[np.nan, 1.0, 0.0, -0.0, 2.0, 2.0], [0.0, -0.0, -1.0, 3.0, np.nan, 1.0]])
    with np.errstate(all="ignore"):
        got = to_numpy(F.scan(step(ad), np.array(1.0), nan_edges)[1])
        rep = to_numpy(replayed(F.scan, step(ad), np.array(1.0), nan_edges)[1])
    np.testing.assert_array_equal(got, rep)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(rep))


# -- the array tier's element loops (NOTE [array loops] in arrayad/_jit/scan_vector.py)

@pytest.fixture
def array_loops(monkeypatch):
    """Every scan on NumPy in the array tier from its first call and first step; the sources
    of the loops it compiles (to see which path each instruction took)."""
    if not lower_numba.available():
        pytest.skip("numba is not installed")
    from arrayad._jit import scan_vector
    monkeypatch.setattr(tiers, "ARRAY_AFTER", 0.0)
    monkeypatch.setattr(tiers, "REPLAY_US", 0.0)
    monkeypatch.setattr(tiers, "NUMBA_MIN_WORK", float("inf"))
    monkeypatch.setattr(_control, "_PLAIN_STEPS", 0)
    sources, init = [], scan_vector.ArrayScan.__init__

    def record(self, *args):
        init(self, *args)
        sources.append(self.source)
    monkeypatch.setattr(scan_vector.ArrayScan, "__init__", record)
    start = tiers.runs["array"]
    with ad.config.scan_compiled(True), ad.config.scan_numba(True):
        yield lambda: (tiers.runs["array"] - start, sources)


def ode_solve(s):
    """GradBench's ode, its arrayad tool's own module (RK4 of y_0' = x_0, y_i' = x_i y_{i-1},
    a concat of slices in the body), as a function of x (each call a new function)."""
    return lambda x: gradbench_ode.solve(x, s)


def jax_ode_solve(s):
    """The same ode written for JAX (lax.scan), the independent reference."""
    def solve(x):
        h = 2.0 / s

        def rhs(y):
            return jnp.concatenate([x[:1], x[1:] * y[:-1]])

        def step(y, _):
            k1 = rhs(y)
            k2 = rhs(y + h / 2 * k1)
            k3 = rhs(y + h / 2 * k2)
            k4 = rhs(y + h * k3)
            return y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4), None
        return lax.scan(step, jnp.zeros_like(x), None, length=s)[0]
    return solve


@pytest.mark.parametrize("s", [1, 7])
def test_ode_body_runs_as_element_loops_equal_to_the_replay(array_loops, s):
    """The primal and the gradient of GradBench's ode (300 values: past the scalar tiers)
    under jit run as fused element loops (no NumPy array statement left for the concats, the
    slices' arithmetic and the scatter-adds of the pullback), from one step on, and give the
    replay's values bit for bit; JAX's lax.scan agrees."""
    x = np.random.default_rng(3).random(300) + 0.5
    solve = ode_solve(s)
    grad = F.grad(lambda x: solve(x)[-1])
    got_y, got_g = ad.jit(solve)(x), ad.jit(grad)(x)
    runs, sources = array_loops()
    assert runs == 3 and len(sources) == 3   # (the primal; the gradient's forward, backward)
    for src in sources:
        assert "for q in range(300):" in src
        assert "np.concatenate" not in src and "+= " not in src and ".copy()" not in src
    with ad.config.scan_compiled(False):
        ref_y, ref_g = ad.jit(solve)(x), ad.jit(grad)(x)
    assert array_loops()[0] == 3   # (the replay ran)
    for got, ref in ((got_y, ref_y), (got_g, ref_g)):
        np.testing.assert_array_equal(got, ref)
    if jax is not None:
        jsolve = jax_ode_solve(s)
        np.testing.assert_allclose(got_y, jsolve(x), rtol=1e-13)
        np.testing.assert_allclose(got_g, jax.grad(lambda x: jsolve(x)[-1])(x), rtol=1e-12)
    for again in range(2):   # (the workspace is kept: the zeros a scatter-add needs stay zero)
        np.testing.assert_array_equal(ad.jit(grad)(x), ref_g)
    assert array_loops()[0] == 7


def test_ode_body_on_other_backends_matches(backend):
    """The same program on array-api-strict and torch (replayed: the compiled tiers are
    NumPy's) gives NumPy's values."""
    x = np.random.default_rng(3).random(40) + 0.5
    solve = ode_solve(3)
    grad = F.grad(lambda x: solve(x)[-1])
    for f in (solve, grad):
        np.testing.assert_allclose(to_numpy(ad.jit(f)(backend(x))), ad.jit(f)(x), rtol=1e-14)


def test_element_loops_keep_numpy_special_values(array_loops):
    """Elementwise arithmetic, maximum, sign, where and comparisons on 1-d values as loops, on
    infinities, nan and signed zeros, with updates and scatter-adds of slices (of zeros: -0.0
    added to +0.0 is +0.0, as NumPy adds) and a concat of a slice of a loop's value: the
    replay's values and zeros' signs (a nan's sign is IEEE's to choose)."""
    from arrayad._ops.indexing import index_add
    edges = np.concatenate([_EDGES, -_EDGES, np.linspace(-2.0, 3.0, 290)])

    def step(c, x):
        d = x * c - x / (c + 0.5)
        e = ad.where(d > 0.25, ad.maximum(d, x), ad.sign(d) * -0.0)
        z = ad.zeros_like(e)
        z[1:] += e[:-1] * -1.0                                    # (a setitem)
        u = index_add(ad.zeros_like(e), (slice(1, None),), e[:-1] * -1.0)
        w = index_add(d * 0.0, (slice(None, None, 2),), e[::2] * 2.0)
        return c, ad.concat([d[:3], e[3:] + z[3:], e, z, u, w])
    c0 = np.linspace(-1.0, 1.0, edges.size)
    xs = np.stack([edges, edges[::-1], -edges])
    with np.errstate(all="ignore"):
        got = F.scan(step, c0, xs)[1]
        runs, sources = array_loops()
        with ad.config.scan_compiled(False):
            ref = F.scan(step, c0, xs)[1]
    assert runs == 1 and "for q in range" in sources[0]
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(np.signbit(got[got == 0]), np.signbit(ref[ref == 0]))
    assert np.signbit(ref[ref == 0]).any() and not np.signbit(ref[ref == 0]).all()


def test_array_tier_from_the_second_call_where_numba_has_the_loop(monkeypatch):
    """Before the replay model says so, the array tier runs from a scan's second call where
    numba's cache has its loop (here: compiled earlier in this process); the first call is the
    replay's, and a loop numba has not compiled waits for the model."""
    if not lower_numba.available():
        pytest.skip("numba is not installed")
    x = np.random.default_rng(4).random(300)
    solve = ode_solve(3)
    monkeypatch.setattr(tiers, "ARRAY_AFTER", 0.0)
    with ad.config.scan_compiled(True), ad.config.scan_numba(True):
        want = ad.jit(solve)(x)   # (compiled at once)
        monkeypatch.setattr(tiers, "ARRAY_AFTER", float("inf"))
        fresh = ode_solve(3)   # (another body: its own tiers)
        f, start = ad.jit(fresh), tiers.runs["array"]
        np.testing.assert_array_equal(f(x), want)
        assert tiers.runs["array"] == start
        for _ in range(2):
            np.testing.assert_array_equal(f(x), want)
        assert tiers.runs["array"] == start + 2
        h = 1.0 + np.random.default_rng().random()   # (a body whose loop no cache holds)
        g = ad.jit(lambda x: F.scan(lambda y, _: (y * h + x, None), x, None, length=3)[0])
        start = tiers.runs["array"]
        for _ in range(3):
            g(x)
        assert tiers.runs["array"] == start
