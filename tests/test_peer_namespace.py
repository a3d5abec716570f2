"""What library code written for several array libraries expects of a namespace it is handed
(the peers' own suites, tools/peer_suites.py, found these): the inspection object as the standard
has it, placement by a backend's dtype or device object, NumPy constants mixing with every
backend as Python numbers do, integer-valued functions of traced values inside transforms."""

import numpy as np
import pytest
from scipy import stats

import arrayad as ad
from arrayad.func import grad, jvp, vmap

from conftest import BACKENDS, Backend, to_numpy

# Dask arrays carry no device the standard's way and no info of their own (the other part)
EAGER = [b for b in BACKENDS if b in ("numpy", "array_api_strict", "torch")]


@pytest.fixture(params=EAGER)
def eager(request):
    return Backend(request.param)


# -- __array_namespace_info__ -------------------------------------------------------------------
@pytest.mark.parametrize("name", EAGER)
def test_info_follows_the_default_backend(name):
    own = ad.get_backend(name).xp.__array_namespace_info__()
    with ad.backend(name):
        info = ad.__array_namespace_info__()
        devices = info.devices()
        # the 2025.12 standard: a tuple (and still concatenable with a list, as the 2024.12
        # list was: SciPy's fixtures write devices() + [None])
        assert isinstance(devices, tuple)
        assert list(devices + [None])[-1] is None
        assert info.default_device() in devices
        assert all(getattr(d, "type", None) != "meta" for d in devices)
        # default dtypes: the backend's own (torch: float32), as arrayad dtypes
        want = {k: str(v).rsplit(".", 1)[-1] for k, v in own.default_dtypes().items()}
        got = info.default_dtypes()
        assert set(got) == {"real floating", "complex floating", "integral", "indexing"}
        assert {k: v.name for k, v in got.items()} == want
        assert ad.zeros(1).dtype == got["real floating"]
        # dtypes: the backend's, by kind; a tuple of kinds; a wrong kind is a ValueError
        assert set(info.dtypes()) == set(own.dtypes())
        assert set(info.dtypes(kind=("bool", "integral"))) == set(
            own.dtypes(kind=("bool", "integral")))
        assert all(d is getattr(ad, n) for n, d in info.dtypes().items())
        with pytest.raises(ValueError, match="kind"):
            info.dtypes(kind="floating")
        caps = info.capabilities()
        assert set(caps) == {"boolean indexing", "data-dependent shapes", "max dimensions"}


def test_info_of_another_device():
    s = pytest.importorskip("array_api_strict")
    info = ad.__array_namespace_info__()
    dev = s.Device("no_float64")
    want = s.__array_namespace_info__().default_dtypes(device=dev)["real floating"]
    assert info.default_dtypes(device=dev)["real floating"].name == str(want).rsplit(".")[-1]
    assert "float64" not in info.dtypes(device=dev)


# -- placement by a backend's dtype or device object --------------------------------------------
def _own_dtype(b, name):
    return getattr(b.xp, name)


@pytest.mark.parametrize("name", [b for b in EAGER if b != "numpy"])
def test_backend_dtype_places_creation(name):
    b = Backend(name)
    dt = _own_dtype(b, "float64")
    for make in (lambda: ad.arange(6, dtype=dt), lambda: ad.zeros((2,), dtype=dt),
                 lambda: ad.ones(3, dtype=dt), lambda: ad.full((2,), 1.5, dtype=dt),
                 lambda: ad.linspace(0, 1, 4, dtype=dt), lambda: ad.eye(2, dtype=dt),
                 lambda: ad.asarray([1.0, 2.0], dtype=dt)):
        x = make()
        assert ad.get_backend(name) is ad.backends.backend_of(x)
        # (outside transforms, the backend's own array: code on raw arrays stays raw)
        assert not isinstance(x, ad.Tensor) and x.dtype == dt
    np.testing.assert_array_equal(to_numpy(ad.arange(6, dtype=dt)), np.arange(6.0))
    # inside a transform of NumPy inputs too: a constant of the transform on that backend
    def f(x):
        c = ad.arange(3, dtype=dt)
        return ad.sum(ad.asarray(x, device=c.device) * c)
    g = grad(f)(ad.asarray(np.ones(3)))
    np.testing.assert_allclose(to_numpy(g), [0.0, 1.0, 2.0])


