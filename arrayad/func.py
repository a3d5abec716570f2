"""torch.func's transforms: grad, grad_and_value, vjp, jvp, linearize, jacrev, jacfwd, hessian,
vmap (and JAX's value_and_grad).

Each transform call opens an interpreter of the core (``with GradInterpreter() as interp``: NOTE
[interpreters] in ``_core/_interp.pyx``), wraps its inputs in tracers of that interpreter, calls the
function and unwraps what comes out. ``grad`` is ``vjp`` with a cotangent of ones; ``jacrev``,
``jacfwd`` and ``vmap(chunk_size=...)`` share one chunker (``_vmap_impl``). Inputs and outputs keep
their type: NumPy in, NumPy out; ``ops.Tensor`` in, ``ops.Tensor`` out; a tracer of an outer
transform in, a tracer of that transform out.
"""

import functools
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal, ParamSpec, TypeAlias, overload

from numpy import ndarray as _ndarray

from . import _dtypes
from ._dtypes import is_inexact
from ._core._core import (Array, BatchInterpreter, BatchTracer, GradInterpreter, JvpInterpreter,
                          Tensor, dtype_of, interpreters, new_dual, owned, run_backward, shape_of,
                          topological_order, unit_cotangent)
from ._ops import ops
from ._ops.creation import made_inside
from ._pytree import (LEAF, _node_of, broadcast_prefix, register_dataclass, register_pytree_node,
                      tree_flatten, tree_map, tree_unflatten)
from .backends import (backend_of, can_stand_for, default_backend, get_rng_state,
                       set_rng_state)
from ._jit import make_program as make_program   # (arrayad.jit's program, for inspection)
from ._core._core import constant_zeros   # (Jacobian bases: NOTE [strong zeros])

__all__ = ["grad", "grad_and_value", "value_and_grad", "vjp", "jvp", "linearize", "jacrev",
           "jacfwd", "hessian", "vmap", "register_pytree_node", "register_dataclass",
           "tree_flatten", "tree_unflatten", "tree_map", "custom_vjp", "custom_jvp", "checkpoint",
           "remat", "checkpoint_policies", "cond", "switch", "while_loop", "fori_loop", "scan",
           "jacobian_sparsity", "hessian_sparsity", "jacobian_coloring", "hessian_coloring",
           "sparse_jacobian", "sparse_hessian"]
# (map, jax.lax.map, is public but not in __all__: `from arrayad.func import *` must not shadow
# the builtin. The API reference lists it all the same: docs/_ext/api_pages.py)

# NOTE [typed transforms]: a transform's result takes ``func``'s parameters (``_P``) where its
# wrapper passes the call on as it is (grad, grad_and_value, value_and_grad, vmap); jacrev,
# jacfwd and hessian take positional arguments only, which ``_P`` cannot say, so they are
# ``Callable[..., Any]``. Their results are ``Any`` (a pair where they are a pair): arrays, or
# pytrees of them, of the kind of array the caller passed (NumPy in, NumPy out), shaped like the
# differentiated arguments or, for vmap, like ``func``'s output with the batch dimension; not
# ``func``'s return type, which describes what ``func`` returns on the transform's tracers.
# (``jit(f)`` keeps ``f``'s return type: it means ``f``.)
_P = ParamSpec("_P")
_Argnums: TypeAlias = int | tuple[int, ...] | list[int]



# ---------------------------------------------------------------------------------------------
# Values in and out

def _is_array(x: object) -> bool:
    return isinstance(x, Array) or (not isinstance(x, (bool, int, float, complex, str, type(None)))
                                    and hasattr(x, "shape") and hasattr(x, "dtype"))


def _is_bare_array(x: object) -> bool:
    """Whether ``x`` is one array that is a leaf of the pytrees (what ``tree_flatten`` would
    give back as it is, and ``_as_array`` pass unchanged): the transforms skip their pytree work
    for it."""
    if type(x) is _ndarray:   # (the common case, without _is_array's attribute probes)
        return _node_of(x) is None
    return (isinstance(x, Array) or _is_array(x)) and _node_of(x) is None


def _as_array(x: Any, api: object, what: str = "Thing passed to transform API") -> Any:
    """A leaf at a differentiated position: arrays pass; Python floats become 0-d arrays of the
    default backend; anything else is refused."""
    if isinstance(x, Array):
        return x
    if isinstance(x, float):
        return default_backend().xp.asarray(x, dtype=default_backend().xp.float64)
    if isinstance(x, complex):
        return default_backend().xp.asarray(x)
    if not _is_array(x):
        raise ValueError(f"{api}: {what} must be an array (ops.Tensor, NumPy, torch, ...), got "
                         f"{type(x)}")
    return x


def _check_same_backend(x: Any, like: Any, what: str, of: str) -> None:
    bx, bl = backend_of(x), backend_of(like)
    if not can_stand_for(bx, bl):
        raise ValueError(f"{what} is a {bx.name} array but {of} is {bl.name}: pass it on the "
                         f"same backend (arrayad.asarray(t, device=x.device)).")


def _check_callable(func: object, name: str) -> None:
    if not callable(func):
        raise TypeError(f"{name}(func, ...): func must be a callable (the function to "
                        f"transform), got {type(func).__name__}")


def _check_float(x: Any, api: object, where: str) -> None:
    dt = dtype_of(x)
    if not is_inexact(dt):
        raise ValueError(
            f"{api}: Expected {where} to be floating point or complex, but got {dt.name}. "
            f"Differentiate with respect to a float array (x.astype(arrayad.float64)).")


class _Native:
    """Converts results back to the kind of values the caller passed (see module docstring)."""

    __slots__ = ("mode",)

    def __init__(self, leaves: Iterable[Any]) -> None:
        mode = "raw"
        for x in leaves:
            if isinstance(x, Tensor):
                mode = "tensor"
            elif isinstance(x, Array):
                self.mode = "tracer"
                return
        self.mode = mode

    @classmethod
    def of_one(cls, x: Any) -> "_Native":
        """The same for one argument (the raw NumPy array of grad(f)(x) needs no loop)."""
        return _RAW if type(x) is _ndarray else cls((x,))

    @classmethod
    def of_args(cls, args: Sequence[Any]) -> "_Native":
        """The same, from a call's arguments: only containers are flattened."""
        leaves = []
        for a in args:
            if isinstance(a, (tuple, list, dict)) or not _is_array(a):
                leaves.extend(tree_flatten(a)[0])
            else:
                leaves.append(a)
        return cls(leaves)

    def __call__(self, x: Any) -> Any:
        if self.mode == "raw":
            if isinstance(x, Tensor) and not x.requires_grad:
                return x._value
        elif self.mode == "tensor":
            if _is_array(x) and not isinstance(x, Array):
                return Tensor(x)
        return x

    def tree(self, tree: Any) -> Any:
        if self.mode == "tracer":
            return tree
        return tree_map(self, tree)


_RAW = _Native(())   # (raw in, raw out: shared, it has no state but its mode)


def _split_aux(out: Any, has_aux: bool, api: object) -> tuple[Any, Any]:
    """``(output, aux)`` of a function called with ``has_aux`` (aux None without it)."""
    if not has_aux:
        return out, None
    if not (isinstance(out, tuple) and len(out) == 2):
        raise RuntimeError(f"{api}: output of function f should be a tuple: (output, aux) if "
                           f"has_aux is True")
    return out


def _output_leaves(out: Any, api: object) -> tuple[list[Any], Any]:
    """The array leaves of a function's output (anything else is refused)."""
    leaves, spec = tree_flatten(out)
    for o in leaves:
        if not _is_array(o):
            raise RuntimeError(f"{api}: Expected f to return arrays, got {type(o)}")
    return leaves, spec


def _fname(func: object) -> str:
    return getattr(func, "__name__", None) or repr(func)


def _check_jax_flags(name: str, holomorphic: bool = False, allow_int: bool = False) -> None:
    """JAX's ``holomorphic=`` and ``allow_int=`` of the gradient transforms: False (JAX's
    default, the meaning of arrayad's transforms) is accepted; True is refused with what to
    write instead (arrayad's complex convention is torch's, and integers have no gradient)."""
    if holomorphic:
        raise ValueError(
            f"{name}(f, holomorphic=True): {name} here follows torch's convention for complex "
            f"numbers (real outputs; a complex input's gradient is the conjugate of JAX's). The "
            f"complex derivative f'(z) of a holomorphic f is forward mode's: "
            f"jacfwd(f, holomorphic=True)(z), or jvp(f, (z,), (ad.ones_like(z),))[1].")
    if allow_int:
        raise ValueError(
            f"{name}(f, allow_int=True): integer arguments have no gradient in arrayad (JAX "
            f"gives them float0 zeros): leave them out of argnums, or differentiate with "
            f"respect to x.astype(ad.float64).")


# ---------------------------------------------------------------------------------------------
# argnums

def _check_argnums(argnums: object, nargs: int | None, api: str) -> tuple[int, ...]:
    """The non-negative argument positions of ``argnums``, or torch.func's error naming ``api``.
    ``nargs=None``: only what can be checked before the call (types, emptiness, repeats), so
    that a transform refuses a bad ``argnums`` when it is made, not at its first call. A list
    is read as a tuple (JAX's spelling; torch.func refuses it)."""
    if isinstance(argnums, bool) or not isinstance(argnums, (int, tuple, list)):
        raise RuntimeError(f"{api}: argnums must be int or Tuple[int, ...], got: {type(argnums)}")
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    if not nums:
        raise RuntimeError(f"{api}: argnums must be non-empty")
    out = []
    for a in nums:
        if isinstance(a, bool) or not isinstance(a, int):
            raise RuntimeError(f"{api}: argnums must be int or Tuple[int, ...], got element {a!r}")
        if nargs is None:
            out.append(a)
            continue
        if not -nargs <= a < nargs:
            raise RuntimeError(
                f"{api}: Got argnum={a}, but only {nargs} positional inputs. Pass argnums within "
                f"[-{nargs}, {nargs}).")
        out.append(a % nargs)
    if len(set(out)) != len(out):
        raise RuntimeError(f"{api}: argnums elements must be unique, got {argnums}")
    return tuple(out)


def _select(args: Sequence[Any], nums: tuple[int, ...], single: bool) -> Any:
    diff = tuple(args[i] for i in nums)
    return diff[0] if single else diff


def _as_constant(interp: Any, x: Any) -> Any:
    """A raw backend array ``x`` (an argument that a transform does not differentiate) as a
    constant of ``interp``, so that inside the function every value is arrayad (NOTE
    [everything inside is arrayad] in the core) and in-place updates of it stay inside the
    function; anything else as it is."""
    return x if isinstance(x, Array) or not _is_array(x) else interp.lift(x)


