"""``arrayad.jit``: stage a function once into a program of primitive applications, replay it.

NOTE [staging]
--------------
The staging transform is one more interpreter of the core (NOTE [interpreters] in ``_core/_interp.pyx``),
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

Before replay the program goes through the passes below (``Program.optimized``): constant
folding, common subexpressions, dead code; the generated replay then writes elementwise results
into dead buffers (``out=``) of large NumPy arrays and frees dead large arrays as soon as possible.
"""

import collections
import contextlib
import inspect
import os
import struct
import sys
import warnings

from ._core import _core
from ._core._core import Array, Interpreter, Tensor, Tracer, bind, fix_scalar
from ._pytree import tree_flatten, tree_unflatten
from .backends import backend_of, default_backend, get_rng_state

__all__ = ["jit", "make_program", "Program"]

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))


# ---------------------------------------------------------------------------------------------
# The program: variables, literals, instructions

class Var:
    """A value of the program: an input, a constant or the result of one instruction."""
    __slots__ = ("n", "shape", "dtype", "label")

    def __init__(self, n, shape, dtype, label=None):
        self.n = n
        self.shape = shape
        self.dtype = dtype
        self.label = label   # what the value is, for error messages ("argument x", "sin")

    @property
    def name(self):
        return f"v{self.n}"

    def type_str(self):
        dt = getattr(self.dtype, "name", str(self.dtype))
        return f"{dt}[{','.join(str(s) for s in self.shape)}]"

    def __repr__(self):
        return f"{self.name}:{self.type_str()}"


class Lit:
    """A Python value (scalar, None, tuple...) given to a primitive as it is."""
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def key(self):
        return ("lit", _value_key(self.value))

    def __repr__(self):
        return repr(self.value)


def _value_key(v):
    """A hashable key for a Python value (a literal, a parameter, a static argument) that tells
    apart the values that compute differently although they compare equal: 2, 2.0 and True (they
    give different dtypes: the type is part of the key), 0.0 and -0.0 (1 / x is inf or -inf),
    NaNs (by their bits, so that one NaN is one key although nan != nan). None where ``v`` is
    not hashable."""
    t = type(v)
    if isinstance(v, float):   # (NumPy's float64 too)
        return (t, struct.pack("<d", v))
    if isinstance(v, complex):
        return (t, struct.pack("<dd", v.real, v.imag))
    if isinstance(v, (tuple, list)):
        ks = tuple(_value_key(x) for x in v)
        return None if any(k is None for k in ks) else (t, ks)
    if _np is not None and isinstance(v, _np.generic):   # (np.float32(-0.0): its own bytes)
        return (t, v.tobytes())
    try:
        hash(v)
    except TypeError:
        return None
    return (t, v)


class Eqn:
    """One instruction: ``outs = prim(*ins, **params)``."""
    __slots__ = ("prim", "ins", "params", "outs")

    def __init__(self, prim, ins, params, outs):
        self.prim = prim
        self.ins = ins          # tuple of Var / Lit
        self.params = params    # dict
        self.outs = outs        # tuple of Var (one unless prim.multiple_results)

    def __str__(self):
        lhs = ", ".join(f"{v.name}:{v.type_str()}" for v in self.outs)
        args = [a.name if isinstance(a, Var) else repr(a) for a in self.ins]
        args += [f"{k}={_short(v)}" for k, v in self.params.items()]
        return f"{lhs} = {self.prim.name}({', '.join(args)})"


def _short(v):
    r = repr(v)
    return r if len(r) <= 40 else r[:37] + "..."


class Program:
    """A staged function: typed inputs, constants, a flat list of instructions, outputs.

    ``str(program)`` prints one line per instruction; ``program.optimized()`` is the program
    after the passes; ``program(*args)`` runs it on raw arrays of its signature."""

    def __init__(self, name, in_vars, consts, eqns, outs, in_spec, out_spec, backend,
                 cacheable=True, captured=None):
        self.name = name
        self.in_vars = in_vars      # list of Var, one per dynamic input leaf
        self.consts = consts        # Var -> value (for a captured one: the array or Tensor)
        # NOTE [captured arrays]: the constants read anew at every call, Var -> _Captured
        self.captured = {} if captured is None else captured
        self.eqns = eqns            # list of Eqn
        self.outs = outs            # list of Var / Lit, one per output leaf
        self.in_spec = in_spec      # spec of the dynamic leaves (positional args, kwargs)
        self.out_spec = out_spec
        self.backend = backend
        self.cacheable = cacheable  # False: captured a value of an outer transform
        self.unoptimized = None     # the program before the passes (set by optimized())
        self._replay = None         # generated: backend calls on raw arrays
        self._bound = None          # generated: bind() of each primitive (outer transforms)
        self.fused = None           # the program the replay runs, when a fuser applied
        self._primitive = None      # NOTE [program primitive]
        self.root = self            # (the cached program this one was derived from, for _Stale)

    # -- printing
    def __str__(self):
        ins = ", ".join(f"{v.name}:{v.type_str()}" for v in self.in_vars)
        lines = [f"program {self.name}({ins}) {{"]
        for v, c in self.consts.items():
            lines.append(f"  {v.name}:{v.type_str()} = const {_short(_core.raw_value(c))}"
                         if _is_array(c) else f"  {v.name} = const {_short(c)}")
        lines += ["  " + str(e) for e in self.eqns]
        outs = ", ".join(a.name if isinstance(a, Var) else repr(a) for a in self.outs)
        lines.append(f"  return {outs}")
        lines.append("}")
        return "\n".join(lines)

    __repr__ = __str__

    def primitive_names(self):
        return [e.prim.name for e in self.eqns]

    # -- the passes
    def optimized(self):
        """A new program after constant folding, common subexpressions and dead code."""
        prog = _dce(_negations(_cse(_identities(_fold(self)))))
        prog.unoptimized = self
        return prog

    # -- running
    def __call__(self, *leaves):
        if self._replay is None:
            self._replay = _compile(self)
        return self._replay(*leaves)

    def as_primitive(self):
        """The program as one primitive (NOTE [program primitive]), or None where it cannot be
        (outputs that are no arrays, a program not cached)."""
        if self._primitive is None:
            ok = (self.cacheable and self.outs and self.in_vars
                  and all(isinstance(a, Var) for a in self.outs))
            self._primitive = _ProgramPrimitive(self) if ok else False
        return self._primitive or None

    def evaluate(self, leaves):
        """Bind each instruction's primitive on ``leaves`` (values of outer transforms, Tensors
        that require grad...): the outer transforms see, differentiate or batch the program.
        Returns the outputs in their structure."""
        if self._bound is None:
            self._bound = _compile(self, bound=True)
        return self._bound(*leaves, *self.captured_values())

    def captured_values(self):
        """The captured constants as they are now (NOTE [captured arrays]): the Tensor objects
        themselves (an outer transform then treats them as the un-jitted function would), the
        backend arrays; raises _Stale if one changed shape, dtype or type since tracing."""
        out = []
        for cap in self.captured.values():
            cap.check(self.root)
            out.append(cap.obj)
        return out


