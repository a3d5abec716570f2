# cython: language_level=3
"""Values the rules multiply by: the structural zeros of cotangents and tangents and the check
of a local derivative for values that would turn them into nan (NOTE [strong zeros]); the rule
shapes most elementwise rules share, and the dtype helpers they call.
"""

from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_C_CONTIGUOUS, PyBUF_FORMAT
from libc.math cimport isfinite as c_isfinite
from libc.stdint cimport uint32_t, uint64_t
from cpython.number cimport PyNumber_InPlaceMultiply, PyNumber_InPlaceTrueDivide
from cpython.weakref cimport PyWeakref_NewRef

from ._base cimport (_is_scalar, ThreadState, Primitive, Meta, _host, _op, _mul_p, _add_p, _div_p,
                     _neg_p, _inplace_type, backend_of, fix_scalar, _state)
from ._arrays cimport Array, Tensor, Tracer, _bind, _new_tensor, dtype_of, shape_of
from ._interp cimport GradTracer, DualTracer, BatchTracer, _new_batch
from ._small_arith import (multiply as _small_multiply, divide as _small_divide,
                           negative as _small_negative)

cimport numpy as cnp
cnp.import_array()

# NOTE [strong zeros]
# -------------------
# A zero cotangent (or tangent) that is zero by construction contributes zero: the chain rule
# applies a linear map to it, and a linear map sends zero to zero, even where the local
# derivative is inf or nan. IEEE says 0 * inf = nan instead, which is how
# `where(x > 0, sqrt(x), 0)` at x = 0, `sqrt(x)[1:]` with x[0] = 0, scikit-learn's
# `v = 0/0 ...; v[mask] = finite`, or jacfwd of `sum(sqrt(x))` (its basis vectors are mostly
# zeros) get a nan derivative in torch and JAX where it is well defined.
#
# Which zeros are structural is a matter of where they come from, not of what they are: the
# positions that a select (`where`), an index scatter (getitem's VJP writes g into zeros), an
# overwrite (setitem: the old array's cotangent is zero where it was overwritten) or a
# Jacobian's basis vectors set to zero. A zero that arithmetic made (1/inf, an underflow) is a
# number, and 0 * inf = nan for it as for torch: `log(exp(800.))` has a nan derivative, not 0.
#
# The rules that make structural zeros register their result here (`structural_zeros`): a
# per-thread table keyed by the identity of the value (a raw array, a Tensor, a tracer) with a
# weak reference to it (its callback removes the entry, so an id is never looked up for another
# value) and a lazily built boolean mask (`_Mask`: True where the zero is structural; a slice's
# "all but the key" is built only if a product needs it); a tracer holds its mask in a field
# instead (the Jacobians' cotangents and tangents are tracers: no table work per product). The
# rule shapes multiply a cotangent by a local derivative in one place, `_times`: when the
# cotangent has a mask (one dict lookup, none while the table is empty) and the derivative may
# hold a value that makes a zero factor nan (inf or nan; for a divisor, also 0: `_singular`),
# the product is `where(mask, 0, g * d)`; either way the product keeps the cotangent's mask.
# Where the values are not known when the rule runs (a staged jit program, Dask, a GPU) and the
# cotangent has a mask, the select is always made: which cotangents came from a select is known
# at staging time, so `jit(grad(f))` equals `grad(f)`. The engine's accumulation `g1 + g2` keeps the
# positions structural in both (`_accum_slot`), and so do add's and subtract's rules; the
# linear elementwise rules (negative, conj, real) keep their argument's (`keep_zeros`). Every
# other rule (reductions, the sums of unbroadcast, a matmul) makes a new value without a mask:
# its zeros are numbers again, which is conservative (a nan where a mask could have given 0,
# never a wrong number). A gradient handed to the caller loses its mask (`_handed_out`): the
# caller may change it in place, and a tangent or cotangent the caller gives is data.

cdef class _Mask:
    """Where a cotangent (or tangent) is zero by construction: a boolean array (True there), of
    a shape that broadcasts to the value's, made when first asked for (``mask()``) by ``make()``
    or as the positions structural in both ``a`` and ``b``."""

    def __call__(self):
        return self.get()

    cdef object get(self):
        if self.mask is None:
            if self.make is not None:
                self.mask = self.make()
            elif self.a is not None and self.b is not None:
                self.mask = _bind(<Primitive>_op['bitwise_and'], (self.a.get(), self.b.get()), {})
            else:
                raise TypeError("arrayad: an empty mask of structural zeros (made with __new__?)")
            self.make = None
            self.a = self.b = None
        return self.mask


