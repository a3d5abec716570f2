"""torch-style conveniences that the standard lacks, as composites of standard functions (so
their derivatives come from the primitives): relu, sigmoid, softmax, log_softmax, logsumexp,
diag, dot, allclose."""

from ._namespace import ops

from .._core._core import shape_of
from ._rules import Declarations, eye_like, is_complex, ndim_of

decl = Declarations(globals())



@decl.composite
def relu(x, /):
    """The rectified linear unit, ``max(x, 0)`` elementwise (torch's ``relu``).

    Returns
    -------
    array
        Shaped like ``x``, on its backend (inside a transform, a value of that transform); a
        floating ``x`` keeps its dtype, an integer one gives the default floating dtype. The
        derivative is 1 where ``x > 0`` and 0 elsewhere, including at 0 (as torch and JAX).

    Raises
    ------
    TypeError
        If ``x`` is not an array or a Python number.

    Examples
    --------
    >>> ad.relu(ad.asarray([-1., 0., 2.]))
    tensor([0., 0., 2.])
    >>> ad.func.grad(lambda x: ad.sum(ad.relu(x)))(ad.asarray([-1., 0., 2.]))
    tensor([0., 0., 1.])
    """
    return ops.where(x > 0, x, 0.0)


@decl.composite
def sigmoid(x, /):
    """The logistic function ``1 / (1 + exp(-x))`` elementwise (torch's ``sigmoid``).

    Computed as ``exp(-abs(x))`` over one plus itself where ``x < 0``, so that no
    intermediate overflows for large ``abs(x)``; complex ``x`` takes the formula as written.

    Returns
    -------
    array
        Shaped like ``x``, on its backend (inside a transform, a value of that transform), in
        ``(0, 1)`` for real ``x``; integer ``x`` gives the default floating dtype. The
        derivative is ``sigmoid(x) * (1 - sigmoid(x))``.

    Raises
    ------
    TypeError
        If ``x`` is not an array or a Python number.

    Examples
    --------
    >>> ad.sigmoid(ad.asarray(0.))
    tensor(0.5000)
    >>> ad.sigmoid(ad.asarray([-1000., 1000.]))
    tensor([0., 1.])
    """
    if is_complex(x):
        # the overflow-free form below needs an order (x >= 0) and |x| stands for x only when x
        # is real: on complex x it would silently drop the imaginary part. torch's form:
        return 1.0 / (1.0 + ops.exp(-x))
    e = ops.exp(-ops.abs(x))
    return ops.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


@decl.composite
def logsumexp(x, /, *, axis=None, keepdims=False):
    """``log(sum(exp(x)))`` over ``axis``, computed without overflow.

    The maximum is subtracted before ``exp`` and added back after ``log`` (it is a constant to
    the derivative, which does not depend on it).

    Parameters
    ----------
    x : array
        Input array.
    axis : int or tuple of ints, optional
        The axes to reduce; None, the default, reduces all of them. The tensor method
        ``x.logsumexp(dim, keepdim)`` takes torch's spelling.
    keepdims : bool, optional
        Keep the reduced axes as axes of length one.

    Returns
    -------
    array
        Of the backend of ``x`` (inside a transform, a value of that transform), shaped like
        ``x`` without the reduced axes. Its gradient is ``softmax(x)`` over the reduced axes.

    Raises
    ------
    IndexError
        If an axis is out of range for ``x`` (NumPy raises its ``AxisError``, which is both an
        ``IndexError`` and a ``ValueError``).
    ValueError
        If a reduced axis is empty.

    Examples
    --------
    >>> ad.logsumexp(ad.asarray([1000., 1000.]))   # 1000 + log(2); exp(1000) overflows
    tensor(1000.6931)
    >>> ad.func.grad(ad.logsumexp)(ad.asarray([0., 0.]))
    tensor([0.5000, 0.5000])
    """
    m = ops.stop_gradient(ops.max(x, axis=axis, keepdims=True))
    m = ops.where(ops.isfinite(m), m, 0.0)
    out = ops.log(ops.sum(ops.exp(x - m), axis=axis, keepdims=True)) + m
    if not keepdims:
        out = ops.squeeze(out, axis=tuple(range(ndim_of(x))) if axis is None else axis)
    return out