# NOTE [captured arrays]
# ----------------------
# ``jit(f)`` means ``f``: an array that ``f`` captures (a closure's or a global's NumPy, torch or
# array-api-strict array, an eager ``arrayad.Tensor``) is read when the program runs, not when it
# was traced. Backend arrays are kept by reference (an in-place write ``a[0] = 5`` is seen); an
# eager Tensor is kept by reference and its ``_value`` read at every call (its updates,
# ``t[0] = 5`` or ``t += 1``, rebind ``_value`` to a new array: NOTE [in-place after use] in the
# core). So the passes must not fold a captured array into a derived constant (``_fold``,
# ``x * ones`` in ``_identities``, the fusers' splats): only the constants the program made
# itself (``zeros_like`` & co. of a traced value, and what is folded from those and literals)
# are frozen. Every array that reaches the staging interpreter from outside counts as captured,
# also one made inside by ``ones(3)`` (``asarray(a)`` may hand back the captured ``a`` itself:
# the two cannot be told apart). A program is valid for the shapes and dtypes it was traced
# with: each run first checks the captured arrays' (an identity check for a Tensor whose value
# did not change) and a changed one raises ``_Stale``, on which the jitted function drops the
# program and traces again. Under an outer transform (``grad(jit(f))``, NOTE [program
# primitive]) the captured values are inputs of the program primitive after the arguments: the
# tape saves them as the un-jitted function's nodes would, and the rules' programs get them as
# arguments. arrayad operations on captured arrays alone are staged too (NOTE [staging
# everything] in the core), and an alias that a ``grad`` inside made of a captured Tensor (NOTE
# [in-place after use]) is followed to the Tensor (``Tensor._origin``): it cannot change while
# the function runs, since an in-place update of a captured array is refused under jit. What jit
# cannot see stays as jax.jit documents it: Python values (a closure's float is a literal of the
# program) and NumPy's own functions on a captured array, which run once, while tracing.

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


def _is_array(x):
    return isinstance(x, Array) or (not isinstance(x, (bool, int, float, complex, str, type(None),
                                                       tuple, list, dict, slice))
                                    and hasattr(x, "shape") and hasattr(x, "dtype"))


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

    def __repr__(self):
        return f"JitTracer({self.var.name}:{self.var.type_str()}, {self.var.label})"

    __str__ = __repr__

    def _conversion_error(self, what):
        return self._interp.conversion_error(self, what)

    def __bool__(self):
        raise self._conversion_error("bool")

    def __float__(self):
        raise self._conversion_error("float")

    def __int__(self):
        raise self._conversion_error("int")

    def __complex__(self):
        raise self._conversion_error("complex")

    def __index__(self):
        raise self._conversion_error("index")

    def item(self):
        raise self._conversion_error("item")

    def tolist(self):
        raise self._conversion_error("tolist")

    def __array__(self, dtype=None, copy=None):
        raise self._conversion_error("numpy.asarray")

    def __format__(self, spec):
        if spec:
            raise self._conversion_error("format")
        return repr(self)


# Primitives whose output shape depends on the values of the input (their vmap rule refuses
# too): a program cannot fix it, so tracing refuses them by name.
_VALUE_SHAPED = {"nonzero", "unique_all", "unique_counts", "unique_inverse", "unique_values"}


