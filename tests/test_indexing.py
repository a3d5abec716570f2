"""Indexing: x[key] and functional x[key] = v for every key kind, their derivatives against
central finite differences, and vmap against a Python loop, on every backend.

Expected values come from NumPy's own indexing of the same data (never from arrayad).
"""
import warnings

import numpy as np
import pytest

import arrayad as ad
from arrayad.func import grad, jvp, vmap

from conftest import to_numpy

RNG = np.random.default_rng(0)
X = RNG.standard_normal((4, 5, 6))
I2 = np.array([[0, 2], [3, 1]])
J = np.array([1, -1])
M = X[:, :, 0] > 0

# (name, key builder from a converter of NumPy index arrays); every key kind of the standard
# (ints, slices, Ellipsis, None, integer arrays, a boolean mask, tuples of them) and NumPy's
# mixed keys, whose layout rules (contiguous or not) the batching rules must reproduce.
KEYS = {
    "int": lambda c: 1,
    "neg_int": lambda c: -1,
    "slice": lambda c: slice(1, 3),
    "neg_step": lambda c: (slice(None, None, -2), Ellipsis, slice(4, 0, -1)),
    "ints_slices": lambda c: (2, slice(None), slice(1, None, 2)),
    "ellipsis": lambda c: (Ellipsis, 0),
    "none": lambda c: (None, 2, slice(None), None),
    "int_array": lambda c: c(I2),
    "int_arrays": lambda c: (c(I2), c(J)),
    "all_int_axes": lambda c: (c(I2), 0, c(J)),
    "slice_array": lambda c: (slice(None), c(I2)),
    "array_slice_int": lambda c: (c(J), slice(None), 0),
    "noncontiguous": lambda c: (slice(None), c(J), None, c(J)),
    "ellipsis_array": lambda c: (Ellipsis, c(J)),
    "zero_d_array": lambda c: (c(np.array(2)), slice(None), c(J)),
    "mask": lambda c: c(M),
    "mask_all": lambda c: c(X > 0),
    "mask_then_int": lambda c: (c(M), 1),
}
BASIC = {"int", "neg_int", "slice", "neg_step", "ints_slices", "ellipsis", "none"}


def _np_key(name):
    return KEYS[name](lambda a: a)


def _key(name, backend):
    return KEYS[name](lambda a: backend(a))


def _fd_grad(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for idx in np.ndindex(*x.shape):
        e = np.zeros_like(x)
        e[idx] = eps
        g[idx] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


@pytest.mark.parametrize("name", sorted(KEYS))
def test_getitem_values(backend, name):
    out = ad.asarray(backend(X))[_key(name, backend)]
    want = X[_np_key(name)]
    got = to_numpy(out)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want)


@pytest.mark.parametrize("name", sorted(KEYS))
def test_setitem_values(backend, name):
    want = X.copy()
    v = RNG.standard_normal(X[_np_key(name)].shape)
    want[_np_key(name)] = v
    x = ad.asarray(backend(X), copy=True)
    x[_key(name, backend)] = backend(v)
    np.testing.assert_allclose(to_numpy(x), want)


def test_setitem_scalar_and_broadcast(backend):
    x = ad.asarray(backend(X), copy=True)
    x[..., 0] = 7.0
    x[backend(M)] = -1.0
    want = X.copy()
    want[..., 0] = 7.0
    want[M] = -1.0
    np.testing.assert_allclose(to_numpy(x), want)


def test_index_add_accumulates(backend):
    from arrayad._ops.indexing import index_add
    out = index_add(ad.asarray(backend(np.zeros(4))), backend(np.array([0, 0, 3, 0])),
                    backend(np.array([1.0, 2.0, 3.0, 4.0])))
    np.testing.assert_allclose(to_numpy(out), [7.0, 0.0, 0.0, 3.0])


@pytest.mark.parametrize("name", sorted(KEYS))
def test_getitem_vjp_jvp_vs_finite_differences(backend, name):
    # weights make every output element count differently; repeated indices must accumulate
    k_np = _np_key(name)
    w = RNG.standard_normal(X[k_np].shape)

    def f_np(x):
        return float(np.sum(w * np.sin(x[k_np])))

    key = _key(name, backend)
    wb = ad.asarray(backend(w))

    def f(x):
        return ad.sum(wb * ad.sin(x[key]))

    want = _fd_grad(f_np, X)
    np.testing.assert_allclose(to_numpy(grad(f)(backend(X))), want, rtol=1e-6, atol=1e-8)
    t = RNG.standard_normal(X.shape)
    _, tan = jvp(f, (backend(X),), (backend(t),))
    np.testing.assert_allclose(float(to_numpy(tan)), float(np.sum(want * t)), rtol=1e-6,
                               atol=1e-8)