@decl.composite
def softmax(x, /, axis=-1):
    """``exp(x) / sum(exp(x))`` along ``axis``: non-negative values that sum to one.

    Parameters
    ----------
    x : array
        Input array.
    axis : int, optional
        The axis to normalize over (default: the last). Positional, as torch's ``dim``, which
        is spelled ``dim=`` only on the tensor method (``x.softmax(dim=0)``).

    Returns
    -------
    array
        Shaped like ``x``, of its backend (inside a transform, a value of that transform);
        integer ``x`` gives the default floating dtype. Computed as ``exp(x - logsumexp(x))``,
        without overflow.

    Raises
    ------
    IndexError
        If ``axis`` is out of range for ``x`` (NumPy raises its ``AxisError``, which is both an
        ``IndexError`` and a ``ValueError``).
    TypeError
        If given ``dim=`` (use ``axis=``, or pass it positionally).

    Examples
    --------
    >>> ad.softmax(ad.asarray([0., 0.]))
    tensor([0.5000, 0.5000])
    >>> ad.softmax(ad.asarray([[1., 1.], [2., 2.]]), 0)
    tensor([[0.2689, 0.2689],
            [0.7311, 0.7311]])
    """
    return ops.exp(x - logsumexp(x, axis=axis, keepdims=True))


@decl.composite
def log_softmax(x, /, axis=-1):
    """``log(softmax(x))`` along ``axis``, computed as ``x - logsumexp(x)`` (no ``log`` of an
    underflowed zero).

    Parameters
    ----------
    x : array
        Input array.
    axis : int, optional
        The axis to normalize over (default: the last). Positional, as torch's ``dim``, which
        is spelled ``dim=`` only on the tensor method (``x.log_softmax(dim=0)``).

    Returns
    -------
    array
        Shaped like ``x``, of its backend (inside a transform, a value of that transform);
        integer ``x`` gives the default floating dtype.

    Raises
    ------
    IndexError
        If ``axis`` is out of range for ``x`` (NumPy raises its ``AxisError``, which is both an
        ``IndexError`` and a ``ValueError``).
    TypeError
        If given ``dim=`` (use ``axis=``, or pass it positionally).

    Examples
    --------
    >>> ad.allclose(ad.log_softmax(ad.asarray([0., 0.])), ad.log(ad.asarray([0.5, 0.5])))
    True
    """
    return x - logsumexp(x, axis=axis, keepdims=True)