cdef _Mask _both(_Mask a, _Mask b):
    """The positions structural in both (None: in none, as either is None)."""
    cdef _Mask m
    if a is None or b is None:
        return None
    if a is b:
        return a
    m = _Mask.__new__(_Mask)
    m.a = a
    m.b = b
    return m


cdef class _Entry:
    """A value's entry in the table: its mask, and the weak reference to it whose callback
    (this entry) removes the entry when the value dies."""
    cdef _Mask mask
    cdef object ref
    cdef dict table
    cdef object key

    def __call__(self, ref):
        if self.table is not None and self.table.get(self.key) is self:
            del self.table[self.key]
        self.ref = None   # (the entry and its reference refer to each other)


cdef _Mask _mask_of(ThreadState st, object v):
    """The mask of ``v``'s structural zeros, or None."""
    if isinstance(v, Tracer):
        return <_Mask>(<Tracer>v)._zeros
    if not st.zeros or v is None:
        return None
    e = st.zeros.get(<size_t><void*>v)
    return None if e is None else (<_Entry>e).mask


cdef object _mark(ThreadState st, object v, _Mask m):
    """Register ``m`` as the mask of ``v``'s structural zeros (a value that holds no weak
    reference, a Python scalar, keeps none: its zeros are numbers); returns ``v``."""
    cdef _Entry e
    if m is None or v is None or _is_scalar(v):
        return v
    if isinstance(v, Tracer):   # (a field: no table entry, no weak reference)
        (<Tracer>v)._zeros = m
        return v
    key = <size_t><void*>v
    old = st.zeros.get(key)
    if old is not None:   # (the same value: its entry would have gone with an earlier one)
        (<_Entry>old).mask = m
        return v
    e = _Entry.__new__(_Entry)
    try:
        e.ref = PyWeakref_NewRef(v, e)
    except TypeError:
        return v
    e.mask = m
    e.table = st.zeros
    e.key = key
    st.zeros[key] = e
    return v


cdef void _unmark(ThreadState st, object v) except *:
    """Forget ``v``'s mask (its values changed in place, or it is handed out)."""
    if isinstance(v, Tracer):
        (<Tracer>v)._zeros = None
        return
    if not st.zeros or v is None:
        return
    e = st.zeros.pop(<size_t><void*>v, None)
    if e is not None:
        (<_Entry>e).ref = None


cdef void _carry(ThreadState st, object src, object dst) except *:
    """``dst`` has the structural zeros of ``src`` (the same values, another wrapper)."""
    if dst is not src:
        _mark(st, dst, _mask_of(st, src))


def structural_zeros(value, make):
    """Register that ``value`` (a cotangent or tangent a rule returns) is zero by construction
    where the boolean array ``make()`` is True (NOTE [strong zeros]); ``make`` is called only
    if a product needs the mask and must not refer to ``value`` itself. Returns ``value``."""
    cdef _Mask m
    if value is None:
        return value
    m = _Mask.__new__(_Mask)
    m.make = make
    return _mark(_state(), value, m)


def keep_zeros(src, dst):
    """``dst``, an elementwise linear function of ``src`` that keeps its zeros where they are
    (``-src``, ``conj(src)``, ``real(src)``), with the structural zeros of ``src``."""
    _carry(_state(), src, dst)
    return dst


def forget_zeros(value):
    """``value`` without structural zeros (it goes to user code, which may change it in place:
    a custom Function's rules). Returns ``value``."""
    _unmark(_state(), value)
    return value


def zeros_mask(value):
    """The mask of ``value``'s structural zeros as a callable (``mask()`` builds it), or None."""
    return _mask_of(_state(), value)


cdef class _BatchZeros:
    """``rows == 0`` for a BatchTracer ``rows``, made from its batch and level, not from the
    tracer itself (which the mask must not keep alive)."""
    cdef object interp, value
    cdef int bdim

    def __init__(self, BatchTracer rows not None):
        self.interp = rows._interp
        self.value = rows.value
        self.bdim = rows.bdim

    def __call__(self):
        rows = _new_batch(self.interp, self.value, self.bdim)
        return _bind(<Primitive>_op['equal'], (rows, 0), {})