@pytest.mark.parametrize("name", sorted(KEYS))
def test_setitem_vjp_vs_finite_differences(backend, name):
    k_np = _np_key(name)
    shape_v = X[k_np].shape
    v0 = RNG.standard_normal(shape_v)
    w = RNG.standard_normal(X.shape)
    # (no key here writes a position twice: with repeats, which write wins is unspecified)

    def f_np(x, v):
        y = x.copy()
        y[k_np] = v
        return float(np.sum(w * y * y))

    key = _key(name, backend)
    wb = ad.asarray(backend(w))

    def f(x, v):
        y = ad.asarray(x, copy=True)
        y[key] = v
        return ad.sum(wb * y * y)

    gx, gv = grad(f, argnums=(0, 1))(backend(X), backend(v0))
    np.testing.assert_allclose(to_numpy(gx), _fd_grad(lambda x: f_np(x, v0), X), rtol=1e-6,
                               atol=1e-7)
    np.testing.assert_allclose(to_numpy(gv), _fd_grad(lambda v: f_np(X, v), v0), rtol=1e-6,
                               atol=1e-7)
    tx, tv = RNG.standard_normal(X.shape), RNG.standard_normal(shape_v)
    _, tan = jvp(f, (backend(X), backend(v0)), (backend(tx), backend(tv)))
    want = np.sum(_fd_grad(lambda x: f_np(x, v0), X) * tx) + \
        np.sum(_fd_grad(lambda v: f_np(X, v), v0) * tv)
    np.testing.assert_allclose(float(to_numpy(tan)), want, rtol=1e-6, atol=1e-7)


# -- vmap against a Python loop --------------------------------------------------------------------
XB = RNG.standard_normal((3, 4, 5, 6))


def _loop(f, *args_and_dims):
    size = next(a.shape[d] for a, d in args_and_dims if d is not None)
    outs = []
    for b in range(size):
        outs.append(np.asarray(f(*[np.take(a, b, axis=d) if d is not None else a
                                   for a, d in args_and_dims])))
    return np.stack(outs)


