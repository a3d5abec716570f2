"""The machine tier of a compiled scan (NOTE [scan machine]).

NOTE [scan machine]
-------------------
A register machine written in Cython (``arrayad/_core/_loop_machine.pyx``) runs the scalar
statements of a scan's body (``scan_lower.py``): each element of each value of the body is a
register (a double), each statement one instruction ``(opcode, destination, a, b, c)``, and the
whole loop (every step, the carry history, the stacked ys) is one call of ``_loop_machine.run``
with the GIL released. Nothing is compiled, so it runs at once: lowering the RK4 benchmark's
forward and backward bodies (about 650 statements) takes about 30 ms, and an instruction about
3 ns, where the replay spends a microsecond of NumPy's dispatch per instruction and step.

It computes in doubles: float64, float32 (each float32 result rounded to float32, which gives
float32's own result for arithmetic and sqrt), bool (0.0 and 1.0) and int32/int64 (a counter,
an index: each integer result is checked to stay within what a double holds exactly and what
NumPy's integers hold without wrapping around; a run that leaves that range returns None and
the replay runs the scan, with NumPy's own integer arithmetic). The arithmetic is IEEE's in C
(1/0 is inf, no warning), the functions libm's in double (an ulp from NumPy's own loops at
most, as numba's), NumPy's special cases are kept as the numba tier keeps them (sqrt for a
power of 0.5, sign, maximum and minimum of nan), and a sum adds in order.
"""

import struct

import numpy as np

from .._core import _loop_machine
from .lower_numba import _size
from .scan_lower import MAX_ELEMENTS, Unsupported, _Lowering

_OPCODES = _loop_machine.OPCODES
# what an instruction adds to its opcode, by the dtype of its result
_FLAGS = {"float32": _loop_machine.ROUND32, "int32": _loop_machine.INT32,
          "int64": _loop_machine.INT64}
_EXACT = 2 ** 53   # (the integers a double holds exactly)
_NO_REGISTER = 0   # (an unused operand of an instruction: any register reads)


class _MachineLowering(_Lowering):
    """The body's scalar statements as registers and instructions."""

    DTYPES = ("float64", "float32", "bool", "int64", "int32")

    def __init__(self, prog):
        super().__init__(prog)
        self.values = []    # register -> its value before the loop (nan: computed)
        self.code = []      # (opcode, destination, a, b, c)
        self.lits = {}      # bytes of a literal -> its register

    def register(self, value=np.nan):
        self.values.append(value)
        return len(self.values) - 1

    def literal(self, value, dt):
        if dt == "bool":
            # (a number filling a bool value, zeros_like of a mask: NumPy's bool(value))
            if not isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating)):
                raise Unsupported(f"literal {value!r}")
            v = 1.0 if value else 0.0
        elif isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating)):
            try:
                v = np.dtype(dt).type(value)   # (as NumPy converts a Python scalar)
            except (OverflowError, ValueError):
                raise Unsupported(f"literal {value!r}") from None
            if dt.startswith("int") and abs(int(v)) > _EXACT:
                raise Unsupported(f"literal {value!r}")
            v = float(v)
        else:
            raise Unsupported(f"literal {value!r}")
        key = struct.pack("<d", v)   # (-0.0 is not 0.0)
        if key not in self.lits:
            self.lits[key] = self.register(v)
        return self.lits[key]

    def scalar(self, v, k, op, args, dt):
        if op in ("copy", "positive"):   # (a cast is made by ``cast``)
            return args[0]
        return self.instruction(op, args, dt)

    def instruction(self, op, args, dt):
        dest = self.register()
        a, b, c = (list(args) + [_NO_REGISTER] * 3)[:3]
        code = _OPCODES[op] + _FLAGS.get(dt, 0)
        self.code.append((code, dest, a, b, c))
        return dest

    def cast(self, x, src, dt):
        if dt == "bool":
            return self.instruction("truth", [x], dt)
        if dt == "float32" and src not in ("float32", "bool"):
            return self.instruction("copy", [x], dt)
        if dt == "int32" and src == "int64":   # (checked: NumPy's cast would wrap around)
            return self.instruction("copy", [x], dt)
        return x   # (a bool is 0.0 or 1.0, a float32 or an exact integer a float64)


