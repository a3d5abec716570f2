# cython: language_level=3
"""The containers and the dispatch: ``Array`` and its kinds (the eager ``Tensor``, the base of
the tracers), ``bind``, the eager tape's records (``Node``, NOTE [eager tape] in ``_tape.pyx``) and
``forward_result``, a rule's question to what the nodes share (NOTE [shared results] in
``_base.pyx``); the shapes and dtypes of any value.
"""

import weakref

from cpython.tuple cimport PyTuple_New

from ._base cimport (_is_scalar, _put, ThreadState, Primitive, Interpreter, Meta, _host, _op,
                     backend_of, fix_scalar, _state, _grad_enabled, _call_impl, _inplace_type,
                     _add_p, _sub_p, _mul_p, _div_p, _neg_p, _live_entry, _share_result,
                     _forget_result)
from ._base import escaped_error

cimport numpy as cnp
cnp.import_array()

cpdef object raw_value(object x):
    """The raw backend array under ``x``: a Tensor's value, a tracer's value all the way down
    (for a batch tracer, with its batch dimension). Anything else is returned as it is."""
    while isinstance(x, Array):
        if isinstance(x, Tensor):
            return (<Tensor>x)._value
        if not isinstance(x, Tracer):
            raise TypeError(f"arrayad: {type(x).__name__} is an Array that is neither a Tensor "
                            f"nor a tracer")
        x = (<Tracer>x).value
    return x


# ---------------------------------------------------------------------------------------------
# bind

def bind(Primitive prim not None, *args, **params):
    """Apply the primitive ``prim`` to ``args``: by the innermost transform among the
    arguments, else eagerly.

    Every arrayad function ends in a ``bind``: the core finds the highest transform level among
    the arguments (a ``grad``, ``jvp``, ``vmap`` or ``jit`` tracer, or an eager ``Tensor`` that
    requires grad) and hands the call to that transform's interpreter, which applies the
    primitive's rule (VJP, JVP, batching) and binds again one level down; with no tracer and
    nothing to record, the backend's function is called directly. It is the entry point for a
    primitive of arrayad's operator tables (the internals page of the documentation says where
    they are declared).

    Parameters
    ----------
    prim : Primitive
        The primitive, with its implementation and rules.
    *args
        Its array arguments (any backend's arrays, ``ad.Tensor``, tracers) and Python scalars.
    **params
        Its static keyword parameters (``axis=``, ``keepdims=``...).

    Returns
    -------
    array, Tensor, tracer or tuple of them
        The primitive's result, of the arguments' kind: a backend array for backend arrays, a
        ``Tensor`` for Tensors, a tracer of the innermost transform inside one; a tuple for a
        primitive with several results.

    Raises
    ------
    TypeError
        If ``prim`` is not a ``Primitive``.
    Exception
        Whatever the primitive's implementation or rules raise for these arguments (a
        non-differentiable primitive under ``grad``, a backend mismatch...).

    Examples
    --------
    >>> from arrayad._ops.elementwise import PRIMS
    >>> ad.bind(PRIMS["sin"], np.array([0.0, np.pi / 2]))
    array([0., 1.])
    >>> ad.func.grad(lambda x: ad.bind(PRIMS["sin"], x))(0.0)     # cos(0)
    array(1.)
    """
    return _bind(prim, args, params)


cdef object _bind(Primitive prim, tuple args, dict params):
    cdef Interpreter top = None
    cdef Interpreter f
    cdef bint has_tensor = False
    cdef bint has_raw = False
    for a in args:
        if not isinstance(a, Array):
            if not has_raw and a is not None and not _is_scalar(a):
                has_raw = True
            continue
        if isinstance(a, Tensor):
            has_tensor = True
            continue
        if not isinstance(a, Tracer):
            raise TypeError(f"arrayad: {type(a).__name__} is an Array that is neither a Tensor "
                            f"nor a tracer")
        f = (<Tracer>a)._interp
        if f is None:
            raise TypeError(f"arrayad: a {type(a).__name__} that belongs to no transform (made "
                            f"with __new__?) cannot be computed with")
        if top is None or f.level > top.level or (f.level == top.level and f is not top):
            if not f.alive:
                raise escaped_error(f)
            top = f
    if top is not None:
        staging = _state().staging
        if staging is not None and (<Interpreter>staging).level > top.level:
            return _process_below_staging(top, prim, args, params)
        return top.process(prim, args, params)
    if has_tensor or has_raw:
        staging = _state().staging
        if staging is not None:   # NOTE [staging everything]
            return (<Interpreter>staging).process(prim, args, params)
    if has_tensor:
        return _process_eager(prim, args, params)
    return _call_impl(prim, args, params)


