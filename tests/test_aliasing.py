"""torch's aliasing model (NOTE [views] in the core, arrayad/_ops/views.py): every view operation
shares data with its base where torch does, every in-place method goes through one version
check, and writing through a view differentiates like torch's. Each case is written once against
a library (``lib`` is arrayad or torch) and the two runs are compared, on NumPy, array-api-strict
and torch backends, eagerly and under grad/vjp/jvp/vmap."""

import numpy as np
import pytest

import arrayad as ad
from arrayad.func import grad, jvp, vjp, vmap
from conftest import Backend, to_numpy

torch = pytest.importorskip("torch")
tfunc = pytest.importorskip("torch.func")

BACKENDS = ["numpy", "array_api_strict", "torch"]
X = np.arange(12.0).reshape(3, 4) / 7.0 - 0.5


def _on(name, a):
    """NumPy float64 data as an arrayad array on the backend ``name``."""
    return ad.asarray(Backend(name)(np.asarray(a, dtype=np.float64)))


def _data(lib, a, requires_grad=False):
    if lib is torch:
        return torch.tensor(a, dtype=torch.float64, requires_grad=requires_grad)
    return ad.tensor(a, requires_grad=requires_grad)


def _np(x):
    if isinstance(x, torch.Tensor):
        return x.detach().numpy()
    return to_numpy(x)


# Every view operation of the shared model: (name, view of a (3, 4) array). Each returns a view
# in torch; arrayad must agree.
VIEWS = [
    ("slice", lambda x: x[1:3]),
    ("int", lambda x: x[1]),
    ("strided", lambda x: x[:, ::2]),
    ("newaxis", lambda x: x[None, 1:]),
    ("ellipsis", lambda x: x[..., 2]),
    ("T", lambda x: x.T),
    ("mT", lambda x: x.mT),
    ("permute", lambda x: x.permute(1, 0)),
    ("transpose", lambda x: x.transpose(0, 1)),
    ("t", lambda x: x.t()),
    ("reshape", lambda x: x.reshape(2, 6)),
    ("view", lambda x: x.view(6, 2)),
    ("flatten", lambda x: x.flatten()),
    ("unsqueeze", lambda x: x.unsqueeze(1)),
    ("squeeze", lambda x: x[1:2].squeeze(0)),
    ("diagonal", lambda x: x.diagonal()),
    ("diagonal_offset", lambda x: x.diagonal(1)),
    ("unbind", lambda x: x.unbind(0)[2]),
    ("narrow", lambda x: x.narrow(1, 1, 2)),
    ("select", lambda x: x.select(1, 3)),
    ("T_slice", lambda x: x.T[1:3]),
    ("reshape_of_slice", lambda x: x[1:].reshape(-1)),
    ("view_of_view", lambda x: x.view(2, 6)[:, 1:4].T),
    ("detach", lambda x: x.detach()),
    ("data", lambda x: x.data),
]


def _write_through(lib, x, view):
    v = view(x)
    v.mul_(3.0)
    v += 1.0
    idx = (0,) * v.ndim
    v[idx] = -7.0
    return x, v


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("case", VIEWS, ids=[c[0] for c in VIEWS])
def test_writes_through_a_view_reach_the_base_as_in_torch(case, name):
    _, view = case
    want_x, want_v = _write_through(torch, _data(torch, X), view)
    with ad.backend(name):
        x = _on(name, X)
    got_x, got_v = _write_through(ad, x, view)
    np.testing.assert_array_equal(_np(got_x), _np(want_x))
    np.testing.assert_array_equal(_np(got_v), _np(want_v))


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("case", VIEWS, ids=[c[0] for c in VIEWS])
def test_writes_to_the_base_reach_every_view_as_in_torch(case, name):
    _, view = case

    def run(lib, x):
        v = view(x)
        w = view(x)
        x.add_(x * 2.0)
        x[1] = 5.0
        w.neg_()          # another view of the same base: v sees it through the base
        return v

    want = run(torch, _data(torch, X))
    with ad.backend(name):
        got = run(ad, _on(name, X))
    np.testing.assert_array_equal(_np(got), _np(want))