def constant_zeros(value):
    """Register the zeros of a constant ``value`` (a Jacobian's basis vectors, zero tangents and
    cotangents of other arguments) as structural; returns ``value``. Under vmap, where
    ``value`` is a batch of rows, the mask is built lazily from the rows."""
    cdef _Mask m
    if value is None or _is_scalar(value):
        return value
    m = _Mask.__new__(_Mask)
    if type(value) is BatchTracer:
        m.make = _BatchZeros(<BatchTracer>value)
    else:
        m.mask = _bind(<Primitive>_op['equal'], (value, 0), {})
    return _mark(_state(), value, m)


def structural_zero_count():
    """How many values of this thread have a mask of structural zeros now (for the tests)."""
    return len(_state().zeros)


cdef int _buffer_singular(object a, bint quotient) except -2:
    """1 if the C-contiguous float buffer of ``a`` has a value that makes a zero factor nan (inf
    or nan; for a quotient, also 0), 0 if not, -1 if ``a`` has no such buffer.

    On the bits, without a branch per value, so that the compiler vectorizes the loop and it
    runs at the speed of memory: a float's exponent is all ones exactly for inf and nan, and
    adding one to an all-ones exponent carries into the sign bit; a value is zero exactly when
    its bits without the sign are 0, and subtracting one from 0 sets the sign bit."""
    cdef Py_buffer view
    cdef Py_ssize_t i, n
    cdef uint64_t* d64
    cdef uint32_t* d32
    cdef uint64_t acc64 = 0
    cdef uint32_t acc32 = 0
    cdef int found
    if not a.flags.c_contiguous:   # (NumPy raises ValueError, not BufferError, for these)
        return -1
    PyObject_GetBuffer(a, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT)
    try:
        fmt = view.format.lstrip(b"=<@") if view.format != NULL else b""
        if fmt == b"d" or fmt == b"Zd":
            d64 = <uint64_t*>view.buf
            n = view.len // 8
            if quotient:
                for i in range(n):
                    acc64 |= (((d64[i] & 0x7FF0000000000000ULL) + 0x0010000000000000ULL)
                              | ((d64[i] & 0x7FFFFFFFFFFFFFFFULL) - 1))
            else:
                for i in range(n):
                    acc64 |= (d64[i] & 0x7FF0000000000000ULL) + 0x0010000000000000ULL
            found = (acc64 >> 63) != 0
        elif fmt == b"f" or fmt == b"Zf":
            d32 = <uint32_t*>view.buf
            n = view.len // 4
            if quotient:
                for i in range(n):
                    acc32 |= (((d32[i] & 0x7F800000U) + 0x00800000U)
                              | ((d32[i] & 0x7FFFFFFFU) - 1))
            else:
                for i in range(n):
                    acc32 |= (d32[i] & 0x7F800000U) + 0x00800000U
            found = (acc32 >> 31) != 0
        else:
            found = -1
    finally:
        PyBuffer_Release(&view)
    return found


cdef bint _singular(object d, bint quotient) except -1:
    """Whether the local derivative ``d`` (a divisor with ``quotient``) may hold a value that
    turns a zero factor into nan: known to (a look at it), or not known (a staged value, Dask,
    a GPU where a look would wait for the device)."""
    cdef object t = type(d)
    if t is float:
        return (d == 0 or d != d) if quotient else not c_isfinite(<double>d)
    if t is complex:
        return (d == 0 or d != d) if quotient else not (c_isfinite(d.real) and c_isfinite(d.imag))
    if t is int or t is bool or d is None:
        return quotient and d == 0
    while t is GradTracer or t is DualTracer or t is BatchTracer:
        d = (<Tracer>d).value
        t = type(d)
    if t is Tensor:
        d = (<Tensor>d)._value
        t = type(d)
    elif isinstance(d, Array) or t is Meta:
        return True   # (a staging transform's value, or only its shape and dtype: not known)
    if t is _inplace_type:
        if d.dtype.kind not in "fc":
            return quotient and not d.all()
        found = _buffer_singular(d, quotient)
        if found >= 0:
            return found == 1
    b = backend_of(d)   # (a NumPy array not C-contiguous, or another backend's)
    if quotient:   # (a zero divisor: 1 / d is inf there; NumPy would warn, so it asks all())
        if t is _inplace_type:
            return not d.all() or not b.all_finite(d)
        finite = b.all_finite(1 / d)
    else:
        finite = b.all_finite(d)
    return finite is not True   # (None: Dask, a GPU's "not without waiting")


