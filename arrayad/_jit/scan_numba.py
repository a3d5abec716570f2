"""A whole ``scan`` on NumPy as one numba function (NOTE [compiled scan]).

NOTE [compiled scan]
--------------------
The replay of a scan (``_scan_impl`` in ``arrayad/_control.py``) makes one NumPy call per
instruction of the body per step: on the small arrays of an ODE integrator or a recurrence
(4 elements), each call costs a microsecond of dispatch for nanoseconds of arithmetic. When the
backend is NumPy, numba is installed and every instruction of the body is one this module knows,
the whole loop (every step, the carry history when ``save``, the stacked ys) becomes one
``numba.njit`` function instead; otherwise the replay runs. The VJP of a scan is a scan of the
body's pullback, so the backward pass is compiled the same way.

The body's arrays have static, small shapes, so the generated code is *scalar*: each element of
each value is one local variable (``t12_3``: element 3 of v12), each elementwise instruction one
statement per element, and the structural instructions (indexing, reshape, concat, broadcast,
permute, flip...) generate no code at all: they only rename elements. Which element of the
inputs each output element is comes from running the primitive's own NumPy implementation on
arrays of element numbers, so the lowerer has one rule for all of them (``gather``), and the
transposes (``index_add``) and reductions (``sum``) use the same element numbers. The carry lives
in locals across steps; xs, ys and the history are 2-d arrays (step, element), packed per
dtype (``_Pack``: numba's compile time grows with the number of arguments); the program's
constants are literals of the source.

Numerics: every statement keeps its value's dtype (numba's scalar arithmetic keeps float32 and
float64; a narrower int, widened by numba, is cast back), literals are converted to it as NumPy
converts a Python scalar, IEEE semantics (no fastmath; ``error_model='numpy'``: 1/0 is inf), and
NumPy's special cases are kept (a power of exponent 0.5 given as one number is a sqrt; sign,
maximum and minimum of nan). The transcendental functions are LLVM's/libm's (an ulp from NumPy's
loops at most); a sum adds in order (NumPy's pairwise sum may round differently beyond 8
elements).

When: the replay costs about a microsecond per instruction and step; compiling costs seconds
the first time (numba's start, then some milliseconds per scalar statement: 1.6 s for the
forward and backward loops of the RK4 benchmark's gradient, 4 s on a busy machine), about half a
second in a later process (mostly numba's import), where numba's on-disk cache has it (the source is written to a file named by its hash, as the fused
kernels of ``lower_numba.py``). A scan is
compiled when steps x instructions reach ``MIN_WORK``, and when its body has at most
``MAX_STATEMENTS`` scalar statements (compile time grows with them). ``ARRAYAD_SCAN_NUMBA=0``
(or ``ENABLED = False``) turns it off.
"""

import math
import os

import numpy as np

from .lower_numba import _BINARY, _UNARY, _load, _size, available
from .replay import _callable

ENABLED = os.environ.get("ARRAYAD_SCAN_NUMBA", "1") != "0"
# compiled from this many steps x instructions on (about half a second of replay: compiling
# takes seconds the first time, half a second once numba's cache has it)
MIN_WORK = 500_000
# bodies of more scalar statements are replayed (numba's compile time grows with them)
MAX_STATEMENTS = 3000
# a value of more elements makes the body replayed (its elements are locals)
MAX_ELEMENTS = 256

runs = 0   # compiled loops run in this process (for the tests)
refused = None   # why the last body the lowerer saw is replayed (for the tests)

_DTYPES = ("float32", "float64", "int32", "int64", "bool")
_STRUCTURAL = ("getitem", "reshape", "concat", "broadcast_to", "permute_dims", "flip", "roll",
               "tile", "repeat", "copy", "stop_gradient", "positive")
_COMPARE = {"equal": "==", "not_equal": "!=", "less": "<", "less_equal": "<=",
            "greater": ">", "greater_equal": ">="}
_LOGICAL = {"logical_and": "({0} and {1})", "logical_or": "({0} or {1})",
            "logical_xor": "({0} != {1})"}
# NaN propagates as in NumPy's maximum/minimum
_MINMAX = {"maximum": "({0} if ({0} >= {1} or {0} != {0}) else {1})",
           "minimum": "({0} if ({0} <= {1} or {0} != {0}) else {1})"}
_MORE_UNARY = {"floor": "np.floor({0})", "ceil": "np.ceil({0})", "reciprocal": "({one} / {0})",
               # (NumPy's: 0 for both zeros, nan for nan)
               "sign": "({one} if {0} > 0 else (-{one} if {0} < 0 else "
                       "({0} if {0} != {0} else {zero})))"}
