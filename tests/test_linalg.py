"""The ``linalg`` extension: forward values against NumPy, VJP and JVP against central finite
differences, vmap against a Python loop, and gradients against torch.func on torch tensors.

Each case is a function of real float64 arrays whose outputs are real and invariant to the gauge
of the decompositions (eigenvector signs/phases), so that finite differences are meaningful.
"""
import importlib.util

import numpy as np
import pytest

import arrayad as ad
from arrayad.func import grad, hessian, jvp, vmap

from conftest import to_numpy
from reference import check_vjp_jvp_by_differences, flat_outputs, numeric

HAS_TORCH = importlib.util.find_spec("torch") is not None
L = ad.linalg


def _rand(rng, *shape):
    return rng.standard_normal(shape)


def _spd(rng, n, batch=()):
    a = rng.standard_normal(batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def _np_sym(x):
    return x + np.swapaxes(x, -1, -2)


def _sym(x):
    return x + ad.matrix_transpose(x)


def _distinct_sym(rng, n):
    """A matrix whose symmetric part has well-separated eigenvalues."""
    q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    spread = q @ np.diag(np.arange(1.0, n + 1) * 1.5) @ q.T
    return 0.5 * spread + 0.01 * rng.standard_normal((n, n))


# name -> (function of arrayad arrays returning a real array or tuple, inputs maker, numpy ref)
CASES = {
    "det": (lambda x: L.det(x), lambda r: [_rand(r, 3, 3)], np.linalg.det),
    "det_batched": (lambda x: L.det(x), lambda r: [_rand(r, 2, 3, 3)], np.linalg.det),
    "slogdet": (lambda x: L.slogdet(x).logabsdet, lambda r: [_rand(r, 2, 3, 3)],
                lambda x: np.linalg.slogdet(x)[1]),
    "inv": (lambda x: L.inv(x), lambda r: [_rand(r, 3, 3) + 3 * np.eye(3)], np.linalg.inv),
    "solve": (lambda a, b: L.solve(a, b),
              lambda r: [_rand(r, 3, 3) + 3 * np.eye(3), _rand(r, 3, 2)],
              np.linalg.solve),
    "solve_vector": (lambda a, b: L.solve(a, b), lambda r: [_rand(r, 2, 3, 3) + 3 * np.eye(3),
                                                            _rand(r, 3)],
                     lambda a, b: np.linalg.solve(a, b[:, None])[..., 0]),
    "solve_broadcast": (lambda a, b: L.solve(a, b),
                        lambda r: [_rand(r, 3, 3) + 3 * np.eye(3), _rand(r, 2, 3, 2)],
                        np.linalg.solve),
    "cholesky": (lambda x: L.cholesky(_sym(x) + 12.0 * _eye_like(x)), lambda r: [_rand(r, 2, 3, 3)],
                 lambda x: np.linalg.cholesky(_np_sym(x) + 12.0 * np.eye(3))),
    "cholesky_upper": (lambda x: L.cholesky(_sym(x) + 12.0 * _eye_like(x), upper=True),
                       lambda r: [_rand(r, 3, 3)],
                       lambda x: np.linalg.cholesky(_np_sym(x) + 12.0 * np.eye(3)).T),
    "eigh": (lambda x: _eigh_out(_sym(x)), lambda r: [_distinct_sym(r, 3)],
             lambda x: np.linalg.eigvalsh(_np_sym(x))),
    "eigvalsh": (lambda x: L.eigvalsh(_sym(x)), lambda r: [_rand(r, 2, 3, 3)],
                 lambda x: np.linalg.eigvalsh(_np_sym(x))),
    "qr_tall": (lambda x: tuple(L.qr(x)), lambda r: [_rand(r, 4, 3)], None),
    "qr_square": (lambda x: tuple(L.qr(x)), lambda r: [_rand(r, 2, 3, 3)], None),
    "qr_wide": (lambda x: tuple(L.qr(x)), lambda r: [_rand(r, 3, 5)], None),
    "svd_tall": (lambda x: _svd_out(x), lambda r: [_rand(r, 4, 3)],
                 lambda x: np.linalg.svd(x, compute_uv=False)),
    "svd_wide": (lambda x: _svd_out(x), lambda r: [_rand(r, 2, 3, 4)], None),
    "svd_square_full": (lambda x: _svd_out(x, True), lambda r: [_rand(r, 3, 3)], None),
    "svdvals": (lambda x: L.svdvals(x), lambda r: [_rand(r, 3, 4)],
                lambda x: np.linalg.svd(x, compute_uv=False)),
    "eig": (lambda x: _eig_out(x), lambda r: [_rand(r, 4, 4)],
            lambda x: np.real(np.linalg.eigvals(x))),
    "eigvals": (lambda x: _eigvals_out(x), lambda r: [_rand(r, 3, 3)], None),
    "pinv": (lambda x: L.pinv(x), lambda r: [_rand(r, 4, 3)], np.linalg.pinv),
    "matrix_power_3": (lambda x: L.matrix_power(x, 3), lambda r: [_rand(r, 3, 3)],
                       lambda x: np.linalg.matrix_power(x, 3)),
    "matrix_power_-2": (lambda x: L.matrix_power(x, -2), lambda r: [_rand(r, 3, 3) + 3 * np.eye(3)],
                        lambda x: np.linalg.matrix_power(x, -2)),
    "matrix_power_0": (lambda x: L.matrix_power(x, 0) * x, lambda r: [_rand(r, 3, 3)],
                       lambda x: np.eye(3) * x),
    "trace": (lambda x: L.trace(x, offset=1), lambda r: [_rand(r, 2, 3, 4)],
              lambda x: np.trace(x, offset=1, axis1=-2, axis2=-1)),
    "diagonal": (lambda x: L.diagonal(x, offset=-1), lambda r: [_rand(r, 4, 3)],
                 lambda x: np.diagonal(x, offset=-1)),
    "outer": (lambda a, b: L.outer(a, b), lambda r: [_rand(r, 3), _rand(r, 4)], np.outer),
    "cross": (lambda a, b: L.cross(a, b), lambda r: [_rand(r, 2, 3), _rand(r, 3)], np.cross),
    "cross_axis0": (lambda a, b: L.cross(a, b, axis=0), lambda r: [_rand(r, 3, 2), _rand(r, 3, 2)],
                    lambda a, b: np.cross(a, b, axis=0)),
    "matrix_norm_fro": (lambda x: L.matrix_norm(x), lambda r: [_rand(r, 2, 3, 4)],
                        lambda x: np.linalg.norm(x, axis=(-2, -1))),
    "matrix_norm_nuc": (lambda x: L.matrix_norm(x, ord="nuc"), lambda r: [_rand(r, 3, 4)],
                        lambda x: np.linalg.norm(x, "nuc")),
    "matrix_norm_2": (lambda x: L.matrix_norm(x, ord=2, keepdims=True), lambda r: [_rand(r, 3, 4)],
                      lambda x: np.linalg.norm(x, 2, keepdims=True)),
    "matrix_norm_-2": (lambda x: L.matrix_norm(x, ord=-2), lambda r: [_rand(r, 3, 4)],
                       lambda x: np.linalg.norm(x, -2)),
    "matrix_norm_1": (lambda x: L.matrix_norm(x, ord=1), lambda r: [_rand(r, 3, 4)],
                      lambda x: np.linalg.norm(x, 1)),
    "matrix_norm_inf": (lambda x: L.matrix_norm(x, ord=float("inf")), lambda r: [_rand(r, 3, 4)],
                        lambda x: np.linalg.norm(x, np.inf)),
    "vector_norm": (lambda x: L.vector_norm(x, axis=-1), lambda r: [_rand(r, 3, 4)],
                    lambda x: np.linalg.norm(x, axis=-1)),
    "vector_norm_all": (lambda x: L.vector_norm(x), lambda r: [_rand(r, 3, 4)],
                        lambda x: np.linalg.norm(x.ravel())),
    "vector_norm_1": (lambda x: L.vector_norm(x, axis=(0, 1), ord=1, keepdims=True),
                      lambda r: [_rand(r, 3, 4)], lambda x: np.abs(x).sum(keepdims=True)),
    "vector_norm_3": (lambda x: L.vector_norm(x, axis=0, ord=3), lambda r: [_rand(r, 3, 4)],
                      lambda x: np.linalg.norm(x, 3, axis=0)),
    "vector_norm_inf": (lambda x: L.vector_norm(x, axis=1, ord=float("inf")),
                        lambda r: [_rand(r, 3, 4)], lambda x: np.abs(x).max(axis=1)),
    "matmul": (lambda a, b: L.matmul(a, b), lambda r: [_rand(r, 2, 3), _rand(r, 3, 4)], np.matmul),
    "tensordot": (lambda a, b: L.tensordot(a, b, axes=1),
                  lambda r: [_rand(r, 2, 3), _rand(r, 3, 4)],
                  lambda a, b: np.tensordot(a, b, axes=1)),
    "vecdot": (lambda a, b: L.vecdot(a, b), lambda r: [_rand(r, 2, 3), _rand(r, 3)],
               lambda a, b: (a * b).sum(-1)),
}


def _eye_like(x):
    from arrayad._ops._rules import eye_like
    return eye_like(x, x.shape[-1])


def _eigh_out(s):
    w, v = L.eigh(s)
    return w, v * v, v @ (ad.expand_dims(w ** 3, axis=-1) * ad.matrix_transpose(v))


def _svd_out(x, full=False):
    u, s, vh = L.svd(x, full_matrices=full)
    return s, u * u, vh * vh, (u * ad.expand_dims(s ** 2, axis=-2)) @ vh


def _eig_out(x):
    w, v = L.eig(x)
    a = ad.abs(v)
    return ad.real(w), ad.imag(w), a * a


def _eigvals_out(x):
    w = L.eigvals(x)
    return ad.real(w * w), ad.imag(w)


FD_EPS = 1e-6


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward(backend, name):
    fn, make, ref = CASES[name]
    if ref is None:
        pytest.skip("checked through its derivatives")
    args = make(np.random.default_rng(1))
    got = numeric(fn, backend, args)
    np.testing.assert_allclose(got[0], ref(*args), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("name", sorted(CASES))
def test_vjp_and_jvp_against_finite_differences(backend, name):
    fn, make, _ = CASES[name]
    rng = np.random.default_rng(2)
    check_vjp_jvp_by_differences(fn, backend, make(rng), rng, eps=FD_EPS, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(CASES))
def test_vmap_against_loop(backend, name):
    fn, make, _ = CASES[name]
    rng = np.random.default_rng(3)
    per = [make(rng) for _ in range(3)]
    # batch every argument along a non-leading axis for the first, leading for the rest
    stacked = [np.stack([p[i] for p in per], axis=0) for i in range(len(per[0]))]
    in_dims = tuple(0 for _ in stacked)
    got = flat_outputs(vmap(fn, in_dims=in_dims)(*[backend(s) for s in stacked]))
    want = [np.stack(o) for o in zip(*[numeric(fn, backend, p) for p in per])]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-8, atol=1e-10)
    # an unbatched second argument, and a batch axis that is not in front
    if len(stacked) == 2:
        got = flat_outputs(vmap(fn, in_dims=(0, None))(backend(stacked[0]), backend(per[0][1])))
        want = [np.stack(o) for o in zip(*[numeric(fn, backend, [p[0], per[0][1]]) for p in per])]
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-8, atol=1e-10)
    else:
        moved = np.moveaxis(stacked[0], 0, -1)
        got = flat_outputs(vmap(fn, in_dims=-1)(backend(moved)))
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-8, atol=1e-10)


