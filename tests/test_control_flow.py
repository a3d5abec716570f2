"""Structured control flow (cond, switch, while_loop, fori_loop, scan, map): values and every
transform against JAX's lax (the independent reference) and against plain Python loops.

A table of cases drives the tests: each case is written once against a namespace pair
(``xp``: array functions, ``L``: the control-flow functions), so it runs on arrayad
(``ad``, ``ad.func``), on JAX (``jnp``, ``jax.lax``) and on a plain-Python reference (``_Loops``).
"""
import warnings

import numpy as np
import pytest

import arrayad as ad
from arrayad import func as F

from conftest import to_numpy
from arrayad._pytree import tree_leaves
from reference import PythonControlFlow

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy
lax = jax.lax

XS = np.linspace(-1.0, 1.0, 12).reshape(4, 3)
P = np.array([0.3, -0.7, 0.5])


class _Loops(PythonControlFlow):
    """Plain Python loops with lax's signatures (the reference without any tracing)."""

    @staticmethod
    def scan(f, init, xs, length=None, reverse=False):
        n = length if xs is None else len(jax.tree_util.tree_leaves(xs)[0])
        idx = range(n - 1, -1, -1) if reverse else range(n)
        ys, c = [], init
        for i in idx:
            x = None if xs is None else jax.tree_util.tree_map(lambda a: a[i], xs)
            c, y = f(c, x)
            ys.append(y)
        if reverse:
            ys.reverse()
        return c, jax.tree_util.tree_map(lambda *a: np.stack(a), *ys)

    @staticmethod
    def fori_loop(lo, hi, body, val):
        for i in range(int(lo), int(hi)):
            val = body(np.asarray(i), val)
        return val



# -- the cases: (name, function of (xp, L, p, xs), reverse mode works) ------------------------

def scan_carry(xp, L, p, xs):
    c, ys = L.scan(lambda c, x: (xp.sin(c) * p + x, c * x), p, xs)
    return xp.sum(c) + xp.sum(ys ** 2)


def scan_reverse(xp, L, p, xs):
    c, ys = L.scan(lambda c, x: (xp.cos(c) * p + x * c, xp.sum(c * x)), p, xs, reverse=True)
    return xp.sum(c) * 2.0 + xp.sum(ys * xp.cos(ys))


def scan_pytree(xp, L, p, xs):
    def f(c, x):
        a, b = c["a"], c["b"]
        return {"a": a * b[0] + x, "b": (b[0] * 0.9 + xp.sum(a) * 0.1,)}, (a[0], None)
    c, (y, _) = L.scan(f, {"a": p, "b": (p[1],)}, xs)
    return xp.sum(c["a"]) + c["b"][0] + xp.sum(y)


def scan_closure_only(xp, L, p, xs):
    # no xs: the parameter enters only through the closure
    c, _ = L.scan(lambda c, _: (c * p + 1.0, None), xp.ones_like(p), None, length=5)
    return xp.sum(c)


def fori_static(xp, L, p, xs):
    return xp.sum(L.fori_loop(0, 5, lambda i, c: c * xp.cos(c) + p * xp.astype(i, p.dtype), p))


def cond_true(xp, L, p, xs):
    return xp.sum(L.cond(xp.sum(p) < 1.0, lambda a: xp.sin(a) * p, lambda a: a ** 3, p))


def cond_false(xp, L, p, xs):
    return xp.sum(L.cond(xp.sum(p) > 1.0, lambda a: xp.sin(a) * p, lambda a: a ** 3, p))


def switch3(xp, L, p, xs):
    brs = [lambda a: a * 2.0, lambda a: xp.exp(a) * p[0], lambda a: xp.sum(a) * a]
    return xp.sum(L.switch(xp.asarray(1), brs, p)) + xp.sum(L.switch(xp.asarray(7), brs, p))


def map_case(xp, L, p, xs):
    return xp.sum(L.map(lambda x: xp.sin(x) * p, xs))


def scan_nested(xp, L, p, xs):
    def outer(c, x):
        inner, _ = L.scan(lambda d, y: (d * y + xp.tanh(c), None), c, xs)
        c2 = L.cond(xp.sum(x) > 0, lambda a: a * 0.5, lambda a: a + x, inner)
        return c2, xp.sum(inner)
    c, ys = L.scan(outer, p, xs)
    return xp.sum(c) + xp.sum(ys)