def _loss_with_view_write(lib, a, view):
    y = a * 1.5
    v = view(y)
    v.mul_(2.0)
    v[(0,) * v.ndim] = a[0, 1] ** 3              # a value with a history written into it
    v.add_(a[1, 2])
    w = lib.arange(12.0, dtype=y.dtype).reshape(3, 4) if lib is torch else \
        ad.reshape(ad.arange(12.0, dtype=y.dtype, device=y.device), (3, 4))
    return (y * w).sum() + (v * v).sum()


# (torch refuses in-place updates of unbind's outputs, "a function that returns multiple views";
# arrayad allows them, and the write-through tests above cover them)
GRAD_VIEWS = [c for c in VIEWS if c[0] not in ("detach", "data", "unbind")]


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("case", GRAD_VIEWS, ids=[c[0] for c in GRAD_VIEWS])
def test_gradient_through_view_writes_matches_torch(case, name):
    _, view = case
    at = _data(torch, X, requires_grad=True)
    _loss_with_view_write(torch, at, view).backward()
    want = at.grad.numpy()
    with ad.backend(name):
        a = ad.tensor(_on(name, X), requires_grad=True)
    _loss_with_view_write(ad, a, view).backward()
    np.testing.assert_allclose(_np(a.grad), want, rtol=1e-12)
    # the same function inside the transforms (functional there, as torch.func)
    with ad.backend(name):
        xa = _on(name, X)._value
    g = grad(lambda a: _loss_with_view_write(ad, a, view))(xa)
    np.testing.assert_allclose(to_numpy(g), want, rtol=1e-12)
    tg = tfunc.grad(lambda a: _loss_with_view_write(torch, a, view))(_data(torch, X))
    np.testing.assert_allclose(tg.numpy(), want, rtol=1e-12)


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("case", GRAD_VIEWS[::3], ids=[c[0] for c in GRAD_VIEWS[::3]])
def test_vjp_jvp_vmap_through_view_writes_match_torch_func(case, name):
    _, view = case

    def f(lib):
        def fn(a):
            y = lib.sin(a)
            v = view(y)
            v.mul_(2.0)
            v[(0,) * v.ndim] = a[2, 3]
            return y * a
        return fn

    ct = np.cos(X)
    t = np.sin(3 * X)
    with ad.backend(name):
        xa, cta, ta = (_on(name, v)._value for v in (X, ct, t))
    out, fn = vjp(f(ad), xa)
    tout, tfn = tfunc.vjp(f(torch), _data(torch, X))
    np.testing.assert_allclose(to_numpy(out), tout.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(to_numpy(fn(cta)[0]), tfn(_data(torch, ct))[0].numpy(),
                               rtol=1e-12)
    _, tan = jvp(f(ad), (xa,), (ta,))
    _, ttan = tfunc.jvp(f(torch), (_data(torch, X),), (_data(torch, t),))
    np.testing.assert_allclose(to_numpy(tan), ttan.numpy(), rtol=1e-12)
    batch = np.stack([X, X * 2, -X])
    with ad.backend(name):
        ba = _on(name, batch)._value
    np.testing.assert_allclose(to_numpy(vmap(f(ad))(ba)),
                               tfunc.vmap(f(torch))(_data(torch, batch)).numpy(), rtol=1e-12)


def test_a_view_written_under_vmap_with_a_batched_value():
    """An array made inside vmap without a batched input, written through a view with a batched
    value: the base becomes batched (torch.func refuses this write; arrayad makes it, so the
    result equals a loop over the batch)."""
    def f(a):
        y = ad.zeros((2, 3), dtype=a.dtype)
        y.T[1] = a                                # a (2,) row of y.T: column 1 of y
        return y
    batch = np.arange(8.0).reshape(4, 2)
    got = vmap(f)(batch)
    np.testing.assert_array_equal(to_numpy(got), np.stack([to_numpy(f(b)) for b in batch]))


# -- in-place methods ----------------------------------------------------------------------------
Y = np.array([[0.5, -1.25, 2.0], [0.75, 1.5, -0.25]])
B = np.array([[1.5, 0.25, -0.75], [-2.0, 0.5, 1.25]])
# (name, update of y, the operands made from a second input b: an operand computed from y itself
# would save y, and torch's version check, like arrayad's, refuses that backward pass; the
# version-check test below covers it)
INPLACE = [
    ("add_", lambda lib, y, b: y.add_(b * 2)),
    ("add_alpha", lambda lib, y, b: y.add_(b * b, alpha=0.5)),
    ("sub_", lambda lib, y, b: y.sub_(b ** 2, alpha=2)),
    ("mul_", lambda lib, y, b: y.mul_(b + 1)),
    ("div_", lambda lib, y, b: y.div_(b * b + 1)),
    ("div_floor", lambda lib, y, b: y.div_(0.3, rounding_mode="floor")),
    ("div_trunc", lambda lib, y, b: y.div_(0.3, rounding_mode="trunc")),
    ("pow_", lambda lib, y, b: y.pow_(2)),
    ("neg_", lambda lib, y, b: y.neg_()),
    ("zero_", lambda lib, y, b: y.zero_()),
    ("fill_", lambda lib, y, b: y.fill_(2.5)),
    ("fill_tensor", lambda lib, y, b: y.fill_(b[0, 1] * 3)),
    ("copy_", lambda lib, y, b: y.copy_(b[0] * 3)),
    ("clamp_", lambda lib, y, b: y.clamp_(-0.5, 1.0)),
    ("clamp_min_", lambda lib, y, b: y.clamp_min_(0.6)),
    ("clamp_max_", lambda lib, y, b: y.clamp_max_(0.6)),
    ("masked_fill_", lambda lib, y, b: y.masked_fill_(b > 0, 0.25)),
    ("lerp_", lambda lib, y, b: y.lerp_(b, 0.25)),
    ("addcmul_", lambda lib, y, b: y.addcmul_(b, b + 1, value=0.5)),
    ("addcdiv_", lambda lib, y, b: y.addcdiv_(b, b * b + 1, value=2)),
    ("atan2_", lambda lib, y, b: y.atan2_(b + 2)),
    ("hypot_", lambda lib, y, b: y.hypot_(b + 2)),
    ("maximum", lambda lib, y, b: y.copy_(lib.maximum(b, b * 0 + 0.6))),
] + [(f"{n}_", (lambda n: lambda lib, y, b: getattr(y, n + "_")())(n))
     for n in ["sin", "cos", "tanh", "exp", "expm1", "sigmoid", "relu", "abs", "square",
               "reciprocal", "sign", "floor", "ceil", "round", "trunc", "atan", "sinh"]]


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("case", INPLACE, ids=[c[0] for c in INPLACE])
def test_in_place_methods_match_torch(case, name):
    _, update = case

    def run(lib, a, b):
        y = a * 1.0
        out = update(lib, y, b)
        assert out is y                      # in-place methods return the array itself
        return (y * (y + 1)).sum() + (b * b).sum(), y

    at, bt = _data(torch, Y, requires_grad=True), _data(torch, B, requires_grad=True)
    lt, yt = run(torch, at, bt)
    lt.backward()
    with ad.backend(name):
        a, b = (ad.tensor(_on(name, v), requires_grad=True) for v in (Y, B))
    la, ya = run(ad, a, b)
    np.testing.assert_allclose(_np(ya), yt.detach().numpy(), rtol=1e-12)
    la.backward()
    for mine, theirs in ((a, at), (b, bt)):
        # (torch gives zeros for an input the update discarded, fill_/copy_ of b; arrayad None,
        # as for any input the output does not depend on)
        got = np.zeros_like(Y) if mine.grad is None else _np(mine.grad)
        np.testing.assert_allclose(got, theirs.grad.numpy(), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("case", INPLACE, ids=[c[0] for c in INPLACE])
def test_in_place_methods_go_through_the_version_check(case, name):
    """Using a saved value after an in-place method changed it raises torch's error."""
    _, update = case

    def run(lib, a):
        y = a * 1.0
        z = (y * y).sum()                    # saves y
        update(lib, y, y * 0.5)
        z.backward()

    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        run(torch, _data(torch, Y, requires_grad=True))
    with ad.backend(name):
        a = ad.tensor(_on(name, Y), requires_grad=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        run(ad, a)


def test_in_place_update_of_a_saved_leaf_under_no_grad_is_caught():
    for lib in (torch, ad):
        x = _data(lib, [1.0, 2.0, 3.0], requires_grad=True)
        z = (lib.sin(x) * x).sum()
        with lib.no_grad():
            x.zero_()
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            z.backward()


@pytest.mark.parametrize("name", BACKENDS)
def test_sgd_step_through_data(name):
    """The classic ``p.data -= lr * p.grad``: the leaf changes, stays a leaf that requires grad."""
    def run(lib, p0):
        p = _data(lib, p0, requires_grad=True)
        for _ in range(3):
            loss = ((p * p - 1.0) ** 2).sum()
            loss.backward()
            p.data -= 0.1 * p.grad
            p.grad = None
        return p

    want = run(torch, [0.3, 1.7])
    with ad.backend(name):
        got = run(ad, ad.asarray([0.3, 1.7], dtype=ad.float64))
    assert got.is_leaf and got.requires_grad
    np.testing.assert_allclose(_np(got), want.detach().numpy(), rtol=1e-14)


def test_writing_data_keeps_the_history_and_bumps_the_version():
    for lib in (torch, ad):
        a = _data(lib, [1.0, 2.0], requires_grad=True)
        y = a * 3
        y.data[0] = 10.0                     # data only: y's history is kept
        np.testing.assert_array_equal(_np(y), [10.0, 6.0])
        assert y.grad_fn is not None
        y.sum().backward()
        np.testing.assert_array_equal(_np(a.grad), [3.0, 3.0])


@pytest.mark.parametrize("name", BACKENDS)
def test_in_place_type_rules(name):
    with ad.backend(name):
        i = ad.asarray([1, 2, 3])
        f32 = ad.asarray([1.0, 2.0], dtype=ad.float32)
        f64 = ad.asarray([0.5, 0.25])
    ti = torch.tensor([1, 2, 3])
    with pytest.raises(RuntimeError, match="can't be cast"):
        ti += 1.1
    # (array-api-strict refuses int + float itself; torch promotes int + float to float32)
    with pytest.raises(TypeError, match="cannot cast the result from float(32|64) to int64|"
                                        "can only be promoted with floating-point"):
        i += 1.1
    with pytest.raises(TypeError, match="cannot cast|not allowed|promot"):
        i.add_(f64[0])
    np.testing.assert_array_equal(to_numpy(i), [1, 2, 3])      # nothing changed
    i += 2                                                    # int into int: fine
    np.testing.assert_array_equal(to_numpy(i), [3, 4, 5])
    f32 += f64                                                # float64 into float32: same kind
    assert f32.dtype == ad.float32
    np.testing.assert_allclose(to_numpy(f32), [1.5, 2.25])
    with ad.backend(name):
        wide = ad.ones((2, 2), dtype=ad.float64)
    with pytest.raises(ValueError, match="cannot change the shape"):
        f64 += wide


def test_array_api_extra_at_refuses_to_truncate():
    xpx = pytest.importorskip("array_api_extra")
    x = ad.asarray([1, 2, 3])
    with pytest.raises(TypeError, match="cannot cast"):
        xpx.at(x, 1).add(1.1)
    np.testing.assert_array_equal(to_numpy(xpx.at(x, 1).add(2)), [1, 4, 3])


def test_read_only_broadcast_views():
    x = ad.asarray([1.0, 2.0])
    for v in (ad.broadcast_to(x, (3, 2)), x.expand(2, 2)):
        with pytest.raises(ValueError, match="read-only"):
            v[0, 0] = 5.0
        with pytest.raises(ValueError, match="read-only"):
            v[0].add_(1.0)                                  # a view of it is read-only too
    np.testing.assert_array_equal(to_numpy(x), [1.0, 2.0])


def test_reshape_copies_where_numpy_copies():
    """reshape is a view only where the data need not move, as NumPy and torch decide."""
    for lib in (np, torch, ad):
        x = np.arange(6.0).reshape(2, 3)
        x = x if lib is np else _data(lib, x)
        r = x.T.reshape(-1)                 # a transposed array: the reshape copies
        r[0] = 99.0
        assert float(x[0, 0]) == 0.0
        s = x[:, 1:].reshape(-1)            # not contiguous either
        s[0] = 99.0
        assert float(x[0, 1]) == 1.0
        c = x[1:].reshape(3)                # a contiguous slice: a view
        c[0] = 42.0
        assert float(x[1, 0]) == 42.0
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        ad.reshape(ad.zeros((2, 3)), (3, 2)).T.view(6)
    with pytest.raises(ValueError, match="without copying"):
        ad.reshape(ad.zeros((2, 3)).T, (6,), copy=False)


def test_scipy_writes_through_reshaped_views():
    """scipy.integrate.tanhsinh and nsum write through ``reshape(x.T)``-style views of their own
    arrays; on arrayad arrays they give NumPy's values, and differentiate."""
    integrate = pytest.importorskip("scipy.integrate")
    want = integrate.tanhsinh(lambda x: np.exp(-x ** 2), np.asarray([0.0, 0.5]),
                              np.asarray([1.0, 2.0]))
    got = integrate.tanhsinh(lambda x: ad.exp(-x ** 2), ad.asarray([0.0, 0.5]),
                             ad.asarray([1.0, 2.0]))
    np.testing.assert_allclose(to_numpy(got.integral), want.integral, rtol=1e-14)
    want = integrate.nsum(lambda k: 1 / k ** 2, np.asarray(1.0), np.asarray(np.inf))
    got = integrate.nsum(lambda k: 1 / k ** 2, ad.asarray(1.0), ad.asarray(np.inf))
    np.testing.assert_allclose(to_numpy(got.sum), want.sum, rtol=1e-14)
    # d/da of the integral of exp(-a x^2) over [0, 1] is minus the integral of x^2 exp(-x^2)
    g = grad(lambda a: integrate.tanhsinh(lambda x: ad.exp(-a * x ** 2), ad.asarray(0.0),
                                          ad.asarray(1.0)).integral)(np.asarray(1.0))
    ref = integrate.quad(lambda x: -x ** 2 * np.exp(-x ** 2), 0, 1)[0]
    np.testing.assert_allclose(to_numpy(g), ref, rtol=1e-10)


def test_dask_arrays_write_through_views():
    """Dask arrays have no views of their own; arrayad's views give them torch's behaviour."""
    da = pytest.importorskip("dask.array")

    def f(lib, a):
        y = a * 1.0
        y.T[1] = a[:, 0] ** 2
        y.reshape(-1)[4] = a[1, 2] * 3
        return (y * y).sum()

    x = np.arange(6.0).reshape(2, 3) / 5
    want = tfunc.grad(lambda a: f(torch, a))(_data(torch, x)).numpy()
    got = grad(lambda a: f(ad, a))(da.from_array(x, chunks=(1, 3)))
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12)
    t = ad.asarray(da.from_array(x, chunks=(1, 3)))
    t.T[0, 1] = 100.0
    assert float(t[1, 0]) == 100.0


def test_writing_a_detached_view_inside_transforms():
    """Writing into ``y.detach()`` changes y's data and keeps y's history (torch's): for
    ``y = sin(a); y.detach() *= 2; out = y * a`` the derivative is ``2 sin(a) + a cos(a)``."""
    def f(lib):
        def fn(a):
            y = lib.sin(a)
            d = y.detach()
            d.mul_(2.0)
            return y * a
        return fn

    a = np.array([0.3, -1.2, 2.0])
    want = 2 * np.sin(a) + a * np.cos(a)
    at = _data(torch, a, requires_grad=True)
    f(torch)(at).sum().backward()
    np.testing.assert_allclose(at.grad.numpy(), want, rtol=1e-14)
    for name in BACKENDS:
        with ad.backend(name):
            x = _on(name, a)
        t = ad.tensor(x, requires_grad=True)
        f(ad)(t).sum().backward()
        np.testing.assert_allclose(to_numpy(t.grad), want, rtol=1e-14)
        xr = x._value
        np.testing.assert_allclose(to_numpy(grad(lambda v: ad.sum(f(ad)(v)))(xr)), want,
                                   rtol=1e-14)
        _, tangent = jvp(f(ad), (xr,), (ad.ones_like(x)._value,))
        np.testing.assert_allclose(to_numpy(tangent), want, rtol=1e-14)
        batched = vmap(grad(lambda v: ad.sum(f(ad)(v))))(ad.stack([x, 2 * x])._value)
        np.testing.assert_allclose(to_numpy(batched)[1], 2 * np.sin(2 * a) + 2 * a * np.cos(2 * a),
                                   rtol=1e-14)


def _complex_parts(lib, a):
    z = a * (1 + 1j)
    z.real.mul_(3.0)
    z.imag[0] = a[1] ** 2
    w = z.imag
    z[1] = z[1] * 2
    return z, w


@pytest.mark.parametrize("name", BACKENDS)
def test_real_and_imag_of_complex_arrays_are_views(name):
    a = np.array([0.5, 2.0, -1.5])
    zt, wt = _complex_parts(torch, _data(torch, a))
    z, w = _complex_parts(ad, _on(name, a))
    np.testing.assert_array_equal(to_numpy(z), zt.numpy())
    np.testing.assert_array_equal(to_numpy(w), wt.numpy())     # w saw the base's update

    def loss(lib, a):
        z, w = _complex_parts(lib, a)
        return (z * z.conj()).real.sum() + (w * a).sum()

    at = _data(torch, a, requires_grad=True)
    loss(torch, at).backward()
    got = grad(lambda v: loss(ad, v))(_on(name, a)._value)
    np.testing.assert_allclose(to_numpy(got), at.grad.numpy(), rtol=1e-14)
    t = ad.tensor(_on(name, a), requires_grad=True)
    loss(ad, t).backward()
    np.testing.assert_allclose(to_numpy(t.grad), at.grad.numpy(), rtol=1e-14)
    _, tangent = jvp(lambda v: _complex_parts(ad, v)[0], (_on(name, a)._value,),
                     (_on(name, np.ones(3))._value,))
    _, ttangent = tfunc.jvp(lambda v: _complex_parts(torch, v)[0], (_data(torch, a),),
                            (_data(torch, np.ones(3)),))
    np.testing.assert_allclose(to_numpy(tangent), ttangent.numpy(), rtol=1e-14)
    batch = np.stack([a, 2 * a])
    got = vmap(lambda v: _complex_parts(ad, v)[0])(_on(name, batch)._value)
    want = tfunc.vmap(lambda v: _complex_parts(torch, v)[0])(_data(torch, batch))
    np.testing.assert_array_equal(to_numpy(got), want.numpy())


def test_writing_a_complex_part_keeps_infinities_exactly():
    for name in BACKENDS:
        z = ad.asarray(Backend(name)(np.array([1 + 2j, complex(1.0, np.inf)])))
        if name == "array_api_strict":
            # (the standard has no complex constructor: re + im * 1j would turn inf into nan)
            with pytest.raises(ValueError, match="not all finite"):
                z.real[0] = 10.0
            continue
        z.real[0] = 10.0
        np.testing.assert_array_equal(to_numpy(z), [10 + 2j, complex(1.0, np.inf)])