def test_vmap_of_grad(backend):
    rng = np.random.default_rng(4)
    xs = _rand(rng, 3, 3, 3)
    f = lambda x: ad.sum(L.inv(x) * x[0, ...]) + L.det(x) + L.slogdet(x).logabsdet  # noqa: E731
    got = to_numpy(vmap(grad(f))(backend(xs)))
    want = np.stack([to_numpy(grad(f)(backend(x))) for x in xs])
    np.testing.assert_allclose(got, want, rtol=1e-10)


@pytest.mark.parametrize("which", ["det", "solve", "eigvalsh", "cholesky", "svdvals", "qr"])
def test_hessian_against_finite_differences_of_gradient(backend, which):
    rng = np.random.default_rng(5)
    x = _rand(rng, 3, 3) + 2 * np.eye(3)
    b = rng.standard_normal(3)

    def f(x):
        if which == "det":
            return L.det(x) ** 2
        if which == "solve":
            return ad.sum(L.solve(x, backend(b)) ** 2)
        if which == "eigvalsh":
            return ad.sum(L.eigvalsh(_sym(x)) ** 3)
        if which == "cholesky":
            return ad.sum(L.cholesky(_sym(x) + 12.0 * _eye_like(x)) ** 3)
        if which == "svdvals":
            return ad.sum(L.svdvals(x) ** 3)
        q, r = L.qr(x)
        return ad.sum(q[0, :] * r[1, :]) + ad.sum(r ** 3)

    h = to_numpy(hessian(f)(backend(x))).reshape(9, 9)
    g = grad(f)
    fd = np.empty((9, 9))
    for k in range(9):
        e = np.zeros(9)
        e[k] = 1e-5
        e = e.reshape(3, 3)
        fd[:, k] = ((to_numpy(g(backend(x + e))) - to_numpy(g(backend(x - e)))) / 2e-5).ravel()
    np.testing.assert_allclose(h, fd, rtol=1e-4, atol=1e-6)


