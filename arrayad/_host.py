"""Hands the core what it calls in the Python layer (NOTE [host interface] in ``_core/_base.pyx``).

The core imports nothing from the package; this module, imported once by ``arrayad/__init__``,
gives it the backend resolver, the glue of the array methods (declared in the internal namespace,
``arrayad._ops``) and the primitives behind Python's operators.
"""

from . import _dtypes
from ._core import _core
from ._ops import batch_fallback, elementwise, linalg, ops
from .autograd import backward
from .backends import _resolve, get_backend


def _tensor_backward(tensors, grad_tensors, retain_graph, create_graph, inputs):
    backward(tensors, grad_tensors, retain_graph=retain_graph, create_graph=create_graph,
             inputs=inputs)


_core.install_host(
    resolve_backend=_resolve,
    dtype_from_backend=_dtypes.from_backend,
    batch_fallback=batch_fallback,
    zeros_like=ops.zeros_like,
    namespace=ops._namespace_for,
    getitem=ops._getitem,
    setitem=ops._setitem,
    inplace=ops._inplace,
    inplace_level_error=ops._inplace_level_error,
    concrete=ops._concrete,
    to_scalar=ops._to_scalar,
    to_numpy=ops._to_numpy,
    array_ufunc=ops._array_ufunc,
    array_function=ops._array_function,
    repr=ops._repr,
    device_of=ops._device_of,
    to_device=ops._to_device,
    check_requires_grad=ops._check_requires_grad,
    check_not_transformed=ops._check_not_transformed,
    backward=_tensor_backward,
    detach=ops._detach,
    broadcast_to=ops.broadcast_to,
    permute_dims=ops.permute_dims,
    matrix_transpose=ops.matrix_transpose,
    conj=ops.conj,
    real=ops.real,
    astype=ops.astype,
    sum=ops.sum,
    reshape=ops.reshape,
    where=ops.where,
    methods=ops._METHODS,
)
_core.install_operators({name: (linalg.PRIMS if name == "matmul" else elementwise.PRIMS)[name]
                         for name in _core._OPERATORS})
_core.install_complex_dtypes(_dtypes.complex64, _dtypes.complex128)
get_backend("numpy")
