"""The program of ``arrayad.jit`` as data: typed variables, literals, instructions, and
``check``, which verifies a program (NOTE [program IR]).

NOTE [program IR]
-----------------
A ``Program`` is data only: its inputs (``in_vars``), its constants (``consts``; among them the
captured ones, read anew at every call: NOTE [captured arrays] in ``arrayad/_jit``), a flat list
of instructions (``eqns``) and its outputs (``outs``), with the pytree specs and the backend.
Passes (``passes.py``) take a program and return a new one, never changing their input; what
runs a program (generated Python, buffers, compiled kernels, the program as a primitive) lives
beside it in ``replay.py``, made from any program, so the output of every pass can run. Every
variable is defined once, by an input, a constant or one instruction, before it is used:
``check(program)`` verifies this, and the types the primitives' facts fix (an elementwise
result has its operands' broadcast shape, an identity its input's type, a fused instruction
its sub-program's outputs). The tests run ``check`` after every pass (``config.jit_check``).
"""

import struct
import sys

from .._core import _core
from .._core._core import Array

try:
    import numpy as _np
except ImportError:   # pragma: no cover
    _np = None


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
        return ("lit", value_key(self.value))

    def __repr__(self):
        return repr(self.value)


def value_key(v):
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
        ks = tuple(value_key(x) for x in v)
        return None if any(k is None for k in ks) else (t, ks)
    if t is slice:   # (a basic key's slices: unhashable before Python 3.12)
        ks = (value_key(v.start), value_key(v.stop), value_key(v.step))
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
        args += [f"{k}={short(v)}" for k, v in self.params.items()]
        return f"{lhs} = {self.prim.name}({', '.join(args)})"


def short(v):
    r = repr(v)
    return r if len(r) <= 40 else r[:37] + "..."


def is_array(x):
    return isinstance(x, Array) or (not isinstance(x, (bool, int, float, complex, str, type(None),
                                                       tuple, list, dict, slice))
                                    and hasattr(x, "shape") and hasattr(x, "dtype"))


class Program:
    """A staged function: typed inputs, constants, a flat list of instructions, outputs (NOTE
    [program IR]).

    ``str(program)`` prints one line per instruction; ``program.optimized()`` is the program
    after the passes (its ``unoptimized`` attribute: the one before); ``program(*args)`` runs it
    on raw arrays of its signature."""

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
        self.unoptimized = None     # the program the passes started from (optimized())

    def replace(self, consts=None, eqns=None, outs=None, in_vars=None):
        """A new program with these parts replaced (the rest shared: a program is not changed
        once made)."""
        return Program(self.name, self.in_vars if in_vars is None else in_vars,
                       dict(self.consts) if consts is None else consts,
                       list(self.eqns) if eqns is None else eqns,
                       list(self.outs) if outs is None else outs,
                       self.in_spec, self.out_spec, self.backend, self.cacheable,
                       {v: c for v, c in self.captured.items()
                        if consts is None or v in consts})

    # -- printing
    def __str__(self):
        ins = ", ".join(f"{v.name}:{v.type_str()}" for v in self.in_vars)
        lines = [f"program {self.name}({ins}) {{"]
        for v, c in self.consts.items():
            lines.append(f"  {v.name}:{v.type_str()} = const {short(_core.raw_value(c))}"
                         if is_array(c) else f"  {v.name} = const {short(c)}")
        for e in self.eqns:
            lines.append("  " + str(e))
            sub = getattr(e.prim, "prog", None)
            if sub is not None:   # (a fused instruction: its sub-program, indented)
                lines += ["    " + ln for ln in str(sub).splitlines()]
        outs = ", ".join(a.name if isinstance(a, Var) else repr(a) for a in self.outs)
        lines.append(f"  return {outs}")
        lines.append("}")
        return "\n".join(lines)

    __repr__ = __str__

    def primitive_names(self):
        return [e.prim.name for e in self.eqns]

    def optimized(self, folded=None):
        """A new program after constant folding, identities, common subexpressions, negations
        and dead code (``folded``: the values the trace computed for instructions of constants,
        Var -> value, which the fold pass takes instead of computing them again)."""
        # (passes.py and replay.py import this module: looked up, not imported, so that the
        # import graph keeps one direction; arrayad._jit imports both)
        return sys.modules["arrayad._jit.passes"].optimize(self, folded)

    def __call__(self, *leaves):
        """Run on raw arrays of the program's signature (the replay of ``replay.py``)."""
        return sys.modules["arrayad._jit.replay"].executable(self).replay(*leaves)