# NOTE [staging everything]
# -------------------------
# While ``jit`` traces a function, an operation with no traced argument (on arrays the function
# captured, ``exp(c)``, ``W.T``) is staged too, as JAX's omnistaging does: run once at tracing,
# its result would be a constant of the cached program, stale after ``c`` changes. The staging
# interpreter is ``ThreadState.staging`` while the function runs; its own ``process``, which
# computes the value one level down, sets it back to the enclosing jit's for that call. So does
# an operation on a value of a transform below the jit (``grad(lambda p: jit(lambda x: x *
# p[0])(x))``: ``p[0]`` on grad's tracer): that transform computes its values at its own level,
# where the jit above it does not exist, so the jits above its level stop staging for that call
# (their tracers inside its value would outlive them).

cdef object _process_below_staging(Interpreter top, Primitive prim, tuple args, dict params):
    cdef ThreadState st = _state()
    saved = st.staging
    staging = saved
    while staging is not None and (<Interpreter>staging).level > top.level:
        staging = staging._enclosing_staging
    st.staging = staging
    try:
        return top.process(prim, args, params)
    finally:
        st.staging = saved


# (NOTE [shared results]: the registry is in _base.pyx, beside its state)

def forward_result(Primitive prim not None, object x):
    """``prim(x)``: the result the forward pass computed, when a node still keeps it, else
    computed now. See NOTE [shared results]."""
    entry = _live_entry(_state().results, prim, x)
    if entry is not None:
        out = entry[1]()
        if out is not None:
            return out
    return _bind(prim, (x,), {})


# ---------------------------------------------------------------------------------------------
# The tape's nodes (the backward engine is in _tape.pyx)

cdef class Node:
    """One recorded operation (or, with ``leaf`` set, the gradient accumulator of a leaf)."""

    def __init__(self, prim, tuple inputs, dict params, ans, tuple edges, int n_outputs=1,
                 bint eager=False):
        if n_outputs < 1:
            raise ValueError(f"Node: n_outputs must be at least 1, got {n_outputs}")
        self.prim = prim
        self.inputs = inputs
        self.params = params
        self.ans = ans
        self.edges = edges   # (checked by the property)
        self.n_outputs = n_outputs
        self.eager = eager
        self.released = False
        self.leaf = None
        self.retained = None
        self._made_at = _clock

    def name(self):
        if self.leaf is not None:
            return "AccumulateGrad"
        n = getattr(self.prim, "node_name", None)
        if n is not None:
            return n
        return "".join(p.capitalize() for p in str(self.prim.name).split("_")) + "Backward"

    def __repr__(self):
        return f"<{self.name()}>"

    @property
    def edges(self):
        """One entry per input: ``(node, output index)`` of the node that made it, or None."""
        return self._edges

    @edges.setter
    def edges(self, edges):
        # the engine follows edges at C speed, trusting their types: check them here
        if edges is not None:
            if not isinstance(edges, tuple):
                raise TypeError(f"Node.edges must be a tuple, got {type(edges).__name__}")
            for e in edges:
                if e is not None and not (isinstance(e, tuple) and len(e) == 2
                                          and isinstance(e[0], Node) and isinstance(e[1], int)
                                          and 0 <= e[1] < (<Node>e[0]).n_outputs):
                    raise TypeError(f"Node.edges: each entry must be None or (Node, output "
                                    f"index), got {e!r}")
        self._edges = edges

    @property
    def next_functions(self):
        return tuple((e[0], e[1]) if e is not None else (None, 0) for e in self._edges or ())

    cpdef release(self):
        """Drop the saved values (after a backward pass without retain_graph)."""
        if (type(self.prim) is Primitive and (<Primitive>self.prim).reuses is not None
                and self.inputs):
            x = self.inputs[0]
            _forget_result(<Primitive>self.prim,
                           (<Tensor>x)._value if isinstance(x, Tensor) else x, self)
        self.inputs = None
        self.ans = None
        self.params = None
        self.partner_result = None
        self.released = True


def leaf_node(tensor_or_none=None):
    n = _new_node(None, (), None, None, (), 1, False)
    if tensor_or_none is not None:
        n.leaf = weakref.ref(tensor_or_none)
    else:
        n.leaf = False   # a transform's input: the engine hands its cotangent back
    return n


cdef Node _new_node(object prim, tuple inputs, dict params, object ans, tuple edges,
                           int n_outputs, bint eager):
    cdef Node n = Node.__new__(Node)
    n.prim = prim
    n.inputs = inputs
    n.params = params
    n.ans = ans
    n._edges = edges
    n.n_outputs = n_outputs
    n.eager = eager
    n._made_at = _clock
    return n


