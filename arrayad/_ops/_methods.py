"""Array methods beyond the operators: the standard's (none besides operators and to_device) and
the torch-style ones a torch.func user reaches for (``x.sum(0)``, ``x.dim()``, ``x.relu()``...).

Each accepts both keyword spellings where torch and the standard differ (``dim``/``axis``,
``keepdim``/``keepdims``). They are looked up by ``Array.__getattr__`` from ``METHODS``, so the
list is written once for eager tensors and every kind of tracer.
"""

from ._namespace import ops


METHODS = {}


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
    METHODS[_name] = (lambda f: lambda self: f(self))(getattr(ops, _name))
# ``x.real`` and ``x.imag`` are properties in torch and NumPy (``__getattr__`` hands a property
# its value through ``__get__``)
METHODS["real"] = property(lambda self: ops.real(self), doc="``arrayad.real`` of this array.")
METHODS["imag"] = property(lambda self: ops.imag(self), doc="``arrayad.imag`` of this array.")
METHODS["neg"] = METHODS["negative"]
METHODS["arcsin"], METHODS["arccos"], METHODS["arctan"] = METHODS["asin"], METHODS["acos"], METHODS["atan"]


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
    return ops.reshape(self, _shape_args(shape))


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


@method
def zero_(self):
    return ops._inplace(self, ops.zeros_like(self))


@method
def add_(self, other, alpha=1):
    return ops._inplace(self, self + alpha * other if alpha != 1 else self + other)


@method
def sub_(self, other, alpha=1):
    return ops._inplace(self, self - alpha * other if alpha != 1 else self - other)


@method
def mul_(self, other):
    return ops._inplace(self, self * other)




ops._METHODS = METHODS   # (glue: Array.__getattr__ in the core reads it)