# Primitives whose result depends on their argument's shape and dtype only: constants of a
# program, whose signature fixes both.
_SHAPE_ONLY = {"zeros_like", "ones_like", "empty_like", "full_like"}


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
        self.cacheable = True
        self._enclosing_staging = None   # (NOTE [staging everything] in the core)

    def new_var(self, value, label):
        self.count += 1
        return Var(self.count, _core.shape_of(value), _core.dtype_of(value), label)

    def new_input(self, value, label):
        if self.frame is None:   # (where arrays made inside belong: NOTE [everything inside
            self.frame = value   # is arrayad] in the core)
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
            return a, self.const(a, captured=True)
        return a, Lit(a)

    def process(self, prim, args, params):
        vals, atoms = [], []
        for a in args:
            v, atom = self._atom(a)
            vals.append(v)
            atoms.append(atom)
        if prim.name in _VALUE_SHAPED or (prim.name == "getitem" and any(
                _is_array(v) and _core.dtype_of(v).kind == "b" for v in vals[1:])):
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
        if prim.name in _SHAPE_ONLY and not isinstance(out, Array):
            # zeros_like & co. depend on their argument's shape and dtype only, which the
            # program fixes: the result is a constant (folded further by the passes)
            return JitTracer(self, out, self.const(out))
        if prim.multiple_results:
            outs = tuple(self.new_var(o, prim.name) for o in out)
            self.eqns.append(Eqn(prim, tuple(atoms), dict(params), outs))
            return tuple(JitTracer(self, o, v) for o, v in zip(out, outs))
        var = self.new_var(out, prim.name)
        self.eqns.append(Eqn(prim, tuple(atoms), dict(params), (var,)))
        return JitTracer(self, out, var)

    def lift(self, value):
        v, atom = self._atom(value)
        return JitTracer(self, v, atom)

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
# The passes

def _substitute(atom, sub):
    return sub.get(atom, atom) if isinstance(atom, Var) else atom


def _rebuild(prog, consts, eqns, outs):
    return Program(prog.name, prog.in_vars, consts, eqns, outs, prog.in_spec, prog.out_spec,
                   prog.backend, prog.cacheable, dict(prog.captured))


def _fold(prog):
    """Constant folding: an instruction whose inputs are all constants is computed now."""
    consts = dict(prog.consts)
    captured = prog.captured   # (read at every call: never folded, NOTE [captured arrays])
    eqns = []
    for e in prog.eqns:
        if all(not isinstance(a, Var) or (a in consts and a not in captured) for a in e.ins):
            vals = [consts[a] if isinstance(a, Var) else a.value for a in e.ins]
            if not any(isinstance(v, Array) for v in vals):   # raw values only
                out = bind(e.prim, *vals, **e.params)
                for var, o in zip(e.outs, out if e.prim.multiple_results else (out,)):
                    consts[var] = o
                continue
        eqns.append(e)
    outs = list(prog.outs)
    return _dce_consts(_rebuild(prog, consts, eqns, outs))


def _is_identity(e):
    """Whether ``e`` hands back its (only) array input unchanged: a reshape to the same shape,
    an identity permutation, a concat of one array. (The program never writes into a value, so
    the input itself can stand for the result.)"""
    name = e.prim.name
    if len(e.outs) != 1 or not e.ins or not isinstance(e.ins[0], Var):
        return False
    x, out = e.ins[0], e.outs[0]
    if x.shape != out.shape or x.dtype is not out.dtype:
        return False
    if name == "reshape":
        return len(e.ins) == 1 and not e.params.get("copy")
    if name == "permute_dims":
        return tuple(e.params.get("axes", ())) == tuple(range(len(x.shape)))
    if name == "concat":
        return len(e.ins) == 1
    return False


def _is_one(atom, consts, captured):
    """Whether ``atom`` is the number 1 or a NumPy constant of ones that the program made (x * 1
    and x ** 1 are x, exactly, also for inf, nan and -0.0; a captured array may be written into
    later: NOTE [captured arrays])."""
    if isinstance(atom, Lit):
        return type(atom.value) in (int, float) and atom.value == 1
    if atom in captured:
        return False
    c = consts.get(atom)
    return type(c) is _ndarray and c.size > 0 and bool((c == 1).all())


def _unit_operand(e, consts, captured):
    """The operand that ``e`` hands back unchanged: ``x * 1``, ``1 * x``, ``x ** 1`` with the
    result's shape and dtype; else None."""
    name, ins, out = e.prim.name, e.ins, e.outs[0] if len(e.outs) == 1 else None
    if out is None or e.params or len(ins) != 2 or name not in ("multiply", "pow"):
        return None
    pairs = ((ins[0], ins[1]), (ins[1], ins[0])) if name == "multiply" else ((ins[0], ins[1]),)
    for x, one in pairs:
        if (isinstance(x, Var) and x.shape == out.shape and x.dtype is out.dtype
                and _is_one(one, consts, captured)):
            return x
    return None


def _identities(prog):
    """Instructions that hand back their input are dropped (the input stands for them)."""
    sub, eqns = {}, []
    for e in prog.eqns:
        e = Eqn(e.prim, tuple(_substitute(a, sub) for a in e.ins), e.params, e.outs)
        if _is_identity(e):
            sub[e.outs[0]] = e.ins[0]
            continue
        x = _unit_operand(e, prog.consts, prog.captured)
        if x is not None:
            sub[e.outs[0]] = x
            continue
        eqns.append(e)
    return _rebuild(prog, dict(prog.consts), eqns, [_substitute(a, sub) for a in prog.outs])


