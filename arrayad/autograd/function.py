"""``arrayad.autograd.Function``: user-written derivative rules, with torch.autograd.Function's API.

NOTE [Function as a primitive]
------------------------------
Every Function subclass gets one ``Primitive`` (made on first use, cached on the class), so that the
core's interpreters treat a custom function like any built-in operation, through the ordinary
protocol: rules declared once on the primitive, params that are immutable.

* params: ``apply`` binds the primitive with the tensor arguments positional and one ``_Site``
  as ``spec``: what is fixed for the call (the class, the non-tensor arguments, the keyword
  arguments, ``needs_input_grad``). It is immutable and hashed by identity, so jit may stage,
  copy, compare and replay it (from several threads at once) and vmap may rebind it.
* per-call state: what a run of ``forward`` makes (the ctx with its saved tensors and marks, the
  structure of the output) is a ``_Record``. impl returns its outputs as an ``_Outs`` tuple that
  carries the record; the core keeps that tuple as the tape node's output, so the node's rules
  find the ctx there. ``apply`` learns the structure of the output through its ``_Frame``, where
  the rule that ran forward within its ``bind`` left the record.
* impl: runs ``forward`` on the raw arrays (wrapped in plain ``Tensor``: torch-style methods work);
* vjp: calls the user's ``backward(ctx, *grads)``; jvp: the user's ``jvp``;
* batch: the primitive has ``batch_gets_interpreter``, so the batching interpreter passes
  itself, whose size and ``randomness`` the rule reads; it calls the user's ``vmap``
  staticmethod with them, or with ``generate_vmap_rule`` binds the same primitive with a
  ``_Batched`` site: the class's forward, backward and jvp run under ``vmap`` with that
  randomness.
* ``once_differentiable``: the results of such a backward are tagged by ``_once_p``, a primitive
  whose own VJP and JVP rules refuse (torch's message), so a second derivative fails where it
  would flow, on the tape as under the transforms; the engine has no special case for it.

Which ``ctx`` a rule hands to ``backward``/``jvp`` matters for higher derivatives: the saved values
must live at the level of the rule's inputs. When those inputs are the very raw arrays impl ran on,
the ctx filled by impl (the record on the node's output) is reused (the cheap eager path).
Otherwise (Tensors with ``create_graph``, tracers of outer transforms: hessian, grad(grad),
vmap(grad)...) ``forward`` runs again on those inputs with a fresh ctx, so what it saves is
differentiable / batched at every outer level. That is also why both styles
(``forward(ctx, ...)`` and ``forward(...)`` + ``setup_context``) work under every transform
here, where torch accepts only the second.

NOTE [explicit tangents]
------------------------
``Fn.apply(x, tx, w, tw, ...)``: when ``apply`` receives more positional arguments than ``forward``
declares, an even number of them and at most twice as many, they are (primal, tangent) pairs (a
convention arrayad supports on purpose; torch would raise a TypeError). The output is computed
by the ordinary path (so it is on the tape with ``grad_fn=<FnBackward>``) and the tangent by
the class's ``jvp``; ``apply`` returns ``(output, tangent_output)``. See docs/function.md for
the exact rule and how a ``jvp`` in the interleaved style (primals and tangents interleaved,
returning ``(output, tangent)``) is told apart from one in torch's style (tangents only).
"""

import functools
import inspect
import threading
import types
from collections.abc import Callable
from typing import Any, TypeVar

from .._core import _core
from .._dtypes import is_inexact
from .._core._core import (Array, Primitive, Tensor, Tracer, bind, dtype_of, is_complex, shape_of,
                           unbroadcast)
from .._core._core import fix_scalar as _fix_scalar
from .._ops import ops
from .._ops.creation import batching_rule_of
from .._ops.views import update_in_place
from ..backends import backend_of, can_stand_for
from ..backends._random import RandomReplay
from ..func import vmap

__all__ = ["Function", "FunctionCtx", "once_differentiable", "VmapInfo"]

_R = TypeVar("_R")
_PY_SCALARS = (bool, int, float, complex, str, bytes, type(None))
_NO_KWARGS: types.MappingProxyType[str, Any] = types.MappingProxyType({})
_EXTENDING = "For more details, please see https://pytorch.org/docs/main/notes/extending.func.html"


# -- values ----------------------------------------------------------------------------------------
def _is_tensor(v: Any) -> bool:
    """An array argument (tracked, differentiated); anything else is a constant parameter."""
    if isinstance(v, Array):
        return True
    return not isinstance(v, _PY_SCALARS) and hasattr(v, "shape") and hasattr(v, "dtype")


def _prep(v: Any) -> Any:
    """What the user's methods see: raw arrays become plain Tensors (so ``x.t()``, ``x.sum(0)``
    work on every backend); Tensors and tracers become aliases, so that an in-place update inside
    ``forward`` (``x += 1``) rebinds the alias, not the caller's object (forward may run again)."""
    if isinstance(v, Tensor):
        t = Tensor(v._value)
        t._node = v._node
        t._idx = v._idx
        return t
    if isinstance(v, Tracer):
        return v.__copy__()   # (a tracer's copy is that alias: same transform, same place)
    if _is_tensor(v):
        return Tensor(v)
    return v


def _wrap_raw(v: Any) -> Any:
    return Tensor(v) if v is not None and not isinstance(v, Array) and _is_tensor(v) else v


def _unwrap(v: Any, raw: Any = True) -> Any:
    """Back to what the interpreters expect: when the rule's inputs were raw arrays (``raw``), a
    plain Tensor in its result only wrapped a raw array and is that array again (NumPy in, NumPy
    out); when the caller works with Tensors, Tensors stay."""
    if raw and type(v) is Tensor and v._node is None:
        return v._value
    return v


def _lowered(v: Any) -> Any:
    """An output of forward run on raw arrays (``impl``) as a raw value where it is a constant
    of every transform open around the call: made of arrays created inside without an array
    argument (``ad.rand(n)``, ``ad.zeros(n)``), which are constants of the innermost transform
    (NOTE [everything inside is arrayad] in the core) and would escape it from a rule that
    computes one level down."""
    o = v
    while isinstance(o, Tracer):
        if not o._is_constant():
            return v
        o = o.value
    return o


def _no_tensor(*groups: Any) -> bool:
    return not any(isinstance(v, Tensor) for g in groups for v in g)


