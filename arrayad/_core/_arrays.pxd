# Declarations of _arrays.pyx that the other modules of the core cimport.
from ._base cimport Primitive, Interpreter


cdef class Node:
    cdef public object prim
    cdef public tuple inputs
    cdef public dict params
    cdef public object ans
    cdef tuple _edges
    cdef readonly int n_outputs
    cdef public bint eager
    cdef public bint released
    cdef public object leaf
    cdef public list retained
    cdef public object partner_result
    cdef unsigned long long _made_at   # NOTE [in-place after use]
    cdef unsigned long _mark       # (the topological sort's bookkeeping)
    cdef Py_ssize_t _next
    cdef object __weakref__
    cpdef release(self)


cdef class Array:
    cdef object __weakref__
    cdef unsigned long long _updated_at   # NOTE [in-place after use]
    # NOTE [views]: the array this one views (or None), how it views it (a View of
    # arrayad._ops.views), and the live views of this one (a WeakSet, or None)
    cdef public object _base
    cdef public object _view
    cdef public object _views


cdef class Tensor(Array):
    cdef public object _value
    cdef public Node _node
    cdef public int _idx
    cdef public object _grad
    cdef public object _origin   # an alias's original Tensor (NOTE [in-place after use]), or None


cdef class Tracer(Array):
    cdef readonly Interpreter _interp
    cdef public object value
    cdef object _zeros   # NOTE [strong zeros]: the mask of its structural zeros, or None


cdef unsigned long long _clock

cpdef object raw_value(object x)
cdef object _bind(Primitive prim, tuple args, dict params)
cdef Node _new_node(object prim, tuple inputs, dict params, object ans, tuple edges,
                    int n_outputs, bint eager)
cdef bint _is_inexact(object v)
cdef Tensor _new_tensor(object value, Node node, int idx)
cpdef object dtype_of(object v)
cpdef tuple shape_of(object v)
cdef object _alias(Array a)
