# Declarations of arrayad's hot types, so other Cython modules can use them at C speed.

cdef class ThreadState:
    cdef readonly dict rngs
    cdef public object seed
    cdef dict results
    cdef Py_ssize_t results_sweep_at
    cdef object consumable
    cdef Py_ssize_t consumed
    cdef Py_ssize_t strong_products
    cdef public object staging
    cdef dict zeros


cdef class Primitive:
    cdef public str name
    cdef public object impl
    cdef public object vjp
    cdef public object jvp
    cdef public object batch
    cdef public bint multiple_results
    cdef public bint differentiable
    cdef public dict _direct
    cdef public str xp_name
    cdef public tuple vjp_reads
    cdef public object reuses
    cdef public bint elementwise
    cdef object __weakref__


cdef class Interpreter:
    cdef readonly int level
    cdef readonly bint alive
    cdef public object frame
    cdef object _entered   # the token of its push on the context's stack (NOTE [thread state])
    cdef void _enter(self, ThreadState st) except *
    cdef void _exit(self, ThreadState st) except *
    cpdef object process(self, Primitive prim, tuple args, dict params)
    cpdef object lift(self, object value)


cdef class GradInterpreter(Interpreter):
    cdef readonly bint keep_saved
    cdef bint prev_grad


cdef class JvpInterpreter(Interpreter):
    cdef readonly bint dual_level


cdef class BatchInterpreter(Interpreter):
    cdef readonly Py_ssize_t size
    cdef readonly str randomness


cdef class Meta:
    cdef public tuple shape
    cdef public object dtype


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


cdef class GradTracer(Tracer):
    cdef public Node _node
    cdef public int _idx


cdef class DualTracer(Tracer):
    cdef public object tangent


cdef class BatchTracer(Tracer):
    cdef public int bdim
