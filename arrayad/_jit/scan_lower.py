"""A scan's body as scalar statements: what the compiled tiers of a scan share (NOTE [compiled
scan] in ``scan.py``).

The body's arrays have static, small shapes, so a compiled body is *scalar*: each element of
each value is one local (one variable of the generated source, one register of the machine),
each elementwise instruction one statement per element, and the structural instructions
(indexing, reshape, concat, broadcast, permute, flip...) make no statement at all: they only
rename elements. Which element of the inputs each output element is comes from running the
primitive's own NumPy implementation on arrays of element numbers, so there is one rule for all
of them (``gather``), and the transposes (``index_add``) and reductions (``sum``) use the same
element numbers.

``_Lowering`` walks the program; a tier says what a statement is: ``literal`` (a scalar of the
source), ``scalar`` (one statement: an operation by name, see ``OPERATIONS``, on scalars of one
dtype) and ``cast`` (an operand converted to another dtype).
"""

import numpy as np

from .lower_numba import _BINARY, _UNARY, _size
from .replay import _callable

# a value of more elements makes the body replayed (its elements are locals)
MAX_ELEMENTS = 256
# a matrix product of more scalar products is left to the replay's one BLAS call (a 16 x 16
# matrix times a vector, 256 products, runs 3x faster in the machine than replayed)
MAX_PRODUCTS = 1024

_STRUCTURAL = ("getitem", "reshape", "concat", "broadcast_to", "permute_dims", "flip", "roll",
               "tile", "repeat", "copy", "stop_gradient", "positive")
_COMPARE = ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")
_LOGICAL = ("logical_and", "logical_or", "logical_xor", "logical_not")
_BOOL_BITWISE = {"bitwise_and": "logical_and", "bitwise_or": "logical_or",
                 "bitwise_xor": "logical_xor", "bitwise_invert": "logical_not"}
# the operations a statement may be, beside _COMPARE and _LOGICAL: "copy" (its operand, cast by
# ``cast``), "where" (bool, a, b), "pow_or_sqrt" (a ** b, NumPy's sqrt where b == 0.5)
_MORE = ("maximum", "minimum", "floor", "ceil", "reciprocal", "sign")
OPERATIONS = (tuple(_BINARY) + tuple(_UNARY) + _MORE + _COMPARE + _LOGICAL
              + ("copy", "where", "pow_or_sqrt"))
# the reductions, each an in-order chain of its operation (NumPy's pairwise sum may round
# otherwise beyond 8 elements; max and min keep NumPy's nan and, of equal values, the second)
_REDUCTIONS = {"sum": "add", "prod": "multiply", "max": "maximum", "min": "minimum",
               "any": "logical_or", "all": "logical_and"}
# the running reductions, in order as NumPy's (op, the initial value of include_initial)
_CUMULATIVE = {"cumulative_sum": ("add", 0), "cumulative_prod": ("multiply", 1)}
# the arithmetic kept in an integer dtype (the rest is refused there)
_INT_OK = ("add", "subtract", "multiply", "negative", "positive", "square", "abs")


def scalar_statements(prog):
    """About how many scalar statements lowering ``prog`` makes (the elements its instructions
    compute: none for a structural one, the products of a matrix product, the inputs of a
    reduction), without lowering it."""
    n = 0
    for e in prog.eqns:
        if e.prim.name in _STRUCTURAL:
            continue
        shapes = [v.shape for v in list(e.ins) + list(e.outs) if hasattr(v, "shape")]
        if e.prim.name == "matmul" and len(shapes) == 3:
            n += _matmul_products(shapes[0], shapes[1])
        else:
            n += max((_size(s) for s in shapes), default=1)
    return n


def _matmul_products(a, b):
    a, b = ((1,) + tuple(a) if len(a) == 1 else tuple(a)), \
        (tuple(b) + (1,) if len(b) == 1 else tuple(b))
    return _size(np.broadcast_shapes(a[:-2], b[:-2])) * a[-2] * a[-1] * b[-1]


class Unsupported(Exception):
    """The body has something this tier does not compile: another tier or the replay runs."""


