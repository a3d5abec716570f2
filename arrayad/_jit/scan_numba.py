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


_HEADER = ["import numpy as np", "import numba", "", ""]
_NJIT = "@numba.njit(cache=True, error_model='numpy', nogil=True)"


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

    def __init__(self, body, nc, ncarry, reverse, save, ys=True, split=0):
        """``ys`` False: the ys are not stored (a loop run for its carry only); ``split``: the
        first ``split`` per-step inputs are packed apart (``H``, prefix ``h``), as a history
        is (NOTE [compiled sweep])."""
        prog = body.prog
        self.nc, self.ncarry, self.save = nc, ncarry, save
        ins, outs = prog.in_vars, prog.outs
        low = _SourceLowering(prog)
        # per call: closure, carry, constants; per step: xs; per step out: ys, history;
        # at the end: the carry
        P, X, Y, C = _Pack("p", False), _Pack("x", True), _Pack("y", True), _Pack("c", False)
        H = _Pack("h", True)
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
                (arr, o), n = member(H if j < nc + ncarry + split else X, v)
                loop += [f"{x} = {arr[0]}r{arr[1:]}[{o + k}]" for k, x in enumerate(names)]
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
        for v in (outs[ncarry:] if ys else []):
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
        self.P, self.X, self.Y, self.C, self.H = P, X, Y, C, H
        step = "i = n - 1 - it" if reverse else "i = it"
        self.params = P.params() + H.params() + X.params() + Y.params() + C.params()
        self.body_lines = ["    " + s for s in pro]
        self.body_lines += ["    for it in range(n):", "        " + step]
        self.body_lines += ["        " + s for s in H.rows() + X.rows() + Y.rows() + loop]
        self.body_lines += ["    " + s for s in post] + ["    return 0", ""]
        self.source = "\n".join(_HEADER + self.function("kernel"))
        self.in_shapes = [tuple(v.shape) for v in ins]
        self.hist_shapes = [tuple(v.shape) for v in ins[nc:nc + ncarry]] if save else []
        self.out_shapes = [tuple(v.shape) for v in outs]
        self.fn = None

    def function(self, name):
        """Source lines of the loop as the njit function ``name(n, *params)``."""
        return [_NJIT, f"def {name}(n, {', '.join(self.params)}):"] + self.body_lines

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


def _offsets(pack):
    """(dtype name, offset in its packed array, element count) of each member of ``pack``."""
    used, out = {}, []
    for dt, n in pack.members:
        out.append((dt, used.get(dt, 0), n))
        used[dt] = used.get(dt, 0) + n
    return out


def _copy(dst, dst_at, src, src_at, members):
    """Statements copying ``members`` (pairs of ``_offsets`` entries) from the packed arrays
    ``src`` (prefix, indexed by ``src_at``) to ``dst``'s."""
    lines = []
    for (dt, o_to, n), (_, o_from, _) in members:
        lines += [f"for q in range({n}):",
                  f"    {dst}_{dt}[{dst_at}{o_to} + q] = {src}_{dt}[{src_at}{o_from} + q]"]
    return lines


# steps of the compiled sweep's unit, at most a quarter of the budget (NOTE [compiled sweep]):
# a unit of one step recomputes the fewest steps, but Revolve then reverses nearly every step
# by itself, at a call of the forward and of the pullback loop each (about 50 ns); units of 8
# steps spend 7 of the RK4 benchmark's 32 states on a unit's carries, for a fifth of the calls
# and about as many recomputations (C(25 + 5, 5) >= 10^6 / 8, C(32 + 6, 6) >= 10^6)
SWEEP_UNIT = 8


