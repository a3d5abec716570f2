"""The array tier of a compiled scan (NOTE [compiled scan] in ``scan.py``): a body whose values
are too large to be scalars (the machine and ``scan_numba.py`` make each element a local, up to
``MAX_ELEMENTS``) runs its whole loop as one ``numba.njit`` function whose statements are array
expressions, one per instruction, on float64, int64 and bool values.

NOTE [array scan]
-----------------
The replay of such a scan costs a NumPy call per instruction and step: an ODE integrator's state
of a thousand values (GradBench's ``ode``: 100 RK4 steps, 60 instructions forward and backward)
spends most of its time in that dispatch. Here each instruction becomes the NumPy expression of
its primitive in numba's dialect (``np.sin(t3)``, ``t4[1:]``, ``np.concatenate((t5, t6))``...),
the carry lives in locals across steps, xs are read and ys written by step, so the loop runs
without Python. Only instructions whose numba expression means what the replay computes are
taken: IEEE arithmetic and comparisons, NumPy's functions that numba implements with the same
special values (``sqrt``, ``exp``, ``log``, ``sin``..., from LLVM's or the C library's loops:
within an ulp of NumPy's), ``where``, casts between float64, int64 and bool, indexing and
scatter-adds with keys of slices and integers, shape changes, sums (added in order: NumPy's
pairwise sum may round otherwise beyond 8 elements, as in ``scan_numba.py``), products of
vectors and matrices. Anything else raises ``Unsupported`` and the replay runs. A scan is
compiled once the replay model says it has cost ``AFTER`` seconds (``scan.py``), since numba's
first compilation takes about a second; numba's on-disk cache keeps the loop for other
processes.
"""

import numpy as np

from .lower_numba import _load, _size
from .scan_lower import Unsupported

_DTYPES = ("float64", "int64", "bool")
_ARITH = {"add": "+", "subtract": "-", "multiply": "*", "divide": "/"}
_COMPARE = {"equal": "==", "not_equal": "!=", "less": "<", "less_equal": "<=",
            "greater": ">", "greater_equal": ">="}
_UNARY = {"negative": "(-{0})", "positive": "{0}", "square": "({0} * {0})", "abs": "np.abs({0})",
          "sqrt": "np.sqrt({0})", "exp": "np.exp({0})", "expm1": "np.expm1({0})",
          "log": "np.log({0})", "log1p": "np.log1p({0})", "sin": "np.sin({0})",
          "cos": "np.cos({0})", "tanh": "np.tanh({0})", "logical_not": "np.logical_not({0})",
          "bitwise_invert": "np.logical_not({0})", "log2": "np.log2({0})",
          "log10": "np.log10({0})", "tan": "np.tan({0})", "asin": "np.arcsin({0})",
          "acos": "np.arccos({0})", "atan": "np.arctan({0})", "sinh": "np.sinh({0})",
          "cosh": "np.cosh({0})", "asinh": "np.arcsinh({0})", "acosh": "np.arccosh({0})",
          "atanh": "np.arctanh({0})"}
_BINARY_FUNCTIONS = {"atan2": "np.arctan2", "hypot": "np.hypot"}
_LOGICAL = {"logical_and": "np.logical_and", "logical_or": "np.logical_or",
            "logical_xor": "np.logical_xor", "bitwise_and": "np.logical_and",
            "bitwise_or": "np.logical_or", "bitwise_xor": "np.logical_xor"}
_SAME = ("copy", "stop_gradient", "positive")


def _select(scalar, cond, a, b):
    return f"({a} if {cond} else {b})" if scalar else f"np.where({cond}, {a}, {b})"


# NumPy's special cases, spelled out: sign is +0.0 for both zeros and nan for nan; maximum and
# minimum propagate a nan of either operand and, of equal values (zeros of both signs), take the
# second
_SPECIAL = {
    "sign": lambda s, x: _select(s, f"({x} > 0)", "1.0", _select(
        s, f"({x} < 0)", "-1.0", _select(s, f"({x} != {x})", x, "0.0"))),
    "maximum": lambda s, x, y: _select(
        s, f"({x} > {y}) {'or' if s else '|'} ({x} != {x})", x, y),
    "minimum": lambda s, x, y: _select(
        s, f"({x} < {y}) {'or' if s else '|'} ({x} != {x})", x, y),
    "floor": lambda s, x: f"np.floor({x})",
    "ceil": lambda s, x: f"np.ceil({x})",
    "reciprocal": lambda s, x: f"(1.0 / {x})",
}


