"""``arrayad.jit``: stage a function once into a program of primitive applications, replay it.

NOTE [staging]
--------------
The staging transform is one more interpreter of the core (NOTE [interpreters] in
``_core/_interp.pyx``),
written in Python: ``JitInterpreter.process`` records each primitive applied to its tracers as one
instruction of a ``Program`` and computes the value one level down with ``bind``, as every
interpreter does. So tracing runs the function once on the call's own values (the first call's
result is the tracing's result) and every shape and dtype comes from the values themselves: no
shape rules are needed. Transforms opened inside the jitted function (``jit(grad(f))``,
``jit(vmap(grad(f)))``, ``jit(hessian(f))``) bind their primitives on staging tracers too, so the
forward and the backward pass land in one program.

Called again with the same signature (pytree structure, shapes, dtypes, backend, device, static
arguments), a jitted function does not run ``func``: with raw arrays (or Tensors that need no
gradient) it calls the program's generated Python function, one backend call per line, with no
tracer, level, dispatch or pytree work per operation; with values of outer transforms (tracers,
Tensors that require grad: ``grad(jit(f))``, ``vmap(jit(f))``, ``jvp(jit(f))``) it binds each
instruction's primitive on them, so the outer transforms differentiate or batch the program
itself.

The program is data (``ir.py``, NOTE [program IR]); before replay it goes through the passes of
``passes.py`` (``Program.optimized``): constant folding, identities, common subexpressions,
negations, dead code. ``replay.py`` makes what runs it: the generated replay, which writes
elementwise results into dead buffers (``out=``) of large NumPy arrays and frees dead large arrays
as soon as possible (``plan_memory``), and the program as a primitive; ``fusion.py`` fuses
elementwise groups for a backend's compiler (NOTE [fusion]).
"""

import collections
import contextlib
import inspect
import os
import sys
from collections.abc import Callable
from typing import Any, ParamSpec, Protocol, TypeVar, overload

from .. import config as _config
from .._core import _core
from .._core._core import Array, Interpreter, Primitive, Tensor, Tracer, bind
from .._ops._rules import facts
from .._pytree import _node_of, tree_flatten, tree_unflatten
from ..backends import backend_of, default_backend, get_rng_state
from ..backends._random import same_rng_state
from .ir import Eqn, Lit, Program, Var, check  # noqa: F401
from .ir import is_array as _is_array, value_key as _value_key
from .passes import plan_memory  # noqa: F401
from .replay import (Executable, _ProgramPrimitive, executable,  # noqa: F401
                     compile_replay as _compile, EVALUATING as _EVALUATING)
from . import fusion, lower_dask, lower_numba, lower_tiles, lower_torch  # noqa: F401  (the lowerers: NOTE [fusion])

__all__ = ["jit", "make_program", "Program"]

# (arrayad's own directory: a frame outside it is the user's)
_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# NOTE [captured arrays]
# ----------------------
# ``jit(f)`` means ``f``: an array that ``f`` captures (a closure's or a global's NumPy, torch or
# array-api-strict array, an eager ``arrayad.Tensor``) is read when the program runs, not when it
# was traced. Backend arrays are kept by reference (an in-place write ``a[0] = 5`` is seen); an
# eager Tensor is kept by reference and its ``_value`` read at every call (its updates,
# ``t[0] = 5`` or ``t += 1``, rebind ``_value`` to a new array: NOTE [in-place after use] in the
# core). So the passes must not fold a captured array into a derived constant (``_fold``,
# ``x * ones`` in ``_identities``, the fusers' splats): only the constants the program made itself
# (``zeros_like`` & co. of a traced value, and what is folded from those and literals) are frozen,
# and so are the arrays that arrayad's creation functions make inside from Python data
# (``arange(n)``, ``ones(3)``, ``asarray([0, 2])``: ``note_new_array``), so that a table of
# constants computed from them (``t[:, None] ** arange(m)`` in a least-squares fit) is computed
# once, when the program is optimised, as XLA folds it. Every other array that reaches the staging
# interpreter from outside counts as captured (``asarray(a)`` of an array may hand back the
# captured ``a`` itself, or share its memory). A program is valid for the shapes and dtypes it was
# traced with: each run first checks the captured arrays' (an identity check for a Tensor whose
# value did not change) and a changed one raises ``_Stale``, on which the jitted function drops
# the program and traces again. Under an outer transform (``grad(jit(f))``, NOTE [program
# primitive]) the captured values are inputs of the program primitive after the arguments: the
# tape saves them as the un-jitted function's nodes would, and the rules' programs get them as
# arguments. arrayad operations on captured arrays alone are staged too (NOTE [staging everything]
# in the core), and an alias that a ``grad`` inside made of a captured Tensor (NOTE [in-place
# after use]) is followed to the Tensor (``Tensor._origin``): it cannot change while the function
# runs, since an in-place update of a captured array is refused under jit. What jit cannot see
# stays as jax.jit documents it: Python values (a closure's float is a literal of the program) and
# NumPy's own functions on a captured array, which run once, while tracing.