def test_numpy_dtypes_name_a_dtype_not_a_backend(eager):
    with ad.backend(eager.name):
        x = ad.arange(3, dtype=np.float64)
        assert ad.backends.backend_of(x) is eager.adapter and x.dtype == ad.float64
        assert np.dtype(ad.float32) == np.float32


@pytest.mark.parametrize("name", [b for b in EAGER if b != "numpy"])
def test_asarray_moves_numpy_data_to_a_device(name):
    b = Backend(name)
    dev = b.adapter.default_device()
    a = np.arange(4.0)
    x = ad.asarray(a, device=dev)
    assert ad.backends.backend_of(x) is b.adapter
    np.testing.assert_array_equal(to_numpy(x), a)
    # an arrayad array moved across backends keeps its derivative, which comes back home
    def f(t):
        return ad.sum(ad.asarray(t, device=dev) ** 2)
    t = ad.asarray(a)
    g = grad(f)(t)
    assert ad.backends.backend_of(g) is ad.get_backend("numpy")
    np.testing.assert_allclose(to_numpy(g), 2 * a)
    _, tangent = jvp(f, (t,), (ad.ones_like(t),))
    np.testing.assert_allclose(float(to_numpy(tangent)), 2 * a.sum())


# -- NumPy numbers among other backends' arrays -------------------------------------------------
def test_numpy_numbers_mix_as_python_numbers(eager):
    x = eager.tensor(np.array([1.0, 2.0], dtype=np.float32))
    for c in (np.float64(0.5), np.asarray(0.5), ad.asarray(np.asarray(0.5))):
        y = x * c
        assert ad.backends.backend_of(y) is eager.adapter
        if eager.name == "numpy":        # NumPy's own rules (NumPy 2: np.float64 is strong)
            assert y.dtype == (np.ones(1, np.float32) * np.asarray(c)).dtype
        else:
            assert y.dtype == ad.float32     # a Python float does not widen float32
        np.testing.assert_allclose(to_numpy(y), [0.5, 1.0])
    z = ad.where(x > 1.5, np.asarray(0.0), x)
    np.testing.assert_allclose(to_numpy(z), [1.0, 0.0])
    # under grad: the constant is a number, the derivative that of x * 0.5
    g = grad(lambda t: ad.sum(t * np.asarray(0.5)))(x)
    np.testing.assert_allclose(to_numpy(g), [0.5, 0.5])


@pytest.mark.skipif("torch" not in BACKENDS, reason="torch not installed")
def test_numpy_arrays_meeting_torch_data_are_refused_by_name():
    x = Backend("torch").tensor(np.ones(3))
    with pytest.raises(TypeError, match=r"numpy.*torch|torch.*numpy") as e:
        x + ad.asarray(np.ones(3))
    assert "asarray" in str(e.value)


def test_cpu_devices_of_two_backends_compare_equal(eager):
    # the CPU is one device whichever backend's object names it: a NumPy-backed array's device
    # equals every eager backend's CPU device, both ways round where that backend lets it
    here = Backend("numpy").tensor(np.ones(3)).device
    there = eager.tensor(np.ones(3)).device
    assert here == there and not (here != there)
    assert here == "cpu" and "cpu" == here and hash(here) == hash("cpu")
    if eager.name != "array_api_strict":   # (its Device answers False to any other object)
        assert there == here and not (there != here)
    assert {here: 1}["cpu"] == 1
    assert here != "cuda"
    if "torch" in BACKENDS:
        import torch
        assert here != torch.device("meta")


@pytest.mark.skipif("torch" not in BACKENDS, reason="torch not installed")
def test_scikit_learn_sees_one_device_and_arrayad_names_the_backends():
    # scikit-learn's device check compares the devices of its inputs with !=; a NumPy-backed and
    # a torch-backed array are both on the CPU, so the error is arrayad's, naming both backends
    # (before: scikit-learn's "Input arrays use different devices: cpu, cpu")
    sklearn = pytest.importorskip("sklearn")
    from sklearn.metrics.pairwise import rbf_kernel
    x = Backend("torch").tensor(np.ones((3, 2)))
    y = ad.asarray(np.ones((4, 2)))
    with sklearn.config_context(array_api_dispatch=True):
        for a, b in ((x, y), (y, x)):
            with pytest.raises(TypeError, match=r"numpy and torch|torch and numpy"):
                rbf_kernel(a, b)
        # the same data on one backend: scikit-learn's result, checked against NumPy's
        k = rbf_kernel(x, ad.asarray(y, device=x.device), gamma=0.5)
    np.testing.assert_allclose(to_numpy(k), rbf_kernel(np.ones((3, 2)), np.ones((4, 2)),
                                                       gamma=0.5))


