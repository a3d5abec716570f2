"""What a transform's tape keeps (NOTE [saved values] in the core) and the results it shares
between rules (NOTE [shared results]).

A node keeps only the values its VJP rules read, so a wrong declaration would hand a rule a
``Meta`` stand-in (an error) or, worse, keep nothing where a rule needs data. The opdb tests
differentiate with respect to every argument at once; here each argument of every binary
primitive is differentiated alone, with the other one a constant, which is when a node keeps the
least.
"""
import tracemalloc

import numpy as np
import pytest

import arrayad as ad
from arrayad._core import _core
from arrayad._core._core import Meta
from arrayad._ops import elementwise
from arrayad.func import grad, hessian
from conftest import to_numpy
from reference import chain, chain_np, fd_grad

PRUNED_BINARY = sorted(name for name, p in elementwise.PRIMS.items()
                       if p.vjp_reads is not None and len(p.vjp_reads) == 2)


def test_the_binary_rows_declare_what_they_read():
    # The list the next test runs over: every differentiable binary elementwise primitive.
    assert {"add", "subtract", "multiply", "divide", "pow", "atan2", "hypot",
            "logaddexp", "maximum", "minimum"} <= set(PRUNED_BINARY)


@pytest.mark.parametrize("name", PRUNED_BINARY)
@pytest.mark.parametrize("argnum", [0, 1])
def test_each_argument_alone_against_differences(backend, name, argnum):
    fn = getattr(ad, name)
    ref = getattr(np, {"pow": "power"}.get(name, name))
    rng = np.random.default_rng(7)
    # x1 in (0.5, 1.5), x2 in (2, 3): inside every function's domain, away from the kinks of
    # maximum/minimum/remainder; shapes that broadcast, so that unbroadcast reads the shapes.
    x1 = rng.uniform(0.5, 1.5, (3, 4))
    x2 = rng.uniform(2.0, 3.0, (4,))
    w = rng.standard_normal((3, 4))
    args = [x1, x2]

    def f(v):
        return ad.sum(fn(*_place(backend, args, argnum, v)) * backend(w))

    g = to_numpy(grad(f)(backend(args[argnum])))

    def f_np(v):
        a = list(args)
        a[argnum] = v
        return np.sum(ref(*a) * w)

    np.testing.assert_allclose(g, fd_grad(f_np, args[argnum]), rtol=1e-5, atol=1e-7)


def _place(backend, args, argnum, traced):
    """The arguments on ``backend`` with the differentiated one replaced by ``traced``."""
    return [traced if i == argnum else backend(a) for i, a in enumerate(args)]


def test_scalar_operands_and_chains_of_constants():
    x = np.linspace(0.5, 1.5, 5)
    for f, df in [(lambda v: ad.sum(ad.tanh(v) * 2), lambda v: 2 / np.cosh(v) ** 2),
                  (lambda v: ad.sum(3.0 / v), lambda v: -3.0 / v ** 2),
                  (lambda v: ad.sum(v ** 3.0), lambda v: 3 * v ** 2),
                  (lambda v: ad.sum(2.0 ** v), lambda v: np.log(2.0) * 2.0 ** v),
                  (lambda v: ad.sum(1 - ad.exp(-v) / 3), lambda v: np.exp(-v) / 3)]:
        np.testing.assert_allclose(grad(f)(x), df(x), rtol=1e-12)


def test_nodes_keep_what_their_rules_read():
    seen = {}

    def f(x):
        e = ad.exp(x)                 # exp's rule reads its output only
        t = e * 2                     # only e has an edge: multiply's rule for it reads the 2
        s = ad.sin(t) + x             # sin reads its input; add reads nothing
        seen.update(exp=e._node, mul=t._node, add=s._node, sin=s._node.edges[0][0])
        return ad.sum(s)

    x = np.linspace(0.0, 1.0, 4)
    g = grad(f)(x)
    np.testing.assert_allclose(g, np.cos(2 * np.exp(x)) * 2 * np.exp(x) + 1, rtol=1e-12)
    # (grad frees the saved values once the backward pass is done: look at what the
    # nodes held through a vjp instead, whose pullback keeps them)
    seen.clear()
    _, pullback = ad.func.vjp(f, x)
    exp, mul, add, sin = seen["exp"], seen["mul"], seen["add"], seen["sin"]
    assert isinstance(exp.inputs[0], Meta) and exp.ans is not None
    assert isinstance(mul.inputs[0], Meta) and mul.inputs[1] == 2 and mul.ans is None
    assert all(isinstance(v, Meta) for v in add.inputs) and add.ans is None
    assert not isinstance(sin.inputs[0], Meta) and sin.ans is None
    assert exp.inputs[0].shape == (4,) and exp.inputs[0].dtype == ad.float64
    np.testing.assert_allclose(pullback(np.ones(()))[0], g, rtol=1e-12)


def test_linearize_and_eager_nodes_keep_everything():
    x = np.linspace(0.0, 1.0, 4)
    _, jvp_fn = ad.func.linearize(lambda v: ad.exp(v) * 2, x)
    np.testing.assert_allclose(jvp_fn(np.ones(4)), 2 * np.exp(x), rtol=1e-12)
    t = ad.tensor(x, requires_grad=True)
    y = ad.exp(t) * 2
    assert not isinstance(y.grad_fn.inputs[0], Meta)