cdef object _times(Primitive op, object g, object d):
    """``g * d`` (``op`` multiply) or ``g / d`` (divide), into ``g`` when the engine marked it
    consumable and the result has ``g``'s shape and dtype; exactly zero where ``g`` has
    structural zeros when ``d`` may have values that would turn them into nan; the product keeps
    ``g``'s structural zeros (NOTE [strong zeros])."""
    cdef ThreadState st = _state()
    cdef _Mask m = _mask_of(st, g)
    if m is not None:
        if _singular(d, op is _div_p):
            st.strong_products += 1
            return _mark(st, _host.where(m.get(), 0, _bind(op, (g, d), {})), m)
        return _mark(st, _product(st, op, g, d), m)
    return _product(st, op, g, d)


cdef inline object _product(ThreadState st, Primitive op, object g, object d):
    if g is not None and type(g) is _inplace_type:
        if g is not st.consumable:
            if st.staging is None and (type(d) is _inplace_type or type(d) is float
                                       or type(d) is int):
                # (the NumPy backend's function, as bind would call it, without bind's
                # dispatch: the rules' most frequent operation)
                out = _small_multiply(g, d) if op is _mul_p else _small_divide(g, d)
                return out if type(out) is _inplace_type else fix_scalar(out)
            return _bind(op, (g, d), {})
        st.consumable = None
        if _writable_like(g, d):
            st.consumed += 1
            if op is _mul_p:
                return PyNumber_InPlaceMultiply(g, d)
            return PyNumber_InPlaceTrueDivide(g, d)
    return _bind(op, (g, d), {})


cdef bint _writable_like(object g, object d):
    """Whether ``g op= d`` gives exactly ``g op d``: ``g`` a writeable NumPy array owning its
    data, ``d`` a real Python scalar or an array of ``g``'s shape and dtype. (Whether anything
    else refers to ``g`` is the caller's question.)"""
    if type(g) is not _inplace_type or g.base is not None or not g.flags.writeable:
        return False
    if isinstance(d, float) or isinstance(d, int):
        return g.dtype.kind in "fc"
    return type(d) is _inplace_type and d.dtype == g.dtype and d.shape == g.shape


def strong_products():
    """How many rule products this thread made with strong zeros so far (for the tests)."""
    return _state().strong_products


# ---------------------------------------------------------------------------------------------
# Rule shapes. Most elementwise rules are one of a few shapes around a derivative formula written
# in Python (arrayad._ops.elementwise): ``g * conj(d)`` for a unary VJP, ``t * d`` for its JVP, the
# same summed to the argument's shape for a binary function. They run once per node of every
# backward and forward pass; as C callables they cost one Python frame (the formula's) instead of
# three.

cdef int _named(object d, tuple names) except -1:
    """For a derivative given by name, one of ``names`` (the rule's arguments: the derivative is
    the result or an input itself, exp's or multiply's, read rather than called), its position
    counted from 1; 0 for a function."""
    if not isinstance(d, str):
        return 0
    if d not in names:
        raise ValueError(f"a derivative named by a string is one of {', '.join(names)}, "
                         f"got {d!r}")
    return names.index(d) + 1


cdef inline object _partial(int named, object d, object ans, object x1, object x2):
    """A binary function's partial derivative: the argument ``named`` gives, else ``d``'s
    value."""
    if named == 1:
        return ans
    if named == 2:
        return x1
    if named == 3:
        return x2
    return d(ans, x1, x2)


cdef tuple _UNARY = ("ans", "x")
cdef tuple _BINARY = ("ans", "x1", "x2")


cdef class _UnaryShape:
    """A unary function's derivative ``d(ans, x)``, or with ``quotient`` its reciprocal (log:
    ``x``), which the rules then divide by: one pass over the data instead of two. ``d`` may be
    the name ``"ans"`` or ``"x"`` when the derivative is the result or the input itself (exp,
    log's reciprocal)."""

    def __init__(self, d, bint quotient=False):
        self._reads = _named(d, _UNARY)
        self.d = d
        self.quotient = quotient

    cdef object derivative(self, object ans, object x):
        if self._reads == 1:
            return ans
        if self._reads == 2:
            return x
        return self.d(ans, x)


