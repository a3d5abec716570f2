# cython: boundscheck=False, wraparound=False
"""Calls of a vector math function over a float64 array (NOTE [vector math] in
``arrayad/_jit/vector_math.py``): the function is found at run time (its address is given), and
called on 2, 4 or 8 values at a time in the widest vector registers the processor has (SSE2,
AVX2 or AVX-512), the last few values padded to a full vector. Nothing here links to the
library: on a compiler or processor without these registers ``supported()`` is False."""

from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.string cimport memcpy, memset
cimport numpy as cnp
import math
import numpy as _np

cnp.import_array()

cdef extern from *:
    """
    #include <math.h>
    #include <string.h>
    /* The reduction a group may end with (NOTE [tile machine]), as NumPy reduces a C-
       contiguous value: along its last axis (kinds 1-3), each row of ``len`` elements to one
       element of the output, a sum being 0.0 plus NumPy's pairwise sum of the row (one
       accumulator below eight elements, eight up to 128, halves above: the same bits), a
       minimum or maximum the running comparison, stopped at the first NaN; along its leading
       axes (kinds 4-6), rows of ``len`` elements accumulated into the output in order (a sum
       from 0.0, a minimum or maximum from the first row, NaN wherever one was met). */
    enum { AD_REDUCE_SUM = 1, AD_REDUCE_MIN, AD_REDUCE_MAX, AD_REDUCE_LEADING };
    static double ad_pairwise_sum(const double *a, Py_ssize_t n) {
        if (n < 8) {
            double res = 0.0;
            for (Py_ssize_t i = 0; i < n; i++) res += a[i];
            return res;
        }
        if (n <= 128) {
            double r[8], res;
            Py_ssize_t i;
            for (int j = 0; j < 8; j++) r[j] = a[j];
            for (i = 8; i < n - (n % 8); i += 8)
                for (int j = 0; j < 8; j++) r[j] += a[i + j];
            res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
            for (; i < n; i++) res += a[i];
            return res;
        }
        Py_ssize_t half = n / 2;
        half -= half % 8;
        return ad_pairwise_sum(a, half) + ad_pairwise_sum(a + half, n - half);
    }
    static void ad_reduce_rows(int kind, const double *a, double *out, Py_ssize_t rows,
                               Py_ssize_t len) {
        for (Py_ssize_t r = 0; r < rows; r++, a += len) {
            if (kind == AD_REDUCE_SUM) {
                out[r] = 0.0 + ad_pairwise_sum(a, len);
                continue;
            }
            double acc = a[0];
            for (Py_ssize_t i = 1; i < len && acc == acc; i++)   /* (acc != acc: a NaN) */
                if (kind == AD_REDUCE_MIN ? !(acc < a[i]) : !(acc > a[i])) acc = a[i];
            out[r] = acc;
        }
    }
    static void ad_reduce_leading(int kind, const double *a, double *out, Py_ssize_t rows,
                                  Py_ssize_t len, int first) {
        Py_ssize_t r = 0;
        if (first) {
            for (Py_ssize_t j = 0; j < len; j++) out[j] = kind == AD_REDUCE_SUM ? 0.0 + a[j] : a[j];
            r = 1;
        }
        for (; r < rows; r++) {
            const double *x = a + r * len;
            if (kind == AD_REDUCE_SUM)
                for (Py_ssize_t j = 0; j < len; j++) out[j] += x[j];
            else if (kind == AD_REDUCE_MIN)   /* (selects, no branch: vectorised) */
                for (Py_ssize_t j = 0; j < len; j++)
                    out[j] = out[j] != out[j] || out[j] < x[j] ? out[j] : x[j];
            else
                for (Py_ssize_t j = 0; j < len; j++)
                    out[j] = out[j] != out[j] || out[j] > x[j] ? out[j] : x[j];
        }
    }
    #if defined(__GNUC__) && defined(__x86_64__)
    #include <immintrin.h>
    #define ARRAYAD_VECTOR_MATH 1

    /* One loop per width: the full vectors, then the rest copied into a zeroed vector, so that
       every element goes through the same vector code. */
    #define ARRAYAD_RUN(NAME, LANES, VEC, LOAD, STORE)                                        \
        static void NAME(void *fn, const double *x, double *o, Py_ssize_t n) {                \
            VEC (*f)(VEC) = (VEC (*)(VEC))fn;                                                  \
            Py_ssize_t i = 0;                                                                  \
            for (; i + LANES <= n; i += LANES) STORE(o + i, f(LOAD(x + i)));                   \
            if (i < n) {                                                                       \
                double t[LANES] = {0.0};                                                       \
                memcpy(t, x + i, (size_t)(n - i) * sizeof(double));                            \
                STORE(t, f(LOAD(t)));                                                          \
                memcpy(o + i, t, (size_t)(n - i) * sizeof(double));                            \
            }                                                                                  \
        }
    ARRAYAD_RUN(arrayad_run2, 2, __m128d, _mm_loadu_pd, _mm_storeu_pd)
    __attribute__((target("avx2")))
    ARRAYAD_RUN(arrayad_run4, 4, __m256d, _mm256_loadu_pd, _mm256_storeu_pd)
    __attribute__((target("avx512f")))
    ARRAYAD_RUN(arrayad_run8, 8, __m512d, _mm512_loadu_pd, _mm512_storeu_pd)
    /* The tile machine (NOTE [tile machine] in arrayad/_jit/lower_tiles.py): a program of
       elementwise instructions run over tiles of the flattened arrays. An instruction is five
       ints: the operation, the destination slot, three operands (a slot, or -1-k for the k-th
       constant; only a select reads the third). Slots: the inputs, then the outputs (pointing
       into their arrays at the tile), then the temporaries (tile-sized buffers). A call takes
       its function's index in ``fns`` as its second operand. An input of period p > 0 (an
       operand broadcast along the leading axes: element i is its element i % p) is read at
       s % p: the tile is a multiple of p, or p a multiple of the tile (for p below the tile
       the input holds tile / p copies). An input broadcast otherwise (a column, (n, 1) read as
       (n, k); a middle axis) is gathered into a tile buffer before each tile: its shape is
       described by ``shape`` (ndim, the result's dims, then its element strides, 0 along
       a broadcast axis), copied row by row along the last axis (a copy or one value
       repeated). A condition (a select's, a comparison's result) is 0.0 (false) or 1.0. */
    static void ad_gather(double *dst, const double *src, const Py_ssize_t *shape,
                          Py_ssize_t s, Py_ssize_t m) {
        Py_ssize_t nd = shape[0], idx[32], off = 0, r = s, j = 0;
        const Py_ssize_t *dims = shape + 1, *st = shape + 1 + nd;
        for (Py_ssize_t d = nd - 1; d >= 0; d--) {
            idx[d] = r % dims[d]; r /= dims[d]; off += idx[d] * st[d];
        }
        while (j < m) {
            Py_ssize_t run = dims[nd - 1] - idx[nd - 1];
            if (run > m - j) run = m - j;
            if (st[nd - 1] == 1) memcpy(dst + j, src + off, (size_t)run * sizeof(double));
            else for (Py_ssize_t i = 0; i < run; i++) dst[j + i] = src[off + i * st[nd - 1]];
            j += run;
            idx[nd - 1] += run;
            off += run * st[nd - 1];
            for (Py_ssize_t d = nd - 1; d > 0 && idx[d] == dims[d]; d--) {
                off -= idx[d] * st[d]; idx[d] = 0; idx[d - 1] += 1; off += st[d - 1];
            }
        }
    }
    enum { AD_ADD, AD_SUBTRACT, AD_MULTIPLY, AD_DIVIDE, AD_NEGATIVE, AD_COPY, AD_SQUARE,
           AD_ABS, AD_SQRT, AD_CALL, AD_SELECT, AD_EQUAL, AD_NOT_EQUAL, AD_LESS,
           AD_LESS_EQUAL, AD_GREATER, AD_GREATER_EQUAL };
    #define AD_LOOP(EXPR) for (Py_ssize_t i = 0; i < m; i++) d[i] = (EXPR)
    #define AD_BINARY(OP)                                                                     \
        if (A && B) AD_LOOP(A[i] OP B[i]);                                                     \
        else if (A) AD_LOOP(A[i] OP cb);                                                       \
        else if (B) AD_LOOP(ca OP B[i]);                                                       \
        else AD_LOOP(ca OP cb);
    #define AD_COMPARE(OP)   /* (a condition: 1.0 or 0.0; IEEE's comparisons, as NumPy's) */ \
        if (A && B) AD_LOOP(A[i] OP B[i] ? 1.0 : 0.0);                                         \
        else if (A) AD_LOOP(A[i] OP cb ? 1.0 : 0.0);                                           \
        else if (B) AD_LOOP(ca OP B[i] ? 1.0 : 0.0);                                           \
        else AD_LOOP(ca OP cb ? 1.0 : 0.0);
    #define AD_PICK(X, Y)                                                                     \
        if (C) AD_LOOP(C[i] != 0.0 ? (X) : (Y)); else AD_LOOP(cc != 0.0 ? (X) : (Y));
    #define ARRAYAD_EXEC(NAME, RUN)                                                           \
        static void NAME(const int *code, Py_ssize_t n_code, const double *consts,             \
                         double **slots, double **in, const Py_ssize_t *period,                \
                         const Py_ssize_t **shape, double **gathered, Py_ssize_t n_in,         \
                         double **out, Py_ssize_t n_out, void **fns, Py_ssize_t n,             \
                         Py_ssize_t tile, const int *red, Py_ssize_t n_red, Py_ssize_t row) {  \
            for (Py_ssize_t s = 0; s < n; s += tile) {                                         \
                Py_ssize_t m = n - s < tile ? n - s : tile;                                    \
                for (Py_ssize_t k = 0; k < n_in; k++) {                                        \
                    if (shape[k]) {                                                            \
                        ad_gather(gathered[k], in[k], shape[k], s, m);                         \
                        slots[k] = gathered[k];                                                \
                    } else slots[k] = in[k] + (period[k] ? s % period[k] : s);                 \
                }                                                                              \
                for (Py_ssize_t k = 0; k < n_out; k++) slots[n_in + k] = out[k] + s;           \
                for (Py_ssize_t r = 0; r < n_red; r++)   /* (a reduced output: s / row on) */ \
                    slots[n_in + red[3 * r + 2]] = out[red[3 * r + 2]]                         \
                        + (red[3 * r] < AD_REDUCE_LEADING ? s / row : 0);                     \
                for (Py_ssize_t c = 0; c < n_code; c++) {                                      \
                    const int *ins = code + 5 * c;                                             \
                    double *d = slots[ins[1]];                                                 \
                    int a = ins[2], b = ins[3], q = ins[4];                                    \
                    const double *A = a >= 0 ? slots[a] : NULL;                                \
                    const double *B = b >= 0 ? slots[b] : NULL;                                \
                    const double *C = q >= 0 ? slots[q] : NULL;                                \
                    double ca = a >= 0 ? 0.0 : consts[-1 - a];                                 \
                    double cb = b >= 0 ? 0.0 : consts[-1 - b];                                 \
                    double cc = q >= 0 ? 0.0 : consts[-1 - q];                                 \
                    switch (ins[0]) {                                                          \
                    case AD_ADD: AD_BINARY(+) break;                                           \
                    case AD_SUBTRACT: AD_BINARY(-) break;                                      \
                    case AD_MULTIPLY: AD_BINARY(*) break;                                      \
                    case AD_DIVIDE: AD_BINARY(/) break;                                        \
                    case AD_NEGATIVE: AD_LOOP(-A[i]); break;                                   \
                    case AD_COPY: AD_LOOP(A[i]); break;                                        \
                    case AD_SQUARE: AD_LOOP(A[i] * A[i]); break;                               \
                    case AD_ABS: AD_LOOP(fabs(A[i])); break;                                   \
                    case AD_SQRT: AD_LOOP(sqrt(A[i])); break;                                  \
                    case AD_CALL: RUN(fns[ins[3]], A, d, m); break;                            \
                    case AD_EQUAL: AD_COMPARE(==) break;                                       \
                    case AD_NOT_EQUAL: AD_COMPARE(!=) break;                                   \
                    case AD_LESS: AD_COMPARE(<) break;                                         \
                    case AD_LESS_EQUAL: AD_COMPARE(<=) break;                                  \
                    case AD_GREATER: AD_COMPARE(>) break;                                      \
                    case AD_GREATER_EQUAL: AD_COMPARE(>=) break;                               \
                    case AD_SELECT: /* d = C ? A : B */                                        \
                        if (A && B) { AD_PICK(A[i], B[i]) }                                    \
                        else if (A) { AD_PICK(A[i], cb) }                                      \
                        else if (B) { AD_PICK(ca, B[i]) }                                      \
                        else { AD_PICK(ca, cb) }                                               \
                        break;                                                                 \
                    }                                                                          \
                }                                                                              \
                for (Py_ssize_t r = 0; r < n_red; r++) {                                       \
                    int kind = red[3 * r];                                                     \
                    double *o = slots[n_in + red[3 * r + 2]];                                  \
                    if (kind < AD_REDUCE_LEADING)                                              \
                        ad_reduce_rows(kind, slots[red[3 * r + 1]], o, m / row, row);          \
                    else                                                                       \
                        ad_reduce_leading(kind - AD_REDUCE_LEADING + 1, slots[red[3 * r + 1]], \
                                          o, m / row, row, s == 0);                            \
                }                                                                              \
            }                                                                                  \
        }
    ARRAYAD_EXEC(arrayad_exec2, arrayad_run2)
    __attribute__((target("avx2")))
    ARRAYAD_EXEC(arrayad_exec4, arrayad_run4)
    __attribute__((target("avx512f")))
    ARRAYAD_EXEC(arrayad_exec8, arrayad_run8)
    static int arrayad_vector_width(void) {
        __builtin_cpu_init();
        if (__builtin_cpu_supports("avx512f")) return 8;
        if (__builtin_cpu_supports("avx2")) return 4;
        return 2;
    }
    #else
    #define ARRAYAD_VECTOR_MATH 0
    static void arrayad_run2(void *fn, const double *x, double *o, Py_ssize_t n) {}
    static void arrayad_run4(void *fn, const double *x, double *o, Py_ssize_t n) {}
    static void arrayad_run8(void *fn, const double *x, double *o, Py_ssize_t n) {}
    static int arrayad_vector_width(void) { return 0; }
    #define ARRAYAD_NO_EXEC(NAME)                                                             \
        static void NAME(const int *code, Py_ssize_t n_code, const double *consts,             \
                         double **slots, double **in, const Py_ssize_t *period,                \
                         const Py_ssize_t **shape, double **gathered, Py_ssize_t n_in,         \
                         double **out, Py_ssize_t n_out, void **fns, Py_ssize_t n,             \
                         Py_ssize_t tile, const int *red, Py_ssize_t n_red, Py_ssize_t row) {}
    ARRAYAD_NO_EXEC(arrayad_exec2)
    ARRAYAD_NO_EXEC(arrayad_exec4)
    ARRAYAD_NO_EXEC(arrayad_exec8)
    #endif
    """
    int ARRAYAD_VECTOR_MATH
    void ad_reduce_rows(int kind, const double *a, double *out, Py_ssize_t rows,
                        Py_ssize_t len) nogil
    void ad_reduce_leading(int kind, const double *a, double *out, Py_ssize_t rows,
                           Py_ssize_t len, int first) nogil
    void arrayad_run2(void *fn, const double *x, double *o, Py_ssize_t n) nogil
    void arrayad_run4(void *fn, const double *x, double *o, Py_ssize_t n) nogil
    void arrayad_run8(void *fn, const double *x, double *o, Py_ssize_t n) nogil
    int arrayad_vector_width()
    void arrayad_exec2(const int *code, Py_ssize_t n_code, const double *consts, double **slots,
                       double **inp, const Py_ssize_t *period, const Py_ssize_t **shape,
                       double **gathered, Py_ssize_t n_in, double **out, Py_ssize_t n_out,
                       void **fns, Py_ssize_t n, Py_ssize_t tile, const int *red,
                       Py_ssize_t n_red, Py_ssize_t row) nogil
    void arrayad_exec4(const int *code, Py_ssize_t n_code, const double *consts, double **slots,
                       double **inp, const Py_ssize_t *period, const Py_ssize_t **shape,
                       double **gathered, Py_ssize_t n_in, double **out, Py_ssize_t n_out,
                       void **fns, Py_ssize_t n, Py_ssize_t tile, const int *red,
                       Py_ssize_t n_red, Py_ssize_t row) nogil
    void arrayad_exec8(const int *code, Py_ssize_t n_code, const double *consts, double **slots,
                       double **inp, const Py_ssize_t *period, const Py_ssize_t **shape,
                       double **gathered, Py_ssize_t n_in, double **out, Py_ssize_t n_out,
                       void **fns, Py_ssize_t n, Py_ssize_t tile, const int *red,
                       Py_ssize_t n_red, Py_ssize_t row) nogil