def _needs_grad(v: Any) -> bool:
    while isinstance(v, Tracer):   # (each level says: NOTE [interpreters])
        if v.derivative is not None:
            return True
        if not v.batches:   # (a staged value: jit stages the call with its rules)
            return False
        v = v.value
    return isinstance(v, Tensor) and v.requires_grad and _core.is_grad_enabled()


def _is_float(v: Any) -> Any:
    try:
        return is_inexact(dtype_of(v))
    except Exception:
        return False


def _broadcastable(small: tuple[int, ...], big: tuple[int, ...]) -> bool:
    if len(small) > len(big):
        return False
    return all(s == b or s == 1 for s, b in zip(small[::-1], big[::-1]))


class _NoGrad:
    def __enter__(self) -> None:
        self.prev = _core.set_grad_enabled_flag(False)

    def __exit__(self, *exc: Any) -> Any:
        _core.set_grad_enabled_flag(self.prev)
        return False


# -- the context -----------------------------------------------------------------------------------
class FunctionCtx:
    """The ``ctx`` of ``forward``/``setup_context``/``backward``/``jvp``: saved tensors, marks, and
    any attribute you set on it (store non-arrays, such as a Python ``k``, as ``ctx.k = k``).

    Methods and attributes, as torch's:

    - ``save_for_backward(*tensors)``: arrays (or None) that ``backward`` reads back from
      ``ctx.saved_tensors``;
    - ``save_for_forward(*tensors)``: arrays that ``jvp`` reads from ``ctx.saved_tensors``;
    - ``mark_non_differentiable(*outputs)``: those outputs get no gradient (backward still
      receives zeros for them);
    - ``mark_dirty(*inputs)``: ``forward`` modified these inputs in place;
    - ``set_materialize_grads(value)``: with False, ``backward``/``jvp`` receive None rather
      than zeros for outputs without gradient;
    - ``needs_input_grad``: a tuple with one bool per input of ``forward``.

    Raises
    ------
    TypeError
        From ``save_for_backward``: an argument that is not an array or None.
    AssertionError
        From ``save_for_forward``: an argument that is not an array or None (torch's error).

    Examples
    --------
    A scale by a Python number kept on ``ctx``:

    >>> class Scale(ad.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x, k):
    ...         ctx.k = k
    ...         return x * k
    ...     @staticmethod
    ...     def backward(ctx, g):
    ...         return g * ctx.k, None   # no gradient for k
    >>> ad.func.grad(lambda x: ad.sum(Scale.apply(x, 3.0)))(np.array([1.0, 2.0]))
    array([3., 3.])
    """

    def __init__(self) -> None:
        self._saved: tuple[Any, ...] = ()
        self._saved_fwd: tuple[Any, ...] | None = None
        self._non_differentiable: list[Any] = []
        self._dirty: list[Any] = []
        self._materialize = True
        self._phase: str | None = "forward"
        self.needs_input_grad: tuple[bool, ...] = ()

    def save_for_backward(self, *tensors: Any) -> None:
        for i, t in enumerate(tensors):
            if t is not None and not _is_tensor(t):
                raise TypeError(
                    f"save_for_backward can only save variables, but argument {i} is of type "
                    f"{type(t).__name__}. Save non-tensors as attributes on ctx (ctx.k = k).")
        self._saved = tensors

    def save_for_forward(self, *tensors: Any) -> None:
        for t in tensors:
            if t is not None and not _is_tensor(t):
                raise AssertionError(
                    "save_for_forward expects all arguments to be tensors; you should save "
                    "non-tensors as attributes on ctx.")
        self._saved_fwd = tensors

    @property
    def saved_tensors(self) -> tuple[Any, ...]:
        # In jvp, torch reads the values of save_for_forward through saved_tensors too.
        if self._phase == "jvp" and self._saved_fwd is not None:
            return self._saved_fwd
        return self._saved

    saved_variables = saved_tensors

    def mark_non_differentiable(self, *outputs: Any) -> None:
        self._non_differentiable.extend(outputs)

    def mark_dirty(self, *inputs: Any) -> None:
        self._dirty.extend(inputs)

    def set_materialize_grads(self, value: bool) -> None:
        self._materialize = bool(value)


class VmapInfo:
    """What a ``vmap`` staticmethod learns about the transform: ``batch_size``, ``randomness``."""

    __slots__ = ("batch_size", "randomness")

    def __init__(self, batch_size: int, randomness: str) -> None:
        self.batch_size = batch_size
        self.randomness = randomness

    def __repr__(self) -> str:
        return f"VmapInfo(batch_size={self.batch_size}, randomness={self.randomness!r})"


# -- the primitive behind every Function subclass --------------------------------------------------
def _impl_rule(xp: Any, *raws: Any, spec: Any) -> Any:
    return spec.impl(raws)


def _vjp_rule(g: Any, ans: Any, *args: Any, spec: Any) -> Any:
    # One output: the core hands the cotangent itself; several: a tuple (never a tuple otherwise).
    if type(g) is Tensor and isinstance(g._value, tuple):
        # The core's create_graph path wraps the tuple of cotangents of a multi-output node in one
        # Tensor (_node_vjp: ``g if isinstance(g, Array) else Tensor(g)``); unpack it.
        g = tuple(v if isinstance(v, Array) else Tensor(v) for v in g._value)
    return spec.vjp(g if isinstance(g, tuple) else (g,), args, ans)


def _jvp_rule(tangents: Any, ans: Any, *args: Any, spec: Any) -> Any:
    return spec.jvp(tangents, ans, args)


def _batch_rule(args: Any, dims: Any, spec: Any, interpreter: Any) -> Any:
    # (the primitive has ``batch_gets_interpreter``: the vmap's size and randomness are its own;
    # the lanes' draws are the rule's: NOTE [draws in a batching rule])
    with batching_rule_of(interpreter):
        return spec.batch(args, dims, interpreter.size, interpreter.randomness)



class _FunctionPrimitive(Primitive):
    """One per Function subclass; ``node_name`` gives the tape node its torch name."""

    def __init__(self, cls: type["Function"]) -> None:
        super().__init__(cls.__name__, _impl_rule, multiple_results=True)
        self.node_name = cls.__name__ + "Backward"
        self.vjp = _vjp_rule
        self.jvp = _jvp_rule
        self.batch = _batch_rule
        self.batch_gets_interpreter = True

    @staticmethod
    def staged_run(params: Any) -> Any:
        """The call's run as ``jit`` may trace it into a program, or None (NOTE [staged calls]
        in ``arrayad/_jit``): a batched call's (a Function's own forward keeps its ctx for
        backward, which the replay of a program would not)."""
        spec = params.get("spec")
        return spec.impl if isinstance(spec, _Batched) else None


