"""torch.autograd.forward_ad: dual tensors for forward-mode AD, on arrayad's JVP interpreter.

``enter_dual_level`` opens a ``JvpInterpreter`` marked ``dual_level`` (NOTE [interpreters] in
``_core.pyx``); ``make_dual`` wraps a primal and its tangent in a dual tracer of it, so every
operation on it (built-in primitives and ``Function.jvp`` alike) propagates the tangent;
``unpack_dual`` reads it back; ``exit_dual_level`` closes it. The levels are the calling thread's.
Unlike torch, a dual made in a level cannot be used after the level exits (it is a tracer of a
finished transform and says so); ``unpack_dual`` of such a value still returns its primal, with
tangent None.
"""

from collections import namedtuple

from .._core import _core
from .._dtypes import is_inexact
from .._core._core import DualTracer, JvpInterpreter, dtype_of, new_dual, shape_of

__all__ = ["UnpackedDualTensor", "enter_dual_level", "exit_dual_level", "make_dual",
           "unpack_dual", "dual_level"]


def _levels():
    """This thread's dual levels entered and not exited, outermost first; a level is an index."""
    return _core.thread_state().dual_levels


class UnpackedDualTensor(namedtuple("UnpackedDualTensor", ["primal", "tangent"])):
    """``unpack_dual``'s result: ``primal`` and ``tangent`` (None when the value is not dual)."""

    __slots__ = ()


def enter_dual_level():
    """Open a new forward-AD level and return its number (use ``dual_level`` where possible)."""
    interp = JvpInterpreter(dual_level=True)
    interp.__enter__()
    levels = _levels()
    levels.append(interp)
    return len(levels) - 1


def exit_dual_level(*, level=None):
    """Close the innermost forward-AD level (``level`` must be that one when given)."""
    levels = _levels()
    if not levels:
        raise RuntimeError("Trying to exit a forward AD level but no level is currently active.")
    if level is None:
        level = len(levels) - 1
    if level != len(levels) - 1:
        raise RuntimeError(
            f"Trying to exit a forward AD level that was not the last one created (level {level}, "
            f"the last one is {len(levels) - 1}). This is not supported.")
    levels.pop().close()


def _interpreter(level, api):
    levels = _levels()
    # A transform that returned may have closed our level already (it closes what is left
    # above it).
    while levels and not levels[-1].alive:
        levels.pop()
    if not levels:
        return None
    if level is None:
        return levels[-1]
    if not isinstance(level, int) or not 0 <= level < len(levels):
        raise RuntimeError(f"{api}: forward AD level {level!r} does not exist (active levels: "
                           f"0..{len(levels) - 1})")
    return levels[level]


def make_dual(tensor, tangent, *, level=None):
    """A dual tensor: ``tensor`` carrying ``tangent`` (its directional derivative) in ``level``."""
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


def unpack_dual(tensor, *, level=None):
    """``(primal, tangent)`` of ``tensor`` at ``level``; tangent is None if it is not dual there."""
    if isinstance(tensor, DualTracer) and not tensor.interpreter.alive and \
            tensor.interpreter.dual_level:
        return UnpackedDualTensor(tensor.value, None)   # its level has exited
    interp = _interpreter(level, "unpack_dual")
    if interp is not None and isinstance(tensor, DualTracer) and tensor.interpreter is interp:
        return UnpackedDualTensor(tensor.value, tensor.tangent)
    return UnpackedDualTensor(tensor, None)


class dual_level:
    """``with dual_level():`` — a forward-AD level for the duration of the block."""

    def __enter__(self):
        return enter_dual_level()

    def __exit__(self, *exc):
        exit_dual_level()
        return False
