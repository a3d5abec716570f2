"""Dask gradients along the chunked axis: the VJP of a unit-step slice pads the cotangent with
zeros chunked like the input (as a hand-written Dask gradient does) instead of writing into a
zeros array with ``__setitem__``.

References: the same functions' gradients written by hand in NumPy (closed forms), and torch.func
where torch is installed; the structure of the graph (no ``setitem`` layer, zeros chunked like the
input) is checked on Dask's own graph.
"""
import numpy as np
import pytest

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")

import arrayad as ad  # noqa: E402
from conftest import no_dask_compute as no_compute, to_numpy  # noqa: E402
import arrayad.dask  # noqa: E402,F401  (ad.dask)
from arrayad.func import grad, hessian, jvp, vmap  # noqa: E402


def _layer_names(a):
    return [name.rsplit("-", 1)[0] for name in a.__dask_graph__().layers]


def _pad(g, lo, hi):
    return np.concatenate([np.zeros(lo), g, np.zeros(hi)])


# loss on a 1-d x, and its gradient written by hand in NumPy
CHUNKED_AXIS = {
    "slice": (lambda x: ad.sum(ad.sin(x[1:-1])),
              lambda x: _pad(np.cos(x[1:-1]), 1, 1)),
    "diff": (lambda x: ad.sum(ad.sin(ad.diff(x))),
             lambda x: _pad(np.cos(np.diff(x)), 1, 0) - _pad(np.cos(np.diff(x)), 0, 1)),
    "diff n=2": (lambda x: ad.sum(ad.sin(ad.diff(x, n=2))),
                 lambda x: (_pad(np.cos(np.diff(x, 2)), 2, 0) - 2 * _pad(np.cos(np.diff(x, 2)), 1, 1)
                            + _pad(np.cos(np.diff(x, 2)), 0, 2))),
    "concat (edge padding)": (lambda x: ad.sum(ad.sin(ad.concat([x[:1], x, x[-1:]]))),
                              lambda x: np.cos(x) * np.r_[2, np.ones(len(x) - 2), 2]),
    "moving average": (lambda x: ad.sum(ad.sin((x[2:] + x[1:-1] + x[:-2]) / 3)),
                       lambda x: sum(_pad(np.cos((x[2:] + x[1:-1] + x[:-2]) / 3) / 3, lo, 2 - lo)
                                     for lo in range(3))),
    "large and small slice": (lambda x: ad.sum(ad.sin(x[1:])) + ad.sum(ad.cos(x[:2])),
                              lambda x: _pad(np.cos(x[1:]), 1, 0) - _pad(np.sin(x[:2]), 0, len(x) - 2)),
    "int and negative int": (lambda x: ad.sin(x[3]) + ad.sin(x[-1]),
                             lambda x: np.cos(x) * (np.arange(len(x)) % (len(x) - 1) == 3)
                             + np.cos(x) * (np.arange(len(x)) == len(x) - 1)),
    "empty slice": (lambda x: ad.sum(ad.sin(x[5:2])) + ad.sum(x[4:]),
                    lambda x: _pad(np.ones(len(x) - 4), 4, 0)),
}


@pytest.mark.parametrize("name", list(CHUNKED_AXIS))
def test_chunked_axis_gradients_pad_instead_of_setitem(name):
    f, hand = CHUNKED_AXIS[name]
    xn = np.random.default_rng(0).standard_normal(203)
    x = da.from_array(xn, chunks=50)
    with no_compute():
        g = grad(f)(x)
    assert "setitem" not in _layer_names(g)
    # the zeros follow x's chunk boundaries (da.pad would chunk them like the padded value: one
    # element per chunk for x[:1]); the slices' offsets split chunks (a few per chunk of x), as
    # in a hand-written gradient
    assert set(np.cumsum(x.chunks[0])) <= set(np.cumsum(g.chunks[0]))
    assert len(g.chunks[0]) <= 6 * len(x.chunks[0])
    np.testing.assert_allclose(g.compute(), hand(xn), rtol=1e-12, atol=1e-12)