cdef int _width = arrayad_vector_width()


def supported():
    """Whether this build can call vector functions (GCC or Clang on x86-64)."""
    return bool(ARRAYAD_VECTOR_MATH)


def width():
    """How many float64 values one call of the vector function takes here: 8 (AVX-512), 4
    (AVX2) or 2 (SSE2); 0 where not ``supported()``."""
    return _width


def apply(size_t address, const double[::1] x, double[::1] out, int lanes=0):
    """``out[i] = f(x[i])`` for the vector function at ``address`` of ``lanes`` values (by
    default ``width()``; fewer where the processor has the wider registers too: the tests run
    every width); ``x`` and ``out`` may be the same array."""
    cdef Py_ssize_t n = x.shape[0]
    if lanes == 0:
        lanes = _width
    if out.shape[0] != n:
        raise ValueError(f"vector math: {n} values into {out.shape[0]}")
    if lanes not in (2, 4, 8) or lanes > _width:
        raise ValueError(f"vector math: {lanes} lanes on a processor of {_width}")
    if n == 0 or address == 0:
        return
    cdef void *fn = <void *>address
    with nogil:
        if lanes == 8:
            arrayad_run8(fn, &x[0], &out[0], n)
        elif lanes == 4:
            arrayad_run4(fn, &x[0], &out[0], n)
        else:
            arrayad_run2(fn, &x[0], &out[0], n)