class _Info:
    """What ``apply`` needs to know about a class, computed once."""

    def __init__(self, cls: type["Function"]) -> None:
        self.cls = cls
        self.name = cls.__name__
        self.prim = _FunctionPrimitive(cls)
        self.style2 = _overrides(cls, "setup_context")
        self.forward_sig = inspect.signature(cls.forward)
        params = list(self.forward_sig.parameters.values())
        if not self.style2:
            if not params or params[0].kind not in (inspect.Parameter.POSITIONAL_ONLY,
                                                    inspect.Parameter.POSITIONAL_OR_KEYWORD):
                raise TypeError(
                    f"{self.name}.forward must take ctx as its first argument (forward(ctx, "
                    f"*args)), or take only the inputs and override setup_context(ctx, inputs, "
                    f"output).")
            params = params[1:]
        kinds = [p.kind for p in params]
        if inspect.Parameter.VAR_POSITIONAL in kinds:
            self.n_pos = None
        else:
            self.n_pos = sum(k in (inspect.Parameter.POSITIONAL_ONLY,
                                   inspect.Parameter.POSITIONAL_OR_KEYWORD) for k in kinds)
        self.simple = self.n_pos is not None and all(
            p.default is inspect.Parameter.empty and p.kind != inspect.Parameter.KEYWORD_ONLY
            for p in params)
        has_bwd, has_vjp = _overrides(cls, "backward"), _overrides(cls, "vjp")
        if has_bwd and has_vjp:
            raise RuntimeError(f"Implementing both 'backward' and 'vjp' for a custom Function is "
                               f"not allowed ({self.name}).")
        self.backward = cls.vjp if has_vjp else cls.backward
        self.has_jvp = _overrides(cls, "jvp")
        self.has_vmap = _overrides(cls, "vmap")
        self._jvp_styles: dict[int, str] = {}

    def bind_args(self, args: Any, kwargs: Any) -> Any:
        """(positional inputs, keyword-only inputs) with defaults filled in, as torch binds them."""
        if not kwargs and self.simple and len(args) == self.n_pos:
            return args, {}
        try:
            if self.style2:
                b = self.forward_sig.bind(*args, **kwargs)
            else:
                b = self.forward_sig.bind(None, *args, **kwargs)
        except TypeError as e:
            hint = "" if self.style2 else (
                f" ({self.name} has no setup_context, so forward's first parameter is ctx)")
            raise TypeError(f"{self.name}.apply(): {e}{hint}") from None
        b.apply_defaults()
        pos = b.args if self.style2 else b.args[1:]
        return tuple(pos), dict(b.kwargs)

    def jvp_style(self, nargs: Any) -> Any:
        """"tangents" (torch: jvp(ctx, *tangents) -> tangents) or "interleaved" (primals and
        tangents in pairs: jvp(ctx, x, tx, w, tw, ..., **kwargs) -> (output, tangent)). See
        docs/function.md."""
        style = self._jvp_styles.get(nargs)
        if style is not None:
            return style
        style = getattr(self.cls, "jvp_style", None)
        if style is not None:
            if style not in ("tangents", "interleaved"):
                raise ValueError(f"{self.name}.jvp_style must be 'tangents' or 'interleaved', got "
                                 f"{style!r}")
        else:
            params = list(inspect.signature(self.cls.jvp).parameters.values())[1:]
            pos = [p for p in params if p.kind in (inspect.Parameter.POSITIONAL_ONLY,
                                                   inspect.Parameter.POSITIONAL_OR_KEYWORD)]
            kinds = {p.kind for p in params}
            if inspect.Parameter.VAR_POSITIONAL not in kinds:
                style = "interleaved" if nargs and len(pos) == 2 * nargs else "tangents"
            elif not pos and inspect.Parameter.VAR_KEYWORD in kinds:
                # the interleaved style's catch-all signature: jvp(ctx, *inputs, **kwargs)
                style = "interleaved"
            else:
                style = "tangents"
        self._jvp_styles[nargs] = style
        return style


def _overrides(cls: type["Function"], name: str) -> bool:
    return getattr(cls, name) is not getattr(Function, name)


def _info(cls: type["Function"]) -> "_Info":
    info = cls.__dict__.get("_arrayad_info")
    if info is None:
        info = _Info(cls)
        cls._arrayad_info = info
    return info


_T = object()   # marks a tensor position in a layout


class _Record:
    """One run of ``forward`` (or of the ``vmap`` staticmethod): its ctx and the structure of its
    output. Per call, so never in the primitive's params (NOTE [Function as a primitive])."""

    __slots__ = ("ctx", "out_tuple", "out_layout", "nondiff", "dirty", "site", "raws")
    ctx: Any
    out_tuple: bool
    out_layout: list[Any]
    nondiff: tuple[int, ...]
    dirty: tuple[tuple[int, int], ...]
    site: Any
    raws: Any

    def rebuild(self, outs: Any, fill_const: Any = True) -> Any:
        it = iter(outs)
        seq = tuple(next(it) if e is _T else (e if fill_const else None) for e in self.out_layout)
        return seq if self.out_tuple else seq[0]


class _Outs(tuple[Any, ...]):
    """What impl returns: the outputs, with the ``record`` of the forward that made them (whose
    ``site`` and ``raws`` say which call, on which raw arrays). The core keeps a tuple subclass
    as it is, so the tape node keeps this object as its output (``ans``) and that node's rules
    reuse the ctx (the cheap eager path)."""

    record: _Record


class _Calls(threading.local):
    """Each thread's ``apply`` calls in progress, innermost last, as frames ``[site, record]``:
    the rule that runs ``forward`` for the call (impl, or the batching rule with the ``vmap``
    staticmethod) leaves its record there, where ``apply`` reads the structure of the output (a
    tuple? which outputs are constants, non-differentiable, dirty?)."""

    def __init__(self) -> None:
        self.stack: list[list[Any]] = []


_calls = _Calls()