@decl.composite
def diag(x, /, diagonal=0):
    """torch's ``diag``: a vector becomes a diagonal matrix, a matrix gives its diagonal.

    Parameters
    ----------
    x : array
        A 1-d or 2-d array.
    diagonal : int, optional
        Which diagonal: 0, the default, is the main one, ``diagonal > 0`` above it,
        ``diagonal < 0`` below.

    Returns
    -------
    array
        For a 1-d ``x`` of length ``n``, the square matrix of size ``n + abs(diagonal)`` with
        ``x`` on that diagonal and zeros elsewhere; for a 2-d ``x``, that diagonal of ``x``
        (``linalg.diagonal``). Of the backend and dtype of ``x`` (inside a transform, a value
        of that transform). Linear in ``x``.

    Raises
    ------
    ValueError
        If ``x`` is neither 1-d nor 2-d.

    Examples
    --------
    >>> ad.diag(ad.asarray([1., 2.]))
    tensor([[1., 0.],
            [0., 2.]])
    >>> ad.diag(ad.asarray([[1., 2.], [3., 4.]]))
    tensor([1., 4.])
    """
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
    """Inner product of two vectors, ``sum(x1 * x2)`` (torch's ``dot``: not conjugated; for
    the conjugated product use ``vecdot``).

    Returns
    -------
    array
        A 0-d array of the arguments' backend (inside a transform, a value of that transform)
        and promoted dtype.

    Raises
    ------
    ValueError
        If an argument is not a 1-d array (as torch; NumPy's ``dot`` of matrices is ``matmul``,
        which says so), or the vectors have different lengths.
    TypeError
        If the arguments are arrays of two backends.

    Examples
    --------
    >>> ad.dot(ad.asarray([1., 2.]), ad.asarray([3., 4.]))
    tensor(11.)
    >>> ad.func.grad(lambda x: ad.dot(x, x))(ad.asarray([1., 2.]))
    tensor([2., 4.])
    """
    for x in (x1, x2):
        if ndim_of(x) != 1:   # (summing every product of broadcast matrices would be no dot)
            raise ValueError(f"dot: 1-d arrays expected, got shapes {shape_of(x1)} and "
                             f"{shape_of(x2)}; for matrices use arrayad.matmul (NumPy's dot), for "
                             f"batches of vectors arrayad.vecdot")
    if shape_of(x1) != shape_of(x2):
        raise ValueError(f"dot: the vectors have different lengths, {shape_of(x1)[0]} and "
                         f"{shape_of(x2)[0]}")
    return ops.sum(x1 * x2)


@decl.composite
def isclose(x1, x2, /, *, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether ``x1`` and ``x2`` are close, elementwise: ``abs(x1 - x2) <= atol + rtol *
    abs(x2)`` (NumPy's and torch's test; not symmetric in ``x1`` and ``x2``).

    Parameters
    ----------
    x1, x2 : array or Python scalar
        The values to compare; they broadcast together.
    rtol, atol : float, optional
        Relative and absolute tolerances (defaults 1e-05 and 1e-08).
    equal_nan : bool, optional
        Count two NaNs in the same place as close (default False).

    Returns
    -------
    array
        A bool array of the broadcast shape, on the arguments' backend (inside a transform, a
        value of that transform). Not differentiable.

    Raises
    ------
    ValueError
        If the shapes cannot be broadcast together.
    TypeError
        If the arguments are arrays of two backends.

    Examples
    --------
    >>> ad.isclose(ad.asarray([1., 2.]), ad.asarray([1. + 1e-9, 2.1]))
    tensor([ True, False])
    """
    close = ops.abs(x1 - x2) <= atol + rtol * ops.abs(x2)
    if equal_nan:
        close = ops.logical_or(close, ops.logical_and(ops.isnan(x1), ops.isnan(x2)))
    return close


@decl.composite(traced=False)
def allclose(x1, x2, /, *, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether every element of ``x1`` is close to ``x2``: ``all(isclose(x1, x2, ...))``.

    Parameters
    ----------
    x1, x2 : array or Python scalar
        The values to compare; they broadcast together.
    rtol, atol : float, optional
        Relative and absolute tolerances (defaults 1e-05 and 1e-08), as in ``isclose``.
    equal_nan : bool, optional
        Count two NaNs in the same place as close (default False).

    Returns
    -------
    bool
        A Python bool, as torch's ``allclose``. It needs a concrete value: inside ``grad`` it
        reads the value (no derivative flows), and inside ``vmap`` it raises.

    Raises
    ------
    ValueError
        If the shapes cannot be broadcast together.
    RuntimeError
        Inside ``vmap``, where the answer could differ between batch elements (use
        ``all(isclose(...))``, which stays an array).

    Examples
    --------
    >>> a = ad.linalg.inv(ad.asarray([[2., 0.], [0., 4.]]))
    >>> ad.allclose(a, ad.asarray([[0.5, 0.], [0., 0.25]]))
    True
    """
    return bool(ops.all(isclose(x1, x2, rtol=rtol, atol=atol, equal_nan=equal_nan)))


