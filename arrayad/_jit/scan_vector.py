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
compiled once the replay model says it has cost ``ARRAY_AFTER`` seconds (``scan.py``), since
numba's first compilation takes about a second; numba's on-disk cache keeps the loop for other
processes. A body of such values runs here from one step on (``ARRAY_MIN_STEPS``): GradBench's
ode at s=1 is one step of a thousand values.

NOTE [array loops]
------------------
An array expression of numba allocates its result and runs one loop per instruction: the ode
body's 25 instructions cost 8 us a step at n=1000 that way, where its arithmetic is 1 us. So the
1-d values of the body are not expressions but element loops (``_Loops``):

- the float64 elementwise instructions (arithmetic, comparisons, ``where``, the functions
  above; operands of the loop's length, or of one element, or literals) are grouped into loops
  ``for q in range(m)``, one scalar statement per instruction, in the order of the program; an
  instruction joins the first loop of its length that runs after its operands are made, so the
  arithmetic that a slice or a concat interrupted still shares a loop with its operands. A value
  read only inside its loop is a local and never stored;
- a value read elsewhere is stored in a buffer: a slice of a workspace made once per scan
  (``pool``: kept across calls, zeros when first made; a thread takes one no other thread
  holds), and buffers whose uses do not overlap share a slot, so that a body of a hundred
  thousand elements stays in the cache as the replay's freed temporaries do;
- a concat writes its pieces into its buffer, and a loop value read only by it is stored there
  directly (a view); an update or scatter-add of one slice of a value known to be zero
  (``zeros_like``, a constant of +0.0: the pullback of a slice) keeps a buffer of its own, zero
  where the key does not reach at every step, and its value is stored into the key's view as
  ``0.0 + v`` (NumPy's ``zeros[key] += v`` turns -0.0 into +0.0), or ``v`` for ``setitem``;
- slices (``getitem``) are views, as before; the carry is copied into its buffer at the end of
  the step (a new carry may be an old one or a view of one).

The arithmetic is the replay's bit for bit (each element is the same IEEE operation on the same
operands: no fast-math, no contraction into fused multiply-adds), the functions within an ulp
as above; only a nan's sign may differ, which IEEE leaves open. Everything else in the body
(other dtypes, other shapes, reductions, products) stays an array expression.
"""

import numpy as np

from .lower_numba import _load, _size
from .scan_lower import Unsupported

_DTYPES = ("float64", "int64", "bool")
# carries of at most this many elements are packed into one output array per dtype (numba's
# call costs about a quarter of a microsecond per argument)
PACK_MAX = 1024
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


def _scalar_expr(e, ins):
    """The NumPy meaning of elementwise instruction ``e`` at one element, as a numba scalar
    expression of the operands' scalars ``ins`` (float64 arithmetic, comparisons of float64,
    ``where``, logical operations of bools), or None."""
    name = e.prim.xp_name or e.prim.name
    if name in _ARITH and len(ins) == 2:
        return f"({ins[0]} {_ARITH[name]} {ins[1]})"
    if name in _COMPARE and len(ins) == 2:
        return f"({ins[0]} {_COMPARE[name]} {ins[1]})"
    if name in _LOGICAL and len(ins) == 2:
        return f"({ins[0]} {'!=' if name.endswith('xor') else name.split('_')[-1]} {ins[1]})"
    if name in ("logical_not", "bitwise_invert") and len(ins) == 1:
        return f"(not {ins[0]})"
    if name in _UNARY and len(ins) == 1:
        return _UNARY[name].format(ins[0])
    if name in _BINARY_FUNCTIONS and len(ins) == 2:
        return f"{_BINARY_FUNCTIONS[name]}({ins[0]}, {ins[1]})"
    if name == "pow" and len(ins) == 2:
        y = e.ins[1]
        if not hasattr(y, "shape"):   # (as the array statements: 0.5 is a sqrt, 2 a square)
            if y.value == 0.5:
                return f"np.sqrt({ins[0]})"
            if y.value == 2:
                return f"({ins[0]} * {ins[0]})"
        elif y.shape == () or tuple(y.shape) != tuple(e.outs[0].shape):
            return f"(np.sqrt({ins[0]}) if {ins[1]} == 0.5 else {ins[0]} ** {ins[1]})"
        return f"({ins[0]} ** {ins[1]})"
    if name in _SPECIAL:
        return _SPECIAL[name](True, *ins)
    if name == "where" and len(ins) == 3:
        return f"({ins[1]} if {ins[0]} else {ins[2]})"
    return None


def _slice_of(key, n):
    """(start, step, count) of the elements of a 1-d value of ``n`` elements that ``key``
    selects, where it is one slice (and Ellipsis), else None."""
    parts = [k for k in key if k is not Ellipsis]
    if len(parts) != 1 or type(parts[0]) is not slice or not all(
            p is None or type(p) is int for p in (parts[0].start, parts[0].stop, parts[0].step)):
        return None
    r = range(n)[parts[0]]
    return r.start, r.step, len(r)


class _Loops(_Body):
    """The body's 1-d float64 values as element loops into buffers of a workspace kept across
    calls (NOTE [array loops]); the other instructions as the array statements of ``_Body``."""

    def __init__(self, prog, outs):
        super().__init__(prog)
        self.pro = []         # statements before the step loop (buffers, views of buffers)
        self.own = set()      # the values whose storage is one of these buffers (or a view)
        self.buffered = set()  # those and the array statements' values that may view them
        self.zero = set()     # the values known to be all zeros (+0.0)
        self.count = 0        # (numbers the buffers and the loops' scalars)
        self.space = {}       # dtype name -> elements of its workspace
        self.bufs = []        # (name, dtype name, elements, of zeros) of each buffer
        self.views = []       # statements making the views of buffers
        self.roots = {}       # value -> the buffers it is in (or may view)
        self.unit = 0         # the statement being made (a loop, a concat...)
        self.first, self.last = {}, {}   # buffer -> the first and last statements using it
        self.plan(outs)

    def fresh(self, prefix):
        self.count += 1
        return f"{prefix}{self.count}"

    # -- the plan: which instructions run as loops, grouped, and where each value is stored
    def loop_length(self, e):
        """The element count of elementwise instruction ``e``'s loop, or None (an array
        statement computes it)."""
        if not e.prim.elementwise or e.params or len(e.outs) != 1 or e.prim.multiple_results:
            return None
        out = e.outs[0]
        if len(out.shape) != 1 or out.shape[0] < 1:
            return None
        m = out.shape[0]
        name = e.prim.xp_name or e.prim.name
        arrays = [a for a in e.ins if hasattr(a, "shape")]
        if any(tuple(a.shape) not in ((m,), (1,), ()) for a in arrays):
            return None
        dts = [getattr(a.dtype, "name", None) for a in arrays]
        lits = [a.value for a in e.ins if not hasattr(a, "shape")]
        if any(not isinstance(x, (int, float)) or isinstance(x, bool) for x in lits):
            return None   # (a bool or complex literal: the array statement)
        if name in _LOGICAL or name in ("logical_not", "bitwise_invert"):
            ok = out.dtype.name == "bool" and all(d == "bool" for d in dts) and not lits
        elif name == "where":
            ok = out.dtype.name == "float64" and len(e.ins) == 3 and dts[:1] == ["bool"] \
                and hasattr(e.ins[0], "shape") and all(d == "float64" for d in dts[1:])
        elif name in _COMPARE:
            ok = out.dtype.name == "bool" and all(d == "float64" for d in dts)
        else:
            ok = out.dtype.name == "float64" and all(d == "float64" for d in dts)
        return m if ok and _scalar_expr(e, ["x"] * len(e.ins)) is not None else None

    def one_slice(self, e):
        """(start, step, count) of a 1-d ``index_add`` (``x[key] += v``) or ``setitem``
        (``x[key] = v``) of one slice, or None."""
        if e.prim.name not in ("index_add", "setitem") or len(e.ins) != 2 or len(e.outs) != 1:
            return None
        base, v = e.ins
        out = e.outs[0]
        if not hasattr(base, "shape") or len(out.shape) != 1 \
                or getattr(out.dtype, "name", None) != "float64" \
                or getattr(base.dtype, "name", None) != "float64" \
                or (hasattr(v, "shape") and getattr(v.dtype, "name", None) != "float64"):
            return None
        sl = _slice_of(e.params.get("key", ()), out.shape[0])
        if sl is None or (hasattr(v, "shape") and tuple(v.shape) not in ((sl[2],), (1,), ())):
            return None
        return sl

    def plan(self, outs):
        eqns = self.prog.eqns
        # the statements in the order they run: ("g", loop number) or ("e", instruction
        # number); an elementwise instruction joins the first loop of its length that runs
        # after its operands are made (in that loop, or before it), so that a value and the
        # arithmetic on it share a loop even where other instructions were written between
        self.order, self.groups, self.group = [], [], {}
        at, loops = {}, {}   # value -> its statement's place in order; length -> loops' places
        for k, e in enumerate(eqns):
            m = self.loop_length(e)
            after = max((at.get(a, -1) for a in e.ins if hasattr(a, "shape")), default=-1)
            if m is None:
                self.order.append(("e", k))
                for o in e.outs:
                    at[o] = len(self.order) - 1
                continue
            place = next((u for u in loops.get(m, []) if u >= after), None)
            if place is None:
                place = len(self.order)
                self.order.append(("g", len(self.groups)))
                self.groups.append([])
                loops.setdefault(m, []).append(place)
            g = self.order[place][1]
            self.groups[g].append(k)
            self.group[k] = g
            at[e.outs[0]] = place
        defined_in = {e.outs[0]: self.group[k] for k, e in enumerate(eqns) if k in self.group}
        # a loop's value is stored where something outside its loop reads it
        self.stored = set(v for v in outs if v in defined_in)
        self.uses = {}
        for k, e in enumerate(eqns):
            for a in e.ins:
                if hasattr(a, "shape"):
                    self.uses[a] = self.uses.get(a, 0) + 1
                    if a in defined_in and self.group.get(k) != defined_in[a]:
                        self.stored.add(a)
        for v in outs:
            if hasattr(v, "shape"):
                self.uses[v] = self.uses.get(v, 0) + 1
        for e in eqns:
            if e.prim.name == "zeros_like" and len(e.outs[0].shape) == 1 \
                    and e.outs[0].dtype.name == "float64" \
                    and not (e.params.get("dtype") or e.params.get("device")):
                self.zero.add(e.outs[0])
        # a zeros_like read only as the base of scatter-adds into zeros needs no buffer
        self.read_zeros = set(v for v in outs if v in self.zero)
        for e in eqns:
            skip = 1 if self.one_slice(e) is not None else 0
            self.read_zeros.update(a for a in e.ins[skip:] if a in self.zero)
        # where a stored loop value is read only by a concat or a scatter-add into zeros, its
        # loop writes into that instruction's buffer (no copy)
        # value -> (the view's source, prefix of the store, the value whose buffer it views,
        # whether that buffer is one of zeros)
        self.into = {}
        for k, e in enumerate(eqns):
            if e.prim.name == "concat" and self.concat_ok(e):
                off = 0
                for a in e.ins:
                    if a in defined_in and self.uses[a] == 1 and a not in outs:
                        self.into[a] = (f"{{}}[{off}:{off + a.shape[0]}]", "", e.outs[0],
                                        False)
                    off += a.shape[0]
            sl = self.one_slice(e)
            if sl is not None and self.is_zero(e.ins[0]):
                v = e.ins[1]
                if v in defined_in and self.uses[v] == 1 and v not in outs \
                        and tuple(v.shape) == (sl[2],):
                    start, step, count = sl
                    stop = start + step * count
                    stop = "" if stop < 0 else stop
                    # (the scatter-add's 0.0 + v: -0.0 becomes +0.0, as NumPy's add)
                    add = "0.0 + " if e.prim.name == "index_add" else ""
                    self.into[v] = (f"{{}}[{start}:{stop}:{step}]", add, e.outs[0], True)

    def concat_ok(self, e):
        out = e.outs[0]
        return len(out.shape) == 1 and e.params.get("axis", 0) in (0, -1) and all(
            hasattr(a, "shape") and len(a.shape) == 1 and a.dtype == out.dtype for a in e.ins) \
            and getattr(out.dtype, "name", None) in _DTYPES

    def is_zero(self, a):
        if a in self.zero:
            return True
        c = self.prog.consts.get(a) if hasattr(a, "shape") else None
        return c is not None and np.asarray(c).dtype == np.float64 \
            and not np.any(np.asarray(c)) and not np.any(np.signbit(np.asarray(c)))

    # -- the statements
    def slot(self, dt, n):
        """The source of ``n`` elements of the workspace of dtype ``dt`` (NOTE [array loops]:
        zeros when first made, kept across calls)."""
        at = self.space.get(dt, 0)
        self.space[dt] = at + -(-n // 8) * 8   # (each slot 64-byte aligned)
        return f"w_{dt}[{at}:{at + n}]"

    def touch(self, a):
        """Value ``a`` is read or written by the statement being made: the buffers it is in
        stay in use until then."""
        for r in self.roots.get(a, ()):
            self.first.setdefault(r, self.unit)
            self.last[r] = self.unit

    def buffer(self, v, zeros=False):
        """The buffer of value ``v`` (``zeros``: a value that stays zero, in the parts of it
        no statement writes: its buffer is its own), placed in the workspace by ``finish``."""
        if v in self.names and v in self.own:
            return self.names[v]
        n = self.fresh("b")
        self.names[v] = n
        self.own.add(v)
        self.buffered.add(v)
        self.bufs.append((n, v.dtype.name, v.shape[0], zeros))
        self.roots[v] = {n}
        return n

    def place(self, v):
        """The name of loop value ``v``'s storage: its buffer, or a view of the buffer of the
        concat or scatter-add that reads it (made before the step loop)."""
        if v not in self.into:
            return self.buffer(v)
        view, _, host, zeros = self.into[v]
        hn = self.buffer(host, zeros=zeros)
        n = self.fresh("b")
        self.views.append(f"{n} = {view.format(hn)}")
        self.names[v] = n
        self.own.add(v)
        self.buffered.add(v)
        self.roots[v] = {hn}
        return n

    def read(self, a, local, m):
        """Operand ``a`` at element ``q`` of a loop of ``m`` elements."""
        if not hasattr(a, "shape"):
            return _literal(a.value)
        if a in local:
            return local[a]
        self.touch(a)
        if a.shape == ():
            return self.names[a]
        return f"{self.names[a]}[{'q' if a.shape[0] == m else 0}]"

    def run(self, outs):
        eqns = self.prog.eqns
        for kind, k in self.order:
            self.unit += 1
            if kind == "g":
                self.loop([eqns[j] for j in self.groups[k]])
                continue
            e = eqns[k]
            self.dtype(e.outs[0]) if len(e.outs) == 1 else None
            if e.prim.name == "concat" and self.concat_ok(e):
                self.concat(e)
            elif self.one_slice(e) is not None:
                self.scatter_add(e)
            elif e.outs[0] in self.zero:
                if e.outs[0] in self.read_zeros:   # (never written: zero at every step)
                    self.buffer(e.outs[0], zeros=True)
            else:
                for a in e.ins:
                    self.touch(a)
                self.eqn(e)
                # (an array statement may return a view of a buffer: it keeps the buffer in
                # use, and a carry made of it is copied, see ArrayScan)
                roots = set().union(*(self.roots.get(a, ()) for a in e.ins))
                if roots:
                    self.buffered.update(e.outs)
                    for o in e.outs:
                        self.roots[o] = roots
        self.unit += 1   # (the ys and carries are read at the end of the step)
        for v in outs:
            self.touch(v)

    def loop(self, members):
        m = members[0].outs[0].shape[0]
        local, body = {}, []
        for e in members:
            v = e.outs[0]
            s = self.fresh("s")
            local[v] = s
            expr = _scalar_expr(e, [self.read(a, local, m) for a in e.ins])
            body.append(f"{s} = {expr}")
            if v in self.stored or v in self.into:
                name = self.place(v)
                self.touch(v)
                prefix = self.into[v][1] if v in self.into else ""
                body.append(f"{name}[q] = {prefix}{s}")
            else:
                self.names[v] = s   # (read by its loop only)
        self.lines.append(f"for q in range({m}):")
        self.lines += ["    " + b for b in body]

    def concat(self, e):
        out = e.outs[0]
        n = self.buffer(out)
        self.touch(out)
        off = 0
        for a in e.ins:
            if a not in self.into:
                self.touch(a)
                self.lines.append(f"for q in range({a.shape[0]}):")
                self.lines.append(f"    {n}[{off} + q] = {self.names[a]}[q]")
            off += a.shape[0]

    def scatter_add(self, e):
        base, v = e.ins
        start, step, count = self.one_slice(e)
        out = e.outs[0]
        if self.is_zero(base):
            n = self.buffer(out, zeros=True)   # (zero where the key does not reach, always)
            self.touch(out)
            if v in self.into:
                return
            val = self.read(v, {}, count) if hasattr(v, "shape") else _literal(v.value)
            add = "0.0 + " if e.prim.name == "index_add" else ""
            self.lines.append(f"for q in range({count}):")
            self.lines.append(f"    {n}[{start} + q * {step}] = {add}{val}")
            return
        n = self.buffer(out)
        self.touch(out)
        self.touch(base)
        self.lines.append(f"for q in range({out.shape[0]}):")
        self.lines.append(f"    {n}[q] = {self.names[base]}[q]")
        val = self.read(v, {}, count) if hasattr(v, "shape") else _literal(v.value)
        self.lines.append(f"for q in range({count}):")
        self.lines.append(f"    {n}[{start} + q * {step}] "
                          f"{'+=' if e.prim.name == 'index_add' else '='} {val}")

    def finish(self):
        """The buffers placed in the workspace (a buffer shares its slot with one no longer in
        use when it is first written; a buffer of zeros has its own), before the views of
        them."""
        slots = {}   # (dtype, elements) -> [[source, last use]]
        for n, dt, size, zeros in self.bufs:
            first, last = self.first.get(n, 0), self.last.get(n, 0)
            free = None if zeros else next(
                (sl for sl in slots.get((dt, size), []) if sl[1] < first), None)
            if free is None:
                free = [self.slot(dt, size), last]
                if not zeros:
                    slots.setdefault((dt, size), []).append(free)
            free[1] = max(free[1], last)
            self.pro.append(f"{n} = {free[0]}")
        self.pro += self.views
        return self.lines


class ArrayScan:
    """A scan's whole loop as one numba function of array statements (NOTE [array scan]):
    ``self(args, length)`` returns the primitive's outputs (carry, stacked ys, history when
    ``save``) from its arguments (closure, carry, xs)."""

    def __init__(self, body, nc, ncarry, reverse, save):
        prog = body.prog
        self.nc, self.ncarry, self.save = nc, ncarry, save
        ins, outs = prog.in_vars, prog.outs
        low = _Loops(prog, [v for v in outs if hasattr(v, "shape")])
        params, pro, loop = [], [], []
        for j, v in enumerate(ins):
            low.dtype(v)
            params.append(f"a{j}")
            low.names[v] = f"v{j}"
            if j < nc + ncarry:   # (closure and carry: one value; a 0-d one as a number)
                if v.shape == ():
                    pro.append(f"v{j} = a{j}[0]")
                elif j >= nc and len(v.shape) == 1:
                    # (a 1-d carry is a buffer, overwritten at the end of each step)
                    pro += [f"v{j} = {low.slot(v.dtype.name, v.shape[0])}", f"v{j}[:] = a{j}"]
                else:
                    pro.append(f"v{j} = a{j}")
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
        low.run(outs)
        loop += low.finish()
        pro += low.pro
        for j, v in enumerate(outs[ncarry:]):
            if not hasattr(v, "shape"):
                raise Unsupported("a literal output")
            low.dtype(v)
            params.append(f"y{j}")
            loop.append(f"y{j}[i] = {low.name(v)}")
        post, update = [], []
        self.carry_at, self.carry_slices, self.carry_own = {}, [], []
        for j, v in enumerate(outs[:ncarry]):
            src = low.name(v)
            new = f"v{nc + j}"
            if v.shape != () and len(v.shape) == 1:
                # (copied into the carry's buffer once every new carry is known: a new carry
                # other than a buffer of its own may be an old carry, or a view of one)
                if v in low.own:
                    update.append(f"{new}[:] = {src}")
                else:
                    loop.append(f"n{j} = {src}.copy()")
                    update.append(f"{new}[:] = n{j}")
            else:   # (a buffer, or a view of one, is overwritten at the next step: copied)
                loop.append(f"n{j} = {src}" if v.shape == () else
                            f"n{j} = {src}.copy()" if v in low.buffered else
                            f"n{j} = np.ascontiguousarray({src})")
                update.append(f"{new} = n{j}")
            # (a large carry has its own array: a large packed one, dropped after the call,
            # costs page faults at every call)
            if _size(v.shape) > PACK_MAX:
                self.carry_slices.append((None, len(self.carry_own), tuple(v.shape)))
                self.carry_own.append((_size(v.shape), np.dtype(v.dtype.name)))
                params.append(f"r{j}")
                post.append(f"r{j}[:] = {new}.ravel()")
                continue
            at = self.carry_at.setdefault(v.dtype.name, 0)
            self.carry_at[v.dtype.name] = at + _size(v.shape)
            self.carry_slices.append((v.dtype.name, at, tuple(v.shape)))
            post.append(f"c_{v.dtype.name}[{at}] = {new}" if v.shape == () else
                        f"c_{v.dtype.name}[{at}:{at + _size(v.shape)}] = {new}.ravel()")
        params += [f"c_{dt}" for dt in sorted(self.carry_at)]
        loop += update
        step = "i = n - 1 - it" if reverse else "i = it"
        self.space = sorted(low.space.items())
        params += [f"w_{dt}" for dt, _ in self.space]
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
        self.pool = []   # workspaces not in use (a call takes one, or makes one)

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
        own = [np.empty(n, d) for n, d in self.carry_own]
        packed = {dt: np.empty(n, np.dtype(dt)) for dt, n in sorted(self.carry_at.items())}
        # (a list's pop and append are atomic: two threads never share a workspace)
        space = self.pool.pop() if self.pool else \
            [np.zeros(n, np.dtype(dt)) for dt, n in self.space]
        self.fn(length, *ins, *self.consts, *hist, *ys, *own, *packed.values(), *space)
        self.pool.append(space)
        carry = [own[at].reshape(s) if dt is None else packed[dt][at:at + _size(s)].reshape(s)
                 for dt, at, s in self.carry_slices]
        return tuple(carry + ys + hist)
