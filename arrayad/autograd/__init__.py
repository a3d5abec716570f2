"""torch.autograd's API on arrayad's eager tape: backward, grad, the grad-mode switches,
``Function`` (custom rules) and ``forward_ad``."""

import functools
import inspect
import math
import threading
from collections.abc import Callable, Generator, Sequence
from typing import Any, Literal, ParamSpec, TypeVar, overload

from .._core import _core
from .._core._core import Array, Tensor, owned, run_backward, shape_of, unit_cotangent
from .._ops import ops
from ..backends import _reset

__all__ = ["backward", "grad", "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled",
           "Function", "once_differentiable", "forward_ad", "FunctionCtx"]

_P = ParamSpec("_P")
_R = TypeVar("_R")
_Tensors = Tensor | Sequence[Tensor]



# -- grad mode (per context: thread or asyncio task, NOTE [thread state] in the core) --------------
class _GradMode:
    """A context manager and decorator that sets the calling context's grad mode (a
    ``contextvars`` variable: per thread and per asyncio task) and restores it on exit.

    As a decorator it changes nothing until the function runs; on a generator function it covers
    the generator's body: each resumption runs in the mode, and the caller's mode is back whenever
    the generator yields (as torch's decorators do)."""

    _mode: bool | None = None

    def __init__(self) -> None:
        # One object may be entered by several threads or tasks, or re-entered: the tokens of the
        # blocks it has open, per thread, innermost last.
        self._tokens: dict[int, list[Any]] = {}

    def __enter__(self) -> "_GradMode":
        self._push(_core.grad_mode.set(self._mode))
        return self

    def _push(self, token: Any) -> None:
        self._tokens.setdefault(threading.get_ident(), []).append(token)

    def __exit__(self, *exc: object) -> Literal[False]:
        tokens = self._tokens.get(threading.get_ident())
        if not tokens:
            raise RuntimeError(f"{type(self).__name__}: a grad-mode block was left in another "
                               f"thread than it was entered in (or left twice)")
        # The innermost block of the calling context: a token set in another context (another
        # task entered this same object) refuses the reset.
        for i in range(len(tokens) - 1, -1, -1):
            try:
                _core.grad_mode.reset(tokens[i])
            except ValueError:
                continue
            del tokens[i]
            break
        else:
            # Entered in a context that is no longer current (a generator holding the block
            # across a yield, resumed in another task): restore the mode it replaced.
            _reset(_core.grad_mode, tokens.pop(), True)
        if not tokens:
            del self._tokens[threading.get_ident()]
        return False

    def _fresh(self) -> "_GradMode":
        """A new manager of the same mode (what a decorated function enters on each call)."""
        return type(self)()

    def __call__(self, fn: Callable[_P, _R]) -> Callable[_P, _R]:
        if inspect.isgeneratorfunction(fn):
            @functools.wraps(fn)
            def generator_wrapper(*args: _P.args, **kwargs: _P.kwargs) -> Any:
                return (yield from _generator_in_mode(fn(*args, **kwargs), self._fresh))
            return generator_wrapper

        @functools.wraps(fn)
        def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            with self._fresh():
                return fn(*args, **kwargs)
        return wrapper


def _generator_in_mode(gen: Generator[Any, Any, Any],
                       make_mode: Callable[[], _GradMode]) -> Generator[Any, Any, Any]:
    """Drive ``gen`` with every step (start, send, throw, close) inside ``make_mode()``."""
    with make_mode():
        try:
            value = next(gen)
        except StopIteration as stop:
            return stop.value
    while True:
        try:
            sent = yield value
        except GeneratorExit:
            with make_mode():
                gen.close()
            raise
        except BaseException as exc:
            with make_mode():
                try:
                    value = gen.throw(exc)
                except StopIteration as stop:
                    return stop.value
        else:
            with make_mode():
                try:
                    value = gen.send(sent)
                except StopIteration as stop:
                    return stop.value