# NOTE [staged calls]
# -------------------
# A custom rule's (or an ``autograd.Function``'s) call is one instruction whose run calls the
# user's Python function (under ``vmap``, under an eager ``vmap``: ``_Batched`` in
# ``autograd/function.py``): as an opaque instruction of a program, every replay would run that
# Python again, and re-trace the ``while_loop``s in it (a fixed-point layer's ``jit(vmap(grad))``
# ran 69x ``jax.jit``: ``benchmarks/implicit_solver.py``). So where the primitive gives a run
# that computes on tracers like any function (``staged_run(params)``: a ``custom_vjp``'s
# function outside a derivative, whose forward keeps no residuals; a ``custom_jvp``'s; a
# batched call's) and ``jit`` is the outermost transform, the call's run is traced once into a
# program of its own, and the
# instruction becomes a ``_StagedCall``: its run replays that program, its derivative and
# batching rules are the primitive's own (an outer ``grad`` of the jitted function still uses
# the custom rule). Arrays the call captures (a layer's weights in a closure) are read at every
# replay of its program, as in any program (NOTE [captured arrays]). Where the trace fails (a
# random draw, which ``jit`` refuses; a value of an outer transform read from a closure), the
# instruction stays as it was.

class _StagedCall(Primitive):
    """A call of ``prim`` with ``params`` whose run replays ``sub``, its traced program (NOTE
    [staged calls]); the rules are ``prim``'s with ``params``."""

    def __init__(self, prim, params, sub):
        exe = executable(sub.optimized())
        super().__init__(prim.name, lambda xp, *raw: exe.replay(*raw),
                         multiple_results=prim.multiple_results)
        self.node_name = getattr(prim, "node_name", prim.name)
        self.batch_gets_interpreter = prim.batch_gets_interpreter
        if prim.vjp is not None:
            self.vjp = lambda g, ans, *args: prim.vjp(g, ans, *args, **params)
        if prim.jvp is not None:
            self.jvp = lambda tangents, ans, *args: prim.jvp(tangents, ans, *args, **params)
        if prim.batch is not None:
            self.batch = lambda args, dims, **kw: prim.batch(args, dims, **kw, **params)


def _staged_call(prim, vals, params, run):
    """A ``_StagedCall`` of ``prim`` on the raw arrays ``vals``, or None where its run,
    ``run(values) -> outputs``, cannot be traced into a program of its own (NOTE [staged
    calls])."""
    if not vals or not all(_is_array(v) for v in vals):
        return None
    try:
        sub = stage(lambda *v: tuple(run(v)), tuple(vals))
    except Exception:   # (the opaque instruction raises what is the user's to see)
        return None
    if not sub.cacheable:
        return None
    return _StagedCall(prim, params, sub)


class _Stale(RuntimeError):
    """A captured array changed shape, dtype or type since its program was traced."""

    def __init__(self, prog, cap, raw):
        self.prog = prog
        super().__init__(
            f"jit({prog.name}): an array the function captures (a constant of the program: "
            f"{cap.raw_type.__name__} of shape "
            f"{tuple(cap.shape)}, dtype {cap.dtype}) now has shape "
            f"{tuple(getattr(raw, 'shape', ()))}, dtype {getattr(raw, 'dtype', None)}, "
            f"{type(raw).__name__}; the program was traced for the old one. Call the jitted "
            f"function again (it traces anew), or pass the array as an argument.")


class _Captured:
    """A captured constant (NOTE [captured arrays]): ``obj``, an eager Tensor or a backend array,
    and the type, shape and dtype of its raw value when traced."""
    __slots__ = ("obj", "tensor", "raw_type", "shape", "dtype", "last")

    def __init__(self, obj):
        self.obj = obj
        self.tensor = isinstance(obj, Tensor)
        raw = obj._value if self.tensor else obj
        self.raw_type = type(raw)
        self.shape = raw.shape
        self.dtype = raw.dtype
        self.last = raw   # the raw value last checked (a Tensor's: checked again when rebound)

    def raw(self):
        return self.obj._value if self.tensor else self.obj

    def check(self, prog, raw=None):
        """Raise _Stale(prog) if the value now has another type, shape or dtype."""
        if raw is None:
            raw = self.raw()
        if raw is self.last and self.tensor:
            return raw
        if type(raw) is not self.raw_type or raw.shape != self.shape or raw.dtype != self.dtype:
            raise _Stale(prog, self, raw)
        self.last = raw
        return raw


# ---------------------------------------------------------------------------------------------
# The staging transform (NOTE [staging])

class JitTracer(Tracer):
    """A value while ``jit`` traces: ``value`` one level down (a raw array when jit is the
    outermost transform) and ``var``, its variable in the program."""

    def __init__(self, interp, value, var):
        Tracer.__init__(self, interp, value)
        self.var = var

    def __copy__(self):
        return JitTracer(self._interp, self.value, self.var)

    def _replace(self, other):
        # the functional in-place update (x[i] = v, x += 1) rebinds this tracer
        if not isinstance(other, JitTracer) or other._interp is not self._interp:
            raise _core.host().inplace_level_error(self, other)
        self.value = other.value
        self.var = other.var

    def _describe(self):
        return f"JitTracer({self.var.name}:{self.var.type_str()}, {self.var.label})"

    def _concrete_value(self, what):
        # (a staged value has none: the program must hold for every value, NOTE [staging])
        raise self._interp.conversion_error(self, what)