_INT_OK = ("add", "subtract", "multiply", "negative", "positive", "square", "abs")


class Unsupported(Exception):
    """The body has something the lowerer does not compile: the replay runs."""


def _dt(dtype):
    name = getattr(dtype, "name", None)
    if name not in _DTYPES:
        raise Unsupported(f"dtype {dtype}")
    return name


def _ctor(name):
    return "np.bool_" if name == "bool" else f"np.{name}"


def _literal(value, dt):
    """Python source of a scalar in dtype ``dt``, as NumPy converts it (a weak scalar): a bare
    literal where numba types it so (float64, int64, bool), else a call (hoisted by
    ``_Lowering.literal``)."""
    if isinstance(value, (bool, np.bool_)):
        if dt == "bool":
            return "True" if value else "False"
        value = int(value)
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        if dt == "bool":
            raise Unsupported("an int literal in a bool operation")
        if dt.startswith("int"):
            return str(int(value)) if dt == "int64" else f"{_ctor(dt)}({int(value)})"
        value = float(value)
    if isinstance(value, (float, np.floating)):
        if not dt.startswith("float"):
            raise Unsupported("a float literal in an integer operation")
        v = float(value)
        if math.isnan(v):
            s = "np.nan"
        elif math.isinf(v):
            s = "np.inf" if v > 0 else "-np.inf"
        else:
            s = repr(v)
        return s if dt == "float64" and math.isfinite(v) else f"{_ctor(dt)}({s})"
    raise Unsupported(f"literal {value!r}")


