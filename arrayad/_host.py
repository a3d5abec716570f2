"""Hands the core what it calls in the Python layer (NOTE [host interface] in ``_core.pyx``).

The core imports nothing from the package; this module, imported once by ``arrayad/__init__``,
gives it the backend resolver, the glue of the array methods and the primitives behind Python's
operators.
"""

from . import _api, _dtypes, _methods
from ._core import _core
from ._ops import creation, elementwise, linalg, manipulation, reductions
from ._ops._rules import batch_fallback
from .autograd import backward
from .backends import _resolve, get_backend


def _tensor_backward(tensors, grad_tensors, retain_graph, create_graph, inputs):
    backward(tensors, grad_tensors, retain_graph=retain_graph, create_graph=create_graph,
             inputs=inputs)


_core.install_host(
    resolve_backend=_resolve,
    dtype_from_backend=_dtypes.from_backend,
    batch_fallback=batch_fallback,
    zeros_like=creation.zeros_like,
    namespace=_api._namespace_for,
    getitem=_api._getitem,
    setitem=_api._setitem,
    inplace=_api._inplace,
    inplace_level_error=_api._inplace_level_error,
    concrete=_api._concrete,
    to_scalar=_api._to_scalar,
    to_numpy=_api._to_numpy,
    array_ufunc=_api._array_ufunc,
    array_function=_api._array_function,
    repr=_api._repr,
    device_of=_api._device_of,
    to_device=_api._to_device,
    check_requires_grad=_api._check_requires_grad,
    check_not_transformed=_api._check_not_transformed,
    backward=_tensor_backward,
    stop_gradient=_api.stop_gradient,
    broadcast_to=manipulation.broadcast_to,
    permute_dims=manipulation.permute_dims,
    matrix_transpose=manipulation.matrix_transpose,
    conj=elementwise.conj,
    real=elementwise.real,
    astype=manipulation.astype,
    sum=reductions.sum,
    reshape=manipulation.reshape,
    methods=_methods.METHODS,
)
_core.install_operators({name: (linalg.PRIMS if name == "matmul" else elementwise.PRIMS)[name]
                         for name in _core._OPERATORS})
_core.install_complex_dtypes(_dtypes.complex64, _dtypes.complex128)
get_backend("numpy")
