"""Elementwise functions of the array API standard: each primitive's rules in one row.

Unary rows give the derivative ``d(ans, x)``; the VJP is ``g * conj(d)`` and the JVP ``t * d``
(holomorphic convention, as torch). Rows whose derivative is a reciprocal give its denominator
instead (``over=``, log: ``x``) and the rules divide: one pass over the data less. Binary rows
give both partial derivatives ``d1(ans, x1, x2)`` and ``d2(...)``; the VJP sums the broadcast
dimensions away (``unbroadcast``). A derivative that is the result or an argument itself is given
by its name (exp: ``"ans"``; multiply: ``"x2"`` and ``"x1"``), read rather than called.
The formulas spell their arithmetic as functions (``minus(1, times(ans, ans))`` for
``1 - ans * ans``): the same operators, faster on small NumPy arrays (``_rules``).
Linear functions give their VJP and JVP directly. Rows marked ``nondiff`` produce bool/int results
or have a derivative of zero almost everywhere (floor, sign...): their outputs are constants.
"""

import cmath
import math

from ._namespace import ops
from .views import View, make_view, with_part_p

from .._core._core import (BinaryJVP, PartialVJP, SumJVP, SumVJP, UnaryJVP, UnaryVJP, bind,
                           dtype_of, keep_zeros)
from ._rules import (ELEMENTWISE, Declarations, broadcast_like, divided, forward_result,
                     is_complex, minus, names_read, negated, per_primitive, plus, times,
                     unbroadcast)

decl = Declarations(globals(), public_module="arrayad")


def unary(name, deriv=None, *, over=None, doc="", xp_name=None):
    """An elementwise unary function; ``deriv(ans, x)`` is its derivative (None: nondiff), or
    ``over(ans, x)`` the derivative's reciprocal (log: x), so that the rules divide by it; either
    may be the name ``"ans"`` or ``"x"`` when it is the result or the input itself."""
    rules = {}
    if deriv is not None or over is not None:
        # (g * conj(d) and t * d, or g / conj(over) and t / over: C callables, "Rule shapes"
        # in the core)
        d = deriv if over is None else over
        rules = dict(vjp=(UnaryVJP(d, over is not None),), reads=[names_read(d)],
                     full_jvp=UnaryJVP(d, over is not None))
    return decl.primitive(name, xp_name=xp_name or name, batch=ELEMENTWISE, api="x, /",
                          differentiable=bool(rules), doc=doc or f"Elementwise {name}.", **rules)


def linear_unary(name, vjp, jvp=None, *, doc="", **facts):
    """An elementwise unary function that is linear in its input (negative, conj, real...)."""
    # (linear: the rule reads no saved value, at most the input's dtype, which a Meta keeps)
    # (keep_zeros: the result has the structural zeros of g or t, NOTE [strong zeros] in the core)
    if jvp is None:
        jvp_rule = per_primitive(lambda p: (lambda t, ans, x: keep_zeros(t, bind(p, t)),))
    else:
        jvp_rule = (lambda t, ans, x: keep_zeros(t, jvp(t)),)
    return decl.primitive(name, vjp=(lambda g, ans, x: keep_zeros(g, vjp(g, x)),), reads=[""],
                          jvp=jvp_rule,
                          batch=ELEMENTWISE, api="x, /", doc=doc or f"Elementwise {name}.",
                          **facts)


def binary(name, d1=None, d2=None, *, doc="", xp_name=None, **rules):
    """An elementwise binary function with partials ``d1(ans, x1, x2)``, ``d2(ans, x1, x2)``.

    A partial of ``None`` with the other given means zero; both ``None`` means nondiff.
    ``rules`` (``vjp=``, ``reads=``, ``full_jvp=``) replace the ones built from the partials.
    """
    if d1 is not None or d2 is not None:
        # (g * conj(d) summed to the argument's shape, and t1 * d1 + t2 * d2: C callables)
        rules = dict(vjp=(None if d1 is None else PartialVJP(d1, 0),
                          None if d2 is None else PartialVJP(d2, 1)),
                     reads=["" if d is None else names_read(d) for d in (d1, d2)],
                     full_jvp=BinaryJVP(d1, d2)) | rules
    return decl.primitive(name, xp_name=xp_name or name, batch=ELEMENTWISE, api="x1, x2, /",
                          differentiable=bool(rules), doc=doc or f"Elementwise {name}.", **rules)