def _negations(prog):
    """Negations folded into their one consumer (backward passes are full of them): ``a +
    (-b)`` is ``a - b``, ``(-a) * c`` is ``a * (-c)`` for a number ``c``, ``a * (-b)`` is ``-(a *
    b)`` (then folded further). Exact in IEEE arithmetic and in integer wrap-around alike."""
    prims = {e.prim.name: e.prim for e in prog.eqns}
    if "negative" not in prims:
        return prog
    uses = collections.Counter(a for e in prog.eqns for a in e.ins if isinstance(a, Var))
    uses.update(a for a in prog.outs if isinstance(a, Var))
    neg_of = {}   # var -> the var it negates (single-use negations only)
    for e in prog.eqns:
        if e.prim.name == "negative" and isinstance(e.ins[0], Var) and uses[e.outs[0]] == 1:
            neg_of[e.outs[0]] = e.ins[0]
    if not neg_of:
        return prog
    neg_p = prims["negative"]
    add_p, sub_p, mul_p = (_core_prim("add"), _core_prim("subtract"), _core_prim("multiply"))
    fresh = max([v.n for e in prog.eqns for v in e.outs] + [v.n for v in prog.in_vars]
                + [v.n for v in prog.consts])
    eqns = []
    for e in prog.eqns:
        name, ins = e.prim.name, e.ins
        if name == "add" and len(ins) == 2 and ins[1] in neg_of and _same_type(ins[1], e):
            e = Eqn(sub_p, (ins[0], neg_of[ins[1]]), e.params, e.outs)
        elif name == "add" and len(ins) == 2 and ins[0] in neg_of and _same_type(ins[0], e):
            e = Eqn(sub_p, (ins[1], neg_of[ins[0]]), e.params, e.outs)
        elif (name == "multiply" and len(ins) == 2 and ins[0] in neg_of and isinstance(ins[1], Lit)
              and type(ins[1].value) in (int, float) and _same_type(ins[0], e)):
            e = Eqn(mul_p, (neg_of[ins[0]], Lit(-ins[1].value)), e.params, e.outs)
        elif (name == "multiply" and len(ins) == 2 and ins[1] in neg_of and isinstance(ins[0], Var)
              and ins[0].shape == e.outs[0].shape and _same_type(ins[1], e)
              and uses[e.outs[0]] == 1):
            # a * (-b) -> -(a * b): a negation the next add/subtract absorbs
            fresh += 1
            m = Var(fresh, e.outs[0].shape, e.outs[0].dtype, "multiply")
            eqns.append(Eqn(mul_p, (ins[0], neg_of[ins[1]]), e.params, (m,)))
            e = Eqn(neg_p, (m,), {}, e.outs)
            neg_of[e.outs[0]] = m
        eqns.append(e)
    return _rebuild(prog, dict(prog.consts), eqns, list(prog.outs))


def _core_prim(name):
    return _core._primitive_by_name(name)


def _same_type(neg_var, e):
    """Whether the negated value has the result's shape and dtype (no broadcasting or promotion
    for the rewrite to change)."""
    out = e.outs[0]
    return neg_var.shape == out.shape and neg_var.dtype is out.dtype


def _cse(prog):
    """Common subexpressions: an instruction equal to an earlier one (same primitive, same
    inputs, same parameters) reuses its results."""
    sub = {}
    seen = {}
    eqns = []
    for e in prog.eqns:
        ins = tuple(_substitute(a, sub) for a in e.ins)
        key = [e.prim]
        for a in ins:
            key.append(("var", a.n) if isinstance(a, Var) else _value_key(a.value))
        for k in sorted(e.params):
            key.append((k, _value_key(e.params[k])))
        key = tuple(key)
        if not any(k is None or (isinstance(k, tuple) and k[-1] is None) for k in key[1:]):
            hit = seen.get(key)
            if hit is not None:
                sub.update(zip(e.outs, hit.outs))
                continue
            e = Eqn(e.prim, ins, e.params, e.outs)
            seen[key] = e
        else:
            e = Eqn(e.prim, ins, e.params, e.outs)
        eqns.append(e)
    outs = [_substitute(a, sub) for a in prog.outs]
    return _rebuild(prog, dict(prog.consts), eqns, outs)


def _dce(prog):
    """Dead code: instructions none of whose results reach an output are dropped."""
    live = {a for a in prog.outs if isinstance(a, Var)}
    kept = []
    for e in reversed(prog.eqns):
        if any(v in live for v in e.outs):
            kept.append(e)
            live.update(a for a in e.ins if isinstance(a, Var))
    kept.reverse()
    return _dce_consts(_rebuild(prog, dict(prog.consts), kept, list(prog.outs)))


def _dce_consts(prog):
    used = {a for e in prog.eqns for a in e.ins if isinstance(a, Var)}
    used.update(a for a in prog.outs if isinstance(a, Var))
    prog.consts = {v: c for v, c in prog.consts.items() if v in used}
    prog.captured = {v: c for v, c in prog.captured.items() if v in used}
    return prog


# ---------------------------------------------------------------------------------------------
# Replay: generated Python, one backend call per instruction

# Below glibc's threshold for serving allocations by mmap, a fresh array is cheap and writing
# into a dead one (out=) costs more than it saves (the same threshold as the core's NOTE
# [consumed cotangents]).
_REUSE_BYTES = 1 << 17


def _nbytes(var):
    n = 1
    for s in var.shape:
        n *= s
    return n * getattr(var.dtype, "itemsize", 8)


