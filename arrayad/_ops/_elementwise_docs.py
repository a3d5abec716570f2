"""The docstrings of the elementwise functions (``elementwise.py``).

What every elementwise docstring says (which array comes back, which errors the call raises) is
written once, in ``_doc``; each function's row gives only what differs: the math in words, the
domain (one of the ``_DOMAINS``), the result's dtype, the derivative where it is not the
textbook one, and a short example whose output can be checked by hand. Kept apart from the rows
of rules so that a change of a rule and a change of its documentation do not touch the same
lines.
"""

# domain -> (what the argument must be, when the backend refuses another dtype). The standard
# leaves other dtypes undefined; what the backends do was tried on each: array-api-strict refuses
# them (TypeError), NumPy and torch promote some and refuse others (torch with its own
# NotImplementedError or RuntimeError).
_DOMAINS = {
    "floating": (
        "a floating-point array (real or complex)",
        "If ``x`` is integer or bool on array-api-strict (NumPy and torch promote it to a "
        "floating dtype)."),
    "real floating": (
        "a real floating-point array",
        "If an argument is complex (NumPy, array-api-strict), or integer or bool on "
        "array-api-strict (NumPy promotes it)."),
    "numeric": (
        "a numeric array (integer, real or complex floating)",
        "If an argument is bool on array-api-strict (NumPy and torch accept bool for some "
        "functions and refuse it for others: ``negative``, ``subtract``, ``sign``...)."),
    "real numeric": (
        "a real numeric array (integer or real floating)",
        "If an argument is complex on array-api-strict (NumPy too for some functions: "
        "``floor``, ``remainder``...)."),
    "any": (
        "an array of any dtype",
        "If the two dtypes have no promotion (a float and a bool array on array-api-strict)."),
    "bool": (
        "a bool array",
        "If an argument is not bool on array-api-strict (NumPy takes nonzero as true)."),
    "integer or bool": (
        "an integer or bool array",
        "If an argument is floating-point (torch: NotImplementedError)."),
    "integer": (
        "an integer array",
        "If an argument is floating-point (torch: NotImplementedError)."),
}

_BACKEND = ("An array of the inputs' backend and kind (a NumPy array for NumPy input, a torch "
            "tensor for torch input, an ``arrayad.Tensor`` for Tensors, recording the operation "
            "when one requires grad; inside a transform, the transform's traced value)")

_HOLOMORPHIC = ("For complex input the derivative is the complex one, f'(z): the JVP multiplies "
                "the tangent by f'(z) and the VJP the cotangent by ``conj(f'(z))`` (torch's "
                "convention: ``grad`` of ``real(f(z))`` is ``conj(f'(z))``).")

_CONSTANT = ("Not differentiable: the result is a constant of every transform (its derivative "
             "is taken as zero{where}).")


def _doc(summary, domain, dtype, example, *, binary=False, derivative=None, args=None,
         shape=None, extra_raises=()):
    """The docstring of an elementwise function.

    ``dtype``: the result's dtype in words; ``derivative``: a paragraph on the derivative (None:
    the textbook one); ``example``: doctest lines; ``args``: the Parameters entries when they
    are not the standard one or two arrays; ``shape``: the result's shape in words, when
    not that of ``x`` or the broadcast one of ``x1`` and ``x2``."""
    what, refused = _DOMAINS[domain]
    if args is None:
        if binary:
            args = [("x1", "array or Python scalar", f"First input, {what}."),
                    ("x2", "array or Python scalar",
                     f"Second input, {what}, broadcastable with ``x1``. A Python scalar is weak: "
                     f"it takes the other argument's dtype when of the same kind.")]
        else:
            args = [("x", "array", f"Input, {what}.")]
    if shape is None:
        shape = "the broadcast shape of ``x1`` and ``x2``" if binary else "the shape of ``x``"
    lines = [summary, "", "Parameters", "----------"]
    for arg, kind, text in args:
        lines += [f"{arg} : {kind}", f"    {text}"]
    lines += ["", "Returns", "-------", "array",
              f"    {_BACKEND}, with {dtype} and {shape}.", "",
              "Raises", "------", "TypeError",
              "    If an argument is neither an array of a supported backend nor a Python "
              "number (a str, an object of another library): convert it with "
              "``arrayad.asarray``."]
    if binary:
        lines += ["TypeError",
                  "    If ``x1`` and ``x2`` are arrays of two backends (NumPy and torch, say); "
                  "NumPy with Dask is allowed."]
        lines += ["ValueError",
                  "    If the shapes of ``x1`` and ``x2`` do not broadcast (the backend's error: "
                  "torch raises RuntimeError)."]
    lines += ["TypeError", "    " + refused]
    for exc, text in extra_raises:
        lines += [exc, f"    {text}"]
    if derivative:
        lines += ["", "Notes", "-----", derivative]
    lines += ["", "Examples", "--------"] + example.strip("\n").split("\n")
    return "\n".join(lines) + "\n"