def _literal(value):
    if isinstance(value, (bool, np.bool_)):
        return "True" if value else "False"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        v = float(value)
        if v != v:
            return "np.nan"
        if v in (float("inf"), float("-inf")):
            return "np.inf" if v > 0 else "(-np.inf)"
        return repr(v)
    raise Unsupported(f"literal {value!r}")


def _key(key):
    """The source of a basic key (slices, integers, None, Ellipsis), or Unsupported."""
    parts = []
    for k in key:
        if k is None:
            parts.append("None")
        elif k is Ellipsis:
            parts.append("...")
        elif type(k) is int:
            parts.append(str(k))
        elif type(k) is slice and all(p is None or type(p) is int
                                      for p in (k.start, k.stop, k.step)):
            parts.append(":".join("" if p is None else str(p)
                                  for p in (k.start, k.stop, k.step)))
        else:
            raise Unsupported("an index array or a key of another kind")
    return ", ".join(parts) + ("," if len(parts) == 1 else "")


class _Body:
    """The body's instructions as numba source lines."""

    def __init__(self, prog):
        self.prog = prog
        self.names = {}
        self.lines = []

    def name(self, a):
        if hasattr(a, "shape"):
            return self.names[a]
        return _literal(a.value)

    def dtype(self, v):
        name = getattr(v.dtype, "name", None)
        if name not in _DTYPES:
            raise Unsupported(f"dtype {v.dtype}")
        return name

    def define(self, v, expr):
        n = f"t{len(self.names)}"
        self.names[v] = n
        self.lines.append(f"{n} = {expr}")

    def eqn(self, e):
        if e.prim.multiple_results or len(e.outs) != 1 or getattr(e.prim, "prog", None):
            raise Unsupported(e.prim.name)
        out = e.outs[0]
        dt = self.dtype(out)
        for a in e.ins:
            if hasattr(a, "shape"):
                self.dtype(a)
            elif isinstance(a.value, complex):
                raise Unsupported("a complex literal")
        self.define(out, self.expr(e, out, dt))

    def expr(self, e, out, dt):
        name = e.prim.xp_name or e.prim.name
        ins = [self.name(a) for a in e.ins]
        shape = tuple(out.shape)
        p = e.params
        if e.prim.name in _SAME:
            return ins[0]
        if e.prim.elementwise and not p:
            if name in _ARITH and len(ins) == 2:
                return f"({ins[0]} {_ARITH[name]} {ins[1]})"
            if name in _COMPARE and len(ins) == 2:
                return f"({ins[0]} {_COMPARE[name]} {ins[1]})"
            if name in _LOGICAL and len(ins) == 2 and dt == "bool":
                return f"{_LOGICAL[name]}({ins[0]}, {ins[1]})"
            if name in _UNARY and len(ins) == 1 and (dt == "float64" or name in (
                    "negative", "positive", "abs", "square", "logical_not", "bitwise_invert")):
                return _UNARY[name].format(ins[0])
            if name in _BINARY_FUNCTIONS and len(ins) == 2 and dt == "float64":
                return f"{_BINARY_FUNCTIONS[name]}({ins[0]}, {ins[1]})"
            if name == "pow" and len(ins) == 2 and dt == "float64":
                # (NumPy's power of an exponent that is one number: 0.5 is a sqrt, 2 a square)
                y = e.ins[1]
                if not hasattr(y, "shape"):
                    if y.value == 0.5:
                        return f"np.sqrt({ins[0]})"
                    if y.value == 2:
                        return f"({ins[0]} * {ins[0]})"
                elif y.shape == () or tuple(y.shape) != shape:
                    return _select(shape == (), f"({ins[1]} == 0.5)", f"np.sqrt({ins[0]})",
                                   f"({ins[0]} ** {ins[1]})")
                return f"({ins[0]} ** {ins[1]})"
            if dt == "float64" and name in _SPECIAL:
                return _SPECIAL[name](shape == (), *ins)
            if name == "where":
                if shape == ():
                    return f"({ins[1]} if {ins[0]} else {ins[2]})"
                full = [x if hasattr(a, "shape") and tuple(a.shape) == shape
                        else f"np.full({shape}, {x})" if not hasattr(a, "shape") or a.shape == ()
                        else f"np.ascontiguousarray(np.broadcast_to({x}, {shape}))"
                        for a, x in zip(e.ins, ins)]
                return f"np.where({', '.join(full)})"
            raise Unsupported(name)
        if e.prim.name == "astype":
            src = self.dtype(e.ins[0])
            if src == "float64" and dt == "int64":
                raise Unsupported("a cast of floats to integers")   # (nan, out of range: NumPy's)
            if dt == "bool":
                return f"({ins[0]} != 0)"
            ctor = f"np.{dt}"
            return f"{ctor}({ins[0]})" if shape == () else f"{ins[0]}.astype({ctor})"
        if e.prim.name == "getitem" and len(ins) == 1:
            return f"{ins[0]}[{_key(p['key'])}]"
        if e.prim.name == "index_add" and len(ins) == 2 and shape != ():
            t = f"t{len(self.names)}s"
            self.lines.append(f"{t} = {ins[0]}.copy()")
            self.lines.append(f"{t}[{_key(p['key'])}] += {ins[1]}")
            return t
        if e.prim.name == "concat":
            axis = p.get("axis", 0)
            if axis is None or any(a.shape == () for a in e.ins):
                raise Unsupported("concat of 0-d values")
            return f"np.concatenate(({', '.join(ins)},), axis={axis % len(shape)})"
        if (e.prim.name == "stack" and all(a.shape == () for a in e.ins)
                and p.get("axis", 0) in (0, -1)):
            return f"np.array([{', '.join(ins)}])"
        if e.prim.name == "reshape":
            a = e.ins[0]
            if a.shape == ():
                return f"np.full({shape}, {ins[0]})"
            if shape == ():
                return f"{ins[0]}.ravel()[0]"
            return f"np.ascontiguousarray({ins[0]}).reshape({shape})"
        if e.prim.name == "broadcast_to":
            a = e.ins[0]
            if a.shape == ():
                return f"np.full({shape}, {ins[0]})"
            return f"np.ascontiguousarray(np.broadcast_to({ins[0]}, {shape}))"
        if e.prim.name == "permute_dims":
            return f"np.ascontiguousarray(np.transpose({ins[0]}, {tuple(p['axes'])}))"
        if e.prim.name in ("zeros_like", "ones_like") and not (p.get("dtype") or p.get("device")):
            value = "0" if e.prim.name == "zeros_like" else "1"
            return f"np.{dt}({value})" if shape == () else f"np.full({shape}, np.{dt}({value}))"
        if e.prim.name == "sum" and dt == "float64" and p.get("dtype") is None:
            return self.sum(e.ins[0], ins[0], p.get("axis"), p.get("keepdims", False), shape)
        if e.prim.name == "matmul" and dt == "float64" \
                and all(1 <= len(a.shape) <= 2 for a in e.ins):
            return (f"np.dot(np.ascontiguousarray({ins[0]}), "
                    f"np.ascontiguousarray({ins[1]}))")
        raise Unsupported(e.prim.name)

    def sum(self, a, x, axis, keepdims, shape):
        nd = len(a.shape)
        if nd == 0:
            return x
        axes = tuple(range(nd)) if axis is None else \
            tuple(sorted(ax % nd for ax in ((axis,) if isinstance(axis, int) else axis)))
        if axes == tuple(range(nd)):
            total = f"np.sum({x})"   # (in order; a scalar)
            return f"np.full({shape}, {total})" if keepdims else total
        expr = x
        for ax in reversed(axes):   # (one axis at a time, from the last)
            expr = f"np.sum({expr}, axis={ax})"
        return f"np.ascontiguousarray({expr}).reshape({shape})" if keepdims else expr