class _Lowering:
    """The scalar statements of one body (NOTE [compiled scan])."""

    def __init__(self, prog):
        self.prog = prog
        self.names = {}     # Var -> list of scalar expressions (C order)
        self.types = {}     # Var -> dtype name
        self.lines = []     # statements of one step
        self.head = []      # statements before the loop (literals of a call)
        self.lits = {}      # literal source -> its local
        self.ids = {}       # Var -> its number in the source

    def define(self, v, names):
        if len(names) != _size(v.shape):
            raise Unsupported("element count")
        self.names[v] = names
        self.types[v] = _dt(v.dtype)

    def literal(self, value, dt):
        src = _literal(value, dt)
        if "(" not in src:
            return src
        if src not in self.lits:   # (a call made once, before the loop)
            self.lits[src] = f"l{len(self.lits)}"
            self.head.append(f"{self.lits[src]} = {src}")
        return self.lits[src]

    def emit(self, v, k, expr):
        # (numbered in the program's order, not by the global count of variables: the same
        # body gives the same source, whatever was traced before, and finds numba's cache)
        name = f"t{self.ids.setdefault(v, len(self.ids))}_{k}"
        dt = _dt(v.dtype)
        # (numba keeps float32, float64, int64 and bool; a narrower int is widened: cast back)
        self.lines.append(f"{name} = {expr}" if dt in ("float32", "float64", "int64", "bool")
                          else f"{name} = {_ctor(dt)}({expr})")
        return name

    def operand(self, a, out_shape, dt):
        """Per element of ``out_shape``: operand ``a`` (broadcast) as scalars of dtype ``dt``."""
        n = _size(out_shape)
        if not hasattr(a, "shape"):
            return [self.literal(a.value, dt)] * n
        names = self.names[a]
        src = self.types[a]
        idx = np.broadcast_to(np.arange(len(names)).reshape(a.shape), out_shape).ravel()
        if src == dt:
            return [names[i] for i in idx]
        if dt == "bool":
            return [f"({names[i]} != 0)" for i in idx]
        return [f"{_ctor(dt)}({names[i]})" for i in idx]

    # -- instructions
    def eqn(self, e):
        name = e.prim.xp_name or e.prim.name
        if e.prim.multiple_results or len(e.outs) != 1 or getattr(e.prim, "prog", None):
            raise Unsupported(e.prim.name)
        out = e.outs[0]
        if _size(out.shape) > MAX_ELEMENTS:
            raise Unsupported("a large value")
        dt = _dt(out.dtype)
        if e.prim.name in _STRUCTURAL:
            return self.gather(e, out)
        if e.prim.name == "index_add":
            return self.index_add(e, out, dt)
        if e.prim.name == "sum":
            return self.sum(e, out, dt)
        if e.prim.name in ("zeros_like", "ones_like", "full_like"):
            value = {"zeros_like": 0, "ones_like": 1}.get(e.prim.name,
                                                         e.params.get("fill_value"))
            return self.define(out, [self.literal(value, dt)] * _size(out.shape))
        if e.prim.name == "astype":
            if dt.startswith("int") and self.types[e.ins[0]].startswith("float"):
                # (NumPy's cast of nan or of a value out of range is its own; numba's differs)
                raise Unsupported("a cast of floats to integers")
            return self.elementwise(e, out, dt, "{0}", [dt])
        if e.prim.name == "where":
            return self.elementwise(e, out, dt, "({1} if {0} else {2})", ["bool", dt, dt])
        if not e.prim.elementwise or e.params:
            raise Unsupported(e.prim.name)
        if name in _COMPARE:
            cdt = self.common(e.ins)
            return self.elementwise(e, out, dt, f"({{0}} {_COMPARE[name]} {{1}})", [cdt, cdt])
        if name in _LOGICAL or name == "logical_not":
            tmpl = _LOGICAL.get(name, "(not {0})")
            return self.elementwise(e, out, dt, tmpl, ["bool"] * len(e.ins))
        table = {**_BINARY, **_MINMAX} if len(e.ins) == 2 else \
            {**_UNARY, **_MORE_UNARY} if len(e.ins) == 1 else {}
        if name not in table or (not dt.startswith("float") and name not in _INT_OK):
            raise Unsupported(name)
        if name == "pow" and dt.startswith("float"):
            # (NumPy's power takes sqrt for an exponent 0.5 that is one number, a literal, a 0-d
            # or a broadcast array: (-inf) ** 0.5 is nan there, inf in C's pow)
            y = e.ins[1]
            if not hasattr(y, "shape"):
                if isinstance(y.value, (int, float)) and y.value == 0.5:
                    return self.elementwise(e, out, dt, "np.sqrt({0})", [dt, dt])
            elif y.shape == () or tuple(y.shape) != tuple(out.shape):
                return self.elementwise(e, out, dt, "(np.sqrt({0}) if {1} == 0.5 else {0} ** {1})",
                                        [dt, dt])
        tmpl = table[name].replace("{one}", self.literal(1, dt)) \
            .replace("{zero}", self.literal(0, dt))
        return self.elementwise(e, out, dt, tmpl, [dt] * len(e.ins))

    def common(self, ins):
        dts = [np.dtype(self.types[a]) for a in ins if hasattr(a, "shape")]
        if not dts:
            raise Unsupported("a comparison of literals")
        dt = np.result_type(*dts).name
        if any(isinstance(a.value, float) for a in ins if not hasattr(a, "shape")) \
                and not dt.startswith("float"):
            raise Unsupported("an integer compared with a float literal")
        return _dt(np.dtype(dt))

    def elementwise(self, e, out, dt, tmpl, in_dts):
        ops = [self.operand(a, out.shape, d) for a, d in zip(e.ins, in_dts)]
        if tmpl == "{0}" and self.types.get(e.ins[0]) == dt:   # (a cast to its own dtype)
            return self.define(out, ops[0])
        self.define(out, [self.emit(out, k, tmpl.format(*args))
                          for k, args in enumerate(zip(*ops))] if ops else [])

    def positions(self, e, arrays):
        """The primitive's NumPy implementation on arrays of element numbers."""
        fn, takes_xp = _callable(e.prim, self.prog.backend)
        try:
            r = fn(*([np] if takes_xp else []), *arrays, **e.params)
        except Exception as exc:   # (a parameter the element numbers do not take)
            raise Unsupported(f"{e.prim.name}: {exc}")
        return np.asarray(r)

    def gather(self, e, out):
        flat, arrays = [], []
        for a in e.ins:
            if not hasattr(a, "shape"):
                raise Unsupported(f"a literal argument of {e.prim.name}")
            if self.types[a] != _dt(out.dtype):
                raise Unsupported(f"{e.prim.name} changing the dtype")
            arrays.append(np.arange(len(flat), len(flat) + len(self.names[a]))
                          .reshape(a.shape))
            flat += self.names[a]
        pos = self.positions(e, arrays)
        if tuple(pos.shape) != tuple(out.shape) or pos.dtype.kind != "i":
            raise Unsupported(f"{e.prim.name} on element numbers")
        self.define(out, [flat[i] for i in pos.ravel()])

    def index_add(self, e, out, dt):
        if len(e.ins) != 2 or not hasattr(e.ins[0], "shape"):
            raise Unsupported("index_add with index arrays")
        base, v = e.ins
        fn, takes_xp = _callable(_getitem(), self.prog.backend)
        try:
            pos = np.asarray(fn(*([np] if takes_xp else []),
                                np.arange(_size(base.shape)).reshape(base.shape),
                                key=e.params["key"]))
        except Exception as exc:
            raise Unsupported(f"index_add: {exc}")
        vals = self.operand(v, pos.shape, dt)
        cur = list(self.operand(base, out.shape, dt))
        for k, (p, x) in enumerate(zip(pos.ravel(), vals)):
            cur[p] = self.emit(out, f"{p}_{k}", f"{cur[p]} + {x}")
        self.define(out, cur)

    def sum(self, e, out, dt):
        (a,) = e.ins
        nd = len(a.shape)
        axis = e.params.get("axis")
        axes = tuple(range(nd)) if axis is None else \
            tuple(x % nd for x in (axis if isinstance(axis, tuple) else (axis,)))
        rest = [d for d in range(nd) if d not in axes]
        rows = np.transpose(np.arange(_size(a.shape)).reshape(a.shape), rest + list(axes))
        rows = rows.reshape(_size(out.shape), -1)
        names = self.operand(a, a.shape, dt)
        zero = self.literal(0, dt)
        self.define(out, [self.emit(out, k, " + ".join([names[i] for i in row]) or zero)
                          for k, row in enumerate(rows)])