class JitInterpreter(Interpreter):
    """Records the primitives applied to its tracers (NOTE [staging])."""

    name = "jit"

    def __init__(self, fname):
        self.fname = fname
        self.count = 0
        self.eqns = []
        self.consts = {}      # Var -> value
        self.captured = {}    # Var -> _Captured (NOTE [captured arrays])
        self._const_of = {}   # id(value) -> (value, Var): one variable per captured object
        self._made = {}       # id(raw) -> raw: arrays made inside from Python data (not captured)
        self.cacheable = True
        self._enclosing_staging = None   # (NOTE [staging everything] in the core)
        self.folded = {}      # Var -> value: NOTE [the trace's constants]

    def new_var(self, value, label):
        self.count += 1
        return Var(self.count, _core.shape_of(value), _core.dtype_of(value), label)

    def new_input(self, value, label):
        if self.frame is None:   # (where arrays made inside belong: NOTE [everything inside
            self.frame = _core.raw_value(value)   # is arrayad] in the core)
        return JitTracer(self, value, self.new_var(value, label))

    def const(self, value, captured=False):
        """The variable of a constant: ``value`` a raw array or, if ``captured`` (an array from
        outside, read at every call: NOTE [captured arrays]), a backend array or a Tensor."""
        hit = self._const_of.get(id(value))
        if hit is not None and hit[0] is value:
            return hit[1]
        var = self.new_var(value, "constant")
        self.consts[var] = value
        if captured:
            self.captured[var] = _Captured(value)
        self._const_of[id(value)] = (value, var)
        return var

    def _atom(self, a):
        """(value one level down, atom) of one argument of a primitive."""
        if isinstance(a, JitTracer) and a._interp is self:
            return a.value, a.var
        if isinstance(a, Tensor) and not a.requires_grad:
            if a._origin is not None:   # an alias (a grad level's, a view's) of a captured one
                a = a._origin
            var = self.const(a, captured=True)
            # one level down: the raw value when jit is the outermost transform (its tracers
            # hold raw arrays); else the Tensor itself, so that an enclosing jit captures it too
            return (a if _core.interpreters()[0] is not self else a._value), var
        if isinstance(a, Array):
            # a value of an outer transform (or a Tensor that requires grad) captured by the
            # function: right for this call, but not a constant of a cached program
            self.cacheable = False
            return a, self.const(a)
        if _is_array(a):
            return a, self.const(a, captured=self._made.get(id(a)) is not a)
        return a, Lit(a)

    def process(self, prim, args, params):
        vals, atoms = [], []
        numbers = False
        for a in args:
            v, atom = self._atom(a)
            vals.append(v)
            atoms.append(atom)
            if _np_generic is not None and (isinstance(a, _np_generic)
                                            or (type(a) is _ndarray and a.ndim == 0)):
                numbers = True
        if numbers:
            self._numpy_numbers(args, vals, atoms)
        staged_run = getattr(prim, "staged_run", None)
        run = None
        if staged_run is not None and _core.interpreters()[0] is self:
            run = staged_run(params)
        if run is not None:
            st = _core.thread_state()
            staging, st.staging = st.staging, self._enclosing_staging   # (its own trace)
            try:
                staged = _staged_call(prim, vals, params, run)   # (NOTE [staged calls])
            finally:
                st.staging = staging
            if staged is not None:
                prim, params = staged, {}
        f = facts(prim)
        if f.value_shaped is True or (f.value_shaped and f.value_shaped(*vals, **params)):
            raise RuntimeError(
                f"jit({self.fname}): {prim.name} returns an array whose shape depends on the "
                f"values of its input{' (a boolean mask)' if prim.name == 'getitem' else ''}"
                f"{_user_frame()}, and a staged program fixes every shape by the signature. "
                f"Use a fixed-size alternative (arrayad.where(mask, x, 0) to select "
                f"elementwise), or call it outside the jitted function and pass its result in.")
        st = _core.thread_state()
        staging, st.staging = st.staging, self._enclosing_staging   # (one level down)
        try:
            out = bind(prim, *vals, **params)
        finally:
            st.staging = staging
        if f.shape_only and not isinstance(out, Array):
            # zeros_like & co. depend on their argument's shape and dtype only, which the
            # program fixes: the result is a constant (folded further by the passes)
            return JitTracer(self, out, self.const(out))
        if prim.multiple_results:
            outs = tuple(self.new_var(o, prim.name) for o in out)
            self.eqns.append(Eqn(prim, tuple(atoms), dict(params), outs))
            if self._of_constants(atoms, vals, f) and not any(isinstance(o, Array) for o in out):
                self.folded.update(zip(outs, out))
            return tuple(JitTracer(self, o, v) for o, v in zip(out, outs))
        var = self.new_var(out, prim.name)
        self.eqns.append(Eqn(prim, tuple(atoms), dict(params), (var,)))
        if self._of_constants(atoms, vals, f) and not isinstance(out, Array):
            self.folded[var] = out
        return JitTracer(self, out, var)

    def _of_constants(self, atoms, vals, f):
        """Whether an instruction on ``atoms`` (values ``vals``) is one the fold pass computes
        (NOTE [the trace's constants]): no side effect, every argument a literal, a constant
        the program made or the result of such an instruction, all of them raw values."""
        if f.side_effects:
            return False
        for a, v in zip(atoms, vals):
            if isinstance(a, Var) and not (
                    a in self.folded or (a in self.consts and a not in self.captured)):
                return False
            if isinstance(v, Array):
                return False
        return True

    def _numpy_numbers(self, args, vals, atoms):
        """NOTE [NumPy numbers in a program]: a NumPy scalar (``np.log(2 * np.pi)`` is a
        ``np.float64``) or a 0-d NumPy array beside another backend's array is a Python number
        to that backend (the core's ``_call_impl`` converts it at every eager call, as torch
        takes it). The replay calls the backend's function directly, so the program must hold
        the number itself: a literal (weak, as a Python float is). A NumPy scalar cannot change,
        so the literal is exact; a 0-d NumPy array can be written into later (NOTE [captured
        arrays]), so a program that reads one as a number is not cached (traced at each call).
        With NumPy arrays only, NumPy's own rules apply and nothing changes."""
        backend = None
        for a, v in zip(args, vals):
            if _is_array(v) and not (isinstance(a, _np_generic)
                                     or (type(a) is _ndarray and a.ndim == 0)):
                backend = backend_of(_core.raw_value(v))
                break
        if backend is None or backend.name == "numpy":
            return
        for k, a in enumerate(args):
            if isinstance(a, _np_generic) or (type(a) is _ndarray and a.ndim == 0):
                if type(a) is _ndarray:
                    self.cacheable = False
                vals[k] = a.item()
                atoms[k] = Lit(vals[k])

    def lift(self, value):
        v, atom = self._atom(value)
        return JitTracer(self, v, atom)

    def note_new_array(self, raw):
        self._made[id(raw)] = raw   # (kept alive: the id stays its own while tracing)

    @contextlib.contextmanager
    def staging_everything(self):
        """While the traced function runs, operations without a traced argument are staged on
        this interpreter too (NOTE [staging everything] in the core)."""
        st = _core.thread_state()
        self._enclosing_staging = st.staging
        st.staging = self
        try:
            yield
        finally:
            st.staging = self._enclosing_staging

    def output(self, x):
        """(atom, value one level down) of one output leaf of the traced function."""
        if isinstance(x, JitTracer) and x._interp is self:
            return x.var, x.value
        if _is_array(x):
            v, atom = self._atom(x)
            return atom, v
        return Lit(x), x

    def random_error(self):
        """What the random functions raise inside a jitted function."""
        return RuntimeError(
            f"jit({self.fname}): the function draws random numbers{_user_frame()}. Under jit they "
            f"would be drawn once, while tracing, and the same numbers replayed on every call. "
            f"Draw them outside the jitted function and pass them as an argument.")

    def random_per_batch_element(self):
        raise self.random_error()   # (drawn once while tracing, then replayed)

    def conversion_error(self, tracer, what):
        var = tracer.var
        where = _user_frame()
        what_value = ("the function's " + var.label if var.label.startswith("argument")
                      else f"the result of {var.label}" if var.label != "constant"
                      else "a constant")
        call = "bool() (an if/while on an array)" if what == "bool" else f"{what}()"
        return RuntimeError(
            f"jit({self.fname}): {call} of a traced value: {var.name}:{var.type_str()}, "
            f"{what_value}{where}. While jit traces the function, array values are not known "
            f"(the program must work for every value of this shape and dtype). Fixes: pass the "
            f"argument as static (jit(f, static_argnums=(i,)) or static_argnames=('name',)), "
            f"select elementwise with arrayad.where(cond, a, b) instead of Python control "
            f"flow, branch with arrayad.func.cond or switch, loop on a value (while err > tol) "
            f"with arrayad.func.while_loop (or fori_loop, scan), keep the value an array, or "
            f"call the function without jit.")


