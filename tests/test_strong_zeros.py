"""Structural zeros (NOTE [strong zeros] in the core): a cotangent (or tangent) that is zero by
construction - the branch a `where` does not take, what a slice leaves out, what `x[key] = v`
overwrites, a Jacobian's basis vectors - contributes zero even through an inf or nan local
derivative, where torch and JAX give nan. A zero that arithmetic made (exp(800) = inf, then
1/inf = 0) is a number: 0 * inf = nan, as torch gives.

Every case of the table is checked identically for the eager tape, grad, jit(grad), grad(jit),
vmap(grad), jacrev, jacfwd and jvp (along ones), on NumPy, array-api-strict and torch inputs
(and Dask). The expected values are closed forms, checked against central differences
where the function is smooth, and against torch.func where torch is right (the overflow cases).
"""

import warnings

import numpy as np
import pytest

import arrayad as ad
from arrayad._core import _core
from arrayad.func import grad, hessian, jacfwd, jacrev, jvp, vmap

import conftest
from conftest import to_numpy

EAGER = [b for b in ("numpy", "array_api_strict", "torch") if b in conftest.BACKENDS]
HAS_TORCH = "torch" in conftest.BACKENDS


@pytest.fixture(params=EAGER)
def eager(request):
    return conftest.Backend(request.param)


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # NumPy's 1/0, sqrt(-1), exp(800)
        yield


# -- the table ---------------------------------------------------------------------------------
# Each function is written once against a module ``m`` (arrayad, NumPy or torch): the same code
# is differentiated by arrayad, evaluated by NumPy for central differences, and by torch.func.

def where_sqrt(m, x):
    # sqrt(-1) is nan and sqrt'(0) inf in the branch where() does not take
    return m.sum(m.where(x > 0, m.sqrt(x), 0.0))


def slice_sqrt(m, x):
    # sqrt'(0) = inf, but x[0] does not reach the result
    return m.sum(m.sqrt(x)[1:] * 3.0)


def shared_branches(m, x):
    # one sqrt read twice: its cotangent is the sum of two, both zero by construction at x = 0
    s = m.sqrt(x)
    return m.sum(m.where(x > 0, s, 0.0)) + m.sum(s[1:])


def slice_of_difference(m, x):
    # the slice's zero at x[0] reaches sqrt through subtract's second argument, negated
    return m.sum((3.0 - m.sqrt(x))[1:])


def where_sqrt_moved(m, x):
    # where_sqrt seen through a reshape and a transpose: the structural zeros move with the
    # elements they belong to
    y = m.reshape(m.sqrt(x), (2, 2)).T
    return m.sum(m.where(m.reshape(x, (2, 2)).T > 0, y, 0.0))


def slice_sqrt_moved(m, x):
    # slice_sqrt through reshapes (the slice's zero and, under jacfwd, the basis' zeros move)
    return m.sum(m.reshape(m.sqrt(m.reshape(x, (2, 2))), (4,))[1:] * 3.0)


def masked_reciprocal(m, x):
    # 1/0 = inf (derivative -inf), overwritten
    y = 1 / x
    y[x == 0] = 0.0
    return m.sum(y)


def masked_log(m, x):
    # log(-1) = nan, then replaced: the result is log(x)^2 where x > 0 and 0 elsewhere
    y = m.log(x)
    y[x <= 0] = 0.0
    return m.sum(y * y)


def zero_count(m, v):
    # scikit-learn's incremental variance: a term 0/0 where the previous count is 0, overwritten
    # with the new variance by a masked update; the gradient is the plain variance's
    n = v.shape[0]
    last_count = m.zeros_like(v[0])
    s = m.sum(v, axis=0)
    new_var = m.sum((v - s / n) ** 2, axis=0)
    ratio = last_count / n
    total = new_var + ratio / n * (0.0 / ratio - s) ** 2
    total[last_count == 0] = new_var[last_count == 0]
    return m.sum(total)


def log_exp(m, x):
    # exp(800) = inf: log's cotangent 1/inf = 0 is a number, and 0 * exp'(800) = nan (torch too)
    return m.sum(m.log(m.exp(x)))


def log1p_exp(m, x):
    # the naive softplus: nan from x = 710 (torch too)
    return m.sum(m.log1p(m.exp(x)))