def _getitem():
    from .._core import _core
    return _core._PRIMITIVES["getitem"]


class _Pack:
    """Arrays of one role packed into one array per dtype (numba's compile time grows with the
    number of arguments: a hundred closure scalars would be a hundred arguments)."""

    def __init__(self, prefix, per_step):
        self.prefix, self.per_step = prefix, per_step
        self.groups = {}   # dtype name -> list of element counts
        self.members = []  # (dtype name, element count) in the order of ``add``

    def add(self, dt, n):
        """(array name, offset) of a new member of ``n`` elements of dtype ``dt``."""
        sizes = self.groups.setdefault(dt, [])
        sizes.append(n)
        self.members.append((dt, n))
        return f"{self.prefix}_{dt}", sum(sizes) - n

    def params(self):
        return [f"{self.prefix}_{dt}" for dt in sorted(self.groups)]

    def rows(self):
        """Statements taking step ``i``'s row of each per-step array."""
        return [f"{self.prefix}r_{dt} = {self.prefix}_{dt}[i]" for dt in sorted(self.groups)]

    def pack(self, arrays, length=None):
        """The packed arrays of ``arrays`` (in the order of ``add``)."""
        by = {dt: [] for dt in self.groups}
        for (dt, n), a in zip(self.members, arrays):
            a = np.asarray(a)
            by[dt].append(a.reshape(length, n) if self.per_step else a.reshape(n))
        out = []
        for dt in sorted(self.groups):
            parts = by[dt]
            out.append(np.ascontiguousarray(parts[0]) if len(parts) == 1 else
                       np.concatenate(parts, axis=-1))
        return out

    def empty(self, length=None):
        return [np.empty(((length,) if self.per_step else ()) + (sum(self.groups[dt]),),
                         np.dtype(dt)) for dt in sorted(self.groups)]

    def unpack(self, packed, shapes, length=None):
        """The members of the packed arrays, shaped ``shapes`` (after the steps' axis)."""
        offs = {dt: 0 for dt in self.groups}
        arrays = dict(zip(sorted(self.groups), packed))
        out = []
        for (dt, _), shape in zip(self.members, shapes):
            n, o = _size(shape), offs[dt]
            offs[dt] = o + n
            a = arrays[dt]
            part = a[:, o:o + n] if self.per_step else a[o:o + n]
            lead = (length,) if self.per_step else ()
            out.append(np.ascontiguousarray(part).reshape(lead + tuple(shape)))
        return out