def _user_frame():
    """', at file:line' of the innermost frame outside arrayad (where the user's code is)."""
    f = sys._getframe(1)
    while f is not None:
        fn = os.path.abspath(f.f_code.co_filename)
        if not fn.startswith(_PKG_DIR + os.sep):
            cell = _notebook_cell(f.f_code.co_filename)
            if cell:
                return f", at {cell}, line {f.f_lineno}"
            return f", at {fn}:{f.f_lineno}"
        f = f.f_back
    return ""


def _notebook_cell(filename):
    """'Cell In[3]' where ``filename`` is a cell of the running IPython or Jupyter session (its
    file is a temporary one the user never sees; IPython's tracebacks name the cell too)."""
    if "IPython" not in sys.modules:
        return None
    shell = sys.modules["IPython"].get_ipython()
    name = getattr(getattr(shell, "compile", None), "format_code_name", lambda _: None)(filename)
    return " ".join(name) if name else None

# ---------------------------------------------------------------------------------------------
# jit

class _Signature:
    """What a call's arguments are: the dynamic leaves, their spec, the static parts, the key."""
    __slots__ = ("leaves", "spec", "key", "mode", "static")


def _leaf_key(x):
    """(array type, shape, dtype[, device]) of an array argument (the type of the raw array
    under a Tensor or tracer names the backend; the shape is the tracer's own)."""
    raw = _core.raw_value(x)
    t = type(raw)
    # (the backend's own dtype: NumPy's hashes in C, a cheaper lookup than arrayad's DType)
    if t is _ndarray:   # (one device)
        return (t, _core.shape_of(x), raw.dtype)
    return (t, _core.shape_of(x), raw.dtype, str(_core.backend_of(raw).device_of(raw)))


_positional_specs = {}


def _positional_spec(n):
    """The spec of ``(args, {})`` for ``n`` positional array arguments."""
    spec = _positional_specs.get(n)
    if spec is None:
        spec = _positional_specs[n] = tree_flatten((tuple(range(n)), {}))[1]
    return spec