def _report(site: Any, rec: Any) -> Any:
    """Hand ``rec`` to the ``apply`` of ``site`` if it is the one in progress (a rule run later,
    by a backward pass, finds no frame of its call: the record stays with the rule)."""
    stack = _calls.stack
    if stack:
        top = stack[-1]
        if top[0] is site and top[1] is None:
            top[1] = rec


class _Site:
    """The params of one ``apply`` (NOTE [Function as a primitive]): immutable, hashed by
    identity, so that jit may stage, copy and compare them and replay them from several threads;
    what a run of forward makes (ctx, the output's structure) is a ``_Record``, never kept here.

    Its fields: ``info`` (the class's), ``layout`` (forward's positional inputs: _T or the
    constant), ``kwargs`` (read-only), ``needs`` (needs_input_grad), ``explicit`` (NOTE
    [explicit tangents]); one tuple, which the rules unpack (a call makes one such object).
    The one thing of a run it holds is the random state forward started from at its first run
    of the call (``rng``), so that a run of forward at another level draws the same numbers
    (NOTE [random state of a rule] in ``backends/_random.py``); a staged program never has a
    draw in it (jit refuses them), so a site that jit replays keeps none."""

    __slots__ = ("_fields", "rng")
    _fields: tuple[Any, ...]
    rng: RandomReplay

    def __init__(self, info: Any, layout: Any, kwargs: Any, needs: Any,
                 explicit: bool = False) -> None:
        object.__setattr__(self, "_fields", (
            info, layout, types.MappingProxyType(kwargs) if kwargs else _NO_KWARGS, needs,
            explicit))
        object.__setattr__(self, "rng", RandomReplay())

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"the params of a bound {self.info.name} are immutable")

    __delattr__ = __setattr__   # type: ignore[assignment]  # (refuses both the same way)

    info = property(lambda self: self._fields[0])
    layout = property(lambda self: self._fields[1])
    kwargs = property(lambda self: self._fields[2])
    needs = property(lambda self: self._fields[3])
    explicit = property(lambda self: self._fields[4])
    prim = property(lambda self: self._fields[0].prim)

    def __repr__(self) -> str:
        return f"<{self.info.name} call>"

    # -- running the user's methods
    def assemble(self, vals: Any, fill: Any = None) -> Any:
        it = iter(vals)
        return tuple(next(it) if e is _T else (e if fill is None else fill)
                     for e in self._fields[1])

    def run_forward(self, vals: Any) -> Any:
        """(record, output tensors) of ``forward`` run on ``vals``, with a fresh ctx."""
        info, layout, kwargs, needs, _ = self._fields
        ctx = FunctionCtx()
        ctx.needs_input_grad = needs
        vals = [_prep(v) for v in vals]
        if len(vals) == len(layout):   # (tensors only)
            full = tuple(vals)
        else:
            it = iter(vals)
            full = tuple(next(it) if e is _T else e for e in layout)
        if info.style2:
            out = self.rng.run(lambda: info.cls.forward(*full, **kwargs))
            info.cls.setup_context(ctx, full, out)
        else:
            out = self.rng.run(lambda: info.cls.forward(ctx, *full, **kwargs))
        ctx._phase = None
        return self.record(out, ctx, vals)

    def record(self, out: Any, ctx: Any, vals: Any) -> Any:
        """(record of ``out``'s structure and ``ctx``'s marks, the tensors of ``out``)."""
        seq = out if isinstance(out, tuple) else (out,)
        rec = _Record()
        rec.ctx = ctx
        rec.out_tuple = isinstance(out, tuple)
        layout, tensors = [], []
        for o in seq:
            if _is_tensor(o):
                layout.append(_T)
                tensors.append(o)
            else:
                layout.append(o)
        rec.out_layout = layout
        rec.nondiff = rec.dirty = ()
        rec.site = rec.raws = None
        if ctx is not None and ctx._non_differentiable:
            marked = ctx._non_differentiable
            rec.nondiff = tuple(i for i, o in enumerate(tensors) if any(o is m for m in marked))
        if ctx is not None and ctx._dirty:
            dirty = []
            for d in ctx._dirty:
                k = next((k for k, v in enumerate(vals) if v is d), None)
                i = next((i for i, o in enumerate(tensors) if o is d), None)
                if k is None:
                    raise RuntimeError(f"{self.info.name}: mark_dirty() only accepts inputs of "
                                       f"forward")
                if i is None:
                    raise RuntimeError(
                        f"{self.info.name}: an input marked dirty (modified in place) must be "
                        f"returned as an output of forward")
                dirty.append((k, i))
            rec.dirty = tuple(dirty)
        _report(self, rec)
        return rec, tuple(tensors)

    def outputs(self, vals: Any) -> Any:
        """The outputs computed with plain operations on ``vals`` (used under ``_Batched``)."""
        return self.run_forward(vals)[1]

    def record_for(self, args: Any, ans: Any) -> Any:
        """The record whose ctx backward/jvp get at the level of ``args`` (NOTE [Function as a
        primitive]): impl's, kept with its outputs, when ``args`` are the raw arrays impl ran on;
        else that of ``forward`` run again on ``args``."""
        if type(ans) is _Outs:
            rec = ans.record
            raws = rec.raws
            if rec.site is self and len(raws) == len(args) and \
                    all(a is b for a, b in zip(args, raws)):
                return rec
        return self.run_forward(args)[0]

    # -- the rules
    def impl(self, raws: Any) -> Any:
        self.rng.state = None   # (a first run: NOTE [random state of a rule])
        with _NoGrad():
            rec, outs = self.run_forward(raws)
        rec.site = self
        rec.raws = raws
        ctx = rec.ctx
        for name in ("_saved", "_saved_fwd"):   # (what backward and jvp read: lowered too)
            saved = getattr(ctx, name)
            if saved and any(isinstance(t, Tracer) for t in saved):
                lowered = [_lowered(t) for t in saved]
                setattr(ctx, name, tuple(t if lo is t else _prep(lo)
                                         for t, lo in zip(saved, lowered)))
        res = _Outs([_fix_scalar(_unwrap(_lowered(o))) for o in outs])
        res.record = rec
        return res

    def vjp(self, gs: Any, args: Any, ans: Any = None) -> Any:
        info, layout = self._fields[:2]
        raw = _no_tensor(args, gs)
        rec = self.record_for(args, ans)
        ctx = rec.ctx
        it = iter(gs)
        # (user code may change them in place: their zeros are numbers, NOTE [strong zeros])
        grads = [_wrap_raw(_core.forget_zeros(next(it))) if e is _T else None
                 for e in rec.out_layout]
        ctx._phase = "backward"
        try:
            res = info.backward(ctx, *grads)
        finally:
            ctx._phase = None
        n = len(layout)
        if not isinstance(res, tuple):
            res = (res,)
        if len(res) < n or any(r is not None for r in res[n:]):
            raise RuntimeError(
                f"function {info.name}Backward returned an incorrect number of gradients "
                f"(expected {n}, got {len(res)})")
        cts: list[Any] = []
        for i, (e, r) in enumerate(zip(layout, res)):
            if e is not _T:
                continue
            arg = args[len(cts)]
            if r is not None:
                r = self._fit(r, arg, i, "gradient")
            cts.append(None if r is None else _unwrap(r, raw))
        return cts

    def _fit(self, r: Any, arg: Any, i: Any, what: Any) -> Any:
        if not _is_tensor(r):
            raise TypeError(f"function {self.info.name}Backward returned a {what} of type "
                            f"{type(r).__name__} at index {i}; expected an array or None")
        rs, xs = shape_of(r), shape_of(arg)
        if rs != xs:
            if what == "gradient" and _broadcastable(xs, rs):
                return unbroadcast(r, arg)
            raise RuntimeError(
                f"Function {self.info.name}Backward returned an invalid {what} at index {i} - got "
                f"{list(rs)} but expected shape compatible with {list(xs)}")
        rb, xb = backend_of(r), backend_of(arg)
        if not can_stand_for(rb, xb):
            raise TypeError(
                f"function {self.info.name}Backward returned a {what} at index {i} on the "
                f"{rb.name} backend for an input on {xb.name}. Return arrays of the input's "
                f"backend: compute them with arrayad functions from the saved tensors, or "
                f"convert with arrayad.asarray(r, device=x.device).")
        if dtype_of(r) != dtype_of(arg):
            # as torch: cast to the input's dtype; a complex one for a real input is refused
            # (torch's "Expected isFloatingType(grad.scalar_type()) || (input_is_complex ==
            # grad_is_complex)"): its real part would be a silently wrong gradient
            if is_complex(r) and not is_complex(arg):
                raise TypeError(
                    f"function {self.info.name}Backward returned a {dtype_of(r).name} {what} "
                    f"at index {i} for a real input of dtype {dtype_of(arg).name}: the "
                    f"{what} of a real input is real. Return its real part if that is what "
                    f"you mean (arrayad.real(g)), or make the input complex.")
            r = ops.astype(r, dtype_of(arg))
        return r

    def jvp(self, tangents: Any, ans: Any, args: Any) -> Any:
        info = self.info
        if not info.has_jvp:
            raise NotImplementedError(
                f"You must implement the jvp function for custom autograd.Function to use it "
                f"with forward mode AD ({info.name}).")
        if self.explicit:
            # NOTE [explicit tangents]: the eager tangent is not recorded on
            # the tape (under arrayad.func transforms it stays fully differentiable).
            args = tuple(a.detach() if isinstance(a, Tensor) else a for a in args)
            tangents = [t.detach() if isinstance(t, Tensor) else t for t in tangents]
        raw = _no_tensor(args, tangents)
        rec = self.record_for(args, ans)
        ctx = rec.ctx
        full_t: list[Any] = []
        it = iter(zip(tangents, args))
        for e in self.layout:
            if e is not _T:
                full_t.append(None)
                continue
            t, a = next(it)
            if t is None and ctx._materialize and _is_float(a):
                t = ops.zeros_like(a)
            full_t.append(_wrap_raw(_core.forget_zeros(t)))   # (as the cotangents of backward)
        style = info.jvp_style(len(self.layout))
        ctx._phase = "jvp"
        try:
            if style == "interleaved":
                prims = self.assemble([_prep(a) for a in args])
                inter = [v for pair in zip(prims, full_t) for v in pair]
                res = info.cls.jvp(ctx, *inter, **self.kwargs)
                if not (isinstance(res, tuple) and len(res) == 2):
                    raise RuntimeError(
                        f"{info.name}.jvp takes primals and tangents interleaved (x, tx, w, tw, "
                        f"...), so it must return (output, tangent_output); got "
                        f"{type(res).__name__}. If it takes tangents only (torch's convention), "
                        f"set jvp_style = 'tangents' on the class.")
                res = res[1]
            else:
                res = info.cls.jvp(ctx, *full_t)
        finally:
            ctx._phase = None
        # As torch: one tangent (an array or None) per output of forward, the single one bare
        # or in a 1-tuple; any other count is refused by name (a tuple is not an array).
        n = len(rec.out_layout)
        seq = res if isinstance(res, tuple) else (res,)
        if len(seq) != n:
            raise RuntimeError(
                f"function {info.name}'s jvp returned an invalid number of forward gradients "
                f"(expected {n} but got {len(seq)}): return one tangent (an array or None) per "
                f"output of forward, in a tuple when forward returns several")
        outs = []
        k = 0
        for i, (e, t) in enumerate(zip(rec.out_layout, seq)):
            if t is not None and not _is_tensor(t):
                raise TypeError(
                    f"function {info.name}'s jvp returned a {type(t).__name__} as the tangent of "
                    f"output {i}; expected an array or None")
            if e is not _T:
                continue
            o = ans[k] if ans is not None else None
            if t is None or k in rec.nondiff or (o is not None and not _is_float(o)):
                t = None
            else:
                if o is not None and shape_of(t) != shape_of(o):
                    raise RuntimeError(
                        f"Function {info.name}Backward's jvp returned an invalid tangent at index "
                        f"{i} - got {list(shape_of(t))} but expected {list(shape_of(o))} (the "
                        f"shape of the output)")
                if o is not None and is_complex(t) and not is_complex(o):
                    # (torch passes it on: a complex tangent of a real output, silently wrong)
                    raise TypeError(
                        f"function {info.name}'s jvp returned a {dtype_of(t).name} tangent for "
                        f"output {i}, a real output of dtype {dtype_of(o).name}: the tangent of "
                        f"a real output is real. Return its real part if that is what you mean "
                        f"(arrayad.real(t)), or make the output complex.")
                t = _unwrap(t, raw)
            outs.append(t)
            k += 1
        return tuple(outs)

    def batch(self, args: Any, dims: Any, size: Any, randomness: Any) -> Any:
        info = self.info
        if info.has_vmap and info.cls.generate_vmap_rule:
            raise RuntimeError(
                f"You tried to vmap over {info.name}, but it has both generate_vmap_rule=True and "
                f"an overriden vmap staticmethod. Please set generate_vmap_rule=False or delete "
                f"the overriden vmap staticmethod to avoid ambiguity. {_EXTENDING}")
        if info.has_vmap:
            vinfo = VmapInfo(size, randomness)
            full = self.assemble([_wrap_raw(a) for a in args])
            full_dims = self.assemble(dims, fill=None)
            full_dims = tuple(d if e is _T else None for d, e in zip(full_dims, self.layout))
            # (the first run of the call: a later run of forward for a ctx at the vmap's level
            # draws what the rule drew, NOTE [random state of a rule])
            self.rng.state = None
            res = self.rng.run(lambda: info.cls.vmap(vinfo, full_dims, *full, **self.kwargs))
            if not (isinstance(res, tuple) and len(res) == 2):
                raise RuntimeError(
                    f"Expected the vmap staticmethod to have two returns, an output and out_dims "
                    f"with pytree structure compatible with the output. ({info.name}.vmap)")
            out, out_dims = res
            rec, tensors = self.record(out, None, ())
            seq_dims = out_dims if isinstance(out_dims, tuple) else \
                (out_dims,) * len(rec.out_layout)
            if len(seq_dims) != len(rec.out_layout):
                raise RuntimeError(
                    f"{info.name}.vmap: out_dims {out_dims!r} does not match the structure of the "
                    f"output ({len(rec.out_layout)} outputs)")
            odims: list[Any] = []
            for e, d in zip(rec.out_layout, seq_dims):
                if e is _T:
                    if d is not None:
                        d = d % len(shape_of(tensors[len(odims)]))
                    odims.append(d)
            raw = _no_tensor(args)
            return tuple(_unwrap(t, raw) for t in tensors), tuple(odims)
        if info.cls.generate_vmap_rule:
            return _Batched(self, dims, size, randomness).bind(args)
        raise RuntimeError(
            f"You tried to vmap over {info.name}, but it does not have vmap support. Please "
            f"override and implement the vmap staticmethod or set generate_vmap_rule=True. "
            f"{_EXTENDING}")


