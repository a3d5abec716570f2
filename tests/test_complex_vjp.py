"""VJPs on complex inputs against torch's (the holomorphic convention: the cotangent of x is
g * conj(dout/dx)). Finite differences of real parts would not catch a missing conj; torch does."""

import numpy as np
import pytest

import arrayad as ad
from arrayad.func import vjp

from conftest import to_numpy

torch = pytest.importorskip("torch")

CASES = {
    "prod": (lambda x: ad.prod(x), lambda x: torch.prod(x)),
    "prod_axis": (lambda x: ad.prod(x, axis=1), lambda x: torch.prod(x, 1)),
    "cumulative_prod": (lambda x: ad.cumulative_prod(x, axis=1), lambda x: torch.cumprod(x, 1)),
    "sum": (lambda x: ad.sum(x * x), lambda x: torch.sum(x * x)),
    "exp_sin": (lambda x: ad.exp(ad.sin(x)), lambda x: torch.exp(torch.sin(x))),
    "multiply_divide": (lambda x: x * x / (x + 2.0), lambda x: x * x / (x + 2.0)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_complex_vjp_matches_torch(name, backend):
    f, tf = CASES[name]
    rng = np.random.default_rng(1)
    z = rng.standard_normal((2, 3)) + 1j * rng.standard_normal((2, 3))
    out, pull = vjp(f, backend(z))
    ct = np.asarray(rng.standard_normal(np.shape(out)) + 1j * rng.standard_normal(np.shape(out)))
    zt = torch.tensor(z, requires_grad=True)
    tf(zt).backward(torch.tensor(ct))
    np.testing.assert_allclose(to_numpy(pull(backend(ct))[0]), zt.grad.numpy(), rtol=1e-10,
                               atol=1e-12)