def _getitem():
    from .._core import _core
    return _core._PRIMITIVES["getitem"]


class _Lowering:
    """The scalar statements of one body; subclasses say what a statement is."""

    # the dtypes this tier computes in
    DTYPES = ("float32", "float64", "int32", "int64", "bool")

    def __init__(self, prog):
        self.prog = prog
        self.names = {}     # Var -> list of scalars (C order)
        self.types = {}     # Var -> dtype name

    # -- what a tier defines
    def literal(self, value, dt):
        """A scalar ``value`` in dtype ``dt``, as NumPy converts a Python scalar (weak)."""
        raise NotImplementedError

    def scalar(self, v, k, op, args, dt):
        """The scalar of element ``k`` of ``v``: operation ``op`` on scalars ``args`` of dtype
        ``dt`` (of dtype bool for the condition of "where")."""
        raise NotImplementedError

    def cast(self, x, src, dt):
        """Scalar ``x`` of dtype ``src`` as dtype ``dt``."""
        raise NotImplementedError

    def total(self, v, k, args, dt, op="add"):
        """``args`` combined in order by ``op`` (left to right, as a Python expression: a sum
        by default)."""
        if not args:
            if op == "add":
                return self.literal(0, dt)
            if op in ("multiply", "logical_and"):
                return self.literal(1, dt)
            if op == "logical_or":
                return self.literal(0, dt)
            raise Unsupported(f"a {op} reduction of no element")
        acc = args[0]
        for j, x in enumerate(args[1:]):
            acc = self.scalar(v, f"{k}_{j}", op, [acc, x], dt)
        return acc

    # -- the walk
    def dtype_name(self, dtype):
        name = getattr(dtype, "name", None)
        if name not in self.DTYPES:
            raise Unsupported(f"dtype {dtype}")
        return name

    def define(self, v, names):
        if len(names) != _size(v.shape):
            raise Unsupported("element count")
        self.names[v] = names
        self.types[v] = self.dtype_name(v.dtype)

    def define_constants(self):
        """The program's constants as literals (no statements)."""
        for v, c in self.prog.consts.items():
            c = np.asarray(c)
            if c.size > MAX_ELEMENTS:
                raise Unsupported("a large constant")
            if tuple(c.shape) != tuple(v.shape) or c.dtype.name != self.dtype_name(v.dtype):
                raise Unsupported("a constant of another type")
            self.define(v, [self.literal(x, c.dtype.name) for x in c.ravel().tolist()])

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
        cast = {}
        return [cast.setdefault(i, self.cast(names[i], src, dt)) for i in idx]

    def eqn(self, e):
        name = e.prim.xp_name or e.prim.name
        if e.prim.multiple_results or len(e.outs) != 1 or getattr(e.prim, "prog", None):
            raise Unsupported(e.prim.name)
        out = e.outs[0]
        if _size(out.shape) > MAX_ELEMENTS:
            raise Unsupported("a large value")
        dt = self.dtype_name(out.dtype)
        if e.prim.name in _STRUCTURAL:
            return self.gather(e, out)
        if e.prim.name in ("index_add", "setitem"):
            return self.index_add(e, out, dt)
        if e.prim.name in _REDUCTIONS:
            return self.reduce(e, out, dt)
        if e.prim.name in _CUMULATIVE:
            return self.cumulative(e, out, dt)
        if e.prim.name == "matmul":
            return self.matmul(e, out, dt)
        if e.prim.name in ("zeros_like", "ones_like", "full_like"):
            value = {"zeros_like": 0, "ones_like": 1}.get(e.prim.name,
                                                         e.params.get("fill_value"))
            return self.define(out, [self.literal(value, dt)] * _size(out.shape))
        if e.prim.name == "astype":
            if dt.startswith("int") and self.types[e.ins[0]].startswith("float"):
                # (NumPy's cast of nan or of a value out of range is its own; C's differs)
                raise Unsupported("a cast of floats to integers")
            return self.elementwise(e, out, dt, "copy", [dt])
        if e.prim.name == "where":
            return self.elementwise(e, out, dt, "where", ["bool", dt, dt])
        if not e.prim.elementwise or e.params:
            raise Unsupported(e.prim.name)
        if name in _COMPARE:
            cdt = self.common(e.ins)
            return self.elementwise(e, out, dt, name, [cdt, cdt])
        if name in _LOGICAL:
            return self.elementwise(e, out, dt, name, ["bool"] * len(e.ins))
        if name in _BOOL_BITWISE and dt == "bool" and all(
                self.types.get(a) == "bool" for a in e.ins if hasattr(a, "shape")):
            # (on bools the bitwise operations are the logical ones: the masks of the strong
            # zeros' rules, NOTE [strong zeros] in the core, combine with & and |)
            return self.elementwise(e, out, dt, _BOOL_BITWISE[name], ["bool"] * len(e.ins))
        table = _BINARY if len(e.ins) == 2 else _UNARY if len(e.ins) == 1 else {}
        if (name not in table and name not in _MORE) \
                or (not dt.startswith("float") and name not in _INT_OK):
            raise Unsupported(name)
        if name == "pow" and dt.startswith("float"):
            # (NumPy's power takes sqrt for an exponent 0.5 that is one number, a literal, a 0-d
            # or a broadcast array: (-inf) ** 0.5 is nan there, inf in C's pow)
            y = e.ins[1]
            if not hasattr(y, "shape"):
                if isinstance(y.value, (int, float)) and y.value == 0.5:
                    return self.elementwise(e, out, dt, "sqrt", [dt, dt])
            elif y.shape == () or tuple(y.shape) != tuple(out.shape):
                return self.elementwise(e, out, dt, "pow_or_sqrt", [dt, dt])
        return self.elementwise(e, out, dt, name, [dt] * len(e.ins))

    def common(self, ins):
        dts = [np.dtype(self.types[a]) for a in ins if hasattr(a, "shape")]
        if not dts:
            raise Unsupported("a comparison of literals")
        dt = np.result_type(*dts).name
        if any(isinstance(a.value, float) for a in ins if not hasattr(a, "shape")) \
                and not dt.startswith("float"):
            raise Unsupported("an integer compared with a float literal")
        return self.dtype_name(np.dtype(dt))

    def elementwise(self, e, out, dt, op, in_dts):
        ops = [self.operand(a, out.shape, d) for a, d in zip(e.ins, in_dts)]
        if op == "copy" and self.types.get(e.ins[0]) == dt:   # (a cast to its own dtype)
            return self.define(out, ops[0])
        self.define(out, [self.scalar(out, k, op, list(args), dt)
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
            if self.types[a] != self.dtype_name(out.dtype):
                raise Unsupported(f"{e.prim.name} changing the dtype")
            arrays.append(np.arange(len(flat), len(flat) + len(self.names[a]))
                          .reshape(a.shape))
            flat += self.names[a]
        pos = self.positions(e, arrays)
        if tuple(pos.shape) != tuple(out.shape) or pos.dtype.kind != "i":
            raise Unsupported(f"{e.prim.name} on element numbers")
        self.define(out, [flat[i] for i in pos.ravel()])

    def index_add(self, e, out, dt):
        """``index_add`` (``x[key] += v``) or ``setitem`` (``x[key] = v``) with a key of
        slices and integers: the elements of ``x`` it names, known when lowering."""
        if len(e.ins) != 2 or not hasattr(e.ins[0], "shape"):
            raise Unsupported(f"{e.prim.name} with index arrays")
        base, v = e.ins
        fn, takes_xp = _callable(_getitem(), self.prog.backend)
        try:
            pos = np.asarray(fn(*([np] if takes_xp else []),
                                np.arange(_size(base.shape)).reshape(base.shape),
                                key=e.params["key"]))
        except Exception as exc:
            raise Unsupported(f"{e.prim.name}: {exc}")
        vals = self.operand(v, pos.shape, dt)
        cur = list(self.operand(base, out.shape, dt))
        for k, (p, x) in enumerate(zip(pos.ravel(), vals)):
            cur[p] = x if e.prim.name == "setitem" else \
                self.scalar(out, f"{p}_{k}", "add", [cur[p], x], dt)
        self.define(out, cur)

    def reduce(self, e, out, dt):
        (a,) = e.ins
        if set(e.params) - {"axis", "keepdims"}:
            raise Unsupported(f"{e.prim.name} with {sorted(e.params)}")
        nd = len(a.shape)
        axis = e.params.get("axis")
        axes = tuple(range(nd)) if axis is None else \
            tuple(x % nd for x in (axis if isinstance(axis, tuple) else (axis,)))
        rest = [d for d in range(nd) if d not in axes]
        rows = np.transpose(np.arange(_size(a.shape)).reshape(a.shape), rest + list(axes))
        rows = rows.reshape(_size(out.shape), -1)
        # (any and all read their input as bools: a batched while loop's predicate is any of
        # its lanes')
        names = self.operand(a, a.shape, "bool" if e.prim.name in ("any", "all") else dt)
        op = _REDUCTIONS[e.prim.name]
        self.define(out, [self.total(out, k, [names[i] for i in row], dt, op)
                          for k, row in enumerate(rows)])

    def cumulative(self, e, out, dt):
        (a,) = e.ins
        op, initial = _CUMULATIVE[e.prim.name]
        axis, first = e.params.get("axis"), e.params.get("include_initial", False)
        if e.params.get("dtype") is not None and self.dtype_name(e.params["dtype"]) != dt:
            raise Unsupported(f"{e.prim.name} changing the dtype")
        if axis is None:
            if len(a.shape) != 1:
                raise Unsupported(f"{e.prim.name} without an axis")
            axis = 0
        axis %= len(a.shape)
        names = self.operand(a, a.shape, dt)
        rows = np.moveaxis(np.arange(_size(a.shape)).reshape(a.shape), axis, -1)
        done = np.empty(rows.shape[:-1] + (rows.shape[-1] + bool(first),), object)
        for row, at in enumerate(np.ndindex(rows.shape[:-1])):
            acc = self.literal(initial, dt) if first else None
            run = [acc] if first else []
            for j, i in enumerate(rows[at]):
                acc = names[i] if acc is None else \
                    self.scalar(out, f"{row}_{j}", op, [acc, names[i]], dt)
                run.append(acc)
            done[at] = run
        self.define(out, list(np.moveaxis(done, -1, axis).ravel()))

    def matmul(self, e, out, dt):
        """Each element of the product as the sum, in order, of its k products (NumPy's BLAS may
        round a dot product differently)."""
        a, b = e.ins
        if not (hasattr(a, "shape") and hasattr(b, "shape")) or not dt.startswith("float"):
            raise Unsupported("matmul of literals or integers")
        ia = np.arange(_size(a.shape)).reshape(a.shape)
        ib = np.arange(_size(b.shape)).reshape(b.shape)
        ia = ia[None, :] if ia.ndim == 1 else ia   # (a vector on the left: one row)
        ib = ib[:, None] if ib.ndim == 1 else ib   # (on the right: one column)
        batch = np.broadcast_shapes(ia.shape[:-2], ib.shape[:-2])
        if _matmul_products(a.shape, b.shape) > MAX_PRODUCTS:
            raise Unsupported("a large matmul")
        ia = np.broadcast_to(ia, batch + ia.shape[-2:]).reshape(-1, *ia.shape[-2:])
        ib = np.broadcast_to(ib, batch + ib.shape[-2:]).reshape(-1, *ib.shape[-2:])
        an, bn = self.operand(a, a.shape, dt), self.operand(b, b.shape, dt)
        names = []
        for m, (ma, mb) in enumerate(zip(ia, ib)):
            for i in range(ma.shape[0]):
                for j in range(mb.shape[1]):
                    k = len(names)
                    terms = [self.scalar(out, f"{k}_{t}", "multiply", [an[p], bn[q]], dt)
                             for t, (p, q) in enumerate(zip(ma[i], mb[:, j]))]
                    names.append(self.total(out, k, terms, dt))
        self.define(out, names)