def while_case(xp, L, p, xs):
    out = L.while_loop(lambda c: c[0] < 4, lambda c: (c[0] + 1, c[1] * xp.cos(c[1]) + p),
                       (xp.asarray(0), p))
    return xp.sum(out[1])


def fori_dynamic(xp, L, p, xs):
    n = xp.asarray(3)
    return xp.sum(L.fori_loop(xp.asarray(0), n, lambda i, c: xp.sin(c) + p, p))


def _checkpoint(L):
    """The checkpoint of the namespace pair's library (the plain reference keeps everything)."""
    return {lax: jax.checkpoint, F: F.checkpoint}.get(L, lambda f: f)


def scan_checkpoint_step(xp, L, p, xs):
    # the whole step checkpointed (JAX's way of keeping only the carry per step)
    step = _checkpoint(L)(lambda c, x, p: (xp.sin(c) * p + x * c, xp.cos(c) * x))
    c, ys = L.scan(lambda c, x: step(c, x, p), p, xs)
    return xp.sum(c) + xp.sum(ys ** 2)


def scan_checkpoint_part(xp, L, p, xs):
    # a checkpoint inside the step, with work around it
    block = _checkpoint(L)(lambda c, p: xp.tanh(c * p) * xp.cos(c))
    c, ys = L.scan(lambda c, x: (block(c * 0.9 + x, p) + 0.1 * c, xp.sum(c * x)), p, xs)
    return xp.sum(c) + xp.sum(ys ** 2)


def cond_checkpoint_branch(xp, L, p, xs):
    br = _checkpoint(L)(lambda a: xp.sin(a) * xp.exp(a))
    return xp.sum(L.cond(xp.sum(p) < 1.0, br, lambda a: a ** 3, p))


CASES = [(scan_carry, True), (scan_reverse, True), (scan_pytree, True),
         (scan_closure_only, True), (fori_static, True), (cond_true, True),
         (cond_false, True), (switch3, True), (map_case, True), (scan_nested, True),
         (scan_checkpoint_step, True), (scan_checkpoint_part, True),
         (cond_checkpoint_branch, True), (while_case, True), (fori_dynamic, True)]
REV = [c for c, ok in CASES if ok]
ALL = [c for c, _ in CASES]
ids = lambda c: c.__name__  # noqa: E731


def _ad(case):
    return lambda p: case(ad, F, p, XS)


def _jx(case):
    return lambda p: case(jnp, lax, p, jnp.asarray(XS))


# JAX refuses reverse mode through lax.while_loop: the reference for the while cases' reverse
# derivatives is JAX differentiating the plain Python loop (their trip counts do not depend on
# the differentiated values, so the loop runs under jax.grad)
DYNAMIC_TRIP = (while_case, fori_dynamic)


def _jrev(case):
    if case in DYNAMIC_TRIP:
        return lambda p: case(jnp, _Loops, p, jnp.asarray(XS))
    return _jx(case)


def _ref(case):
    return lambda p: case(np, _Loops, p, XS)


def _close(a, b, tol=1e-10):
    np.testing.assert_allclose(to_numpy(a), np.asarray(b), rtol=tol, atol=tol)


# -- values ------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", ALL, ids=ids)
def test_value_against_jax_and_python_loop(case):
    want = _jx(case)(jnp.asarray(P))
    _close(_ref(case)(P), want)
    _close(_ad(case)(P), want)                      # eager (plain loops)
    _close(ad.jit(_ad(case))(P), want)              # staged: one instruction per loop
    _close(F.grad(lambda p: _ad(case)(p) * 1.0)(P) if case in REV else 0.0,
           jax.grad(_jrev(case))(jnp.asarray(P)) if case in REV else 0.0)


@pytest.mark.parametrize("case", ALL, ids=ids)
def test_backends_value_and_derivative(case, backend):
    if backend.name == "dask":
        pytest.skip("Dask: covered by test_dask_scan_stays_lazy")
    p = backend(P)
    xs = backend(XS)
    f = lambda p: case(ad, F, p, xs)  # noqa: E731
    _close(f(p), _jx(case)(jnp.asarray(P)))
    _close(F.jacfwd(f)(p), jax.jacfwd(_jx(case))(jnp.asarray(P)))
    if case in REV:
        _close(F.grad(f)(p), jax.grad(_jrev(case))(jnp.asarray(P)))


