"""A zero cotangent (or tangent) contributes zero, even through an inf or nan local derivative
(NOTE [strong zeros] in the core): the derivative is right where torch and JAX give nan.

Expected values are closed forms or central finite differences at points where the function is
smooth; NumPy, array-api-strict and torch inputs (Dask skips the check: it would compute).
"""

import warnings

import numpy as np
import pytest

import arrayad as ad
from arrayad._core import _core
from arrayad.func import grad, hessian, jacfwd, jvp, vmap

from conftest import to_numpy

EAGER = [b for b in ("numpy", "array_api_strict", "torch") if b in __import__("conftest").BACKENDS]


@pytest.fixture(params=EAGER)
def eager(request):
    from conftest import Backend
    return Backend(request.param)


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # NumPy's 1/0 in sqrt's derivative
        yield


def _fd(f, x, eps=1e-6):
    """Central differences of a NumPy function (smooth at x)."""
    out = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e[i] = eps
        out[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return out


def _where_sqrt(xp):
    return lambda x: xp.sum(xp.where(x > 0, xp.sqrt(x), 0.0))


def test_where_with_a_nan_branch(eager):
    # sqrt(-1) is nan in the branch where() does not take: the function is 0 near x = -1
    x = np.array([-1.0, 0.25, 4.0, -3.0])
    g = grad(_where_sqrt(ad))(eager(x))
    np.testing.assert_allclose(to_numpy(g), _fd(_where_sqrt(np), x), rtol=1e-6)
    assert not np.isnan(to_numpy(g)).any()


def test_slicing_away_an_infinite_derivative(eager):
    # d sqrt(x) / dx is inf at 0, but x[0] does not reach the result
    x = np.array([0.0, 1.0, 4.0])
    g = grad(lambda v: ad.sum(ad.sqrt(v)[1:]))(eager(x))
    np.testing.assert_allclose(to_numpy(g), [0.0, 0.5, 0.25])


def test_a_nan_overwritten_by_a_masked_update(eager):
    # log(-1) = nan, then replaced: the result is log(x) where x > 0 and 0 elsewhere
    def f(v):
        y = ad.log(v)
        y[v <= 0] = 0.0
        return ad.sum(y * y)
    x = np.array([-1.0, 2.0, 0.5])
    g = grad(f)(eager(x))
    np.testing.assert_allclose(to_numpy(g), [0.0, 2 * np.log(2.0) / 2.0, 2 * np.log(0.5) / 0.5])


def test_scikit_learns_zero_count_pattern(eager):
    # sklearn's incremental variance: a term 0/0 where the previous count is 0, overwritten
    # with the new variance by a masked update; the gradient is the plain variance's
    def f(v):
        n = v.shape[0]
        last_count = ad.zeros(v.shape[1:], dtype=v.dtype)
        s = ad.sum(v, axis=0)
        new_var = ad.sum((v - s / n) ** 2, axis=0)
        ratio = last_count / n
        total = new_var + ratio / n * (0.0 / ratio - s) ** 2
        total[last_count == 0] = new_var[last_count == 0]
        return ad.sum(total)
    x = np.array([[1.0, 2.0], [3.0, -1.0], [0.5, 4.0]])
    g = grad(f)(eager(x))
    expected = 2 * (x - x.mean(axis=0))   # d/dx of sum((x - mean)^2) per column
    np.testing.assert_allclose(to_numpy(g), expected, rtol=1e-12)


def test_true_infinities_and_nans_stay(eager):
    # a nonzero cotangent through an inf or nan derivative is a real inf or nan (as torch)
    x = np.array([0.0, -1.0, 4.0])
    g = to_numpy(grad(lambda v: ad.sum(ad.sqrt(v)))(eager(x)))
    assert g[0] == np.inf and np.isnan(g[1]) and g[2] == 0.25
    g2 = to_numpy(grad(lambda v: ad.sum(ad.sqrt(v * v)))(eager(np.array([0.0, 2.0]))))
    assert np.isnan(g2[0]) and g2[1] == 1.0   # not differentiable at 0: nan, as torch and JAX


def test_eager_backward_and_retain_graph(eager):
    x = eager.tensor([0.0, 1.0, 4.0], requires_grad=True)
    y = ad.sum(ad.sqrt(x)[1:])
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(to_numpy(x.grad), [0.0, 1.0, 0.5])
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()


def test_under_vmap_and_at_second_order(eager):
    x = np.array([[0.0, 1.0, 4.0], [4.0, 0.0, 1.0]])
    g = vmap(grad(lambda v: ad.sum(ad.sqrt(v)[1:])))(eager(x))
    np.testing.assert_allclose(to_numpy(g), [[0.0, 0.5, 0.25], [0.0, np.inf, 0.5]])
    h = hessian(lambda v: ad.sum(ad.sqrt(v)[1:] ** 3))(eager(np.array([0.0, 1.0, 4.0])))
    np.testing.assert_allclose(to_numpy(h), np.diag([0.0, 0.75, 0.375]))   # 3/4 x^(-1/2)


def test_forward_mode_with_zero_tangents(eager):
    # jacfwd pushes basis vectors: zeros everywhere but one entry, through sqrt's inf at 0
    x = np.array([0.0, 1.0, 4.0])
    j = to_numpy(jacfwd(lambda v: ad.sum(ad.sqrt(v)))(eager(x)))
    np.testing.assert_allclose(j, [np.inf, 0.5, 0.25])
    t = to_numpy(jvp(lambda v: ad.sqrt(v), (eager(x),), (eager(np.array([0.0, 1.0, 1.0])),))[1])
    np.testing.assert_allclose(t, [0.0, 0.5, 0.25])


def test_large_arrays_take_the_reduction_path():
    # above the C loop's size the look is a reduction (Backend.all_finite): the same result
    n = (1 << 14) + 10
    x = np.linspace(0.0, 1.0, n)   # x[0] = 0
    g = grad(lambda v: ad.sum(ad.sqrt(v)[1:]))(x)
    assert g[0] == 0 and np.allclose(g[1:], 0.5 / np.sqrt(x[1:]))
    g2 = grad(lambda v: ad.sum(ad.log(v)[1:]))(x)   # a quotient rule: 0 / 0 at x[0]
    assert g2[0] == 0 and np.allclose(g2[1:], 1 / x[1:])


def test_products_are_strong_only_where_a_factor_is_singular():
    before = _core.strong_products()
    grad(lambda v: ad.sum(ad.sqrt(v)))(np.array([1.0, 4.0]))
    assert _core.strong_products() == before
    grad(lambda v: ad.sum(ad.sqrt(v)[1:]))(np.array([0.0, 4.0]))
    assert _core.strong_products() == before + 1