class ArrayScan:
    """A scan's whole loop as one numba function of array statements (NOTE [array scan]):
    ``self(args, length)`` returns the primitive's outputs (carry, stacked ys, history when
    ``save``) from its arguments (closure, carry, xs)."""

    def __init__(self, body, nc, ncarry, reverse, save):
        prog = body.prog
        self.nc, self.ncarry, self.save = nc, ncarry, save
        low = _Body(prog)
        ins, outs = prog.in_vars, prog.outs
        params, pro, loop = [], [], []
        for j, v in enumerate(ins):
            low.dtype(v)
            params.append(f"a{j}")
            low.names[v] = f"v{j}"
            if j < nc + ncarry:   # (closure and carry: one value; a 0-d one as a number)
                pro.append(f"v{j} = a{j}[0]" if v.shape == () else f"v{j} = a{j}")
            else:                 # (xs: the step's row)
                loop.append(f"v{j} = a{j}[i]")
        self.consts = []
        for j, (v, c) in enumerate(prog.consts.items()):
            low.dtype(v)
            c = np.ascontiguousarray(np.asarray(c))
            self.consts.append(c.reshape(1) if c.shape == () else c)
            params.append(f"k{j}")
            low.names[v] = f"k{j}v"
            pro.append(f"k{j}v = k{j}[0]" if v.shape == () else f"k{j}v = k{j}")
        if save:
            for j in range(ncarry):
                params.append(f"h{j}")
                loop.append(f"h{j}[i] = v{nc + j}")
        for e in prog.eqns:
            low.eqn(e)
        loop += low.lines
        for j, v in enumerate(outs[ncarry:]):
            if not hasattr(v, "shape"):
                raise Unsupported("a literal output")
            low.dtype(v)
            params.append(f"y{j}")
            loop.append(f"y{j}[i] = {low.name(v)}")
        post = []
        for j, v in enumerate(outs[:ncarry]):
            src = low.name(v)
            new = f"v{nc + j}"
            loop.append(f"n{j} = {src}" if v.shape == ()
                        else f"n{j} = np.ascontiguousarray({src})")
            params.append(f"r{j}")
            post.append(f"r{j}[0] = {new}" if v.shape == () else f"r{j}[:] = {new}.ravel()")
        loop += [f"v{nc + j} = n{j}" for j in range(ncarry)]
        step = "i = n - 1 - it" if reverse else "i = it"
        src = ["import numpy as np", "import numba", "", "",
               "@numba.njit(cache=True, error_model='numpy', nogil=True)",
               f"def kernel(n, {', '.join(params)}):"]
        src += ["    " + s for s in pro]
        src += ["    for it in range(n):", "        " + step]
        src += ["        " + s for s in loop]
        src += ["    " + s for s in post] + ["    return 0", ""]
        self.source = "\n".join(src)
        self.in_avals = [(tuple(v.shape), np.dtype(v.dtype.name)) for v in ins]
        self.out_avals = [(tuple(v.shape), np.dtype(v.dtype.name)) for v in outs]
        self.fn = None

    def __call__(self, args, length):
        """The outputs of the scan; compiles the loop at the first call (numba's errors are
        raised to ``scan.py``, which falls back to the replay)."""
        if self.fn is None:
            self.fn = _load(self.source)
        nc, ncarry = self.nc, self.ncarry
        ins = []
        for j, (a, (shape, dtype)) in enumerate(zip(args, self.in_avals)):
            a = np.ascontiguousarray(a, dtype=dtype)
            ins.append(a.reshape(1) if j < nc + ncarry and shape == () else a)
        hist = ([np.empty((length,) + s, d) for s, d in self.in_avals[nc:nc + ncarry]]
                if self.save else [])
        ys = [np.empty((length,) + s, d) for s, d in self.out_avals[ncarry:]]
        carry = [np.empty(_size(s), d) for s, d in self.out_avals[:ncarry]]
        self.fn(length, *ins, *self.consts, *hist, *ys, *carry)
        carry = [c.reshape(s) for c, (s, _) in zip(carry, self.out_avals[:ncarry])]
        return tuple(carry + ys + hist)