cdef class UnaryVJP(_UnaryShape):
    """``g * conj(d)`` (``g / conj(d)`` with ``quotient``)."""

    def __call__(self, g, ans, x):
        return self.vjp(g, ans, x)

    cdef object vjp(self, object g, object ans, object x):   # (the engine's call: no tuple)
        return _times(_div_p if self.quotient else _mul_p, g,
                      conj_if_complex(self.derivative(ans, x)))


cdef class UnaryJVP(_UnaryShape):
    """``t * d`` (``t / d`` with ``quotient``)."""

    def __call__(self, tangents, ans, x):
        t = tangents[0]
        if t is None:
            return None
        return _times(_div_p if self.quotient else _mul_p, t, self.derivative(ans, x))


cdef tuple _lift3(object ans, object x1, object x2):
    """Raw backend arrays as constant Tensors when arrayad arrays are among the three.

    A binary rule may see a raw array next to a Tensor or a tracer (a closed-over constant, a
    raw tangent); ``raw * tensor`` works on NumPy (it defers) but array-api-strict's operators
    refuse foreign operands, so the formulas get arrayad arrays on both sides."""
    if not (isinstance(ans, Array) or isinstance(x1, Array) or isinstance(x2, Array)):
        return (ans, x1, x2)
    return (_lift1(ans), _lift1(x1), _lift1(x2))


cdef inline object _lift1(object v):
    if v is None or isinstance(v, Array) or _is_scalar(v) or type(v) is Meta:
        return v
    return _new_tensor(v, None, 0)


cdef class PartialVJP:
    """VJP of a binary function for argument ``i`` (0 or 1), partial derivative
    ``d(ans, x1, x2)`` (or the name of the argument it is, multiply's ``"x2"``): ``g * conj(d)``
    summed to the argument's shape."""

    def __init__(self, d, int i):
        self._reads = _named(d, _BINARY)
        self.d = d
        self.i = i

    def __call__(self, g, ans, x1, x2):
        return self.vjp(g, ans, x1, x2)

    cdef object vjp(self, object g, object ans, object x1, object x2):   # (the engine's call)
        ans, x1, x2 = _lift3(ans, x1, x2)
        return unbroadcast(
            _times(_mul_p, g, conj_if_complex(_partial(self._reads, self.d, ans, x1, x2))),
            x2 if self.i else x1)


cdef class SumVJP:
    """VJP of add for argument ``i`` (of subtract, with ``negate``: the second argument's is
    ``-g``): ``g`` summed to the argument's shape."""

    def __init__(self, int i, bint negate=False):
        self.i = i
        self.negate = negate

    def __call__(self, g, ans, x1, x2):
        return self.vjp(g, ans, x1, x2)

    cdef object vjp(self, object g, object ans, object x1, object x2):   # (the engine's call)
        cdef ThreadState st
        if self.negate and self.i:   # (NOTE [strong zeros]: -g has the structural zeros of g)
            st = _state()
            g = _mark(st, _small_negative(g), _mask_of(st, g))
        return unbroadcast(g, x2 if self.i else x1)


cdef class BinaryJVP:
    """JVP of a binary function with partial derivatives ``d1``, ``d2`` (None: zero; or the
    names of the arguments they are, as for ``PartialVJP``): ``t1 * d1 + t2 * d2``, each part
    broadcast to the output's shape."""
    cdef readonly object d1, d2
    cdef int _reads1, _reads2

    def __init__(self, d1, d2):
        self._reads1 = _named(d1, _BINARY)
        self._reads2 = _named(d2, _BINARY)
        self.d1 = d1
        self.d2 = d2

    def __call__(self, tangents, ans, x1, x2):
        t1, t2 = tangents[0], tangents[1]
        ans, x1, x2 = _lift3(ans, x1, x2)
        out = None
        if t1 is not None and self.d1 is not None:
            out = broadcast_like(
                _times(_mul_p, t1, _partial(self._reads1, self.d1, ans, x1, x2)), ans)
        if t2 is not None and self.d2 is not None:
            part = broadcast_like(
                _times(_mul_p, t2, _partial(self._reads2, self.d2, ans, x1, x2)), ans)
            out = part if out is None else _bind(_add_p, (out, part), {})
        return out