def _numpy_ufunc(eqn):
    """The NumPy ufunc computing ``eqn`` (accepts ``out=``), or None."""
    prim = eqn.prim
    if not prim.elementwise or prim.xp_name is None or eqn.params or prim.multiple_results:
        return None
    import numpy as np
    u = getattr(np, prim.xp_name, None)
    return u if isinstance(u, np.ufunc) else None


def _callable(prim, b):
    """(function, takes xp first) that ``_call_impl`` of the core would call for ``prim``."""
    fast = getattr(b, "fast", {})
    if prim.xp_name is not None:
        return fast.get(prim.xp_name) or getattr(b.xp, prim.xp_name), False
    fn = fast.get(prim.name)
    if fn:
        return fn, False
    return prim.impl, True


def _compile(prog, bound=False, flat=False):
    """The replay function of ``prog``: generated Python source, compiled once. With ``bound``,
    each line binds the primitive instead (``Program.evaluate``); with ``flat`` it returns the
    tuple of output leaves instead of their structure. Captured constants (NOTE [captured
    arrays]) are read and checked at the start of each call, or with ``bound`` or ``flat`` (the
    program primitive's impl and rules: NOTE [program primitive]) taken as arguments after the
    inputs."""
    b = prog.backend
    ns = {"_fix": fix_scalar, "_xp": b.xp, "_bind": bind}
    names = {}
    params = []
    for i, v in enumerate(prog.in_vars):
        names[v] = f"a{i}"
        params.append(names[v])
    prologue = []
    captured_args = bound or flat
    for v, c in prog.consts.items():
        names[v] = f"c{v.n}"
        cap = prog.captured.get(v)
        if cap is None:
            ns[names[v]] = c
        elif captured_args:
            params.append(names[v])
        else:
            # read now (a Tensor's value) and check: the program holds for the traced shape
            # and dtype only (a Tensor's value rebound by an update is checked once)
            ns[f"_cap{v.n}"] = cap
            ns[f"_prog{v.n}"] = prog.root
            if cap.tensor:
                ns[f"_t{v.n}"] = c
                prologue.append(f"    {names[v]} = _t{v.n}._value")
                prologue.append(f"    if {names[v]} is not _cap{v.n}.last: "
                                f"_cap{v.n}.check(_prog{v.n}, {names[v]})")
            else:
                ns[names[v]] = c
                ns[f"_s{v.n}"], ns[f"_d{v.n}"] = cap.shape, cap.dtype
                prologue.append(f"    if {names[v]}.shape != _s{v.n} or {names[v]}.dtype != "
                                f"_d{v.n}: _cap{v.n}.check(_prog{v.n})")
    outs_set = {a for a in prog.outs if isinstance(a, Var)}

    def name(a):
        if isinstance(a, Var):
            return names.setdefault(a, a.name)
        key = f"k{len(ns)}"
        ns[key] = a.value
        return key

    # last use of every variable, and which ones only elementwise ufuncs read (their buffers
    # are never viewed by another value: NumPy only)
    last, only_ufunc_reads, fresh = {}, {}, set()
    numpy_backend = b.name == "numpy" and not bound
    ufuncs = [(_numpy_ufunc(e) if numpy_backend else None) for e in prog.eqns]
    for k, e in enumerate(prog.eqns):
        for a in e.ins:
            if isinstance(a, Var):
                last[a] = k
                only_ufunc_reads[a] = only_ufunc_reads.get(a, True) and ufuncs[k] is not None
        if ufuncs[k] is not None:
            fresh.update(e.outs)
    inputs = set(prog.in_vars) | set(prog.consts)

    lines = [f"def replay({', '.join(params)}):"] + prologue
    for k, e in enumerate(prog.eqns):
        args = [name(a) for a in e.ins]
        out = e.outs[0]
        u = ufuncs[k]
        target = None
        if u is not None and _nbytes(out) >= _REUSE_BYTES:
            for a in e.ins:
                if (isinstance(a, Var) and a in fresh and a not in inputs and a not in outs_set
                        and last[a] == k and only_ufunc_reads[a] and a.shape == out.shape
                        and a.dtype is out.dtype):
                    target = a
                    break
        if target is not None:
            fname = f"u{k}"
            ns[fname] = u
            call = f"{fname}({', '.join(args)}, out={name(target)})"
        else:
            if bound:
                fn, takes_xp = e.prim, False
                args.insert(0, f"f{k}")
                ns[f"f{k}"] = fn
                fname = "_bind"
            else:
                fn, takes_xp = _callable(e.prim, b)
                fname = f"f{k}"
                ns[fname] = fn
            kw = []
            for pk, pv in e.params.items():
                pname = f"p{k}_{len(kw)}"
                ns[pname] = pv
                kw.append(f"{pk}={pname}" if pk.isidentifier() else None)
            if any(x is None for x in kw):   # (a parameter name that is no identifier)
                pname = f"p{k}"
                ns[pname] = dict(e.params)
                kw = [f"**{pname}"]
            call = f"{fname}({', '.join((['_xp'] if takes_xp else []) + args + kw)})"
        if e.prim.multiple_results:
            lhs = ", ".join(name(v) for v in e.outs)
            lines.append(f"    {lhs}, = {call}" if len(e.outs) == 1 else f"    {lhs} = {call}")
            for v in e.outs:
                if v.shape == () and not bound:
                    lines.append(f"    {name(v)} = _fix({name(v)})")
        elif out.shape == () and not bound:
            lines.append(f"    {name(out)} = _fix({call})")
        else:
            lines.append(f"    {name(out)} = {call}")
        # free large dead arrays now (the next allocation may reuse their memory)
        dead = [a for a in dict.fromkeys(e.ins) if isinstance(a, Var) and last.get(a) == k
                and a not in inputs and a not in outs_set and _nbytes(a) >= _REUSE_BYTES]
        # (the buffer of an ``out=`` target lives on under the result's name: its own name
        # is deleted, or it would keep the buffer alive after the result dies)
        if dead:
            lines.append(f"    del {', '.join(name(a) for a in dead)}")
    # (a constant handed out is copied: the caller may write into it, the next call reuses it)
    ns["_copy"] = lambda c: b.xp.asarray(c, copy=True)
    outs = [f"_copy({name(a)})" if a in prog.consts and not bound else name(a)
            for a in prog.outs]
    if flat:
        lines.append(f"    return ({', '.join(outs)}{',' if len(outs) == 1 else ''})")
    elif prog.out_spec_is_leaf:
        lines.append(f"    return {outs[0]}")
    elif prog.out_spec_is_flat_tuple:
        lines.append(f"    return ({', '.join(outs)}{',' if len(outs) == 1 else ''})")
    else:
        ns["_unflatten"] = tree_unflatten
        ns["_spec"] = prog.out_spec
        lines.append(f"    return _unflatten([{', '.join(outs)}], _spec)")
    src = "\n".join(lines) + "\n"
    code = compile(src, f"<arrayad.jit program {prog.name}>", "exec")
    exec(code, ns)
    fn = ns["replay"]
    fn.source = src
    return fn