def test_named_tuples_and_matrix_rank():
    rng = np.random.default_rng(6)
    x = _rand(rng, 4, 3)
    assert L.qr(x)._fields == ("Q", "R")
    assert L.svd(x)._fields == ("U", "S", "Vh")
    assert L.eigh(_spd(rng, 3))._fields == ("eigenvalues", "eigenvectors")
    assert L.slogdet(_spd(rng, 3))._fields == ("sign", "logabsdet")
    low = x[:, :2] @ rng.standard_normal((2, 3))
    assert int(to_numpy(L.matrix_rank(low))) == 2
    assert to_numpy(L.matrix_rank(np.stack([x, low]))).tolist() == [3, 2]
    assert to_numpy(vmap(L.matrix_rank)(np.stack([x, low]))).tolist() == [3, 2]
    # the full SVD of a tall matrix computes forward, refuses a derivative
    assert to_numpy(L.svd(x).U).shape == (4, 4)
    with pytest.raises(NotImplementedError):
        grad(lambda a: ad.sum(L.svd(a).S))(x)


def test_degenerate_eigenvalues_give_finite_eigenvalue_gradients():
    # the identity has one repeated eigenvalue: eigvalsh and svdvals stay finite (no 0/0)
    x = np.eye(3)
    g = to_numpy(grad(lambda a: ad.sum(L.eigvalsh(a) ** 2))(x))
    np.testing.assert_allclose(g, 2 * np.eye(3), atol=1e-12)
    g = to_numpy(grad(lambda a: ad.sum(L.svdvals(a)))(x))
    np.testing.assert_allclose(g, np.eye(3), atol=1e-12)
    g = to_numpy(grad(lambda a: L.vector_norm(a))(np.zeros(3)))
    np.testing.assert_array_equal(g, np.zeros(3))


