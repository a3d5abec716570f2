# cython: boundscheck=False, wraparound=False
"""Calls of a vector math function over a float64 array (NOTE [vector math] in
``arrayad/_jit/vector_math.py``): the function is found at run time (its address is given), and
called on 2, 4 or 8 values at a time in the widest vector registers the processor has (SSE2,
AVX2 or AVX-512), the last few values padded to a full vector. Nothing here links to the
library: on a compiler or processor without these registers ``supported()`` is False."""

cdef extern from *:
    """
    #include <string.h>
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
    #endif
    """
    int ARRAYAD_VECTOR_MATH
    void arrayad_run2(void *fn, const double *x, double *o, Py_ssize_t n) nogil
    void arrayad_run4(void *fn, const double *x, double *o, Py_ssize_t n) nogil
    void arrayad_run8(void *fn, const double *x, double *o, Py_ssize_t n) nogil
    int arrayad_vector_width()

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
