# cython: boundscheck=False, wraparound=False
"""Arithmetic on small float64 NumPy arrays without NumPy's dispatch (NOTE [small arithmetic]).

NOTE [small arithmetic]
-----------------------
On 16 values a NumPy ``x * y`` costs about 0.33 us, nearly all of it NumPy finding its loop
(argument parsing, type resolution, the output's allocation through the generic path, the
floating-point error check); ``x * 2.0`` costs 0.5 us, as the Python number is converted first.
A gradient of a small function makes two or three such calls per operation, so this dispatch is
a large part of its cost. For the operands where the answer is known without asking (two
C-contiguous float64 arrays of one shape, or where one holds the other's last axes, as a vmap's
batched values meet unbatched ones and NumPy repeats the smaller; or an array with a Python
float, an int that a double holds exactly, or an array of its shape that repeats one value in
memory, as a reduction's cotangent does; up to ``SMALL`` elements), these functions make the
output with NumPy's C API and run the loop here: the same IEEE operations, so the same values
bit for bit (but for which of two NaN operands' payload comes out). Where a loop raises a
floating-point flag that NumPy would report (overflow, underflow, invalid, division by zero),
the result is thrown away and NumPy computes it again, so that its warnings and ``np.errstate``
apply as before. Any other operands (other dtypes, broadcasting along other axes, views,
subclasses, larger arrays, where NumPy's own vectorised loops win) go to the Python operator,
which is NumPy's. The NumPy backend names these functions as the faster spelling of the
primitives of the same names.
"""

cimport numpy as cnp
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.ref cimport Py_INCREF

cdef extern from "numpy/arrayobject.h":
    # (declared here with its reference semantics: it steals ``descr``; it returns a new
    # reference, or NULL with an exception set)
    object _new_from_descr "PyArray_NewFromDescr" (
        void* subtype, void* descr, int nd, cnp.npy_intp* dims, cnp.npy_intp* strides,
        void* data, int flags, void* obj)

import numpy as np

cnp.import_array()

cdef extern from *:
    """
    /* The floating-point flags the loop may raise. On x86-64 the loop's arithmetic is SSE2, so
       its flags are in MXCSR, read and written directly: glibc's feclearexcept also saves and
       reloads the x87 environment, which cost as much as the loop on 16 values. Elsewhere,
       <fenv.h>. The flags are cleared only when set (they seldom are: NumPy clears those it
       reads). */
    #if defined(__x86_64__) && defined(__SSE2__)
    #include <xmmintrin.h>
    #define ARRAYAD_FLAGS (_MM_EXCEPT_OVERFLOW | _MM_EXCEPT_UNDERFLOW | _MM_EXCEPT_INVALID \
                           | _MM_EXCEPT_DIV_ZERO)
    static inline void arrayad_clear_flags(void) {
        unsigned int csr = _mm_getcsr();
        if (csr & ARRAYAD_FLAGS) _mm_setcsr(csr & ~ARRAYAD_FLAGS);
    }
    static inline int arrayad_test_flags(void) { return (_mm_getcsr() & ARRAYAD_FLAGS) != 0; }
    #else
    #include <fenv.h>
    #define ARRAYAD_FLAGS (FE_OVERFLOW | FE_UNDERFLOW | FE_INVALID | FE_DIVBYZERO)
    static inline void arrayad_clear_flags(void) {
        if (fetestexcept(ARRAYAD_FLAGS)) feclearexcept(ARRAYAD_FLAGS);
    }
    static inline int arrayad_test_flags(void) { return fetestexcept(ARRAYAD_FLAGS) != 0; }
    #endif
    """
    void arrayad_clear_flags() nogil
    bint arrayad_test_flags() nogil