def test_eager_backward():
    rng = np.random.default_rng(7)
    x = ad.Tensor(_rand(rng, 3, 3), requires_grad=True)
    y = L.det(x)
    y.backward()
    np.testing.assert_allclose(to_numpy(x.grad), to_numpy(y) * np.linalg.inv(to_numpy(x)).T,
                               rtol=1e-10)


# ---------------------------------------------------------------------------------------------
# torch.func as the independent reference, on torch tensors, real and complex input

TORCH_CASES = {
    "det": (lambda m, x: m.abs(m.linalg.det(x)) ** 2, (3, 3)),
    "slogdet": (lambda m, x: m.sum(m.linalg.slogdet(x)[1] * 2.0), (2, 3, 3)),
    "inv": (lambda m, x: m.sum(m.abs(m.linalg.inv(x)) ** 2), (3, 3)),
    "solve": (lambda m, x: m.sum(m.abs(m.linalg.solve(x, x[..., :2] * 2.0 + 1.0)) ** 2), (3, 3)),
    "cholesky": (lambda m, x: m.sum(m.abs(m.linalg.cholesky(
        x @ m.conj(m.mT(x)) + 3.0 * m.eye_like(x))) ** 3), (3, 3)),
    "eigh": (lambda m, x: m.sum(m.linalg.eigh(x + m.conj(m.mT(x)))[0] ** 3)
             + m.sum(m.abs(m.linalg.eigh(x + m.conj(m.mT(x)))[1][..., 0]) ** 4), (3, 3)),
    "qr": (lambda m, x: m.sum(m.abs(m.linalg.qr(x)[1]) ** 2 * 0.5)
           + m.sum(m.abs(m.linalg.qr(x)[0]) ** 4), (4, 3)),
    "qr_wide": (lambda m, x: m.sum(m.abs(m.linalg.qr(x)[1]) ** 3)
                + m.sum(m.abs(m.linalg.qr(x)[0]) ** 4), (3, 5)),
    "svd": (lambda m, x: m.sum(m.linalg.svd(x, full_matrices=False)[1] ** 3)
            + m.sum(m.abs(m.linalg.svd(x, full_matrices=False)[0]) ** 4)
            + m.sum(m.abs(m.linalg.svd(x, full_matrices=False)[2]) ** 4), (3, 5)),
    "eig": (lambda m, x: m.sum(m.real(m.linalg.eig(x)[0] ** 2))
            + m.sum(m.abs(m.linalg.eig(x)[1]) ** 4), (3, 3)),
    "pinv": (lambda m, x: m.sum(m.abs(m.linalg.pinv(x)) ** 2), (4, 3)),
    "matrix_norm_nuc": (lambda m, x: m.linalg.matrix_norm(x, ord="nuc"), (3, 4)),
}