def _check_options(static_argnums, static_argnames, cache_size):
    """``jit``'s options as tuples, or the error that names the one that is wrong and the fix."""
    if isinstance(static_argnums, int) and not isinstance(static_argnums, bool):
        static_argnums = (static_argnums,)
    try:
        nums = tuple(static_argnums)
    except TypeError:
        nums = None
    if nums is None or any(isinstance(i, bool) or not isinstance(i, int) for i in nums):
        raise TypeError(
            f"jit: static_argnums must be an int or a tuple of ints (positions of arguments), "
            f"got {static_argnums!r}. Pass e.g. static_argnums=1 or static_argnums=(0, 2).")
    if isinstance(static_argnames, str):
        static_argnames = (static_argnames,)
    try:
        names = tuple(static_argnames)
    except TypeError:
        names = None
    if names is None or any(not isinstance(n, str) for n in names):
        raise TypeError(
            f"jit: static_argnames must be a str or a tuple of str (names of parameters), got "
            f"{static_argnames!r}. Pass e.g. static_argnames='mode' or "
            f"static_argnames=('mode', 'n').")
    if isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size < 0:
        raise (ValueError if isinstance(cache_size, int) and not isinstance(cache_size, bool)
               else TypeError)(
            f"jit: cache_size must be a non-negative int (how many programs to keep; 0 keeps "
            f"none and traces on every call), got {cache_size!r}. Pass e.g. cache_size=64 "
            f"(the default).")
    return nums, names, cache_size


def _check_static(func, sig, nums, names):
    """Refuse, when jit is applied, static arguments that ``func``'s signature cannot have."""
    fname = getattr(func, "__name__", "function")
    params = list(sig.parameters.values())
    kinds = inspect.Parameter
    positional = [p for p in params if p.kind in (kinds.POSITIONAL_ONLY,
                                                  kinds.POSITIONAL_OR_KEYWORD)]
    var_pos = any(p.kind == kinds.VAR_POSITIONAL for p in params)
    var_kw = any(p.kind == kinds.VAR_KEYWORD for p in params)
    if not var_pos:
        n = len(positional)
        for i in nums:
            if not -n <= i < n:
                raise ValueError(
                    f"jit({fname}): static_argnums entry {i} is out of range: {fname} takes "
                    f"{n} positional argument{'s' if n != 1 else ''} "
                    f"({', '.join(p.name for p in positional) or 'none'}). Pass positions "
                    f"between {-n} and {n - 1}, or static_argnames for keyword arguments.")
    by_name = {p.name: p for p in params}
    for nm in names:
        p = by_name.get(nm)
        if p is None and not var_kw:
            raise ValueError(
                f"jit({fname}): static_argnames entry {nm!r} is not a parameter of {fname} "
                f"(its parameters: {', '.join(by_name) or 'none'}). Pass the name of a "
                f"parameter, or static_argnums for a position.")
        if p is not None and p.kind in (kinds.POSITIONAL_ONLY, kinds.VAR_POSITIONAL,
                                        kinds.VAR_KEYWORD):
            raise ValueError(
                f"jit({fname}): static_argnames entry {nm!r} names a parameter that cannot be "
                f"passed by keyword ({p.kind.description}). Use static_argnums with its "
                f"position instead.")


