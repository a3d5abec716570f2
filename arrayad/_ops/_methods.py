"""Array methods beyond the operators: the standard's (none besides operators and to_device) and
the torch-style ones a torch.func user reaches for (``x.sum(0)``, ``x.dim()``, ``x.relu()``...).

Each accepts both keyword spellings where torch and the standard differ (``dim``/``axis``,
``keepdim``/``keepdims``). They are looked up by ``Array.__getattr__`` from ``METHODS``, so the
list is written once for eager tensors and every kind of tracer.
"""

from ._namespace import ops
from .._core._core import alias
from . import chunks as _chunks
from .views import reshapes_without_copy, update_in_place


METHODS = {}
# (The loops below look their functions up on ``ops`` when called, not here: ``ops`` is complete
# only once every op module is imported, NOTE [internal namespace].)


def method(fn):
    METHODS[fn.__name__] = fn
    return fn


def _axis(axis, dim):
    if dim is not None:
        if axis is not None:
            raise TypeError("pass either axis= or dim=, not both")
        return tuple(dim) if isinstance(dim, list) else dim
    return tuple(axis) if isinstance(axis, list) else axis


def _reduction(name):
    def m(self, axis=None, *, dim=None, keepdims=False, keepdim=False, dtype=None, **kw):
        f = getattr(ops, name)
        extra = {"dtype": dtype} if dtype is not None else {}
        return f(self, axis=_axis(axis, dim), keepdims=keepdims or keepdim, **extra, **kw)
    m.__name__ = name
    m.__doc__ = f"``arrayad.{name}`` of this array; ``dim``/``keepdim`` are accepted too."
    return m


for _name in ["sum", "prod", "mean", "max", "min", "all", "any", "argmax", "argmin",
              "count_nonzero"]:
    METHODS[_name] = _reduction(_name)


def _stat(name):
    def m(self, axis=None, *, dim=None, correction=0.0, unbiased=None, keepdims=False,
          keepdim=False):
        if unbiased is not None:
            correction = 1.0 if unbiased else 0.0
        return getattr(ops, name)(self, axis=_axis(axis, dim), correction=correction,
                                 keepdims=keepdims or keepdim)
    m.__name__ = name
    return m


METHODS["std"] = _stat("std")
METHODS["var"] = _stat("var")

for _name in ["sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh",
              "acosh", "atanh", "exp", "expm1", "log", "log1p", "log2", "log10", "sqrt", "square",
              "abs", "sign", "floor", "ceil", "round", "trunc", "reciprocal", "conj", "isnan",
              "isinf", "isfinite", "negative", "positive"]:
    METHODS[_name] = (lambda n: lambda self: getattr(ops, n)(self))(_name)
# ``x.real`` and ``x.imag`` are properties in torch and NumPy (``__getattr__`` hands a property
# its value through ``__get__``)
METHODS["real"] = property(lambda self: ops.real(self), doc="``arrayad.real`` of this array.")
METHODS["imag"] = property(lambda self: ops.imag(self), doc="``arrayad.imag`` of this array.")
METHODS["neg"] = METHODS["negative"]
METHODS["arcsin"], METHODS["arccos"], METHODS["arctan"] = (METHODS["asin"], METHODS["acos"],
                                                          METHODS["atan"])


@method
def pow(self, exponent):
    return ops.pow(self, exponent)


@method
def matmul(self, other):
    return ops.matmul(self, other)


METHODS["mm"] = METHODS["mv"] = METHODS["matmul"]


@method
def dot(self, other):
    """Inner product of two vectors (torch's ``dot``)."""
    return ops.sum(self * other)


@method
def relu(self):
    return ops.relu(self)


@method
def sigmoid(self):
    return ops.sigmoid(self)


@method
def softmax(self, dim=-1, axis=None):
    return ops.softmax(self, axis=_axis(axis, dim) if axis is not None else dim)


@method
def log_softmax(self, dim=-1, axis=None):
    return ops.log_softmax(self, axis=_axis(axis, dim) if axis is not None else dim)


@method
def logsumexp(self, dim=None, keepdim=False, axis=None, keepdims=False):
    return ops.logsumexp(self, axis=_axis(axis, dim), keepdims=keepdims or keepdim)


@method
def clamp(self, min=None, max=None):
    return ops.clip(self, min, max)


