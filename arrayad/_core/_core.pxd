# Declarations of arrayad's hot types, so other Cython modules can use them at C speed.

cdef class Frame:
    cdef public int level
    cdef public int kind
    cdef public bint alive
    cdef public object data
    cdef public bint keep_saved


cdef class Primitive:
    cdef public str name
    cdef public object impl
    cdef public object vjp
    cdef public object jvp
    cdef public object batch
    cdef public bint multiple_results
    cdef public bint differentiable
    cdef public bint keeps_level
    cdef public dict _direct
    cdef public str xp_name
    cdef public tuple vjp_reads
    cdef public object reuses
    cdef public bint elementwise
    cdef object __weakref__


cdef class Meta:
    cdef public tuple shape
    cdef public object dtype


cdef class Node:
    cdef public object prim
    cdef public tuple inputs
    cdef public dict params
    cdef public object ans
    cdef public tuple edges
    cdef public int n_outputs
    cdef public bint eager
    cdef public bint released
    cdef public object leaf
    cdef public list retained
    cdef public object partner_result
    cdef unsigned long _mark       # (the topological sort's bookkeeping)
    cdef Py_ssize_t _next
    cdef object __weakref__
    cpdef release(self)


cdef class Array:
    cdef object __weakref__


cdef class Tensor(Array):
    cdef public object _value
    cdef public Node _node
    cdef public int _idx
    cdef public object _grad


cdef class Tracer(Array):
    cdef public Frame _frame


cdef class GradTracer(Tracer):
    cdef public object value
    cdef public Node _node
    cdef public int _idx


cdef class DualTracer(Tracer):
    cdef public object primal
    cdef public object tangent


cdef class BatchTracer(Tracer):
    cdef public object value
    cdef public int bdim