class no_grad(_GradMode):
    """Context manager and decorator under which operations record nothing on the tape.

    Inside, results of operations on tensors that require grad do not require grad (no
    ``grad_fn``), which saves the memory of the record: use it for evaluation and for
    parameter updates. The mode is the calling thread's or asyncio task's (another task running
    while this one awaits inside the block keeps its own); the previous one is restored on exit,
    also when an exception leaves the block. The transforms of ``arrayad.func`` are not affected:
    ``grad(f)`` still differentiates ``f`` inside a ``no_grad`` block, and respects one inside
    ``f`` (as torch.func).

    As a decorator, each call of the function runs in the mode (a generator function: each
    step of the generator).

    Raises
    ------
    Exception
        Nothing of its own; an exception raised inside the block propagates, after the
        previous mode is restored.

    See Also
    --------
    enable_grad, set_grad_enabled, is_grad_enabled

    Examples
    --------
    >>> x = ad.tensor([1.0, 2.0], requires_grad=True)
    >>> with ad.no_grad():
    ...     y = x * 2
    >>> y.requires_grad
    False
    >>> (x * 2).requires_grad
    True

    As a decorator:

    >>> @ad.no_grad()
    ... def evaluate(x):
    ...     return ad.sum(x ** 2)
    >>> evaluate(x)
    tensor(5.)
    """
    _mode = False


class enable_grad(_GradMode):
    """Context manager and decorator that re-enables recording, e.g. inside a ``no_grad`` block.

    The mode is this thread's or task's; the previous one is restored on exit. As a decorator,
    each call of the function runs with recording enabled.

    Raises
    ------
    Exception
        Nothing of its own; an exception raised inside the block propagates, after the
        previous mode is restored.

    Examples
    --------
    >>> x = ad.tensor([1.0, 2.0], requires_grad=True)
    >>> with ad.no_grad():
    ...     with ad.enable_grad():
    ...         y = x * 2
    ...     z = x * 2
    >>> y.requires_grad, z.requires_grad
    (True, False)
    """
    _mode = True


class set_grad_enabled(_GradMode):
    """Set the grad mode of this thread or asyncio task to ``mode``: at once when called, back on
    exit when used with ``with``.

    As a decorator it undoes that immediate change and sets the mode only while the decorated
    function runs (torch's behaviour). Called alone, ``ad.set_grad_enabled(False)`` changes the
    mode until it is set again.

    Parameters
    ----------
    mode : bool
        True to record operations on tensors that require grad, False not to.

    Raises
    ------
    TypeError
        If ``mode`` is not a bool (or NumPy bool).

    Examples
    --------
    >>> x = ad.tensor([1.0, 2.0], requires_grad=True)
    >>> is_train = False
    >>> with ad.set_grad_enabled(is_train):
    ...     y = x * 2
    >>> y.requires_grad, ad.is_grad_enabled()
    (False, True)
    """

    def __init__(self, mode: bool) -> None:
        super().__init__()
        if not isinstance(mode, bool) and type(mode).__name__ != "bool_":
            raise TypeError(f"set_grad_enabled(mode): mode must be a bool, got "
                            f"{type(mode).__name__}")
        self._mode = bool(mode)
        self._creation = _core.grad_mode.set(self._mode)

    def __enter__(self) -> "set_grad_enabled":
        # the mode is set already (at construction): the block restores what that replaced
        token, self._creation = self._creation, None
        self._push(token if token is not None else _core.grad_mode.set(self._mode))
        return self

    def _fresh(self) -> _GradMode:
        fresh = _GradMode()
        fresh._mode = self._mode
        return fresh

    def __call__(self, fn: Callable[_P, _R]) -> Callable[_P, _R]:
        if self._creation is not None:   # decorating changes nothing yet
            _reset(_core.grad_mode, self._creation, True)
            self._creation = None
        return super().__call__(fn)


def is_grad_enabled() -> bool:
    """Whether operations on tensors that require grad are recorded in this thread or task.

    Returns
    -------
    bool
        True unless a ``no_grad`` block or ``set_grad_enabled(False)`` is in force.

    Raises
    ------
    Exception
        Nothing of its own.

    Examples
    --------
    >>> ad.autograd.is_grad_enabled()
    True
    >>> with ad.no_grad():
    ...     ad.autograd.is_grad_enabled()
    False
    """
    return _core.is_grad_enabled()


# -- backward / grad -------------------------------------------------------------------------------
def _in_transform() -> bool:
    """Whether an arrayad.func transform is open in this thread or task (a forward_ad dual level
    is not one: the eager tape works inside it, as in torch)."""
    return _core.in_transform()


def _no_transform(api: str) -> None:
    if _in_transform():
        raise RuntimeError(
            f"{api}() called inside an arrayad.func transform. This is not supported, please use "
            f"arrayad.func.grad or arrayad.func.vjp instead or call {api}() outside of the "
            f"transform.")


@overload
def _as_tuple(x: None) -> None: ...
@overload
def _as_tuple(x: Any) -> tuple[Any, ...]: ...
def _as_tuple(x: Any) -> tuple[Any, ...] | None:
    if x is None:
        return None
    if isinstance(x, (list, tuple)):
        return tuple(x)
    return (x,)