def test_numpy_index_arrays_index_every_backend(eager):
    # NumPy positions and masks are host data like lists (scikit-learn's cross-validation splits
    # index torch-backed inputs with them): on every backend, eagerly and under grad
    a = np.arange(12.0).reshape(4, 3)
    x = eager.tensor(a)
    rows, mask = np.array([3, 0, 0]), np.array([True, False, True, False])
    for key in (rows, mask, (rows, Ellipsis), (slice(None), np.array([2, 0]))):
        np.testing.assert_array_equal(to_numpy(x[key]), a[key])
    want = np.zeros_like(a)
    np.add.at(want, rows, 1.0)
    np.testing.assert_allclose(to_numpy(grad(lambda t: ad.sum(t[rows]))(x)), want)
    y = eager.tensor(a)
    y[np.array([1, 2])] = 0.0
    b = a.copy()
    b[[1, 2]] = 0.0
    np.testing.assert_array_equal(to_numpy(y), b)


def test_python_numbers_written_into_arrays_of_another_kind(eager):
    # x[i] = v casts v to x's dtype (NumPy's rule) on every backend, a Python float into
    # integers too (array-api-strict itself refuses); x[i] += 1.1 on integers still raises
    for dtype, v in ((np.int64, 1.1), (np.int64, -1.7), (np.int64, True), (np.bool_, 2),
                     (np.float64, True)):
        a = np.array([2, 4], dtype=dtype)
        x = eager.tensor(a)
        x[0] = v
        a[0] = v
        got = to_numpy(x)
        assert got.dtype == a.dtype
        np.testing.assert_array_equal(got, a)
    x = eager.tensor(np.array([2, 4]))
    with pytest.raises(TypeError):
        x[0] += 1.1
    np.testing.assert_array_equal(to_numpy(x), [2, 4])


# -- integer results of traced values: constants of their level ---------------------------------
def _runs(x):
    # each element repeated once or twice, by a count computed from x
    return ad.repeat(x, ad.astype(x > 1.5, ad.int64) + 1)


def test_repeat_with_counts_computed_inside_transforms(eager):
    a = np.array([3.0, 1.0, 2.0, 1.0, 5.0])
    x = eager.tensor(a)
    counts = (a > 1.5).astype(int) + 1
    w = np.arange(1.0, counts.sum() + 1)
    f = lambda t: ad.sum(_runs(t) * ad.asarray(w, device=t.device, dtype=t.dtype))
    # reference: the sum of the weights over each element's copies
    ends = np.cumsum(counts)
    want = np.add.reduceat(w, np.r_[0, ends[:-1]])
    np.testing.assert_allclose(to_numpy(grad(f)(x)), want)
    _, t = jvp(f, (x,), (eager.tensor(np.ones(5)),))
    np.testing.assert_allclose(float(to_numpy(t)), want.sum())
    # vmap over x with counts that do not depend on the batch: fine
    out = vmap(lambda t: ad.repeat(t, eager.tensor(counts)))(eager.tensor(np.stack([a, a])))
    np.testing.assert_array_equal(to_numpy(out), np.stack([np.repeat(a, counts)] * 2))
    # counts that differ between batch elements: refused by name
    with pytest.raises(RuntimeError, match="repeat"):
        vmap(_runs)(eager.tensor(np.stack([a, a + 1])))
    # counts made inside vmap but the same for every element (unbatched): fine
    out = vmap(lambda t: ad.repeat(t, ad.astype(ad.asarray(counts), ad.int64)))(
        eager.tensor(np.stack([a, a])))
    np.testing.assert_array_equal(to_numpy(out), np.stack([np.repeat(a, counts)] * 2))
    # under jit the result's length would depend on values it does not know: refused (a
    # constant count would be stale at the next call with other counts of the same shape)
    with pytest.raises(RuntimeError, match="traced value"):
        ad.jit(lambda t, r: ad.repeat(t, r))(x, eager.tensor(counts))


