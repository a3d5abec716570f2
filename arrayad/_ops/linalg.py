"""Linear algebra of the main namespace: matmul (a primitive) and tensordot, vecdot (composites).

The ``linalg`` extension's functions live in ``arrayad/linalg.py``.
"""

from ._namespace import ops

from .._core._core import shape_of
from ._rules import (Declarations, conj_if_complex, move_to_front, ndim_of, normalize_axis,
                     unbroadcast)

decl = Declarations(globals())


def _promote(x1, x2, g):
    """Matrices for the 1-d cases of matmul (a vector is a row on the left, a column on the
    right), with the cotangent reshaped to match."""
    v1, v2 = ndim_of(x1) == 1, ndim_of(x2) == 1
    # the column axis first: for vector @ vector, g is 0-d and becomes (1, 1)
    if v2:
        x2 = ops.expand_dims(x2, axis=-1)
        g = ops.expand_dims(g, axis=-1)
    if v1:
        x1 = ops.expand_dims(x1, axis=0)
        g = ops.expand_dims(g, axis=-2)
    return x1, x2, g


def _matmul_vjp1(g, ans, x1, x2):
    n1, n2 = ndim_of(x1), ndim_of(x2)
    x2c = conj_if_complex(x2)
    if n2 == 1:
        # (..., k) @ (k,): the cotangent is g times x2, an outer product (no matmul needed)
        return g * x2c if n1 == 1 else ops.expand_dims(g, axis=-1) * x2c
    if n1 == 1 and n2 == 2:
        return ops.matmul(x2c, g)                      # (k, n) @ (n,)
    p1, p2, gp = _promote(x1, x2c, g)
    ct = ops.matmul(gp, ops.matrix_transpose(p2))
    return ops.reshape(unbroadcast(ct, p1), shape_of(x1))


def _matmul_vjp2(g, ans, x1, x2):
    n1, n2 = ndim_of(x1), ndim_of(x2)
    x1c = conj_if_complex(x1)
    if n1 == 1:
        # (k,) @ (..., k, n): an outer product of x1 with g
        # ops.multiply, not *: a raw array-api-strict x1 on the left refuses a tracer g
        return g * x1c if n2 == 1 else ops.multiply(ops.expand_dims(x1c, axis=-1),
                                                   ops.expand_dims(g, axis=-2))
    if n2 == 1 and n1 == 2:
        return ops.matmul(g, x1c)                      # (m,) @ (m, k)
    p1, p2, gp = _promote(x1c, x2, g)
    ct = ops.matmul(ops.matrix_transpose(p1), gp)
    return ops.reshape(unbroadcast(ct, p2), shape_of(x2))


def _matmul_batch(args, dims):
    (x1, x2), (d1, d2) = args, dims
    # The common cases, with no data movement: a batch of vectors or matrices on the left times
    # an unbatched matrix on the right, and an unbatched matrix times a batch of vectors.
    if d2 is None and ndim_of(x2) == 2:
        x1 = move_to_front(x1, d1)
        return ops.matmul(x1, x2), 0
    if d1 is None and ndim_of(x2) == 2 and d2 is not None and ndim_of(x1) == 2:
        # x1 @ v for each batch vector v: (m, k) @ (k, B) = (m, B)
        return ops.matmul(x1, x2 if d2 == 1 else ops.matrix_transpose(x2)), 1
    v1 = ndim_of(x1) - (d1 is not None) == 1
    v2 = ndim_of(x2) - (d2 is not None) == 1
    x1 = move_to_front(x1, d1)
    x2 = move_to_front(x2, d2)
    if v1:
        x1 = ops.expand_dims(x1, axis=1 if d1 is not None else 0)
    if v2:
        x2 = ops.expand_dims(x2, axis=-1)
    r1 = ndim_of(x1) - (d1 is not None)
    r2 = ndim_of(x2) - (d2 is not None)
    rank = max(r1, r2)

    def pad(x, d, r):
        if d is None or r == rank:
            return x
        s = shape_of(x)
        return ops.reshape(x, s[:1] + (1,) * (rank - r) + s[1:])

    out = ops.matmul(pad(x1, d1, r1), pad(x2, d2, r2))
    # Every batched operand carries its batch dim in front, padded to the full rank, so the
    # result's batch dim is in front too.
    if v2:
        out = ops.squeeze(out, axis=-1)
    if v1:
        # the row axis is last once the column axis is gone
        out = ops.squeeze(out, axis=-1 if v2 else -2)
    return out, 0


MATMUL_DOC = """Matrix product of ``x1`` and ``x2`` (the ``@`` operator).

Stacks of matrices ``(..., M, K) @ (..., K, N)`` multiply matrix by matrix, their leading
axes broadcasting; a 1-d ``x1`` is a row vector and a 1-d ``x2`` a column vector, the added
axis removed from the result (as NumPy and torch).

Returns
-------
array
    Shaped ``(..., M, N)`` (without ``M`` or ``N`` for a vector argument: ``vector @ vector``
    is 0-d), of the arguments' backend (inside a transform, a value of that transform) and
    promoted dtype. The gradients are ``g @ x2^H`` and ``x1^H @ g``, summed over broadcast
    axes (conjugate transposes: torch's convention for complex input).

Raises
------
ValueError
    If the contracted sizes differ, an argument is 0-d, or the leading axes do not broadcast.
TypeError
    If the arguments are arrays of two backends.

Examples
--------
>>> ad.matmul(ad.asarray([[1., 2.], [3., 4.]]), ad.asarray([1., 1.]))
tensor([3., 7.])
>>> a = ad.asarray([[1., 2.], [3., 4.]])
>>> ad.func.grad(lambda a: ad.sum(a @ ad.asarray([1., 1.])))(a)
tensor([[1., 1.],
        [1., 1.]])
"""