# -- unary, differentiable ----------------------------------------------------------------------
_sin = unary("sin", lambda ans, x: forward_result(_cos, x))   # NOTE [shared results] in the core
_cos = unary("cos", lambda ans, x: negated(forward_result(_sin, x)))
unary("tan", lambda ans, x: plus(1, times(ans, ans)))
unary("asin", over=lambda ans, x: ops.sqrt(minus(1, times(x, x))))
unary("acos", over=lambda ans, x: negated(ops.sqrt(minus(1, times(x, x)))))
unary("atan", over=lambda ans, x: plus(1, times(x, x)))
_sinh = unary("sinh", lambda ans, x: forward_result(_cosh, x))
_cosh = unary("cosh", lambda ans, x: forward_result(_sinh, x))
_sin.reuses, _cos.reuses, _sinh.reuses, _cosh.reuses = _cos, _sin, _cosh, _sinh
unary("tanh", lambda ans, x: minus(1, times(ans, ans)))
unary("asinh", over=lambda ans, x: ops.sqrt(plus(times(x, x), 1)))
unary("acosh", over=lambda ans, x: ops.sqrt(minus(times(x, x), 1)))
unary("atanh", over=lambda ans, x: minus(1, times(x, x)))
unary("exp", "ans")
unary("expm1", lambda ans, x: plus(ans, 1))
unary("log", over="x")
unary("log1p", over=lambda ans, x: plus(1, x))
unary("log2", over=lambda ans, x: times(x, math.log(2.0)))
unary("log10", over=lambda ans, x: times(x, math.log(10.0)))
unary("sqrt", lambda ans, x: divided(0.5, ans))
unary("square", lambda ans, x: times(2, x))
unary("reciprocal", lambda ans, x: negated(times(ans, ans)))
# |z| is not holomorphic: for complex z the VJP is g * z/|z| (no conj; torch's convention) and
# the JVP Re(conj(z/|z|) * t), a real tangent for a real output.


def _abs_sign(ans, x):
    # For complex z, sign(z) = z/|z| varies with z: spelled with differentiable ops so that the
    # rules differentiate again (ops.sign is nondifferentiable); 0 at z = 0, as torch's sgn.
    if is_complex(x):
        return x / ops.where(ans == 0, 1.0, ans)
    return ops.sign(x)


# (ops.multiply, not *: a raw array-api-strict operand on the left refuses a tracer on the right)
decl.primitive("abs", vjp=(lambda g, ans, x: ops.multiply(g, _abs_sign(ans, x)),),
               jvp=(lambda t, ans, x: ops.real(ops.multiply(ops.conj(_abs_sign(ans, x)), t))
                    if is_complex(x) else ops.multiply(t, ops.sign(x)),),
               batch=ELEMENTWISE, api="x, /", doc="Elementwise abs.")



def _sign_rule(h, ans, x):
    # For complex z, sign(z) = z/|z| (torch's sgn) is not holomorphic: its derivative is
    # h -> (h - s Re(conj(s) h)) / |z| with s = sign(z), a self-adjoint map, so the VJP (g for h)
    # and the JVP (t for h) are the same formula; 0 at z = 0, as torch. For real x the derivative
    # is 0 almost everywhere.
    if not is_complex(x):
        return ops.zeros_like(h)
    r = ops.abs(x)
    safe = ops.where(r == 0, 1.0, r)
    d = ops.subtract(h, ops.multiply(ans, ops.real(ops.multiply(ops.conj(ans), h))))
    return ops.where(r == 0, 0.0, d / safe)


decl.primitive("sign", vjp=(_sign_rule,), jvp=(_sign_rule,), batch=ELEMENTWISE, api="x, /",
               doc="Elementwise sign (x / |x| for complex x).")