# NOTE [in-place after use]
# -------------------------
# In-place operators update functionally: ``y += 1`` computes ``y + 1`` and rebinds the object
# ``y`` to the result (``_inplace``), so that aliases of ``y`` see the new value, as in NumPy and
# torch. A node that saved the object ``y`` earlier would then read the new value in the backward
# pass: a silently wrong derivative. So every update ticks a clock and stamps the array
# (``Array._updated_at``), every node remembers the tick it was made at (``Node._made_at``), and
# the backward pass refuses a node whose saved array was updated after it (torch's "modified by
# an inplace operation" error). Where the value as it was can be kept for free, it is instead:
# the operation of an in-place update itself reads an alias of the old ``y`` (so ``y *= 2`` does
# not trip over its own update), and the nodes of a transform keep aliases of the eager tensors
# they were given (constants captured by or made in the transformed function), so that a later
# update of those gives no wrong result and no error.
cdef unsigned long long _clock = 0


cdef inline void _stamp_update(Array a):
    global _clock
    _clock += 1
    a._updated_at = _clock


def stamp_update(Array a not None):
    """Mark ``a`` updated in place now (NOTE [in-place after use])."""
    _stamp_update(a)


def alias(Array a not None):
    """Another object with ``a``'s value and place in the graph, which nothing will update."""
    return _alias(a)


# NOTE [views]
# ------------
# Aliasing follows torch's model: a view (``x[1:3]``, ``x.T``, ``reshape`` where NumPy would not
# copy, ``diagonal``, ``detach()``...) and its base show one array, so an in-place update of either
# is seen by the other and by every other view of the base, on every backend, on the eager tape and
# inside transforms. Updates stay functional (new arrays, rebound; the old values stay with the
# nodes that saved them): after an update the host (``arrayad._ops.views``) writes a view back into
# its base with a differentiable operation (``base[key] = view``: torch's CopySlices) and reads the
# live views again from the base. The core keeps only the links: ``_base`` and ``_view`` (how the
# base is viewed) on a view, ``_views`` (weak) on a base. Every array so updated is stamped, so a
# node that saved one of them refuses the backward pass (torch's shared version counter).
def view_of(Array out not None, Array base not None, view):
    """Make ``out`` a view of ``base`` (NOTE [views]); returns ``out``."""
    out._base = base
    out._view = view
    if base._views is None:
        base._views = weakref.WeakSet()
    base._views.add(out)
    return out


# ---------------------------------------------------------------------------------------------
# Eager interpreter (the tape below every transform: NOTE [eager tape])

cdef object _process_eager(Primitive prim, tuple args, dict params):
    cdef Py_ssize_t i, n = len(args)
    cdef tuple raws = PyTuple_New(n)    # (the raw values, the edges: filled in place)
    cdef tuple edges = PyTuple_New(n)
    cdef bint record = False
    for i in range(n):
        a = args[i]
        e = None
        if isinstance(a, Tensor):
            v = (<Tensor>a)._value
            if (<Tensor>a)._node is not None:
                e = ((<Tensor>a)._node, (<Tensor>a)._idx)
                record = True
        else:
            v = a
        _put(raws, i, v)
        _put(edges, i, e)
    out = _call_impl(prim, raws, params)
    if not (record and prim.differentiable and _grad_enabled()):
        if prim.multiple_results:
            return tuple([_new_tensor(o, None, 0) for o in out])
        return _new_tensor(out, None, 0)
    if prim.multiple_results:
        node = _new_node(prim, args, params, out, edges, len(out), True)
        return tuple([_new_tensor(o, node if _is_inexact(o) else None, i)
                      for i, o in enumerate(out)])
    node = _new_node(prim, args, params, out, edges, 1, True)
    if prim.reuses is not None:
        _share_result(prim, raws[0], out, node)
    return _new_tensor(out, node, 0)


cdef bint _is_inexact(object v):
    """Whether ``v`` has a floating-point or complex dtype (only those carry derivatives)."""
    return dtype_of(v).kind in ("f", "c")


cdef Tensor _new_tensor(object value, Node node, int idx):
    cdef Tensor t = Tensor.__new__(Tensor)
    t._value = value
    t._node = node
    t._idx = idx
    t._grad = None
    return t


# ---------------------------------------------------------------------------------------------
# Shapes and dtypes of any value (raw array, Tensor, tracer)

cdef dict _dtype_cache = {}   # id(backend dtype) -> (backend dtype, arrayad DType)


cdef object _last_dt = None, _last_dtype = None