METHODS["clip"] = METHODS["clamp"]


@method
def dim(self):
    return self.ndim


@method
def numel(self):
    return int(self.size)


@method
def t(self):
    if self.ndim < 2:
        return self
    if self.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {self.ndim}D")
    return ops.matrix_transpose(self)


def _shape_args(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return tuple(shape)


@method
def reshape(self, *shape, copy=None):
    return ops.reshape(self, _shape_args(shape), copy=copy)


@method
def view(self, *shape):
    """torch's ``view(*shape)`` (a reshape). NumPy's ``view(dtype)``, a reinterpretation of the
    bytes, has no derivative and no array API counterpart: refused by name."""
    if len(shape) == 1 and not isinstance(shape[0], (int, tuple, list)) and \
            not hasattr(shape[0], "__index__"):
        raise TypeError(
            f"view({shape[0]!r}): arrayad's view takes a shape (torch's view(*shape)); "
            f"reinterpreting the data as another dtype (NumPy's view(dtype)) is not supported. "
            f"Convert with x.astype(dtype) instead.")
    out = ops.reshape(self, _shape_args(shape))
    if not reshapes_without_copy(self, tuple(out.shape)):
        raise RuntimeError(
            "view size is not compatible with input tensor's size and stride (at least one "
            "dimension spans across two contiguous subspaces). Use .reshape(...) instead.")
    return out


@method
def flatten(self, start_dim=0, end_dim=-1):
    shape = self.shape
    if not shape:
        return ops.reshape(self, (1,))
    nd = len(shape)
    s, e = start_dim % nd, end_dim % nd
    n = 1
    for d in shape[s:e + 1]:
        n *= d
    return ops.reshape(self, shape[:s] + (n,) + shape[e + 1:])


@method
def ravel(self):
    # torch's and NumPy's: 1-d, a view where the layout allows (code written for either, e.g.
    # NumPy's assert_allclose on an atol computed from arrays, calls it)
    return ops.reshape(self, (-1,))


@method
def permute(self, *dims):
    return ops.permute_dims(self, _shape_args(dims))


@method
def transpose(self, dim0=None, dim1=None):
    if dim0 is None:
        return self.T
    axes = list(range(self.ndim))
    axes[dim0], axes[dim1] = axes[dim1], axes[dim0]
    return ops.permute_dims(self, tuple(axes))


@method
def unsqueeze(self, dim):
    return ops.expand_dims(self, axis=dim)


@method
def squeeze(self, dim=None, axis=None):
    dim = _axis(axis, dim)
    if dim is None:
        dim = tuple(i for i, s in enumerate(self.shape) if s == 1)
    elif isinstance(dim, int) and self.shape[dim] != 1:
        return self
    return ops.squeeze(self, axis=dim)


@method
def diagonal(self, offset=0, dim1=-2, dim2=-1):
    """torch's ``x.diagonal()``: a view of the diagonal of the matrices over ``dim1``, ``dim2``."""
    nd = self.ndim
    d1, d2 = dim1 % nd, dim2 % nd
    if (d1, d2) != (nd - 2, nd - 1):
        rest = [a for a in range(nd) if a not in (d1, d2)]
        self = ops.permute_dims(self, tuple(rest) + (d1, d2))
    return ops.linalg.diagonal(self, offset=offset)


@method
def unbind(self, dim=0):
    """torch's ``unbind``: views of the slices along ``dim`` (``arrayad.unstack``)."""
    return ops.unstack(self, axis=dim)


@method
def select(self, dim, index):
    """torch's ``select``: the view ``x[..., index, ...]`` with ``index`` at axis ``dim``."""
    return self[(slice(None),) * (dim % self.ndim) + (index,)]


@method
def narrow(self, dim, start, length):
    """torch's ``narrow``: the view of ``length`` elements from ``start`` along ``dim``."""
    return self[(slice(None),) * (dim % self.ndim) + (slice(start, start + length),)]


@method
def expand(self, *sizes):
    sizes = _shape_args(sizes)
    lead = len(sizes) - self.ndim
    shape = tuple(s if s != -1 else self.shape[i - lead] for i, s in enumerate(sizes))
    return ops.broadcast_to(self, shape)


@method
def flip(self, dims=None, axis=None):
    return ops.flip(self, axis=_axis(axis, dims))


@method
def cumsum(self, dim=None, axis=None):
    return ops.cumulative_sum(self, axis=_axis(axis, dim))


@method
def cumprod(self, dim=None, axis=None):
    return ops.cumulative_prod(self, axis=_axis(axis, dim))


@method
def astype(self, dtype, copy=True):
    return ops.astype(self, dtype, copy=copy)


@method
def to(self, dtype=None, device=None):
    out = self
    if dtype is not None and not isinstance(dtype, str):
        out = ops.astype(out, dtype)
    elif isinstance(dtype, str):
        device = dtype
    if device is not None:
        out = out.to_device(device)
    return out


@method
def float(self):
    """torch's ``x.float()``: float32."""
    return ops.astype(self, ops.float32)


@method
def double(self):
    return ops.astype(self, ops.float64)


@method
def clone(self):
    return ops.asarray(self, copy=True)


@method
def contiguous(self):
    return self


@method
def cpu(self):
    return self


@method
def numpy(self):
    """The values as a NumPy array (refused for a tensor that requires grad, as in torch)."""
    return ops._to_numpy(self)


@method
def to_backend_array(self):
    """The backend's own array under this one (a NumPy, torch, CuPy, array-api-strict, Dask or
    JAX array), not a copy: what the backend's functions take (``da.map_blocks``,
    ``torch.compile``d code). Refused, as ``numpy()``, for a tensor that requires grad (use
    ``detach()`` first) and inside a transform for a value that carries a derivative or a batch
    dimension."""
    return ops._to_backend_array(self)


@method
def rechunk(self, chunks="auto"):
    """``arrayad.dask.rechunk(self, chunks)``: new Dask chunks, differentiably (on another
    backend, the array itself)."""
    return _chunks.rechunk(self, chunks)


def _dask_refusal(subject, what):
    return TypeError(
        f"arrayad: {subject} cannot see through an arrayad {what}: its derivative "
        f"would be lost. For da.map_blocks(f, x) use arrayad.dask.map_blocks(f, x), for "
        f"da.map_overlap arrayad.dask.map_overlap(f, x, depth=..., boundary=...): both "
        f"differentiate f written with arrayad, block by block. For the rest use arrayad's "
        f"functions (they run on Dask chunk by chunk: ad.cumulative_sum, ad.diff, "
        f"x.rechunk(...)), or call Dask outside the transform on x.to_backend_array().")


def _dask_only(name):
    def refuse(self, *args, **kwargs):
        raise _dask_refusal(f"{name} is Dask's (called as a method, or by a Dask function such "
                            f"as da.cumsum) and", type(self).__name__)
    refuse.__name__ = name
    refuse.__doc__ = f"Refused: Dask's ``{name}`` does not differentiate arrayad values."
    return refuse


for _name in ("map_blocks", "map_overlap", "blockwise"):
    METHODS[_name] = _dask_only(_name)


def _dask_meta(self):
    # Dask's functions (da.map_blocks, da.blockwise, da.from_array...) ask every array-like
    # argument for its ``_meta``: for an arrayad value on Dask that is where a Dask function
    # meets it, and would otherwise run f once on the whole value as one opaque block (or fail
    # inside Dask's dtype inference). Other backends' values have no _meta (AttributeError).
    from ..backends import backend_of
    if backend_of(self).name != "dask":
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '_meta'")
    raise _dask_refusal("a Dask function (da.map_blocks, da.blockwise...) is Dask's and",
                        type(self).__name__)


METHODS["_meta"] = property(_dask_meta, doc="Refused on Dask: Dask's functions do not "
                                            "differentiate arrayad values.")


@method
def diag(self, diagonal=0):
    return ops.diag(self, diagonal)


@method
def norm(self, p=2, dim=None, keepdim=False):
    return ops.linalg.vector_norm(self, ord=p, axis=dim, keepdims=keepdim)


@method
def allclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    return ops.allclose(self, other, rtol=rtol, atol=atol, equal_nan=equal_nan)


@method
def new_zeros(self, *size, dtype=None):
    return ops.zeros(_shape_args(size), dtype=dtype or self.dtype)


@method
def new_ones(self, *size, dtype=None):
    return ops.ones(_shape_args(size), dtype=dtype or self.dtype)


# -- in-place methods (torch's): each computes its result and hands it to the one in-place path,
#    which checks it, stamps the array and writes through views (arrayad._ops.views)
def _in_place(name, compute):
    def m(self, *args, **kwargs):
        # (computed from an alias, which nothing updates: the nodes of the computation keep the
        # value as it was, as the operators' do)
        return update_in_place(self, compute(alias(self), *args, **kwargs), name)
    m.__name__ = name
    m.__doc__ = f"torch's in-place ``{name}``: ``x`` updated in place (views see it), returned."
    METHODS[name] = m
    return m


def _scaled(other, alpha):
    return other if alpha == 1 else alpha * other


_in_place("add_", lambda x, other, alpha=1: x + _scaled(other, alpha))
_in_place("sub_", lambda x, other, alpha=1: x - _scaled(other, alpha))
_in_place("mul_", lambda x, other: x * other)
_in_place("true_divide_", lambda x, other: x / other)
_in_place("floor_divide_", lambda x, other: x // other)
_in_place("remainder_", lambda x, other: x % other)
_in_place("pow_", lambda x, exponent: x ** exponent)
_in_place("neg_", lambda x: -x)
_in_place("zero_", lambda x: ops.zeros_like(x))
_in_place("fill_", lambda x, value: ops.full_like(x, value) if not hasattr(value, "shape")
          else ops.broadcast_to(ops.astype(value, x.dtype), x.shape))
_in_place("copy_", lambda x, src, non_blocking=False: ops.broadcast_to(
    ops.astype(ops.asarray(src), x.dtype), x.shape))
_in_place("clamp_", lambda x, min=None, max=None: ops.clip(x, min, max))
_in_place("clamp_min_", lambda x, min: ops.clip(x, min, None))
_in_place("clamp_max_", lambda x, max: ops.clip(x, None, max))
_in_place("masked_fill_", lambda x, mask, value: ops.where(mask, value, x))
_in_place("lerp_", lambda x, end, weight: x + weight * (end - x))
_in_place("addcmul_", lambda x, t1, t2, value=1: x + _scaled(t1 * t2, value))
_in_place("addcdiv_", lambda x, t1, t2, value=1: x + _scaled(t1 / t2, value))
_in_place("normal_", lambda x, mean=0.0, std=1.0, generator=None: ops.randn(
    x.shape, dtype=x.dtype, device=x.device, generator=generator) * std + mean)
_in_place("uniform_", lambda x, a=0.0, b=1.0, generator=None: ops.rand(
    x.shape, dtype=x.dtype, device=x.device, generator=generator) * (b - a) + a)
for _name in ["atan2", "hypot", "copysign", "logaddexp", "maximum", "minimum", "bitwise_and",
              "bitwise_or", "bitwise_xor", "logical_and", "logical_or", "logical_xor"]:
    _in_place(_name + "_", (lambda n: lambda x, other: getattr(ops, n)(x, other))(_name))
for _name in ["sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh",
              "acosh", "atanh", "exp", "expm1", "log", "log1p", "log2", "log10", "sqrt", "square",
              "abs", "sign", "floor", "ceil", "round", "trunc", "reciprocal", "negative", "relu",
              "sigmoid", "logical_not", "bitwise_invert"]:
    _in_place(_name + "_", (lambda n: lambda x: getattr(ops, n)(x))(_name))
METHODS["clip_"] = METHODS["clamp_"]


@method
def div_(self, other, rounding_mode=None):
    """torch's in-place ``div_`` (``rounding_mode`` None, 'trunc' or 'floor')."""
    x = alias(self)   # (as _in_place: the computation keeps the value as it was)
    if rounding_mode is None:
        q = x / other
    elif rounding_mode == "floor":
        q = x // other
    elif rounding_mode == "trunc":
        q = ops.trunc(x / other)
    else:
        raise ValueError(f"div_: rounding_mode must be None, 'trunc' or 'floor', got "
                         f"{rounding_mode!r}")
    return update_in_place(self, q, "div_")


METHODS["divide_"] = METHODS["div_"]
METHODS["multiply_"] = METHODS["mul_"]
METHODS["subtract_"] = METHODS["sub_"]
METHODS["arcsin_"], METHODS["arccos_"], METHODS["arctan_"] = (
    METHODS["asin_"], METHODS["acos_"], METHODS["atan_"])


ops._METHODS = METHODS   # (glue: Array.__getattr__ in the core reads it)