# the tile machine's operations (the C enum's order)
OPERATIONS = ("add", "subtract", "multiply", "divide", "negative", "copy", "square", "abs",
              "sqrt", "call", "select", "equal", "not_equal", "less", "less_equal", "greater",
              "greater_equal")


cdef inline bint _plain(object a):
    """Whether ``a`` is a C-contiguous float64 NumPy array (read through NumPy's C API: a
    typed memoryview costs about a microsecond per array)."""
    return (type(a) is _np.ndarray and cnp.PyArray_TYPE(<cnp.ndarray>a) == cnp.NPY_DOUBLE
            and cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>a))


cdef double *_data(object a, Py_ssize_t size, str what, Py_ssize_t k) except NULL:
    """The elements of ``a``, a C-contiguous float64 NumPy array of ``size`` elements."""
    if not _plain(a) or cnp.PyArray_SIZE(<cnp.ndarray>a) != size:
        raise ValueError(f"tile machine: {what} {k} must be a contiguous float64 NumPy array "
                         f"of {size} elements, got {type(a).__name__} "
                         f"{getattr(a, 'dtype', '')} of shape {getattr(a, 'shape', '')}")
    return <double *>cnp.PyArray_DATA(<cnp.ndarray>a)


def run_program(const int[:, ::1] code, const double[::1] consts, inputs, outputs,
                Py_ssize_t n_temps, tuple fns, Py_ssize_t n, Py_ssize_t tile,
                tuple periods=None, tuple layouts=None, tuple reductions=None,
                Py_ssize_t row=1):
    """Run the tile machine's ``code`` (NOTE [tile machine]) over ``n`` elements: ``inputs`` (a
    list or tuple) are float64 arrays of ``n`` contiguous elements (of any shape), or, where ``periods`` gives ``p > 0``, of
    ``p`` elements (an operand broadcast along leading axes, repeated to a tile here where it is
    shorter; ``tile`` a multiple of ``p`` or ``p`` of ``tile``); ``outputs`` a list of arrays of
    ``n`` elements or one array of shape (outputs, n), ``fns`` the addresses of the vector
    functions of ``width()`` lanes that its calls name, ``consts`` its constants. Where
    ``layouts`` gives ``(dims, strides)`` for an input (any other broadcast: the result's dims,
    the input's element strides, 0 along a broadcast axis), it is gathered tile by tile.
    ``reductions``: ``(kind, slot, output)`` triples, output ``output`` (of ``n / row``
    elements) is the sum (kind 1), minimum (2) or maximum (3) of each row of ``row`` elements
    of the value in ``slot``, or (of ``row`` elements) the sum (4), minimum (5) or maximum (6)
    of its rows (``tile`` a multiple of ``row``)."""
    cdef double[:, ::1] block = None if isinstance(outputs, list) else outputs
    cdef Py_ssize_t n_in = len(inputs), k, p, j, reps, want
    cdef Py_ssize_t span = min(tile, n)
    cdef Py_ssize_t n_out = len(outputs) if block is None else block.shape[0]
    cdef Py_ssize_t n_slots = n_in + n_out + n_temps
    cdef Py_ssize_t n_red = 0 if reductions is None else len(reductions)
    cdef int *red = NULL
    cdef char *reduced = NULL
    if _width == 0:
        raise RuntimeError("vector math: not supported here")
    if code.shape[1] != 5:
        raise ValueError("tile machine: an instruction is five ints")
    cdef Py_ssize_t *period = <Py_ssize_t *>PyMem_Malloc(max(n_in, 1) * sizeof(Py_ssize_t))
    cdef double **ins = <double **>PyMem_Malloc(max(n_in, 1) * sizeof(double *))
    cdef double **outs = <double **>PyMem_Malloc(max(n_out, 1) * sizeof(double *))
    cdef double **slots = <double **>PyMem_Malloc(max(n_slots, 1) * sizeof(double *))
    cdef void **fn = <void **>PyMem_Malloc(max(len(fns), 1) * sizeof(void *))
    # (temporaries of one tile, or of all n elements where they are fewer)
    cdef double *temps = <double *>PyMem_Malloc(max(n_temps * span, 1) * sizeof(double))
    # (an input of a period below the tile, repeated to a tile: every tile reads the same)
    cdef double *repeated = NULL
    cdef Py_ssize_t n_repeated = 0
    if periods is not None:
        for k in range(n_in):
            p = periods[k]
            if 0 < p < span:
                n_repeated += 1
        repeated = <double *>PyMem_Malloc(max(n_repeated * span, 1) * sizeof(double))
    cdef double *src
    kept = []
    # (gathered inputs: their shape descriptions and tile buffers)
    cdef const Py_ssize_t **shape = <const Py_ssize_t **>PyMem_Malloc(
        max(n_in, 1) * sizeof(Py_ssize_t *))
    cdef double **gathered = <double **>PyMem_Malloc(max(n_in, 1) * sizeof(double *))
    cdef Py_ssize_t *spec = NULL
    cdef double *gbuf = NULL
    cdef Py_ssize_t n_spec = 0, n_gather = 0, at = 0, g = 0, nd
    if layouts is not None:
        for lay in layouts:
            if lay is not None:
                n_spec += 1 + 2 * len(lay[0])
                n_gather += 1
        spec = <Py_ssize_t *>PyMem_Malloc(max(n_spec, 1) * sizeof(Py_ssize_t))
        gbuf = <double *>PyMem_Malloc(max(n_gather * span, 1) * sizeof(double))
    if n_red:
        red = <int *>PyMem_Malloc(3 * n_red * sizeof(int))
        reduced = <char *>PyMem_Malloc(max(n_out, 1))
    try:
        if n_red and not (red and reduced):
            raise MemoryError()
        if n_red:
            if row < 1 or tile % row or n % row or block is not None:
                raise ValueError(f"tile machine: rows of {row} in tiles of {tile} over {n} "
                                 f"elements (or outputs in one block)")
            memset(reduced, 0, max(n_out, 1))
            for k in range(n_red):
                r_kind, r_slot, r_out = reductions[k]
                if not (1 <= r_kind <= 6 and 0 <= r_slot < n_slots and 0 <= r_out < n_out
                        and not reduced[r_out]) or r_slot == n_in + r_out:
                    raise ValueError(f"tile machine: reduction {reductions[k]!r}")
                red[3 * k], red[3 * k + 1], red[3 * k + 2] = r_kind, r_slot, r_out
                reduced[r_out] = 1 if r_kind <= 3 else 2
        if not (ins and outs and slots and fn and temps and period and shape and gathered) or (
                periods is not None and not repeated) or (layouts is not None and not (
                    spec and gbuf)):
            raise MemoryError()
        for k in range(n_in):
            shape[k] = NULL
            gathered[k] = NULL
            lay = None if layouts is None else layouts[k]
            if lay is None:
                continue
            nd = len(lay[0])
            if not 0 < nd <= 32 or len(lay[1]) != nd:
                raise ValueError(f"tile machine: input {k}'s layout {lay!r}")
            spec[at] = nd
            for j in range(nd):
                spec[at + 1 + j] = lay[0][j]
                spec[at + 1 + nd + j] = lay[1][j]
            shape[k] = spec + at
            gathered[k] = gbuf + g * span
            at += 1 + 2 * nd
            g += 1
        reps = 0
        for k in range(n_in):
            p = 0 if periods is None else periods[k]
            if p < 0 or (p and (tile % p and p % tile or n % p)):
                raise ValueError(f"tile machine: input {k}'s period {p} and the tile {tile} "
                                 f"are not multiples of one another, or of {n}")
            a = inputs[k]
            if not _plain(a):   # (a strided view: its elements copied, kept while it runs)
                a = _np.ascontiguousarray(a, dtype=_np.float64)
                kept.append(a)
            if shape[k] != NULL:   # (every offset the gather reads lies in the array)
                want = 0
                for j in range(shape[k][0]):
                    want += (shape[k][1 + j] - 1) * shape[k][1 + shape[k][0] + j]
                if (not _plain(a) or want >= cnp.PyArray_SIZE(<cnp.ndarray>a) or p
                        or math.prod(layouts[k][0]) != n
                        or any(st < 0 for st in layouts[k][1])):
                    raise ValueError(f"tile machine: input {k} does not hold its layout "
                                     f"{layouts[k]!r}")
            src = _data(a, (n if p == 0 else p) if shape[k] == NULL else
                        cnp.PyArray_SIZE(<cnp.ndarray>a), "input", k)
            period[k] = p
            ins[k] = src
            if 0 < p < span:   # (copies of p, then of what is there: doubling)
                ins[k] = repeated + reps * span
                memcpy(ins[k], src, p * sizeof(double))
                j = p
                while j < span:
                    memcpy(ins[k] + j, ins[k], min(j, span - j) * sizeof(double))
                    j += min(j, span - j)
                reps += 1
        if block is not None and block.shape[1] != n:
            raise ValueError(f"tile machine: outputs of {block.shape[1]} elements, not {n}")
        for k in range(n_out):
            if block is not None:
                outs[k] = &block[k, 0] if n else NULL
                continue
            outs[k] = _data(outputs[k], (n // row if reduced[k] == 1 else row)
                            if n_red and reduced[k] else n, "output", k)
        for k in range(n_temps):
            slots[n_in + n_out + k] = temps + k * span
        for k in range(len(fns)):
            fn[k] = <void *><size_t>fns[k]
        if n == 0 or code.shape[0] == 0:
            return
        with nogil:
            if _width == 8:
                arrayad_exec8(&code[0, 0], code.shape[0], &consts[0] if consts.shape[0] else NULL,
                              slots, ins, period, shape, gathered, n_in, outs, n_out, fn, n,
                              tile, red, n_red, row)
            elif _width == 4:
                arrayad_exec4(&code[0, 0], code.shape[0], &consts[0] if consts.shape[0] else NULL,
                              slots, ins, period, shape, gathered, n_in, outs, n_out, fn, n,
                              tile, red, n_red, row)
            else:
                arrayad_exec2(&code[0, 0], code.shape[0], &consts[0] if consts.shape[0] else NULL,
                              slots, ins, period, shape, gathered, n_in, outs, n_out, fn, n,
                              tile, red, n_red, row)
    finally:
        PyMem_Free(red)
        PyMem_Free(reduced)
        PyMem_Free(<void *>shape)
        PyMem_Free(gathered)
        PyMem_Free(spec)
        PyMem_Free(gbuf)
        PyMem_Free(repeated)
        PyMem_Free(period)
        PyMem_Free(ins)
        PyMem_Free(outs)
        PyMem_Free(slots)
        PyMem_Free(fn)
        PyMem_Free(temps)


# NOTE [short reductions]
# -----------------------
# NumPy reduces a C-contiguous array along its last axis by calling its inner loop once per
# row, and along its leading axes by one call per row too: on short rows the calls cost more
# than the arithmetic (single thread, 1,000 rows of 10 float64: sum along the rows 18 us,
# their minima 38 us, the sum over the rows 17 us). The tile machine's reductions
# (``ad_reduce_rows``, ``ad_reduce_leading`` above: NumPy's pairwise sum along a row, in-order
# accumulation over rows, so NumPy's bits) take 6, 6 and 4 us on the same arrays, so the NumPy
# backend's sum, min and max call ``reduce_short`` first (GradBench's k-means cost, eager, went
# from 75-100 us to 34 us at k=10, n=1000, d=8, where PyTorch takes 43 us). Rows longer than
# ``SHORT_ROW``, where NumPy's vectorised loops win, other dtypes, other axes and views go to
# NumPy. (A min or max is nan from a row's first nan on; of 0.0 and -0.0, either may come
# out, as from NumPy's loops, whose answer depends on the row's length.)
SHORT_ROW = 64


def reduce_short(int kind, x, axis, bint keepdims):
    """The sum (``kind`` 1), minimum (2) or maximum (3) of the C-contiguous float64 NumPy array
    ``x`` (2-d or more) along its last axis or along its leading axes (``axis``: an int or a
    tuple, as NumPy takes it), where its rows are at most ``SHORT_ROW`` values and there are
    at least two of them (NOTE [short reductions]); None where the reduction is not of this
    kind (NumPy computes it)."""
    cdef Py_ssize_t ndim, k, lead, rows, length, size
    cdef cnp.ndarray a, out
    if type(x) is not _np.ndarray:
        return None
    a = <cnp.ndarray>x
    ndim = cnp.PyArray_NDIM(a)
    if (ndim < 2 or cnp.PyArray_TYPE(a) != cnp.NPY_DOUBLE or not cnp.PyArray_IS_C_CONTIGUOUS(a)
            or not 1 <= kind <= 3):
        return None
    if axis is None:
        return None
    if type(axis) is int:
        axes = (axis,)
    elif type(axis) is tuple:
        axes = axis
    else:
        return None
    size = cnp.PyArray_SIZE(a)
    seen = 0
    for ax in axes:
        if type(ax) is not int or not -ndim <= ax < ndim:
            return None
        k = ax % ndim
        if seen & (1 << k):
            return None
        seen |= 1 << k
    if seen == 1 << (ndim - 1):   # (the last axis)
        length = cnp.PyArray_DIM(a, ndim - 1)
        lead = 0
    elif seen == (1 << len(axes)) - 1:   # (the leading axes)
        lead = len(axes)
        length = 1
        for k in range(lead, ndim):
            length *= cnp.PyArray_DIM(a, k)
    else:
        return None
    if length < 1 or length > SHORT_ROW or size < 2 * length:
        return None
    rows = size // length
    if lead == 0:
        shape = x.shape[:ndim - 1] + ((1,) if keepdims else ())
    else:
        shape = ((1,) * lead if keepdims else ()) + x.shape[lead:]
    out = _np.empty(shape, dtype=_np.float64)
    cdef const double *src = <const double *>cnp.PyArray_DATA(a)
    cdef double *dst = <double *>cnp.PyArray_DATA(out)
    with nogil:
        if lead == 0:
            ad_reduce_rows(kind, src, dst, rows, length)
        else:
            ad_reduce_leading(kind, src, dst, rows, length, 1)
    return out