def test_peak_memory_of_grad_is_what_the_backward_pass_needs():
    # The chain's backward pass reads seven input-sized arrays (sin x, cos x, -x, exp(-x*x),
    # tanh(s), y, 1 + y*y); the forward expression has a few more alive at a time. Keeping
    # every input of every node would hold all fifteen intermediates (about 17 arrays at peak).
    n = 200_000
    x = np.random.default_rng(0).standard_normal(n)
    g = grad(chain)
    g(x)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        g(x)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= 11 * x.nbytes, f"peak {peak / x.nbytes:.1f} input-sized arrays"


# ---------------------------------------------------------------------------------------------
# Shared results

@pytest.fixture
def forward_results(monkeypatch):
    """Records what ``forward_result`` hands the sin/cos/sinh/cosh rules."""
    handed = []
    real = elementwise.forward_result

    def spy(prim, x):
        out = real(prim, x)
        handed.append((prim.name, out))
        return out

    monkeypatch.setattr(elementwise, "forward_result", spy)
    return handed


@pytest.mark.parametrize("pair", [("sin", "cos"), ("sinh", "cosh")])
def test_the_backward_pass_reuses_the_partner_result(forward_results, pair):
    a_name, b_name = pair
    fa, fb = getattr(ad, a_name), getattr(ad, b_name)
    traced = {}

    def f(x):
        a, b = fa(x), fb(x)
        traced[a_name], traced[b_name] = a.value, b.value
        return ad.sum(a * b)

    x = np.linspace(-1.0, 1.0, 100)   # (smaller NumPy arrays recompute: see the next test)
    g = grad(f)(x)
    np.testing.assert_allclose(g, fd_grad(lambda v: np.sum(getattr(np, a_name)(v)
                                                            * getattr(np, b_name)(v)), x),
                               rtol=1e-7)
    assert sorted(name for name, _ in forward_results) == sorted(pair)
    for name, out in forward_results:   # the very arrays the forward pass computed
        assert out is traced[name]


def test_a_small_numpy_result_is_recomputed(forward_results):
    x = np.linspace(-1.0, 1.0, 5)   # (a pass over 5 values costs less than sharing it)
    traced = {}

    def f(v):
        a, b = ad.sin(v), ad.cos(v)
        traced["sin"], traced["cos"] = a.value, b.value
        return ad.sum(a * b)

    before = _core.shared_result_count()
    ad.sin(ad.tensor(x, requires_grad=True))   # (nothing registered)
    assert _core.shared_result_count() == before
    np.testing.assert_allclose(grad(f)(x), np.cos(2 * x), rtol=1e-12)
    assert sorted(name for name, _ in forward_results) == ["cos", "sin"]
    for name, out in forward_results:   # computed again, equal to the forward's
        assert out is not traced[name]
        np.testing.assert_array_equal(out, traced[name])


def test_a_result_nobody_keeps_is_recomputed(forward_results):
    x = np.linspace(-1.0, 1.0, 100)
    np.testing.assert_allclose(grad(lambda v: ad.sum(ad.sin(v)))(x), np.cos(x), rtol=1e-12)
    # cos(x) computed but thrown away (its node is not on the path to the output)
    np.testing.assert_allclose(grad(lambda v: ad.sum(ad.sin(v)) + 0 * ad.sum(ad.cos(v) > 2))(x),
                               np.cos(x), rtol=1e-12)
    assert [name for name, _ in forward_results] == ["cos", "cos"]


def test_shared_results_under_nesting_and_eager():
    x = np.linspace(-1.0, 1.0, 5)
    f = lambda v: ad.sum(ad.sin(v) * ad.cos(v))  # noqa: E731
    # d/dx sin x cos x = cos 2x; d2 = -2 sin 2x: the inner rule's reused value is a tracer of
    # the outer transform, and must stay differentiable.
    np.testing.assert_allclose(hessian(f)(x), np.diag(-2 * np.sin(2 * x)), rtol=1e-10,
                               atol=1e-12)
    t = ad.tensor(x, requires_grad=True)
    f(t).backward(create_graph=True)
    np.testing.assert_allclose(to_numpy(t.grad), np.cos(2 * x), rtol=1e-12)
    (gx,) = ad.autograd.grad(ad.sum(t.grad), t)
    np.testing.assert_allclose(to_numpy(gx), -2 * np.sin(2 * x), rtol=1e-10, atol=1e-12)


def test_the_registry_stays_bounded():
    x = np.linspace(-1.0, 1.0, 100)
    g = grad(lambda v: ad.sum(ad.sin(v) * ad.cos(v)))
    before = _core.shared_result_count()
    for _ in range(5000):
        g(x)
    # (a backward pass removes the entries of the nodes it releases)
    assert _core.shared_result_count() <= before
    # forward passes that are never differentiated leave dead entries, swept as they grow
    for _ in range(5000):
        ad.sum(ad.sin(ad.tensor(x, requires_grad=True)))
    assert _core.shared_result_count() <= 64


def test_chain_gradient_with_everything_on():
    x = np.random.default_rng(3).standard_normal(16)
    np.testing.assert_allclose(grad(chain)(x), fd_grad(chain_np, x), rtol=1e-6, atol=1e-8)
