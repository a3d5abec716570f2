# Declarations of _zeros.pyx that the other modules of the core cimport.
from ._base cimport ThreadState


cdef class _Mask:
    cdef object make
    cdef _Mask a, b
    cdef object mask
    cdef object get(self)


cdef _Mask _both(_Mask a, _Mask b)
cdef _Mask _mask_of(ThreadState st, object v)
cdef object _mark(ThreadState st, object v, _Mask m)
cdef void _unmark(ThreadState st, object v) except *
cdef void _carry(ThreadState st, object src, object dst) except *
cdef bint _writable_like(object g, object d)


cdef class _UnaryShape:
    cdef readonly object d
    cdef readonly bint quotient
    cdef int _reads   # 1: d is "ans", 2: "x", 0: a function (_named)
    cdef object derivative(self, object ans, object x)


cdef class UnaryVJP(_UnaryShape):
    cdef object vjp(self, object g, object ans, object x)


cdef class PartialVJP:
    cdef readonly object d
    cdef readonly int i
    cdef int _reads   # 1: d is "ans", 2: "x1", 3: "x2", 0: a function (_named)
    cdef object vjp(self, object g, object ans, object x1, object x2)


cdef class SumVJP:
    cdef readonly int i
    cdef readonly bint negate
    cdef object vjp(self, object g, object ans, object x1, object x2)