class _Batched:
    """``generate_vmap_rule``: the call ``inner`` mapped over ``dims`` (outputs batched at 0),
    bound as params of the same primitive, immutable as ``_Site``. Its forward, backward and jvp
    are the inner call's, run under ``arrayad.func.vmap`` with the randomness of the vmap being
    batched (which the interpreter hands to the batching rule), so the class's own derivative
    rules keep applying at the levels below the vmap."""

    __slots__ = ("inner", "prim", "dims", "size", "randomness")
    inner: Any
    prim: Any
    dims: tuple[Any, ...]
    size: int
    randomness: Any

    def __init__(self, inner: Any, dims: Any, size: Any, randomness: Any) -> None:
        object.__setattr__(self, "inner", inner)
        object.__setattr__(self, "prim", inner.prim)
        object.__setattr__(self, "dims", tuple(dims))
        object.__setattr__(self, "size", size)
        object.__setattr__(self, "randomness", randomness)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("the params of a bound batched call are immutable")

    __delattr__ = __setattr__   # type: ignore[assignment]  # (refuses both the same way)

    def bind(self, args: Any) -> Any:
        """(outputs, their batch dims) of the call on the batched ``args``, one level down."""
        outs = bind(self.prim, *args, spec=self)
        return outs, (0,) * len(outs)

    def _vmap(self, fn: Any, in_dims: Any) -> Any:
        return vmap(fn, in_dims=tuple(in_dims), randomness=self.randomness)

    def outputs(self, vals: Any) -> Any:
        return self._vmap(lambda *a: tuple(self.inner.outputs(a)), self.dims)(*vals)

    def impl(self, raws: Any) -> Any:
        # (its run is the inner call under arrayad.func.vmap, which computes on jit's tracers
        # too: jit may trace it into a program once, NOTE [staged calls] in arrayad/_jit)
        with _NoGrad():
            return tuple(_unwrap(o) for o in self.outputs(raws))

    def staged_run(self) -> Any:
        return self.impl

    def vjp(self, gs: Any, args: Any, ans: Any = None) -> Any:
        n = len(args)

        def one(*a_and_g: Any) -> Any:
            a = a_and_g[:n]
            cts = self.inner.vjp(a_and_g[n:], a)
            return tuple(ops.zeros_like(x) if c is None else c for c, x in zip(cts, a))
        cts = self._vmap(one, self.dims + (0,) * len(gs))(*args, *gs)
        out: list[Any] = []
        for c, x, d in zip(cts, args, self.dims):
            if not _is_float(x):
                out.append(None)
            elif d is None:
                out.append(ops.sum(c, axis=0))   # the argument was shared by the whole batch
            elif d != 0:
                out.append(ops.moveaxis(c, 0, d))
            else:
                out.append(c)
        return out

    def jvp(self, tangents: Any, ans: Any, args: Any) -> Any:
        n = len(args)
        live = [i for i, t in enumerate(tangents) if t is not None]
        # which outputs have no tangent (static: non-differentiable or integer)
        zero: list[Any] = []

        def one(*vals: Any) -> Any:
            ts = [None] * n
            for k, i in enumerate(live):
                ts[i] = vals[n + k]
            touts = self.inner.jvp(ts, None, vals[:n])
            zero[:] = [t is None for t in touts]
            return tuple(t for t in touts if t is not None)

        in_dims = self.dims + tuple(self.dims[i] for i in live)
        got = iter(self._vmap(one, in_dims)(*args, *[tangents[i] for i in live]))
        outs = []
        for k, z in enumerate(zero):
            t = None if z else next(got)
            if t is not None and ans is not None and not _is_float(ans[k]):
                t = None
            outs.append(t)
        return tuple(outs)

    def batch(self, args: Any, dims: Any, size: Any, randomness: Any) -> Any:
        return _Batched(self, dims, size, randomness).bind(args)


