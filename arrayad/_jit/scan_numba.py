"""The numba tier of a compiled scan (NOTE [compiled scan] in ``scan.py``): the whole loop on
NumPy as one ``numba.njit`` function.

The body's scalar statements (``scan_lower.py``) become the statements of the loop's source
(``t12_3``: element 3 of v12). The carry lives in locals across steps; xs, ys and the history
are 2-d arrays (step, element), packed per dtype (``_Pack``: numba's compile time grows with
the number of arguments); the program's constants are literals of the source.

Numerics: every statement keeps its value's dtype (numba's scalar arithmetic keeps float32 and
float64; a narrower int, widened by numba, is cast back), literals are converted to it as NumPy
converts a Python scalar, IEEE semantics (no fastmath; ``error_model='numpy'``: 1/0 is inf), and
NumPy's special cases are kept (a power of exponent 0.5 given as one number is a sqrt; sign,
maximum and minimum of nan). The transcendental functions are LLVM's/libm's (an ulp from NumPy's
loops at most); a sum adds in order (NumPy's pairwise sum may round differently beyond 8
elements).

Compiling costs about a second the first time (numba's start, then about a millisecond per
scalar statement: 1.2 s for the forward and backward loops of the RK4 benchmark's gradient), a
fifth of a second in a later process (mostly numba's import), where numba's on-disk cache has it
(the source is written to a file named by its hash, as the fused kernels of
``lower_numba.py``).
"""

import math

import numpy as np

from .lower_numba import _BINARY, _UNARY, _load, _size
from .scan_lower import MAX_ELEMENTS, Unsupported, _Lowering

# bodies of more scalar statements are left to the machine (numba's compile time grows with them)
MAX_STATEMENTS = 3000

_COMPARE = {"equal": "==", "not_equal": "!=", "less": "<", "less_equal": "<=",
            "greater": ">", "greater_equal": ">="}
_TEMPLATES = {
    **_BINARY, **_UNARY,
    **{name: f"({{0}} {sym} {{1}})" for name, sym in _COMPARE.items()},
    "logical_and": "({0} and {1})", "logical_or": "({0} or {1})",
    "logical_xor": "({0} != {1})", "logical_not": "(not {0})",
    # as NumPy's maximum/minimum: nan propagates, and of equal values (zeros of both signs) the
    # second is taken
    "maximum": "({0} if ({0} > {1} or {0} != {0}) else {1})",
    "minimum": "({0} if ({0} < {1} or {0} != {0}) else {1})",
    "floor": "np.floor({0})", "ceil": "np.ceil({0})", "reciprocal": "({one} / {0})",
    # (NumPy's: 0 for both zeros, nan for nan)
    "sign": "({one} if {0} > 0 else (-{one} if {0} < 0 else ({0} if {0} != {0} else {zero})))",
    "copy": "{0}", "where": "({1} if {0} else {2})",
    "pow_or_sqrt": "(np.sqrt({0}) if {1} == 0.5 else {0} ** {1})",
}


def _ctor(name):
    return "np.bool_" if name == "bool" else f"np.{name}"


def _literal(value, dt):
    """Python source of a scalar in dtype ``dt``, as NumPy converts it (a weak scalar): a bare
    literal where numba types it so (float64, int64, bool), else a call (hoisted by
    ``_SourceLowering.literal``)."""
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


class _SourceLowering(_Lowering):
    """The body's scalar statements as Python source lines of one step."""

    def __init__(self, prog):
        super().__init__(prog)
        self.lines = []     # statements of one step
        self.head = []      # statements before the loop (literals of a call)
        self.lits = {}      # literal source -> its local
        self.ids = {}       # Var -> its number in the source

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
        dt = self.dtype_name(v.dtype)
        # (numba keeps float32, float64, int64 and bool; a narrower int is widened: cast back)
        self.lines.append(f"{name} = {expr}" if dt in ("float32", "float64", "int64", "bool")
                          else f"{name} = {_ctor(dt)}({expr})")
        return name

    def scalar(self, v, k, op, args, dt):
        tmpl = _TEMPLATES[op]
        if "{one}" in tmpl or "{zero}" in tmpl:
            tmpl = tmpl.replace("{one}", self.literal(1, dt)) \
                .replace("{zero}", self.literal(0, dt))
        return self.emit(v, k, tmpl.format(*args))

    def cast(self, x, src, dt):
        return f"({x} != 0)" if dt == "bool" else f"{_ctor(dt)}({x})"

    def total(self, v, k, args, dt, op="add"):
        if op != "add":
            return super().total(v, k, args, dt, op)
        return self.emit(v, k, " + ".join(args) or self.literal(0, dt))


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
        low = _SourceLowering(prog)
        # per call: closure, carry, constants; per step: xs; per step out: ys, history;
        # at the end: the carry
        P, X, Y, C = _Pack("p", False), _Pack("x", True), _Pack("y", True), _Pack("c", False)
        pro, loop, post = [], [], []

        def member(pack, v):
            if _size(v.shape) > MAX_ELEMENTS:
                raise Unsupported("a large input or output")
            return pack.add(low.dtype_name(v.dtype), _size(v.shape)), _size(v.shape)

        for j, v in enumerate(ins):
            names = [f"a{j}_{k}" for k in range(_size(v.shape))]
            low.define(v, names)
            if j < nc + ncarry:
                (arr, o), n = member(P, v)
                pro += [f"{x} = {arr}[{o + k}]" for k, x in enumerate(names)]
            else:
                (arr, o), n = member(X, v)
                loop += [f"{x} = xr{arr[1:]}[{o + k}]" for k, x in enumerate(names)]
        low.define_constants()   # (literals in the source: no statements)
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

    def __call__(self, args, length):
        """The outputs of the scan; compiles the loop at the first call (an error of numba's is
        raised to the caller, ``scan.py``, which falls back)."""
        if self.fn is None:
            self.fn = _load(self.source)
        nc, ncarry = self.nc, self.ncarry
        p = self.P.pack(args[:nc + ncarry])
        x = self.X.pack(args[nc + ncarry:], length)
        y = self.Y.empty(length)
        c = self.C.empty()
        self.fn(length, *p, *x, *y, *c)
        carry = self.C.unpack(c, self.out_shapes[:ncarry])
        ys = self.Y.unpack(y, self.hist_shapes + self.out_shapes[ncarry:], length)
        return tuple(carry + ys[len(self.hist_shapes):] + ys[:len(self.hist_shapes)])