def _roots_and_cts(tensors: tuple[Any, ...], grad_tensors: Any, create_graph: bool,
                   api: str) -> tuple[list[Any], list[Any]]:
    roots: list[Any] = []
    cts: list[Any] = []
    grad_tensors = _as_tuple(grad_tensors) or (None,) * len(tensors)
    if len(grad_tensors) != len(tensors):
        raise RuntimeError(f"{api}: got {len(grad_tensors)} gradients for {len(tensors)} tensors")
    for i, (t, g) in enumerate(zip(tensors, grad_tensors)):
        if not isinstance(t, Tensor) or not t.requires_grad:
            raise RuntimeError(
                f"element {i} of tensors does not require grad and does not have a grad_fn. "
                f"Make an input require grad (x.requires_grad_() or arrayad.tensor(..., "
                f"requires_grad=True)) before computing the output.")
        if g is None:
            if math.prod(t.shape) != 1:
                raise RuntimeError(
                    f"grad can be implicitly created only for scalar outputs (output {i} has "
                    f"shape {t.shape}); pass gradient= with the output's shape.")
            g = unit_cotangent(t._value)
        else:
            if shape_of(g) != t.shape:
                raise RuntimeError(
                    f"Mismatch in shape: grad_output[{i}] has a shape of {shape_of(g)} and "
                    f"output[{i}] has a shape of {t.shape}.")
            if not create_graph:
                g = g._value if isinstance(g, Tensor) else ops.stop_gradient(g)
        if create_graph and not isinstance(g, Array):
            g = Tensor(g)
        roots.append((t._node, t._idx))
        cts.append(g)
    return roots, cts


def backward(tensors: _Tensors, grad_tensors: Any = None, retain_graph: bool | None = None,
             create_graph: bool = False, grad_variables: Any = None,
             inputs: _Tensors | None = None) -> None:
    """Accumulate the gradients of ``tensors`` into the ``.grad`` of the leaves they depend on.

    The eager tape's backward pass, as ``torch.autograd.backward`` (``t.backward()`` calls it):
    gradients are summed into ``.grad``, so zero it (``x.grad = None``) between steps.

    Parameters
    ----------
    tensors : Tensor or sequence of Tensor
        Outputs to differentiate; each must require grad.
    grad_tensors : array or sequence, optional
        The cotangent of each output (its shape); None for an output with one element means 1.
    retain_graph : bool, optional
        Keep the saved values so that the graph can be traversed again (default:
        ``create_graph``).
    create_graph : bool, optional
        Record the backward pass itself, so that the gradients can be differentiated again.
    grad_variables : optional
        An old name of ``grad_tensors``.
    inputs : Tensor or sequence of Tensor, optional
        Accumulate only into these (which may be non-leaves); by default into every leaf.

    Returns
    -------
    None
        The gradients are in ``.grad``.

    Raises
    ------
    RuntimeError
        If an output does not require grad; if an output with more than one element gets no
        gradient, or a gradient of another shape; if the graph was freed by an earlier backward
        pass (pass ``retain_graph=True`` to the first); if called inside an ``arrayad.func``
        transform (use ``arrayad.func.grad`` or ``vjp`` there).

    Examples
    --------
    The gradient of ``sum(x ** 2)`` is ``2 x``; a second pass adds to it:

    >>> x = ad.tensor([1.0, 2.0, 3.0], requires_grad=True)
    >>> ad.autograd.backward(ad.sum(x ** 2))
    >>> x.grad
    tensor([2., 4., 6.])
    >>> ad.sum(x ** 2).backward()
    >>> x.grad
    tensor([ 4.,  8., 12.])
    """
    if _core.in_transform():   # (_no_transform, inline: this is every .backward())
        _no_transform("backward")
    tensors = _as_tuple(tensors)
    if grad_variables is not None:
        grad_tensors = grad_variables
    if retain_graph is None:
        retain_graph = create_graph
    roots, cts = _roots_and_cts(tensors, grad_tensors, create_graph, "backward")
    only = None
    if inputs is not None:
        inputs = _as_tuple(inputs)
        only = set()
        for t in inputs:
            if not isinstance(t, Tensor) or not t.requires_grad:
                raise RuntimeError("backward: every tensor in inputs= must require grad")
            if not t.is_leaf:
                t.retain_grad()
            only.add(t._node)
    prev = _core.set_grad_enabled_flag(bool(create_graph))
    try:
        run_backward(roots, cts, bool(retain_graph), bool(create_graph), None, True, only)
    finally:
        _core.set_grad_enabled_flag(prev)


