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