@pytest.mark.parametrize("name", sorted(KEYS))
def test_vmap_getitem_batched_x(backend, name):
    key = _key(name, backend)
    want = _loop(lambda x: x[_np_key(name)], (XB, 0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # a real rule, not the loop fallback
        got = vmap(lambda x: x[key])(backend(XB))
    np.testing.assert_allclose(to_numpy(got), want)
    # batch dim not in front
    got = vmap(lambda x: x[key], in_dims=2)(backend(np.moveaxis(XB, 0, 2)))
    np.testing.assert_allclose(to_numpy(got), want)


# batched index arrays: (key builder from per-example index arrays, index arrays)
BATCHED_INDEX_KEYS = {
    "one": (lambda i: (i,), [RNG.integers(0, 4, size=(3, 2, 2))]),
    "one_0d": (lambda i: (i,), [RNG.integers(0, 4, size=(3,))]),
    "two": (lambda i, j: (i, slice(None), j), [RNG.integers(0, 4, size=(3, 2)),
                                                RNG.integers(-6, 6, size=(3, 2))]),
    "after_slice": (lambda i: (slice(None), i), [RNG.integers(0, 5, size=(3, 3))]),
    "after_slice_int": (lambda i: (slice(1, None), i, 2), [RNG.integers(0, 5, size=(3, 3))]),
    "noncontiguous": (lambda i: (i, slice(None), 0), [RNG.integers(0, 4, size=(3, 2, 2))]),
}


@pytest.mark.parametrize("x_batched", [True, False])
@pytest.mark.parametrize("name", sorted(BATCHED_INDEX_KEYS))
def test_vmap_getitem_batched_indices(backend, name, x_batched):
    build, idx = BATCHED_INDEX_KEYS[name]
    x = XB if x_batched else X
    xd = 0 if x_batched else None
    want = _loop(lambda x, *i: x[build(*i)], (x, xd), *[(i, 0) for i in idx])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = vmap(lambda x, *i: ad.asarray(x)[build(*i)], in_dims=(xd,) + (0,) * len(idx))(
            backend(x), *[backend(i) for i in idx])
    np.testing.assert_allclose(to_numpy(got), want)


@pytest.mark.parametrize("v_batched", [True, False])
@pytest.mark.parametrize("name", sorted(set(KEYS) - {"mask", "mask_all", "mask_then_int"}))
def test_vmap_setitem(backend, name, v_batched):
    k_np = _np_key(name)
    vshape = X[k_np].shape
    v = RNG.standard_normal((3,) + vshape) if v_batched else RNG.standard_normal(vshape)
    vd = 0 if v_batched else None
    key = _key(name, backend)

    def f_np(x, v):
        y = x.copy()
        y[k_np] = v
        return y

    def f(x, v):
        y = ad.asarray(x, copy=True)
        y[key] = v
        return y

    want = _loop(f_np, (XB, 0), (v, vd))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = vmap(f, in_dims=(0, vd))(backend(XB), backend(v))
    np.testing.assert_allclose(to_numpy(got), want)


@pytest.mark.parametrize("name", sorted(BATCHED_INDEX_KEYS))
def test_vmap_setitem_batched_indices(backend, name):
    # (an unbatched x cannot receive batched writes in place: that is a clear error, by design)
    x_batched = True
    build, idx = BATCHED_INDEX_KEYS[name]
    if name in ("one", "noncontiguous"):
        # repeated indices: which write wins is unspecified; use distinct rows instead
        idx = [np.stack([RNG.permutation(4)[:4].reshape(2, 2) for _ in range(3)])]
    x = XB if x_batched else X
    xd = 0 if x_batched else None
    vshape = X[build(*[i[0] for i in idx])].shape
    v = RNG.standard_normal((3,) + vshape)

    def f_np(x, v, *i):
        y = x.copy()
        y[build(*i)] = v
        return y

    def f(x, v, *i):
        y = ad.asarray(x, copy=True)
        y[build(*i)] = v
        return y

    if name == "two":
        pytest.skip("random (i, j) pairs may repeat a position")
    want = _loop(f_np, (x, xd), (v, 0), *[(i, 0) for i in idx])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = vmap(f, in_dims=(xd, 0) + (0,) * len(idx))(backend(x), backend(v),
                                                         *[backend(i) for i in idx])
    np.testing.assert_allclose(to_numpy(got), want)


def test_vmap_grad_of_gather_with_batched_indices(backend):
    # per-example gradients of a gather: the VJP is a scatter-add with batched indices
    idx = RNG.integers(0, 6, size=(3, 5))
    w = RNG.standard_normal(5)

    def f(x, i):
        return ad.sum(ad.asarray(backend(w)) * x[i] ** 2)

    got = vmap(grad(f))(backend(XB[:, 0, 0, :]), backend(idx))
    want = np.zeros((3, 6))
    for b in range(3):
        np.add.at(want[b], idx[b], 2 * w * XB[b, 0, 0, idx[b]])
    np.testing.assert_allclose(to_numpy(got), want)


def test_vmap_take_and_take_along_axis_batched_indices(backend):
    idx = RNG.integers(0, 6, size=(3, 4))
    got = vmap(lambda x, i: ad.take(x, i, axis=1))(backend(XB[:, 0]), backend(idx))
    want = np.stack([np.take(XB[b, 0], idx[b], axis=1) for b in range(3)])
    np.testing.assert_allclose(to_numpy(got), want)
    idx2 = RNG.integers(0, 6, size=(3, 5, 2))
    got = vmap(lambda x, i: ad.take_along_axis(x, i, axis=1))(backend(XB[:, 0]), backend(idx2))
    want = np.stack([np.take_along_axis(XB[b, 0], idx2[b], axis=1) for b in range(3)])
    np.testing.assert_allclose(to_numpy(got), want)


def test_vmap_masked_setitem_is_a_where(backend):
    def f(x):
        y = ad.asarray(x, copy=True)
        y[x < 0] = 0.0
        return y

    got = vmap(f)(backend(XB))
    np.testing.assert_allclose(to_numpy(got), np.where(XB < 0, 0.0, XB))


def test_vmap_mask_getitem_is_a_clear_error(backend):
    with pytest.raises(RuntimeError, match="dynamic shape.*where"):
        vmap(lambda x: x[x > 0])(backend(XB))


def test_getitem_list_key_and_numpy_scalars(backend):
    x = ad.asarray(backend(X))
    np.testing.assert_allclose(to_numpy(x[[0, 2]]), X[[0, 2]])
    np.testing.assert_allclose(to_numpy(x[np.int64(1), np.int32(2)]), X[1, 2])


def test_eager_tape_through_setitem(backend):
    x = backend.tensor(X, requires_grad=True)
    y = x * 1.0
    y[1:3, 0] = 0.0
    ad.sum(y * y).backward()
    want = 2 * X
    want[1:3, 0] = 0.0
    np.testing.assert_allclose(to_numpy(x.grad), want)