def _lift_raw(tree: Any) -> Any:
    """``_as_constant`` of every leaf of ``tree``, for the innermost open transform."""
    top = interpreters()[-1]
    return tree_map(lambda x: _as_constant(top, x), tree)


def _replace(args: Sequence[Any], nums: tuple[int, ...], new: Any,
             single: bool) -> tuple[Any, ...]:
    args = list(args) if len(args) == len(nums) else _lift_raw(list(args))
    new = (new,) if single else new
    for i, v in zip(nums, new):
        args[i] = v
    return tuple(args)


# ---------------------------------------------------------------------------------------------
# Reverse mode

class _Input:
    """A differentiated input as it was when the transform began: its leaf node and value.

    Kept apart from the tracer handed to the function, because the function may update that
    tracer in place (``x[0] = ...``, or ``array_api_extra.at(x).set(...)``, which writes into
    arrays it believes writeable), rebinding it to a later node."""

    __slots__ = ("node", "value")

    def __init__(self, node: Any, value: Any) -> None:
        self.node = node
        self.value = value


def _wrap_grad_inputs(interp: Any, tree: Any,
                      api: object) -> tuple[list[Any], Any, list["_Input | None"]]:
    """Tracers for the leaves of ``tree`` (None leaves stay None), their spec, and the
    ``_Input`` record of each."""
    if _is_bare_array(tree):   # (grad(f)(x), the common call: no pytree work)
        _check_float(tree, api, "primal")
        t = interp.new_input(tree)
        return [t], LEAF, [_Input(t._node, tree)]
    leaves, spec = tree_flatten(tree)
    tracers: list[Any] = []
    inputs: list[_Input | None] = []
    for x in leaves:
        if x is None:   # a None leaf is not differentiated; its gradient is None
            tracers.append(None)
            inputs.append(None)
            continue
        x = _as_array(x, api)
        _check_float(x, api, "primal")
        t = interp.new_input(x)
        tracers.append(t)
        inputs.append(_Input(t._node, x))
    return tracers, spec, inputs


class _ReverseTrace:
    """A function traced once under a ``GradInterpreter``: what ``vjp``, ``grad`` and
    ``linearize`` need afterwards. ``out`` is the function's output (tracers, now dead: only
    their shapes and types are read), ``outs`` the (value one level down, edge) of each of its
    leaves, ``aux`` the auxiliary output one level down."""

    __slots__ = ("out", "outs", "out_spec", "inputs", "in_spec", "aux")

    def __init__(self, func: Callable[..., Any], primals: Any, api: object,
                 has_aux: bool = False, keep_saved: bool = False, spread: bool = True) -> None:
        # (spread: primals is the tuple of func's arguments; else func's one argument)
        with GradInterpreter(keep_saved) as interp:
            tracers, self.in_spec, self.inputs = _wrap_grad_inputs(interp, primals, api)
            tree = tracers[0] if self.in_spec is LEAF else tree_unflatten(tracers, self.in_spec)
            self.out, aux = _split_aux(func(*tree) if spread else func(tree), has_aux, api)
            if _is_bare_array(self.out):   # (no pytree work)
                leaves, self.out_spec = [self.out], LEAF
            else:
                leaves, self.out_spec = tree_flatten(self.out)
            self.outs = [interp.output(o) for o in leaves]
            self.aux = tree_map(lambda a: interp.output(a)[0], aux) if has_aux else None

    def backprop(self, cts: Sequence[Any], retain: bool = True) -> list[Any]:
        """Cotangents of the inputs, given one per output leaf (zeros where the output does not
        depend on an input). ``retain=False`` frees each node's saved values as soon as it is
        done (grad, whose graph is used once: a lower peak memory); vjp's pullback keeps them,
        it may be called again."""
        want = {(t.node, 0): None for t in self.inputs if t is not None}
        roots, root_cts = [], []
        for (_, edge), ct in zip(self.outs, cts):
            if edge is not None:
                roots.append(edge)
                root_cts.append(ct)
        if roots:
            run_backward(roots, root_cts, retain, False, want, False, None)
        out: list[Any] = []
        for t in self.inputs:
            if t is None:
                out.append(None)
                continue
            g = want[(t.node, 0)]
            out.append(ops.zeros_like(t.value) if g is None else g)
        return out


def _owned(g: Any) -> Any:
    """A gradient handed to the caller: an array they own and may update in place (not a
    read-only broadcast view, not the cached unit cotangent)."""
    if g is None or isinstance(g, Array) and not isinstance(g, Tensor):
        return g
    if isinstance(g, Tensor):
        v = owned(g._value)
        return g if v is g._value else Tensor(v)
    return owned(g)


def _unit_cotangent(value: Any) -> Any:
    """1 shaped like the scalar output ``value``: for NumPy the engine's shared read-only
    constant (``unit_cotangent``), else ones_like."""
    if type(value) is _ndarray:
        return unit_cotangent(value)
    return ops.ones_like(value)


def _check_scalar_output(out: Any, value: Any, api: object) -> None:
    """grad's refusals of an output that is not one real value (``value``: its value one level
    down)."""
    if not isinstance(out, Array) and not _is_array(out):
        raise RuntimeError(f"{api}: Expected f(*args) to return a Tensor, got {type(out)}")
    if len(shape_of(out)) != 0:
        raise RuntimeError(
            f"{api}: Expected f(*args) to return a scalar Tensor, got tensor with "
            f"{len(shape_of(out))} dims. Maybe you wanted to use the vjp or jacrev APIs "
            f"instead?")
    if dtype_of(value).kind == "c":
        raise RuntimeError(
            f"{api}: grad can be implicitly created only for real scalar outputs, but f "
            f"returned a complex one. Differentiate a real function of it (ad.real(out), "
            f"ad.abs(out) ** 2), or use vjp with a complex cotangent.")


def _leaf_gradient(func: Callable[..., Any], x: Any, api: object,
                   has_aux: bool) -> tuple[Any, Any, Any]:
    """The gradient of ``func`` at the one bare array ``x``, its value and aux (one level down):
    what ``_ReverseTrace`` and its ``backprop`` do for ``grad(f)(x)``, the common call, without
    their bookkeeping of pytrees, several outputs and retained graphs (on small arrays that
    bookkeeping cost a tenth of the call)."""
    _check_float(x, api, "primal")
    with GradInterpreter() as interp:
        t = interp.new_input(x)
        key = (t._node, 0)   # (taken now: func may update t in place, rebinding it)
        out, aux = func(t), None
        if has_aux:
            out, aux = _split_aux(out, has_aux, api)
            aux = tree_map(lambda a: interp.output(a)[0], aux)
        value, edge = interp.output(out)
    _check_scalar_output(out, value, api)
    want = {key: None}
    if edge is not None:
        run_backward([edge], [_unit_cotangent(value)], False, False, want, False, None)
    g = want[key]
    return (ops.zeros_like(x) if g is None else g), value, aux


def grad_and_value(func: Callable[_P, Any], argnums: _Argnums = 0, has_aux: bool = False, *,
                   holomorphic: bool = False,
                   allow_int: bool = False) -> Callable[_P, tuple[Any, Any]]:
    """The gradient of scalar-valued ``func`` and its value, from one evaluation.

    Parameters
    ----------
    func : callable
        The function to differentiate. Called with the same arguments as the returned function;
        it must return a 0-d float array (shape ``(1,)`` is refused, as in torch.func), or
        ``(output, aux)`` with ``has_aux``.
    argnums : int or tuple of int, optional
        Which positional arguments to differentiate with respect to (default 0). Negative values
        count from the end. An argument there may be an array or a pytree (tuple, list, dict,
        registered class) of float or complex arrays; a Python float becomes a 0-d float64
        array of the default backend. Other arguments and keyword arguments are passed through
        undifferentiated. A list is read as a tuple, as in JAX (torch.func refuses it).
    has_aux : bool, optional
        Whether ``func`` returns ``(output, aux)``; ``aux`` (any pytree, also non-arrays: torch
        requires arrays) is returned alongside, not differentiated.
    holomorphic : bool, optional
        JAX's flag; only False (its default, this function's meaning) is accepted. True is
        refused with the forward-mode spelling, ``jacfwd(f, holomorphic=True)``.
    allow_int : bool, optional
        JAX's flag; only False (its default) is accepted: integers have no gradient here.

    Returns
    -------
    callable
        ``wrapper(*args, **kwargs) -> (grad, value)``, or ``(grad, (value, aux))`` with
        ``has_aux``: torch.func's order, the reverse of JAX's ``value_and_grad``. ``grad`` has
        the structure of the differentiated argument (a tuple of them when ``argnums`` is a
        tuple) and is on its backend: NumPy in, NumPy out; ``ad.Tensor`` in, ``ad.Tensor`` out.
        An input the output does not depend on gets zeros, not None.

    Raises
    ------
    TypeError
        If ``func`` is not callable.
    RuntimeError
        When called: if ``func`` returns something other than an array, an array that is not
        0-d or is complex, or (with ``has_aux``) not a pair; if ``argnums`` is not an int or a
        tuple of distinct ints within the number of positional arguments.
    ValueError
        If ``holomorphic`` or ``allow_int`` is True; when called, if a differentiated argument
        is not an array or Python float, or has an integer or boolean dtype.

    See Also
    --------
    grad : the gradient only.
    value_and_grad : JAX's order, ``(value, grad)``.

    Examples
    --------
    The gradient of ``sum(x ** 2)`` is ``2 x``:

    >>> from arrayad.func import grad_and_value
    >>> g, value = grad_and_value(lambda x: ad.sum(x ** 2))(np.array([1.0, 2.0, 3.0]))
    >>> g
    array([2., 4., 6.])
    >>> value
    array(14.)
    """
    _check_callable(func, "grad_and_value")
    _check_jax_flags("grad_and_value", holomorphic, allow_int)
    return _gradient_function(func, argnums, has_aux, True, "grad_and_value(f)(*args)")