cpdef object dtype_of(object v):
    """The arrayad DType of a raw array, Tensor, tracer or Python scalar."""
    if isinstance(v, Array):
        return v.dtype
    if type(v) is Meta:
        return (<Meta>v).dtype
    if _is_scalar(v):
        return _host.dtype_from_backend(type(v))
    global _last_dt, _last_dtype
    # (a NumPy array's dtype read in C: the attribute lookup cost as much as the cache below)
    dt = <object>cnp.PyArray_DESCR(<cnp.ndarray>v) if type(v) is _inplace_type else v.dtype
    if dt is _last_dt:   # (most calls in a row see the same dtype)
        return _last_dtype
    # Backend dtypes are (nearly always) singletons: cache by identity, check it is the same.
    hit = _dtype_cache.get(id(dt))
    if hit is not None and (<tuple>hit)[0] is dt:
        _last_dt, _last_dtype = dt, (<tuple>hit)[1]
        return _last_dtype
    r = _host.dtype_from_backend(dt)
    # Bounded: array-api-strict makes a new dtype object per array (equal by value, which the
    # value-keyed lookup above handles); an unbounded identity cache would grow forever.
    if len(_dtype_cache) < 256:
        _dtype_cache[id(dt)] = (dt, r)
    return r


cpdef tuple shape_of(object v):
    if _is_scalar(v):
        return ()
    s = v.shape
    if type(s) is tuple:
        return <tuple>s
    return tuple(s)


class _Size(int):
    """``x.size`` is the array API's element count and, called, torch's ``x.size(dim)``."""

    def __new__(cls, n, shape):
        self = int.__new__(cls, n)
        self._shape = shape
        return self

    def __call__(self, dim=None):
        if dim is None:
            return self._shape
        return self._shape[dim]


cdef object _size_of(tuple shape):
    cdef Py_ssize_t n = 1
    for s in shape:
        if s is None:
            return None
        n *= s
    return _Size(n, shape)


cdef object _concrete(Array self, str what):
    """The backend value under ``self`` for a conversion (the host refuses the ones that would
    drop a derivative). Never an arrayad array: converting that again would recurse forever."""
    v = _host.concrete(self, what)
    if isinstance(v, Array):
        raise TypeError(f"arrayad: {what}() of a {type(self).__name__} that holds no value")
    return v


cdef object _inplace(Array self, str op, object other):
    """``self op= other``: rebind ``self`` to the result (the host's ``inplace`` checks, stamps
    and writes through views: NOTE [in-place after use], NOTE [views])."""
    return _host.inplace(self, _bind(<Primitive>_op[op], (_alias(self), other), {}))


cdef object _alias(Array a):
    """Another object with ``a``'s value and place in the graph, which nothing will update."""
    cdef Tensor t
    if isinstance(a, Tensor):
        t = _new_tensor((<Tensor>a)._value, (<Tensor>a)._node, (<Tensor>a)._idx)
        # (jit reads a captured Tensor when its program runs: it follows an alias to the
        # original, which cannot change while the traced function runs: NOTE [captured arrays])
        t._origin = (<Tensor>a)._origin if (<Tensor>a)._origin is not None else a
        return t
    return a.__copy__()


# ---------------------------------------------------------------------------------------------
# The array types. ``Array`` carries every array method; each delegates to the arrayad namespace
# so that the same code serves eager tensors and tracers of every kind.