# -- every transform ---------------------------------------------------------------------------

@pytest.mark.parametrize("case", REV, ids=ids)
def test_reverse_transforms(case):
    f, g = _ad(case), _jrev(case)
    jp = jnp.asarray(P)
    _close(F.grad(f)(P), jax.grad(g)(jp))
    _close(F.jacrev(f)(P), jax.jacrev(g)(jp))
    _close(F.hessian(f)(P), jax.hessian(g)(jp), 1e-9)
    _close(ad.jit(F.grad(f))(P), jax.grad(g)(jp))
    _close(ad.jit(F.hessian(f))(P), jax.hessian(g)(jp), 1e-9)
    _close(F.grad(ad.jit(f))(P), jax.grad(g)(jp))
    out, pull = F.vjp(f, P)
    _close(pull(np.array(2.0))[0], 2.0 * jax.grad(g)(jp))
    # reverse over reverse: the carry history's own cotangent flows back
    _close(F.grad(lambda p: F.grad(f)(p)[0])(P), jax.hessian(g)(jp)[0], 1e-9)


@pytest.mark.parametrize("case", ALL, ids=ids)
def test_forward_transforms(case):
    f, g = _ad(case), _jx(case)
    jp = jnp.asarray(P)
    t = np.array([0.2, 1.0, -0.4])
    _, tan = F.jvp(f, (P,), (t,))
    _close(tan, jax.jvp(g, (jp,), (jnp.asarray(t),))[1])
    _close(F.jacfwd(f)(P), jax.jacfwd(g)(jp))
    _close(ad.jit(F.jacfwd(f))(P), jax.jacfwd(g)(jp))
    _, lin = F.linearize(f, P)
    _close(lin(t), jax.jvp(g, (jp,), (jnp.asarray(t),))[1])
    _close(F.jacfwd(F.jacfwd(f))(P), jax.jacfwd(jax.jacfwd(g))(jp), 1e-9)


@pytest.mark.parametrize("case", ALL, ids=ids)
def test_vmap(case):
    f, g = _ad(case), _jx(case)
    ps = np.stack([P, -P, P * 2.0, P[::-1]])
    want = jax.vmap(g)(jnp.asarray(ps))
    _close(F.vmap(f)(ps), want)
    _close(ad.jit(F.vmap(f))(ps), want)
    _close(F.vmap(f, in_dims=1)(ps.T), want)
    _close(F.jacfwd(F.vmap(f))(ps), jax.jacfwd(jax.vmap(g))(jnp.asarray(ps)))


@pytest.mark.parametrize("case", REV, ids=ids)
def test_grad_of_vmap_and_vmap_of_grad(case):
    f, g = _ad(case), _jrev(case)
    ps = np.stack([P, -P, P * 2.0])
    jps = jnp.asarray(ps)
    _close(F.grad(lambda q: ad.sum(F.vmap(f)(q)))(ps),
           jax.grad(lambda q: jnp.sum(jax.vmap(g)(q)))(jps))
    _close(F.vmap(F.grad(f))(ps), jax.vmap(jax.grad(g))(jps))
    _close(ad.jit(F.vmap(F.grad(f)))(ps), jax.vmap(jax.grad(g))(jps))


def test_batched_carry_unbatched_xs_and_batched_xs():
    def f(c0, xs):
        return F.scan(lambda c, x: (c * x + 1.0, c), c0, xs)

    def g(c0, xs):
        return lax.scan(lambda c, x: (c * x + 1.0, c), c0, xs)
    c0 = np.array([1.0, 2.0])
    xs = np.linspace(0.1, 0.9, 10).reshape(5, 2)
    for dims in [(0, None), (None, 1), (0, 1)]:
        a = c0 if dims[0] is None else np.stack([c0, c0 * 3])
        b = xs if dims[1] is None else np.stack([xs, xs * 0.5], axis=1)
        got = F.vmap(f, in_dims=dims)(a, b)
        want = jax.vmap(g, in_axes=dims)(jnp.asarray(a), jnp.asarray(b))
        _close(got[0], want[0])
        _close(got[1], want[1])


