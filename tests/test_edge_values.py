"""Derivatives at edge values give what torch gives (no nan where the true derivative exists)."""

import warnings

import numpy as np
import pytest

import arrayad as ad
from arrayad.func import grad, jvp

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("exponent", [0, 0.0, "array"])
def test_power_zero_at_zero(exponent):
    x = np.array([0.0, 2.0])
    e = np.zeros(2) if exponent == "array" else exponent
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        g = grad(lambda v: ad.sum(ad.pow(v, e) if exponent == "array" else v ** e))(x)
        t = jvp(lambda v: v ** e, (x,), (np.ones(2),))[1]
    xt = torch.tensor(x, requires_grad=True)
    (xt ** (torch.tensor(e) if exponent == "array" else e)).sum().backward()
    np.testing.assert_array_equal(g, xt.grad.numpy())
    np.testing.assert_array_equal(t, xt.grad.numpy())


def _torch_grad(f, x):
    xt = torch.tensor(x, requires_grad=True)
    f(xt).backward()
    return xt.grad.numpy()


@pytest.mark.parametrize("divisor", [0, 0.0, -0.0])
def test_division_by_a_python_zero_gives_infinite_gradients(divisor):
    x = np.array([1.0, -2.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        g = grad(lambda v: ad.sum(v / divisor))(x)
        t = ad.tensor(x, requires_grad=True)
        ad.sum(t / divisor).backward()
        expected = _torch_grad(lambda v: (v / divisor).sum(), x)
    np.testing.assert_array_equal(g, expected)
    np.testing.assert_array_equal(t.grad.numpy(), expected)


@pytest.mark.parametrize("reduce", ["mean", "var", "sum"])
def test_reductions_of_empty_arrays(reduce):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        g = grad(lambda v: getattr(ad, reduce)(v))(np.zeros(0))
    assert g.shape == (0,) and g.dtype == np.float64


def test_remainder_by_zero_has_derivative_one_in_x():
    x = np.array([1.0, 2.5])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        g = grad(lambda v: ad.sum(v % 0.0))(x)
    np.testing.assert_array_equal(g, _torch_grad(lambda v: (v % 0.0).sum(), x))


SINGULAR = {
    "rank1_2x2": np.array([[1.0, 2.0], [2.0, 4.0]]),
    "rank2_3x3": np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]]),
    "rank1_3x3": np.outer([1.0, -2.0, 0.5], [3.0, 1.0, 2.0]),
    "zero_2x2": np.zeros((2, 2)),
    "batch_with_regular": np.stack([np.array([[1.0, 2.0], [2.0, 4.0]]),
                                    np.array([[2.0, 1.0], [0.5, 3.0]])]),
    "complex_rank1": np.outer([1.0 + 1j, 2.0], [1.0, 1j - 0.5]),
}


def _cofactors(a):
    """The cofactor matrix (d det / d a) of each matrix from minors, independently of arrayad.
    (torch's eager backward returns zeros at a singular matrix, and torch.func's jvp too, where
    the derivative is the adjugate; JAX agrees with the cofactors.)"""
    if a.ndim == 3:
        return np.stack([_cofactors(m) for m in a])
    n = a.shape[0]
    c = np.zeros_like(a)
    for i in range(n):
        for j in range(n):
            minor = np.delete(np.delete(a, i, axis=0), j, axis=1)
            c[i, j] = (-1) ** (i + j) * (np.linalg.det(minor) if minor.size else 1.0)
    return c


@pytest.mark.parametrize("name", sorted(SINGULAR))
def test_det_at_a_singular_matrix_gives_the_adjugate(name):
    a = SINGULAR[name]
    cof = _cofactors(a)
    real = (lambda d: ad.real(d)) if np.iscomplexobj(a) else (lambda d: d)
    g = grad(lambda m: ad.sum(real(ad.linalg.det(m))))(a)
    np.testing.assert_allclose(g, np.conj(cof), atol=1e-12)   # (g * conj(d det))
    tangent = np.ones_like(a) * 0.3 + np.arange(a.size).reshape(a.shape) * 0.1
    _, t = jvp(ad.linalg.det, (a,), (tangent,))
    np.testing.assert_allclose(t, np.sum(cof * tangent, axis=(-2, -1)), atol=1e-12)


def test_det_adjugate_under_vmap_and_on_strict():
    strict = pytest.importorskip("array_api_strict")
    from arrayad.func import vmap
    batch = SINGULAR["batch_with_regular"]
    np.testing.assert_allclose(vmap(grad(ad.linalg.det))(batch), _cofactors(batch), atol=1e-12)
    a = SINGULAR["rank2_3x3"]
    g = grad(ad.linalg.det)(strict.asarray(a))
    np.testing.assert_allclose(np.asarray(g), _cofactors(a), atol=1e-12)