def test_nonzero_unique_searchsorted_under_grad_and_jvp(eager):
    a = np.array([3.0, 1.0, 2.0, 1.0, 5.0])
    x = eager.tensor(a)

    def f(t):
        (i,) = ad.nonzero(t > 1.5)
        u, inv = ad.unique_inverse(t)
        s = ad.searchsorted(ad.sort(t), t)
        return (ad.sum(ad.take(t, i)) + ad.sum(t * ad.astype(inv, t.dtype))
                + ad.sum(t * ad.astype(s, t.dtype)) + ad.sum(u))
    # reference by hand: d/dt of the four sums
    inv = np.unique(a, return_inverse=True)[1]
    s = np.searchsorted(np.sort(a), a)
    first = np.zeros(5)
    first[[1, 2, 0, 4]] = 1.0    # unique keeps one of the two 1.0s (the first)
    want = (a > 1.5) + inv + s + first
    g = to_numpy(grad(f)(x))
    # the two equal elements may share the unique's unit between them
    np.testing.assert_allclose(g[[0, 2, 4]], want[[0, 2, 4]])
    np.testing.assert_allclose(g[1] + g[3], want[1] + want[3])
    _, t = jvp(f, (x,), (eager.tensor(np.ones(5)),))
    np.testing.assert_allclose(float(to_numpy(t)), want.sum())


@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted_places_nans_and_infinities_as_numpy(eager, side):
    # NaNs (last, after +inf) and infinities in the sorted array and among the values, with ties;
    # torch's own binary search puts NaN values, and +inf with side='right', after x1's NaNs
    rng = np.random.default_rng(3)
    x = rng.integers(4, size=(3, 40)).astype(float)
    x[rng.random(x.shape) < 0.2] = np.nan
    x[rng.random(x.shape) < 0.1] = np.inf
    x[rng.random(x.shape) < 0.1] = -np.inf
    x = np.sort(x, axis=-1)
    v = np.stack([rng.permutation(np.r_[x[0], np.nan, np.inf, -np.inf, 1.5, 7.0])] * 3)
    want = np.stack([np.searchsorted(x[i], v[i], side=side) for i in range(3)])
    got = ad.searchsorted(eager.tensor(x[0]), eager.tensor(v[0]), side=side)
    np.testing.assert_array_equal(to_numpy(got), want[0])
    got = ad.searchsorted(eager.tensor(x[0]), float("nan"), side=side)
    np.testing.assert_array_equal(to_numpy(got), np.searchsorted(x[0], np.nan, side=side))
    # vmap over the sorted arrays (the batching rule counts instead of searching)
    got = vmap(lambda a, b: ad.searchsorted(a, b, side=side))(eager.tensor(x), eager.tensor(v))
    np.testing.assert_array_equal(to_numpy(got), want)


def test_scipy_rankdata_under_grad(eager):
    a = np.array([3.0, 1.0, 2.0, 1.0, 5.0])
    x = eager.tensor(a)
    g = grad(lambda t: ad.sum(stats.rankdata(t) * t))(x)
    # ranks are constant where the values are distinct: the gradient is the ranks
    np.testing.assert_allclose(to_numpy(g), stats.rankdata(a), rtol=1e-6)


@pytest.mark.parametrize("name", [b for b in EAGER if b != "numpy"])
def test_numpy_data_is_placed_as_python_data_is(name):
    b = Backend(name)
    a = np.arange(3.0)
    with ad.backend(name):           # the default backend
        for x in (ad.asarray(a), ad.tensor(a), ad.asarray(np.float64(2.0)), ad.from_dlpack(a)):
            assert ad.backends.backend_of(x) is b.adapter
        # another backend's array keeps its backend
        assert ad.backends.backend_of(ad.asarray(Backend("numpy").tensor(a))) \
            is ad.get_backend("numpy")
    # inside a transform: the inputs' backend (library code's NumPy constants)
    t = b.tensor(a)
    g = grad(lambda u: ad.sum(u * ad.asarray(np.array([1.0, 2.0, 3.0]), dtype=u.dtype)))(t)
    assert ad.backends.backend_of(g) is b.adapter
    np.testing.assert_allclose(to_numpy(g), [1.0, 2.0, 3.0])