# -- unary, linear ------------------------------------------------------------------------------
linear_unary("negative", lambda g, x: negated(g), negates=True)
linear_unary("positive", lambda g, x: g)
linear_unary("conj", lambda g, x: ops.conj(g))
# real/imag: the cotangent of a complex input is complex (g for real, i*g for imag).
_real = linear_unary("real", lambda g, x: ops.astype(g, x.dtype)
                     if ops.isdtype(x.dtype, "complex floating") else g)
# (ops.multiply, not `*`: a raw 0-d NumPy array times 1j is a NumPy scalar)
_imag = linear_unary("imag", lambda g, x: ops.multiply(ops.astype(g, x.dtype), 1j)
                     if ops.isdtype(x.dtype, "complex floating")
                     else ops.zeros_like(g))


class ComplexPart(View):
    """``real``/``imag`` of a complex array: every other float of its data."""
    __slots__ = ("imag",)

    def __init__(self, imag):
        self.imag = imag

    @property
    def name(self):
        return "imag" if self.imag else "real"

    def read(self, base):
        return bind(_imag if self.imag else _real, base)

    def write(self, base, value):
        return bind(with_part_p, base, value, imag=self.imag)

    def layout(self, a):
        return a


def _part_function(prim, imag):
    generated = getattr(ops, prim.name)

    def part(x, /):
        out = bind(prim, x)
        if dtype_of(x).kind == "c":    # (a view of a complex array, as NumPy's and torch's)
            make_view(out, x, ComplexPart(imag))
        return out
    part.__name__, part.__doc__, part.__module__ = prim.name, generated.__doc__, __name__
    return decl.export(part, primitive=prim)


_part_function(_real, False)
_part_function(_imag, True)

# -- unary, not differentiable (bool/int results, or zero derivative almost everywhere) ----------
for _name in ["ceil", "floor", "round", "trunc", "signbit", "isfinite", "isinf", "isnan",
              "logical_not", "bitwise_invert"]:
    unary(_name)

# -- binary ---------------------------------------------------------------------------------------
# add/subtract are linear: no multiplication by one.
# (g, or -g for subtract's second argument, summed to the argument's shape: C callables)
binary("add", vjp=(SumVJP(0), SumVJP(1)), reads=["", ""], full_jvp=SumJVP(),
       absorbs_negation="subtract")   # (a + (-b) is a - b, (-a) + b is b - a)
binary("subtract", vjp=(SumVJP(0), SumVJP(1, negate=True)), reads=["", ""],
       full_jvp=SumJVP(negate=True))

# (x * 1 and 1 * x are x, exactly, also for inf, nan and -0.0; (-a) * b is -(a * b))
# (the partials are the other factor, named: the rule shapes read it without a call)
binary("multiply", "x2", "x1", unit=(1, (0, 1)), odd=True)
def _over(x, y):
    # x / y for a Python scalar divisor too: IEEE's 1 / 0 = inf, as the array backends (and
    # torch's gradient of x / 0), not Python's ZeroDivisionError
    if isinstance(y, (int, float, complex)) and y == 0:
        y = complex(y) if isinstance(y, complex) else math.copysign(0.0, y)
        return x * (complex(math.inf, math.nan) if isinstance(y, complex) else
                    math.copysign(math.inf, y))
    return divided(x, y)


binary("divide", lambda ans, x1, x2: _over(1.0, x2), lambda ans, x1, x2: _over(negated(ans), x2))


def _pow_d1(ans, x1, x2):
    # x2 * x1 ** (x2 - 1), and 0 where x2 == 0 (x ** 0 is constant; the formula would give
    # 0 * inf = nan at x1 = 0), as torch and JAX.
    if isinstance(x2, (int, float)):
        if x2 == 2:   # (the common square: no pass for x1 ** 1)
            return times(2, x1)
        return ops.zeros_like(x1) if x2 == 0 else x2 * ops.pow(x1, x2 - 1)
    return ops.where(x2 == 0, 0.0, x2 * ops.pow(x1, x2 - 1))