class CompiledSweep:
    """The reverse pass of a loop from at most ``held`` carries, its whole schedule in one
    numba function (NOTE [compiled sweep] in ``arrayad/_loop_reverse.py``).

    ``body``: the loop's step (constants ``nbc``, carries ``ncarry``, xs; carries and ys);
    ``back``: one step of its pullback (closure and constants ``nbk + nbc``; carries ``nback``,
    the cotangents; per step the carry entering the step, the xs and the ys' cotangents; ys the
    xs' cotangents), as ``_loop_vjp_impl`` traces them."""

    def __init__(self, body, back, nbk, nbc, ncarry, nback):
        self.ncarry, self.nback = ncarry, nback
        # the three loops: forward for the carry only, forward keeping each step's carry, and
        # the pullback from the last step
        adv = CompiledScan(body, nbc, ncarry, False, False, ys=False)
        sav = CompiledScan(body, nbc, ncarry, False, True, ys=False)
        bwd = CompiledScan(back, nbk + nbc, nback, True, False, split=ncarry)
        # (a state has the same layout as the carry adv returns, a history row as sav keeps
        # and bwd reads: the carries in order, packed by dtype)
        if not (adv.C.members == sav.Y.members == bwd.H.members):
            raise Unsupported("a history laid out unlike the carry")
        self.adv, self.sav, self.bwd = adv, sav, bwd
        dts = sorted(adv.C.groups)

        def names(prefix, pack):
            return [f"{prefix}_{dt}" for dt in sorted(pack.groups)]

        def call(kernel, n, *args):
            return f"{kernel}({n}, {', '.join(a for part in args for a in part)})"

        pf, xf = names("pf", adv.P), names("xf", adv.X)
        pb, xb, yb, cb = names("pb", bwd.P), names("xb", bwd.X), names("yb", bwd.Y), \
            names("cb", bwd.C)
        snaps = [f"s_{dt}" for dt in dts]
        self.params = pf + xf + snaps + pb + xb + yb + cb
        load_f = list(zip(_offsets(adv.P)[len(adv.P.members) - ncarry:], _offsets(adv.C)))
        load_b = list(zip(_offsets(bwd.P)[len(bwd.P.members) - nback:], _offsets(bwd.C)))

        def indent(lines, depth):
            return [" " * (4 * depth) + s for s in lines]

        def advance(src, dst, j, a):   # (state dst = a units from state src at unit j)
            return _copy("pf", "", "s", f"{src}, ", load_f) + [
                f"p_, w_ = ({j}) * u, min(({a}) * u, n - ({j}) * u)",
                call("advance", "w_", pf, [f"{x}[p_:p_ + w_]" for x in xf],
                     [f"{s}[{dst}]" for s in snaps])]

        def unit(row, j):   # (the steps of unit j reversed from its first state, in row)
            # (the carries of its w steps in rows row .. row + w - 1: the first is the state's,
            # the next come from w - 1 steps forward, the last as their final carry)
            return [f"p_, w_ = ({j}) * u, min(u, n - ({j}) * u)", "if w_ > 1:"] + indent(
                _copy("pf", "", "s", f"{row}, ", load_f)
                + [call("keep", "w_ - 1", pf, [f"{x}[p_:p_ + w_ - 1]" for x in xf],
                        [f"{s}[{row}:{row} + w_ - 1]" for s in snaps],
                        [f"{s}[{row} + w_ - 1]" for s in snaps])], 1) + [
                call("pullback", "w_", pb, [f"{s}[{row}:{row} + w_]" for s in snaps],
                     [f"{x}[p_:p_ + w_]" for x in xb], [y + "[p_:p_ + w_]" for y in yb], cb),
            ] + _copy("pb", "", "cb", "", load_b)

        src = list(_HEADER)
        src += adv.function("advance") + sav.function("keep") + bwd.function("pullback")
        src += _SCHEDULE
        src += [_NJIT, f"def kernel(n, held, u, {', '.join(self.params)}):"]
        src += indent([
            "# (the schedule over units of u steps from held - u + 1 states, the last u rows",
            "# the history of the unit being reversed; a stack of the parts still to reverse:",
            "# first unit, units, states held, the row of the state at its first unit; rows",
            "# above the top's are free)",
            "h0 = held - u + 1",
            "sp, sn = np.empty(h0 + 2, np.int64), np.empty(h0 + 2, np.int64)",
            "sh, ss = np.empty(h0 + 2, np.int64), np.empty(h0 + 2, np.int64)",
            "sp[0], sn[0], sh[0], ss[0] = 0, (n + u - 1) // u, h0, 0",
            "top = 1",
            "while top > 0:",
            "    top -= 1",
            "    j0, m, h, slot = sp[top], sn[top], sh[top], ss[top]",
            "    while m > 0:",
            "        if m <= h:   # (room for every state: one pass forward)",
            "            for r in range(1, m):"], 1)
        src += indent(advance("slot + r - 1", "slot + r", "j0 + r - 1", 1), 5)
        src += indent(["for r in range(m - 1, -1, -1):"], 4)
        src += indent(unit("slot + r", "j0 + r"), 5)
        src += indent(["break"], 4)
        src += indent(["if h <= 1:   # (one state: each unit from it)",
                       "    for r in range(m - 1, 0, -1):"], 3)
        src += indent(advance("slot", "slot + 1", "j0", "r") + unit("slot + 1", "j0 + r"), 5)
        src += indent(unit("slot", "j0") + ["break"], 4)
        src += indent([
            "a = max(1, min(m - 1, beta(h, sweeps(m, h) - 1)))",
            "sp[top], sn[top], sh[top], ss[top] = j0, a, h, slot",
            "top += 1"], 3)
        src += indent(advance("slot", "slot + 1", "j0", "a"), 3)
        src += indent(["j0, m, h, slot = j0 + a, m - a, h - 1, slot + 1"], 3)
        src += ["    return 0", ""]
        self.source = "\n".join(src)
        self.fn = None

    def __call__(self, closure, consts, init, xs, ct, acc, gy, n, held, reverse):
        """(cotangents of the final carries out of the back loop: ``ct`` and ``acc`` after
        the first step, the xs' cotangents stacked) of the reverse pass of ``n >= 1`` steps
        from at most ``held`` states; compiles at the first call (numba's errors are raised
        to the caller, which falls back)."""
        if self.fn is None:
            self.fn = _load(self.source)
        adv, bwd = self.adv, self.bwd
        if reverse:   # (the schedule runs in the loop's order: xs and ys read from the end)
            xs, gy = [x[::-1] for x in xs], [g[::-1] for g in gy]
        states = []   # (per dtype: a row per state held, the first the initial carry)
        for a in adv.C.pack(init):
            states.append(np.empty((held + 1, a.shape[0]), a.dtype))
            states[-1][0] = a
        yb = bwd.Y.empty(n)
        cb = bwd.C.empty()
        unit = max(1, min(SWEEP_UNIT, held // 4))
        # (the kernel writes the carries of both loops into their packed arguments: copies,
        # where a pack of one member would be the caller's array itself)
        pf = [a.copy() for a in adv.P.pack(list(consts) + list(init))]
        pb = [a.copy() for a in bwd.P.pack(list(closure) + list(consts) + list(ct) + list(acc))]
        self.fn(n, held, unit, *pf, *adv.X.pack(xs, n), *states, *pb,
                *bwd.X.pack(list(xs) + list(gy), n), *yb, *cb)
        outs = bwd.out_shapes
        carry = bwd.C.unpack(cb, outs[:self.nback])
        d_xs = bwd.Y.unpack(yb, outs[self.nback:], n)
        if reverse:
            d_xs = [np.ascontiguousarray(d[::-1]) for d in d_xs]
        return carry, d_xs


# the binomial schedule's numbers (``sweeps`` and ``_beta`` in ``_loop_reverse.py``) in
# integers: each product is exact, and below ``n * (s + t)`` (no overflow)
_SCHEDULE = [
    _NJIT, "def sweeps(n, s):", "    t, b = 0, 1", "    while b < n:", "        t += 1",
    "        b = b * (s + t) // t", "    return t", "", "",
    _NJIT, "def beta(s, t):", "    b = 1", "    for u in range(1, t + 1):",
    "        b = b * (s + u) // u", "    return b", "", ""]
