"""torch.autograd.forward_ad: dual tensors for forward-mode AD, on arrayad's JVP interpreter.

``enter_dual_level`` opens a ``JvpInterpreter`` marked ``dual_level`` (NOTE [interpreters] in
``_core/_interp.pyx``); ``make_dual`` wraps a primal and its tangent in a dual tracer of it, so
every operation on it (built-in primitives and ``Function.jvp`` alike) propagates the tangent;
``unpack_dual`` reads it back; ``exit_dual_level`` closes it. The levels are the calling
context's (thread or asyncio task: they are open transforms, NOTE [thread state] in the core).
Unlike torch, a dual made in a level cannot be used after the level exits (it is a tracer of a
finished transform and says so); ``unpack_dual`` of such a value still returns its primal, with
tangent None.
"""

from collections import namedtuple
from typing import Any, Literal

from .._core import _core
from .._dtypes import is_inexact
from .._core._core import DualTracer, JvpInterpreter, dtype_of, new_dual, shape_of

__all__ = ["UnpackedDualTensor", "enter_dual_level", "exit_dual_level", "make_dual",
           "unpack_dual", "dual_level"]


def _levels() -> list[Any]:
    """The calling context's dual levels entered and not exited, outermost first; a level is an
    index."""
    return [f for f in _core.interpreters() if isinstance(f, JvpInterpreter) and f.dual_level]


class UnpackedDualTensor(namedtuple("UnpackedDualTensor", ["primal", "tangent"])):
    """``unpack_dual``'s result, a named tuple ``(primal, tangent)``.

    ``tangent`` is None when the value is not dual at the level asked.

    Raises
    ------
    TypeError
        If constructed with other than two fields (as any named tuple).

    Examples
    --------
    >>> from arrayad.autograd import forward_ad as fwAD
    >>> fwAD.unpack_dual(np.array([1.0]))
    UnpackedDualTensor(primal=array([1.]), tangent=None)
    """

    __slots__ = ()


def enter_dual_level() -> int:
    """Open a new forward-AD level in this thread or task and return its number (prefer
    ``dual_level``, which also closes it).

    Returns
    -------
    int
        The level, 0 for the outermost.

    Raises
    ------
    Exception
        Nothing of its own.

    Examples
    --------
    >>> from arrayad.autograd import forward_ad as fwAD
    >>> level = fwAD.enter_dual_level()
    >>> fwAD.unpack_dual(ad.sin(fwAD.make_dual(np.array([0.0]), np.array([1.0])))).tangent
    array([1.])
    >>> fwAD.exit_dual_level(level=level)
    """
    JvpInterpreter(dual_level=True).__enter__()
    return len(_levels()) - 1


def exit_dual_level(*, level: int | None = None) -> None:
    """Close the innermost forward-AD level of this thread or task; its duals lose their tangents.

    Parameters
    ----------
    level : int, optional
        The level to close; it must be the innermost one.

    Returns
    -------
    None

    Raises
    ------
    RuntimeError
        If no level is open, or ``level`` is not the innermost one.

    Examples
    --------
    >>> from arrayad.autograd import forward_ad as fwAD
    >>> level = fwAD.enter_dual_level()
    >>> fwAD.exit_dual_level(level=level)
    >>> fwAD.exit_dual_level()
    Traceback (most recent call last):
    ...
    RuntimeError: Trying to exit a forward AD level but no level is currently active.
    """
    levels = _levels()
    if not levels:
        raise RuntimeError("Trying to exit a forward AD level but no level is currently active.")
    if level is None:
        level = len(levels) - 1
    if level != len(levels) - 1:
        raise RuntimeError(
            f"Trying to exit a forward AD level that was not the last one created (level {level}, "
            f"the last one is {len(levels) - 1}). This is not supported.")
    levels[-1].close()


def _interpreter(level: object, api: str) -> Any:
    levels = _levels()   # (a transform that returned closed what it left open above it)
    if not levels:
        return None
    if level is None:
        return levels[-1]
    if not isinstance(level, int) or not 0 <= level < len(levels):
        raise RuntimeError(f"{api}: forward AD level {level!r} does not exist (active levels: "
                           f"0..{len(levels) - 1})")
    return levels[level]