# ---------------------------------------------------------------------------------------------
# NOTE [program primitive]
# ------------------------
# Called with values of outer transforms (``grad(jit(f))``, ``vmap(jit(f))``, Tensors that
# require grad), a cached program is applied as one primitive whose rules come from transforming
# the program itself: its impl is the replay on raw arrays; its VJP is ``jit`` of the program's
# pullback, its JVP ``jit`` of its pushforward, its batching rule ``jit`` of its vmap (each
# staged once per signature, like any jitted function). On raw arrays every one of them replays
# at backend speed; on values of further transforms (hessian(jit(f)): the VJP rule sees grad
# tracers) the jitted rule binds its own program's primitives, so every order composes.

def _func():
    # (arrayad.func imports this module: looked up, not imported, so that the import graph
    # keeps one direction)
    return sys.modules["arrayad.func"]


class _ProgramPrimitive(_core.Primitive):
    """A cached program as one primitive (NOTE [program primitive]); its rules act on the
    floating-point inputs and outputs (the others get no cotangent or tangent)."""

    def __init__(self, prog):
        super().__init__(f"jit[{prog.name}]", self._impl, multiple_results=True)
        self.prog = prog
        self.vjp = self._vjp
        self.jvp = self._jvp
        self.batch = self._batch
        self.node_name = f"Jit{prog.name}Backward"
        self._flat_replay = None
        self._flat_eval = _compile(prog, bound=True, flat=True)
        # (the captured constants come after the inputs, and get no cotangent or tangent: a
        # Tensor that requires grad makes the program uncacheable, NOTE [captured arrays])
        self._inexact_in = ([getattr(v.dtype, "kind", "") in ("f", "c") for v in prog.in_vars]
                            + [False] * len(prog.captured))
        self._inexact_out = [getattr(v.dtype, "kind", "") in ("f", "c") for v in prog.outs]
        self._pullback = self._pushforward = None
        self._batched = {}

    def _impl(self, xp, *raw):
        if self._flat_replay is None:
            self._flat_replay = _compile(self.prog.fused or self.prog, flat=True)
        return self._flat_replay(*raw)

    def _split(self, args):
        """(indices of the floating-point args, a function rebuilding all the args from
        new values of those): the others stay as they are."""
        idx = [i for i, ok in enumerate(self._inexact_in) if ok]

        def with_diff(*d):
            full = list(args)
            for i, v in zip(idx, d):
                full[i] = v
            return full
        return idx, with_diff

    def _vjp(self, g, ans, *args):
        if self._pullback is None:
            vjp = _func().vjp
            n, evaluate, outs_ok = len(args), self._flat_eval, self._inexact_out

            def pullback(*xs):
                args, cts = xs[:n], xs[n:]
                idx, full = self._split(args)
                _, fn = vjp(lambda *d: [o for o, ok in zip(evaluate(*full(*d)), outs_ok) if ok],
                            *[args[i] for i in idx])
                got = fn(list(cts))
                out = [None] * n
                for i, c in zip(idx, got):
                    out[i] = c
                return tuple(out)
            pullback.__name__ = f"vjp_{self.prog.name}"
            self._pullback = jit(pullback)
        if len(self._inexact_out) == 1:   # (the engine hands one output's cotangent bare)
            g = (g,)
        cts = [c for c, ok in zip(g, self._inexact_out) if ok]
        return list(self._pullback(*args, *cts))

    def _jvp(self, tangents, ans, *args):
        if self._pushforward is None:
            jvp = _func().jvp
            n, evaluate, outs_ok = len(args), self._flat_eval, self._inexact_out

            def pushforward(*xs):
                args, ts = xs[:n], xs[n:]
                idx, full = self._split(args)
                _, out_t = jvp(lambda *d: [o for o, ok in zip(evaluate(*full(*d)), outs_ok) if ok],
                               tuple(args[i] for i in idx), tuple(ts))
                return tuple(out_t)
            pushforward.__name__ = f"jvp_{self.prog.name}"
            self._pushforward = jit(pushforward)
        from ._ops._namespace import ops
        ts = [ops.zeros_like(a) if t is None else t
              for a, t, ok in zip(args, tangents, self._inexact_in) if ok]
        got = iter(self._pushforward(*args, *ts))
        return tuple(next(got) if ok else None for ok in self._inexact_out)

    def _batch(self, args, dims):
        dims = tuple(dims)
        fn = self._batched.get(dims)
        if fn is None:
            vmap = _func().vmap
            evaluate = self._flat_eval

            def batched(*xs):
                return vmap(lambda *a: tuple(evaluate(*a)), in_dims=dims)(*xs)
            batched.__name__ = f"vmap_{self.prog.name}"
            fn = self._batched[dims] = jit(batched)
        return tuple(fn(*args)), (0,) * len(self.prog.outs)


