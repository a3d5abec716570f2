"""Sums, minima and maxima of short float64 rows computed without NumPy's per-row loop calls
(NOTE [short reductions] in arrayad/_core/_vector_math.pyx) give NumPy's results: the same
values bit for bit (NumPy's pairwise sum along a row, in-order accumulation over rows), nan
where NumPy gives nan, the same shapes; every other reduction is NumPy's own."""
import numpy as np
import pytest

import arrayad as ad
from arrayad._core._vector_math import SHORT_ROW, reduce_short
from arrayad.backends import get_backend

EDGES = np.array([0.0, -0.0, 1.0, -1.5, np.inf, -np.inf, np.nan, 5e-324, 1.7976931348623157e308,
                  -1e-300, 3.0, 1e16, np.pi])
KINDS = [(1, "sum", np.sum), (2, "min", np.min), (3, "max", np.max)]


def _same(got, want, zero_sign=True):
    assert got.dtype == want.dtype and got.shape == want.shape
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    if zero_sign:
        assert (got[~nan].view(np.uint64) == want[~nan].view(np.uint64)).all()
    else:   # (a min or max of 0.0 and -0.0: either, as NumPy's loops give either)
        np.testing.assert_array_equal(got[~nan], want[~nan])


def _values(shape, rng, edges):
    x = rng.standard_normal(shape) * np.exp(rng.standard_normal(shape) * 6)
    if edges:
        flat = x.reshape(-1)
        at = rng.choice(flat.size, size=min(flat.size // 3, 40), replace=False)
        flat[at] = rng.choice(EDGES, size=at.size)
    return x


@pytest.mark.parametrize("shape, axis", [
    ((1000, 8), 1), ((40, 10), -1), ((9, 3, 64), 2), ((2, 1), 1), ((300, 17), (1,)),
    ((1000, 10), 0), ((37, 5), (0,)), ((3, 4, 5), (0, 1)), ((6, 4, 5), (1, 0)), ((700, 3), -2)])
@pytest.mark.parametrize("edges", [False, True])
def test_short_rows_give_numpys_bits(shape, axis, edges):
    rng = np.random.default_rng(len(shape) * 100 + shape[-1])
    x = _values(shape, rng, edges)
    numpy_backend = get_backend("numpy")
    for kind, name, reduce in KINDS:
        for keepdims in (False, True):
            with np.errstate(invalid="ignore", over="ignore"):
                want = reduce(x, axis=axis, keepdims=keepdims)
                got = reduce_short(kind, x, axis, keepdims)
                eager = ad.asarray(getattr(ad, name)(x, axis=axis, keepdims=keepdims))
                via_backend = numpy_backend.fast[name](x, axis=axis, keepdims=keepdims)
            assert got is not None, (shape, axis)
            for g in (got, np.asarray(eager), via_backend):
                _same(g, want, zero_sign=kind == 1 or not edges)


@pytest.mark.parametrize("x, axis", [
    (np.ones((4, SHORT_ROW + 1)), 1),        # (a long row: NumPy's vectorised loop)
    (np.ones((1, 8)), 1),                    # (one row)
    (np.ones(16), 0),                        # (1-d)
    (np.ones((0, 5)), 1),                    # (empty)
    (np.ones((4, 5, 6)), 1),                 # (a middle axis)
    (np.ones((4, 5)), None),                 # (every axis)
    (np.ones((4, 5), np.float32), 1),        # (another dtype)
    (np.ones((5, 4)).T, 1),                  # (a view that is not C-contiguous)
    (np.ones((4, 5)), 2),                    # (no such axis: NumPy says so)
    (np.ones((4, 5)), (1, 1)),               # (an axis twice: NumPy says so)
])
def test_other_reductions_are_left_to_numpy(x, axis):
    for kind, name, reduce in KINDS:
        assert reduce_short(kind, x, axis, False) is None
    numpy_backend = get_backend("numpy")
    for kind, name, reduce in KINDS:
        try:
            want = reduce(x, axis=axis)
        except Exception as e:   # (the same error from the backend's call)
            with pytest.raises(type(e)):
                numpy_backend.fast[name](x, axis=axis)
            continue
        got = numpy_backend.fast[name](x, axis=axis)
        _same(np.asarray(got), np.asarray(want))


def test_gradients_of_short_row_reductions_against_finite_differences():
    """min and max share their gradient between ties through sums of masks: the same rows go
    through the short reductions, forward and backward."""
    from arrayad.func import grad
    from arrayad.testing import check_grads
    rng = np.random.default_rng(3)
    x = rng.standard_normal((50, 6))
    x[::5, 2] = x[::5, 4]   # (ties: the gradient is shared, not a finite difference's)

    def f(x):
        return ad.sum(ad.min(x * x, axis=1)) + ad.sum(ad.max(x, axis=0) ** 2) \
            + ad.sum(ad.sum(ad.sin(x), axis=-1) ** 2)

    g = grad(f)(x)
    want = np.zeros_like(x)
    sq = x * x
    mins = sq.min(axis=1, keepdims=True)
    ties = (sq == mins)
    want += ties / ties.sum(axis=1, keepdims=True) * 2 * x
    maxes = x.max(axis=0, keepdims=True)
    ties = (x == maxes)
    want += ties / ties.sum(axis=0, keepdims=True) * 2 * maxes
    want += 2 * np.sin(x).sum(axis=1, keepdims=True) * np.cos(x)
    np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-14)
    check_grads(lambda x: ad.sum(ad.sum(ad.sin(x), axis=-1) ** 2), (x,), order=2)