def make_dual(tensor: Any, tangent: Any, *, level: int | None = None) -> Any:
    """A dual tensor: ``tensor`` carrying ``tangent``, its directional derivative, in ``level``.

    Every operation on it (built-in functions and ``Function.jvp`` alike) computes the tangent
    of its result alongside: forward-mode differentiation in eager style, as
    ``torch.autograd.forward_ad``. Read the tangent back with ``unpack_dual``.

    Parameters
    ----------
    tensor : array
        The primal, a float or complex array (any backend, or ``ad.Tensor``).
    tangent : array
        Its tangent, of the same shape.
    level : int, optional
        The level (default: the innermost open one).

    Returns
    -------
    tracer
        The dual value, usable in arrayad functions until its level exits (a tracer of a
        closed level refuses to be used, where torch keeps the primal).

    Raises
    ------
    RuntimeError
        If no level is open (enter ``dual_level()`` first), ``level`` does not exist, or the
        shapes differ.
    ValueError
        If the primal or the tangent has an integer or boolean dtype.
    TypeError
        If the primal or the tangent is not an array.

    Examples
    --------
    The derivative of ``exp`` is ``exp``: at 0 and 1, along a tangent of ones:

    >>> from arrayad.autograd import forward_ad as fwAD
    >>> x = np.array([0.0, 1.0])
    >>> with fwAD.dual_level():
    ...     y = ad.exp(fwAD.make_dual(x, np.ones(2)))
    ...     primal, tangent = fwAD.unpack_dual(y)
    >>> bool(np.allclose(tangent, np.exp(x)))
    True
    """
    interp = _interpreter(level, "make_dual")
    if interp is None:
        raise RuntimeError(
            "Trying to create a dual Tensor for forward AD but no level exists, make sure to "
            "enter_dual_level() first.")
    from ..func import _is_array
    for what, v in (("primal", tensor), ("tangent", tangent)):
        if not _is_array(v):
            raise TypeError(f"make_dual: the {what} must be an array, got {type(v).__name__}")
    if not is_inexact(dtype_of(tensor)):
        raise ValueError(
            f"Expected primal to be floating point or complex, but got: {dtype_of(tensor)}. "
            f"Convert it first, e.g. x.astype(arrayad.float64).")
    if not is_inexact(dtype_of(tangent)):
        raise ValueError(
            f"Expected tangent to be floating point or complex, but got: {dtype_of(tangent)}.")
    if shape_of(tangent) != shape_of(tensor):
        raise RuntimeError(
            f"Trying to set a forward gradient that has a different size than that of the "
            f"original Tensor, this is not supported. Tensor is of size {list(shape_of(tensor))} "
            f"while the given forward gradient is of size {list(shape_of(tangent))}.")
    if isinstance(tensor, DualTracer) and tensor.interpreter is interp:
        tensor = tensor.value   # a new tangent replaces the old one, as in torch
    return new_dual(interp, tensor, tangent)


def unpack_dual(tensor: Any, *, level: int | None = None) -> UnpackedDualTensor:
    """The primal and the tangent of ``tensor`` at ``level``.

    Parameters
    ----------
    tensor : array
        A dual value, or any other array (whose tangent is None).
    level : int, optional
        The level (default: the innermost open one).

    Returns
    -------
    UnpackedDualTensor
        ``(primal, tangent)``; ``tangent`` is None if ``tensor`` is not dual at that level (or
        its level has exited).

    Raises
    ------
    RuntimeError
        If ``level`` does not exist.

    Examples
    --------
    >>> from arrayad.autograd import forward_ad as fwAD
    >>> with fwAD.dual_level():
    ...     y = fwAD.make_dual(np.array([2.0]), np.array([1.0])) ** 2
    ...     fwAD.unpack_dual(y)        # d/dx x ** 2 = 2 x
    UnpackedDualTensor(primal=array([4.]), tangent=array([4.]))
    """
    if isinstance(tensor, DualTracer) and not tensor.interpreter.alive and \
            tensor.interpreter.dual_level:
        return UnpackedDualTensor(tensor.value, None)   # its level has exited
    interp = _interpreter(level, "unpack_dual")
    if interp is not None and isinstance(tensor, DualTracer) and tensor.interpreter is interp:
        return UnpackedDualTensor(tensor.value, tensor.tangent)
    return UnpackedDualTensor(tensor, None)


class dual_level:
    """``with dual_level():`` opens a forward-AD level for the duration of the block.

    ``as`` gives the level's number. For higher derivatives, compose ``arrayad.func.jvp``.

    Raises
    ------
    Exception
        Nothing of its own; an exception inside the block propagates after the level is
        closed.

    Examples
    --------
    >>> from arrayad.autograd import forward_ad as fwAD
    >>> with fwAD.dual_level() as level:
    ...     y = ad.sin(fwAD.make_dual(np.array([0.0]), np.array([1.0])))
    ...     fwAD.unpack_dual(y).tangent     # cos(0)
    array([1.])
    >>> level
    0
    """

    def __enter__(self) -> int:
        return enter_dual_level()

    def __exit__(self, *exc: object) -> Literal[False]:
        exit_dual_level()
        return False