def test_vmap_batches_only_the_carries_a_batched_value_reaches():
    """A carry that no batched value reaches stays one value for every lane (JAX's fixed
    point): here the step size ``h`` and the ys made of it alone; ``s`` becomes batched at the
    first step (from ``x``), and ``u`` only at the second (from ``s``)."""
    def f(xp, L):
        def run(xs):
            def step(c, x):
                h, s, u = c
                return (h * 0.5 + 1.0, s + x * h, u * 0.9 + s), (h * 2.0, u)
            return L.scan(step, (xp.asarray(1.0), xp.asarray(0.0), xp.asarray(0.0)), xs)
        return run
    xs = np.linspace(-1.0, 1.0, 18).reshape(3, 6).T   # (6 steps, 3 lanes)
    got = F.vmap(f(ad, F), in_dims=1)(xs)
    want = jax.vmap(f(jnp, lax), in_axes=1)(jnp.asarray(xs))
    for a, b in zip(tree_leaves(got), tree_leaves(want)):
        _close(a, b)
    prog = ad.jit(F.vmap(f(ad, F), in_dims=1)).lower(xs)
    (scan,) = [e for e in prog.eqns if e.prim.name == "scan"]
    # (the carries h, s, u: h unbatched, s and u batched, their lanes leading)
    assert [tuple(v.shape) for v in scan.outs[:3]] == [(), (3,), (3,)]
    _close(F.vmap(F.grad(lambda x: ad.sum(f(ad, F)(x)[1][1])), in_dims=1)(xs),
           jax.vmap(jax.grad(lambda x: jnp.sum(f(jnp, lax)(x)[1][1])), in_axes=1)(
               jnp.asarray(xs)))


# -- cond / switch under vmap, jit -------------------------------------------------------------

def test_cond_batched_predicate_runs_both_and_selects():
    def f(x):
        return F.cond(x[0] > 0, lambda a: ad.sin(a) * 2.0, lambda a: a ** 2, x)

    def g(x):
        return lax.cond(x[0] > 0, lambda a: jnp.sin(a) * 2.0, lambda a: a ** 2, x)
    xs = np.array([[0.5, 1.0], [-0.5, 2.0], [1.5, -1.0]])
    _close(F.vmap(f)(xs), jax.vmap(g)(jnp.asarray(xs)))
    _close(F.vmap(F.grad(lambda x: ad.sum(f(x))))(xs),
           jax.vmap(jax.grad(lambda x: jnp.sum(g(x))))(jnp.asarray(xs)))
    _close(F.jacrev(F.vmap(f))(xs), jax.jacrev(jax.vmap(g))(jnp.asarray(xs)))
    # jit of hessian of cond: the traced predicate is fine under jit (one instruction)
    h = ad.jit(F.hessian(lambda x: ad.sum(f(x))))
    for x in xs:
        _close(h(x), jax.hessian(lambda x: jnp.sum(g(x)))(jnp.asarray(x)))


def test_switch_batched_index_clamps():
    brs = [lambda a: a + 1.0, lambda a: a * 10.0, lambda a: -a]
    idx = np.array([-3, 0, 1, 2, 9])
    x = np.arange(5.0)
    got = F.vmap(lambda i, a: F.switch(i, brs, a))(idx, x)
    want = jax.vmap(lambda i, a: lax.switch(i, brs, a))(jnp.asarray(idx), jnp.asarray(x))
    _close(got, want)


def test_jit_stages_one_instruction_per_loop():
    f = lambda p: scan_carry(ad, F, p, XS)  # noqa: E731
    prog = ad.jit(f).lower(P)
    assert prog.primitive_names().count("scan") == 1
    assert len(prog.eqns) < 20       # no unrolling
    prog = ad.jit(F.grad(f)).lower(P)
    assert prog.primitive_names().count("scan") == 2   # the forward and the reverse scan
    w = ad.jit(lambda p: while_case(ad, F, p, XS)).lower(P)
    assert "while_loop" in w.primitive_names()


def test_jit_while_refusal_points_to_while_loop():
    def f(x):
        while ad.sum(x) < 10.0:
            x = x * 2.0
        return x
    with pytest.raises(RuntimeError, match="while_loop"):
        ad.jit(f)(np.ones(2))
    g = ad.jit(lambda x: F.while_loop(lambda x: ad.sum(x) < 10.0, lambda x: x * 2.0, x))
    _close(g(np.ones(2)), [8.0, 8.0])
    _close(g(np.full(2, 3.0)), [6.0, 6.0])   # (the replay loops on the new value)