@pytest.mark.parametrize("fn, args", [
    ("gammainc", ([1, 2, 3], [1, 0, 2])), ("gammaincc", ([1, 2, 3], [1, 0, 2])),
    ("erf", ([0, 1, 2],)), ("gdtr", ([1, 2, -3], [1, 1, 2], [3, 4, 5])),
    ("chdtr", ([1, 2, 3], [1, 2, 3])), ("zeta", ([2, 3, 4], [2, 1, 3])),
])
def test_special_functions_of_integers_compute_in_floats(eager, fn, args):
    import scipy.special
    want = getattr(scipy.special, fn)(*[np.asarray(a) for a in args])
    got = getattr(ad.special, fn)(*[eager.tensor(np.asarray(a)) for a in args])
    assert ad.isdtype(got.dtype, "real floating")
    np.testing.assert_allclose(to_numpy(got), want, rtol=1e-6, equal_nan=True)


def test_moveaxis_out_of_range_says_which_axis_as_numpy(eager):
    # SciPy's tests match NumPy's "source: axis 10 is out of bounds for array of dimension 1"
    x = eager.tensor(np.ones(3))
    for src, dst, which in ((10, -1, "source"), (0, 5, "destination")):
        with pytest.raises(np.exceptions.AxisError) as want:
            np.moveaxis(np.ones(3), src, dst)
        with pytest.raises(IndexError, match=r"moveaxis: (?s:.*)" + str(want.value)):
            ad.moveaxis(x, src, dst)
        assert str(want.value).startswith(which)


@pytest.mark.parametrize("shape, mask_ndim", [((7,), 1), ((5, 3), 1), ((4, 3), 2), ((2, 3, 4), 2)])
def test_masked_writes_of_one_value_per_selected_element(eager, shape, mask_ndim):
    # x[mask] = v with an array v (SciPy's cubature writes half of 200,000 elements this way):
    # each selected position takes its own row of v, in order; the gradient reaches x where the
    # mask is False and v's rows where it is True
    rng = np.random.default_rng(1)
    a = rng.normal(size=shape)
    m = rng.random(shape[:mask_ndim]) > 0.4
    vals = rng.normal(size=(int(m.sum()),) + shape[mask_ndim:])
    want = a.copy()
    want[m] = vals
    x, mask, v = eager.tensor(a), eager.tensor(m), eager.tensor(vals)
    x[mask] = v
    np.testing.assert_array_equal(to_numpy(x), want)
    w = rng.normal(size=shape)

    def f(t, u):
        t = t * 1.0
        t[mask] = u
        return ad.sum(t * eager.tensor(w))
    gx, gv = grad(f, argnums=(0, 1))(eager.tensor(a), v)
    np.testing.assert_allclose(to_numpy(gx), np.where(
        m.reshape(m.shape + (1,) * (len(shape) - mask_ndim)), 0.0, w))
    np.testing.assert_allclose(to_numpy(gv), w[m])
    if len(shape) > mask_ndim:      # one row for every selected element
        row = rng.normal(size=shape[mask_ndim:])
        y = eager.tensor(a)
        y[mask] = eager.tensor(row)
        want = a.copy()
        want[m] = row
        np.testing.assert_array_equal(to_numpy(y), want)


def test_writes_stay_on_array_api_strict_devices():
    # array-api-strict has several devices whose arrays never mix (SciPy's device tests use
    # them): a write by mask, by positions or of one value keeps the array's own device
    xs = pytest.importorskip("array_api_strict")
    for d in xs.__array_namespace_info__().devices():
        if not xs.__array_namespace_info__().default_dtypes(device=d)["real floating"] \
                == xs.float64:
            continue
        with ad.backend("array_api_strict"):
            x = ad.asarray([1.0, 2.0, 3.0], device=d)
            mask = ad.asarray([True, False, True], device=d)
            x[mask] = 5.0
            x[mask] = ad.asarray([7.0, 8.0], device=d)
            x[ad.asarray([2, 0], device=d)] = ad.asarray([9.0, 10.0], device=d)
            g = grad(lambda t: ad.sum(t[ad.asarray([0, 0], device=d)]))(x)
        assert x.device == d and g.device == d
        np.testing.assert_array_equal(to_numpy(x), [10.0, 2.0, 9.0])
        np.testing.assert_array_equal(to_numpy(g), [2.0, 0.0, 0.0])