class CheckError(AssertionError):
    """A program that breaks an invariant of NOTE [program IR] (a bug of a pass)."""


def _broadcast(shapes):
    out = ()
    for s in shapes:
        s = tuple(s)
        if len(s) > len(out):
            out = (1,) * (len(s) - len(out)) + out
        s = (1,) * (len(out) - len(s)) + s
        new = []
        for a, b in zip(out, s):
            if a != b and 1 not in (a, b):
                return None
            new.append(b if a == 1 else a)
        out = tuple(new)
    return out


def check(prog, where="program"):
    """Verify ``prog`` (NOTE [program IR]); raise CheckError naming ``where`` (the pass) and the
    instruction at fault. Returns ``prog``."""
    def fail(msg):
        raise CheckError(f"jit: {where} of {prog.name} is not a valid program: {msg}\n{prog}")

    defined = set()
    for v in prog.in_vars:
        if not isinstance(v, Var) or v in defined:
            fail(f"input {v!r} is no variable or is defined twice")
        defined.add(v)
    for v in prog.consts:
        if v in defined:
            fail(f"constant {v!r} is defined twice")
        defined.add(v)
    for v in prog.captured:
        if v not in prog.consts:
            fail(f"captured {v!r} is not a constant of the program")
    for e in prog.eqns:
        for a in e.ins:
            if isinstance(a, Var):
                if a not in defined:
                    fail(f"{e} uses {a!r} before it is defined")
            elif not isinstance(a, Lit):
                fail(f"{e} has an argument that is neither a variable nor a literal: {a!r}")
        if not e.prim.multiple_results and len(e.outs) != 1:
            fail(f"{e} has {len(e.outs)} results for a primitive of one")
        for v in e.outs:
            if v in defined:
                fail(f"{e} defines {v!r} again")
            defined.add(v)
        _check_types(e, fail)
    for a in prog.outs:
        if isinstance(a, Var):
            if a not in defined:
                fail(f"output {a!r} is not defined")
        elif not isinstance(a, Lit):
            fail(f"output {a!r} is neither a variable nor a literal")
    return prog


def _check_types(e, fail):
    ins = [a for a in e.ins if isinstance(a, Var)]
    sub = getattr(e.prim, "prog", None)
    if sub is not None and getattr(e.prim, "fused", False):
        if len(sub.in_vars) != len(e.ins) or len(sub.outs) != len(e.outs):
            fail(f"{e}: its sub-program takes {len(sub.in_vars)} and gives {len(sub.outs)}")
        for a, v in zip(e.ins, sub.in_vars):
            if isinstance(a, Var) and (a.shape != v.shape or a.dtype != v.dtype):
                fail(f"{e}: argument {a!r} for the sub-program's {v!r}")
        for o, v in zip(e.outs, sub.outs):
            if o.shape != v.shape or o.dtype != v.dtype:
                fail(f"{e}: result {o!r} for the sub-program's {v!r}")
        check(sub, f"the sub-program of {e.prim.name}")
        return
    if e.prim.elementwise and not e.prim.multiple_results and not e.params and ins:
        want = _broadcast([a.shape for a in ins])
        if want is None or tuple(e.outs[0].shape) != want:
            fail(f"{e}: an elementwise result of shape {tuple(e.outs[0].shape)} from "
                 f"operands of shapes {[tuple(a.shape) for a in ins]}")
