# Declarations of _interp.pyx that the other modules of the core cimport.
from ._base cimport Interpreter
from ._arrays cimport Node, Tracer


cdef class GradInterpreter(Interpreter):
    cdef readonly bint keep_saved
    cdef bint prev_grad


cdef class JvpInterpreter(Interpreter):
    cdef readonly bint dual_level


cdef class BatchInterpreter(Interpreter):
    cdef readonly Py_ssize_t size
    cdef readonly str randomness


cdef class GradTracer(Tracer):
    cdef public Node _node
    cdef public int _idx


cdef class DualTracer(Tracer):
    cdef public object tangent


cdef class BatchTracer(Tracer):
    cdef public int bdim


cdef long _reads_mask(tuple reads, tuple edges)
cdef BatchTracer _new_batch(Interpreter interp, object value, int bdim)