matmul_p = decl.primitive(
    "matmul", vjp=(_matmul_vjp1, _matmul_vjp2),
    jvp=(lambda t, ans, x1, x2: ops.matmul(t, x2), lambda t, ans, x1, x2: ops.matmul(x1, t)),
    batch=_matmul_batch, api="x1, x2, /", doc=MATMUL_DOC)


@decl.composite
def tensordot(x1, x2, /, *, axes=2):
    """Tensor contraction: the sum of products over ``axes`` of ``x1`` and of ``x2``.

    Parameters
    ----------
    x1, x2 : array
        The arrays to contract.
    axes : int or pair of sequences of ints, optional
        An int ``n`` (default 2) contracts the last ``n`` axes of ``x1`` with the first ``n`` of
        ``x2``, in order; ``(axes1, axes2)`` contracts ``x1``'s ``axes1[i]`` with ``x2``'s
        ``axes2[i]``.

    Returns
    -------
    array
        The free axes of ``x1`` followed by those of ``x2``, of the arguments' backend (inside
        a transform, a value of that transform) and promoted dtype. A composite of
        ``permute_dims``, ``reshape`` and ``matmul``: its derivatives come from theirs.

    Raises
    ------
    ValueError
        If the contracted axes differ in number or in size (the message gives both shapes).
    TypeError
        If the arguments are arrays of two backends.

    Examples
    --------
    >>> ad.tensordot(ad.ones((2, 3)), ad.ones((3, 4)), axes=1).shape
    (2, 4)
    >>> ad.tensordot(ad.asarray([[1., 2.], [3., 4.]]), ad.eye(2))   # the trace
    tensor(5.)
    """
    n1, n2 = ndim_of(x1), ndim_of(x2)
    if isinstance(axes, int):
        a1 = list(range(n1 - axes, n1))
        a2 = list(range(axes))
    else:
        a1 = [normalize_axis(a, n1) for a in axes[0]]
        a2 = [normalize_axis(a, n2) for a in axes[1]]
    free1 = [a for a in range(n1) if a not in a1]
    free2 = [a for a in range(n2) if a not in a2]
    s1, s2 = shape_of(x1), shape_of(x2)
    if len(a1) != len(a2) or any(s1[i] != s2[j] for i, j in zip(a1, a2)):
        raise ValueError(f"tensordot: the contracted axes must pair up with equal sizes: x1 "
                         f"{tuple(s1)} axes {tuple(a1)} against x2 {tuple(s2)} axes {tuple(a2)}")
    k = 1
    for a in a1:
        k *= s1[a]
    m = 1
    for a in free1:
        m *= s1[a]
    n = 1
    for a in free2:
        n *= s2[a]
    lhs = ops.reshape(ops.permute_dims(x1, tuple(free1 + a1)), (m, k))
    rhs = ops.reshape(ops.permute_dims(x2, tuple(a2 + free2)), (k, n))
    return ops.reshape(ops.matmul(lhs, rhs),
                       tuple(s1[a] for a in free1) + tuple(s2[a] for a in free2))


@decl.composite
def vecdot(x1, x2, /, *, axis=-1):
    """Dot products of the vectors along ``axis``: ``sum(conj(x1) * x2, axis=axis)``.

    Parameters
    ----------
    x1, x2 : array
        The vectors, along ``axis``; the other axes broadcast.
    axis : int, optional
        The axis of the vectors (default: the last), counted on the broadcast shape.

    Returns
    -------
    array
        The broadcast shape without ``axis``, of the arguments' backend (inside a transform, a
        value of that transform) and promoted dtype (small integers are not widened). For
        complex input ``x1`` is conjugated (the standard's rule; torch's ``dot`` does not
        conjugate, its ``vdot`` does).

    Raises
    ------
    ValueError
        If the two sizes along ``axis`` differ.
    TypeError
        If the arguments are arrays of two backends.

    Examples
    --------
    >>> ad.vecdot(ad.asarray([[1., 2.], [3., 4.]]), ad.asarray([1., 1.]))
    tensor([3., 7.])
    >>> ad.vecdot(ad.asarray([1j]), ad.asarray([1j]))   # conj(1j) * 1j
    tensor(1.0000+0.0000j, dtype=arrayad.complex128)
    """
    n1, n2 = shape_of(x1)[axis], shape_of(x2)[axis]
    if n1 != n2:
        raise ValueError(f"vecdot: the contracted axis has size {n1} in x1 and {n2} in x2")
    prod = ops.multiply(ops.conj(x1), x2) if ops.isdtype(x1.dtype, "complex floating") \
        else ops.multiply(x1, x2)
    # the sum keeps the promoted dtype (sum alone would widen small integers)
    return ops.sum(prod, axis=axis, dtype=prod.dtype)