def _gradient_function(func: Callable[_P, Any], argnums: _Argnums, has_aux: bool, with_value: bool,
                       api: str) -> Callable[_P, Any]:
    """``grad_and_value(func, ...)``, or with ``with_value=False`` ``grad(func, ...)``: the same
    call, handing back the gradient alone (one Python frame less than wrapping the other).
    ``api`` names the transform the user called in errors (``grad(f)(*args)``)."""
    single = isinstance(argnums, int)
    nums_by_nargs: dict[int, tuple[int, ...]] = {}

    @functools.wraps(func)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> Any:
        nums = nums_by_nargs.get(len(args))
        if nums is None:
            nums = nums_by_nargs[len(args)] = _check_argnums(argnums, len(args), api)
        if single and len(args) == 1 and not kwargs and _is_bare_array(args[0]):
            # grad(f)(x): f is called with the tracer of x alone, as _replace would
            native = _Native.of_one(args[0])
            g, value, aux = _leaf_gradient(func, args[0], api, has_aux)
            g = owned(g) if type(g) is _ndarray else _owned(g)
            if native.mode == "tensor" or native.mode == "raw" and isinstance(g, Tensor):
                g = native(g)    # (= native.tree(g) of a leaf)
        else:
            native = _Native.of_args(args)

            def partial(diff: Any) -> Any:
                return func(*_replace(args, nums, diff, single), **_lift_raw(kwargs))

            trace = _ReverseTrace(partial, _select(args, nums, single), api, has_aux,
                                  spread=False)
            value = trace.outs[0][0] if trace.outs else None
            _check_scalar_output(trace.out, value, api)
            grads = trace.backprop([_unit_cotangent(value)], retain=False)
            grads = [owned(g) if type(g) is _ndarray else _owned(g) for g in grads]
            g = tree_unflatten(grads, trace.in_spec)
            if native.mode != "raw" or any(isinstance(v, Tensor) for v in grads):
                g = native.tree(g)   # (raw in, raw out: nothing to convert in the common case)
            aux = trace.aux
        if not with_value:
            return (g, native.tree(aux)) if has_aux else g
        value = native(value)
        if has_aux:
            return g, (value, native.tree(aux))
        return g, value

    return wrapper


def grad(func: Callable[_P, Any], argnums: _Argnums = 0, has_aux: bool = False, *,
         holomorphic: bool = False, allow_int: bool = False) -> Callable[_P, Any]:
    """The gradient of scalar-valued ``func`` with respect to the argument(s) ``argnums``.

    Reverse mode: ``func`` runs once, recording its operations, and the record is pulled back
    from a cotangent of one (``vjp`` with ``1``). Transforms nest: ``grad(grad(f))`` is the
    second derivative, ``vmap(grad(f))`` gives per-example gradients.

    Parameters
    ----------
    func : callable
        The function to differentiate. It must return a 0-d float array (shape ``(1,)`` is
        refused, as in torch.func), or ``(output, aux)`` with ``has_aux``. Inside it the
        arguments are arrayad tracers: use ``arrayad`` functions (or NumPy's, which dispatch to
        them) and Python control flow on their values.
    argnums : int or tuple of int, optional
        Which positional arguments to differentiate with respect to (default 0). Negative values
        count from the end. An argument there may be an array or a pytree (tuple, list, dict,
        registered class) of float or complex arrays; a Python float becomes a 0-d float64
        array of the default backend. Other arguments and keyword arguments are passed through
        undifferentiated. A list is read as a tuple, as in JAX (torch.func refuses it).
    has_aux : bool, optional
        Whether ``func`` returns ``(output, aux)``; ``aux`` is returned as it is, not
        differentiated (any pytree: torch.func requires arrays there).
    holomorphic : bool, optional
        JAX's flag; only False (its default, this function's meaning) is accepted. True is
        refused with the forward-mode spelling, ``jacfwd(f, holomorphic=True)``.
    allow_int : bool, optional
        JAX's flag; only False (its default) is accepted: integers have no gradient here.

    Returns
    -------
    callable
        ``wrapper(*args, **kwargs)``, returning the gradient (``(gradient, aux)`` with
        ``has_aux``): the structure of the differentiated argument, or a tuple of them when
        ``argnums`` is a tuple, on the arguments' backend (NumPy in, NumPy out; ``ad.Tensor``
        in, ``ad.Tensor`` out). An input the output does not depend on gets zeros.

    Raises
    ------
    TypeError
        If ``func`` is not callable.
    RuntimeError
        When called: if ``func`` does not return a 0-d real array (use ``vjp`` or ``jacrev``
        for other outputs), or not ``(output, aux)`` with ``has_aux``; if ``argnums`` is not
        an int or a tuple of distinct ints within the number of positional arguments.
    ValueError
        If ``holomorphic`` or ``allow_int`` is True; when called, if a differentiated argument
        is not a float or complex array (integers are refused: convert with
        ``x.astype(ad.float64)``).

    Examples
    --------
    The derivative of ``x ** 3`` at 2 is ``3 * 2 ** 2 = 12``, and its second derivative
    ``6 * 2 = 12`` too:

    >>> from arrayad.func import grad
    >>> grad(lambda x: x ** 3)(2.0)
    array(12.)
    >>> grad(grad(lambda x: x ** 3))(2.0)
    array(12.)

    The gradient of ``sum(x * y)`` is ``y`` with respect to ``x`` and ``x`` with respect to
    ``y``:

    >>> x, y = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    >>> grad(lambda x, y: ad.sum(x * y), argnums=(0, 1))(x, y)
    (array([3., 4.]), array([1., 2.]))

    An auxiliary output comes back as it is:

    >>> grad(lambda x: (ad.sum(x ** 2), x.shape), has_aux=True)(x)
    (array([2., 4.]), (2,))
    """
    _check_callable(func, "grad")
    _check_jax_flags("grad", holomorphic, allow_int)
    return _gradient_function(func, argnums, has_aux, False, "grad(f)(*args)")


def value_and_grad(func: Callable[_P, Any], argnums: _Argnums = 0, has_aux: bool = False, *,
                   holomorphic: bool = False,
                   allow_int: bool = False) -> Callable[_P, tuple[Any, Any]]:
    """JAX's spelling of ``grad_and_value``: the value first, then the gradient.

    Parameters
    ----------
    func : callable
        The function to differentiate; it returns a 0-d float array, or ``(output, aux)`` with
        ``has_aux``.
    argnums : int or tuple of int, optional
        Which positional arguments to differentiate with respect to (default 0). Negative values
        count from the end. An argument there may be an array or a pytree (tuple, list, dict,
        registered class) of float or complex arrays; a Python float becomes a 0-d float64
        array of the default backend. Other arguments and keyword arguments are passed through
        undifferentiated. A list is read as a tuple, as in JAX (torch.func refuses it).
    has_aux : bool, optional
        Whether ``func`` returns ``(output, aux)``.
    holomorphic : bool, optional
        JAX's flag; only False (its default, this function's meaning) is accepted. True is
        refused with the forward-mode spelling, ``jacfwd(f, holomorphic=True)``.
    allow_int : bool, optional
        JAX's flag; only False (its default) is accepted: integers have no gradient here.

    Returns
    -------
    callable
        ``wrapper(*args, **kwargs) -> (value, grad)``, or ``((value, aux), grad)`` with
        ``has_aux``, as ``jax.value_and_grad``; arrays on the arguments' backend.

    Raises
    ------
    TypeError
        If ``func`` is not callable.
    RuntimeError
        When called: as ``grad_and_value`` (an output that is not a 0-d real array, bad
        ``argnums``).
    ValueError
        If ``holomorphic`` or ``allow_int`` is True; when called, if a differentiated argument
        is not a float or complex array.

    Examples
    --------
    >>> from arrayad.func import value_and_grad
    >>> value_and_grad(lambda x: ad.sum(x ** 2))(np.array([1.0, 2.0, 3.0]))
    (array(14.), array([2., 4., 6.]))
    """
    _check_callable(func, "value_and_grad")
    _check_jax_flags("value_and_grad", holomorphic, allow_int)
    gv = _gradient_function(func, argnums, has_aux, True, "value_and_grad(f)(*args)")

    @functools.wraps(func)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> tuple[Any, Any]:
        g, value = gv(*args, **kwargs)
        return value, g

    return wrapper


_VJP_API = "vjp(f, *primals)"


def _reverse_outputs(trace: _ReverseTrace, api: object) -> list[Any]:
    """The output values (one level down) of a function traced by ``vjp`` or ``jacrev``,
    checked: arrays of a floating-point or complex dtype."""
    _output_leaves(trace.out, api)
    values = [v for v, _ in trace.outs]
    for v in values:
        if not is_inexact(dtype_of(v)):
            raise RuntimeError(f"{api}: All outputs of f must be floating-point or "
                               f"complex Tensors, got Tensor with dtype {dtype_of(v).name}")
    return values


@overload
def vjp(func: Callable[..., Any], *primals: Any,
        has_aux: Literal[False] = False) -> tuple[Any, Callable[..., tuple[Any, ...]]]: ...
@overload
def vjp(func: Callable[..., Any], *primals: Any,
        has_aux: Literal[True]) -> tuple[Any, Callable[..., tuple[Any, ...]], Any]: ...