def _registers(low, vs):
    return np.array([r for v in vs for r in low.names[v]], np.intc)


class ScanMachine:
    """A scan's whole loop on the register machine: ``self(args, length)`` returns the
    primitive's outputs (carry, stacked ys, history when ``save``) from its arguments (closure,
    carry, xs)."""

    def __init__(self, body, nc, ncarry, reverse, save):
        prog = body.prog
        ins, outs = prog.in_vars, prog.outs
        low = _MachineLowering(prog)
        for v in list(ins) + list(outs):
            if _size(v.shape) > MAX_ELEMENTS:
                raise Unsupported("a large input or output")
            low.dtype_name(v.dtype)
        for v in ins:
            low.define(v, [low.register() for _ in range(_size(v.shape))])
        low.define_constants()
        for e in prog.eqns:
            low.eqn(e)
        n_fixed = nc + ncarry
        self.n_fixed, self.ncarry, self.reverse = n_fixed, ncarry, reverse
        self.fixed_regs = [np.array(low.names[v], np.intp) for v in ins[:n_fixed]]
        self.x_regs = _registers(low, ins[n_fixed:])
        self.carry_in = _registers(low, ins[nc:n_fixed])
        self.hist_regs = self.carry_in if save else np.empty(0, np.intc)
        self.y_regs = _registers(low, outs[ncarry:])
        self.carry_out = _registers(low, outs[:ncarry])
        self.code = np.array(low.code, np.intc).reshape(-1, 5)
        self.r0 = np.array(low.values, np.float64)
        self.carry_types = [(tuple(v.shape), v.dtype.name) for v in outs[:ncarry]]
        self.y_types = [(tuple(v.shape), v.dtype.name) for v in outs[ncarry:]]
        self.hist_types = self.carry_types if save else []
        # (the arguments of an integer dtype, checked at each call: see __call__)
        self.int_args = [j for j, v in enumerate(ins) if v.dtype.name.startswith("int")]

    def __call__(self, args, length):
        """The outputs of the scan, or None where an integer is (or would become) too large
        for a double to hold exactly, or would wrap around: the replay runs."""
        for j in self.int_args:
            a = np.asarray(args[j])
            if a.size and (a.max() > _EXACT or a.min() < -_EXACT):
                return None
        r = self.r0.copy()
        for regs, a in zip(self.fixed_regs, args[:self.n_fixed]):
            r[regs] = np.asarray(a, np.float64).ravel()
        xs = np.empty((length, len(self.x_regs)))
        o = 0
        for a in args[self.n_fixed:]:
            n = _size(np.shape(a)[1:])
            xs[:, o:o + n] = np.asarray(a, np.float64).reshape(length, n)
            o += n
        hist = np.empty((length, len(self.hist_regs)))
        ys = np.empty((length, len(self.y_regs)))
        tmp = np.empty(len(self.carry_out))
        if not _loop_machine.run(length, self.reverse, self.code, r, self.x_regs, xs,
                                 self.hist_regs, hist, self.y_regs, ys, self.carry_out,
                                 self.carry_in, tmp):
            return None
        carry = _unpack(r[self.carry_in], self.carry_types)
        return tuple(carry + _unpack(ys, self.y_types, length)
                     + _unpack(hist, self.hist_types, length))


def _unpack(columns, types, length=None):
    """The members of ``columns`` (per step when ``length`` is given), in their shapes and
    dtypes."""
    out, o = [], 0
    lead = () if length is None else (length,)
    for shape, dtype in types:
        n = _size(shape)
        part = columns[o:o + n] if length is None else columns[:, o:o + n]
        out.append(np.ascontiguousarray(part, dtype=dtype).reshape(lead + shape))
        o += n
    return out