class _Jitted:
    """The function ``jit`` returns (see ``jit``)."""

    def __init__(self, func, static_argnums=(), static_argnames=(), cache_size=64):
        static_argnums, static_argnames, cache_size = _check_options(
            static_argnums, static_argnames, cache_size)
        try:
            sig = inspect.signature(func)
        except (TypeError, ValueError):
            sig = None
        if sig is not None:
            _check_static(func, sig, static_argnums, static_argnames)
        self.func = func
        self.static_argnums = static_argnums
        self.static_argnames = static_argnames
        self.cache_size = cache_size
        self._warned = False
        self._cache = collections.OrderedDict()   # full signature -> program (LRU)
        self._fast = collections.OrderedDict()    # (shape, dtype) of NumPy args -> program
        # (the fast path takes positional calls; static_argnums are keyed there by value)
        self._fast_ok = not self.static_argnames
        self._static_at = {}   # number of positional arguments -> their static positions
        self.__name__ = getattr(func, "__name__", "function")
        self.__qualname__ = getattr(func, "__qualname__", self.__name__)
        self.__doc__ = getattr(func, "__doc__", None)
        self.__wrapped__ = func
        self._params = [] if sig is None else list(sig.parameters)
        self.traces = 0   # how many times func was traced (a changed signature traces again)

    def __repr__(self):
        return f"<arrayad.jit of {self.__qualname__}>"

    def __get__(self, obj, objtype=None):   # (a method: bind like a function)
        if obj is None:
            return self
        import functools
        return functools.partial(self, obj)

    # -- the call
    def __call__(self, *args, **kwargs):
        try:
            return self._run(args, kwargs)
        except _Stale as e:   # (NOTE [captured arrays]: a captured array changed shape or dtype)
            if not self._drop(e.prog):
                # (the program of a staged call inside one of ours, NOTE [staged calls]: which
                # of ours holds it is not known, so every one is traced anew)
                self._cache.clear()
                self._fast.clear()
        return self._run(args, kwargs)

    def _drop(self, prog):
        """Drop ``prog`` from the caches; whether it was there."""
        found = False
        for cache in (self._cache, self._fast):
            for k, p in list(cache.items()):   # (a copy: other threads may change the cache)
                if p is prog:
                    cache.pop(k, None)
                    found = True
        return found

    def _run(self, args, kwargs):
        # fast path: positional raw NumPy arrays only (the optimisation-loop case)
        # (and static arguments, keyed by value: the `f(x, n)` of a size given as a number)
        if self._fast_ok and not kwargs and not _EVALUATING[0]:
            static = self._static_positions(len(args)) if self.static_argnums else ()
            key = [_compile_key()]   # (NOTE [configuration] in arrayad/config.py)
            for i, a in enumerate(args):
                if static and i in static:
                    k = _value_key(a)
                    if k is None:
                        break
                    key.append(k)
                elif type(a) is not _ndarray:
                    break
                else:
                    key.append((a.shape, a.dtype))
            else:
                key = tuple(key)
                prog = self._fast.get(key)
                if prog is not None:
                    try:
                        self._fast.move_to_end(key)
                    except KeyError:   # (evicted by another thread meanwhile: still valid)
                        pass
                    if static:
                        return prog.replay(*[a for i, a in enumerate(args) if i not in static])
                    return prog.replay(*args)
        return self._call(args, kwargs)

    def _static_positions(self, nargs):
        """The static positions of a call with ``nargs`` positional arguments (a frozenset), or
        None where one of static_argnums is out of range (the full path says so)."""
        at = self._static_at.get(nargs, False)
        if at is False:
            at = (frozenset(i % nargs for i in self.static_argnums)
                  if all(-nargs <= i < nargs for i in self.static_argnums) else None)
            self._static_at[nargs] = at
        return at

    def _signature(self, args, kwargs):
        if self._fast_ok and not self.static_argnums and not kwargs:   # (positional arrays
            # only: no pytree work)
            keys, mode = [], "raw"
            for a in args:
                if isinstance(a, Array):
                    if isinstance(a, Tensor):
                        if a.requires_grad and _core.is_grad_enabled():
                            mode = "bind"
                        elif mode == "raw":
                            mode = "tensor"
                    else:
                        mode = "bind"
                elif not _is_array(a) or _node_of(a) is not None:
                    break   # (a registered pytree node may have a shape and a dtype too)
                keys.append(_leaf_key(a))
            else:
                sig = _Signature()
                sig.leaves = args
                sig.spec = _positional_spec(len(args))
                sig.static = ()
                sig.mode = mode
                # (no TreeSpec to hash: a cheaper lookup; the compile settings last)
                sig.key = ("args", tuple(keys), _compile_key())
                return sig
        nargs = len(args)
        static_nums = {i % nargs for i in self.static_argnums if -nargs <= i < nargs}
        for i in self.static_argnums:
            if not -nargs <= i < nargs:
                raise ValueError(
                    f"jit({self.__name__}): static_argnums entry {i} is out of range for a call "
                    f"with {nargs} positional argument{'s' if nargs != 1 else ''}. Pass the "
                    f"static argument positionally, or leave {i} out of static_argnums.")
        dyn_args = tuple(a for i, a in enumerate(args) if i not in static_nums)
        dyn_kwargs = {k: v for k, v in kwargs.items() if k not in self.static_argnames}
        static = tuple((i, args[i]) for i in sorted(static_nums)) + tuple(
            sorted((k, v) for k, v in kwargs.items() if k in self.static_argnames))
        for where, v in static:
            try:
                hash(v)
            except TypeError:
                raise TypeError(
                    f"jit({self.__name__}): static argument {where!r} must be hashable (it is part "
                    f"of the cache key), got {type(v).__name__}. Pass a tuple instead of a list, "
                    f"or pass the value as an array (not static).") from None
        leaves, spec = tree_flatten((dyn_args, dyn_kwargs))
        lkeys, dyn = [], []
        mode = "raw"
        for x in leaves:
            if _is_array(x):
                lkeys.append(_leaf_key(x))
                dyn.append(x)
                if isinstance(x, Tracer) or (isinstance(x, Tensor) and x.requires_grad
                                             and _core.is_grad_enabled()):
                    mode = "bind"
                elif isinstance(x, Tensor) and mode == "raw":
                    mode = "tensor"
            else:
                # Python values are part of the key: by type and bits (0.0 and -0.0 differ)
                lkeys.append(("static", _value_key(x)))
        sig = _Signature()
        sig.leaves = leaves
        sig.spec = spec
        sig.static = static
        sig.mode = mode
        try:
            if any(k[1] is None for k in lkeys if k[0] == "static"):
                raise TypeError
            sig.key = (spec, tuple(lkeys), tuple((w, _value_key(v)) for w, v in static),
                       _compile_key())
            hash(sig.key)
        except TypeError:
            raise TypeError(f"jit({self.__name__}): an argument that is no array must be hashable "
                            f"(it is part of the cache key)") from None
        return sig

    def _call(self, args, kwargs):
        sig = self._signature(args, kwargs)
        exe = self._cache.get(sig.key)
        if exe is None:
            exe, out_values = self._trace(args, kwargs, sig)
            if exe.prog.cacheable:
                self._store(self._cache, sig.key, exe)
                static = (self._static_positions(len(args)) if self.static_argnums
                          else frozenset())
                if self._fast_ok and not kwargs and sig.mode == "raw" and all(
                        type(a) is _ndarray for i, a in enumerate(args) if i not in static):
                    self._store(self._fast, (sig.key[-1],) + tuple(
                        _value_key(a) if i in static else (a.shape, a.dtype)
                        for i, a in enumerate(args)), exe)
            return self._native(tree_unflatten(out_values, exe.prog.out_spec), sig.mode)
        try:
            self._cache.move_to_end(sig.key)
        except KeyError:   # (evicted by another thread meanwhile: the program is still valid)
            pass
        dyn = sig.leaves if sig.key[0] == "args" else [x for x in sig.leaves if _is_array(x)]
        if sig.mode == "bind":
            prim = exe.as_primitive()
            if prim is None:
                return exe.evaluate(dyn)
            return tree_unflatten(list(bind(prim, *dyn, *exe.captured_values())),
                                  exe.prog.out_spec)
        if sig.mode == "tensor":
            dyn = [x._value if isinstance(x, Tensor) else x for x in dyn]
        if _EVALUATING[0]:   # (NOTE [nan detection] in arrayad/debug.py: each operation seen)
            return self._native(exe.evaluate(dyn), sig.mode)
        out = exe.replay(*dyn)
        return self._native(out, sig.mode)

    def _store(self, cache, key, prog):
        cache[key] = prog
        while len(cache) > self.cache_size:
            cache.popitem(last=False)

    @staticmethod
    def _native(out, mode):
        if mode != "tensor":
            return out
        return tree_unflatten([Tensor(x) if _is_array(x) and not isinstance(x, Array) else x
                               for x in tree_flatten(out)[0]], tree_flatten(out)[1])

    # -- tracing
    def _labels(self, args, kwargs, sig):
        """A label per dynamic leaf: 'argument x', 'argument x[1]'..."""
        labels = []
        nargs = len(args)
        static_nums = {i % nargs for i in self.static_argnums if -nargs <= i < nargs}
        for i, a in enumerate(args):
            if i in static_nums:
                continue
            nm = self._params[i] if i < len(self._params) else f"args[{i}]"
            n = len(tree_flatten(a)[0])
            labels += [f"argument {nm}" if n == 1 else f"argument {nm} (leaf {j})"
                       for j in range(n)]
        for k, v in kwargs.items():
            if k in self.static_argnames:
                continue
            n = len(tree_flatten(v)[0])
            labels += [f"argument {k}" if n == 1 else f"argument {k} (leaf {j})" for j in range(n)]
        return labels

    def _trace(self, args, kwargs, sig):
        """Run ``func`` under a staging interpreter: (the executable of the optimized program,
        this call's outputs)."""
        prog, values, folded = self._stage(args, kwargs, sig)
        exe = executable(prog.optimized(folded))
        # (an output that is a constant of the program, the trace's own value of it, is copied
        # as the replay copies it: the caller may write into it, and the program reuses it)
        copy = exe.prog.backend.xp.asarray
        return exe, [copy(v, copy=True) if isinstance(a, Var) and a in exe.prog.consts
                     and not isinstance(v, Array) else v for a, v in zip(exe.prog.outs, values)]

    def _stage(self, args, kwargs, sig):
        """Run ``func`` under a staging interpreter: (the program as traced, before the passes;
        this call's outputs; the values of its instructions of constants, for the fold pass:
        NOTE [the trace's constants])."""
        labels = self._labels(args, kwargs, sig)
        nargs = len(args)
        static_nums = {i % nargs for i in self.static_argnums if -nargs <= i < nargs}
        rng_before = get_rng_state()
        backend = None
        with JitInterpreter(self.__name__) as interp:
            in_vars, new_leaves = [], []
            for x, label in zip(sig.leaves, labels):
                if not _is_array(x):
                    new_leaves.append(x)
                    continue
                if isinstance(x, Tensor) and not (x.requires_grad and _core.is_grad_enabled()):
                    x = x._value
                if backend is None:
                    backend = backend_of(x)
                t = interp.new_input(x, label)
                in_vars.append(t.var)
                new_leaves.append(t)
            dyn_args, dyn_kwargs = tree_unflatten(new_leaves, sig.spec)
            dyn_iter = iter(dyn_args)
            call_args = [args[i] if i in static_nums else next(dyn_iter) for i in range(nargs)]
            call_kwargs = dict(dyn_kwargs)
            call_kwargs.update({k: v for k, v in kwargs.items() if k in self.static_argnames})
            self.traces += 1
            with interp.staging_everything():
                out = self.func(*call_args, **call_kwargs)
            out_leaves, out_spec = tree_flatten(out)
            outs, values = [], []
            for o in out_leaves:
                atom, v = interp.output(o)
                outs.append(atom)
                values.append(v)
        if not _same_state(get_rng_state(), rng_before):   # (a backend's generator used directly)
            raise interp.random_error()
        prog = Program(self.__name__, in_vars, dict(interp.consts), list(interp.eqns), outs,
                       sig.spec, out_spec, backend or default_backend(), interp.cacheable,
                       dict(interp.captured))
        return prog, values, interp.folded

    def lower(self, *args, **kwargs):
        """The program ``func`` stages to for these arguments (after the passes; its
        ``unoptimized`` attribute holds the one before)."""
        return self._executable(args, kwargs).prog

    def explain(self, *args, **kwargs):
        """What runs when ``func`` is called with these arguments (NOTE [explained lowering]):
        printed, one line per instruction of the replay, the tier that computes it (the tile
        machine, NumPy's calls on tiles, a compiler's kernel, one backend call) and, for an
        elementwise instruction left to one backend call, why. Traces ``func`` if it has no
        program for them yet."""
        return self._executable(args, kwargs).explain()

    def _executable(self, args, kwargs):
        sig = self._signature(args, kwargs)
        exe = self._cache.get(sig.key)
        if exe is None:
            exe, _ = self._trace(args, kwargs, sig)
        return exe