cdef extern from *:
    """
    /* op: 0 add, 1 subtract, 2 multiply, 3 divide, 4 negative; form: 0 x op y (arrays),
       1 x op s, 2 s op y (a number s) */
    #define ARRAYAD_LOOP(EXPR) for (Py_ssize_t i = 0; i < n; i++) o[i] = (EXPR); break;
    static void arrayad_small_arith(int op, int form, const double *x, const double *y,
                                    double s, double *o, Py_ssize_t n) {
        switch (op * 3 + form) {
            case 0: ARRAYAD_LOOP(x[i] + y[i])
            case 1: ARRAYAD_LOOP(x[i] + s)
            case 2: ARRAYAD_LOOP(s + y[i])
            case 3: ARRAYAD_LOOP(x[i] - y[i])
            case 4: ARRAYAD_LOOP(x[i] - s)
            case 5: ARRAYAD_LOOP(s - y[i])
            case 6: ARRAYAD_LOOP(x[i] * y[i])
            case 7: ARRAYAD_LOOP(x[i] * s)
            case 8: ARRAYAD_LOOP(s * y[i])
            case 9: ARRAYAD_LOOP(x[i] / y[i])
            case 10: ARRAYAD_LOOP(x[i] / s)
            case 11: ARRAYAD_LOOP(s / y[i])
            case 12: ARRAYAD_LOOP(-x[i])
        }
    }
    /* x op y where one of them holds the other's last axes (NumPy's broadcasting of a
       lower-rank operand, as vmap's batched values meet unbatched ones): ``rows`` blocks of
       ``m`` values, the repeated operand (repeat: 1 y, 2 x) read again for each block */
    static void arrayad_small_rows(int op, int repeat, const double *x, const double *y,
                                   double *o, Py_ssize_t rows, Py_ssize_t m) {
        for (Py_ssize_t r = 0; r < rows; r++)
            arrayad_small_arith(op, 0, repeat == 2 ? x : x + r * m, repeat == 1 ? y : y + r * m,
                                0.0, o + r * m, m);
    }
    """
    void arrayad_small_arith(int op, int form, const double *x, const double *y, double s,
                             double *o, Py_ssize_t n) nogil
    void arrayad_small_rows(int op, int repeat, const double *x, const double *y, double *o,
                            Py_ssize_t rows, Py_ssize_t m) nogil

# The largest array taken: beyond it NumPy's vectorised loops win over the dispatch they cost.
SMALL = 4096
cdef Py_ssize_t _small = SMALL
cdef type _ndarray = np.ndarray
cdef enum:
    ADD, SUBTRACT, MULTIPLY, DIVIDE, NEGATIVE


cdef inline bint _small_float64(object a):
    return (type(a) is _ndarray and cnp.PyArray_TYPE(<cnp.ndarray>a) == cnp.NPY_DOUBLE
            and cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>a)
            and cnp.PyArray_SIZE(<cnp.ndarray>a) <= _small)


cdef inline bint _exact_number(object v, double* out):
    """A Python float, or an int that a double holds exactly (NumPy's float64 array op int
    converts the int to float64); not a bool, not a NumPy scalar."""
    cdef int overflow = 0
    cdef long long i
    if type(v) is float:
        out[0] = <double>v
        return True
    if type(v) is int:
        i = PyLong_AsLongLongAndOverflow(v, &overflow)
        if overflow == 0 and -(1 << 53) <= i <= (1 << 53):
            out[0] = <double>i
            return True
    return False


cdef inline bint _one_value_like(object v, cnp.ndarray like, double* out):
    """A float64 NumPy array of ``like``'s shape whose elements are all one value in memory
    (zero strides: np.broadcast_to of one number, such as a full reduction's cotangent), read
    as that number."""
    cdef int k
    cdef cnp.ndarray a
    if type(v) is not _ndarray:
        return False
    a = <cnp.ndarray>v
    if (cnp.PyArray_TYPE(a) != cnp.NPY_DOUBLE or cnp.PyArray_SIZE(a) == 0
            or not cnp.PyArray_SAMESHAPE(a, like)):
        return False
    for k in range(cnp.PyArray_NDIM(a)):
        if cnp.PyArray_STRIDES(a)[k] != 0 and cnp.PyArray_DIMS(a)[k] != 1:
            return False
    out[0] = (<double*>cnp.PyArray_DATA(a))[0]
    return True


cdef inline Py_ssize_t _repeats(cnp.ndarray small, cnp.ndarray big):
    """How many times ``small`` repeats in ``big`` when its shape is ``big``'s last axes (1 for
    one shape), or -1 (other shapes; an empty ``small``)."""
    cdef int k, ns = cnp.PyArray_NDIM(small), nb = cnp.PyArray_NDIM(big)
    cdef cnp.npy_intp* ds = cnp.PyArray_DIMS(small)
    cdef cnp.npy_intp* db = cnp.PyArray_DIMS(big)
    cdef Py_ssize_t m = cnp.PyArray_SIZE(small)
    if ns > nb or m == 0:
        return -1
    for k in range(1, ns + 1):
        if ds[ns - k] != db[nb - k]:
            return -1
    return cnp.PyArray_SIZE(big) // m


