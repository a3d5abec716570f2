"""Inside a transform everything is arrayad, on the inputs' backend (NOTE [everything inside is
arrayad] in the core): arrays created without an array argument, non-differentiable results,
constants and non-differentiated arguments. The same functions run on NumPy, array-api-strict and
torch inputs and must agree with finite differences / a Python loop computed on NumPy."""

import numpy as np
import pytest
from array_api_compat import array_namespace

import arrayad as ad
from arrayad.func import grad, jacfwd, jacrev, jvp, vmap
from conftest import to_numpy
from reference import fd_grad

BACKENDS = ["numpy", "array_api_strict"]
for _name in ("torch", "dask"):
    try:
        __import__(_name)
        BACKENDS.append(_name)
    except ImportError:
        pass

# (no integers: floor is discontinuous there)
X = np.array([0.5, -1.2, 2.2, 0.3])
XB = np.array([[0.5, -1.2, 2.2, 0.3], [1.1, 2.4, -3.3, 0.1], [-0.7, 0.2, 0.4, 1.5]])


def on(name, a):
    if name == "numpy":
        return np.array(a)
    if name == "torch":
        import torch
        return torch.tensor(a)
    if name == "dask":
        import dask.array as da
        return da.from_array(np.array(a), chunks=2)
    import array_api_strict
    return array_api_strict.asarray(a)


# Each function uses only namespace calls and creates arrays inside, mixes in non-differentiable
# results or writes traced values into arrays it made.
def arange_on_device(x):
    return ad.sum(ad.sort(x) * ad.arange(x.shape[0], dtype=x.dtype, device=x.device))


def arange_without_device(x):
    return ad.sum(x * ad.arange(x.shape[0], dtype=x.dtype) ** 2)


def asarray_of_python_data(x):
    return ad.sum(ad.sin(x) * ad.asarray([1.0, 2.0, 3.0, 4.0], dtype=x.dtype))


def eye_and_full(x):
    m = ad.eye(4, dtype=x.dtype) + ad.full((4, 4), 0.5, dtype=x.dtype)
    return ad.sum((m @ x) ** 2)


def linspace_and_ones(x):
    return ad.sum(x * ad.linspace(0.0, 1.0, 4, dtype=x.dtype) + ad.ones(4, dtype=x.dtype))


def nondifferentiable_mixed_in(x):
    xp = array_namespace(x)
    s = xp.sign(x)
    assert array_namespace(s, x) is ad      # one namespace, not the backend's
    return xp.sum(xp.floor(x) * x + s * x ** 2 + xp.astype(x > 0, x.dtype) * x)


def constants_of_constants(x):
    xp = array_namespace(x)
    c = xp.zeros_like(x) - 5     # arithmetic on constants of the level
    return xp.sum(c * x + 2.0 ** x)


def write_into_created(x):
    xp = array_namespace(x)
    out = xp.zeros(x.shape, dtype=x.dtype)
    out[1:] = x[:-1] ** 2
    out[0] = xp.exp(x[3])
    return xp.sum(out * x)


def write_masked_into_created(x):
    xp = array_namespace(x)
    out = xp.ones(x.shape, dtype=x.dtype)
    out[x > 0] = 1 - 2 * x[x > 0]
    return xp.sum(out * x)


FUNCS = [arange_on_device, arange_without_device, asarray_of_python_data, eye_and_full,
         linspace_and_ones, nondifferentiable_mixed_in, constants_of_constants,
         write_into_created, write_masked_into_created]
# (vmap refuses a batched boolean mask: the number of selected elements differs per row, as in
# torch.func; array-api-extra and scipy then take the where() path, see test_capabilities_*)
NOT_UNDER_VMAP = {write_masked_into_created}


def _eager(f, x):
    return float(f(ad.asarray(np.asarray(x, dtype=float))))