cdef class Array:
    __array_priority__ = 1000

    # -- array API attributes
    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return _size_of(tuple(self.shape))

    @property
    def T(self):
        return _host.permute_dims(self, tuple(range(self.ndim - 1, -1, -1)))

    @property
    def mT(self):
        return _host.matrix_transpose(self)

    @property
    def device(self):
        return _host.device_of(self)

    @property
    def grad(self):
        return None

    @property
    def requires_grad(self):
        return False

    @property
    def grad_fn(self):
        return None

    @property
    def is_leaf(self):
        return True

    def __array_namespace__(self, *, api_version=None):
        return _host.namespace(api_version)

    def to_device(self, device, /, *, stream=None):
        return _host.to_device(self, device, stream)

    # -- arithmetic operators
    def __add__(self, other): return _bind(_add_p, (self, other), {})
    def __radd__(self, other): return _bind(_add_p, (other, self), {})
    def __sub__(self, other): return _bind(_sub_p, (self, other), {})
    def __rsub__(self, other): return _bind(_sub_p, (other, self), {})
    def __mul__(self, other): return _bind(_mul_p, (self, other), {})
    def __rmul__(self, other): return _bind(_mul_p, (other, self), {})
    def __truediv__(self, other): return _bind(_div_p, (self, other), {})
    def __rtruediv__(self, other): return _bind(_div_p, (other, self), {})
    def __floordiv__(self, other): return _bind(<Primitive>_op['floor_divide'], (self, other), {})
    def __rfloordiv__(self, other): return _bind(<Primitive>_op['floor_divide'], (other, self), {})
    def __mod__(self, other): return _bind(<Primitive>_op['remainder'], (self, other), {})
    def __rmod__(self, other): return _bind(<Primitive>_op['remainder'], (other, self), {})
    def __pow__(self, other, mod=None): return _bind(<Primitive>_op['pow'], (self, other), {})
    def __rpow__(self, other, mod=None): return _bind(<Primitive>_op['pow'], (other, self), {})
    def __matmul__(self, other): return _bind(<Primitive>_op['matmul'], (self, other), {})
    def __rmatmul__(self, other): return _bind(<Primitive>_op['matmul'], (other, self), {})
    def __and__(self, other): return _bind(<Primitive>_op['bitwise_and'], (self, other), {})
    def __rand__(self, other): return _bind(<Primitive>_op['bitwise_and'], (other, self), {})
    def __or__(self, other): return _bind(<Primitive>_op['bitwise_or'], (self, other), {})
    def __ror__(self, other): return _bind(<Primitive>_op['bitwise_or'], (other, self), {})
    def __xor__(self, other): return _bind(<Primitive>_op['bitwise_xor'], (self, other), {})
    def __rxor__(self, other): return _bind(<Primitive>_op['bitwise_xor'], (other, self), {})
    def __lshift__(self, other): return _bind(<Primitive>_op['bitwise_left_shift'], (self, other), {})
    def __rlshift__(self, other): return _bind(<Primitive>_op['bitwise_left_shift'], (other, self), {})
    def __rshift__(self, other): return _bind(<Primitive>_op['bitwise_right_shift'], (self, other), {})
    def __rrshift__(self, other): return _bind(<Primitive>_op['bitwise_right_shift'], (other, self), {})
    def __neg__(self): return _bind(_neg_p, (self,), {})
    def __pos__(self): return _bind(<Primitive>_op['positive'], (self,), {})
    def __abs__(self): return _bind(<Primitive>_op['abs'], (self,), {})
    def __invert__(self): return _bind(<Primitive>_op['bitwise_invert'], (self,), {})

    # -- in-place operators update functionally (the host's ``inplace``)
    def __iadd__(self, other): return _inplace(self, 'add', other)
    def __isub__(self, other): return _inplace(self, 'subtract', other)
    def __imul__(self, other): return _inplace(self, 'multiply', other)
    def __itruediv__(self, other): return _inplace(self, 'divide', other)
    def __ifloordiv__(self, other): return _inplace(self, 'floor_divide', other)
    def __imod__(self, other): return _inplace(self, 'remainder', other)
    def __ipow__(self, other): return _inplace(self, 'pow', other)
    def __imatmul__(self, other): return _inplace(self, 'matmul', other)
    def __iand__(self, other): return _inplace(self, 'bitwise_and', other)
    def __ior__(self, other): return _inplace(self, 'bitwise_or', other)
    def __ixor__(self, other): return _inplace(self, 'bitwise_xor', other)
    def __ilshift__(self, other): return _inplace(self, 'bitwise_left_shift', other)
    def __irshift__(self, other): return _inplace(self, 'bitwise_right_shift', other)

    # -- comparisons
    def __eq__(self, other): return _bind(<Primitive>_op['equal'], (self, other), {})
    def __ne__(self, other): return _bind(<Primitive>_op['not_equal'], (self, other), {})
    def __lt__(self, other): return _bind(<Primitive>_op['less'], (self, other), {})
    def __le__(self, other): return _bind(<Primitive>_op['less_equal'], (self, other), {})
    def __gt__(self, other): return _bind(<Primitive>_op['greater'], (self, other), {})
    def __ge__(self, other): return _bind(<Primitive>_op['greater_equal'], (self, other), {})

    def __hash__(self):
        return id(self)

    # -- indexing
    def __getitem__(self, key): return _host.getitem(self, key)

    def __setitem__(self, key, value):
        _host.inplace(self, _host.setitem(_alias(self), key, value))

    def __len__(self):
        shape = self.shape
        if not shape:
            raise TypeError("len() of a 0-d array")
        return shape[0]

    def __iter__(self):
        shape = self.shape
        if not shape:
            # raised by iter() itself, not at the first next(): np.iterable(x) and
            # ``try: iter(x)`` tell a 0-d array from a sequence that way
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(shape[0]))

    # -- conversions (each subclass decides whether the value may be read)
    def __bool__(self): return bool(_concrete(self, "bool"))
    def __float__(self): return float(_host.to_scalar(self, "float"))
    def __int__(self): return int(_host.to_scalar(self, "int"))
    def __complex__(self): return complex(_host.to_scalar(self, "complex"))
    def __index__(self): return int(_host.to_scalar(self, "index"))
    def item(self): return _host.to_scalar(self, "item")
    def tolist(self): return _concrete(self, "tolist").tolist()

    def __array__(self, dtype=None, copy=None):
        return _host.to_numpy(self, dtype, copy)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return _host.array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return _host.array_function(func, types, args, kwargs)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        raw = _concrete(self, "__dlpack__")
        kw = {"stream": stream}
        for name, value in (("max_version", max_version), ("dl_device", dl_device),
                            ("copy", copy)):
            if value is not None:   # older producers do not know these keywords
                kw[name] = value
        return raw.__dlpack__(**kw)

    def __dlpack_device__(self):
        return _concrete(self, "__dlpack_device__").__dlpack_device__()

    def __repr__(self):
        return _host.repr(self)

    def __str__(self):
        return _host.repr(self)

    def __format__(self, spec):
        if spec:
            raw = _concrete(self, "format")
            item = getattr(raw, "item", None)   # (array-api-strict has none: through NumPy)
            return format(item() if item is not None else
                          backend_of(raw).to_numpy(raw).item(), spec)
        return _host.repr(self)

    def __getattr__(self, name):
        # Every other method (sum, mean, reshape, relu, torch-style conveniences...) lives in
        # arrayad._ops._methods (the host's ``methods``), so that the list is written once for
        # tensors and tracers.
        m = _host.methods.get(name)
        if m is None:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        return m.__get__(self, type(self))

    def __dir__(self):
        return sorted(set(object.__dir__(self)) | set(_host.methods))