@overload
def vjp(func: Callable[..., Any], *primals: Any, has_aux: bool) -> tuple[Any, ...]: ...
def vjp(func: Callable[..., Any], *primals: Any, has_aux: bool = False) -> tuple[Any, ...]:
    """Evaluate ``func`` and return its vector-Jacobian product function (reverse mode).

    Parameters
    ----------
    func : callable
        A function of the primals returning an array or a pytree of float/complex arrays
        (``(output, aux)`` with ``has_aux``).
    *primals
        The point: arrays or pytrees of float/complex arrays, all differentiated (close over
        the others).
    has_aux : bool, optional
        Whether ``func`` returns ``(output, aux)``; ``aux`` is returned third, not
        differentiated.

    Returns
    -------
    output : array or pytree
        ``func(*primals)``, on the primals' backend.
    vjp_fn : callable
        ``vjp_fn(cotangents)`` with ``cotangents`` of the output's structure and shapes
        returns a tuple with one cotangent per primal (the transposed Jacobian applied to
        ``cotangents``), on the cotangents' backend. It can be called any number of times,
        and under other transforms (``vmap(vjp_fn)`` gives several rows of the Jacobian at
        once). ``retain_graph`` and ``create_graph`` are accepted for torch's signature.
    aux : pytree
        Only with ``has_aux``.

    Raises
    ------
    TypeError
        If ``func`` is not callable.
    RuntimeError
        If an output is not a float or complex array; from ``vjp_fn``: cotangents of another
        structure or shape than the output.
    ValueError
        If a primal is not a float or complex array; from ``vjp_fn``: a cotangent on another
        backend than its output.

    Examples
    --------
    For a linear map ``v -> A @ v`` the VJP with ``u`` is ``A.T @ u``: with ``u`` the first
    unit vector it is the first row of ``A``:

    >>> from arrayad.func import vjp
    >>> A = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    >>> out, vjp_fn = vjp(lambda v: A @ v, np.array([1.0, 1.0]))
    >>> out
    array([ 3.,  7., 11.])
    >>> vjp_fn(np.array([1.0, 0.0, 0.0]))
    (array([1., 2.]),)
    """
    _check_callable(func, "vjp")
    native = _Native(tree_flatten(primals)[0])
    trace = _ReverseTrace(func, primals, _VJP_API, has_aux)
    values = _reverse_outputs(trace, _VJP_API)
    out_spec = trace.out_spec

    def vjp_fn(*cotangents: Any, retain_graph: bool = True,
               create_graph: bool | None = None) -> tuple[Any, ...]:
        cts = cotangents[0] if len(cotangents) == 1 else cotangents
        ct_leaves, ct_spec = tree_flatten(cts)
        if ct_spec != out_spec:
            raise RuntimeError(
                f"vjp_fn: Expected pytree structure of cotangents to be the same as pytree "
                f"structure of outputs to the function. cotangents: {ct_spec}, primal output: "
                f"{out_spec}")
        for i, (c, v) in enumerate(zip(ct_leaves, values)):
            if not _is_array(c):
                raise RuntimeError(
                    f"vjp_fn: grad_output[{i}] must be an array of output[{i}]'s shape "
                    f"{shape_of(v)}, got {type(c).__name__}")
            _check_same_backend(c, v, f"vjp_fn: grad_output[{i}]", f"output[{i}]")
            if shape_of(c) != shape_of(v):
                raise RuntimeError(
                    f"vjp_fn: Mismatch in shape: grad_output[{i}] has a shape of {shape_of(c)} "
                    f"and output[{i}] has a shape of {shape_of(v)}.")
        result = tree_unflatten(
            [_owned(g) for g in trace.backprop([_cotangent_of_dtype(c, v, i)
                                                for i, (c, v) in enumerate(zip(ct_leaves,
                                                                               values))])],
            trace.in_spec)
        ct_native = _Native(ct_leaves)
        grads: tuple[Any, ...] = (ct_native.tree(result) if ct_native.mode != "tracer"
                                  else result)   # (one per primal: in_spec is the primals')
        return grads

    out_native = native.tree(tree_unflatten(values, out_spec))
    if has_aux:
        return out_native, vjp_fn, native.tree(trace.aux)
    return out_native, vjp_fn


def _cotangent_of_dtype(c: Any, v: Any, i: int) -> Any:
    """grad_output[i] ``c`` in output[i] ``v``'s dtype (torch.func's rule: a float cotangent of
    another precision is cast, so a float32 output's float32 inputs get float32 gradients; a
    real one for a complex output is made complex). An integer or bool cotangent, or a complex
    one for a real output (its imaginary part would be dropped), is refused."""
    dc, dv = dtype_of(c), dtype_of(v)
    if dc is dv:
        return c
    if dc.kind not in ("f", "c") or (dc.kind == "c" and dv.kind != "c"):
        raise RuntimeError(
            f"vjp_fn: grad_output[{i}] has dtype {dc.name} but output[{i}] has dtype "
            f"{dv.name}: a cotangent must be floating point for a real output (complex for a "
            f"complex output), and a complex cotangent of a real output would lose its "
            f"imaginary part. Pass grad_output[{i}] in the output's dtype (.astype({dv.name})), "
            f"or make the function's output complex.")
    return ops.astype(c, dv)


# ---------------------------------------------------------------------------------------------
# Forward mode

_JVP_API = "jvp(f, primals, tangents)"


def _checked_jvp_inputs(primals: Any, tangents: Any,
                        api: str) -> tuple[list[Any], list[Any], Any]:
    """The leaves of ``primals`` and ``tangents`` (arrays of one structure, the primals
    floating-point or complex, each tangent of its primal's shape and backend) and their spec."""
    if not isinstance(primals, (tuple, list)):
        raise RuntimeError(f"{api}: Expected primals to be a tuple. E.g. it should be valid to "
                           f"call f(*primals).")
    p_leaves, p_spec = tree_flatten(tuple(primals))
    t_leaves, t_spec = tree_flatten(tuple(tangents) if isinstance(tangents, (tuple, list))
                                    else tangents)
    if p_spec != t_spec:
        raise RuntimeError(
            f"{api}: Expected primals and tangents to have the same python structure. For "
            f"example, if primals is a tuple of 3 tensors, tangents also must be. Got primals "
            f"with structure {p_spec} and tangents with structure {t_spec}")
    ps, ts = [], []
    for p, t in zip(p_leaves, t_leaves):
        p = _as_array(p, api, "primal")
        t = _as_array(t, api, "tangent")
        _check_float(p, api, "primal")
        _check_tangent_dtype(t, p, api)
        _check_same_backend(t, p, f"{api}: a tangent", "its primal")
        if shape_of(p) != shape_of(t):
            raise RuntimeError(
                f"{api}: Trying to set a forward gradient that has a different size than that of "
                f"the original Tensor: primal shape {shape_of(p)}, tangent shape {shape_of(t)}.")
        ps.append(p)
        ts.append(t)
    return ps, ts, p_spec


def _check_tangent_dtype(t: Any, p: Any, api: str) -> None:
    """A tangent is floating point or complex (torch.func refuses an integer one, JAX one that
    is not its primal's dtype); a complex tangent for a real primal is refused (torch casts it,
    dropping its imaginary part with a warning). A float tangent of another precision stays as
    it is, as in torch.func (the tangent out has the promoted dtype)."""
    dt, dp = dtype_of(t), dtype_of(p)
    if dt is dp:
        return
    if dt.kind not in ("f", "c"):
        raise ValueError(
            f"{api}: Expected tangent to be floating point or complex, but got {dt.name} for a "
            f"{dp.name} primal. Pass the tangent in the primal's dtype (.astype({dp.name})).")
    if dt.kind == "c" and dp.kind != "c":
        raise ValueError(
            f"{api}: a {dt.name} tangent for a real ({dp.name}) primal: the derivative along "
            f"its imaginary part is not defined for a real input (torch drops it). Pass a real "
            f"tangent (.real), or make the primal complex.")


def _on_duals(func: Callable[..., Any], p_leaves: Sequence[Any], t_leaves: Sequence[Any],
              spec: Any, has_aux: bool, api: str) -> tuple[list[Any], Any, Any]:
    """``func`` called on duals of the (checked) leaves: the (value one level down, tangent or
    None) of each leaf of its output, the output's spec, and aux one level down."""
    with JvpInterpreter() as interp:
        duals = [new_dual(interp, p, t) for p, t in zip(p_leaves, t_leaves)]
        out, aux = _split_aux(func(*tree_unflatten(duals, spec)), has_aux, api)
        leaves, out_spec = _output_leaves(out, api)
        pairs = [interp.output(o) for o in leaves]
        if has_aux:
            aux = tree_map(lambda a: interp.output(a)[0], aux)
    return pairs, out_spec, aux


@overload
def jvp(func: Callable[..., Any], primals: Any, tangents: Any, *, strict: bool = False,
        has_aux: Literal[False] = False) -> tuple[Any, Any]: ...
@overload
def jvp(func: Callable[..., Any], primals: Any, tangents: Any, *, strict: bool = False,
        has_aux: Literal[True]) -> tuple[Any, Any, Any]: ...
@overload
def jvp(func: Callable[..., Any], primals: Any, tangents: Any, *, strict: bool = False,
        has_aux: bool) -> tuple[Any, ...]: ...
def jvp(func: Callable[..., Any], primals: Any, tangents: Any, *, strict: bool = False,
        has_aux: bool = False) -> tuple[Any, ...]:
    """The output of ``func`` and its Jacobian-vector product: forward-mode differentiation.

    ``func`` runs once on dual values carrying the tangents; nothing is recorded, so the cost
    is about twice that of ``func``, whatever the output size.

    Parameters
    ----------
    func : callable
        A function of the primals returning an array or a pytree of arrays (``(output, aux)``
        with ``has_aux``).
    primals : tuple
        The point, a tuple (or list) so that ``func(*primals)`` is the call: arrays or
        pytrees of float/complex arrays.
    tangents : tuple
        The direction: the same structure, shapes and backends as ``primals``.
    strict : bool, optional
        Raise if the output does not depend on the inputs (by default its tangent is zeros).
    has_aux : bool, optional
        Whether ``func`` returns ``(output, aux)``; ``aux`` is returned third.

    Returns
    -------
    tuple
        ``(output, tangent_out)`` (``(output, tangent_out, aux)`` with ``has_aux``), with
        ``tangent_out`` the Jacobian of ``func`` at ``primals`` applied to ``tangents``, of the
        output's structure, on the primals' backend.

    Raises
    ------
    TypeError
        If ``func`` is not callable.
    RuntimeError
        If ``primals`` is not a tuple or list, ``tangents`` has another structure or a tangent
        another shape than its primal; with ``strict=True``, if the output does not depend on
        the inputs.
    ValueError
        If a primal is not a float or complex array, or a tangent is on another backend than
        its primal.

    Examples
    --------
    For a linear map the JVP with ``t`` is ``A @ t``: with the first unit vector, the first
    column of ``A``:

    >>> from arrayad.func import jvp
    >>> A = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    >>> jvp(lambda v: A @ v, (np.array([1.0, 1.0]),), (np.array([1.0, 0.0]),))
    (array([ 3.,  7., 11.]), array([1., 3., 5.]))

    The derivative of ``sin`` is ``cos``, so along a tangent of ones:

    >>> x = np.array([0.0, 1.0])
    >>> out, t = jvp(ad.sin, (x,), (np.ones(2),))
    >>> bool(np.allclose(t, np.cos(x)))
    True
    """
    _check_callable(func, "jvp")
    api = _JVP_API
    native = _Native(tree_flatten(primals)[0])
    p_leaves, t_leaves, spec = _checked_jvp_inputs(primals, tangents, api)
    pairs, out_spec, aux = _on_duals(func, p_leaves, t_leaves, spec, has_aux, api)
    ps, ts = [], []
    for p, t in pairs:
        if t is None:
            if strict:
                raise RuntimeError(
                    "jvp(f, primals, tangents, strict=True): The output of f is independent "
                    "of the inputs. This is not allowed with strict=True.")
            t = ops.zeros_like(p)
        ps.append(p)
        ts.append(t)
    result = (native.tree(tree_unflatten(ps, out_spec)), native.tree(tree_unflatten(ts, out_spec)))
    return result + (native.tree(aux),) if has_aux else result