cdef class SumJVP:
    """JVP of add (``t1 + t2``) or, with ``negate``, subtract (``t1 - t2``), each tangent
    broadcast to the output's shape."""
    cdef readonly bint negate

    def __init__(self, bint negate=False):
        self.negate = negate

    def __call__(self, tangents, ans, x1, x2):
        cdef ThreadState st = _state()
        t1, t2 = tangents[0], tangents[1]
        if t2 is not None:
            if self.negate:   # (NOTE [strong zeros]: -t has the structural zeros of t)
                t2 = _mark(st, _bind(_neg_p, (t2,), {}), _mask_of(st, t2))
            t2 = broadcast_like(t2, ans)
            if t1 is None:
                return t2
        if t1 is None:
            return None
        t1 = broadcast_like(t1, ans)
        if t2 is None:
            return t1
        return _mark(st, _bind(_add_p, (t1, t2), {}), _both(_mask_of(st, t1), _mask_of(st, t2)))


cpdef object broadcast_like(object t, object ans):
    """A tangent of an input, broadcast to the shape of the output (ops that broadcast)."""
    cdef tuple shape = shape_of(ans)
    if shape_of(t) == shape:
        return t
    return _host.broadcast_to(t, shape)


# ---------------------------------------------------------------------------------------------
# The dtype and shape helpers of the rules

cpdef bint is_complex(object v):
    """Whether ``v`` (an array of any kind, or a Python scalar) has a complex dtype."""
    if v is None or isinstance(v, float) or isinstance(v, int):
        return False
    if isinstance(v, complex):
        return True
    return _is_complex_dtype(dtype_of(v))


cdef object _complex64 = None, _complex128 = None


cdef inline bint _is_complex_dtype(object dt):
    return dt is _complex64 or dt is _complex128


def install_complex_dtypes(c64, c128):
    """arrayad's two complex DTypes (compared by identity: DTypes are singletons)."""
    global _complex64, _complex128
    _complex64, _complex128 = c64, c128


cpdef object conj_if_complex(object v):
    """``conj(v)`` for complex values, ``v`` itself otherwise (the common, real, case is one
    cached dtype lookup). A Python complex stays a Python scalar."""
    if isinstance(v, complex):
        return v.conjugate()
    if is_complex(v):
        return _host.conj(v)
    return v


cdef inline bint _numpy_like(cnp.ndarray g, object x):
    """Whether the NumPy array ``g`` has the shape and dtype of ``x``, a NumPy array or the Meta
    of one (False where it cannot tell cheaply)."""
    cdef tuple shape
    cdef Py_ssize_t i, nd = cnp.PyArray_NDIM(g)
    cdef cnp.npy_intp* dims
    if type(x) is _inplace_type:
        return (cnp.PyArray_DESCR(g) is cnp.PyArray_DESCR(<cnp.ndarray>x)
                and cnp.PyArray_SAMESHAPE(g, <cnp.ndarray>x))
    if type(x) is not Meta:
        return False
    shape = (<Meta>x).shape
    if len(shape) != nd:
        return False
    dims = cnp.PyArray_DIMS(g)
    for i in range(nd):
        if dims[i] != <Py_ssize_t>shape[i]:
            return False
    return dtype_of(g) is (<Meta>x).dtype


cpdef object unbroadcast(object g, object x):
    """Sum ``g`` (shaped like a broadcast result) back down to the shape of ``x``, in ``x``'s
    dtype: the real part when ``x`` is real and ``g`` complex, float32 for a float32 ``x`` that a
    float64 operand promoted (as torch and JAX return it); None for a Python scalar ``x``. In the
    core because every binary rule calls it, and its common case (nothing to do) should cost no
    Python frame."""
    if x is None or _is_scalar(x):
        return None
    if type(g) is _inplace_type and _numpy_like(<cnp.ndarray>g, x):
        return g   # (the common case, read in C: no shape tuples, no dtype lookups)
    gd = dtype_of(g)
    xd = dtype_of(x)
    if gd is not xd:
        if _is_complex_dtype(gd) and not _is_complex_dtype(xd):
            g = _host.real(g)   # a real input of a complex result: its cotangent is the real part
        if xd.kind in ("f", "c") and dtype_of(g) is not xd:
            g = _host.astype(g, xd)
    cdef tuple shape = shape_of(x)
    cdef tuple gshape = shape_of(g)
    if gshape == shape:
        return g
    cdef Py_ssize_t lead = len(gshape) - len(shape)
    axes = tuple(range(lead)) + tuple([i + lead for i, s in enumerate(shape)
                                       if s == 1 and gshape[i + lead] != 1])
    if axes:
        g = _host.sum(g, axis=axes, keepdims=False)
    if shape_of(g) != shape:
        g = _host.reshape(g, shape)
    return g
