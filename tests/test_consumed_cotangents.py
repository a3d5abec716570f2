"""Cotangents written in place (NOTE [consumed cotangents] in the core).

The backward pass may multiply into a large NumPy cotangent (128 KiB or more) that nothing but
the engine refers to. Each test here either checks that this happens (so that the others are not
vacuous) or tries a way for someone else to hold the same array: a user's cotangent, a retained
``.grad``, a cotangent handed to two parents, a pullback called twice. Results are compared with
analytic derivatives, or with the same gradient taken piece by piece on small arrays (which are
never written in place, and whose gradients the other test files check against differences).
"""
import numpy as np
import pytest

import arrayad as ad
from arrayad._core import _core
from arrayad.func import grad, vjp
from reference import chain, chain_np, fd_grad

X = np.random.default_rng(5).standard_normal(20_000)   # 160 kB: above the threshold


def consumed_by(fn):
    before = _core.consumed_cotangents()
    out = fn()
    return out, _core.consumed_cotangents() - before


@pytest.mark.parametrize("f, df", [
    (lambda v: ad.sum(ad.sin(v * 1.5)), lambda v: 1.5 * np.cos(1.5 * v)),
    (lambda v: ad.sum(ad.exp(v) * 2), lambda v: 2 * np.exp(v)),
    (lambda v: ad.sum(ad.log(v * v + 1) / 3), lambda v: 2 * v / (v * v + 1) / 3),
    (lambda v: ad.sum(ad.sin(v) * ad.cos(v)), lambda v: np.cos(2 * v)),
])
def test_the_backward_pass_writes_into_cotangents_nobody_else_holds(f, df):
    g, n = consumed_by(lambda: grad(f)(X))
    assert n >= 1
    np.testing.assert_allclose(g, df(X), rtol=1e-12, atol=1e-14)


def test_the_chain_against_small_pieces():
    g, n = consumed_by(lambda: grad(chain)(X))
    assert n >= 5
    small = grad(chain)
    pieces, m = consumed_by(lambda: np.concatenate([small(p) for p in np.split(X[:2000], 125)]))
    assert m == 0   # (16-element cotangents are never written in place)
    np.testing.assert_allclose(g[:2000], pieces, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(pieces[:16], fd_grad(chain_np, X[:16]), rtol=1e-6, atol=1e-8)


def test_a_users_cotangent_is_never_written():
    _, pullback = vjp(lambda v: ad.exp(ad.sin(v) * 2), X)
    ct = np.random.default_rng(8).uniform(0.5, 1.5, X.size)   # (an array that owns its data)
    assert ct.base is None and ct.flags.writeable
    kept = ct.copy()
    first = pullback(ct)[0]
    second = pullback(ct)[0]
    np.testing.assert_array_equal(ct, kept)
    np.testing.assert_array_equal(first, second)
    np.testing.assert_allclose(first, ct * np.exp(np.sin(X) * 2) * 2 * np.cos(X), rtol=1e-12)


def test_a_cotangent_shared_by_two_parents():
    # add hands the same (fresh, writeable: tanh's rule made it) cotangent to both of its
    # inputs: neither may write into it
    f = lambda v: ad.sum(ad.tanh(ad.sin(v * 2) + ad.exp(v * 3)))  # noqa: E731
    dt = 1 - np.tanh(np.sin(2 * X) + np.exp(3 * X)) ** 2
    np.testing.assert_allclose(grad(f)(X), dt * (2 * np.cos(2 * X) + 3 * np.exp(3 * X)),
                               rtol=1e-12)
    f = lambda v: ad.sum(ad.tanh(ad.sin(v + v)))  # noqa: E731
    dt = 1 - np.tanh(np.sin(2 * X)) ** 2
    np.testing.assert_allclose(grad(f)(X), dt * 2 * np.cos(2 * X), rtol=1e-12)


def test_retained_grads_keep_their_values():
    t = ad.tensor(X, requires_grad=True)
    y = ad.exp(t * 2)
    y.retain_grad()
    z = ad.sin(y) * 3
    z.retain_grad()
    ad.sum(ad.tanh(z)).backward()
    dz = 1 - np.tanh(3 * np.sin(np.exp(2 * X))) ** 2
    np.testing.assert_allclose(np.asarray(z.grad), dz, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(y.grad), dz * 3 * np.cos(np.exp(2 * X)), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(t.grad),
                               dz * 3 * np.cos(np.exp(2 * X)) * 2 * np.exp(2 * X), rtol=1e-12)


def test_no_write_across_dtypes_or_shapes():
    x32 = np.concatenate([X, X]).astype(np.float32)   # (as many bytes as X)
    g = grad(lambda v: ad.sum(ad.sin(v) * np.float64(2.0)))(x32)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, 2 * np.cos(x32), rtol=1e-6)
    m = np.random.default_rng(6).standard_normal((3, X.size))
    g = grad(lambda v: ad.sum(ad.sin(ad.exp(v) * X)))(m)   # (3, n) * (n,): broadcast
    np.testing.assert_allclose(g, np.cos(np.exp(m) * X) * X * np.exp(m), rtol=1e-12)
    w = np.random.default_rng(7).standard_normal(X.size)
    g = grad(lambda v: ad.sum(ad.sin(v) * w), argnums=0)(np.float64(0.3))   # 0-d input
    np.testing.assert_allclose(g, np.sum(w) * np.cos(0.3), rtol=1e-12)