def logistic_tail(m, x):
    # 1/(1 + exp(x)) at overflow: -1/inf^2 = 0, times exp' = inf: nan (torch too)
    return m.sum(1 / (1 + m.exp(x)))


_X0 = np.array([[1.0, 2.0], [3.0, -1.0], [0.5, 4.0]])
CASES = {
    # name: (function, point, expected gradient, positions where the function is not smooth)
    "where_sqrt": (where_sqrt, [-1.0, 0.0, 0.25, 4.0], [0.0, 0.0, 1.0, 0.25], [1]),
    "slice_sqrt": (slice_sqrt, [0.0, 1.0, 4.0], [0.0, 1.5, 0.75], []),
    "shared_branches": (shared_branches, [0.0, 1.0, 4.0], [0.0, 1.0, 0.5], [0]),
    "slice_of_difference": (slice_of_difference, [0.0, 1.0, 4.0], [0.0, -0.5, -0.25], [0]),
    "where_sqrt_moved": (where_sqrt_moved, [-1.0, 0.0, 0.25, 4.0], [0.0, 0.0, 1.0, 0.25], [1]),
    "slice_sqrt_moved": (slice_sqrt_moved, [0.0, 1.0, 4.0, 9.0], [0.0, 1.5, 0.75, 0.5], []),
    "masked_reciprocal": (masked_reciprocal, [0.0, 2.0, -4.0], [0.0, -0.25, -0.0625], [0]),
    "masked_log": (masked_log, [-1.0, 2.0, 0.5],
                   [0.0, 2 * np.log(2.0) / 2.0, 2 * np.log(0.5) / 0.5], []),
    "zero_count": (zero_count, _X0, 2 * (_X0 - _X0.mean(axis=0)), []),
    "log_exp": (log_exp, [800.0, 1.0], [np.nan, 1.0], None),
    "log1p_exp": (log1p_exp, [710.0, 1.0], [np.nan, 1 / (1 + np.exp(-1.0))], None),
    "logistic_tail": (logistic_tail, [800.0, 1.0],
                      [np.nan, -np.exp(1.0) / (1 + np.exp(1.0)) ** 2], None),
}
OVERFLOW = ["log_exp", "log1p_exp", "logistic_tail"]


def _grad_by(transform, f, xn, conv):
    """d f / d x at the NumPy point ``xn``, given to arrayad as ``conv(xn)`` (a raw array of the
    backend under test), by one of arrayad's ways."""
    g = lambda v: f(ad, v)   # noqa: E731
    x = conv(xn)
    if transform == "backward":
        t = ad.Tensor(x)
        t.requires_grad_()
        g(t).backward()
        return t.grad
    if transform == "grad":
        return grad(g)(x)
    if transform == "jit(grad)":
        return ad.jit(grad(g))(x)
    if transform == "grad(jit)":
        return grad(ad.jit(g))(x)
    if transform == "vmap(grad)":
        both = to_numpy(vmap(grad(g))(conv(np.stack([xn, xn]))))
        np.testing.assert_array_equal(both[0], both[1])
        return both[0]
    if transform == "jacrev":
        return jacrev(g)(x)
    if transform == "jacfwd":
        return jacfwd(g)(x)
    if transform == "jvp":
        # along ones (a tangent the caller gives: its zeros would be numbers), the sum of the
        # gradient's entries
        return jvp(g, (x,), (conv(np.ones(xn.shape)),))[1]
    raise AssertionError(transform)


TRANSFORMS = ["backward", "grad", "jit(grad)", "grad(jit)", "vmap(grad)", "jacrev", "jacfwd",
              "jvp"]


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("case", list(CASES))
def test_table(case, transform, eager):
    f, x, expected, _ = CASES[case]
    if case == "zero_count" and transform in ("jit(grad)", "grad(jit)", "vmap(grad)"):
        pytest.skip("x[mask] has a shape that depends on the values: jit and vmap refuse it")
    got = to_numpy(_grad_by(transform, f, np.asarray(x, dtype=np.float64), eager))
    _check(got, expected, transform)


def _check(got, expected, transform):
    expected = np.asarray(expected)
    if transform == "jvp":
        expected = expected.sum()
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12, equal_nan=True,
                               err_msg=transform)