@overload
def linearize(func: Callable[..., Any], *primals: Any,
              has_aux: Literal[False] = False) -> tuple[Any, Callable[..., Any]]: ...
@overload
def linearize(func: Callable[..., Any], *primals: Any,
              has_aux: Literal[True]) -> tuple[Any, Callable[..., Any], Any]: ...
@overload
def linearize(func: Callable[..., Any], *primals: Any, has_aux: bool) -> tuple[Any, ...]: ...
def linearize(func: Callable[..., Any], *primals: Any,
              has_aux: bool = False) -> tuple[Any, ...]:
    """The output of ``func`` at ``primals`` and a function computing its JVPs there.

    ``func`` is evaluated once (torch.func evaluates it twice): its operations are recorded,
    and ``jvp_fn`` pushes tangents through the record with the forward rules, without calling
    ``func`` again. Use it to apply one Jacobian to many tangents.

    Parameters
    ----------
    func : callable
        A function of the primals returning an array or a pytree of arrays.
    *primals
        The point: float or complex arrays, or pytrees of them.
    has_aux : bool, optional
        Whether ``func`` returns ``(output, aux)``; ``aux`` is returned third, as in JAX
        (torch.func's ``linearize`` has no ``has_aux``).

    Returns
    -------
    output : array or pytree
        ``func(*primals)``, on the primals' backend.
    jvp_fn : callable
        ``jvp_fn(*tangents)``, one tangent per primal with its structure and shape, returns the
        Jacobian at ``primals`` applied to them (the output's structure).
    aux : object
        Only with ``has_aux``.

    Raises
    ------
    TypeError
        If ``func`` is not callable.
    ValueError
        If a primal is not a float or complex array.
    RuntimeError
        With ``has_aux``, if ``func`` does not return a pair; from ``jvp_fn``: tangents of
        another structure or shape than the primals.
    NotImplementedError
        From ``jvp_fn``: if an operation on the path has no forward rule.

    Examples
    --------
    The derivative of ``sin`` at 0 and at pi is ``cos``: 1 and -1.

    >>> from arrayad.func import linearize
    >>> out, jvp_fn = linearize(ad.sin, np.array([0.0, np.pi]))
    >>> jvp_fn(np.array([1.0, 1.0]))
    array([ 1., -1.])
    >>> jvp_fn(np.array([2.0, 0.5]))
    array([ 2. , -0.5])
    """
    _check_callable(func, "linearize")
    api = "linearize(f, *primals)"
    native = _Native(tree_flatten(primals)[0])
    # (keep_saved: jvp_fn replays the JVP rules, which read every input)
    trace = _ReverseTrace(func, primals, api, has_aux, keep_saved=True)
    in_spec, out_spec, outs = trace.in_spec, trace.out_spec, trace.outs
    in_nodes = [t.node for t in trace.inputs if t is not None]
    in_shapes = [shape_of(t.value) for t in trace.inputs if t is not None]
    in_dtypes = [dtype_of(t.value) for t in trace.inputs if t is not None]

    def jvp_fn(*tangents: Any) -> Any:
        t_leaves, t_spec = tree_flatten(tangents)
        if t_spec != in_spec:
            raise RuntimeError(f"linearize jvp_fn: expected tangents with the structure of the "
                               f"primals {in_spec}, got {t_spec}")
        for i, (t, s) in enumerate(zip(t_leaves, in_shapes)):
            if shape_of(t) != s:
                raise RuntimeError(f"linearize jvp_fn: tangent {i} has shape {shape_of(t)}, "
                                   f"expected {s}")
        for i, (t, d) in enumerate(zip(t_leaves, in_dtypes)):
            if dtype_of(t) is not d:   # (torch.func's linearize: the primal's dtype exactly)
                raise RuntimeError(f"linearize jvp_fn: tangent {i} has dtype {dtype_of(t).name} "
                                   f"but its primal has dtype {d.name}. Pass the tangent in "
                                   f"the primal's dtype (.astype({d.name})).")
        known = {(n, 0): t for n, t in zip(in_nodes, t_leaves)}
        result = []
        for value, edge in outs:
            if edge is None:
                result.append(ops.zeros_like(value))
            else:
                t = _push_forward(edge, known)
                result.append(ops.zeros_like(value) if t is None else t)
        return _Native(t_leaves).tree(tree_unflatten(result, out_spec))

    out = native.tree(tree_unflatten([v for v, _ in outs], out_spec))
    return (out, jvp_fn, native.tree(trace.aux)) if has_aux else (out, jvp_fn)


def _push_forward(edge: Any, known: dict[Any, Any]) -> Any:
    """Tangent at ``edge`` of the recorded graph, from the tangents ``known`` at the inputs."""
    if edge in known:
        return known[edge]
    node, idx = edge
    for n in reversed(topological_order([node])):   # inputs first
        if n.leaf is not None or (n, 0) in known:
            continue
        ts = [known.get(e) if e is not None else None for e in n.edges]
        if all(t is None for t in ts):
            for i in range(n.n_outputs):
                known[(n, i)] = None
            continue
        if n.prim.jvp is None:
            raise NotImplementedError(f"linearize: {n.name()} has no forward rule")
        tout = n.prim.jvp(ts, n.ans, *n.inputs, **n.params)
        # (by the primitive's kind, not the node's count: a custom rule or a loop with one
        # output still returns a sequence of tangents, which is not that output's tangent)
        if n.prim.multiple_results:
            for i, t in enumerate(tout):
                known[(n, i)] = t
        else:
            known[(n, 0)] = tout
    return known.get(edge)


# ---------------------------------------------------------------------------------------------
# Jacobians

def _numel(shape: Iterable[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


class _Rows:
    """``n`` rows of a constant (n, *shape) array made a chunk at a time, so that
    ``chunk_size`` bounds the memory of a Jacobian's basis as well as its results: the rows
    ``start:stop`` of the standard basis of R^n (``basis``) or zeros."""

    def __init__(self, like: Any, n: int, shape: Iterable[int], basis: bool) -> None:
        b = backend_of(like)
        self.xp, self.n, self.shape, self.basis = b.xp, n, tuple(shape), basis
        self.dtype = _dtypes.to_backend(dtype_of(like), b.xp)
        # on like's device where it is not the backend's default (array-api-strict's devices
        # never mix, and a GPU tensor's basis belongs on its GPU)
        dev = getattr(like, "device", None)
        self.kw = {} if dev is None or dev == b.default_device() else {"device": dev}

    def rows(self, start: int, stop: int) -> Any:
        """The rows (arrays made here: under ``jit`` what is computed from them alone, such
        as their products with constants, is folded)."""
        out = self._rows(start, stop)
        made_inside(out)
        return out

    def _rows(self, start: int, stop: int) -> Any:
        xp, m, kw = self.xp, stop - start, self.kw
        if not self.basis:
            return xp.zeros((m,) + self.shape, dtype=self.dtype, **kw)
        if self.n == 1:   # (a scalar's basis: ones, without building and reshaping an identity)
            return xp.ones((1,) + self.shape, dtype=self.dtype, **kw)
        if start == 0 and stop == self.n and len(self.shape) == 1:
            # the whole identity (Dask's eye is known to be one: a matmul by it is skipped)
            return xp.eye(self.n, dtype=self.dtype, **kw)
        # (rows start:stop of the identity; eye(m, n, k=start) would do, but Dask's loses a
        # dependency when it is reshaped)
        rows = xp.reshape(xp.arange(start, stop, **kw), (m, 1)) == xp.arange(self.n, **kw)
        return xp.reshape(xp.astype(rows, self.dtype), (m,) + self.shape)


def _reshaped(block: Any, shape: tuple[int, ...]) -> Any:
    """A Jacobian's block (a result of its own) in the shape it is given: itself if it has it."""
    return block if shape_of(block) == shape else ops.reshape(block, shape)


def _basis(like: Any, n: int, shape: Iterable[int]) -> "_Rows":
    """The standard basis of R^n as (n, *shape) rows on the backend of ``like``."""
    return _Rows(like, n, shape, basis=True)


def _zero_rows(leaf: Any, n: int) -> "_Rows":
    """Zero cotangents (n of them) for an output other than the one being differentiated."""
    return _Rows(leaf, n, shape_of(leaf), basis=False)


def _map_rows(fn: Callable[..., Any], arrays: Sequence[Any], n: int, chunk_size: int | None,
              out_dims: Any = 0, randomness: str = "error") -> Any:
    """``fn`` mapped over the leading axis (length ``n``) of every array in ``arrays``: the
    Jacobians' use of the shared chunker, where one row, or ``chunk_size=1``, is a plain loop."""
    leaves, spec = tree_flatten(tuple(arrays))
    return _vmap_impl(fn, leaves, spec, [0] * len(leaves), out_dims, randomness, n, chunk_size,
                      {}, loop_rows=True)


def _check_randomness(randomness: object, api: str) -> None:
    if not isinstance(randomness, str) or randomness not in ("error", "different", "same"):
        raise RuntimeError(f"{api}: Only allowed values for randomness are 'error', 'different', "
                           f"or 'same'. Got {randomness!r}")


def _check_chunk_size(chunk_size: object, api: str) -> None:
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int)
                                   or chunk_size < 1):
        raise ValueError(f"{api}: `chunk_size` should be None or an integer greater than 0, got "
                         f"{chunk_size!r}.")