def _constant(where=""):
    return _CONSTANT.format(where=where)


# name -> (summary, domain, result dtype, example, options for _doc)
def _rows():
    same = "the dtype of ``x``"
    promoted = "the promoted dtype of ``x1`` and ``x2`` (``arrayad.result_type``)"
    boolean = "dtype bool"
    u = lambda summary, domain, dtype, example, **kw: (summary, domain, dtype, example, kw)  # noqa
    b = lambda summary, domain, dtype, example, **kw: (summary, domain, dtype, example,  # noqa
                                                       dict(kw, binary=True))
    rows = {
        # -- trigonometric and hyperbolic
        "sin": u("The sine of each element of ``x`` (in radians).", "floating", same, """
>>> ad.sin(ad.tensor([0.0, np.pi / 2]))
tensor([0., 1.])
>>> ad.func.grad(ad.sin)(0.0)   # cos(0)
array(1.)
""", derivative=_HOLOMORPHIC),
        "cos": u("The cosine of each element of ``x`` (in radians).", "floating", same, """
>>> ad.cos(ad.tensor([0.0, np.pi]))
tensor([ 1., -1.])
""", derivative=_HOLOMORPHIC),
        "tan": u("The tangent of each element of ``x`` (in radians).", "floating", same, """
>>> ad.allclose(ad.tan(ad.tensor([0.0, np.pi / 4])), ad.tensor([0.0, 1.0]))
True
""", derivative="The derivative ``1 + tan(x)**2`` is computed from the result. " + _HOLOMORPHIC),
        "asin": u("The inverse sine of each element of ``x``, in ``[-pi/2, pi/2]`` for real "
                  "``x`` in ``[-1, 1]`` (nan outside).", "floating", same, """
>>> ad.allclose(ad.asin(ad.tensor([0.0, 1.0])), ad.tensor([0.0, np.pi / 2]))
True
""", derivative="``1 / sqrt(1 - x**2)``: infinite at ``x = -1`` and ``x = 1``. " + _HOLOMORPHIC),
        "acos": u("The inverse cosine of each element of ``x``, in ``[0, pi]`` for real ``x`` "
                  "in ``[-1, 1]`` (nan outside).", "floating", same, """
>>> ad.allclose(ad.acos(ad.tensor([1.0, -1.0])), ad.tensor([0.0, np.pi]))
True
""", derivative="``-1 / sqrt(1 - x**2)``: infinite at ``x = -1`` and ``x = 1``. " + _HOLOMORPHIC),
        "atan": u("The inverse tangent of each element of ``x``, in ``(-pi/2, pi/2)`` for real "
                  "``x``.", "floating", same, """
>>> ad.allclose(ad.atan(ad.tensor([0.0, 1.0])), ad.tensor([0.0, np.pi / 4]))
True
>>> ad.func.grad(ad.atan)(1.0)   # 1 / (1 + x**2)
array(0.5)
""", derivative=_HOLOMORPHIC),
        "sinh": u("The hyperbolic sine of each element of ``x``.", "floating", same, """
>>> x0 = np.array([0.0, 1.0])
>>> ad.allclose(ad.sinh(ad.tensor(x0)), np.sinh(x0))
True
""", derivative=_HOLOMORPHIC),
        "cosh": u("The hyperbolic cosine of each element of ``x``.", "floating", same, """
>>> ad.cosh(ad.tensor([0.0]))
tensor([1.])
>>> ad.func.grad(ad.cosh)(0.0)   # sinh(0)
array(0.)
""", derivative=_HOLOMORPHIC),
        "tanh": u("The hyperbolic tangent of each element of ``x``.", "floating", same, """
>>> ad.tanh(ad.tensor([0.0]))
tensor([0.])
>>> ad.func.grad(ad.tanh)(0.0)   # 1 - tanh(0)**2
array(1.)
""", derivative="The derivative ``1 - tanh(x)**2`` is computed from the result. "
                + _HOLOMORPHIC),
        "asinh": u("The inverse hyperbolic sine of each element of ``x``.", "floating", same, """
>>> x = ad.tensor([-2.0, 0.0, 3.0])
>>> ad.allclose(ad.sinh(ad.asinh(x)), x)
True
""", derivative=_HOLOMORPHIC),
        "acosh": u("The inverse hyperbolic cosine of each element of ``x`` (real ``x >= 1``; "
                   "nan below).", "floating", same, """
>>> ad.acosh(ad.tensor([1.0]))
tensor([0.])
>>> ad.allclose(ad.cosh(ad.acosh(ad.tensor([2.0]))), ad.tensor([2.0]))
True
""", derivative="``1 / sqrt(x**2 - 1)``: infinite at ``x = 1``. " + _HOLOMORPHIC),
        "atanh": u("The inverse hyperbolic tangent of each element of ``x`` (real ``x`` in "
                   "``[-1, 1]``; infinite at the ends, nan outside).", "floating", same, """
>>> x = ad.tensor([-0.5, 0.0, 0.5])
>>> ad.allclose(ad.tanh(ad.atanh(x)), x)
True
""", derivative=_HOLOMORPHIC),
        # -- exponentials and logarithms
        "exp": u("The exponential ``e**x`` of each element of ``x``.", "floating", same, """
>>> ad.exp(ad.tensor([0.0, 1.0]))   # 1 and e
tensor([1.0000, 2.7183])
""", derivative="The derivative is the result itself (no second exponential). "
                + _HOLOMORPHIC),
        "expm1": u("``exp(x) - 1`` for each element of ``x``, accurate for ``x`` near zero "
                   "(where ``exp(x) - 1`` loses every digit).", "floating", same, """
>>> ad.expm1(ad.tensor([0.0, 1e-10]))   # exp(1e-10) - 1 would round to 1.000000082740371e-10
tensor([0.0000e+00, 1.0000e-10])
""", derivative=_HOLOMORPHIC),
        "log": u("The natural logarithm of each element of ``x`` (real ``x > 0``; ``-inf`` "
                 "at 0, nan below).", "floating", same, """
>>> ad.log(ad.tensor([1.0, np.e]))
tensor([0., 1.])
>>> ad.func.grad(ad.log)(2.0)   # 1 / x
array(0.5)
""", derivative=_HOLOMORPHIC),
        "log1p": u("``log(1 + x)`` for each element of ``x``, accurate for ``x`` near zero.",
                   "floating", same, """
>>> ad.log1p(ad.tensor([0.0, 1e-10]))
tensor([0.0000e+00, 1.0000e-10])
""", derivative=_HOLOMORPHIC),
        "log2": u("The base-2 logarithm of each element of ``x``.", "floating", same, """
>>> ad.log2(ad.tensor([1.0, 8.0]))
tensor([0., 3.])
""", derivative=_HOLOMORPHIC),
        "log10": u("The base-10 logarithm of each element of ``x``.", "floating", same, """
>>> ad.log10(ad.tensor([1.0, 1000.0]))
tensor([0., 3.])
""", derivative=_HOLOMORPHIC),
        # -- powers
        "sqrt": u("The principal square root of each element of ``x`` (real ``x >= 0``; nan "
                  "below).", "floating", same, """
>>> ad.sqrt(ad.tensor([4.0, 9.0]))
tensor([2., 3.])
>>> ad.func.grad(ad.sqrt)(4.0)   # 1 / (2 sqrt(x))
array(0.25)
""", derivative="``1 / (2 sqrt(x))`` from the result: ``inf`` at ``x = 0``. " + _HOLOMORPHIC),
        "square": u("The square ``x * x`` of each element of ``x``.", "numeric", same, """
>>> ad.square(ad.tensor([2.0, -3.0]))
tensor([4., 9.])
>>> ad.func.grad(ad.square)(3.0)   # 2 x
array(6.)
""", derivative=_HOLOMORPHIC),
        "reciprocal": u("The reciprocal ``1 / x`` of each element of ``x``.", "floating", same,
                        """
>>> ad.reciprocal(ad.tensor([2.0, 4.0]))
tensor([0.5000, 0.2500])
>>> ad.func.grad(ad.reciprocal)(2.0)   # -1 / x**2
array(-0.25)
""", derivative=_HOLOMORPHIC),
        # -- sign and magnitude
        "abs": u("The absolute value of each element of ``x`` (the modulus for complex "
                 "``x``).", "numeric", "the dtype of ``x`` (for complex ``x``, the real "
                 "dtype of its precision: float64 for complex128)", """
>>> ad.abs(ad.tensor([-2.0, 3.0]))
tensor([2., 3.])
>>> ad.func.grad(ad.abs)(0.0)   # sign(0): zero at the kink
array(0.)
>>> ad.func.grad(ad.abs)(np.asarray(3 + 4j))   # z / abs(z)
array(0.6+0.8j)
""", derivative="The derivative of real ``abs(x)`` is ``sign(x)``, taken as 0 at ``x = 0`` "
                "(a subgradient, as torch). ``abs(z)`` of a complex ``z`` is not holomorphic: "
                "the VJP is ``g * z / abs(z)`` and the JVP ``real(conj(z / abs(z)) * t)`` (a "
                "real tangent for the real result), both 0 at ``z = 0``, as torch."),
        "sign": u("The sign of each element of ``x``: -1, 0 or 1, and ``x / abs(x)`` (0 at 0) "
                  "for complex ``x``.", "numeric", same, """
>>> ad.sign(ad.tensor([-2.0, 0.0, 3.0]))
tensor([-1.,  0.,  1.])
>>> ad.func.grad(ad.sign)(3.0)
array(0.)
""", derivative="For real ``x`` the derivative is taken as zero everywhere, also at the jump "
                "at 0. For complex ``z`` the derivative of ``s = z / abs(z)`` is the map "
                "``h -> (h - s * real(conj(s) * h)) / abs(z)`` (0 at ``z = 0``), used for both "
                "the JVP and the VJP, as torch's ``sgn``."),
        # -- linear
        "negative": u("The negation ``-x`` of each element of ``x``.", "numeric", same, """
>>> ad.negative(ad.tensor([1.0, -2.0]))
tensor([-1.,  2.])
"""),
        "positive": u("Each element of ``x`` unchanged (``+x``).", "numeric", same, """
>>> ad.positive(ad.tensor([1.0, -2.0]))
tensor([ 1., -2.])
"""),
        "conj": u("The complex conjugate of each element of ``x`` (``x`` itself for real "
                  "``x``).", "numeric", same, """
>>> ad.conj(ad.asarray([1 + 2j]))
tensor([1.0000-2.0000j], dtype=arrayad.complex128)
""", derivative="Linear: the VJP is ``conj(g)`` and the JVP ``conj(t)``."),
        "real": u("The real part of each element of ``x``.", "numeric",
                  "the real dtype of the precision of ``x`` (float64 for complex128; a real "
                  "``x`` keeps its dtype)", """
>>> ad.real(ad.asarray([1 + 2j]))
tensor([1.])
>>> ad.func.grad(ad.real)(np.asarray(3 + 4j))
array(1.+0.j)
""", derivative="Linear. The cotangent of a complex ``x`` is complex: ``g`` itself "
                "(``1 * g``) cast to the dtype of ``x``."),
        "imag": u("The imaginary part of each element of ``x``.", "numeric",
                  "the real dtype of the precision of ``x`` (float64 for complex128; zeros "
                  "for a real ``x``)", """
>>> ad.imag(ad.asarray([1 + 2j]))
tensor([2.])
""", derivative="Linear. The cotangent of a complex ``x`` is ``1j * g``, that of a real ``x`` "
                "zero."),
        # -- rounding and tests: not differentiable
        "ceil": u("The smallest integer value not below each element of ``x`` (the same dtype: "
                  "``ceil(1.5)`` is 2.0).", "real numeric", same, """
>>> ad.ceil(ad.tensor([-1.5, 1.2, 2.0]))
tensor([-1.,  2.,  2.])
""", derivative=_constant(", also at the jumps")),
        "floor": u("The largest integer value not above each element of ``x`` (the same dtype: "
                   "``floor(1.5)`` is 1.0).", "real numeric", same, """
>>> ad.floor(ad.tensor([-1.5, 1.2, 2.0]))
tensor([-2.,  1.,  2.])
>>> ad.func.grad(ad.floor)(1.0)   # zero, also at the jump
array(0.)
""", derivative=_constant(", also at the jumps")),
        "round": u("Each element of ``x`` rounded to the nearest integer value, halves to the "
                   "even one (for complex ``x``, each part).", "numeric", same, """
>>> ad.round(ad.tensor([0.5, 1.5, 2.5, -0.7]))
tensor([ 0.,  2.,  2., -1.])
""", derivative=_constant(", also at the jumps")),
        "trunc": u("Each element of ``x`` with its fractional part removed (rounded toward "
                   "zero).", "real numeric", same, """
>>> ad.trunc(ad.tensor([-1.7, 1.7]))
tensor([-1.,  1.])
""", derivative=_constant(", also at the jumps")),
        "signbit": u("Whether the sign bit of each element of ``x`` is set (true for -0.0 and "
                     "negative values, also ``-inf`` and a negative nan).", "real floating",
                     boolean, """
>>> ad.signbit(ad.tensor([-1.0, -0.0, 0.0, 2.0]))
tensor([ True,  True, False, False])
""", derivative=_constant()),
        "isfinite": u("Whether each element of ``x`` is finite (neither infinite nor nan; for "
                      "complex ``x``, both parts).", "numeric", boolean, """
>>> ad.isfinite(ad.tensor([1.0, np.inf, np.nan]))
tensor([ True, False, False])
""", derivative=_constant()),
        "isinf": u("Whether each element of ``x`` is positive or negative infinity (for complex "
                   "``x``, either part).", "numeric", boolean, """
>>> ad.isinf(ad.tensor([1.0, -np.inf, np.nan]))
tensor([False,  True, False])
""", derivative=_constant()),
        "isnan": u("Whether each element of ``x`` is nan (for complex ``x``, either part).",
                   "numeric", boolean, """
>>> ad.isnan(ad.tensor([1.0, np.inf, np.nan]))
tensor([False, False,  True])
""", derivative=_constant()),
        "logical_not": u("The logical negation of each element of ``x``.", "bool", boolean, """
>>> ad.logical_not(ad.tensor([True, False]))
tensor([False,  True])
""", derivative=_constant()),
        "bitwise_invert": u("The bitwise inversion ``~x`` of each element of ``x`` (logical "
                            "negation for bool).", "integer or bool", same, """
>>> ad.bitwise_invert(ad.tensor([0, 5]))   # two's complement: -x - 1
tensor([-1, -6])
""", derivative=_constant()),
        # -- binary arithmetic
        "add": b("The sum ``x1 + x2``, elementwise, broadcasting the arguments.", "numeric",
                 promoted, """
>>> ad.add(ad.tensor([1.0, 2.0]), 10.0)
tensor([11., 12.])
"""),
        "subtract": b("The difference ``x1 - x2``, elementwise, broadcasting the arguments.",
                      "numeric", promoted, """
>>> ad.subtract(ad.tensor([3.0, 5.0]), 1.0)
tensor([2., 4.])
"""),
        "multiply": b("The product ``x1 * x2``, elementwise, broadcasting the arguments.",
                      "numeric", promoted, """
>>> ad.multiply(ad.tensor([1.0, 2.0]), ad.tensor([[1.0], [3.0]]))   # shapes (2,) and (2, 1)
tensor([[1., 2.],
        [3., 6.]])
>>> ad.func.grad(ad.multiply)(2.0, 3.0)   # d(x1 * x2)/dx1 = x2
array(3.)
""", derivative="The gradient of an argument that was broadcast is summed over the broadcast "
                "dimensions, so that it has that argument's shape. " + _HOLOMORPHIC),
        "divide": b("The quotient ``x1 / x2``, elementwise, broadcasting the arguments (true "
                    "division: integer arguments give a floating result).", "numeric",
                    "the promoted floating dtype of ``x1`` and ``x2``", """
>>> ad.divide(ad.tensor([1.0, 3.0]), 2.0)
tensor([0.5000, 1.5000])
>>> ad.func.grad(ad.divide)(1.0, 4.0)   # 1 / x2
array(0.25)
""", derivative="Division by a Python zero follows IEEE (``inf``, as the backends), in the "
                "result and in the derivatives. " + _HOLOMORPHIC),
        "pow": b("``x1`` raised to the power ``x2``, elementwise, broadcasting the arguments.",
                 "numeric", promoted, """
>>> ad.pow(ad.tensor([2.0, 3.0]), 2)
tensor([4., 9.])
>>> ad.func.grad(lambda x: ad.pow(x, 2))(3.0)   # 2 x
array(6.)
>>> ad.func.grad(lambda x: ad.pow(x, 0.0))(0.0)   # x ** 0 is constant
array(0.)
""", derivative="``d/dx1 = x2 * x1 ** (x2 - 1)``, taken as 0 where ``x2 == 0`` (the formula "
                "would give nan at ``x1 = 0``); ``d/dx2 = x1 ** x2 * log(x1)``, taken as 0 "
                "where ``x1 == 0`` (the limit for ``x2 > 0``), as torch and JAX. "
                + _HOLOMORPHIC,
                extra_raises=[("ValueError", "If integer arguments meet a negative integer "
                               "power (NumPy: ``ad.pow(ad.tensor([2]), -1)``); use floats.")]),
        "atan2": b("The angle of the point ``(x2, x1)`` (note the order: ``atan2(y, x)``), in "
                   "``[-pi, pi]``, elementwise.", "real floating", promoted, """
>>> ad.allclose(ad.atan2(ad.tensor([1.0, 1.0]), ad.tensor([1.0, -1.0])),
...             ad.tensor([np.pi / 4, 3 * np.pi / 4]))
True
""", derivative="``d/dx1 = x2 / (x1**2 + x2**2)``, ``d/dx2 = -x1 / (x1**2 + x2**2)``: nan at "
                "the origin."),
        "hypot": b("``sqrt(x1**2 + x2**2)``, elementwise, without overflow or underflow in the "
                   "squares.", "real floating", promoted, """
>>> ad.hypot(ad.tensor(3.0), 4.0)
tensor(5.)
>>> ad.allclose(ad.hypot(ad.tensor(3e200), 4e200), ad.tensor(5e200))   # no overflow
True
""", derivative="``x1 / hypot`` and ``x2 / hypot``, computed from the result: nan at the "
                "origin."),
        "logaddexp": b("``log(exp(x1) + exp(x2))``, elementwise, without overflow.",
                       "real floating", promoted, """
>>> ad.allclose(ad.logaddexp(ad.tensor([0.0, 1000.0]), 0.0), ad.tensor([np.log(2.0), 1000.0]))
True
""", derivative="``exp(x1 - result)`` and ``exp(x2 - result)``: the softmax weights of the two "
                "arguments, which never overflow."),
        "copysign": b("The magnitude of ``x1`` with the sign of ``x2``, elementwise.",
                      "real floating", promoted, """
>>> ad.copysign(ad.tensor([1.0, -2.0]), -1.0)
tensor([-1., -2.])
>>> ad.func.grad(ad.copysign)(2.0, -1.0)   # the sign flipped: -1
array(-1.)
""", derivative="``d/dx1`` is 1 where the sign of ``x1`` is kept and -1 where it flips; "
                "``d/dx2`` is zero."),
        "nextafter": b("The next floating-point value after ``x1`` in the direction of "
                       "``x2``, elementwise.", "real floating", promoted, """
>>> ad.nextafter(ad.tensor(1.0), 2.0) == 1.0 + ad.finfo(ad.float64).eps
tensor(True)
""", derivative="One ulp is taken as no change: ``d/dx1 = 1``, ``d/dx2 = 0``."),
        "maximum": b("The larger of ``x1`` and ``x2``, elementwise (nan if either is nan).",
                     "real numeric", promoted, """
>>> ad.maximum(ad.tensor([1.0, 5.0]), ad.tensor([3.0, 2.0]))
tensor([3., 5.])
>>> ad.func.grad(ad.maximum)(2.0, 2.0)   # a tie: half each
array(0.5)
""", derivative="The gradient goes to the larger argument; on ties it is split in half "
                "between the two, as torch."),
        "minimum": b("The smaller of ``x1`` and ``x2``, elementwise (nan if either is nan).",
                     "real numeric", promoted, """
>>> ad.minimum(ad.tensor([1.0, 5.0]), ad.tensor([3.0, 2.0]))
tensor([1., 2.])
>>> ad.func.grad(ad.minimum)(2.0, 2.0)   # a tie: half each
array(0.5)
""", derivative="The gradient goes to the smaller argument; on ties it is split in half "
                "between the two, as torch."),
        "remainder": b("The remainder of ``x1 / x2``, elementwise, with the sign of ``x2`` "
                       "(Python's ``%``).", "real numeric", promoted, """
>>> ad.remainder(ad.tensor([5, -5]), 3)
tensor([2, 1])
""", derivative="``remainder = x1 - floor(x1 / x2) * x2``: ``d/dx1 = 1`` and ``d/dx2 = "
                "-floor(x1 / x2)``, the floor taken as constant."),
        "floor_divide": b("``floor(x1 / x2)``, elementwise (Python's ``//``).", "real numeric",
                          promoted, """
>>> ad.floor_divide(ad.tensor([7.0, -7.0]), 2.0)
tensor([ 3., -4.])
""", derivative=_constant(", also at the jumps")),
        # -- comparisons and logic
        "equal": b("Whether ``x1 == x2``, elementwise.", "any", boolean, """
>>> ad.equal(ad.tensor([1.0, 2.0]), ad.tensor([1.0, 3.0]))
tensor([ True, False])
""", derivative=_constant()),
        "not_equal": b("Whether ``x1 != x2``, elementwise (true where either is nan).", "any",
                       boolean, """
>>> ad.not_equal(ad.tensor([1.0, 2.0]), ad.tensor([1.0, 3.0]))
tensor([False,  True])
""", derivative=_constant()),
        "less": b("Whether ``x1 < x2``, elementwise.", "real numeric", boolean, """
>>> ad.less(ad.tensor([1.0, 2.0, 3.0]), 2.0)
tensor([ True, False, False])
""", derivative=_constant()),
        "less_equal": b("Whether ``x1 <= x2``, elementwise.", "real numeric", boolean, """
>>> ad.less_equal(ad.tensor([1.0, 2.0, 3.0]), 2.0)
tensor([ True,  True, False])
""", derivative=_constant()),
        "greater": b("Whether ``x1 > x2``, elementwise.", "real numeric", boolean, """
>>> ad.greater(ad.tensor([1.0, 2.0, 3.0]), 2.0)
tensor([False, False,  True])
""", derivative=_constant()),
        "greater_equal": b("Whether ``x1 >= x2``, elementwise.", "real numeric", boolean, """
>>> ad.greater_equal(ad.tensor([1.0, 2.0, 3.0]), 2.0)
tensor([False,  True,  True])
""", derivative=_constant()),
        "logical_and": b("The logical and of ``x1`` and ``x2``, elementwise.", "bool", boolean,
                         """
>>> ad.logical_and(ad.tensor([True, True, False]), ad.tensor([True, False, False]))
tensor([ True, False, False])
""", derivative=_constant()),
        "logical_or": b("The logical or of ``x1`` and ``x2``, elementwise.", "bool", boolean,
                        """
>>> ad.logical_or(ad.tensor([True, True, False]), ad.tensor([True, False, False]))
tensor([ True,  True, False])
""", derivative=_constant()),
        "logical_xor": b("The logical exclusive or of ``x1`` and ``x2``, elementwise.", "bool",
                         boolean, """
>>> ad.logical_xor(ad.tensor([True, True, False]), ad.tensor([True, False, False]))
tensor([False,  True, False])
""", derivative=_constant()),
        "bitwise_and": b("The bitwise and of ``x1`` and ``x2``, elementwise.",
                         "integer or bool", promoted, """
>>> ad.bitwise_and(ad.tensor([12]), 10)   # 0b1100 & 0b1010 = 0b1000
tensor([8])
""", derivative=_constant()),
        "bitwise_or": b("The bitwise or of ``x1`` and ``x2``, elementwise.", "integer or bool",
                        promoted, """
>>> ad.bitwise_or(ad.tensor([12]), 10)   # 0b1100 | 0b1010 = 0b1110
tensor([14])
""", derivative=_constant()),
        "bitwise_xor": b("The bitwise exclusive or of ``x1`` and ``x2``, elementwise.",
                         "integer or bool", promoted, """
>>> ad.bitwise_xor(ad.tensor([12]), 10)   # 0b1100 ^ 0b1010 = 0b0110
tensor([6])
""", derivative=_constant()),
        "bitwise_left_shift": b("``x1`` shifted left by ``x2`` bits, elementwise (``x1 * "
                                "2**x2``).", "integer", promoted, """
>>> ad.bitwise_left_shift(ad.tensor([1, 3]), 2)
tensor([ 4, 12])
""", derivative=_constant()),
        "bitwise_right_shift": b("``x1`` shifted right by ``x2`` bits, elementwise "
                                 "(``floor(x1 / 2**x2)``).", "integer", promoted, """
>>> ad.bitwise_right_shift(ad.tensor([8, -8]), 2)
tensor([ 2, -2])
""", derivative=_constant()),
        # -- clip
        "clip": u("Each element of ``x`` clamped to ``[min, max]``.", "real numeric",
                  "the dtype of ``x``", """
>>> ad.clip(ad.tensor([-1.0, 0.5, 2.0]), 0.0, 1.0)
tensor([0.0000, 0.5000, 1.0000])
>>> ad.func.grad(lambda x: ad.clip(x, 0.0, 1.0))(2.0)   # clamped: no gradient
array(0.)
""", args=[("x", "array", "Input, a real numeric array."),
           ("min, max", "array, Python scalar or None",
            "The lower (``min``) and upper (``max``) bound; None: no bound on that side. "
            "An array bound broadcasts with ``x``.")],
            shape="the broadcast shape of ``x`` and the bounds",
            derivative="The gradient goes to ``x`` where ``min <= x <= max`` (the bounds "
                       "included) and to a bound where ``x`` lies beyond it, each summed over "
                       "the dimensions its argument was broadcast along.",
            extra_raises=[("TypeError", "If ``x`` and an array bound are of two backends."),
                          ("ValueError", "If ``x`` and an array bound do not broadcast "
                           "together.")]),
    }
    return rows


def document(namespace):
    """Give each elementwise function of ``namespace`` (elementwise.py's globals) its
    docstring; a function without a row keeps the one its declaration gave."""
    for name, (summary, domain, dtype, example, kw) in _rows().items():
        namespace[name].__doc__ = _doc(summary, domain, dtype, example, **kw)