_same_state = same_rng_state   # (whether two random states are equal)
_compile_key = _config._compile_key   # (the compile settings in force: part of every cache key)


try:
    import numpy as _np
    _ndarray, _np_generic = _np.ndarray, _np.generic
except ImportError:   # pragma: no cover
    _ndarray = _np_generic = None


_P = ParamSpec("_P")
_R = TypeVar("_R", covariant=True)


class Jitted(Protocol[_P, _R]):
    """What a type checker sees of ``jit(f)`` (a ``_Jitted``): ``f``'s parameters and result
    (NumPy in, NumPy out, as ``f``), the methods ``lower`` and ``explain``, the count of
    ``traces``, and a method's binding (``__get__``: its signature is then not followed)."""

    traces: int

    def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R: ...
    def __get__(self, obj: Any, objtype: Any = None) -> Any: ...
    def lower(self, *args: _P.args, **kwargs: _P.kwargs) -> Program: ...
    def explain(self, *args: _P.args, **kwargs: _P.kwargs) -> Any: ...


_Argnums = int | tuple[int, ...]
_Argnames = str | tuple[str, ...]


@overload
def jit(func: Callable[_P, _R], *, static_argnums: _Argnums = (),
        static_argnames: _Argnames = (), cache_size: int = 64) -> Jitted[_P, _R]: ...