def jacrev(func: Callable[..., Any], argnums: _Argnums = 0, *, has_aux: bool = False,
           chunk_size: int | None = None, holomorphic: bool = False,
           allow_int: bool = False) -> Callable[..., Any]:
    """The Jacobian of ``func`` with respect to the argument(s) ``argnums``, by reverse mode.

    Computed as ``vmap(vjp_fn)`` over the standard basis of the output: one evaluation of
    ``func`` and one batched backward pass. Prefer it to ``jacfwd`` when the output is smaller
    than the input.

    Parameters
    ----------
    func : callable
        The function, returning an array or a pytree of float arrays (``(output, aux)`` with
        ``has_aux``).
    argnums : int or tuple of int, optional
        Which positional arguments to differentiate with respect to (default 0). Negative values
        count from the end. An argument there may be an array or a pytree (tuple, list, dict,
        registered class) of float or complex arrays; a Python float becomes a 0-d float64
        array of the default backend. Other positional arguments are passed through
        undifferentiated. A list is read as a tuple, as in JAX (torch.func refuses it).
    has_aux : bool, optional
        Whether ``func`` returns ``(output, aux)``; ``aux`` is returned second.
    chunk_size : int, optional
        Compute this many rows of the Jacobian per backward pass, to bound memory (None: all
        at once). ``chunk_size=1`` is a plain loop of VJPs, where vmap's restrictions do not
        apply.
    holomorphic : bool, optional
        JAX's flag; only False (its default) is accepted. True is refused with the
        forward-mode spelling, ``jacfwd(f, holomorphic=True)``.
    allow_int : bool, optional
        JAX's flag; only False (its default) is accepted: integers have no gradient here.

    Returns
    -------
    callable
        ``wrapper(*args)`` (positional arguments only, as torch.func), returning the Jacobian:
        for one array input and output an array of shape ``out.shape + in.shape``; for pytrees,
        indexed ``[output leaf][argnum]``. On the arguments' backend. With ``has_aux``,
        ``(jacobian, aux)``.

    Raises
    ------
    TypeError
        If ``func`` is not callable, or the returned function gets keyword arguments.
    ValueError
        If ``chunk_size`` is not None or a positive int, or ``holomorphic`` or ``allow_int`` is
        True; when called, if a differentiated argument is not a float array.
    RuntimeError
        If ``argnums`` is not an int or a non-empty tuple of distinct ints; when called, if an
        argnum is out of range or a differentiated argument is complex (torch.func refuses
        them too).

    Examples
    --------
    The Jacobian of a linear map is its matrix:

    >>> from arrayad.func import jacrev
    >>> A = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    >>> J = jacrev(lambda v: A @ v)(np.array([1.0, 1.0]))
    >>> J.shape
    (3, 2)
    >>> bool(np.array_equal(J, A))
    True

    An elementwise function has a diagonal Jacobian:

    >>> x = np.array([0.0, 1.0])
    >>> bool(np.allclose(jacrev(ad.sin)(x), np.diag(np.cos(x))))
    True
    """
    _check_callable(func, "jacrev")
    _check_argnums(argnums, None, "jacrev")
    _check_chunk_size(chunk_size, "jacrev")
    _check_jax_flags("jacrev", holomorphic, allow_int)
    return _jacrev(func, argnums, has_aux, chunk_size, "jacrev")


def _jacrev(func: Callable[..., Any], argnums: _Argnums, has_aux: bool, chunk_size: int | None,
            name: str) -> Callable[..., Any]:
    """``jacrev``'s function, its errors naming ``name``: the transform the user called
    (``hessian`` calls it too)."""
    single = isinstance(argnums, int)
    nums_by_nargs: dict[int, tuple[int, ...]] = {}
    api = f"{name}(f)(*args)"

    @functools.wraps(func)
    def wrapper(*args: Any) -> Any:
        nums = nums_by_nargs.get(len(args))
        if nums is None:
            nums = nums_by_nargs[len(args)] = _check_argnums(argnums, len(args), name)
        diff = _select(args, nums, single)
        in_leaves, in_spec = tree_flatten(diff)
        for leaf in in_leaves:
            if _is_array(leaf) and dtype_of(leaf).kind == "c":
                raise RuntimeError(f"{name}: Expected all inputs to be real but received "
                                   f"complex tensor")
        # (vjp's trace, pulled back directly: the cotangents are made here, nothing to check)
        if len(args) == 1 and single and _is_bare_array(diff):
            # (jacrev(f)(x), the common call and a Hessian's inner one: f called with the
            # tracer of x alone, no pytree work)
            trace = _ReverseTrace(func, diff, api, has_aux, spread=False)
        else:
            def partial(*d: Any) -> Any:
                return func(*_replace(args, nums, d[0] if single else d, single))

            trace = _ReverseTrace(partial, (diff,) if single else diff, api, has_aux)
        out_leaves, out_spec = _reverse_outputs(trace, api), trace.out_spec
        blocks = []   # blocks[i][j]: d out_i / d in_j
        for i, o in enumerate(out_leaves):
            n = _numel(shape_of(o))
            if n == 1 and len(out_leaves) == 1:
                # (one output value: its row is the gradient, one backward pass with 1; no
                # batch over one basis vector)
                cols = [_owned(g) for g in trace.backprop([_unit_cotangent(o)], retain=False)]
            else:
                bases = [_basis(o, n, shape_of(o)) if k == i else _zero_rows(other, n)
                         for k, other in enumerate(out_leaves)]

                def pull(*cts: Any) -> list[Any]:
                    # (the basis's zeros are zero by construction: NOTE [strong zeros])
                    return [_owned(g) for g in trace.backprop([constant_zeros(c) for c in cts])]

                cols = tree_flatten(_map_rows(pull, bases, n, chunk_size))[0]
            blocks.append([_reshaped(c, shape_of(o) + shape_of(x))
                           for c, x in zip(cols, in_leaves)])
        # (in_spec is a leaf's spec for one array argument: unflattening gives the block itself)
        jac = tree_unflatten([tree_unflatten(row, in_spec) for row in blocks], out_spec)
        native = _Native.of_args(args)
        if native.mode != "raw" or any(isinstance(c, Tensor) for row in blocks for c in row):
            jac = native.tree(jac)   # (raw in, raw out: nothing to convert in the common case)
        return (jac, _Native(in_leaves).tree(trace.aux)) if has_aux else jac

    return wrapper


def jacfwd(func: Callable[..., Any], argnums: _Argnums = 0, has_aux: bool = False, *,
           randomness: Literal["error", "different", "same"] = "error",
           chunk_size: int | None = None, holomorphic: bool = False) -> Callable[..., Any]:
    """The Jacobian of ``func`` with respect to the argument(s) ``argnums``, by forward mode.

    Computed as ``vmap(jvp)`` over the standard basis of each input: one batched forward pass,
    nothing recorded. Prefer it to ``jacrev`` when the input is smaller than the output.

    Parameters
    ----------
    func : callable
        The function, returning an array or a pytree of arrays (``(output, aux)`` with
        ``has_aux``).
    argnums : int or tuple of int, optional
        Which positional arguments to differentiate with respect to (default 0). Negative values
        count from the end. An argument there may be an array or a pytree (tuple, list, dict,
        registered class) of float or complex arrays; a Python float becomes a 0-d float64
        array of the default backend. Other positional arguments are passed through
        undifferentiated. A list is read as a tuple, as in JAX (torch.func refuses it).
    has_aux : bool, optional
        Whether ``func`` returns ``(output, aux)``; ``aux`` is returned second.
    randomness : {'error', 'different', 'same'}, optional
        Passed to the ``vmap`` over the basis (see ``vmap``).
    chunk_size : int, optional
        Columns of the Jacobian per forward pass (None: all at once). torch.func's ``jacfwd``
        has no ``chunk_size``.
    holomorphic : bool, optional
        JAX's flag: True asserts that ``func`` is holomorphic and its differentiated arguments
        complex, and the Jacobian is then the complex derivative (what forward mode gives for
        complex arguments in any case; JAX refuses complex arguments without it, arrayad does
        not).

    Returns
    -------
    callable
        ``wrapper(*args)`` (positional arguments only), returning the Jacobian: shape
        ``out.shape + in.shape`` for one array input and output, indexed
        ``[output leaf][argnum]`` for pytrees, on the arguments' backend; with ``has_aux``,
        ``(jacobian, aux)``.

    Raises
    ------
    TypeError
        If ``func`` is not callable, or the returned function gets keyword arguments.
    ValueError
        If ``chunk_size`` is not None or a positive int; when called, if a differentiated
        argument is not a float or complex array (not complex with ``holomorphic=True``).
    RuntimeError
        If ``argnums`` is not an int or a non-empty tuple of distinct ints, or ``randomness``
        is not 'error', 'different' or 'same'; when called, if an argnum is out of range, or
        ``func`` draws random numbers with ``randomness='error'``.

    Examples
    --------
    The Jacobian of a linear map is its matrix:

    >>> from arrayad.func import jacfwd
    >>> A = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    >>> bool(np.array_equal(jacfwd(lambda v: A @ v)(np.array([1.0, 1.0])), A))
    True

    With respect to the second argument:

    >>> jacfwd(lambda w, x: w * x, argnums=1)(2.0, np.array([1.0, 2.0]))
    array([[2., 0.],
           [0., 2.]])
    """
    _check_callable(func, "jacfwd")
    _check_argnums(argnums, None, "jacfwd")
    _check_randomness(randomness, "jacfwd")
    _check_chunk_size(chunk_size, "jacfwd")
    return _jacfwd(func, argnums, has_aux, randomness, chunk_size, "jacfwd", holomorphic)


def _jacfwd(func: Callable[..., Any], argnums: _Argnums, has_aux: bool, randomness: str,
            chunk_size: int | None, name: str, holomorphic: bool = False) -> Callable[..., Any]:
    """``jacfwd``'s function, its errors naming ``name``: the transform the user called
    (``hessian`` calls it too)."""
    api = f"{name}(f)(*args)"

    @functools.wraps(func)
    def wrapper(*args: Any) -> Any:
        nums = _check_argnums(argnums, len(args), name)
        single = isinstance(argnums, int)
        diff = _select(args, nums, single)
        in_leaves, in_spec = tree_flatten(diff)
        in_leaves = [_as_array(x, name) for x in in_leaves]
        if holomorphic:
            for x in in_leaves:
                if dtype_of(x).kind != "c":
                    raise ValueError(
                        f"{name}(f, holomorphic=True): the differentiated arguments must be "
                        f"complex, got {dtype_of(x).name} (as in JAX): cast them with "
                        f"x.astype(ad.complex128), or leave holomorphic out for a real "
                        f"Jacobian.")

        def partial(*leaves: Any) -> Any:
            d = tree_unflatten(list(leaves), in_spec)
            return func(*_replace(args, nums, d, single))

        aux_box = []
        columns = []   # per input leaf: output pytree with leaves of shape (n_j, *out.shape)
        out_value = None
        # the primal output and aux do not depend on the tangent: they come out unbatched
        out_dims = (0, None, None) if has_aux else (0, None)
        for x in in_leaves:
            _check_float(x, api, "primal")
        spec = tree_flatten(tuple(in_leaves))[1]
        for j, x in enumerate(in_leaves):
            n = _numel(shape_of(x))

            def push(t: Any, j: int = j) -> tuple[Any, ...]:
                # (jvp of partial, without jvp's checks of the tangents it is given: the basis
                # and zeros are made here. The basis's zeros are zero by construction: NOTE
                # [strong zeros])
                tangents = [constant_zeros(t if k == j else ops.zeros_like(v))
                            for k, v in enumerate(in_leaves)]
                pairs, out_spec, aux = _on_duals(partial, in_leaves, tangents, spec, has_aux,
                                                 api)
                outs = tree_unflatten([p for p, _ in pairs], out_spec)
                ts = tree_unflatten([ops.zeros_like(p) if t is None else t for p, t in pairs],
                                    out_spec)
                return (ts, outs, aux) if has_aux else (ts, outs)

            try:
                res = _map_rows(push, [_basis(x, n, shape_of(x))], n, chunk_size, out_dims,
                                randomness)
            except RuntimeError as e:
                # (the core's message names the vmap over the basis, whose flag is jacfwd's)
                if not str(e).startswith("vmap: called random operation"):
                    raise
                fix = ("pass jacfwd(f, randomness='different') (independent draws per "
                       "column) or randomness='same'" if name == "jacfwd" else
                       "use jacfwd(jacrev(f), randomness='different' or 'same'): hessian has "
                       "no randomness flag")
                raise RuntimeError(f"{name}: f called a random operation while "
                                   f"randomness='error'. Draw outside f, or {fix}.") from None
            columns.append(res[0])
            out_value = res[1]
            if has_aux:
                aux_box.append(res[2])
        out_leaves, out_spec = tree_flatten(out_value)
        per_out = []
        for i, o in enumerate(out_leaves):
            row = []
            for j, x in enumerate(in_leaves):
                col = tree_flatten(columns[j])[0][i]          # (n_j, *out.shape)
                col = ops.moveaxis(col, 0, -1)                  # (*out.shape, n_j)
                row.append(_reshaped(col, tuple(shape_of(col)[:-1]) + shape_of(x)))
            per_out.append(tree_unflatten(row, in_spec))
        jac = _Native(tree_flatten(args)[0]).tree(tree_unflatten(per_out, out_spec))
        if has_aux:
            return jac, aux_box[0]
        return jac

    return wrapper