@pytest.mark.parametrize("case", [c for c in CASES if CASES[c][3] is not None])
def test_expected_values_are_central_differences(case):
    # the closed forms of the table against the NumPy function itself, where it is smooth
    f, x, expected, kinks = CASES[case]
    x = np.asarray(x, dtype=np.float64)
    eps = 1e-6
    fd = np.zeros(x.shape)
    for i in np.ndindex(x.shape):
        e = np.zeros(x.shape)
        e[i] = eps
        fd[i] = (f(np, x + e) - f(np, x - e)) / (2 * eps)
    smooth = np.ones(x.shape, dtype=bool)
    smooth.flat[kinks] = False
    np.testing.assert_allclose(fd[smooth], np.asarray(expected)[smooth], rtol=1e-6, atol=1e-8)


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
@pytest.mark.parametrize("case", OVERFLOW)
def test_overflow_cases_agree_with_torch(case):
    # the numbers made by overflow are numbers: arrayad's gradient is torch.func's, nan included
    import torch
    import torch.func
    f, x, _, _ = CASES[case]
    xt = torch.tensor(x, dtype=torch.float64)
    ref = torch.func.grad(lambda v: f(torch, v))(xt).numpy()
    for transform in TRANSFORMS:
        got = to_numpy(_grad_by(transform, f, np.asarray(x, dtype=np.float64), torch.asarray))
        _check(got, ref, transform)


@pytest.mark.skipif("dask" not in conftest.BACKENDS, reason="dask is not installed")
@pytest.mark.parametrize("transform", ["grad", "jit(grad)", "jacrev", "jacfwd", "jvp"])
@pytest.mark.parametrize("case", ["where_sqrt", "slice_sqrt", "shared_branches", "log_exp",
                                  "log1p_exp", "logistic_tail"])
def test_table_on_dask(case, transform):
    # values are not known when the rules run (looking would compute): a cotangent with
    # structural zeros always gets the select, the others never. (The masked-update cases are
    # left out: Dask's x[mask] = v fails on these shapes, whatever the derivative.)
    import dask.array as da
    f, x, expected, _ = CASES[case]
    got = _grad_by(transform, f, np.asarray(x, dtype=np.float64), da.from_array)
    _check(to_numpy(got), expected, transform)


def test_dask_overwrite_with_a_basic_key():
    import dask.array as da

    def f(v):
        y = 1 / v
        y[0] = 0.0
        return ad.sum(y)
    x = np.array([0.0, 2.0, -4.0])
    for g in (grad(f)(da.from_array(x)), jacfwd(f)(da.from_array(x))):
        np.testing.assert_allclose(to_numpy(g), [0.0, -0.25, -0.0625])


# -- around the table ----------------------------------------------------------------------------

def test_true_infinities_and_nans_stay(eager):
    # a nonzero cotangent through an inf or nan derivative is a real inf or nan (as torch)
    x = np.array([0.0, -1.0, 4.0])
    g = to_numpy(grad(lambda v: ad.sum(ad.sqrt(v)))(eager(x)))
    assert g[0] == np.inf and np.isnan(g[1]) and g[2] == 0.25
    g2 = to_numpy(grad(lambda v: ad.sum(ad.sqrt(v * v)))(eager(np.array([0.0, 2.0]))))
    assert np.isnan(g2[0]) and g2[1] == 1.0   # not differentiable at 0: nan, as torch and JAX


def test_zeros_given_by_the_caller_are_numbers(eager):
    # a tangent or cotangent the caller passes is data: 0 * inf = nan, as torch.func gives
    x = eager(np.array([0.0, 1.0, 4.0]))
    t = to_numpy(jvp(ad.sqrt, (x,), (eager(np.array([0.0, 1.0, 1.0])),))[1])
    assert np.isnan(t[0]) and t[1] == 0.5 and t[2] == 0.25
    _, pull = ad.func.vjp(ad.sqrt, x)
    c = to_numpy(pull(eager(np.array([0.0, 1.0, 1.0])))[0])
    assert np.isnan(c[0]) and c[1] == 0.5 and c[2] == 0.25