def grad(outputs: _Tensors, inputs: _Tensors, grad_outputs: Any = None,
         retain_graph: bool | None = None, create_graph: bool = False, only_inputs: bool = True,
         allow_unused: bool | None = None, is_grads_batched: bool = False,
         materialize_grads: bool = False) -> tuple[Any, ...]:
    """The gradients of ``outputs`` with respect to ``inputs``, returned (``.grad`` is left as it
    is), as ``torch.autograd.grad``.

    Parameters
    ----------
    outputs : Tensor or sequence of Tensor
        Outputs to differentiate; each must require grad.
    inputs : Tensor or sequence of Tensor
        Tensors that require grad, leaves or not.
    grad_outputs : array or sequence, optional
        The cotangent of each output; None for an output with one element means 1.
    retain_graph : bool, optional
        Keep the graph for another pass (default: ``create_graph``).
    create_graph : bool, optional
        Record this backward pass, so that the gradients can be differentiated again (higher
        derivatives).
    only_inputs : bool, optional
        Ignored (torch's signature).
    allow_unused : bool, optional
        Return None for an input the outputs do not depend on, instead of raising (default:
        ``materialize_grads``).
    is_grads_batched : bool, optional
        Treat the first dimension of each ``grad_outputs`` as a batch and map over it (one
        vector-Jacobian product per row, with ``vmap``).
    materialize_grads : bool, optional
        Return zeros instead of None for unused inputs.

    Returns
    -------
    tuple of Tensor
        One gradient per input, with its shape (None or zeros for unused inputs, as above).

    Raises
    ------
    RuntimeError
        If an input or an output does not require grad; if an input was not used and
        ``allow_unused`` is false; if an output with more than one element gets no gradient,
        or one of another shape; if the graph was freed by an earlier pass; if called inside
        an ``arrayad.func`` transform.

    Examples
    --------
    The derivative of ``x ** 3`` is ``3 x ** 2``, and with ``create_graph`` the second
    derivative ``6 x`` follows:

    >>> x = ad.tensor([1.0, 2.0], requires_grad=True)
    >>> (g,) = ad.autograd.grad(ad.sum(x ** 3), x, create_graph=True)
    >>> g
    tensor([ 3., 12.], grad_fn=<MultiplyBackward>)
    >>> ad.autograd.grad(ad.sum(g), x)
    (tensor([ 6., 12.]),)
    >>> x.grad is None
    True
    """
    _no_transform("autograd.grad")
    outputs = _as_tuple(outputs)
    inputs = _as_tuple(inputs)
    if allow_unused is None:
        allow_unused = materialize_grads
    if retain_graph is None:
        retain_graph = create_graph
    if is_grads_batched:
        from ..func import vmap

        def one(*gs: Any) -> tuple[Any, ...]:
            return grad(outputs, inputs, gs, retain_graph=True, create_graph=create_graph,
                        allow_unused=allow_unused, materialize_grads=materialize_grads)
        batched: tuple[Any, ...] = vmap(one)(*_as_tuple(grad_outputs))   # (one's tuple)
        return batched
    for i, t in enumerate(inputs):
        if not isinstance(t, Tensor) or not t.requires_grad:
            raise RuntimeError(f"One of the differentiated Tensors (index {i}) does not require "
                               f"grad")
    roots, cts = _roots_and_cts(outputs, grad_outputs, create_graph, "autograd.grad")
    want = {(t._node, t._idx): None for t in inputs}
    prev = _core.set_grad_enabled_flag(bool(create_graph))
    try:
        run_backward(roots, cts, bool(retain_graph), bool(create_graph), want, False, None)
    finally:
        _core.set_grad_enabled_flag(prev)
    result = []
    for i, t in enumerate(inputs):
        g = want[(t._node, t._idx)]
        if g is None:
            if materialize_grads:
                g = ops.zeros_like(t.detach())
            elif not allow_unused:
                raise RuntimeError(
                    f"The differentiated Tensor at index {i} appears to not have been used in the "
                    f"graph. Set allow_unused=True if this is the desired behavior.")
        elif not isinstance(g, Tensor):
            g = Tensor(owned(g))   # (the caller's to update in place)
        result.append(g)
    return tuple(result)


from .function import Function, FunctionCtx, once_differentiable  # noqa: E402
from . import forward_ad  # noqa: E402
