"""Operations on arrays of two backends: NumPy with Dask promotes to Dask (as Dask itself does);
any other pair is an error that names both backends."""

import numpy as np
import pytest

import arrayad as ad
from arrayad._core._core import raw_value
from arrayad.func import grad, vmap

da = pytest.importorskip("dask.array")


def _data():
    x = np.arange(12.0).reshape(6, 2) / 7.0
    return x, np.array([1.5, -2.0])


def test_numpy_with_dask_promotes_eagerly():
    x, w = _data()
    out = ad.sum(ad.asarray(da.from_array(x, chunks=(3, 2))) * w)
    assert isinstance(raw_value(out), da.Array)
    np.testing.assert_allclose(float(out), np.sum(x * w))


@pytest.mark.parametrize("dask_first", [False, True])
def test_grad_of_numpy_parameter_with_dask_data(dask_first):
    x, w = _data()
    xd = da.from_array(x, chunks=(3, 2))
    if dask_first:
        g = grad(lambda xd, w: ad.sum(xd * w ** 2), argnums=1)(xd, w)
    else:
        g = grad(lambda w, xd: ad.sum(xd * w ** 2))(w, xd)
    assert isinstance(g, da.Array)       # lazy: the data is Dask's
    np.testing.assert_allclose(g.compute(), 2 * w * x.sum(axis=0))


def test_vmap_over_dask_with_numpy_constant():
    x, w = _data()
    out = vmap(lambda row: ad.sum(row * w))(da.from_array(x, chunks=(3, 2)))
    np.testing.assert_allclose(np.asarray(out), x @ w)


def test_other_pairs_name_both_backends():
    strict = pytest.importorskip("array_api_strict")
    a = ad.asarray(np.ones(3))
    b = ad.asarray(strict.ones(3))
    with pytest.raises(TypeError, match="numpy and array_api_strict"):
        a + b
    with pytest.raises(TypeError, match="cannot mix"):
        grad(lambda u: ad.sum(u * strict.ones(3)))(np.ones(3))