cdef object _run(int op, object a, object b):
    """``a op b`` computed here, or None where these operands are not for this loop or it
    raised a floating-point flag."""
    cdef cnp.ndarray x = None, y = None, like, out
    cdef double s = 0.0
    cdef int form, repeat = 0
    cdef Py_ssize_t rows = 1
    if _small_float64(a):
        x = <cnp.ndarray>a
        if op == NEGATIVE:
            form = 0
        elif _small_float64(b):
            y = <cnp.ndarray>b
            form = 0
            rows = _repeats(y, x)
            if rows >= 0:
                repeat = 1   # (rows == 1: one shape, nothing repeated)
            else:
                rows = _repeats(x, y)
                if rows < 0:
                    return None
                repeat = 2
        elif _exact_number(b, &s) or _one_value_like(b, x, &s):
            form = 1
        else:
            return None
        like = y if repeat == 2 else x
    elif op != NEGATIVE and _small_float64(b) and (_exact_number(a, &s)
                                                  or _one_value_like(a, <cnp.ndarray>b, &s)):
        y = <cnp.ndarray>b
        form = 2
        like = y
    else:
        return None
    out = cnp.PyArray_SimpleNew(cnp.PyArray_NDIM(like), cnp.PyArray_DIMS(like), cnp.NPY_DOUBLE)
    arrayad_clear_flags()
    if repeat and rows != 1:
        arrayad_small_rows(op, repeat, <double*>cnp.PyArray_DATA(x), <double*>cnp.PyArray_DATA(y),
                           <double*>cnp.PyArray_DATA(out), rows,
                           cnp.PyArray_SIZE(y if repeat == 1 else x))
    else:
        arrayad_small_arith(op, form,
                            <double*>cnp.PyArray_DATA(x) if x is not None else NULL,
                            <double*>cnp.PyArray_DATA(y) if y is not None else NULL,
                            s, <double*>cnp.PyArray_DATA(out), cnp.PyArray_SIZE(like))
    if arrayad_test_flags():
        return None   # (NumPy computes it again and reports the flag as it is set to)
    return out


# (arrayad.debug.detect_nans: ``watch(name, operands, result)`` sees each result of these
# functions, which the derivative rules' arithmetic on backend arrays calls without ``bind``;
# NOTE [nan detection] in arrayad/debug.py. None, as it is unless a block is open: one test.)
cdef object _watch = None


def set_watch(fn):
    """Install ``fn(name, operands, result)`` to see every result (None: none)."""
    global _watch
    _watch = fn


def add(a, b):
    out = _run(ADD, a, b)
    if out is None:
        out = a + b
    if _watch is not None:
        _watch("add", (a, b), out)
    return out


def subtract(a, b):
    out = _run(SUBTRACT, a, b)
    if out is None:
        out = a - b
    if _watch is not None:
        _watch("subtract", (a, b), out)
    return out


def multiply(a, b):
    out = _run(MULTIPLY, a, b)
    if out is None:
        out = a * b
    if _watch is not None:
        _watch("multiply", (a, b), out)
    return out


def divide(a, b):
    out = _run(DIVIDE, a, b)
    if out is None:
        out = a / b
    if _watch is not None:
        _watch("divide", (a, b), out)
    return out


def negative(a):
    out = _run(NEGATIVE, a, None)
    if out is None:
        out = -a
    if _watch is not None:
        _watch("negative", (a,), out)
    return out


def broadcast_scalar(object x, tuple shape):
    """``np.broadcast_to(x, shape)`` for a 0-d NumPy array ``x`` (the cotangent of a full
    reduction), made with NumPy's C API: a read-only view with zero strides (np.broadcast_to
    costs ten times more, and the ndarray constructor's argument parsing three)."""
    cdef cnp.ndarray a = <cnp.ndarray?>x
    cdef Py_ssize_t i, nd = len(shape)
    if cnp.PyArray_NDIM(a) != 0:
        raise ValueError(f"broadcast_scalar: x must be 0-d, got shape {x.shape}")
    cdef cnp.npy_intp[64] dims   # (NumPy's own limit: 64 dimensions; 32 before NumPy 2)
    cdef cnp.npy_intp[64] strides
    if nd > 64:
        raise ValueError(f"broadcast_scalar: at most 64 dimensions, got {nd}")
    for i in range(nd):
        dims[i] = shape[i]
        if dims[i] < 0:
            raise ValueError(f"broadcast_scalar: negative dimension in {shape}")
        strides[i] = 0
    descr = <object>cnp.PyArray_DESCR(a)
    Py_INCREF(descr)   # (NewFromDescr steals a reference to the descriptor)
    out = _new_from_descr(<void*>np.ndarray, <void*>descr, <int>nd, dims, strides,
                          cnp.PyArray_DATA(a), 0, NULL)
    Py_INCREF(a)       # (SetBaseObject steals a reference to the base)
    cnp.PyArray_SetBaseObject(<cnp.ndarray>out, a)
    return out
