"""The arithmetic of small float64 NumPy arrays done without NumPy's dispatch (NOTE [small
arithmetic] in arrayad/_core/_small_arith.pyx) gives NumPy's results: the same values bit for
bit, dtype, shape and warnings, for the operands it takes and for every other kind it hands back
to NumPy."""
import operator
import warnings

import numpy as np
import pytest

import arrayad as ad
from arrayad._core import _small_arith as small

OPS = [("add", operator.add), ("subtract", operator.sub), ("multiply", operator.mul),
       ("divide", operator.truediv)]

EDGES = np.array([0.0, -0.0, 1.0, -1.5, np.inf, -np.inf, np.nan, -np.nan, 5e-324, -5e-324,
                  2.2250738585072014e-308, 1.7976931348623157e308, -1e-300, 3.0, 1e16, np.pi])


def same(got, want):
    """NumPy's result exactly: type, dtype, shape, and every bit but a NaN's payload."""
    want = np.asarray(want)
    got_a = np.asarray(got)
    assert got_a.dtype == want.dtype and got_a.shape == want.shape
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got_a), nan)
    assert (got_a[~nan].view(np.uint64) == want[~nan].view(np.uint64)).all()


def pairs():
    """Every value of EDGES against every other, as two arrays of 256."""
    return np.repeat(EDGES, len(EDGES)), np.tile(EDGES, len(EDGES))


@pytest.mark.parametrize("name,op", OPS)
def test_arrays_and_numbers_give_numpys_bits(name, op):
    f = getattr(small, name)
    x, y = pairs()
    with np.errstate(all="ignore"):
        same(f(x, y), op(x, y))
        for s in (2.0, -0.0, 3, -(2 ** 53), 2 ** 53, 0.1, np.inf):
            same(f(x, s), op(x, s))
            same(f(s, y), op(s, y))
        same(small.negative(x), -x)
        # a 0-d array and a (1, 1, 16) one
        same(f(np.array(2.5), np.array(-0.0)), np.asarray(op(np.array(2.5), np.array(-0.0))))
        z = EDGES.reshape(1, 1, 16)
        same(f(z, z), op(z, z))


@pytest.mark.parametrize("name,op", OPS)
def test_other_operands_go_to_numpy(name, op):
    """Other dtypes, broadcasting along other axes than the leading ones, views, subclasses,
    Python ints beyond a double's exact range, bools and NumPy scalars, larger arrays: NumPy's
    result, of NumPy's dtype."""
    f = getattr(small, name)
    x = np.linspace(-2.0, 3.0, 12).reshape(3, 4)
    cases = [(x.astype(np.float32), x.astype(np.float32)), (x.astype(np.float32), 2.0),
             (np.arange(12).reshape(3, 4), 3), (x, np.ones((3, 1))), (x, x.T.copy().T), (x[:, ::2], 1.5),
             (np.asfortranarray(x), np.asfortranarray(x)), (x, 2 ** 60), (x, True),
             (x, np.float64(0.5)), (x, np.float32(0.5)), (x, 1 + 2j),
             (np.ones(small.SMALL + 1), np.ones(small.SMALL + 1)),
             (np.ma.masked_array(x), x)]
    for a, b in cases:
        with np.errstate(all="ignore"):
            want = op(a, b)
            got = f(a, b)
        assert type(got) is type(want)
        same(got, want)


@pytest.mark.parametrize("name,op", OPS)
def test_a_lower_rank_operand_repeated_gives_numpys_bits(name, op):
    """One operand holding the other's last axes (as vmap's batched values meet unbatched
    ones), on either side, a 0-d array among them: taken, every value NumPy's."""
    f = getattr(small, name)
    x, _ = pairs()
    big = x.reshape(16, 16)
    row = EDGES[::-1].copy()
    cases = [(big, row), (row, big), (big.reshape(4, 4, 16), row), (row, big.reshape(2, 8, 16)),
             (big.reshape(2, 8, 16), big[:8].copy()), (big, np.array(-1.5)),
             (np.array(np.inf), big), (np.ones((0, 16)), row)]
    for a, b in cases:
        with np.errstate(all="ignore"):
            same(f(a, b), op(a, b))


