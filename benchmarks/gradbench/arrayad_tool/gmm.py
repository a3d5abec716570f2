"""gmm: the log-posterior of a Gaussian mixture model with a Wishart prior on the precision
matrices, and its gradient with respect to the parameters ``alpha``, ``mu``, ``q`` and ``l``.

Component ``k``'s precision matrix is ``Q_k^T Q_k`` with ``Q_k`` lower triangular: ``exp(q_k)``
on the diagonal and ``l_k`` filling the strict lower triangle column by column.
"""

import math

import numpy as np

import arrayad as ad
from arrayad.func import grad

from . import Entry, as_float


def lower_triangle_index(d):
    """``index[i, j]`` is 1 + the position of ``Q[i, j]`` in ``l`` below the diagonal, 0 on
    and above it (a gather from ``l`` with a zero prepended builds the strict lower part)."""
    index = np.zeros((d, d), dtype=np.int64)
    position = 1
    for j in range(d):
        for i in range(j + 1, d):
            index[i, j] = position
            position += 1
    return index


def multigammaln(a, p):
    # A constant of the objective (it depends on the sizes only), so plain math.
    return p * (p - 1) / 4 * math.log(math.pi) + sum(
        math.lgamma(a + (1 - j) / 2) for j in range(1, p + 1)
    )


def log_wishart_prior(q, l, Qdiags, sum_qs, m, gamma):
    k, d = q.shape
    n = d + m + 1
    frobenius = ad.sum(Qdiags**2, axis=1) + ad.sum(l**2, axis=1)
    out = ad.sum(0.5 * gamma * gamma * frobenius - m * sum_qs)
    C = n * d * math.log(gamma / math.sqrt(2))
    return -out + k * (C - multigammaln(0.5 * n, d))


def objective(alpha, mu, q, l, x, m, gamma):
    n, d = x.shape
    k = alpha.shape[0]
    Qdiags = ad.exp(q)  # (k, d)
    sum_qs = ad.sum(q, axis=1)  # (k,)
    index = ad.asarray(lower_triangle_index(d).reshape(-1))
    l_padded = ad.concat([ad.zeros((k, 1), dtype=l.dtype), l], axis=1)
    Ls = ad.reshape(ad.take(l_padded, index, axis=1), (k, d, d))  # strict lower parts
    # Observations as columns, one block per component: (k, d, n).
    centered = ad.matrix_transpose(x)[None, :, :] - mu[:, :, None]
    Qx = Qdiags[:, :, None] * centered + Ls @ centered
    inner = alpha[:, None] + sum_qs[:, None] - 0.5 * ad.sum(Qx**2, axis=1)  # (k, n)
    constant = -n * d * 0.5 * math.log(2 * math.pi)
    return (
        constant
        + ad.sum(ad.logsumexp(inner, axis=0))
        - n * ad.logsumexp(alpha)
        + log_wishart_prior(q, l, Qdiags, sum_qs, m, gamma)
    )


def jacobian(alpha, mu, q, l, x, m, gamma):
    return grad(objective, argnums=(0, 1, 2, 3))(alpha, mu, q, l, x, m, gamma)


def prepare(input):
    def array(name):
        return np.asarray(input[name], dtype=np.float64)

    # l is empty for d = 1: keep its (k, 0) shape.
    l = array("l").reshape(input["k"], input["d"] * (input["d"] - 1) // 2)
    return (
        array("alpha"), array("mu"), array("q"), l, array("x"), input["m"], float(input["gamma"]),
    )


def jacobian_output(gradients):
    return dict(zip(("alpha", "mu", "q", "l"), (np.asarray(g).tolist() for g in gradients)))


FUNCTIONS = {
    "objective": Entry(prepare, objective, as_float, static_argnums=(5, 6)),
    "jacobian": Entry(prepare, jacobian, jacobian_output, static_argnums=(5, 6)),
}