def test_checkpoint_of_a_whole_step_runs_as_the_step():
    # The scan's gradient keeps only the carries and recomputes each step: a checkpoint of the
    # whole step adds nothing, so it is not run (or recomputed) per step; one of part of the
    # step still is (it lowers the peak within one step of the backward pass).
    runs = {"whole": 0, "part": 0}

    def step(c, x, p):
        runs["whole"] += 1
        return ad.sin(c) * p + x * c, ad.cos(c) * x

    def block(c, p):
        runs["part"] += 1
        return ad.tanh(c * p)
    whole, part = F.checkpoint(step), F.checkpoint(block)
    xs = np.linspace(-1.0, 1.0, 120).reshape(40, 3)
    jxs = jnp.asarray(xs)

    def f_whole(p):
        c, ys = F.scan(lambda c, x: whole(c, x, p), p, xs)
        return ad.sum(c) + ad.sum(ys ** 2)

    def f_part(p):
        return ad.sum(F.scan(lambda c, x: (part(c + x, p) * 0.5 + c, None), p, xs)[0])

    def g_whole(p):
        c, ys = lax.scan(lambda c, x: (jnp.sin(c) * p + x * c, jnp.cos(c) * x), p, jxs)
        return jnp.sum(c) + jnp.sum(ys ** 2)

    def g_part(p):
        return jnp.sum(lax.scan(lambda c, x: (jnp.tanh((c + x) * p) * 0.5 + c, None), p,
                                jxs)[0])
    _close(F.grad(f_whole)(P), jax.grad(g_whole)(jnp.asarray(P)))
    assert runs["whole"] <= 4           # traced (twice), never run per step
    assert "checkpoint" not in " ".join(ad.jit(F.grad(f_whole)).lower(P).primitive_names())
    # checkpoint(step) given to scan itself (JAX's spelling), reading p from a closure: no
    # warning (the loop's closure is differentiated as usual), nothing run per step
    runs["whole"] = 0

    def f_given(p):
        c, ys = F.scan(F.checkpoint(lambda c, x: step(c, x, p)), p, xs)
        return ad.sum(c) + ad.sum(ys ** 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _close(F.grad(f_given)(P), jax.grad(g_whole)(jnp.asarray(P)))
        _close(F.grad(lambda p: ad.sum(F.fori_loop(0, 5, F.checkpoint(
            lambda i, c: ad.sin(c) * p), p)))(P),
            jax.grad(lambda p: jnp.sum(lax.fori_loop(0, 5, jax.checkpoint(
                lambda i, c: jnp.sin(c) * p), p)))(jnp.asarray(P)))
    assert runs["whole"] <= 2
    _close(F.grad(f_part)(P), jax.grad(g_part)(jnp.asarray(P)))
    assert runs["part"] >= len(xs)      # a checkpoint primitive, run at each step


@pytest.mark.parametrize("unroll", [2, 3, True])
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
def test_scan_unroll_same_steps_fewer_iterations(unroll, reverse):
    xs = np.linspace(-1.0, 1.0, 3 * 40).reshape(40, 3)   # 40 steps: 40 % 3 are left over

    def f(p, unroll=unroll):
        c, ys = F.scan(lambda c, x: (ad.sin(c) * p + x * c, ad.sum(c * x)), p, xs,
                       reverse=reverse, unroll=unroll)
        return ad.sum(c) + ad.sum(ys ** 2)

    def g(p):
        c, ys = lax.scan(lambda c, x: (jnp.sin(c) * p + x * c, jnp.sum(c * x)), p,
                         jnp.asarray(xs), reverse=reverse, unroll=unroll)
        return jnp.sum(c) + jnp.sum(ys ** 2)
    jp = jnp.asarray(P)
    _close(f(P), g(jp))
    _close(F.grad(f)(P), jax.grad(g)(jp))
    _close(F.jacfwd(f)(P), jax.jacfwd(g)(jp))
    _close(ad.jit(F.grad(f))(P), jax.grad(g)(jp))
    ps = np.stack([P, -P])
    _close(F.vmap(f)(ps), jax.vmap(g)(jnp.asarray(ps)))
    # the loop runs fewer iterations of a larger body (every step when unroll=True)
    prog = ad.jit(f).lower(P)
    lengths = sorted(e.params["length"] for e in prog.eqns if e.prim.name == "scan")
    k = 40 if unroll is True else unroll
    assert lengths == sorted([40 // k] + ([40 % k] if 40 % k else []))


def test_scan_unroll_must_be_positive():
    with pytest.raises(ValueError, match="unroll must be a positive int"):
        F.grad(lambda p: ad.sum(F.scan(lambda c, x: (c * x, None), p, XS, unroll=0)[0]))(P)


# -- while_loop --------------------------------------------------------------------------------

def test_vmap_while_loop_64_lanes_equals_separate_runs():
    rng = np.random.default_rng(1)
    x0 = rng.uniform(0.1, 3.0, size=64)
    limits = rng.uniform(5.0, 500.0, size=64)

    def run(x, lim):
        return F.while_loop(lambda c: c[0] < lim, lambda c: (c[0] * 1.7 + 0.1, c[1] + 1),
                            (x, ad.asarray(0)))
    got_x, got_n = F.vmap(run)(x0, limits)
    sep = [run(a, b) for a, b in zip(x0, limits)]
    np.testing.assert_array_equal(to_numpy(got_x), [to_numpy(s[0]) for s in sep])
    np.testing.assert_array_equal(to_numpy(got_n), [to_numpy(s[1]) for s in sep])
    assert len(set(to_numpy(got_n).tolist())) > 3       # the trip counts differ
    want = jax.vmap(lambda x, lim: lax.while_loop(
        lambda c: c[0] < lim, lambda c: (c[0] * 1.7 + 0.1, c[1] + 1), (x, 0)))(
        jnp.asarray(x0), jnp.asarray(limits))
    _close(got_x, want[0])
    _close(got_n, want[1])


def test_fori_loop_dynamic_bounds_and_static_ones_reverse_alike():
    # (the same loop as a while_loop, reversed from snapshots, and as a scan)
    def f(p, n):
        return ad.sum(F.fori_loop(0, n, lambda i, c: ad.sin(c) * p + c, p))
    _close(F.grad(lambda p: f(p, ad.asarray(5)))(P), F.grad(lambda p: f(p, 5))(P), 1e-13)
    _close(F.grad(lambda p: f(p, 5))(P), jax.grad(
        lambda p: jnp.sum(lax.fori_loop(0, 5, lambda i, c: jnp.sin(c) * p + c, p)))(
        jnp.asarray(P)))


# -- the eager tape ----------------------------------------------------------------------------

def test_eager_tape_one_node_per_scan(backend):
    if backend.name == "dask":
        pytest.skip("eager tape on Dask: see test_dask")
    p = backend.tensor(P, requires_grad=True)
    xs = backend(XS)
    c, ys = F.scan(lambda c, x: (ad.sin(c) * p + x, c * x), p, xs)
    assert c.grad_fn is not None and c.grad_fn is ys.grad_fn   # one node for the whole loop
    loss = ad.sum(c) + ad.sum(ys ** 2)
    loss.backward()
    _close(p.grad, jax.grad(_jx(scan_carry))(jnp.asarray(P)))


def test_eager_tape_create_graph_second_order():
    p = ad.Tensor(P).requires_grad_()
    loss = scan_carry(ad, F, p, XS)
    (g,) = ad.autograd.grad(loss, p, create_graph=True)
    (h0,) = ad.autograd.grad(g[0], p)
    _close(h0, jax.hessian(_jx(scan_carry))(jnp.asarray(P))[0], 1e-9)


def test_eager_tape_cond_and_fori():
    p = ad.Tensor(P).requires_grad_()
    fori_static(ad, F, p, XS).backward()
    _close(p.grad, jax.grad(_jx(fori_static))(jnp.asarray(P)))
    q = ad.Tensor(P).requires_grad_()
    cond_true(ad, F, q, XS).backward()
    _close(q.grad, jax.grad(_jx(cond_true))(jnp.asarray(P)))


# -- error messages ----------------------------------------------------------------------------

def test_carry_dtype_change_names_the_mismatch():
    with pytest.raises(TypeError, match=r"scan: .*carry leaf 0 is float64\[3\] on input but "
                                        r"float32\[3\]"):
        F.scan(lambda c, x: (ad.astype(c, ad.float32), x), np.ones(3), XS)
    with pytest.raises(TypeError, match=r"float64\[3\] on input but float64\[2\].*shapes"):
        F.grad(lambda p: ad.sum(F.scan(lambda c, x: (c[:2], x), p, XS)[0]))(P)


def test_carry_structure_change_is_refused():
    with pytest.raises(TypeError, match="same structure"):
        F.scan(lambda c, x: ((c, c), x), np.ones(3), XS)
    with pytest.raises(TypeError, match="while_loop.*same structure"):
        F.while_loop(lambda c: c[0] < 3, lambda c: c[0] + 1, (np.array(0),))


def test_cond_branch_mismatch_is_refused():
    with pytest.raises(TypeError, match="every branch must return the same"):
        F.jacfwd(lambda x: F.cond(x[0] > 0, lambda a: a, lambda a: a[:2], x))(P)


def test_xs_length_mismatch_and_missing_length():
    with pytest.raises(ValueError, match="disagree on the number of steps"):
        F.scan(lambda c, x: (c, x), 0.0, (np.ones(3), np.ones(4)))
    with pytest.raises(ValueError, match="length="):
        F.scan(lambda c, x: (c, x), 0.0, None)


def test_bool_of_traced_value_in_a_body_points_to_cond():
    def body(c, x):
        if c > 0:
            return c, x
        return -c, x
    with pytest.raises(RuntimeError, match="scan.*cond"):
        F.grad(lambda p: F.scan(body, p, XS[:, 0])[0])(np.array(1.0))


# -- plain-loop edges --------------------------------------------------------------------------

def test_length_zero_and_reverse_plain():
    c, ys = F.scan(lambda c, x: (c + x, c * x), np.zeros(3), np.zeros((0, 3)))
    assert to_numpy(ys).shape == (0, 3)
    jc, jys = lax.scan(lambda c, x: (c + x, c * x), jnp.zeros(3), jnp.zeros((0, 3)))
    _close(c, jc)
    c, ys = ad.jit(lambda a: F.scan(lambda c, x: (c + x, c * x), a, np.zeros((0, 3))))(
        np.ones(3))
    assert to_numpy(ys).shape == (0, 3)


def test_dask_scan_stays_lazy():
    da = pytest.importorskip("dask.array")
    xs = da.from_array(XS, chunks=(2, 3))
    c, ys = F.scan(lambda c, x: (c * 0.5 + x, c), da.zeros(3), xs)
    assert isinstance(ys, da.Array) and isinstance(c, da.Array)
    want = lax.scan(lambda c, x: (c * 0.5 + x, c), jnp.zeros(3), jnp.asarray(XS))
    _close(c.compute(), want[0])
    _close(ys.compute(), want[1])
    g = F.grad(lambda p: ad.sum(F.scan(lambda c, x: (c * p + x, c), p, xs)[0]))(
        da.from_array(P))
    _close(g.compute() if hasattr(g, "compute") else g,
           jax.grad(lambda p: jnp.sum(lax.scan(lambda c, x: (c * p + x, c), p,
                                               jnp.asarray(XS))[0]))(jnp.asarray(P)))


def test_top_level_cond_takes_torch_operands():
    # ad.cond is torch.cond, F.cond JAX's: they differ only on one tuple operand
    # (tests/test_jax_spellings.py)
    x = np.array([1.0, 2.0])
    _close(ad.cond(np.array(False), lambda a, b: a + b, lambda a, b: a * b, operands=(x, x)),
           x * x)
    _close(F.grad(lambda a: ad.sum(ad.cond(ad.sum(a) > 0, lambda a: a ** 3, lambda a: a,
                                           operands=(a,))))(x), 3 * x ** 2)
    with pytest.raises(TypeError, match="operands"):
        ad.cond(True, lambda a: a, lambda a: a, x, operands=(x,))


def test_long_eager_scan_replays_its_body(backend):
    # 32 steps or more run as the traced primitive even with no transform open
    if backend.name == "dask":
        pytest.skip("Dask: covered by test_dask_scan_stays_lazy")
    xs = np.linspace(-1.0, 1.0, 200).reshape(100, 2)
    calls = []

    def f(c, x):
        calls.append(1)
        return ad.sin(c) * 0.9 + x, c * x
    c, ys = F.scan(f, backend(np.ones(2)), backend(xs), reverse=True)
    assert len(calls) < 5          # traced, not called per step
    jc, jys = lax.scan(lambda c, x: (jnp.sin(c) * 0.9 + x, c * x), jnp.ones(2),
                       jnp.asarray(xs), reverse=True)
    _close(c, jc)
    _close(ys, jys)
    assert type(to_numpy(ys)) is np.ndarray