class CompiledScan:
    """A scan's whole loop as one numba function: ``self(args, length)`` returns the
    primitive's outputs (carry, stacked ys, history when ``save``) from its arguments (closure,
    carry, xs)."""

    def __init__(self, body, nc, ncarry, reverse, save):
        prog = body.prog
        self.nc, self.ncarry, self.save = nc, ncarry, save
        ins, outs = prog.in_vars, prog.outs
        low = _Lowering(prog)
        # per call: closure, carry, constants; per step: xs; per step out: ys, history;
        # at the end: the carry
        P, X, Y, C = _Pack("p", False), _Pack("x", True), _Pack("y", True), _Pack("c", False)
        pro, loop, post = [], [], []

        def member(pack, v):
            if _size(v.shape) > MAX_ELEMENTS:
                raise Unsupported("a large input or output")
            return pack.add(_dt(v.dtype), _size(v.shape)), _size(v.shape)

        for j, v in enumerate(ins):
            names = [f"a{j}_{k}" for k in range(_size(v.shape))]
            low.define(v, names)
            if j < nc + ncarry:
                (arr, o), n = member(P, v)
                pro += [f"{x} = {arr}[{o + k}]" for k, x in enumerate(names)]
            else:
                (arr, o), n = member(X, v)
                loop += [f"{x} = xr{arr[1:]}[{o + k}]" for k, x in enumerate(names)]
        for v, c in prog.consts.items():   # (literals in the source: no statements)
            c = np.asarray(c)
            if c.size > MAX_ELEMENTS:
                raise Unsupported("a large constant")
            if tuple(c.shape) != tuple(v.shape) or c.dtype.name != _dt(v.dtype):
                raise Unsupported("a constant of another type")
            low.define(v, [low.literal(x, c.dtype.name) for x in c.ravel().tolist()])
        if save:   # (the carry entering each step)
            for j, v in enumerate(ins[nc:nc + ncarry]):
                (arr, o), n = member(Y, v)
                loop += [f"yr{arr[1:]}[{o + k}] = {x}" for k, x in enumerate(low.names[v])]
        for e in prog.eqns:
            low.eqn(e)
            if len(low.lines) > MAX_STATEMENTS:
                raise Unsupported("too many statements")
        pro += low.head
        loop += low.lines
        ys_at = len(Y.members)
        for v in outs[ncarry:]:
            (arr, o), n = member(Y, v)
            loop += [f"yr{arr[1:]}[{o + k}] = {x}" for k, x in enumerate(low.names[v])]
        new = []
        for j, v in enumerate(outs[:ncarry]):
            a = nc + j
            (arr, o), n = member(C, v)
            for k, x in enumerate(low.names[v]):
                if x != f"a{a}_{k}":
                    loop.append(f"n{a}_{k} = {x}")
                    new.append(f"a{a}_{k} = n{a}_{k}")
                post.append(f"{arr}[{o + k}] = a{a}_{k}")
        loop += new
        self.P, self.X, self.Y, self.C = P, X, Y, C
        self.ys_at = ys_at
        step = "i = n - 1 - it" if reverse else "i = it"
        params = P.params() + X.params() + Y.params() + C.params()
        src = ["import numpy as np", "import numba", "", "",
               "@numba.njit(cache=True, error_model='numpy', nogil=True)",
               f"def kernel(n, {', '.join(params)}):"]
        src += ["    " + s for s in pro]
        src += ["    for it in range(n):", "        " + step]
        src += ["        " + s for s in X.rows() + Y.rows() + loop]
        src += ["    " + s for s in post] + ["    return 0", ""]
        self.source = "\n".join(src)
        self.in_shapes = [tuple(v.shape) for v in ins]
        self.hist_shapes = [tuple(v.shape) for v in ins[nc:nc + ncarry]] if save else []
        self.out_shapes = [tuple(v.shape) for v in outs]
        self.fn = None
        self.failed = False

    def __call__(self, args, length):
        """The outputs of the scan, or None where numba did not compile the loop (the replay
        runs: never expected, but no error of the compiler reaches the user)."""
        global refused
        if self.fn is None:
            if self.failed:
                return None
            try:
                self.fn = _load(self.source)
                return self.run(args, length)
            except Exception as exc:
                self.failed, self.fn, refused = True, None, f"numba: {exc}"
                return None
        return self.run(args, length)

    def run(self, args, length):
        global runs
        nc, ncarry = self.nc, self.ncarry
        p = self.P.pack(args[:nc + ncarry])
        x = self.X.pack(args[nc + ncarry:], length)
        y = self.Y.empty(length)
        c = self.C.empty()
        self.fn(length, *p, *x, *y, *c)
        runs += 1
        carry = self.C.unpack(c, self.out_shapes[:ncarry])
        ys = self.Y.unpack(y, self.hist_shapes + self.out_shapes[ncarry:], length)
        return tuple(carry + ys[len(self.hist_shapes):] + ys[:len(self.hist_shapes)])


def compiled_scan(body, args, length, reverse, nc, ncarry, save):
    """The compiled loop of this scan (cached on ``body``, a ``_Body``: its program's shapes
    and dtypes are fixed), or None: the replay runs."""
    global refused
    if not ENABLED or length * len(body.prog.eqns) < MIN_WORK \
            or body.prog.backend.name != "numpy":
        return None
    if not all(isinstance(a, (np.ndarray, np.generic)) for a in args):
        return None
    key = (reverse, save, nc)
    cache = body.compiled
    if key not in cache:
        k = None
        if available():
            try:
                k = CompiledScan(body, nc, ncarry, reverse, save)
            except Unsupported as exc:
                refused = str(exc)
        cache[key] = k
    return cache[key]
