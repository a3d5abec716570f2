# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""A register machine that runs a scan's loop of scalar statements in C (NOTE [scan machine]
in ``arrayad/_jit/scan_machine.py``).

Every value is a double in the register file ``r`` (a bool is 0.0 or 1.0, a float32 a double
that float32 represents, an integer an integer-valued double). One instruction is a row
``(opcode, destination, a, b, c)`` of register numbers; an opcode with ``ROUND32`` added rounds
its result to float32 (for +, -, *, /, sqrt that is float32's own correctly rounded result: a
double holds the exact one to more than twice float32's precision), one with ``INT32`` or
``INT64`` added checks that its integer result is exact and would not wrap around. The arithmetic is C's on doubles (IEEE: no exception, 1/0 is
inf), and the functions are libm's, as in NumPy's float64 loops.
"""
from libc.math cimport (acos, acosh, asin, asinh, atan, atan2, atanh, ceil, cos, cosh, exp,
                        expm1, fabs, floor, hypot, log, log1p, log2, log10, pow, sin, sinh,
                        sqrt, tan, tanh)

cdef enum Op:
    ADD, SUBTRACT, MULTIPLY, DIVIDE, POW, ATAN2, HYPOT, MAXIMUM, MINIMUM,
    NEGATIVE, ABS, SQUARE, RECIPROCAL, SIGN, SQRT, EXP, EXPM1, LOG, LOG1P, LOG2, LOG10,
    SIN, COS, TAN, ASIN, ACOS, ATAN, SINH, COSH, TANH, ASINH, ACOSH, ATANH, FLOOR, CEIL,
    EQUAL, NOT_EQUAL, LESS, LESS_EQUAL, GREATER, GREATER_EQUAL,
    LOGICAL_AND, LOGICAL_OR, LOGICAL_XOR, LOGICAL_NOT, TRUTH, WHERE, POW_OR_SQRT, COPY

cdef enum:
    _ROUND32 = 256
    _INT32 = 512
    _INT64 = 1024
    _OP = 255
# added to an opcode: its result rounded to float32; its result an int32 or an int64, which the
# run stops at (returns False) where it leaves the range that NumPy's integer arithmetic and a
# double's exact integers share (an int32's; 2 ** 53 for an int64): NumPy's result would wrap
# around, or a double would round it
ROUND32, INT32, INT64 = _ROUND32, _INT32, _INT64

# the opcode of each operation's name (the names of arrayad's primitives where there is one)
OPCODES = {
    "add": ADD, "subtract": SUBTRACT, "multiply": MULTIPLY, "divide": DIVIDE, "pow": POW,
    "atan2": ATAN2, "hypot": HYPOT, "maximum": MAXIMUM, "minimum": MINIMUM,
    "negative": NEGATIVE, "abs": ABS, "square": SQUARE, "reciprocal": RECIPROCAL,
    "sign": SIGN, "sqrt": SQRT, "exp": EXP, "expm1": EXPM1, "log": LOG, "log1p": LOG1P,
    "log2": LOG2, "log10": LOG10, "sin": SIN, "cos": COS, "tan": TAN, "asin": ASIN,
    "acos": ACOS, "atan": ATAN, "sinh": SINH, "cosh": COSH, "tanh": TANH, "asinh": ASINH,
    "acosh": ACOSH, "atanh": ATANH, "floor": FLOOR, "ceil": CEIL,
    "equal": EQUAL, "not_equal": NOT_EQUAL, "less": LESS, "less_equal": LESS_EQUAL,
    "greater": GREATER, "greater_equal": GREATER_EQUAL, "logical_and": LOGICAL_AND,
    "logical_or": LOGICAL_OR, "logical_xor": LOGICAL_XOR, "logical_not": LOGICAL_NOT,
    # x != 0 (a cast to bool), c ? a : b, a ** b with NumPy's sqrt where b == 0.5, a
    "truth": TRUTH, "where": WHERE, "pow_or_sqrt": POW_OR_SQRT, "copy": COPY,
}


cdef inline double _b(bint v) noexcept nogil:
    return 1.0 if v else 0.0


cdef inline bint _step(const int[:, ::1] code, double[::1] r) noexcept nogil:
    """One step of ``code``; True where an integer result left its range."""
    cdef Py_ssize_t k
    cdef int op, flags
    cdef double a, b
    for k in range(code.shape[0]):
        op = code[k, 0] & _OP
        flags = code[k, 0] - op
        a = r[code[k, 2]]
        b = r[code[k, 3]]
        if op == ADD:
            a = a + b
        elif op == SUBTRACT:
            a = a - b
        elif op == MULTIPLY:
            a = a * b
        elif op == DIVIDE:
            a = a / b
        elif op == POW:
            a = pow(a, b)
        elif op == POW_OR_SQRT:
            # (NumPy's power takes sqrt for an exponent 0.5: (-inf) ** 0.5 is nan, not inf)
            a = sqrt(a) if b == 0.5 else pow(a, b)
        elif op == ATAN2:
            a = atan2(a, b)
        elif op == HYPOT:
            a = hypot(a, b)
        elif op == MAXIMUM:   # (as NumPy's: nan propagates; of equal values, the second)
            a = a if (a > b or a != a) else b
        elif op == MINIMUM:
            a = a if (a < b or a != a) else b
        elif op == NEGATIVE:
            a = -a
        elif op == ABS:
            a = fabs(a)
        elif op == SQUARE:
            a = a * a
        elif op == RECIPROCAL:
            a = 1.0 / a
        elif op == SIGN:   # (NumPy's: 0 for both zeros, nan for nan)
            a = 1.0 if a > 0 else (-1.0 if a < 0 else (a if a != a else 0.0))
        elif op == SQRT:
            a = sqrt(a)
        elif op == EXP:
            a = exp(a)
        elif op == EXPM1:
            a = expm1(a)
        elif op == LOG:
            a = log(a)
        elif op == LOG1P:
            a = log1p(a)
        elif op == LOG2:
            a = log2(a)
        elif op == LOG10:
            a = log10(a)
        elif op == SIN:
            a = sin(a)
        elif op == COS:
            a = cos(a)
        elif op == TAN:
            a = tan(a)
        elif op == ASIN:
            a = asin(a)
        elif op == ACOS:
            a = acos(a)
        elif op == ATAN:
            a = atan(a)
        elif op == SINH:
            a = sinh(a)
        elif op == COSH:
            a = cosh(a)
        elif op == TANH:
            a = tanh(a)
        elif op == ASINH:
            a = asinh(a)
        elif op == ACOSH:
            a = acosh(a)
        elif op == ATANH:
            a = atanh(a)
        elif op == FLOOR:
            a = floor(a)
        elif op == CEIL:
            a = ceil(a)
        elif op == EQUAL:
            a = _b(a == b)
        elif op == NOT_EQUAL:
            a = _b(a != b)
        elif op == LESS:
            a = _b(a < b)
        elif op == LESS_EQUAL:
            a = _b(a <= b)
        elif op == GREATER:
            a = _b(a > b)
        elif op == GREATER_EQUAL:
            a = _b(a >= b)
        elif op == LOGICAL_AND:
            a = _b(a != 0 and b != 0)
        elif op == LOGICAL_OR:
            a = _b(a != 0 or b != 0)
        elif op == LOGICAL_XOR:
            a = _b((a != 0) != (b != 0))
        elif op == LOGICAL_NOT:
            a = _b(a == 0)
        elif op == TRUTH:
            a = _b(a != 0)
        elif op == WHERE:
            a = b if a != 0 else r[code[k, 4]]
        # (COPY: a as it is)
        if flags == _ROUND32:
            a = <double><float>a
        elif flags == _INT32:
            if not (-2147483648.0 <= a <= 2147483647.0):
                return True
        elif flags == _INT64:
            if not (-9007199254740992.0 <= a <= 9007199254740992.0):
                return True
        r[code[k, 1]] = a
    return False


def run(Py_ssize_t n, bint reverse, const int[:, ::1] code, double[::1] r,
        const int[::1] x_regs, const double[:, ::1] xs,
        const int[::1] hist_regs, double[:, ::1] hist,
        const int[::1] y_regs, double[:, ::1] ys,
        const int[::1] carry_out, const int[::1] carry_in, double[::1] tmp):
    """``n`` steps (backwards when ``reverse``) of ``code`` on the registers ``r``: per step i,
    row i of ``xs`` into the registers ``x_regs``, the registers ``hist_regs`` into row i of
    ``hist`` (the carry entering the step), the body, the registers ``y_regs`` into row i of
    ``ys``, and the registers ``carry_out`` into ``carry_in`` (through ``tmp``: a new carry may
    read an old one). Returns False where an integer left its range (NumPy's result would
    wrap around, or a double round it): the caller replays the scan instead."""
    cdef Py_ssize_t it, i, j
    cdef bint ok = True
    with nogil:
        for it in range(n):
            i = n - 1 - it if reverse else it
            for j in range(x_regs.shape[0]):
                r[x_regs[j]] = xs[i, j]
            for j in range(hist_regs.shape[0]):
                hist[i, j] = r[hist_regs[j]]
            if _step(code, r):
                ok = False
                break
            for j in range(y_regs.shape[0]):
                ys[i, j] = r[y_regs[j]]
            for j in range(carry_out.shape[0]):
                tmp[j] = r[carry_out[j]]
            for j in range(carry_in.shape[0]):
                r[carry_in[j]] = tmp[j]
    return ok