def _fd_grad(f, x):
    return fd_grad(lambda v: _eager(f, v), x)


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("f", FUNCS, ids=lambda f: f.__name__)
def test_grad_and_jvp_on_every_backend(f, name):
    x = on(name, X)
    expected = _fd_grad(f, X)
    g = grad(f)(x)
    assert type(g) is type(x)
    np.testing.assert_allclose(to_numpy(g), expected, rtol=1e-6, atol=1e-6)
    t = np.array([0.3, -0.1, 0.7, 0.2])
    value, tangent = jvp(f, (x,), (on(name, t),))
    np.testing.assert_allclose(float(to_numpy(value)), _eager(f, X), rtol=1e-12)
    np.testing.assert_allclose(float(to_numpy(tangent)), expected @ t, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("f", [f for f in FUNCS if f not in NOT_UNDER_VMAP],
                         ids=lambda f: f.__name__)
def test_vmap_and_vmap_of_grad_on_every_backend(f, name):
    xb = on(name, XB)
    np.testing.assert_allclose(to_numpy(vmap(f)(xb)), [_eager(f, row) for row in XB],
                               rtol=1e-12)
    np.testing.assert_allclose(to_numpy(vmap(grad(f))(xb)), [_fd_grad(f, row) for row in XB],
                               rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", BACKENDS)
def test_jacobians_with_created_arrays(name):
    def f(x):
        out = ad.zeros((2, 4), dtype=x.dtype)
        out[0, :] = ad.sin(x)
        out[1, :] = x * ad.arange(4, dtype=x.dtype)
        return ad.reshape(out, (-1,))
    x = on(name, X)
    expected = np.concatenate([np.diag(np.cos(X)), np.diag(np.arange(4.0))])
    np.testing.assert_allclose(to_numpy(jacrev(f)(x)), expected, atol=1e-12)
    np.testing.assert_allclose(to_numpy(jacfwd(f)(x)), expected, atol=1e-12)


@pytest.mark.parametrize("name", BACKENDS)
def test_non_differentiated_arguments_are_arrayad_and_stay_unchanged(name):
    w = on(name, [[1.0, 2.0], [3.0, -4.0]])
    x = on(name, [0.5, -1.5])

    def f(x, w, *, scale):
        assert array_namespace(w) is ad and array_namespace(scale) is ad
        w[0, 0] = 10.0               # updates the function's copy only
        return ad.sum((w @ x) * scale)

    scale = on(name, [2.0, 3.0])
    g = grad(f)(x, w, scale=scale)
    # d/dx sum(scale * (W' x)) = W'^T scale with W'[0, 0] = 10
    np.testing.assert_allclose(to_numpy(g), np.array([[10.0, 2.0], [3.0, -4.0]]).T @ [2.0, 3.0])
    np.testing.assert_array_equal(to_numpy(w), [[1.0, 2.0], [3.0, -4.0]])
    out = vmap(lambda x, w: w @ x, in_dims=(0, None))(on(name, [[1.0, 0.0], [0.0, 1.0]]), w)
    np.testing.assert_allclose(to_numpy(out), [[1.0, 3.0], [2.0, -4.0]])


def test_created_array_becomes_batched_when_a_batched_value_is_written():
    def f(x):
        out = ad.zeros(3)
        assert not bool(ad.any(out != 0))    # an unbatched value of vmap: bool() is fine
        out[1] = ad.sum(x)
        return out
    res = vmap(f)(XB)
    np.testing.assert_allclose(res, np.stack([np.zeros(3), XB.sum(1), np.zeros(3)], axis=1))
    # and an unbatched result of vmap broadcasts over the batch
    np.testing.assert_allclose(vmap(lambda x: ad.ones(2))(XB), np.ones((3, 2)))


def test_created_arrays_follow_the_innermost_transform_and_are_not_kept():
    seen = []

    def inner(y):
        z = ad.zeros(2)
        seen.append(z)
        return ad.sum(y * y) + ad.sum(z)

    g = grad(lambda x: grad(inner)(x)[0])(np.array([1.5, 2.0]))
    np.testing.assert_allclose(g, [2.0, 0.0])
    assert seen[0].interpreter.level == 2 and not seen[0].interpreter.alive
    assert seen[0].interpreter.frame is None     # the transform let go of its inputs


@pytest.mark.parametrize("name", ["torch", "array_api_strict"])
def test_device_routes_to_its_backend(name):
    if name == "torch":
        pytest.importorskip("torch")
    dev = on(name, [1.0]).device
    for t in (ad.zeros(2, device=dev), ad.arange(3, device=dev), ad.eye(2, device=dev),
              ad.asarray([1.0, 2.0], device=dev), ad.full((2,), 3.0, device=dev)):
        assert ad.backends.backend_of(t).name == name
    with pytest.raises(TypeError, match="device=.*not a device of a supported backend"):
        ad.zeros(2, device=object())


@pytest.mark.parametrize("name", BACKENDS)
def test_random_numbers_inside_follow_the_inputs(name):
    x = on(name, XB)

    def f(row):
        noise = ad.randn(4, dtype=row.dtype)
        return row + 0 * noise

    out = vmap(f, randomness="different")(x)
    assert type(out) is type(x)
    np.testing.assert_allclose(to_numpy(out), XB)


def test_capabilities_tell_the_truth_under_vmap():
    xpx = pytest.importorskip("array_api_extra")
    caps = []

    def f(r):
        caps.append(ad.__array_namespace_info__().capabilities())
        return xpx.isclose(r, r * (1 + 1e-12))

    assert bool(np.all(vmap(f)(XB)))
    grad(lambda r: (f(r), ad.sum(r))[1])(X)
    assert caps[0]["boolean indexing"] is False and caps[0]["data-dependent shapes"] is False
    assert caps[1]["boolean indexing"] is True
    assert ad.__array_namespace_info__().capabilities()["boolean indexing"] is True


@pytest.mark.parametrize("name", BACKENDS)
def test_array_api_extra_with_nondifferentiable_mask(name):
    xpx = pytest.importorskip("array_api_extra")

    def f(x):
        xp = array_namespace(x)
        return xp.sum(xpx.apply_where(x > 0, x, xp.sqrt, fill_value=0.0))

    g = grad(f)(on(name, X))
    np.testing.assert_allclose(to_numpy(g), np.where(X > 0, 0.5 / np.sqrt(np.abs(X)), 0.0))


class TestNumPyFunctionsArrayadDoesNotImplement:
    def test_eager_arrays_without_gradient_compute_with_numpy(self):
        x = ad.asarray([3.0, 4.0])
        p = np.percentile(x, 50)
        assert isinstance(p, ad.Tensor) and float(p) == 3.5
        assert isinstance(np.add.reduce(x), ad.Tensor) and float(np.add.reduce(x)) == 7.0
        np.testing.assert_array_equal(to_numpy(np.add.outer(x, x)), [[6.0, 7.0], [7.0, 8.0]])

    def test_other_backends_come_back_on_their_backend(self):
        torch = pytest.importorskip("torch")
        p = np.percentile(ad.asarray(torch.tensor([3.0, 4.0], dtype=torch.float64)), 50)
        assert ad.backends.backend_of(p).name == "torch" and float(p) == 3.5

    def test_refused_by_name_where_a_derivative_would_be_lost(self):
        y = ad.tensor([3.0, 4.0], requires_grad=True)
        with pytest.raises(TypeError, match="numpy.percentile .*requires grad.*detach"):
            np.percentile(y, 50)
        assert float(np.percentile(y.detach(), 50)) == 3.5
        with ad.no_grad():
            assert float(np.percentile(y, 50)) == 3.5
        with pytest.raises(TypeError, match="numpy.add.reduce .*inside a transform"):
            grad(lambda v: np.add.reduce(v))(np.array([3.0, 4.0]))
        with pytest.raises(TypeError, match="out="):
            np.add.reduce(ad.asarray([1.0, 2.0]), out=ad.asarray(0.0))


@pytest.mark.parametrize("f", [np.atleast_1d, np.atleast_2d, np.atleast_3d])
@pytest.mark.parametrize("shape", [(), (3,), (2, 3)])
def test_numpy_atleast_functions_are_differentiable(f, shape):
    x = np.arange(1.0, 1.0 + np.prod(shape, dtype=int)).reshape(shape)
    assert f(ad.asarray(x)).shape == f(x).shape
    g = grad(lambda v: ad.sum(f(v) ** 2))(x)
    np.testing.assert_allclose(g, 2 * x)


@pytest.mark.parametrize("kw", [{}, {"ord": 1}, {"axis": 0}, {"axis": 1, "ord": 1},
                                {"ord": "fro"}, {"ord": np.inf}, {"keepdims": True},
                                {"axis": (0, 1), "keepdims": True}], ids=str)
def test_numpy_linalg_norm_is_differentiable(kw):
    x = np.array([[1.0, -2.0], [3.0, 4.5]])
    r = np.linalg.norm(ad.asarray(x), **kw)
    np.testing.assert_allclose(to_numpy(r), np.linalg.norm(x, **kw))
    g = grad(lambda v: ad.sum(np.linalg.norm(v, **kw)))(x)
    np.testing.assert_allclose(g, fd_grad(lambda m: np.sum(np.linalg.norm(m, **kw)), x),
                               rtol=1e-6, atol=1e-8)


def test_python_conversions_of_values_without_derivative_work_inside():
    """Library code converts counts, masks and constants (int(n), np.asarray(mask)); only a
    value being differentiated is refused."""
    def f(x):
        n = int(ad.sum(x > 0))
        mask = np.asarray(x > 0)
        scale = float(ad.max(ad.abs(ad.floor(x))))
        return ad.sum(x[mask] ** 2) / n + scale

    x = np.array([1.5, -2.0, 3.0])
    np.testing.assert_allclose(grad(f)(x), [1.5, 0.0, 3.0])
    np.testing.assert_allclose(jvp(f, (x,), (np.ones(3),))[1], 4.5)
    with pytest.raises(RuntimeError, match="grad: calling float\(\) on an array being "
                                           "differentiated would drop its derivative"):
        grad(lambda v: float(ad.sum(v)) + ad.sum(v))(x)
    with pytest.raises(RuntimeError, match="grad: calling numpy\(\) on an array being "
                                           "differentiated"):
        grad(lambda v: ad.sum(np.asarray(v)))(x)