@pytest.mark.parametrize("name,op", OPS)
def test_an_operand_repeating_one_value_gives_numpys_bits(name, op):
    """An operand of the other's shape that repeats one value in memory (np.broadcast_to of a
    number: a full reduction's cotangent) is read as that number, on either side; repeated
    along some axes only, or of another shape, it is NumPy's."""
    f = getattr(small, name)
    big = pairs()[0].reshape(16, 16)
    cases = []
    for v in EDGES:
        cases += [(np.broadcast_to(np.asarray(v), (16,)), EDGES),
                  (EDGES, np.broadcast_to(np.asarray(v), (16,))),
                  (np.broadcast_to(np.asarray(v), (16, 16)), big)]
    cases += [(np.broadcast_to(EDGES, (16, 16)), big), (big, np.broadcast_to(EDGES[:1], (1, 16)))]
    for a, b in cases:
        with np.errstate(all="ignore"):
            same(f(a, b), op(a, b))


@pytest.mark.parametrize("name,op,a,b,flag", [
    ("divide", operator.truediv, np.ones((3, 4)), np.zeros(4), "divide"),
    ("divide", operator.truediv, np.broadcast_to(np.ones(()), (4,)), np.zeros(4), "divide"),
    ("divide", operator.truediv, np.ones(4), np.zeros(4), "divide"),
    ("multiply", operator.mul, np.full(4, 1e300), 1e300, "over"),
    ("multiply", operator.mul, np.full(4, 1e-300), 1e-300, "under"),
    ("subtract", operator.sub, np.full(4, np.inf), np.full(4, np.inf), "invalid")])
def test_a_floating_point_flag_is_numpys_to_report(name, op, a, b, flag):
    f = getattr(small, name)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with np.errstate(all="ignore", **{flag: "warn"}):
            got = f(a, b)
    assert len(caught) == 1 and issubclass(caught[0].category, RuntimeWarning)
    with np.errstate(all="ignore"):
        same(got, op(a, b))
    with np.errstate(all="ignore", **{flag: "raise"}), pytest.raises(FloatingPointError):
        f(a, b)


def test_the_numpy_backend_and_the_rules_use_it():
    x = np.linspace(-1.0, 1.0, 16)
    np.testing.assert_array_equal(ad.multiply(x, 2), x * 2)
    g = ad.func.grad(lambda v: ad.sum(ad.tanh(v) * 2 - v / 3))(x)
    np.testing.assert_allclose(g, 2 * (1 - np.tanh(x) ** 2) - 1 / 3, rtol=1e-14)
    # a result is a new array of its own, never an operand
    y = ad.add(x, 0.0)
    assert y is not x and not np.shares_memory(y, x) and y.flags.writeable


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128, np.int64, np.bool_,
                                   np.dtype(">f8")])
@pytest.mark.parametrize("shape", [(), (16,), (3, 4), (0, 2), (1, 1, 5)])
def test_broadcast_scalar_is_numpys_broadcast_view(dtype, shape):
    """The zero-stride view of a reduction's 0-d cotangent is np.broadcast_to's: values, dtype,
    strides, read-only, sharing x's memory (x stays alive through it, and is not leaked)."""
    import sys
    x = np.asarray(7, dtype=dtype)
    want = np.broadcast_to(x, shape)
    before = sys.getrefcount(x)
    got = small.broadcast_scalar(x, shape)
    assert got.dtype == want.dtype and got.shape == want.shape and got.strides == want.strides
    np.testing.assert_array_equal(got, want)
    assert not got.flags.writeable and np.shares_memory(got, x) if got.size else True
    with pytest.raises(ValueError, match="read-only"):
        got[...] = 1
    del got
    for _ in range(100):
        small.broadcast_scalar(x, shape)
    assert sys.getrefcount(x) == before


def test_broadcast_scalar_refuses_what_it_does_not_take():
    with pytest.raises(ValueError, match="0-d"):
        small.broadcast_scalar(np.zeros(3), (3,))
    with pytest.raises(TypeError):
        small.broadcast_scalar(1.0, (3,))
    with pytest.raises(ValueError, match="negative"):
        small.broadcast_scalar(np.asarray(1.0), (2, -1))
    # the NumPy backend falls back to np.broadcast_to for anything else
    from arrayad.backends.numpy import _broadcast_to
    np.testing.assert_array_equal(_broadcast_to(np.arange(3.0), (2, 3)),
                                  np.broadcast_to(np.arange(3.0), (2, 3)))