def hessian(func: Callable[..., Any], argnums: _Argnums = 0, *, has_aux: bool = False,
            chunk_size: int | None = None, holomorphic: bool = False) -> Callable[..., Any]:
    """The Hessian of scalar-valued ``func``: ``jacfwd(jacrev(func, argnums), argnums)``.

    Forward-over-reverse second derivatives. For a non-scalar output it is the Jacobian of the
    Jacobian (shape ``out.shape + in.shape + in.shape``).

    Parameters
    ----------
    func : callable
        The function, returning a float array (``(output, aux)`` with ``has_aux``).
    argnums : int or tuple of int, optional
        Which positional arguments to differentiate with respect to (default 0).
    has_aux : bool, optional
        Whether ``func`` returns ``(output, aux)`` (torch.func's ``hessian`` has no
        ``has_aux``).
    chunk_size : int, optional
        Passed to both ``jacrev`` and ``jacfwd``, to bound memory.
    holomorphic : bool, optional
        JAX's flag; only False (its default) is accepted. True is refused with the spelling
        of a holomorphic Hessian, ``jacfwd(jacfwd(f, holomorphic=True), holomorphic=True)``.

    Returns
    -------
    callable
        ``wrapper(*args)``, returning the Hessian: shape ``in.shape + in.shape`` for a scalar
        function of one array, on the argument's backend (``(hessian, aux)`` with
        ``has_aux``).

    Raises
    ------
    TypeError
        If ``func`` is not callable, or the returned function gets keyword arguments.
    ValueError
        If ``chunk_size`` is not None or a positive int, or ``holomorphic`` is True; when
        called, if a differentiated argument is not a float array.
    RuntimeError
        If ``argnums`` is not an int or a non-empty tuple of distinct ints; when called, if an
        argnum is out of range.

    Examples
    --------
    The Hessian of the quadratic ``v @ M @ v / 2`` with ``M`` symmetric is ``M``:

    >>> from arrayad.func import hessian
    >>> M = np.array([[2.0, 1.0], [1.0, 3.0]])
    >>> hessian(lambda v: v @ M @ v / 2)(np.array([0.5, -1.0]))
    array([[2., 1.],
           [1., 3.]])
    """
    # (checked here, so that the errors name hessian rather than the jacrev/jacfwd inside it)
    _check_callable(func, "hessian")
    _check_argnums(argnums, None, "hessian")
    _check_chunk_size(chunk_size, "hessian")
    if holomorphic:
        raise ValueError(
            "hessian(f, holomorphic=True): hessian is jacfwd(jacrev(f)), and jacrev takes real "
            "arguments (torch's convention for complex numbers); the complex second derivative "
            "of a holomorphic f is jacfwd(jacfwd(f, holomorphic=True), holomorphic=True)(z).")
    if has_aux:
        inner = _jacrev(func, argnums, True, chunk_size, "hessian")

        def outer(*args: Any) -> tuple[Any, Any]:
            jac, aux = inner(*args)
            return jac, aux
        hess = _jacfwd(outer, argnums, True, "error", chunk_size, "hessian")
    else:
        hess = _jacfwd(_jacrev(func, argnums, False, chunk_size, "hessian"), argnums, False,
                       "error", chunk_size, "hessian")

    @functools.wraps(func)
    def wrapper(*args: Any) -> Any:
        _check_argnums(argnums, len(args), "hessian")
        return hess(*args)

    return wrapper


# ---------------------------------------------------------------------------------------------
# vmap

def _vmap_api(func: object, in_dims: object) -> str:
    return f"vmap({_fname(func)}, in_dims={in_dims!r}, ...)(<inputs>)"


class _LazyText:
    """A message prefix built only when it is formatted (that is, when an error is raised)."""

    __slots__ = ("make", "args")

    def __init__(self, make: Callable[..., str], *args: Any) -> None:
        self.make = make
        self.args = args

    def __format__(self, spec: str) -> str:
        return format(self.make(*self.args), spec)


def _valid_dims(d: object) -> bool:
    if d is None or (isinstance(d, int) and not isinstance(d, bool)):
        return True
    return isinstance(d, (tuple, list)) and all(_valid_dims(e) for e in d)


def _flat_in_dims(in_dims: tuple[Any, ...], args: Sequence[Any],
                  n_leaves: int) -> list[int | None] | None:
    """``in_dims`` itself when every argument is a single array leaf and every entry an int or
    None (the common call); None otherwise, for the general pytree-prefix matching."""
    if n_leaves != len(args):
        return None
    for d in in_dims:
        if d is not None and (not isinstance(d, int) or isinstance(d, bool)):
            return None
    return list(in_dims)