cdef class Tensor(Array):
    """Tensor(value, requires_grad=False)

    arrayad's eager array: a backend array plus what the eager tape needs, as torch.Tensor.

    It wraps an array of any backend (NumPy, torch, CuPy, array-api-strict, Dask, JAX) and carries
    the array API's methods and operators plus the torch ones a torch.func user reaches for
    (``sum(0)``, ``t()``, ``item()``, ``numpy()``, ``detach()``...). With ``requires_grad``, the
    operations on it are recorded, ``.backward()`` accumulates gradients into the ``.grad`` of the
    leaves, and ``.grad_fn`` names the operation that made a value. ``ad.tensor(data)`` is the usual
    constructor. The transforms of ``arrayad.func`` accept Tensors too (Tensor in, Tensor out).

    Parameters
    ----------
    value : array_like
        The data: any supported backend's array, or nested Python lists of numbers (NumPy).
    requires_grad : bool, optional
        Record the operations on this tensor (it is then a leaf whose ``.grad`` is filled by
        ``backward``). Only floating-point and complex tensors may require grad.

    Raises
    ------
    TypeError
        If ``value`` is not an array of a supported backend (nor data NumPy can convert).
    RuntimeError
        If ``requires_grad`` is set on an integer or boolean tensor; from its methods:
        ``backward()`` on a non-scalar without ``gradient``, ``numpy()`` on a tensor that
        requires grad (detach it first), an in-place update of a leaf that requires grad (do it
        under ``no_grad``).

    Examples
    --------
    >>> x = ad.tensor([1.0, 2.0, 3.0], requires_grad=True)
    >>> y = (x ** 2).sum()
    >>> y
    tensor(14., grad_fn=<SumBackward>)
    >>> y.backward()
    >>> x.grad                     # d/dx sum(x ** 2) = 2 x
    tensor([2., 4., 6.])
    >>> x.is_leaf, (x * 2).is_leaf
    (True, False)
    >>> x.detach().numpy()
    array([1., 2., 3.])
    """

    def __init__(self, value, requires_grad=False):
        if isinstance(value, Tensor):
            value = (<Tensor>value)._value
        elif isinstance(value, Array):
            raise TypeError(f"Tensor: cannot wrap a {type(value).__name__} (a value inside a "
                            f"transform); use it directly")
        elif value is None:
            raise TypeError("Tensor: expected an array or array-like data, got None")
        elif _is_scalar(value) or isinstance(value, (list, tuple)):
            value = _host.resolve_backend(None).xp.asarray(value)
        else:
            backend_of(value)   # (raises a clear TypeError for what no backend holds)
        self._value = fix_scalar(value)
        self._node = None
        self._idx = 0
        self._grad = None
        if requires_grad:
            self.requires_grad = True

    @property
    def shape(self):
        return tuple(self._value.shape)

    @property
    def dtype(self):
        return dtype_of(self._value)

    @property
    def data(self):
        """A tensor without history that shares this one's data (as ``detach()``)."""
        return _host.detach(self)

    @data.setter
    def data(self, value):
        # (torch swaps the data under the tensor; a node that saved it then refuses the backward
        # pass, rather than reading the new data: NOTE [in-place after use])
        if isinstance(value, Tensor):
            value = (<Tensor>value)._value
        elif isinstance(value, Array):
            raise TypeError(f"Tensor.data: cannot assign a {type(value).__name__} (a value inside "
                            f"a transform); assign a Tensor or a backend array")
        else:
            backend_of(value)
        self._value = fix_scalar(value)
        _stamp_update(self)

    @property
    def requires_grad(self):
        return self._node is not None

    @requires_grad.setter
    def requires_grad(self, value):
        if not value:
            if self._node is not None and self._node.leaf is None:
                raise RuntimeError(
                    "you can only change requires_grad flags of leaf variables. If you want to use "
                    "a computed variable in a subgraph that doesn't require differentiation use "
                    "var_no_grad = var.detach().")
            self._node = None
            return
        if self._node is not None:
            return
        _host.check_requires_grad(self)
        self._node = leaf_node(self)

    @property
    def grad(self):
        return self._grad

    @grad.setter
    def grad(self, value):
        if value is not None:
            if not isinstance(value, Tensor):
                try:
                    backend_of(value)
                except TypeError:
                    raise TypeError(f"assigned grad expected to be a Tensor (or an array of the "
                                    f"tensor's backend) or None but got grad of type "
                                    f"{type(value).__name__}") from None
                value = Tensor(value)
            if value.shape != self.shape:
                raise RuntimeError(
                    f"assigned grad has data of a different size: the tensor has shape "
                    f"{self.shape}, the grad {value.shape}. Assign a gradient of the tensor's "
                    f"shape.")
            if value.dtype is not self.dtype:
                raise RuntimeError(
                    f"assigned grad has data of a different type: the tensor is {self.dtype}, "
                    f"the grad {value.dtype}. Convert it first (g.astype(x.dtype)).")
            mine = backend_of(self._value)
            theirs = backend_of((<Tensor>value)._value)
            if theirs is not mine:
                raise RuntimeError(
                    f"assigned grad is a {theirs.name} array for a {mine.name} tensor. Convert "
                    f"it to the tensor's backend first.")
        self._grad = value

    @property
    def grad_fn(self):
        if self._node is None or self._node.leaf is not None:
            return None
        return self._node

    @property
    def is_leaf(self):
        return self._node is None or self._node.leaf is not None

    def detach(self):
        """A tensor without history that shares this one's data: an in-place
        update of either is seen by the other, as in torch.

        Examples
        --------
        >>> w = ad.tensor([1.0, 2.0], requires_grad=True)
        >>> d = (w * 3).detach()
        >>> d.requires_grad, d.grad_fn is None
        (False, True)
        """
        return _host.detach(self)

    # -- copies and pickles (torch's semantics: a copy of a leaf is a new leaf, requires_grad
    #    kept; a tensor in the middle of a graph must be detached first)
    def _check_copyable(self, what):
        if self._node is not None and self._node.leaf is None:
            raise RuntimeError(
                f"Only Tensors created explicitly by the user (graph leaves) support the {what} "
                f"protocol: this one was computed (grad_fn=<{self._node.name()}>). "
                f"{what} t.detach() instead, and call requires_grad_() on the copy if needed.")

    def __copy__(self):
        self._check_copyable("copy")
        return _rebuild_tensor(self._value, self._node is not None)

    def __deepcopy__(self, memo):
        self._check_copyable("deepcopy")
        out = _rebuild_tensor(backend_of(self._value).xp.asarray(self._value, copy=True),
                              self._node is not None)
        if self._grad is not None:
            out._grad = self._grad.__deepcopy__(memo)
        memo[id(self)] = out
        return out

    def __reduce__(self):
        self._check_copyable("pickle")
        return (_rebuild_tensor, (self._value, self._node is not None))

    def requires_grad_(self, requires_grad=True):
        """Make this leaf tensor record its operations (or stop), in place; returns ``self``.

        Raises ``RuntimeError`` on a tensor computed from others (only leaves can change it) and
        inside an ``arrayad.func`` transform.

        Examples
        --------
        >>> x = ad.tensor([1.0, 2.0]).requires_grad_()
        >>> (x * x).sum().backward()
        >>> x.grad
        tensor([2., 4.])
        """
        _host.check_not_transformed("requires_grad_")
        self.requires_grad = requires_grad
        return self

    def retain_grad(self):
        """Keep the gradient of this non-leaf tensor in its ``.grad`` at the next ``backward()``
        (leaves keep theirs anyway), as in torch.

        Raises ``RuntimeError`` on a tensor that does not require grad.

        Examples
        --------
        >>> x = ad.tensor([1.0, 2.0], requires_grad=True)
        >>> y = x * 3
        >>> y.retain_grad()
        >>> (y * y).sum().backward()
        >>> y.grad, x.grad
        (tensor([ 6., 12.]), tensor([18., 36.]))
        """
        if self._node is None:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self._node.leaf is not None:
            return
        if self._node.retained is None:
            self._node.retained = []
        self._node.retained.append((self._idx, weakref.ref(self)))

    @property
    def retains_grad(self):
        if self._node is None or self._node.retained is None:
            return False
        return any(ref() is self for _, ref in self._node.retained)

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Accumulate the gradient of this tensor into the ``.grad`` of the leaves it was
        computed from, as ``torch.Tensor.backward``.

        ``gradient`` is the cotangent (needed when the tensor is not a scalar); ``retain_graph``
        keeps the graph for a second call; ``create_graph`` records the backward pass itself, so
        that the gradients can be differentiated again; ``inputs`` limits the accumulation to
        those leaves. Raises ``RuntimeError``, with torch's messages, on a non-scalar without
        ``gradient``, on a tensor that does not require grad, on a second call through a freed
        graph, and inside an ``arrayad.func`` transform (use ``grad`` or ``vjp`` there).

        Examples
        --------
        >>> x = ad.tensor([1.0, 2.0, 3.0], requires_grad=True)
        >>> (x ** 2).sum().backward()
        >>> x.grad
        tensor([2., 4., 6.])
        >>> y = ad.tensor([1.0, 2.0], requires_grad=True)
        >>> (y * 10).backward(gradient=ad.tensor([1.0, 0.5]))
        >>> y.grad
        tensor([10.,  5.])
        """
        _host.backward((self,), (gradient,) if gradient is not None else None,
                      retain_graph, create_graph, inputs)

    def _replace(self, Tensor other not None):
        """Rebind this tensor to ``other``'s value and history (the functional in-place update)."""
        self._value = other._value
        self._node = other._node
        self._idx = other._idx