def _pow_d2(ans, x1, x2):
    # ans * log(x1), defined as 0 where x1 == 0 (the limit for x2 > 0), as torch and JAX do.
    if isinstance(x1, (int, float, complex)):   # (2.0 ** x: the log is a Python number)
        return ops.zeros_like(ans) if x1 == 0 else ans * cmath.log(x1) if \
            isinstance(x1, complex) or x1 < 0 else ans * math.log(x1)
    safe = ops.where(x1 == 0, ops.ones_like(x1), x1)
    return ops.where(x1 == 0, 0.0, ans * ops.log(safe))


binary("pow", _pow_d1, _pow_d2, unit=(1, (1,)))   # (x ** 1 is x)
binary("atan2", lambda ans, x1, x2: x2 / (x1 * x1 + x2 * x2),
       lambda ans, x1, x2: -x1 / (x1 * x1 + x2 * x2))
binary("hypot", lambda ans, x1, x2: x1 / ans, lambda ans, x1, x2: x2 / ans)
binary("logaddexp", lambda ans, x1, x2: ops.exp(x1 - ans), lambda ans, x1, x2: ops.exp(x2 - ans))
# maximum/minimum: ties split the gradient in half (as torch does).
def _share(win, tie, ans):
    # 1 where this argument wins, 0.5 on ties; built from masks, not where(c, 1.0, 0.5): the
    # standard (and array-api-strict) refuses where() with two Python scalars.
    return ops.astype(win, ans.dtype) + 0.5 * ops.astype(tie, ans.dtype)


binary("maximum", lambda ans, x1, x2: _share(x1 > x2, x1 == x2, ans),
       lambda ans, x1, x2: _share(x2 > x1, x1 == x2, ans))
binary("minimum", lambda ans, x1, x2: _share(x1 < x2, x1 == x2, ans),
       lambda ans, x1, x2: _share(x2 < x1, x1 == x2, ans))
binary("copysign", lambda ans, x1, x2:
       1.0 - 2.0 * ops.astype(ops.signbit(x1) != ops.signbit(ans), ans.dtype),
       lambda ans, x1, x2: 0.0 * ans)
binary("remainder", lambda ans, x1, x2: ops.ones_like(ans),
       lambda ans, x1, x2: -ops.floor_divide(x1, x2))
# nextafter(x1, x2) moves x1 by one ulp: derivative 1 in x1, 0 in x2.
binary("nextafter", lambda ans, x1, x2: 1.0 + 0.0 * ans, lambda ans, x1, x2: 0.0 * ans)

for _name in ["floor_divide", "equal", "not_equal", "less", "less_equal", "greater",
              "greater_equal", "logical_and", "logical_or", "logical_xor", "bitwise_and",
              "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift"]:
    binary(_name)


# -- clip: x with optional array or scalar bounds -------------------------------------------------
def _clip_impl(xp, x, lo, hi):
    return xp.clip(x, lo, hi)


def _inside(ans, x, lo, hi):
    m = ops.ones_like(x, dtype=ops.bool)
    if lo is not None:
        m = ops.logical_and(m, x >= lo)
    if hi is not None:
        m = ops.logical_and(m, x <= hi)
    return m


clip_p = decl.primitive(
    "clip", _clip_impl, batch=ELEMENTWISE,
    vjp=(lambda g, ans, x, lo, hi: unbroadcast(ops.where(_inside(ans, x, lo, hi), g, 0.0), x),
         lambda g, ans, x, lo, hi: unbroadcast(ops.where(x < lo, g, 0.0), lo),
         lambda g, ans, x, lo, hi: unbroadcast(ops.where(x > hi, g, 0.0), hi)),
    jvp=(lambda t, ans, x, lo, hi: broadcast_like(ops.where(_inside(ans, x, lo, hi), t, 0.0), ans),
         lambda t, ans, x, lo, hi: broadcast_like(ops.where(x < lo, t, 0.0), ans),
         lambda t, ans, x, lo, hi: broadcast_like(ops.where(x > hi, t, 0.0), ans)),
    api="x, /, min=None, max=None", args=("x", "min", "max"),
    doc="Clamp each element of ``x`` to ``[min, max]``; the bounds may be scalars or arrays.")


# -- docstrings: one row per function, the sections they share written once (_elementwise_docs)
from ._elementwise_docs import document  # noqa: E402
document(globals())