class _AdNS:
    """The few names the torch cases use, spelled for arrayad."""
    linalg = ad.linalg
    sum = staticmethod(ad.sum)
    abs = staticmethod(ad.abs)
    conj = staticmethod(ad.conj)
    real = staticmethod(ad.real)
    mT = staticmethod(ad.matrix_transpose)

    eye_like = staticmethod(_eye_like)


def _torch_ns():
    import torch

    class NS:
        linalg = torch.linalg
        sum = staticmethod(torch.sum)
        abs = staticmethod(torch.abs)
        conj = staticmethod(torch.conj)
        real = staticmethod(torch.real)
        mT = staticmethod(lambda x: x.mT)
        eye_like = staticmethod(lambda x: torch.eye(x.shape[-1], dtype=torch.float64))
    return NS


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
@pytest.mark.parametrize("dtype", ["float64", "complex128"])
@pytest.mark.parametrize("name", sorted(TORCH_CASES))
def test_grad_against_torch_func(name, dtype):
    import torch
    fn, shape = TORCH_CASES[name]
    rng = np.random.default_rng(8)
    x = rng.standard_normal(shape)
    if dtype == "complex128":
        x = x + 1j * rng.standard_normal(shape)
    if len(shape) == 2 and shape[0] == shape[1] and name not in ("eigh", "eig"):
        x = x + 3 * np.eye(shape[0])
    tx = torch.tensor(x)
    want = torch.func.grad(lambda t: fn(_torch_ns(), t))(tx).numpy()
    # on torch tensors through arrayad, and on NumPy
    got_t = to_numpy(grad(lambda t: fn(_AdNS, t))(tx.clone()))
    got_np = to_numpy(grad(lambda t: fn(_AdNS, t))(x))
    np.testing.assert_allclose(got_t, want, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(got_np, want, rtol=1e-7, atol=1e-9)


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
@pytest.mark.parametrize("name", ["det", "inv", "solve", "cholesky", "eigh", "svd", "qr"])
def test_jvp_against_torch_func(name):
    import torch
    fn, shape = TORCH_CASES[name]
    rng = np.random.default_rng(9)
    x = rng.standard_normal(shape)
    if shape[0] == shape[1]:
        x = x + 3 * np.eye(shape[0])
    v = rng.standard_normal(shape)
    _, want = torch.func.jvp(lambda t: fn(_torch_ns(), t), (torch.tensor(x),), (torch.tensor(v),))
    _, got = jvp(lambda t: fn(_AdNS, t), (x,), (v,))
    np.testing.assert_allclose(to_numpy(got), want.numpy(), rtol=1e-7, atol=1e-9)
