"""torch-style conveniences that the standard lacks, as composites of standard functions (so
their derivatives come from the primitives): relu, sigmoid, softmax, log_softmax, logsumexp,
diag, dot, allclose."""

from ._namespace import ops

from .._core._core import shape_of
from ._rules import Declarations, eye_like, is_complex, ndim_of

decl = Declarations(globals())



@decl.composite
def relu(x, /):
    """max(x, 0) with the derivative 0 at 0 (as torch)."""
    return ops.where(x > 0, x, 0.0)


@decl.composite
def sigmoid(x, /):
    """1 / (1 + exp(-x)), computed without overflow for large |x|."""
    if is_complex(x):
        # the overflow-free form below needs an order (x >= 0) and |x| stands for x only when x
        # is real: on complex x it would silently drop the imaginary part. torch's form:
        return 1.0 / (1.0 + ops.exp(-x))
    e = ops.exp(-ops.abs(x))
    return ops.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


@decl.composite
def logsumexp(x, /, *, axis=None, keepdims=False):
    """log(sum(exp(x))) along ``axis``, shifted by the maximum for stability."""
    m = ops.stop_gradient(ops.max(x, axis=axis, keepdims=True))
    m = ops.where(ops.isfinite(m), m, 0.0)
    out = ops.log(ops.sum(ops.exp(x - m), axis=axis, keepdims=True)) + m
    if not keepdims:
        out = ops.squeeze(out, axis=tuple(range(ndim_of(x))) if axis is None else axis)
    return out


@decl.composite
def softmax(x, /, axis=-1):
    """exp(x) / sum(exp(x)) along ``axis``."""
    return ops.exp(x - logsumexp(x, axis=axis, keepdims=True))


@decl.composite
def log_softmax(x, /, axis=-1):
    """x - logsumexp(x) along ``axis``."""
    return x - logsumexp(x, axis=axis, keepdims=True)


@decl.composite
def diag(x, /, diagonal=0):
    """torch's diag: a vector becomes a diagonal matrix, a matrix gives its diagonal."""
    if ndim_of(x) == 2:
        return ops.linalg.diagonal(x, offset=diagonal)
    if ndim_of(x) != 1:
        raise ValueError("diag: expected a 1-d or 2-d array")
    k = abs(diagonal)
    size = shape_of(x)[0] + k
    if k:
        x = ops.concat([x, ops.zeros_like(x[:1])] + [ops.zeros_like(x[:1])] * (k - 1), axis=0)
    # out[i, j] = x[i] on the diagonal above (rows index x), x[j] below (columns index x)
    x = ops.expand_dims(x, axis=1 if diagonal >= 0 else 0)
    return x * eye_like(x, size, diagonal)   # tracer first: a raw strict array refuses tracers


@decl.composite
def dot(x1, x2, /):
    """Inner product of two vectors (torch's dot)."""
    return ops.sum(x1 * x2)


@decl.composite
def isclose(x1, x2, /, *, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Elementwise |x1 - x2| <= atol + rtol * |x2|."""
    close = ops.abs(x1 - x2) <= atol + rtol * ops.abs(x2)
    if equal_nan:
        close = ops.logical_or(close, ops.logical_and(ops.isnan(x1), ops.isnan(x2)))
    return close


@decl.composite(traced=False)
def allclose(x1, x2, /, *, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether every element of ``x1`` is close to ``x2`` (a Python bool)."""
    return bool(ops.all(isclose(x1, x2, rtol=rtol, atol=atol, equal_nan=equal_nan)))