# ---------------------------------------------------------------------------------------------
# Fusion
#
# NOTE [fusion]
# -------------
# A backend may register a fuser (``register_fuser(name, fuser)``): ``fuser(program)`` returns
# the program with chains of elementwise instructions replaced by instructions of its own
# primitives (one pass over the data instead of one per operation), or None to leave it. Only the
# replay on raw arrays uses the fused program; outer transforms bind the unfused one (a fused
# instruction has no derivative rules). ``numexpr_fuser`` (numexpr, an optional extra) inlines
# the arithmetic (+ - * / and negation) of large float64 arrays into one numexpr expression per
# value that is used more than once or by something else; the transcendental functions stay
# NumPy's. It is not registered by default: measured single-threaded here (numexpr 2.14 without
# VML), its interpreter costs ~1 ms per operation on 10^6 elements where a NumPy ufunc writing
# into a dead buffer (the replay's ``out=``) costs 0.25-0.5 ms, so jit(grad(chain)) on 10^6
# elements took 1.74x the NumPy forward pass with it and 1.30x without. Register it
# (``register_fuser("numpy", numexpr_fuser)``) where numexpr runs multi-threaded or with VML.

FUSERS = {}


def register_fuser(backend_name, fuser):
    """Let ``fuser(program) -> program or None`` fuse the programs replayed on ``backend_name``."""
    FUSERS[backend_name] = fuser


_NE_OPS = {"add": "({0} + {1})", "subtract": "({0} - {1})", "multiply": "({0} * {1})",
           "divide": "({0} / {1})", "negative": "(-{0})"}


class _Fused(_core.Primitive):
    """One numexpr expression over its array arguments (replay only: no rules)."""

    def __init__(self, expr, compiled):
        super().__init__(f"fused[{expr}]", lambda xp, *arrays: compiled(*arrays),
                         differentiable=False)
        self.expr = expr


def _splat(c):
    """The number a constant NumPy array repeats (a broadcast 0-d value), or None."""
    if type(c) is not _ndarray or c.dtype != _np.float64 or not c.size or any(c.strides):
        return None
    v = float(c.flat[0])
    return v if v == v and abs(v) != float("inf") else None


def numexpr_fuser(prog):
    try:
        import numexpr
    except ImportError:
        return None
    import math
    f64 = _core.dtype_of(1.0)
    uses = collections.Counter(a for e in prog.eqns for a in e.ins if isinstance(a, Var))
    uses.update(a for a in prog.outs if isinstance(a, Var))

    def fusible(e):
        if e.prim.name not in _NE_OPS or e.params or len(e.outs) != 1:
            return False
        out = e.outs[0]
        if out.dtype is not f64 or _nbytes(out) < _REUSE_BYTES:
            return False
        for a in e.ins:
            if isinstance(a, Var):
                if a.dtype is not f64 or a.shape not in (out.shape, ()):
                    return False
            elif type(a.value) not in (int, float) or not math.isfinite(a.value):
                return False
        return True

    expr = {}      # var -> (expression, leaves, number of operations)
    inlined = set()
    for e in prog.eqns:
        if not fusible(e):
            continue
        parts, leaves, n = [], {}, 1
        for a in e.ins:
            if isinstance(a, Var) and a in expr and uses[a] == 1:
                sub, sub_leaves, m = expr[a]
                parts.append(sub)
                leaves.update(sub_leaves)
                n += m
                inlined.add(a)
            elif (isinstance(a, Var) and a not in prog.captured
                  and _splat(prog.consts.get(a)) is not None):
                parts.append(repr(_splat(prog.consts[a])))   # (ones_like broadcast: a number)
            elif isinstance(a, Var):
                parts.append(a.name)
                leaves[a.name] = a
            else:
                parts.append(repr(a.value))
        expr[e.outs[0]] = (_NE_OPS[e.prim.name].format(*parts), leaves, n)
    if not any(n > 1 for v, (_, _, n) in expr.items() if v not in inlined):
        return None
    eqns = []
    for e in prog.eqns:
        out = e.outs[0]
        if out in inlined:
            continue
        if out in expr and expr[out][2] > 1:
            text, leaves, _ = expr[out]
            names = list(leaves)
            compiled = numexpr.NumExpr(text, signature=[(nm, _np.float64) for nm in names],
                                       optimization="none")
            eqns.append(Eqn(_Fused(text, compiled), tuple(leaves[nm] for nm in names), {},
                            e.outs))
        else:
            eqns.append(e)
    return _rebuild(prog, dict(prog.consts), eqns, list(prog.outs))