def test_every_array_api_strict_device_as_array_api_strict_itself():
    # array-api-strict's test devices without float64 (no_float64) or int64 (no_x64), which
    # SciPy's device tests use: what arrayad makes there (defaults, index positions, frequencies,
    # a Jacobian's basis) has the dtype and device array-api-strict itself gives, and mixes with
    # nothing from another device
    xs = pytest.importorskip("array_api_strict")
    a = np.array([[3.0, 1.0], [2.0, 5.0]])
    for d in xs.__array_namespace_info__().devices():
        fdt = xs.__array_namespace_info__().default_dtypes(device=d)["real floating"]
        with ad.backend("array_api_strict"):
            x = ad.asarray(a.tolist(), device=d)
            assert x.dtype == fdt and x.device == d
            assert ad.arange(3, device=d).dtype == xs.arange(3, device=d).dtype
            # (the standard's default: the device's default floating dtype, as linspace's;
            # array-api-strict's own fftfreq gives float64 on device2, against its own
            # default_dtypes there, and float32 where float64 is missing)
            f = ad.fft.fftfreq(4, device=d)
            assert f.dtype == xs.linspace(0.0, 1.0, 4, device=d).dtype == fdt and f.device == d
            np.testing.assert_allclose(to_numpy(f), np.fft.fftfreq(4))
            # positions: a mask write, an index read and write, their gradient
            y = ad.asarray(a.tolist(), device=d)
            y[y > 2.5] = 0.0
            want = np.where(a > 2.5, 0.0, a)
            np.testing.assert_array_equal(to_numpy(y), want)
            y[y < 1.5] = ad.asarray([7.0, 8.0, 9.0], device=d)   # one value a position
            want[want < 1.5] = [7.0, 8.0, 9.0]
            np.testing.assert_array_equal(to_numpy(y), want)
            i = ad.asarray([1, 0, 1], device=d)
            np.testing.assert_array_equal(to_numpy(x[i, 1]), a[[1, 0, 1], 1])
            g = grad(lambda t: ad.sum(t[i, 1] ** 2))(x)
            want = np.zeros_like(a)
            np.add.at(want, ([1, 0, 1], 1), 2 * a[[1, 0, 1], 1])
            np.testing.assert_allclose(to_numpy(g), want)
            assert g.dtype == fdt and g.device == d
            # sort: array-api-strict sorts on no_x64, where it has no int64 for argsort's indices
            srt = ad.sort(x, axis=0)
            own = xs.sort(xs.asarray(a, dtype=fdt, device=d), axis=0)
            assert srt.dtype == own.dtype and srt.device == own.device
            np.testing.assert_array_equal(to_numpy(srt), np.sort(a, axis=0))
            # a Jacobian's and a Hessian's basis on the input's device
            v = ad.asarray([1.0, 2.0, 3.0], device=d)
            for jac in (ad.func.jacrev, ad.func.jacfwd):
                j = jac(lambda t: t * t)(v)
                assert j.device == d
                np.testing.assert_allclose(to_numpy(j), np.diag([2.0, 4.0, 6.0]))
            h = ad.func.hessian(lambda t: ad.sum(t ** 3))(v)
            assert h.device == d
            np.testing.assert_allclose(to_numpy(h), np.diag([6.0, 12.0, 18.0]))


def test_format_specs_on_every_backend(eager):
    # f"{x:.3f}" of a one-element array (SciPy's tests format results this way) on every
    # backend, array-api-strict's arrays having no item() of their own; under vmap a lane's
    # value is not one number, and the error says so
    assert f"{eager.tensor(np.array(2.5)):.3f}" == "2.500"
    assert f"{eager.tensor(np.array([7], dtype=np.int64)):4d}" == "   7"
    assert f"{eager.tensor(np.array(1.0)):}" == str(eager.tensor(np.array(1.0)))
    with pytest.raises(Exception, match="format"):
        vmap(lambda t: (f"{t:.2f}", t)[1])(eager.tensor(np.array([1.0, 2.0])))