def test_jacobians_agree_and_their_bases_are_structural(eager):
    # jacfwd's and jacrev's basis vectors are one-hot by construction: the off-diagonal zeros
    # of sqrt's Jacobian at 0 are zeros, and the two agree (with grad for a scalar output)
    x = eager(np.array([0.0, 1.0, 4.0]))
    expected = np.diag([np.inf, 0.5, 0.25])
    for jac in (jacfwd, jacrev):
        np.testing.assert_array_equal(to_numpy(jac(ad.sqrt)(x)), expected)
    for jac in (jacfwd, jacrev, grad):
        np.testing.assert_array_equal(to_numpy(jac(lambda v: ad.sum(ad.sqrt(v)))(x)),
                                      [np.inf, 0.5, 0.25])
    # through a negation and a sum of two tangents, which keep the basis's zeros
    y = eager(np.array([0.0, -1.0]))
    for jac in (jacfwd, jacrev, grad):
        # (-0. = -v at 0: sqrt'(-0.) = -inf, times -1; torch gives the same)
        np.testing.assert_array_equal(to_numpy(jac(lambda v: ad.sum(ad.sqrt(-v)))(y)),
                                      [np.inf, -0.5])
        g = to_numpy(jac(lambda v: ad.sum(ad.sqrt(v + v)))(y))   # sqrt(-2): nan, as torch
        assert g[0] == np.inf and np.isnan(g[1])


def test_eager_backward_and_retain_graph(eager):
    x = eager.tensor([0.0, 1.0, 4.0], requires_grad=True)
    y = ad.sum(ad.sqrt(x)[1:])
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(to_numpy(x.grad), [0.0, 1.0, 0.5])
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()


def test_create_graph_keeps_the_structural_zeros(eager):
    x = eager.tensor([0.0, 1.0, 4.0], requires_grad=True)
    (g,) = ad.autograd.grad(ad.sum(ad.sqrt(x)[1:]), x, create_graph=True)
    np.testing.assert_allclose(to_numpy(g), [0.0, 0.5, 0.25])


def test_second_order(eager):
    x = eager(np.array([0.0, 1.0, 4.0]))
    h = hessian(lambda v: ad.sum(ad.sqrt(v)[1:] ** 3))(x)
    np.testing.assert_allclose(to_numpy(h), np.diag([0.0, 0.75, 0.375]))   # 3/4 x^(-1/2)
    h2 = jacfwd(jacrev(lambda v: ad.sum(ad.where(v > 0, v ** 1.5, 0.0))))(
        eager(np.array([-1.0, 1.0, 4.0])))
    np.testing.assert_allclose(to_numpy(h2), np.diag([0.0, 0.75, 0.375]))


def test_a_gradient_handed_out_is_data():
    # grad's result had structural zeros; changed in place and used as a tangent, its values
    # count (no mask left on it), and nothing stays registered
    x = np.array([0.0, 1.0, 4.0])
    before = _core.structural_zero_count()
    g = grad(lambda v: ad.sum(ad.sqrt(v)[1:]))(x)
    assert g[0] == 0.0
    g += 1.0
    t = jvp(ad.sqrt, (x,), (g,))[1]
    assert t[0] == np.inf
    del g, t
    assert _core.structural_zero_count() == before


def test_large_arrays_take_the_same_path():
    n = (1 << 14) + 10
    x = np.linspace(0.0, 1.0, n)   # x[0] = 0
    g = grad(lambda v: ad.sum(ad.sqrt(v)[1:]))(x)
    assert g[0] == 0 and np.allclose(g[1:], 0.5 / np.sqrt(x[1:]))
    g2 = grad(lambda v: ad.sum(ad.log(v)[1:]))(x)   # a quotient rule: 0 / 0 at x[0]
    assert g2[0] == 0 and np.allclose(g2[1:], 1 / x[1:])


def test_products_are_strong_only_for_structural_zeros_through_a_singular_factor():
    before = _core.strong_products()
    grad(lambda v: ad.sum(ad.sqrt(v)))(np.array([0.0, 4.0]))     # no structural zero
    grad(lambda v: ad.sum(ad.sqrt(v)[1:]))(np.array([1.0, 4.0]))  # no singular factor
    assert _core.strong_products() == before
    grad(lambda v: ad.sum(ad.sqrt(v)[1:]))(np.array([0.0, 4.0]))
    assert _core.strong_products() == before + 1