def _rebuild_tensor(value, requires_grad):
    """A leaf Tensor of ``value`` (what copies and pickles of a Tensor make)."""
    t = Tensor(value)
    if requires_grad:
        t.requires_grad = True
    return t


cdef class Tracer(Array):
    """A value inside a transform: ``value`` one level down, ``_interp`` the transform (NOTE
    [interpreters])."""

    def __init__(self, Interpreter interp not None, value):
        # (the core makes its own tracers without this; a transform written in Python uses it)
        self._interp = interp
        self.value = value

    @property
    def interpreter(self):
        return self._interp

    @property
    def _level(self):
        return self._interp.level

    @property
    def shape(self):
        return shape_of(self.value)

    @property
    def dtype(self):
        return dtype_of(self.value)

    def backward(self, *args, **kwargs):
        raise RuntimeError(
            "backward() called inside an arrayad.func transform. This is not supported: use "
            "arrayad.func.grad or arrayad.func.vjp instead, or call backward() outside of the "
            "transform.")

    def requires_grad_(self, requires_grad=True):
        _host.check_not_transformed("requires_grad_")

    def detach(self):
        return _host.detach(self)

    def __copy__(self):
        raise TypeError(f"arrayad: {type(self).__name__} does not say how to copy itself")

    # -- what each transform decides for its values (NOTE [interpreters]): a tracer class
    # overrides these, the array protocols above and the package call them

    # Whether this level differentiates its values: "reverse" (grad, vjp), "forward" (jvp), or
    # None (vmap, jit: jit's program may be differentiated once it is staged).
    derivative = None
    # Whether this level adds a batch axis to its values (vmap).
    batches = False

    def _is_constant(self):
        """Whether this level adds nothing to the value below: no derivative, no batch axis
        (an array made inside the transform from no input). A staged value never is."""
        return False

    def _concrete_value(self, str what):
        """The value one level down for the Python conversion ``what`` (``float(x)``,
        ``bool(x)``, ``np.asarray(x)``...), or the error saying why this transform cannot
        give it."""
        return self.value

    def _describe(self):
        """What ``repr(x)`` and ``str(x)`` show."""
        return f"{type(self).__name__}(level={self._interp.level}, value={self.value!r})"

    def _inplace_error(self, target):
        """The error for an in-place update that would make ``target`` (of another transform, or
        of none) hold this tracer; None: the generic one."""
        return None

    def __deepcopy__(self, memo):
        # a tracer of the same transform: values are never written into, so the copy is
        # independent of the original (an in-place update of one rebinds only that one)
        return self.__copy__()

    def __reduce__(self):
        raise TypeError(
            f"arrayad: cannot pickle a {type(self).__name__}: it is a value inside a running "
            f"transform. Pickle the function's inputs or results instead.")