@overload
def jit(func: None = None, *, static_argnums: _Argnums = (), static_argnames: _Argnames = (),
        cache_size: int = 64) -> Callable[[Callable[_P, _R]], Jitted[_P, _R]]: ...
def jit(func=None, *, static_argnums=(), static_argnames=(), cache_size=64):
    """Stage ``func`` into a program of backend calls on its first call, replay it after.

    The first call with a given signature (pytree structure, shapes, dtypes, backend and device
    of the array arguments; the values of static arguments and of Python scalars) runs ``func``
    under a staging transform that records every primitive into a program; the program is
    optimised (constant folding, common subexpressions, dead code) and compiled to one Python
    function calling the backend directly. Later calls with that signature run it without
    calling ``func``: side effects of ``func`` (prints, appends) happen while tracing only. A
    new signature traces again; the last ``cache_size`` programs are kept (least recently used
    dropped). It saves the per-operation overhead of small arrays; the backend still does the
    arithmetic (no fusion, unlike ``jax.jit``).

    It composes: ``jit(grad(f))`` stages forward and backward pass into one program;
    ``grad(jit(f))``, ``vmap(jit(f))``, ``jvp(jit(f))`` bind the program's primitives on the
    outer transform's values. ``jit(f).lower(*args)`` returns the program (it prints one line
    per instruction). Usable as a decorator, with or without arguments.

    Parameters
    ----------
    func : callable, optional
        The function, of arrays (or pytrees of arrays) and Python values. Its Python control
        flow may depend on shapes and static arguments, not on array values. Omitted:
        ``jit(static_argnums=...)`` returns a decorator.
    static_argnums : int or tuple of int, optional
        Positional arguments passed as they are (hashable; part of the cache key), e.g. a flag
        that Python control flow depends on.
    static_argnames : str or tuple of str, optional
        The same, for keyword arguments.
    cache_size : int, optional
        How many programs (signatures) to keep, 64 by default; 0 keeps none.

    Returns
    -------
    callable
        The jitted function: same arguments and results as ``func`` (NumPy in, NumPy out),
        with a ``lower(*args)`` method returning the program for those arguments. Without
        ``func``, a decorator.

    Arrays are read when the program runs: the arguments, and the arrays ``func`` captures
    (NumPy, torch or array-api-strict arrays written in place, Tensors updated by ``t[i] = v``
    or ``t += v``). Python values that ``func`` reads from a closure or a global are not: as in
    ``jax.jit`` they are constants of the program, fixed when it was traced; pass them as
    arguments (or static arguments) to change them between calls.

    Raises
    ------
    TypeError
        If ``func`` is not callable, or an option has the wrong type (``cache_size`` not an
        int, ``static_argnums`` not ints, ``static_argnames`` not strings); when called, if a
        static argument is not hashable.
    ValueError
        When jit is applied: if ``cache_size`` is negative, a ``static_argnums`` entry is not a
        position of ``func``'s parameters or a ``static_argnames`` entry not the name of one
        that can be passed by keyword; when called, if a ``static_argnums`` entry is out of
        range for a function taking ``*args``.
    RuntimeError
        While tracing: if ``func`` branches on an array value (``if x > 0``: use ``ad.where``,
        or make the argument static), or converts one to a Python number.

    Examples
    --------
    ``func`` runs on the first call only; later calls replay the program:

    >>> calls = []
    >>> @ad.jit
    ... def f(x):
    ...     calls.append(1)
    ...     return ad.sum(x ** 2)
    >>> x = np.array([1.0, 2.0, 3.0])
    >>> f(x), f(x), len(calls)
    (array(14.), array(14.), 1)

    Its gradient, ``2 x``, staged as one program too:

    >>> ad.jit(ad.func.grad(f))(x)
    array([2., 4., 6.])

    A static argument selects the program:

    >>> scale = ad.jit(lambda x, double: x * 2 if double else x, static_argnums=1)
    >>> scale(x, True)
    array([2., 4., 6.])
    """
    _check_options(static_argnums, static_argnames, cache_size)   # (now, not at the first call)
    if func is None:
        return lambda f: jit(f, static_argnums=static_argnums, static_argnames=static_argnames,
                             cache_size=cache_size)
    if not callable(func):
        raise TypeError(f"jit: expected a function, got {type(func).__name__}. Pass the "
                        f"function itself (jit(f)), or use jit(...) as a decorator.")
    return _Jitted(func, static_argnums, static_argnames, cache_size)


def stage(func, args):
    """The program of ``func(*args)`` as traced, before the passes and without an executable
    (what analyses of the program read: ``arrayad/_sparsity``)."""
    j = _Jitted(func)
    return j._stage(args, {}, j._signature(args, {}))[0]


def make_program(func, static_argnums=(), static_argnames=()):
    """``make_program(f)(*args)``: the program ``jit(f)`` stages for these arguments (printable,
    optimised; ``.unoptimized`` is the program before the passes)."""
    j = _Jitted(func, static_argnums, static_argnames)

    def lower(*args, **kwargs):
        return j.lower(*args, **kwargs)

    return lower