# -- Function --------------------------------------------------------------------------------------
class Function:
    """A differentiable operation with user-written derivative rules (torch.autograd.Function's
    API).

    Subclass it with staticmethods and call it through ``Fn.apply(*args)``:

    - ``forward(*args)`` with ``setup_context(ctx, inputs, output)`` (torch.func's style), or
      ``forward(ctx, *args)``: both work under every transform here, where torch.func accepts
      only the first. Array arguments are differentiated; anything else is a constant.
    - ``backward(ctx, *grad_outputs)`` (or ``vjp``): one gradient per output in, one per input
      of ``forward`` out (None for a constant or an input without gradient). Write it with
      arrayad operations so that it can be differentiated again (``hessian``, ``grad(grad)``).
    - ``jvp(ctx, *tangents)``, optional: one tangent per input in (None for constants), one per
      output out. Needed by ``jvp``, ``jacfwd`` and ``forward_ad``.
    - ``vmap(info, in_dims, *args)`` returning ``(output, out_dims)``, or the class attribute
      ``generate_vmap_rule = True`` (``forward``, ``backward`` and ``jvp`` are then batched
      as ordinary code), for ``vmap``.

    ``apply`` returns what ``forward`` returns: on the eager tape its node is named
    ``<ClassName>Backward``. arrayad also accepts ``Fn.apply(x, tx, w, tw, ...)`` with
    (primal, tangent) pairs, returning ``(output, tangent)`` (see docs/function.md).

    Raises
    ------
    NotImplementedError
        When a derivative is needed that the class does not define (``backward`` for reverse
        mode, ``jvp`` for forward mode).
    RuntimeError
        Under ``vmap``, if the class has neither a ``vmap`` staticmethod nor
        ``generate_vmap_rule = True`` (or has both); if ``backward`` or ``jvp`` returns the
        wrong number of values or a value of the wrong shape; if the class defines both
        ``backward`` and ``vjp``; if an instance is called (use ``apply``).
    TypeError
        From ``apply``: arguments that do not match ``forward``'s signature; a ``forward``
        without ``setup_context`` that does not take ``ctx`` first.

    Examples
    --------
    The cube, with its derivative ``3 x ** 2`` for both modes:

    >>> from arrayad.autograd import Function
    >>> class Cube(Function):
    ...     @staticmethod
    ...     def forward(x):
    ...         return x ** 3
    ...     @staticmethod
    ...     def setup_context(ctx, inputs, output):
    ...         (x,) = inputs
    ...         ctx.save_for_backward(x)
    ...     @staticmethod
    ...     def backward(ctx, g):
    ...         (x,) = ctx.saved_tensors
    ...         return g * 3 * x ** 2
    ...     @staticmethod
    ...     def jvp(ctx, tx):
    ...         (x,) = ctx.saved_tensors
    ...         return 3 * x ** 2 * tx

    On the eager tape:

    >>> x = ad.tensor([1.0, 2.0], requires_grad=True)
    >>> y = Cube.apply(x)
    >>> y
    tensor([1., 8.], grad_fn=<CubeBackward>)
    >>> ad.sum(y).backward()
    >>> x.grad
    tensor([ 3., 12.])

    Under the transforms, on NumPy arrays; the Hessian of ``sum(x ** 3)`` is ``diag(6 x)``
    (``backward`` is differentiated again):

    >>> ad.func.grad(lambda x: ad.sum(Cube.apply(x)))(np.array([1.0, 2.0]))
    array([ 3., 12.])
    >>> ad.func.hessian(lambda x: ad.sum(Cube.apply(x)))(np.array([1.0, 2.0]))
    array([[ 6.,  0.],
           [ 0., 12.]])

    And the rules checked against finite differences, forward and reverse, to second order:

    >>> from arrayad.testing import check_grads
    >>> check_grads(Cube.apply, (np.array([0.5, 2.0]),), order=2)
    """

    generate_vmap_rule = False
    _arrayad_info: "_Info"   # (set on each subclass at its first apply: _info)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        import warnings
        warnings.warn(
            f"{type(self).__name__} should not be instantiated. Methods on autograd functions "
            f"are all static, so you should invoke them on the class itself. Instantiating an "
            f"autograd function will raise an error in a future version.", DeprecationWarning,
            stacklevel=2)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            "Legacy autograd function with non-static forward method is deprecated. Please use "
            "new-style autograd function with static forward method (call it with "
            f"{type(self).__name__}.apply(...)).")

    @staticmethod
    def forward(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            "You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> Any:
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx: Any, *grad_outputs: Any) -> Any:
        raise NotImplementedError(
            "You must implement either the backward or vjp method for your custom "
            "autograd.Function to use it with backward mode AD.")

    vjp = backward

    @staticmethod
    def jvp(ctx: Any, *grad_inputs: Any) -> Any:
        raise NotImplementedError(
            "You must implement the jvp function for custom autograd.Function to use it with "
            "forward mode AD.")

    @staticmethod
    def vmap(info: VmapInfo, in_dims: tuple[int | None, ...], *args: Any) -> Any:
        raise NotImplementedError(
            "To use autograd.Function with vmap, you must either override the vmap staticmethod "
            "or set generate_vmap_rule=True.")

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        """Run the function; derivatives will use the class's rules. With a ``jvp`` rule,
        ``apply(x, tx, w, tw, ...)`` (each input followed by its tangent) returns
        ``(output, tangent_output)``."""
        if cls is Function:
            raise RuntimeError("Function.apply must be called on a subclass of Function")
        info = _info(cls)
        n = info.n_pos
        if n is not None and n < len(args) <= 2 * n and len(args) % 2 == 0:
            return _apply_with_tangents(info, args, kwargs)
        full, kw = info.bind_args(args, kwargs)
        outs, rec, _, _ = _apply(info, full, kw)
        return rec.rebuild(outs)