def _tasks_per_layer(a):
    """How many tasks each kind of layer of ``a``'s graph has (add, concatenate, ...)."""
    out = {}
    for name, layer in a.__dask_graph__().layers.items():
        kind = name.rsplit("-", 1)[0]
        out[kind] = out.get(kind, 0) + len(layer)
    return out


def test_small_slice_cotangent_is_added_only_where_it_lands():
    # concat([x[:1], x, x[-1:]]): the edges' cotangents are added into x's own cotangent at the
    # edges only, as by hand; adding them padded with zeros made a zeros array, re-split both
    # sides and added over every chunk (2.5x the tasks of the hand-written gradient)
    f = CHUNKED_AXIS["concat (edge padding)"][0]
    xn = np.random.default_rng(4).standard_normal(203)
    x = da.from_array(xn, chunks=50)
    with no_compute():
        g = grad(f)(x)
        c = da.cos(x)
        by_hand = da.concatenate([2 * c[:1], c[1:-1], 2 * c[-1:]])
    tasks = _tasks_per_layer(g)
    assert "zeros_like" not in tasks and not any(k.startswith("rechunk") for k in tasks)
    assert tasks["add"] == 2   # one element at each edge
    assert len(g.__dask_graph__()) <= 2.5 * len(by_hand.__dask_graph__())
    np.testing.assert_allclose(g.compute(), by_hand.compute(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(g.compute(), np.cos(xn) * np.r_[2, np.ones(201), 2], rtol=1e-12)


def test_slice_added_into_other_uses_along_a_later_axis_matches_numpy():
    # a middle block of columns used beside x itself and an edge column (axis 1 padded)
    xn = np.random.default_rng(5).standard_normal((6, 40))

    def f(x):
        return ad.sum(ad.sin(x[:, 13:17]) * x[:, 3:7]) + ad.sum(x ** 2) + ad.sum(ad.cos(x[:, -1:]))

    with no_compute():
        g = grad(f)(da.from_array(xn, chunks=(4, 10)))
    expected = 2 * xn
    expected[:, 13:17] += np.cos(xn[:, 13:17]) * xn[:, 3:7]
    expected[:, 3:7] += np.sin(xn[:, 13:17])
    expected[:, -1:] -= np.sin(xn[:, -1:])
    np.testing.assert_allclose(g.compute(), expected, rtol=1e-12, atol=1e-12)


def test_moving_average_graph_is_no_larger_than_by_hand():
    # slices covering most of x are added as padded arrays (slicing around them only adds tasks)
    f = CHUNKED_AXIS["moving average"][0]
    x = da.from_array(np.random.default_rng(6).standard_normal(203), chunks=50)
    with no_compute():
        g = grad(f)(x)
        c = da.cos((x[2:] + x[1:-1] + x[:-2]) / 3) / 3
        by_hand = da.pad(c, (2, 0)) + da.pad(c, (1, 1)) + da.pad(c, (0, 2))
    assert len(g.__dask_graph__()) <= len(by_hand.__dask_graph__())
    np.testing.assert_allclose(g.compute(), by_hand.compute(), rtol=1e-12, atol=1e-12)


KEYS = {
    "rows 1:": (slice(1, None),),
    "block and int": (slice(2, -3), 1),
    "None, Ellipsis, int": (None, Ellipsis, 3),
    "Ellipsis, columns": (Ellipsis, slice(1, -1)),
    "step 2 (scatter)": (slice(None, None, 2),),
    "negative step": (slice(None, None, -1), slice(1, 4)),
}


@pytest.mark.parametrize("name", list(KEYS))
def test_two_dimensional_keys_match_numpy(name):
    key = KEYS[name]
    xn = np.random.default_rng(1).standard_normal((7, 9))
    wn = np.arange(1.0, 1.0 + xn[key].size).reshape(xn[key].shape)
    w = da.from_array(wn)
    with no_compute():
        g = grad(lambda x: ad.sum(ad.sin(x[key]) * w))(da.from_array(xn, chunks=(3, 4)))
    expected = np.zeros_like(xn)
    np.add.at(expected, key, np.cos(xn[key]) * wn)
    np.testing.assert_allclose(g.compute(), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning",
                            "ignore:invalid value:RuntimeWarning")
def test_strong_zeros_survive_the_padding():
    # NOTE [strong zeros]: the positions outside the slice are zero by construction, so that
    # sqrt's infinite derivative at 0 gives 0 there, on Dask as on NumPy
    xn = np.array([0.0, 1.0, 4.0, 9.0, 0.0, 2.0])

    def f(x):
        return ad.sum(ad.sqrt(x)[1:4] * 2.0)

    g = grad(f)(da.from_array(xn, chunks=4)).compute()
    np.testing.assert_array_equal(g, [0.0, 1.0, 0.5, 1 / 3, 0.0, 0.0])


def test_slices_under_vmap_and_jvp_match_numpy():
    xn = np.random.default_rng(2).standard_normal((4, 11))
    x = da.from_array(xn, chunks=(2, 4))
    f = CHUNKED_AXIS["moving average"][0]
    hand = CHUNKED_AXIS["moving average"][1]
    with no_compute():
        per_row = vmap(grad(f))(x)
        t = da.ones_like(x[0])
        _, tangent = jvp(grad(f), (x[0],), (t,))
    np.testing.assert_allclose(per_row.compute(), np.stack([hand(r) for r in xn]), atol=1e-12)
    # the JVP of the gradient along ones: central differences of the hand-written gradient
    h = 1e-6
    fd = (hand(xn[0] + h) - hand(xn[0] - h)) / (2 * h)
    np.testing.assert_allclose(tangent.compute(), fd, atol=1e-6)


# -- vmap(chunk_size=) over Dask arrays ------------------------------------------------------------
def test_vmap_chunk_size_on_dask_is_one_pass_over_the_data():
    # Passes over the batch joined into one graph each read X: Dask then held all of X until
    # the last pass. On Dask, chunk_size chunks the batch axis of one pass instead.
    rng = np.random.default_rng(3)
    Xn, yn, Wn = rng.standard_normal((60, 3)), rng.standard_normal(60), rng.standard_normal((10, 3))
    X, y = da.from_array(Xn, chunks=(20, 3)), da.from_array(yn, chunks=20)
    W = da.from_array(Wn, chunks=(10, 3))
    f = grad(lambda w: ad.mean((X @ w - y) ** 2))
    with no_compute():
        out = vmap(f, chunk_size=4)(W)
    names = _layer_names(out)
    assert names.count("matmul") == 2 and "concatenate" not in names   # (one pass)
    assert out.chunks == ((4, 4, 2), (3,))
    # the closed form of least squares' gradient, per row of W
    expected = (2.0 / 60) * (Xn @ Wn.T - yn[:, None]).T @ Xn
    np.testing.assert_allclose(out.compute(), expected, rtol=1e-12)
    # out_dims keeps its meaning
    t = vmap(lambda w: w * 2.0, out_dims=1, chunk_size=3)(W)
    np.testing.assert_allclose(t.compute(), 2 * Wn.T)


def test_per_sample_gradients_scale_the_small_product_as_by_hand():
    # The VJP of mean(r ** 2) multiplies the (B, n) residual by 2 and by the mean's 1 / n: two
    # passes over it (1.35x the hand-written time). The factors go past the matrix product
    # instead, onto its (B, d) result, as (2 / n) * (X.T @ r) does by hand.
    rng = np.random.default_rng(6)
    Xn, yn, Wn = rng.standard_normal((400, 3)), rng.standard_normal(400), rng.standard_normal((8, 3))
    X, y = da.from_array(Xn, chunks=(100, 3)), da.from_array(yn, chunks=100)
    W = da.from_array(Wn, chunks=(4, 3))
    with no_compute():
        out = vmap(grad(lambda w: ad.mean((X @ w - y) ** 2)), chunk_size=4)(W)
    big = [name for name, layer in out.__dask_graph__().layers.items()
           if name.startswith(("multiply", "mul")) and len(layer) > W.numblocks[0]]
    assert big == []   # (no product task per chunk of X)
    expected = (2.0 / 400) * (Xn @ Wn.T - yn[:, None]).T @ Xn
    np.testing.assert_allclose(out.compute(), expected, rtol=1e-12)


@pytest.mark.parametrize("case", ["rows", "columns", "scalar", "both", "batched", "not per row",
                                  "float32 factor", "written"])
def test_products_by_small_factors_match_numpy(case):
    """A matrix product of arrays scaled by small factors (per row on the left, per column on
    the right, a number) is the scaled product of their bases; a factor that varies along the
    summed axis, of another dtype, or of an array written since, is multiplied in as it is."""
    from arrayad.backends import backend_of
    xp = backend_of(da.zeros(1)).xp
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((2, 64, 40)), rng.standard_normal((2, 40, 48))
    r, c = rng.standard_normal((64, 1)), rng.standard_normal((1, 48))
    A, B = da.from_array(a, chunks=(1, 16, 40)), da.from_array(b, chunks=(1, 40, 16))
    if case == "rows":
        x1, x2, expected = xp.multiply(A, r), B, (a * r) @ b
    elif case == "columns":
        x1, x2, expected = A, xp.multiply(c, B), a @ (b * c)
    elif case == "scalar":
        x1, x2, expected = xp.multiply(xp.multiply(3.0, A), 2), B, (6 * a) @ b
    elif case == "both":
        x1, x2 = xp.multiply(xp.multiply(A, r), 0.5), xp.multiply(B, c)
        expected = (a * r * 0.5) @ (b * c)
    elif case == "batched":   # (one factor per matrix of the batch and row)
        f = rng.standard_normal((2, 64, 1))
        x1, x2, expected = xp.multiply(A, f), B, (a * f) @ b
    elif case == "not per row":   # (varies along the summed axis: stays a product)
        f = rng.standard_normal((1, 40))
        x1, x2, expected = xp.multiply(A, f), B, (a * f) @ b
    elif case == "float32 factor":
        f = r.astype(np.float32)
        x1, x2, expected = xp.multiply(A, f), B, (a * f) @ b
    else:   # the base written in place after the product: the product keeps its values
        A2 = da.from_array(a.copy(), chunks=(1, 16, 40))
        x1, x2, expected = xp.multiply(A2, r), B, (a * r) @ b
        A2[0, 0, 0] = 100.0
    out = xp.matmul(x1, x2)
    assert out.dtype == np.float64
    np.testing.assert_allclose(out.compute(), expected, rtol=1e-12, atol=1e-12)


def test_a_small_seed_of_ones_is_one_chunk():
    # vmap(grad(f)) seeds the backward pass with ones per example: chunked like the batch in
    # pieces of k, Dask's scheduler held the whole (n, B) residual of least squares
    from arrayad.backends import backend_of
    x = da.ones(40, chunks=4)
    assert backend_of(x).xp.ones_like(x).chunks == ((40,),)
    big = da.zeros(2 ** 18, chunks=2 ** 15)   # (2 MiB: chunked like x, as the arrays it meets)
    assert backend_of(big).xp.ones_like(big).chunks == big.chunks


# -- hessian: no product by the identity ------------------------------------------------------------
def test_hessian_of_least_squares_does_not_multiply_by_an_identity():
    # jacfwd's basis is the identity: X @ I per chunk doubled the time and memory of X.T @ X
    rng = np.random.default_rng(4)
    Xn, yn, wn = rng.standard_normal((60, 3)), rng.standard_normal(60), rng.standard_normal(3)
    X, y = da.from_array(Xn, chunks=(20, 3)), da.from_array(yn, chunks=20)
    with no_compute():
        h = hessian(lambda w: ad.mean((X @ w - y) ** 2))(da.from_array(wn))
    assert _layer_names(h).count("matmul") == 1 and "eq" not in _layer_names(h)
    np.testing.assert_allclose(h.compute(), (2.0 / 60) * Xn.T @ Xn, rtol=1e-12)


def test_products_with_dask_identities_match_numpy():
    from arrayad.backends import backend_of
    xp = backend_of(da.zeros(1)).xp
    a = np.arange(12.0).reshape(4, 3)
    eye3 = xp.eye(3, dtype=np.float32)
    for x1, x2, expected in [(da.from_array(a), eye3, a), (xp.matrix_transpose(eye3), da.from_array(a.T), a.T),
                             (da.from_array(a[0]), eye3, a[0]), (eye3, da.from_array(a[0]), a[0]),
                             (xp.eye(4, 3), da.from_array(a.T), np.eye(4, 3) @ a.T)]:
        out = xp.matmul(x1, x2)
        assert out.dtype == np.float64
        np.testing.assert_array_equal(out.compute(), expected)


# -- rechunk, to_backend_array, Dask's functions refused by name -----------------------------------
def test_rechunk_is_differentiable():
    xn = np.linspace(0.5, 3.0, 6)
    x = da.from_array(xn, chunks=3)
    with no_compute():
        g = grad(lambda t: ad.sum(ad.sin(t.rechunk(2)) ** 2))(x)
        out, tangent = jvp(lambda t: ad.sin(ad.dask.rechunk(t, {0: 2})), (x,), (da.ones_like(x),))
        rows = vmap(lambda r: r.rechunk(2) * 3.0)(da.from_array(np.ones((3, 4)), chunks=(1, 4)))
    assert g.chunks == x.chunks                  # (the cotangent back in the input's chunks)
    assert out.chunks == tangent.chunks == ((2, 2, 2),)
    assert rows.chunks == ((1, 1, 1), (2, 2))    # (the batch axis left as it was)
    np.testing.assert_allclose(g.compute(), np.sin(2 * xn))   # d/dx sin(x)^2
    np.testing.assert_allclose(tangent.compute(), np.cos(xn))
    # central differences of the whole function, through rechunk
    h = 1e-6
    f = lambda v: float(ad.sum(ad.sin(ad.asarray(da.from_array(v, chunks=3)).rechunk(2)) ** 2))  # noqa: E731
    fd = [(f(xn + h * e) - f(xn - h * e)) / (2 * h) for e in np.eye(6)]
    np.testing.assert_allclose(g.compute(), fd, atol=1e-6)


def test_rechunk_on_other_backends_is_the_identity(backend):
    x = backend(np.arange(3.0))
    np.testing.assert_array_equal(to_numpy(ad.asarray(x).rechunk(2)), [0.0, 1.0, 2.0])
    np.testing.assert_allclose(to_numpy(grad(lambda t: ad.sum(t.rechunk(2) ** 2))(x)),
                               [0.0, 2.0, 4.0])


def test_to_backend_array_gives_the_backend_array():
    x = da.ones(6, chunks=3)
    t = ad.asarray(x)
    assert t.to_backend_array() is x
    with pytest.raises(RuntimeError, match="detach"):
        ad.tensor(np.ones(2), requires_grad=True).to_backend_array()
    with pytest.raises(RuntimeError, match="to_backend_array"):
        grad(lambda v: ad.sum(ad.asarray(v.to_backend_array())))(np.ones(2))


@pytest.mark.parametrize("call", ["da.cumsum", "method map_blocks", "method map_overlap",
                                  "da.map_blocks", "da.blockwise"])
def test_dask_functions_on_tracers_are_refused_by_name(call):
    f = {"da.cumsum": lambda t: da.cumsum(t),
         "method map_blocks": lambda t: t.map_blocks(np.sin),
         "method map_overlap": lambda t: t.map_overlap(np.sin, depth=1),
         "da.map_blocks": lambda t: da.map_blocks(ad.sin, t),
         "da.blockwise": lambda t: da.blockwise(ad.sin, "i", t, "i")}[call]
    fix = r"is Dask's (?s:.*)arrayad.dask.map_blocks\(f, x\)(?s:.*)to_backend_array"
    with pytest.raises(TypeError, match=fix):
        grad(lambda t: ad.sum(f(t)))(da.ones(6, chunks=3))
    # eagerly too: Dask would run f once on the whole arrayad value, as one opaque block
    with pytest.raises(TypeError, match=fix):
        f(ad.asarray(da.ones(6, chunks=3)))
    # on the raw Dask array, outside transforms, Dask's function is Dask's
    t = ad.asarray(da.from_array(np.linspace(0.0, 1.0, 6), chunks=3))
    if call == "da.map_blocks":
        np.testing.assert_allclose(da.map_blocks(np.sin, t.to_backend_array()).compute(),
                                   np.sin(np.linspace(0.0, 1.0, 6)))
    # values of other backends have no Dask metadata (hasattr answers, no error)
    assert not hasattr(ad.asarray(np.ones(3)), "_meta")


# -- arrayad.dask.map_blocks -----------------------------------------------------------------------
def _block_f(a, b):
    return ad.sin(a) * b - ad.cumulative_sum(a)   # (mixes the values within a block)


def _per_block(a, b, chunks):
    # the reference: f on NumPy pieces cut at the blocks' bounds, joined
    bounds = np.cumsum((0,) + chunks)
    return ad.concat([_block_f(a[s:e], b[s:e]) for s, e in zip(bounds[:-1], bounds[1:])])


def test_map_blocks_under_grad_jvp_vmap_and_hessian():
    import arrayad.dask as add
    xn, yn = np.linspace(0.5, 3.0, 6), np.linspace(-1.0, 1.0, 6)
    x, y = da.from_array(xn, chunks=3), da.from_array(yn, chunks=2)   # (y cut like x)

    def mb(a, b):
        return add.map_blocks(_block_f, a, b)

    def ref(a, b):
        return _per_block(a, b, (3, 3))

    with no_compute():
        gx, gy = grad(lambda a, b: ad.sum(mb(a, b) ** 2), argnums=(0, 1))(x, y)
        _, t = jvp(lambda a: mb(a, y), (x,), (da.ones_like(x),))
        rows = vmap(lambda r: mb(r, y))(da.from_array(np.stack([xn, 2 * xn]), chunks=(1, 3)))
        h = hessian(lambda a: ad.sum(mb(a, y) ** 2))(x)
    rx, ry = grad(lambda a, b: ad.sum(ref(a, b) ** 2), argnums=(0, 1))(xn, yn)
    np.testing.assert_allclose(gx.compute(), rx, rtol=1e-12)
    np.testing.assert_allclose(gy.compute(), ry, rtol=1e-12)
    np.testing.assert_allclose(t.compute(), jvp(lambda a: ref(a, yn), (xn,), (np.ones(6),))[1],
                               rtol=1e-12)
    np.testing.assert_allclose(rows.compute(), np.stack([ref(xn, yn), ref(2 * xn, yn)]),
                               rtol=1e-12)
    np.testing.assert_allclose(h.compute(), hessian(lambda a: ad.sum(ref(a, yn) ** 2))(xn),
                               rtol=1e-10)
    # central differences of the loss itself
    loss = lambda v: float(ad.sum(mb(da.from_array(v, chunks=3), y) ** 2).compute())  # noqa: E731
    fd = [(loss(xn + 1e-6 * e) - loss(xn - 1e-6 * e)) / 2e-6 for e in np.eye(6)]
    np.testing.assert_allclose(gx.compute(), fd, rtol=1e-6)


def test_map_blocks_on_numpy_is_f_of_the_whole_arrays(backend):
    from conftest import to_numpy
    import arrayad.dask as add
    xn, yn = np.linspace(0.5, 3.0, 6), np.linspace(-1.0, 1.0, 6)
    g = grad(lambda a: ad.sum(add.map_blocks(_block_f, a, backend(yn)) ** 2))(backend(xn))
    expected = grad(lambda a: ad.sum(_block_f(a, yn) ** 2))(xn)
    np.testing.assert_allclose(to_numpy(g), expected, rtol=1e-12)
    with pytest.raises(ValueError, match="map_blocks: the arrays differ in shape"):
        add.map_blocks(_block_f, backend(xn), backend(yn[:3]))


def test_known_values_lapse_when_dask_writes_in_place():
    """The backend remembers that an array is an identity, all ones or all zeros (to skip a
    product or a sum). Dask's own ``a[key] = v`` keeps the Python object, so a user who writes
    into ``to_backend_array()``'s result changes the values behind that knowledge: the results
    must follow the values written, as NumPy's do."""
    with ad.backend("dask"):
        t = ad.eye(3)
        t.to_backend_array()[0, 1] = 5.0
        got = to_numpy(ad.ones((2, 3)) @ t)
    np.testing.assert_array_equal(got, np.ones((2, 3)) @ np.array([[1, 5, 0], [0, 1, 0],
                                                                   [0, 0, 1.0]]))
    xp = ad.get_backend("dask").xp
    ones = xp.ones_like(da.zeros(3, chunks=3))
    ones[1] = 2.0
    np.testing.assert_array_equal(np.asarray(xp.multiply(ones, da.arange(3.0, chunks=3))),
                                  [0.0, 2.0, 2.0])
    zeros = xp.zeros_like(da.zeros(4, chunks=2))
    zeros[0] = 1.0
    total = ad.get_backend("dask").index_add(zeros, (np.array([1, 1]),), da.ones(2, chunks=2))
    np.testing.assert_array_equal(np.asarray(total), [1.0, 2.0, 0.0, 0.0])


def test_map_blocks_gradient_when_the_cotangent_is_chunked_otherwise():
    # the cotangent reaching map_blocks may be cut otherwise than its output (here by slices
    # off a chunk boundary, joined again): the blocks of the VJP are the inputs', the cotangent
    # cut like them
    import arrayad.dask as add
    xn = np.linspace(0.5, 3.0, 9)
    x = da.from_array(xn, chunks=3)

    def loss(a, blocks):
        y = blocks(a)
        return ad.sum(ad.sin(ad.concat([y[:2], y[2:]])) * ad.asarray(np.arange(9.0)))
    with no_compute():
        g = grad(loss)(x, lambda a: add.map_blocks(lambda b: ad.cumulative_sum(b), a))
    ref = grad(loss)(xn, _per_block_cumsum)
    np.testing.assert_allclose(g.compute(), ref, rtol=1e-12)


def _per_block_cumsum(a):
    return ad.concat([ad.cumulative_sum(a[s:s + 3]) for s in (0, 3, 6)])


# -- arrayad.dask.map_overlap ----------------------------------------------------------------------
def _stencil(b, xp):
    # nonlinear, reads one neighbour each side; the block's edge elements are kept (trimmed off)
    mid = (b[:-2] + 2.0 * b[1:-1] * b[2:]) / 3.0
    return xp.concat([b[:1], mid, b[-1:]]) if xp is ad else xp.concatenate([b[:1], mid, b[-1:]])


_JAX_MODES = {"reflect": "symmetric", "periodic": "wrap", "nearest": "edge"}


def _jax_whole(v, depth, boundary, jnp):
    # the reference: the stencil on the whole array padded as Dask pads it, then trimmed
    if boundary == "none":
        return _stencil(v, jnp)
    if isinstance(boundary, float):
        p = jnp.pad(v, depth, mode="constant", constant_values=boundary)
    else:
        p = jnp.pad(v, depth, mode=_JAX_MODES[boundary])
    return _stencil(p, jnp)[depth:-depth]


@pytest.mark.parametrize("depth", [1, 2, 4])
@pytest.mark.parametrize("boundary", ["none", "reflect", "periodic", "nearest", 0.5])
def test_map_overlap_matches_dask_and_its_gradient_jax(boundary, depth):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    import arrayad.dask as add
    jax.config.update("jax_enable_x64", True)
    xn = np.linspace(0.1, 1.3, 10) ** 2
    w = np.linspace(-1.0, 2.0, 10)
    x = da.from_array(xn, chunks=((3, 4, 3),))     # (depth 4 reaches past a neighbour)
    mo = lambda v: add.map_overlap(lambda b: _stencil(b, ad), v, depth=depth,  # noqa: E731
                                   boundary=boundary)
    with no_compute():
        y = mo(x)
        g = grad(lambda v: ad.sum(ad.sin(mo(v)) * w))(x)
        _, t = jvp(mo, (x,), (da.from_array(w, chunks=5),))
    assert y.chunks == x.chunks and g.chunks == x.chunks   # (the gradient in x's chunks)
    np.testing.assert_allclose(
        y.compute(), da.map_overlap(lambda b: _stencil(b, np), x, depth=depth,
                                    boundary=boundary).compute(), rtol=1e-14)
    ref = lambda v: jnp.sum(jnp.sin(_jax_whole(v, depth, boundary, jnp)) * w)  # noqa: E731
    np.testing.assert_allclose(g.compute(), jax.grad(ref)(xn), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(
        t.compute(), jax.jvp(lambda v: _jax_whole(v, depth, boundary, jnp), (xn,), (w,))[1],
        rtol=1e-12, atol=1e-14)


def test_map_overlap_two_dimensional_under_vmap_and_central_differences():
    import arrayad.dask as add

    def lap(b):   # a nonlinear 5-point stencil; the block's border rows and columns are kept
        inner = (b[:-2, 1:-1] + b[2:, 1:-1] + b[1:-1, :-2] * b[1:-1, 2:]) - 4.0 * b[1:-1, 1:-1]
        return ad.concat([b[:1], ad.concat([b[1:-1, :1], inner, b[1:-1, -1:]], axis=1),
                          b[-1:]], axis=0)

    def lap_np(b):
        out = b.copy()
        out[1:-1, 1:-1] = (b[:-2, 1:-1] + b[2:, 1:-1] + b[1:-1, :-2] * b[1:-1, 2:]
                           - 4.0 * b[1:-1, 1:-1])
        return out

    rng = np.random.default_rng(1)
    xn = rng.standard_normal((5, 6))
    x = da.from_array(xn, chunks=((2, 3), (3, 3)))
    kw = dict(depth={0: 1, 1: 1}, boundary={0: "periodic", 1: "reflect"})
    mo = lambda v: add.map_overlap(lap, v, **kw)  # noqa: E731
    np.testing.assert_allclose(mo(x).compute(), da.map_overlap(lap_np, x, **kw).compute(),
                               rtol=1e-14)
    with no_compute():
        g = grad(lambda v: ad.sum(mo(v) ** 2))(x)
        rows = vmap(mo)(da.from_array(np.stack([xn, 2 * xn]), chunks=(1, 2, 3)))
    loss = lambda v: float(  # noqa: E731
        (da.map_overlap(lap_np, da.from_array(v, chunks=((2, 3), (3, 3))), **kw) ** 2)
        .sum().compute())
    eye = np.eye(30).reshape(30, 5, 6)
    fd = np.array([(loss(xn + 1e-6 * e) - loss(xn - 1e-6 * e)) / 2e-6 for e in eye])
    np.testing.assert_allclose(g.compute(), fd.reshape(5, 6), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(
        rows.compute(), np.stack([da.map_overlap(lap_np, da.from_array(v, chunks=((2, 3), (3, 3))),
                                                 **kw).compute() for v in (xn, 2 * xn)]),
        rtol=1e-14)


def test_map_overlap_under_jit_sees_the_chunks():
    # (a block function that sees where its block ends: under jit the same blocks as without)
    import arrayad.dask as add
    xn = np.arange(20.0) ** 2
    x = da.from_array(xn, chunks=5)
    f = lambda v: add.map_overlap(lambda b: b + ad.roll(b, 1), v, depth=1,  # noqa: E731
                                  boundary="none")
    want = da.map_overlap(lambda b: b + np.roll(b, 1), x, depth=1, boundary="none").compute()
    np.testing.assert_array_equal(f(x).compute(), want)
    np.testing.assert_array_equal(ad.jit(f)(x).compute(), want)


def test_map_overlap_on_other_backends_is_one_block(backend):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    import arrayad.dask as add
    jax.config.update("jax_enable_x64", True)
    xn = np.linspace(0.1, 1.3, 7) ** 2
    g = grad(lambda v: ad.sum(ad.sin(add.map_overlap(lambda b: _stencil(b, ad), v, depth=2,
                                                     boundary="reflect"))))(backend(xn))
    ref = jax.grad(lambda v: jnp.sum(jnp.sin(_jax_whole(v, 2, "reflect", jnp))))(xn)
    np.testing.assert_allclose(to_numpy(g), ref, rtol=1e-12)
    with pytest.raises(ValueError, match="map_overlap: depth"):
        add.map_overlap(lambda b: b, backend(xn), depth=-1)
    with pytest.raises(ValueError, match="map_overlap: boundary"):
        add.map_overlap(lambda b: b, backend(xn), depth=1, boundary="mirror")
    with pytest.raises(ValueError, match="map_overlap: the arrays differ in shape"):
        add.map_overlap(lambda a, b: a, backend(xn), backend(xn[:3]), depth=1)