class _Unset:
    """The default of an alias (``in_axes``): not given."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<unset>"


_UNSET = _Unset()


def _alias(name: str, value: Any, alias: str, alias_value: Any, default: Any) -> Any:
    """``value``, or ``alias_value`` when the alias (JAX's name) was given instead; both given
    (``value`` not at its default) is an error naming the two."""
    if alias_value is _UNSET:
        return value
    if not (type(value) is type(default) and value == default):
        raise TypeError(f"vmap: got both {name}={value!r} and {alias}={alias_value!r}; they are "
                        f"the same argument (torch's name and JAX's): pass one of them.")
    return alias_value


def vmap(func: Callable[_P, Any], in_dims: Any = 0, out_dims: Any = 0,
         randomness: Literal["error", "different", "same"] = "error", *,
         chunk_size: int | None = None, in_axes: Any = _UNSET,
         out_axes: Any = _UNSET) -> Callable[_P, Any]:
    """Vectorize ``func`` over a dimension of its inputs: ``func`` written for one example runs
    on a batch in one call.

    Inside ``func`` each mapped argument has the batch dimension removed; the operations are
    batched (no Python loop), and the results are stacked along ``out_dims``. Nests with
    itself and the other transforms (``vmap(grad(f))``: per-example gradients).

    Parameters
    ----------
    func : callable
        A function of arrays (or pytrees of arrays) returning an array or a pytree of arrays.
    in_dims : int, None or tuple, optional
        The mapped dimension of each positional argument: an int for all, or a tuple with one
        entry per argument, an int, None (not mapped: shared by the whole batch) or a nested
        tuple/dict matching a pytree argument. Negative values count from the end. A list is
        refused, as in torch.func (``in_axes=``, JAX's name, reads it as a tuple). Keyword
        arguments are never mapped (JAX maps them).
    out_dims : int, None or tuple, optional
        Where the batch dimension goes in each output (None: an output that is not batched,
        returned as it is).
    randomness : {'error', 'different', 'same'}, optional
        What a random function called inside ``func`` does: raise (the default), draw
        different numbers for each example, or the same numbers for all.
    chunk_size : int, optional
        Process this many examples per call of ``func`` and concatenate (None: all at once),
        to bound memory.
    in_axes, out_axes : optional
        JAX's names of ``in_dims`` and ``out_dims``, with JAX's reading of a list as a tuple
        (``in_axes=[0, None]``). Give either name, not both.

    Returns
    -------
    callable
        ``wrapper(*args, **kwargs)``, returning ``func``'s outputs with the batch dimension
        at ``out_dims``, on the inputs' backend (NumPy in, NumPy out).

    Raises
    ------
    RuntimeError
        If ``randomness`` is not one of the three values; when called, if ``func`` draws random
        numbers with ``randomness='error'``, branches on a batched value (``if x > 0``: use
        ``ad.where``) or calls ``.item()`` / ``float()`` on one.
    ValueError
        If ``chunk_size`` or ``out_dims`` is invalid; when called, if ``in_dims`` is not an int
        or a tuple matching the arguments, points past an input's dimensions or at a
        non-array, if no argument is mapped, if the mapped sizes differ, or if ``func``
        returns a non-array where a batch dimension is expected, or a batched value where
        ``out_dims`` is None.
    TypeError
        If ``func`` is not callable, or both ``in_dims`` and ``in_axes`` (or ``out_dims`` and
        ``out_axes``) are given.

    Examples
    --------
    Sum of squares of each row:

    >>> from arrayad.func import vmap
    >>> X = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    >>> vmap(lambda row: ad.sum(row ** 2))(X)
    array([ 5., 25., 61.])

    A second argument shared by every row (``in_dims=None`` for it):

    >>> w = np.array([1.0, -1.0])
    >>> vmap(lambda row, w: ad.sum(row * w), in_dims=(0, None))(X, w)
    array([-1., -1., -1.])

    Per-example gradients of ``sum(w * row) ** 2`` with respect to ``w``, checked against the
    formula ``2 (w . row) row``:

    >>> from arrayad.func import grad
    >>> G = vmap(grad(lambda w, row: ad.sum(w * row) ** 2), in_dims=(None, 0))(w, X)
    >>> bool(np.allclose(G, 2 * (X @ w)[:, None] * X))
    True
    """
    _check_callable(func, "vmap")
    if in_axes is not _UNSET or out_axes is not _UNSET:   # (JAX's names)
        if isinstance(in_axes, list):
            in_axes = tuple(in_axes)
        in_dims = _alias("in_dims", in_dims, "in_axes", in_axes, 0)
        out_dims = _alias("out_dims", out_dims, "out_axes", out_axes, 0)
    _check_randomness(randomness, "vmap")
    _check_chunk_size(chunk_size, "vmap")
    if not _valid_dims(out_dims):
        raise ValueError(f"vmap: out_dims must be an int, None, or a (nested) tuple of them "
                         f"matching the outputs, got {out_dims!r}")

    @functools.wraps(func)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> Any:
        api = _LazyText(_vmap_api, func, in_dims)   # formatted only if an error is raised
        if isinstance(in_dims, bool) or not isinstance(in_dims, (int, tuple)):
            raise ValueError(
                f"{api}: expected `in_dims` to be int or a (potentially nested) tuple matching "
                f"the structure of inputs, got: {type(in_dims)}."
                + (" Pass a tuple, or the list as JAX's in_axes=, which reads it as a tuple."
                   if isinstance(in_dims, list) else ""))
        if not args:
            raise ValueError(
                f"vmap({_fname(func)})(<inputs>): got no inputs. Maybe you forgot to add inputs, "
                f"or you are trying to vmap over a function with no inputs. The latter is "
                f"unsupported.")
        leaves, spec = tree_flatten(args)
        if isinstance(in_dims, int):
            dims: list[Any] = [in_dims] * len(leaves)
        else:
            if len(in_dims) != len(args):
                raise ValueError(
                    f"{api}: in_dims is not compatible with the structure of `inputs`. in_dims "
                    f"has structure {tree_flatten(in_dims)[1]} but inputs has structure {spec}.")
            try:
                dims = _flat_in_dims(in_dims, args, len(leaves)) or broadcast_prefix(in_dims, args)
            except ValueError as e:
                raise ValueError(f"{api}: in_dims is not compatible with the structure of "
                                 f"`inputs`. {e}") from None
        sizes = []
        for x, d in zip(leaves, dims):
            if d is None:
                continue
            if not isinstance(d, int) or isinstance(d, bool):
                raise ValueError(f"{api}: in_dims leaves must be int or None, got {d!r}")
            if not _is_array(x):
                raise ValueError(
                    f"{api}: Got in_dim={d} for an input but the input is of type {type(x)}. We "
                    f"cannot vmap over non-Tensor arguments, please use None as the respective "
                    f"in_dim")
            nd = len(shape_of(x))
            if not -nd <= d < nd:
                raise ValueError(
                    f"{api}: Got in_dim={d} for some input, but that input is a Tensor of "
                    f"dimensionality {nd} so expected in_dim to satisfy -{nd} <= in_dim < {nd}.")
            sizes.append(shape_of(x)[d % nd])
        if not sizes:
            raise ValueError(f"vmap: Expected at least one Tensor to vmap over ({api})")
        if any(s != sizes[0] for s in sizes):
            raise ValueError(
                f"vmap: Expected all tensors to have the same size in the mapped dimension, got "
                f"sizes {sizes} for the mapped dimension")
        dims = [d if d is None else d % len(shape_of(x)) for x, d in zip(leaves, dims)]
        return _vmap_impl(func, leaves, spec, dims, out_dims, randomness, sizes[0], chunk_size,
                          kwargs)

    return wrapper


def _vmap_impl(func: Callable[..., Any], leaves: list[Any], spec: Any, dims: Sequence[int | None],
               out_dims: Any, randomness: str, size: int, chunk_size: int | None,
               kwargs: dict[str, Any], loop_rows: bool = False) -> Any:
    """The chunker every mapping transform shares: ``func`` over the batch axis ``dims`` of
    ``leaves`` (None: unbatched), in one vmap or, with ``chunk_size``, in pieces joined along
    ``out_dims``. With ``loop_rows`` (the Jacobians), a single row or ``chunk_size=1`` runs as a
    plain loop of unbatched calls, where no vmap restriction applies."""
    def piece(x: Any, d: int | None, index: int | slice) -> Any:
        """The rows ``index`` (an int or a slice) of a leaf mapped along axis ``d``."""
        if isinstance(x, _Rows):   # (mapped along axis 0, made on demand)
            if isinstance(index, int):
                return x.xp.reshape(x.rows(index, index + 1), x.shape)
            return x.rows(index.start, index.stop)
        return x if d is None else ops._getitem(x, (slice(None),) * d + (index,))

    if chunk_size is None or chunk_size >= size:
        if not (loop_rows and size == 1):
            leaves = [x.rows(0, size) if isinstance(x, _Rows) else x for x in leaves]
            return _vmap_call(func, leaves, spec, dims, out_dims, randomness, size, kwargs)
        chunk_size = 1
    if not loop_rows and _dask_batched(leaves, dims):
        # Dask: passes over the batch joined into one graph each read all the unbatched
        # arrays they share (X of a loss over data): Dask then holds all of X until the last
        # pass (+1.9 GB against +93 MiB). One pass over a batch chunked by chunk_size bounds
        # each task's memory as the passes did, and reads X once.
        leaves = [x if d is None else x.rechunk({d: chunk_size}) for x, d in zip(leaves, dims)]
        return _vmap_call(func, leaves, spec, dims, out_dims, randomness, size, kwargs)
    state = get_rng_state() if randomness == "same" else None
    parts = []
    for start in range(0, size, chunk_size):
        stop = min(start + chunk_size, size)
        if loop_rows and chunk_size == 1:
            row = [piece(x, d, start) for x, d in zip(leaves, dims)]
            parts.append(func(*tree_unflatten(row, spec), **kwargs))
            continue
        if state is not None:
            set_rng_state(state)   # randomness="same": every chunk draws what the first drew
        chunk = [piece(x, d, slice(start, stop)) for x, d in zip(leaves, dims)]
        parts.append(_vmap_call(func, chunk, spec, dims, out_dims, randomness, stop - start,
                                kwargs))
    if loop_rows and len(parts) == 1:
        # (the Jacobian of a single output value, a Hessian's inner jacrev: the row itself with
        # its axis, no copy; the Jacobians' rows are results of their own, no one else's)
        def join(pieces: Sequence[Any], axis: int) -> Any:
            return ops.expand_dims(pieces[0], axis=axis)
    else:
        join = ops.stack if loop_rows and chunk_size == 1 else ops.concat
    out_leaves, out_spec = tree_flatten(parts[0])
    odims = [out_dims] * len(out_leaves) if isinstance(out_dims, int) else \
        broadcast_prefix(out_dims, parts[0])
    joined = []
    for i, d in enumerate(odims):
        pieces = [tree_flatten(p)[0][i] for p in parts]
        joined.append(pieces[0] if d is None else join(pieces, axis=d))
    return tree_unflatten(joined, out_spec)


def _dask_batched(leaves: Sequence[Any], dims: Sequence[int | None]) -> bool:
    """Whether the mapped leaves are plain Dask arrays (and at least one is), which a rechunk
    along the batch axis can split (a tracer's value has no rechunk of its own)."""
    mapped = [x for x, d in zip(leaves, dims) if d is not None]
    if not mapped or any(isinstance(x, _Rows) for x in mapped):
        return False
    try:
        import dask.array as da
    except ImportError:
        return False
    return all(type(x) is da.Array for x in mapped)


def _vmap_call(func: Callable[..., Any], leaves: Sequence[Any], spec: Any,
               dims: Sequence[int | None], out_dims: Any, randomness: str, size: int,
               kwargs: dict[str, Any]) -> Any:
    native = _Native(leaves)
    with BatchInterpreter(size, randomness) as interp:
        wrapped = [_as_constant(interp, x) if d is None else interp.new_input(x, d)
                   for x, d in zip(leaves, dims)]
        out = func(*tree_unflatten(wrapped, spec), **_lift_raw(kwargs))
        out_leaves, out_spec = tree_flatten(out)
        if isinstance(out_dims, int):
            odims = [out_dims] * len(out_leaves)
        else:
            try:
                odims = broadcast_prefix(out_dims, out)
            except ValueError as e:
                raise ValueError(f"vmap({_fname(func)}, ...): out_dims is not compatible with the "
                                 f"structure of `outputs`. {e}") from None
        results = [_unbatch(func, interp, o, d, size) for o, d in zip(out_leaves, odims)]
    out = tree_unflatten(results, out_spec)
    if native.mode != "raw" or any(isinstance(r, Tensor) for r in results):
        out = native.tree(out)   # (raw in, raw out: nothing to convert in the common case)
    return out


def _unbatch(func: object, interp: Any, o: Any, d: int | None, size: int) -> Any:
    batched = isinstance(o, BatchTracer) and o.interpreter is interp
    if batched and o.bdim < 0:   # a value of this level that is not batched
        o, batched = o.value, False
    if d is None:
        if batched:
            raise ValueError(f"vmap: `{_fname(func)}` can not return a BatchedTensor when out_dim "
                             f"is None")
        return o
    if not _is_array(o):
        raise ValueError(f"vmap: `{_fname(func)}` must only return Tensors, got type {type(o)}. "
                         f"Did you mean to set out_dims= to None for output?")
    if batched:
        value, bdim = o.value, o.bdim
    else:
        value = ops.broadcast_to(ops.expand_dims(o, axis=0), (size,) + shape_of(o))
        bdim = 0
    nd = len(shape_of(value))
    if not -nd <= d < nd:
        raise ValueError(f"vmap: out_dims={d} is out of range for an output with {nd} dims")
    d = d % nd
    if d != bdim:
        value = ops.moveaxis(value, bdim, d)
    return value



# custom_vjp, custom_jvp, checkpoint, remat and checkpoint_policies (in __all__) live in
# arrayad/_custom.py, which builds on the transforms above; arrayad/__init__.py sets them here
# once both modules are loaded (importing them from here would make an import cycle).
if TYPE_CHECKING:   # (so that type checkers and editors see them here too)
    from ._custom import checkpoint, checkpoint_policies, custom_jvp, custom_vjp, remat

# Structured control flow (NOTE [control flow] in _control): defined there, exported here beside
# the transforms, as in jax.lax.
from ._control import cond, fori_loop, map as map, scan, switch, while_loop  # noqa: E402

# Sparse Jacobians and Hessians (NOTE [sparsity patterns] in _sparsity/patterns): defined there.
from ._sparsity import (hessian_coloring, hessian_sparsity, jacobian_coloring,  # noqa: E402
                        jacobian_sparsity, sparse_hessian, sparse_jacobian)