def _apply(info: Any, full: Any, kw: Any, explicit: Any = False) -> Any:
    """(outputs, record, tensor arguments, what bind returned) of one call: the call's constants
    are immutable params (``_Site``); the record of its forward comes back through its frame."""
    layout, tensors, needs = [], [], []
    for a in full:
        if _is_tensor(a):
            layout.append(_T)
            tensors.append(a)
            needs.append(_needs_grad(a))
        else:
            layout.append(a)
            needs.append(False)
    site = _Site(info, tuple(layout), kw, tuple(needs), explicit)
    frame: list[Any] = [site, None]   # (_Calls)
    stack = _calls.stack
    stack.append(frame)
    try:
        res = bind(info.prim, *tensors, spec=site)
    finally:
        stack.pop()
    rec = frame[1]
    if rec is None:   # (every interpreter runs forward or the vmap staticmethod within bind)
        raise RuntimeError(f"{info.name}.apply(): no rule of the call ran forward; please report "
                           f"this as a bug of arrayad")
    outs = list(res)
    if rec.nondiff:
        for i in rec.nondiff:
            if isinstance(outs[i], Array):
                outs[i] = ops.stop_gradient(outs[i])
    for k, i in rec.dirty:
        # The input was modified in place: it becomes the output (value and history), as in torch.
        target = tensors[k]
        if isinstance(target, Array):
            update_in_place(target, outs[i], f"{info.name}.forward", stamp=False)
            outs[i] = target
    return outs, rec, tensors, (site, res)