# ---------------------------------------------------------------------------------------------
# jit

_leaf_spec = tree_flatten(0)[1]


def _spec_shape(spec, n):
    """(is a leaf, is a flat tuple of n leaves)."""
    if spec == _leaf_spec:
        return True, False
    return False, spec == tree_flatten(tuple(range(n)))[1]


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
        self._fast_ok = not self.static_argnums and not self.static_argnames
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
                raise
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
        if self._fast_ok and not kwargs:
            key = []
            for a in args:
                if type(a) is not _ndarray:
                    break
                key.append((a.shape, a.dtype))
            else:
                key = tuple(key)
                prog = self._fast.get(key)
                if prog is not None:
                    try:
                        self._fast.move_to_end(key)
                    except KeyError:   # (evicted by another thread meanwhile: still valid)
                        pass
                    return prog._replay(*args)
        return self._call(args, kwargs)

    def _signature(self, args, kwargs):
        if self._fast_ok and not kwargs:   # (positional arrays only: no pytree work)
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
                elif not _is_array(a):
                    break
                keys.append(_leaf_key(a))
            else:
                sig = _Signature()
                sig.leaves = args
                sig.spec = _positional_spec(len(args))
                sig.static = ()
                sig.mode = mode
                sig.key = ("args", tuple(keys))   # (no TreeSpec to hash: a cheaper lookup)
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
            sig.key = (spec, tuple(lkeys), tuple((w, _value_key(v)) for w, v in static))
            hash(sig.key)
        except TypeError:
            raise TypeError(f"jit({self.__name__}): an argument that is no array must be hashable "
                            f"(it is part of the cache key)") from None
        return sig

    def _call(self, args, kwargs):
        sig = self._signature(args, kwargs)
        prog = self._cache.get(sig.key)
        if prog is None:
            prog, out_values = self._trace(args, kwargs, sig)
            if prog.cacheable:
                self._store(self._cache, sig.key, prog)
                if self._fast_ok and not kwargs and sig.mode == "raw" and all(
                        type(a) is _ndarray for a in args):
                    self._store(self._fast, tuple((a.shape, a.dtype) for a in args), prog)
            return self._native(tree_unflatten(out_values, prog.out_spec), sig.mode)
        try:
            self._cache.move_to_end(sig.key)
        except KeyError:   # (evicted by another thread meanwhile: the program is still valid)
            pass
        dyn = sig.leaves if sig.key[0] == "args" else [x for x in sig.leaves if _is_array(x)]
        if sig.mode == "bind":
            prim = prog.as_primitive()
            if prim is None:
                return prog.evaluate(dyn)
            return tree_unflatten(list(bind(prim, *dyn, *prog.captured_values())),
                                  prog.out_spec)
        if sig.mode == "tensor":
            dyn = [x._value if isinstance(x, Tensor) else x for x in dyn]
        out = prog._replay(*dyn)
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
        """Run ``func`` under a staging interpreter: (optimized program, this call's outputs)."""
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
        prog = prog.optimized()
        _finish(prog, len(outs))
        return prog, values

    def lower(self, *args, **kwargs):
        """The program ``func`` stages to for these arguments (after the passes; its
        ``unoptimized`` attribute holds the one before)."""
        sig = self._signature(args, kwargs)
        prog = self._cache.get(sig.key)
        if prog is None:
            prog, _ = self._trace(args, kwargs, sig)
        return prog


def _same_state(a, b):
    """Whether two random states (dicts of backend states: dicts, tuples, arrays) are equal."""
    if isinstance(a, dict):
        return (isinstance(b, dict) and a.keys() == b.keys()
                and all(_same_state(a[k], b[k]) for k in a))
    if isinstance(a, (tuple, list)):
        return (isinstance(b, (tuple, list)) and len(a) == len(b)
                and all(_same_state(x, y) for x, y in zip(a, b)))
    if _is_array(a):
        import numpy as np
        return _is_array(b) and np.array_equal(np.asarray(a), np.asarray(b))
    return a == b


def _finish(prog, n_out):
    prog.out_spec_is_leaf, prog.out_spec_is_flat_tuple = _spec_shape(prog.out_spec, n_out)
    if prog.unoptimized is not None:
        prog.unoptimized.out_spec_is_leaf = prog.out_spec_is_leaf
        prog.unoptimized.out_spec_is_flat_tuple = prog.out_spec_is_flat_tuple
    fuser = FUSERS.get(prog.backend.name)
    fused = fuser(prog) if fuser is not None and prog.cacheable else None
    if fused is not None:
        fused.root = prog.root
        fused.out_spec_is_leaf = prog.out_spec_is_leaf
        fused.out_spec_is_flat_tuple = prog.out_spec_is_flat_tuple
    prog.fused = fused   # (NOTE [fusion]: what the replay runs, when a fuser applied)
    prog._replay = _compile(fused if fused is not None else prog)


try:
    import numpy as _np
    _ndarray = _np.ndarray
except ImportError:   # pragma: no cover
    _ndarray = None


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


def make_program(func, static_argnums=(), static_argnames=()):
    """``make_program(f)(*args)``: the program ``jit(f)`` stages for these arguments (printable,
    optimised; ``.unoptimized`` is the program before the passes)."""
    j = _Jitted(func, static_argnums, static_argnames)

    def lower(*args, **kwargs):
        return j.lower(*args, **kwargs)

    return lower
