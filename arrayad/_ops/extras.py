"""torch-style conveniences that the standard lacks, as composites of standard functions (so
their derivatives come from the primitives): relu, sigmoid, softmax, log_softmax, logsumexp,
diag, dot, allclose."""

import arrayad as ad

from .._core._core import shape_of
from ._rules import eye_like, ndim_of

__all__ = ["relu", "sigmoid", "softmax", "log_softmax", "logsumexp", "diag", "dot", "allclose",
           "isclose"]
COMPOSITES = set(__all__)


def relu(x, /):
    """max(x, 0) with the derivative 0 at 0 (as torch)."""
    return ad.where(x > 0, x, 0.0)


def sigmoid(x, /):
    """1 / (1 + exp(-x)), computed without overflow for large |x|."""
    e = ad.exp(-ad.abs(x))
    return ad.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def logsumexp(x, /, *, axis=None, keepdims=False):
    """log(sum(exp(x))) along ``axis``, shifted by the maximum for stability."""
    m = ad.stop_gradient(ad.max(x, axis=axis, keepdims=True))
    m = ad.where(ad.isfinite(m), m, 0.0)
    out = ad.log(ad.sum(ad.exp(x - m), axis=axis, keepdims=True)) + m
    if not keepdims:
        out = ad.squeeze(out, axis=tuple(range(ndim_of(x))) if axis is None else axis)
    return out


def softmax(x, /, axis=-1):
    """exp(x) / sum(exp(x)) along ``axis``."""
    return ad.exp(x - logsumexp(x, axis=axis, keepdims=True))


def log_softmax(x, /, axis=-1):
    """x - logsumexp(x) along ``axis``."""
    return x - logsumexp(x, axis=axis, keepdims=True)


def diag(x, /, diagonal=0):
    """torch's diag: a vector becomes a diagonal matrix, a matrix gives its diagonal."""
    if ndim_of(x) == 2:
        return ad.linalg.diagonal(x, offset=diagonal)
    if ndim_of(x) != 1:
        raise ValueError("diag: expected a 1-d or 2-d array")
    k = abs(diagonal)
    size = shape_of(x)[0] + k
    if k:
        x = ad.concat([x, ad.zeros_like(x[:1])] + [ad.zeros_like(x[:1])] * (k - 1), axis=0)
    # out[i, j] = x[i] on the diagonal above (rows index x), x[j] below (columns index x)
    x = ad.expand_dims(x, axis=1 if diagonal >= 0 else 0)
    return x * eye_like(x, size, diagonal)   # tracer first: a raw strict array refuses tracers


def dot(x1, x2, /):
    """Inner product of two vectors (torch's dot)."""
    return ad.sum(x1 * x2)


def isclose(x1, x2, /, *, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Elementwise |x1 - x2| <= atol + rtol * |x2|."""
    close = ad.abs(x1 - x2) <= atol + rtol * ad.abs(x2)
    if equal_nan:
        close = ad.logical_or(close, ad.logical_and(ad.isnan(x1), ad.isnan(x2)))
    return close


def allclose(x1, x2, /, *, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether every element of ``x1`` is close to ``x2`` (a Python bool)."""
    return bool(ad.all(isclose(x1, x2, rtol=rtol, atol=atol, equal_nan=equal_nan)))