def _apply_with_tangents(info: Any, args: Any, kwargs: Any) -> Any:
    """NOTE [explicit tangents]: ``apply(x, tx, w, tw, ...)`` -> ``(output, tangent_output)``."""
    if not info.has_jvp:
        raise RuntimeError(
            f"{info.name}.apply() got {len(args)} positional arguments but forward takes "
            f"{info.n_pos}: read as (primal, tangent) pairs, this needs {info.name}.jvp, which is "
            f"not implemented.")
    primals, tangents = args[0::2], args[1::2]
    full, kw = info.bind_args(primals, kwargs)
    full_t = list(tangents) + [None] * (len(full) - len(tangents))
    tensor_t = []
    for i, (p, t) in enumerate(zip(full, full_t)):
        if _is_tensor(p):
            if t is not None:
                if not _is_tensor(t):
                    raise TypeError(f"{info.name}.apply(): the tangent of argument {i} must be an "
                                    f"array or None, got {type(t).__name__}")
                if shape_of(t) != shape_of(p):
                    raise RuntimeError(
                        f"{info.name}.apply(): the tangent of argument {i} has shape "
                        f"{list(shape_of(t))} but the primal has shape {list(shape_of(p))}")
            tensor_t.append(t)
        elif t is not None:
            raise TypeError(
                f"{info.name}.apply(): argument {i} is not an array ({type(p).__name__}), so its "
                f"tangent (the argument after it) must be None, got {type(t).__name__}")
    outs, rec, tensors, (site, res) = _apply(info, full, kw, explicit=True)
    # (``res``, impl's outputs when the arguments were raw arrays, carries impl's ctx)
    touts = site.jvp(tensor_t, res, tuple(tensors))
    if any(isinstance(v, Tensor) for v in tensors + tensor_t):
        # the rule hands back raw arrays; a caller of eager Tensors gets Tensors
        touts = [_wrap_raw(t) for t in touts]
    return rec.rebuild(outs), rec.rebuild(touts, fill_const=False)


# -- once_differentiable ---------------------------------------------------------------------------
_TWICE = "trying to differentiate twice a function that was marked with @once_differentiable"


def _twice(*args: Any, **params: Any) -> Any:
    raise RuntimeError(_TWICE)


def _once_batch(args: Any, dims: Any) -> Any:
    # the tag is the identity on its first argument, the others only hold the edges
    return bind(_once_p, *args), dims[0]


class _OnceDifferentiable(Primitive):
    """``once_p(out, *inputs)`` is ``out``, a result of a ``@once_differentiable`` backward,
    made to depend on what that backward read (its gradients, saved tensors): differentiating
    it again reaches this primitive, whose VJP and JVP rules refuse with torch's message, by
    the ordinary rule path (the eager tape, grad, jvp), at the moment a derivative would flow
    through it, as torch's delayed error does."""

    def __init__(self) -> None:
        super().__init__("once_differentiable", lambda xp, out, *inputs: out)
        self.node_name = "OnceDifferentiableBackward"
        self.vjp = _twice
        self.jvp = _twice
        self.batch = _once_batch


_once_p = _OnceDifferentiable()


def once_differentiable(fn: Callable[..., _R]) -> Callable[..., _R]:
    """Decorate ``backward`` so that it runs without recording: its result cannot be
    differentiated again.

    For a ``backward`` written with operations that have no derivative (or are expensive to
    record). First derivatives work as usual; a second one raises instead of silently giving
    a wrong value, as in torch.

    Parameters
    ----------
    fn : callable
        The ``backward(ctx, *grad_outputs)`` staticmethod (put ``@once_differentiable`` under
        ``@staticmethod``).

    Returns
    -------
    callable
        The wrapped ``backward``.

    Raises
    ------
    RuntimeError
        When its result would be differentiated: by ``grad(grad(...))``, ``hessian``, ``jvp``
        of a ``vjp``, or ``.backward()`` on a gradient computed with ``create_graph=True``.

    Examples
    --------
    >>> from arrayad.autograd import Function, once_differentiable
    >>> class Exp(Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         y = ad.exp(x)
    ...         ctx.save_for_backward(y)
    ...         return y
    ...     @staticmethod
    ...     @once_differentiable
    ...     def backward(ctx, g):
    ...         (y,) = ctx.saved_tensors
    ...         return g * y
    >>> ad.func.grad(Exp.apply)(0.0)      # exp'(0) = 1
    array(1.)
    >>> ad.func.grad(ad.func.grad(Exp.apply))(0.0)
    Traceback (most recent call last):
    ...
    RuntimeError: trying to differentiate twice a function that was marked with @once_differentiable
    """

    @functools.wraps(fn)
    def wrapper(ctx: Any, *args: Any) -> Any:
        with _NoGrad():
            out: Any = fn(ctx, *args)
        # What the result depends on, where something could differentiate it: tracers of the
        # transforms, Tensors on the tape (the plain eager backward, on raw arrays and Tensors
        # without history, pays nothing).
        inputs = [v for v in tuple(args) + tuple(getattr(ctx, "_saved", ()) or ())
                  if isinstance(v, Tracer) or (isinstance(v, Tensor) and v._node is not None)]
        if not inputs:
            return out
        single = not isinstance(out, tuple)
        res = []
        for o in ((out,) if single else out):
            if o is not None and (isinstance(o, Array) or _is_tensor(o)):
                o = bind(_once_p, o, *inputs)
            res.append(o)
        return res[0] if single else tuple(res)

    return wrapper
