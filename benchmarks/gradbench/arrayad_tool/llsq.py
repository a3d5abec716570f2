"""llsq: half the sum of squared residuals of fitting ``sign(t)`` at ``n`` points ``t`` evenly
spaced in [-1, 1] by the polynomial with coefficients ``x`` (``x_j`` for ``t^j``), and its
gradient."""

import numpy as np

import arrayad as ad
from arrayad.func import grad

from . import Entry, as_float, as_list


def residuals_squared(x, n):
    m = x.shape[0]
    t = -1.0 + 2.0 * ad.arange(n, dtype=x.dtype) / (n - 1)
    powers = t[:, None] ** ad.arange(m, dtype=x.dtype)[None, :]  # (n, m): t_i^j, 0^0 = 1
    residual = ad.sign(t) - powers @ x
    return ad.sum(residual * residual) / 2


def gradient(x, n):
    return grad(residuals_squared)(x, n)


def prepare(input):
    return (np.asarray(input["x"], dtype=np.float64), int(input["n"]))


FUNCTIONS = {
    "primal": Entry(prepare, residuals_squared, as_float, static_argnums=(1,)),
    "gradient": Entry(prepare, gradient, as_list, static_argnums=(1,)),
}
