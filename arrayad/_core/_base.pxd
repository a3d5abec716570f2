# Declarations of _base.pyx that the other modules of the core cimport (C calls, C fields).
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_SET_ITEM


cdef inline bint _is_scalar(object v):
    """isinstance(v, (int, float, complex, bool)) as three C flag checks: the tuple form goes
    through the generic isinstance protocol, a microsecond on the hot paths that call it."""
    return isinstance(v, float) or isinstance(v, int) or isinstance(v, complex)


cdef inline void _put(tuple t, Py_ssize_t i, object v):
    """``t[i] = v`` in a tuple being filled (made by ``PyTuple_New``, not yet seen by anyone):
    the interpreters build their tuples of values and edges so, without lists to convert. The
    tuple keeps a reference of its own (``PyTuple_SET_ITEM`` takes one)."""
    Py_INCREF(v)
    PyTuple_SET_ITEM(t, i, v)


cdef class Host:
    """What the core calls in the Python layer. Every field is required."""
    cdef readonly object resolve_backend      # raw array or None -> backend adapter (None: default)
    cdef readonly object dtype_from_backend   # backend dtype or Python type -> arrayad DType
    cdef readonly object batch_fallback       # (prim, vals, dims, params, interp) -> (out, out_dim)
    cdef readonly object zeros_like           # zero cotangents of unused multi-output slots
    # the glue of the array methods (arrayad._api)
    cdef readonly object namespace            # api_version -> the namespace (__array_namespace__)
    cdef readonly object getitem, setitem     # x[key]; a copy of x with x[key] = value
    cdef readonly object inplace              # rebind x to the result of an in-place update
    cdef readonly object inplace_level_error  # the error when that would change x's transform
    cdef readonly object concrete             # the backend value for a Python conversion, or raise
    cdef readonly object to_scalar            # float(x), int(x), x.item()...
    cdef readonly object to_numpy             # __array__
    cdef readonly object array_ufunc, array_function   # NumPy's protocols
    cdef readonly object repr
    cdef readonly object device_of, to_device
    cdef readonly object check_requires_grad, check_not_transformed
    cdef readonly object backward             # Tensor.backward
    cdef readonly object detach               # x.detach(), x.data: a view without history
    # namespace functions the core's generic code calls
    cdef readonly object broadcast_to, permute_dims, matrix_transpose, conj, real, astype, sum
    cdef readonly object reshape, where
    cdef readonly dict methods                # every other array method, by name


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
    cdef public bint batch_gets_interpreter
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


cdef class Meta:
    cdef public tuple shape
    cdef public object dtype


cdef Host _host
cdef dict _op
cdef Primitive _mul_p, _add_p, _sub_p, _div_p, _neg_p
cdef dict _backend_of_type, _scalar_fix
cdef type _inplace_type
cdef object _grad_mode, _transforms

cpdef object backend_of(object raw)
cdef object _backend_of_args(tuple args, bint* numpy_scalars, str api=*)
cpdef object fix_scalar(object out)
cdef ThreadState _state()
cdef tuple _open_transforms()
cdef bint _grad_enabled() except -1
cdef void _set_grad_enabled(bint mode) except *
cdef object _call_impl(Primitive prim, tuple args, dict params)
cdef tuple _live_entry(dict results, object prim, object x)
cdef void _share_result(Primitive prim, object x, object out, object node) except *
cdef void _forget_result(Primitive prim, object x, object node) except *
