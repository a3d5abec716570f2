# cython: language_level=3
"""arrayad's hot core: the types every operation passes through, and no derivative rule.

What lives here:
  * the state a caller sets (NOTE [thread state]): grad mode and the open transforms, per context
    (``contextvars``); the random generators and the shared-result registry, per thread
    (``ThreadState``);
  * ``Primitive``, a named bundle of rules (the rules themselves are Python, in ``arrayad._ops``);
  * the interpreters, one class per transform (``GradInterpreter``, ``JvpInterpreter``,
    ``BatchInterpreter``) and ``bind``, which hands a call to the innermost one among its arguments;
  * the tracers of those transforms and the eager ``Tensor``, with the tape ``Node`` and the
    backward engine;
  * the rule shapes that most elementwise rules share (``UnaryVJP``...), in C because they run once
    per node of every pass.

NOTE [interpreters]
-------------------
Each transform is an ``Interpreter`` subclass; one instance is one call of the transform (one
level). Its protocol, in the manner of Autodidax's ``Trace``:

* ``with interp:`` puts it on the calling thread's stack (its ``level`` is its depth there) and,
  on exit, takes it off and marks it dead;
* ``interp.process(prim, args, params)`` applies a primitive to arguments of which at least one is
  a tracer of ``interp``: it unwraps its own tracers one level down (``tracer.value``), calls
  ``bind`` on the lower values (so outer transforms see the operation too), and wraps the result;
* ``interp.lift(value)`` makes a value of a lower level a constant tracer of this one, which is
  what in-place updates of arrays created inside a transform need.

Every tracer has ``_interp`` (its interpreter) and ``value`` (the value one level down: an outer
tracer, an eager ``Tensor`` or a raw backend array); ``raw_value`` goes all the way down. ``bind``
picks the argument whose interpreter has the highest level; everything else is a constant to it,
which is what prevents perturbation confusion (``grad(lambda x: grad(lambda y: x * y)(x))``). A
tracer whose interpreter is dead escaped its transform and raises instead of computing garbage.
Interpreters are compared by identity, so a later transform at the same depth is never confused
with a dead one. The eager tape is the interpreter below all of them (``_process_eager``): it runs
when the arguments hold ``Tensor``s and no tracer.

A new transform (a staging tracer for ``jit``, say) is one more pair of classes: a ``Tracer``
subclass with ``value`` and the properties ``shape``/``dtype``, and an ``Interpreter`` subclass
overriding ``process`` (and ``lift`` if constants must become tracers); its Python entry point
opens it with ``with`` and unwraps the outputs. ``bind`` and the other interpreters need no
change: ``process`` is a virtual (cpdef) method, so the new class may even be written in Python.

NOTE [everything inside is arrayad]
-----------------------------------
Inside a transformed function every value is an arrayad value of the transform's inputs' backend,
so that library code written against the array API sees one namespace and operators never hand a
tracer to a backend that refuses it (array-api-strict, torch):

* an operation on a tracer of a level returns a tracer of that level, also when it is not
  differentiable (``x > 0``, ``floor``, ``argsort``) or computes on constants of the level only:
  a *constant* of the level (a ``GradTracer`` without a node, a ``DualTracer`` without a tangent,
  a ``BatchTracer`` with ``bdim`` ``UNBATCHED``);
* arrays created inside without an array argument (``zeros``, ``arange``, ``asarray([...])``, the
  random functions) are made in the backend and on the device of the innermost transform's inputs
  (its ``frame``: an input it was given, held only while it is open) and lifted to constants of
  that level, as are the non-differentiated arguments; so writing a traced value into them
  (``out = zeros(n); out[i] = x``) updates them functionally, under vmap too (an unbatched value of
  the level becomes batched when a batched value is written into it).

NOTE [thread state]
-------------------
What a caller can set and what changes what an operation computes has one of two owners.

*Per context* (``contextvars``): the modes a ``with`` block sets. Grad mode (``_grad_mode``, a
``ContextVar`` of True/False), the open transforms (``_transforms``: a tuple, innermost last; a
transform's ``level`` is its depth there), and so forward_ad's dual levels, which are open
transforms; the default backend of new arrays is a ``ContextVar`` of ``arrayad.backends``. An
asyncio task (or ``contextvars.copy_context().run``) starts with the modes of the context it was
made in, and its own ``with`` blocks (``no_grad``, ``backend``, ``dual_level``), held across an
``await``, never change what another task computes. A new thread starts with an empty context,
so with the defaults. A ``with`` block restores with ``ContextVar.reset``; the core's own
switches (a transform turning grad mode on, ``backward`` turning it off) set the previous value
back on exit, and skip the ``set`` when the value would not change.

*Per thread* (``ThreadState``, owned by the thread's dictionary, ``PyThreadState_GetDict``, and
dead with the thread): what is state rather than a mode. The random generators and the seed they
are made from advance with every draw: tasks that take turns on one thread draw from one stream
in the order they run, as they would from one torch generator (copying a generator into each
task would hand two tasks the same numbers). The shared-result registry and the consumable
cotangent are caches of one backward pass, which never spans an ``await``.

Speed (chosen by measurement). Grad mode is read once per recorded operation, the stack once
per transform call and by the creation functions. ``PyContextVar_Get`` answers from the
variable's one-entry cache while the thread and its context are those of the last read or set
(a few nanoseconds, as the old thread-local pointer); otherwise it looks in the context's map,
and a variable at its default is never cached. The modes therefore hold no value while at their
defaults (``set`` is skipped when nothing changes; a transform's token resets the stack to "no
value"): NumPy reads two context variables of its own on every call and never caches them (they
sit at their defaults), and with an empty map, or no context at all, its reads and ours stop at
once, while each value we kept set would make every NumPy call walk the map. Keeping the
defaults as values to make our reads hits cost more than it saved: +3% instructions on the
16-element grad (callgrind). As built, per call against the thread-local design: grad of the
16-element chain +0.0%, eager backward -0.4%, hessian +1.6% instructions (a push and a reset of
the stack per transform level, about 0.2 us). A ``set`` builds a new map, so it happens per
``with`` block or transform, never per operation. On free-threaded CPython there is no cache:
each read is a map lookup (tens of nanoseconds).
The ``ThreadState`` pointer stays for the per-thread state: a C thread-local pointer checked
against the thread state's unique id.

NOTE [host interface]
---------------------
The core imports nothing from the Python package (the package imports the core). What it needs
from above (the backend resolver, the glue of the array methods: indexing, in-place updates,
conversions, printing; a few namespace functions the generic rules use) is handed to it once, by
``install_host`` with keyword arguments: the ``Host`` class below lists every name, and a missing
or unknown one is an error at import time rather than at the first call. The operator dunders bind
the primitives handed to ``install_operators``.

NOTE [eager tape]
-----------------
An eager ``Tensor`` that requires grad has a ``Node``: a leaf node (which accumulates into
``.grad``) or the node of the operation that made it. Operations on such tensors under grad mode
record a node holding the primitive, its inputs and parameters; ``backward`` walks the nodes in
topological order. Without ``create_graph`` the rules run on the raw backend arrays (cheap, nothing
recorded); with it they run on the Tensors with grad mode on, and the forward value is recomputed
from the inputs so that rules using the output (tanh, exp, sqrt...) are differentiable again.
"""

import threading
import weakref
from contextvars import ContextVar

from cpython.object cimport PyObject
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_C_CONTIGUOUS, PyBUF_FORMAT
from libc.math cimport isfinite as c_isfinite
from libc.stdint cimport uint32_t, uint64_t
from cpython.ref cimport Py_REFCNT
from cpython.number cimport PyNumber_InPlaceMultiply, PyNumber_InPlaceTrueDivide
from cpython.weakref cimport PyWeakref_NewRef
from cpython.pystate cimport PyThreadState, PyThreadState_Get, PyThreadState_GetDict
from cpython.contextvars cimport PyContextVar_Get, PyContextVar_Set, PyContextVar_Reset
from cpython.ref cimport Py_XDECREF

cdef extern from *:
    """
    #if defined(_MSC_VER)
    #define ARRAYAD_THREAD_LOCAL __declspec(thread)
    #else
    #define ARRAYAD_THREAD_LOCAL __thread
    #endif
    /* This OS thread's ThreadState (borrowed: the thread's dict owns it) and the unique id of the
       Python thread state it belongs to (a C thread may get several Python thread states over
       its life; ids are never reused, addresses may be). */
    static ARRAYAD_THREAD_LOCAL PyObject *arrayad_tls_state = NULL;
    static ARRAYAD_THREAD_LOCAL unsigned long long arrayad_tls_id = 0;
    """
    PyObject *arrayad_tls_state
    unsigned long long arrayad_tls_id
    PyObject *Py_True
    unsigned long long PyThreadState_GetID(PyThreadState *tstate)


cdef inline bint _is_scalar(object v):
    """isinstance(v, (int, float, complex, bool)) as three C flag checks: the tuple form goes
    through the generic isinstance protocol, a microsecond on the hot paths that call it."""
    return isinstance(v, float) or isinstance(v, int) or isinstance(v, complex)


# ---------------------------------------------------------------------------------------------
# The host interface (NOTE [host interface])

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

    def __init__(self, **hooks):
        fields = [n for n in dir(Host) if not n.startswith("_")]
        missing = sorted(set(fields) - set(hooks))
        unknown = sorted(set(hooks) - set(fields))
        if missing or unknown:
            raise TypeError(f"arrayad internal error: install_host: missing {missing}, "
                            f"unknown {unknown}")
        self.resolve_backend = hooks["resolve_backend"]
        self.dtype_from_backend = hooks["dtype_from_backend"]
        self.batch_fallback = hooks["batch_fallback"]
        self.zeros_like = hooks["zeros_like"]
        self.namespace = hooks["namespace"]
        self.getitem = hooks["getitem"]
        self.setitem = hooks["setitem"]
        self.inplace = hooks["inplace"]
        self.inplace_level_error = hooks["inplace_level_error"]
        self.concrete = hooks["concrete"]
        self.to_scalar = hooks["to_scalar"]
        self.to_numpy = hooks["to_numpy"]
        self.array_ufunc = hooks["array_ufunc"]
        self.array_function = hooks["array_function"]
        self.repr = hooks["repr"]
        self.device_of = hooks["device_of"]
        self.to_device = hooks["to_device"]
        self.check_requires_grad = hooks["check_requires_grad"]
        self.check_not_transformed = hooks["check_not_transformed"]
        self.backward = hooks["backward"]
        self.detach = hooks["detach"]
        self.broadcast_to = hooks["broadcast_to"]
        self.permute_dims = hooks["permute_dims"]
        self.matrix_transpose = hooks["matrix_transpose"]
        self.conj = hooks["conj"]
        self.real = hooks["real"]
        self.astype = hooks["astype"]
        self.sum = hooks["sum"]
        self.reshape = hooks["reshape"]
        self.where = hooks["where"]
        self.methods = dict(hooks["methods"])


def _not_installed(*args, **kwargs):
    raise RuntimeError("arrayad's core was used before the package handed it its host interface "
                       "(import arrayad first)")


# (every hook raises until install_host runs: the core never calls through None)
cdef Host _host = Host(**{n: ({} if n == "methods" else _not_installed)
                          for n in dir(Host) if not n.startswith("_")})


def install_host(**hooks):
    """Hand the core what it calls in the Python layer (see ``Host``); once, at import."""
    global _host
    _host = Host(**hooks)


def host():
    return _host


cdef dict _op = {}   # operator name -> the Primitive of the function of the same name
cdef Primitive _mul_p = None, _add_p = None, _div_p = None, _neg_p = None


_OPERATORS = ("add", "subtract", "multiply", "divide", "floor_divide", "remainder", "pow",
              "matmul", "negative", "positive", "abs", "bitwise_and", "bitwise_or",
              "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift", "bitwise_invert",
              "equal", "not_equal", "less", "less_equal", "greater", "greater_equal")


def install_operators(dict prims):
    """The primitives behind Python's operators (all of ``_OPERATORS``). The dunders bind them
    directly; the namespace functions of the same names are plain binds of the same primitives,
    so both spellings behave identically."""
    global _mul_p, _add_p, _div_p, _neg_p
    missing = [n for n in _OPERATORS if n not in prims and n not in _op]
    wrong = [n for n, p in prims.items() if not isinstance(p, Primitive)]
    if missing or wrong:
        raise TypeError(f"arrayad internal error: install_operators: missing {missing}, "
                        f"not primitives {wrong}")
    _op.update(prims)
    _mul_p = _op["multiply"]
    _add_p = _op["add"]
    _div_p = _op["divide"]
    _neg_p = _op["negative"]


# ---------------------------------------------------------------------------------------------
# Backends of raw arrays

cdef dict _backend_of_type = {}   # type of a raw array -> backend adapter (has .xp, .name)
cdef dict _scalar_fix = {}        # e.g. numpy.float64 -> numpy.asarray (0-d results stay arrays)


def register_backend_type(t, backend, scalar_fix=None):
    _backend_of_type[t] = backend
    if scalar_fix is not None:
        _scalar_fix[t] = scalar_fix


cpdef object backend_of(object raw):
    """The backend adapter of one raw array (not a Tensor or tracer)."""
    cdef type t = type(raw)
    b = _backend_of_type.get(t)
    if b is None:
        b = _host.resolve_backend(raw)
        _backend_of_type[t] = b
    return b


cdef object _backend_of_args(tuple args, bint* numpy_scalars, str api="arrayad"):
    """The one backend of the arrays among ``args``. A NumPy scalar (np.float64) or 0-d NumPy
    array is a Python number to the other backends, as torch takes it: ``numpy_scalars`` says
    that there are some to convert (``_call_impl``). Larger NumPy arrays meeting another
    backend's are an error naming both."""
    cdef object found = None
    cdef object numpy_b = None
    cdef object b
    cdef bint scalars = False
    for a in args:
        b = _backend_of_type.get(type(a))
        if b is None:
            if a is None or _is_scalar(a) or isinstance(a, tuple) or isinstance(a, list):
                continue
            b = backend_of(a)
        if b.name == "numpy" and (type(a) in _scalar_fix or a.ndim == 0):
            # (a 0-d NumPy array too: library code makes constants with np.asarray(0.5) or
            # xp.asarray(np.float64(...)) and means a number)
            scalars = True
            numpy_b = b
            continue
        if found is None:
            found = b
        elif b is not found:
            # (Dask accepts NumPy arrays as operands, wrapping them as one chunk: follow its rule)
            if found.name == "dask" and b.name == "numpy":
                continue
            if found.name == "numpy" and b.name == "dask":
                found = b
                continue
            raise TypeError(
                f"{api}: cannot mix arrays of two backends in one operation: "
                f"{found.name} and {b.name}. Convert one side first, e.g. with "
                f"arrayad.asarray(x, device=...) or the backend's own asarray."
            )
    if scalars:
        if found is None:   # (only NumPy scalars, 0-d NumPy arrays and Python numbers: NumPy)
            return numpy_b
        numpy_scalars[0] = found.name != "numpy"
    return found


def common_backend(tuple raws, str api):
    """The one backend of the raw arrays ``raws`` by the rule every operation follows (NumPy
    with Dask: Dask), or ``api``'s error for mixing two: for a function whose inputs no single
    primitive sees together (meshgrid)."""
    cdef bint scalars = False
    return _backend_of_args(raws, &scalars, api)


cdef inline bint _numpy_number(object a):
    """A NumPy scalar or a 0-d NumPy array: a Python number to the other backends."""
    if type(a) in _scalar_fix:
        return True
    b = _backend_of_type.get(type(a))
    return b is not None and b.name == "numpy" and a.ndim == 0


cpdef object fix_scalar(object out):
    f = _scalar_fix.get(type(out))
    if f is not None:
        return f(out)
    return out


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
# Per-thread and per-context state (NOTE [thread state])

cdef class ThreadState:
    """The per-thread state of one thread; ``thread_state()`` returns the calling thread's.
    (Grad mode and the open transforms are per context: ``is_grad_enabled``, ``interpreters``.)"""

    def __init__(self):
        self.rngs = {}                # backend name -> generator, made on first use
        self.seed = None              # what new generators are seeded with (None: not chosen)
        self.results = {}
        self.results_sweep_at = 64
        self.consumable = None
        self.consumed = 0
        self.strong_products = 0      # NOTE [strong zeros]: products made strongly (tests)
        self.staging = None           # NOTE [staging everything]: the jit that stages constants
        self.zeros = {}               # NOTE [strong zeros]: id of a value -> its _Entry


cdef object _STATE_KEY = "arrayad.ThreadState"


cdef ThreadState _new_thread_state():
    global arrayad_tls_state, arrayad_tls_id
    cdef dict d = <dict>PyThreadState_GetDict()
    st = d.get(_STATE_KEY)
    if st is None:
        st = ThreadState()
        d[_STATE_KEY] = st   # the thread's dict owns it: it dies with the thread
    arrayad_tls_state = <PyObject*>st
    arrayad_tls_id = PyThreadState_GetID(PyThreadState_Get())
    return <ThreadState>st


cdef inline ThreadState _state():
    if arrayad_tls_state is not NULL and arrayad_tls_id == PyThreadState_GetID(PyThreadState_Get()):
        return <ThreadState>arrayad_tls_state
    return _new_thread_state()


def thread_state():
    """The calling thread's ``ThreadState``."""
    return _state()


# The per-context modes. ``grad_mode`` is public for arrayad.autograd's context managers, which
# set and reset it with tokens; everything else goes through the functions below. At their
# defaults they hold no value in the context (NOTE [thread state]: why).
cdef object _grad_mode = ContextVar("arrayad.grad_enabled", default=True)
cdef object _transforms = ContextVar("arrayad.transforms", default=())
grad_mode = _grad_mode


cdef inline tuple _open_transforms():
    cdef PyObject *v = NULL
    PyContextVar_Get(_transforms, NULL, &v)
    value = <tuple>v
    Py_XDECREF(v)
    return value


cdef inline bint _grad_enabled() except -1:
    cdef PyObject *v = NULL
    PyContextVar_Get(_grad_mode, NULL, &v)
    cdef bint on = v == Py_True
    Py_XDECREF(v)
    return on


cdef inline void _set_grad_enabled(bint mode) except *:
    if _grad_enabled() != mode:   # (a set builds a new context map: skip it when nothing changes)
        PyContextVar_Set(_grad_mode, True if mode else False)


# -- grad mode

def is_grad_enabled():
    """Whether operations on tensors that require grad are recorded (in this thread or task).

    Returns
    -------
    bool
        True unless a ``no_grad`` block or ``set_grad_enabled(False)`` is in force in the
        calling context (the thread, or the asyncio task).

    Raises
    ------
    Exception
        Nothing of its own.

    Examples
    --------
    >>> ad.is_grad_enabled()
    True
    >>> with ad.no_grad():
    ...     ad.is_grad_enabled()
    False
    """
    return _grad_enabled()


def set_grad_enabled_flag(bint mode):
    """Set the calling context's grad mode, return the previous one (the context managers live
    in arrayad.autograd)."""
    cdef bint prev = _grad_enabled()
    _set_grad_enabled(mode)
    return prev


# -- the interpreter stack

def stack_depth():
    return len(_open_transforms())


def interpreters():
    """The calling context's open transforms, outermost first."""
    return _open_transforms()


def in_transform():
    """Whether a transform of ``arrayad.func`` is open in this context (forward_ad's dual levels
    do not count: the eager tape works inside them, as in torch)."""
    for f in _open_transforms():
        if not (isinstance(f, JvpInterpreter) and (<JvpInterpreter>f).dual_level):
            return True
    return False


def escaped_error(Interpreter interp not None):
    return RuntimeError(
        f"arrayad: a tracer of a {interp.name} transform (level {interp.level}) was used after "
        f"that transform returned. It escaped (kept in a global, a closure or a side channel); "
        f"return it from the transformed function instead."
    )


# ---------------------------------------------------------------------------------------------
# Primitives

cdef class Primitive:
    """A named operation with its rules, all filled in from ``arrayad._ops``.

    impl(xp, *raw, **params) computes on raw backend arrays (or, when ``xp_name`` is set, the
    backend's function of that name is called directly, ``xp.<xp_name>(*raw, **params)``).
    vjp: a tuple with one rule per positional argument, ``rule(g, ans, *args, **params)`` giving
    that argument's cotangent (called only for arguments that need one; None in the tuple: the
    argument gets no cotangent), or, for variadic primitives, one function returning a tuple of
    cotangents (None = zero).
    jvp(tangents, ans, *args, **params) -> output tangent (None = zero); tangents has None for zero.
    batch(args, dims, **params) -> (out, out_dim); dims has None for unbatched args.

    ``vjp_reads``: which saved values the VJP rule of each argument reads, one bit mask per
    argument (bit 0: the output, bit k: argument k-1); None means all. See NOTE [saved values].

    ``reuses``: the primitive whose result on the same input this one's VJP reads (sin: cos), so
    that the backward pass can reuse a result the forward pass computed. See NOTE [shared results].

    ``elementwise``: a broadcasting elementwise function. vmap then handles the common case (all
    batch dims line up already) here, without calling ``batch``, which is left the general case.
    """

    def __init__(self, str name, impl=None, *, xp_name=None, multiple_results=False,
                 differentiable=True):
        self.name = name
        self.impl = impl
        self.xp_name = xp_name
        self.vjp = None
        self.jvp = None
        self.batch = None
        self.multiple_results = multiple_results
        self.differentiable = differentiable
        self._direct = {}
        self.vjp_reads = None
        self.reuses = None
        self.elementwise = False

    def __repr__(self):
        return f"<Primitive {self.name}>"

    def __reduce__(self):
        return (_primitive_by_name, (self.name,))


_PRIMITIVES = {}


def _primitive_by_name(name):
    return _PRIMITIVES[name]


def register_primitive(Primitive p):
    _PRIMITIVES[p.name] = p
    return p


cdef inline object _call_impl(Primitive prim, tuple args, dict params):
    """Run a primitive on raw arrays (no tracer, no Tensor among ``args``)."""
    cdef bint numpy_scalars = False
    cdef object b = _backend_of_args(args, &numpy_scalars)
    cdef object fn
    if numpy_scalars:
        args = tuple([a.item() if _numpy_number(a) else a for a in args])
    if b is None:
        # Only Python scalars: the default backend's namespace function decides.
        for a in args:
            if a is not None:
                break
        else:
            raise TypeError(f"arrayad: {prim.name} expects an array, got None")
        b = _host.resolve_backend(None)
        if prim.xp_name is not None and b.name == "numpy":
            return fix_scalar(getattr(b.xp, prim.xp_name)(*args, **params))
        # (other namespaces take arrays only: torch.sin(1.0) raises)
        args = tuple([b.xp.asarray(a) if _is_scalar(a) else a for a in args])
    if prim.xp_name is not None:
        fn = prim._direct.get(b)
        if fn is None:
            # an adapter may offer a faster spelling (NumPy: the operator instead of the ufunc)
            fn = getattr(b, "fast", {}).get(prim.xp_name) or getattr(b.xp, prim.xp_name)
            prim._direct[b] = fn
        out = fn(*args, **params) if params else fn(*args)
    else:
        fn = prim._direct.get(b)
        if fn is None:
            # (an adapter's faster spelling of a primitive by name, e.g. NumPy's sum; else False)
            fn = getattr(b, "fast", {}).get(prim.name) or False
            prim._direct[b] = fn
        if fn is False:
            out = prim.impl(b.xp, *args, **params) if params else prim.impl(b.xp, *args)
        else:
            out = fn(*args, **params) if params else fn(*args)
    if prim.multiple_results:
        return tuple([fix_scalar(o) for o in out])
    f = _scalar_fix.get(type(out))
    if f is not None:
        return f(out)
    return out


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


# ---------------------------------------------------------------------------------------------
# Saved values
#
# NOTE [saved values]
# -------------------
# A node of a transform's tape keeps what its VJP rule reads, not every input: exp keeps its
# output, sin its input, add nothing, ``tanh(s) * 2`` keeps neither ``tanh(s)`` (the tanh node
# keeps it) nor 2... An input no rule reads is replaced by a ``Meta`` that keeps its shape and
# dtype (rules still sum broadcast dimensions away and check for complex values), and an output
# no rule reads by None. This is what bounds the peak memory of ``grad`` by the values the
# backward pass really needs. Eager nodes keep everything: ``backward(create_graph=True)``
# recomputes their outputs from all the inputs; so do nodes of ``linearize``, which replays the
# JVP rules (``GradInterpreter.keep_saved``).

cdef class Meta:
    """The shape and arrayad dtype of a value a node did not keep."""

    def __repr__(self):
        return f"<Meta shape={self.shape} dtype={self.dtype}>"

    @property
    def ndim(self):
        return len(self.shape)


cdef object _meta(object v):
    if v is None or _is_scalar(v):
        return v
    cdef Meta m = Meta.__new__(Meta)
    m.shape = shape_of(v)
    m.dtype = dtype_of(v)
    return m


cdef long _reads_mask(tuple reads, object edges):
    """What the VJP rules of the arguments with an edge read, as one ``vjp_reads`` mask (bit 0:
    the output, bit k: argument k-1); -1 (everything) where an argument has no declaration."""
    cdef long mask = 0
    cdef Py_ssize_t i, n = len(reads)
    for i in range(len(edges)):
        if edges[i] is not None:
            if i >= n:
                return -1
            mask |= <long>reads[i]
    return mask


cdef tuple _saved_inputs(tuple reads, tuple vals, list edges, object out):
    """(inputs, output) a node keeps for the rules of the arguments with an edge."""
    cdef long mask = _reads_mask(reads, edges)
    cdef Py_ssize_t i
    if mask == -1:
        return vals, out
    cdef list kept = list(vals)
    for i in range(len(vals)):
        if not (mask >> (i + 1)) & 1:
            kept[i] = _meta(vals[i])
    return tuple(kept), (out if mask & 1 else None)


# NOTE [shared results]
# ---------------------
# Some derivatives are other primitives of the same input: d sin(x) = cos(x), d cos(x) = -sin(x)
# (sinh/cosh alike). Code that computes both (rotations, Fourier features, sin(x) * cos(x)) would
# pay each transcendental pass twice in the backward pass. So the recorded results of primitives
# with ``reuses`` set are registered, weakly, under (primitive, input); when the partner
# (cos for sin) is recorded on the same input, each of the two nodes keeps the other's result
# (``Node.partner_result``) until its own VJP has run, and the rule asks ``forward_result``,
# which finds it. Nothing is kept alive that no node needs; a result that is gone is recomputed.
# Only rules ask, and rules never write into their operands, so handing out the same object
# twice is safe. The registry (``ThreadState.results``: (primitive, id(input)) -> weak references
# to (input, result, node)) is the recording thread's; a node released by another thread leaves
# its entries to that thread's next sweep.


cdef tuple _live_entry(dict results, object prim, object x):
    """The registry entry of ``prim`` applied to this very ``x``, or None (an entry whose input
    died may sit under the same id as a new object)."""
    entry = results.get((prim, id(x)))
    if entry is not None and (<tuple>entry)[0]() is x:
        return <tuple>entry
    return None


cdef void _share_result(Primitive prim, object x, object out, Node node) except *:
    cdef ThreadState st = _state()
    cdef dict results = st.results
    try:
        entry = (PyWeakref_NewRef(x, None), PyWeakref_NewRef(out, None),
                 PyWeakref_NewRef(node, None))
    except TypeError:   # a value that cannot be weakly referenced: nothing to share
        return
    partner = _live_entry(results, prim.reuses, x)
    if partner is not None:
        partner_out = partner[1]()
        partner_node = partner[2]()
        if partner_out is not None and partner_node is not None:
            node.partner_result = partner_out
            if ((<Node>partner_node).prim is prim.reuses and isinstance(prim.reuses, Primitive)
                    and (<Primitive>prim.reuses).reuses is prim):
                (<Node>partner_node).partner_result = out
    if len(results) >= st.results_sweep_at:   # drop the entries whose values have died
        for k in [k for k, e in results.items() if e[0]() is None or e[1]() is None]:
            del results[k]
        # (a big graph may hold many live entries: sweep again only when it has doubled)
        st.results_sweep_at = max(64, 2 * len(results))
    results[(prim, id(x))] = entry


cdef void _forget_result(Node node) except *:
    """Registry entries a released node no longer needs (NOTE [shared results]): its partner's
    result, which its rule has read, and its own once the partner's node has run too (an entry
    would otherwise only wait for the next sweep)."""
    if not node.inputs:
        return
    x = node.inputs[0]
    if isinstance(x, Tensor):
        x = (<Tensor>x)._value
    cdef Primitive prim = <Primitive>node.prim
    cdef dict results = _state().results
    partner = _live_entry(results, prim.reuses, x)
    partner_node = None
    if partner is not None:
        partner_node = partner[2]()
        del results[(prim.reuses, id(x))]
    own = _live_entry(results, prim, x)
    if (own is not None and own[2]() is node
            and (partner_node is None or (<Node>partner_node).released)):
        del results[(prim, id(x))]


def shared_result_count():
    """How many entries this thread's registry holds (tests check that it stays bounded)."""
    return len(_state().results)


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
# The tape: nodes and the backward engine

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
        if type(self.prim) is Primitive and (<Primitive>self.prim).reuses is not None:
            _forget_result(self)
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


cdef inline Node _new_node(object prim, tuple inputs, dict params, object ans, tuple edges,
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


cdef unsigned long _epoch = 0   # one per topological sort: a node marked with it is seen


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


cdef void _check_not_updated(Node node) except *:
    """Raise if an array the node saved, and whose value its VJP reads, was updated in place after
    the node was made (a rule that reads only the shape - getitem, sum - does not mind)."""
    if node.inputs is None:
        return
    cdef long mask = -1
    cdef Py_ssize_t i
    cdef tuple reads = (<Primitive>node.prim).vjp_reads if isinstance(node.prim, Primitive) \
        else None
    if reads is not None and node._edges is not None:
        mask = _reads_mask(reads, node._edges)
    for i in range(len(node.inputs)):
        a = node.inputs[i]
        if not (mask >> (i + 1)) & 1:
            continue
        if isinstance(a, Array) and (<Array>a)._updated_at > node._made_at:
            raise RuntimeError(
                f"one of the variables needed for gradient computation has been modified by an "
                f"inplace operation: an input of {node.name()} of shape {tuple(a.shape)} was "
                f"updated in place after {node.name()} saved it. Update a copy instead "
                f"(y = y + v, or y = y.clone() before the update), or compute the update after "
                f"the backward pass.")


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


cdef list _topo_order(list roots):
    """Nodes reachable from ``roots``, every node before the nodes it depends on. (A depth-first
    search that keeps its state on the nodes: no set of seen nodes, no (node, index) tuples.)"""
    global _epoch
    _epoch += 1
    cdef unsigned long mark = _epoch
    cdef list order = []
    cdef list stack = []
    cdef Node n, p
    cdef tuple edges
    for r in roots:
        n = <Node>r
        if n._mark == mark:
            continue
        n._mark = mark
        n._next = 0
        stack.append(n)
        while stack:
            n = <Node>stack[-1]
            edges = n._edges
            if edges is not None and n._next < len(edges):
                e = edges[n._next]
                n._next += 1
                if e is not None:
                    p = <Node>(<tuple>e)[0]
                    if p._mark != mark:
                        p._mark = mark
                        p._next = 0
                        stack.append(p)
            else:
                stack.pop()
                order.append(n)
    order.reverse()
    return order


def topological_order(list roots not None):
    """The nodes reachable from ``roots``, every node before the nodes it depends on (the
    backward order; reversed, the order in which they were computed)."""
    for r in roots:
        if not isinstance(r, Node):
            raise TypeError(f"topological_order: roots must be Nodes, got {type(r).__name__}")
    return _topo_order(roots)


cdef inline object _accum(object a, object b):
    if a is None:
        return b
    if b is None:
        return a
    return _bind(_add_p, (a, b), {})


cdef type _inplace_type = None   # numpy.ndarray, registered by the NumPy adapter


def register_inplace_accumulation(type t):
    global _inplace_type
    _inplace_type = t


cdef inline void _accum_slot(list slot, Py_ssize_t i, object ct):
    """slot[i] += ct. In place when that is invisible to everyone: a writeable NumPy array
    that owns its data and that only this slot refers to (so no saved value, user array or other
    cotangent shares it), the sum having its shape and dtype; otherwise a new array."""
    cdef ThreadState st
    cdef _Mask m = None
    if ct is None:
        return
    a = slot[i]
    if a is None:
        slot[i] = ct
        return
    st = _state()
    # NOTE [strong zeros]: the sum's structural zeros are those of both terms
    m = _both(_mask_of(st, a), _mask_of(st, ct))
    if Py_REFCNT(a) == 2 and _writable_like(a, ct):
        a += ct
        if st.zeros:
            if m is None:
                _unmark(st, a)
            else:
                _mark(st, a, m)
        return
    slot[i] = _mark(st, _bind(_add_p, (a, ct), {}), m)


def run_backward(list roots, list root_cts, bint retain_graph=False, bint create_graph=False,
                 dict want=None, bint accumulate=True, set only=None):
    """Propagate cotangents from ``roots`` (edges ``(node, index)``) to the leaves.

    ``want`` maps edges to fill in (autograd.grad, transforms) and stops there; otherwise leaf
    nodes of eager tensors accumulate into ``.grad`` (restricted to the nodes in ``only``).
    """
    cdef dict grads = {}
    cdef Node node
    cdef list slot
    cdef Py_ssize_t i
    cdef list root_nodes = []
    if roots is None or root_cts is None or len(roots) != len(root_cts):
        raise TypeError("run_backward: roots and root_cts must be lists of the same length")
    for r in roots:
        if not (isinstance(r, tuple) and len(r) == 2 and isinstance(r[0], Node)
                and isinstance(r[1], int) and 0 <= r[1] < (<Node>r[0]).n_outputs):
            raise TypeError(f"run_backward: each root must be (Node, output index), got {r!r}")
    for (node, idx), ct in zip(roots, root_cts):
        slot = grads.get(node)
        if slot is None:
            slot = [None] * node.n_outputs
            grads[node] = slot
        _accum_slot(slot, idx, ct)
        root_nodes.append(node)
    order = _topo_order(root_nodes)
    cdef set want_nodes = {k[0] for k in want} if want is not None else None
    for node in order:
        slot = grads.pop(node, None)
        if slot is None:
            continue
        if want_nodes is not None and node in want_nodes:
            hit = False
            for i in range(node.n_outputs):
                key = (node, i)
                if key in want:
                    want[key] = _accum(want[key], slot[i])
                    hit = True
            if hit:
                continue
        if want is not None and node.leaf is not None:
            continue   # a leaf nobody asked for (autograd.grad does not accumulate)
        if node.retained is not None:
            for i, ref in node.retained:
                t = ref()
                if isinstance(t, Tensor) and slot[i] is not None:
                    _accumulate_grad(<Tensor>t, _handed_out(_as_grad(slot[i], create_graph)))
        if node.leaf is not None:
            if accumulate and node.leaf is not False and (only is None or node in only):
                t = node.leaf()
                if isinstance(t, Tensor) and slot[0] is not None:
                    _accumulate_grad(<Tensor>t, _handed_out(_as_grad(slot[0], create_graph)))
            continue
        if node.released:
            raise RuntimeError(
                "Trying to backward through the graph a second time (or to access saved values "
                "after they were freed). Saved intermediate values of the graph are freed when you "
                "call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
                "backward through the graph a second time.")
        # NOTE [consumed cotangents]: a large NumPy cotangent only this slot refers to may be
        # overwritten by the last rule that reads it
        g0 = slot[0] if node.n_outputs == 1 else None
        consumable = (type(g0) is _inplace_type and Py_REFCNT(g0) == 2
                      and g0.nbytes >= _CONSUME_BYTES)
        g0 = None
        in_cts = _node_vjp(node, slot, create_graph, consumable)
        edges = node._edges
        for i in range(len(edges)):
            e = edges[i]
            if e is None:
                continue
            ct = in_cts[i]
            if ct is None:
                continue
            parent = e[0]
            slot = grads.get(parent)
            if slot is None:
                slot = [None] * (<Node>parent).n_outputs
                grads[parent] = slot
            _accum_slot(slot, e[1], ct)
        in_cts = ct = None   # (so that the cotangents' only owners are their slots)
        if not retain_graph:
            node.release()   # (cpdef on a typed Node: a C call)
    if want is not None:
        for v in want.values():
            _handed_out(v)


cdef object _handed_out(object g):
    """``g``, a gradient handed to the caller, who may change its values in place: its zeros are
    numbers from now on (NOTE [strong zeros])."""
    cdef ThreadState st = _state()
    if g is not None:
        _unmark(st, g)
        if isinstance(g, Tensor):
            _unmark(st, (<Tensor>g)._value)
    return g


# Threads that share a leaf (one model's weights, a loss per thread) may accumulate into its .grad
# at once: the read-add-write is one critical section, so no update is lost.
cdef object _grad_lock = threading.Lock()


cdef void _accumulate_grad(Tensor t, object g) except *:
    with _grad_lock:
        t._grad = _accum(t._grad, g)


cdef object _as_grad(object g, bint create_graph):
    """A cotangent as the ``.grad`` of a tensor: a Tensor, detached unless ``create_graph``, whose
    value the caller owns (a read-only broadcast view is copied: ``x.grad *= 0.1`` works)."""
    if isinstance(g, Array):
        if not create_graph and isinstance(g, Tensor):
            return _new_tensor(owned((<Tensor>g)._value), None, 0)
        return g
    return _new_tensor(owned(fix_scalar(g)), None, 0)


cpdef object owned(object raw):
    """``raw``, or a copy the caller may write into (the backend's ``owned``): what every
    gradient handed out is made of."""
    if type(raw) is _inplace_type and raw.flags.writeable:   # (NumPy's common case, in C)
        return raw
    return backend_of(raw).owned(raw)


cdef object _node_vjp(Node node, list slot, bint create_graph, bint consumable=False):
    """Call the node's VJP rule with the saved values at the right level (NOTE [eager tape])."""
    cdef Primitive prim
    cdef tuple args = node.inputs
    cdef Py_ssize_t i
    ans = node.ans
    _check_not_updated(node)   # NOTE [in-place after use]
    if node.n_outputs > 1:
        for i in range(node.n_outputs):
            if slot[i] is None:
                slot[i] = _host.zeros_like(ans[i] if not isinstance(ans[i], Tensor) else (<Tensor>ans[i])._value)
        g = tuple(slot)
    else:
        g = slot[0]
    if not isinstance(node.prim, Primitive):
        # autograd.Function nodes carry their own backward, user code that may change g in
        # place: its zeros are numbers from here on (NOTE [strong zeros])
        for x in (g if isinstance(g, tuple) else (g,)):
            _unmark(_state(), x)
        return node.prim.custom_backward(node, g, create_graph)
    prim = node.prim
    if node.eager:
        # The caller (autograd.backward/grad) has set the grad mode to ``create_graph``.
        if create_graph:
            if isinstance(g, tuple):
                g = tuple([x if isinstance(x, Array) else Tensor(x) for x in g])
            elif not isinstance(g, Array):
                raw = g
                g = Tensor(g)
                _carry(_state(), raw, g)   # NOTE [strong zeros]
            ans = _bind(prim, args, node.params)
            return _call_vjp(prim, node._edges, g, ans, args, node.params, False)
        args = tuple([(<Tensor>a)._value if isinstance(a, Tensor) else a for a in args])
        if isinstance(g, Tensor):
            _carry(_state(), g, (<Tensor>g)._value)
            g = (<Tensor>g)._value
    return _call_vjp(prim, node._edges, g, ans, args, node.params, consumable)


cdef object _call_vjp(Primitive prim, tuple edges, object g, object ans, tuple args, dict params,
                      bint consumable):
    """A VJP rule is one function per argument (called only for arguments that need a
    cotangent) or, for variadic primitives, one function returning a tuple. With
    ``consumable``, the last rule called may write into ``g`` (NOTE [consumed cotangents])."""
    vjp = prim.vjp
    if vjp is None:
        raise NotImplementedError(f"arrayad: the VJP of {prim.name} is not defined")
    if type(vjp) is not tuple:
        return vjp(g, ans, *args, **params)
    cdef list out = []
    cdef Py_ssize_t i, last = -1, n = len(vjp)
    cdef ThreadState st = None
    if consumable:
        st = _state()
        for i in range(min(len(edges), n)):
            if edges[i] is not None and vjp[i] is not None:
                last = i
    for i in range(len(edges)):
        f = vjp[i] if i < n else None
        if edges[i] is None or f is None:
            out.append(None)
            continue
        if i == last:
            for o in out:   # (an earlier rule that handed back g itself shares it)
                if o is g:
                    break
            else:
                st.consumable = g
        try:
            out.append(f(g, ans, *args, **params) if params else f(g, ans, *args))
        finally:
            if st is not None:
                st.consumable = None
    return out


# NOTE [consumed cotangents]
# --------------------------
# At 1,000,000 elements every fresh array costs its allocation and page faults as much as the
# arithmetic. A node's incoming cotangent is garbage once its rules have run, so when it is a
# large NumPy array (128 KiB or more) that nothing but the engine's slot refers to (no user
# array, saved value, retained .grad or other cotangent), the engine marks it consumable
# for the last rule that reads it, and the rule shapes multiply (or divide) into it in place
# (``_times``) when the product has its shape and dtype. The result is bit for bit what
# ``g * d`` would be.

# Below glibc's threshold for serving allocations by mmap (128 KiB), a fresh array is cheap and
# NumPy's in-place path costs more than it saves.
cdef Py_ssize_t _CONSUME_BYTES = 1 << 17


def strong_products():
    """How many rule products this thread made with strong zeros so far (for the tests)."""
    return _state().strong_products


def consumed_cotangents():
    """How many products this thread wrote into a consumed cotangent so far (for the tests)."""
    return _state().consumed


# NOTE [strong zeros]
# -------------------
# A zero cotangent (or tangent) that is zero by construction contributes zero: the chain rule
# applies a linear map to it, and a linear map sends zero to zero, even where the local
# derivative is inf or nan. IEEE says 0 * inf = nan instead, which is how
# `where(x > 0, sqrt(x), 0)` at x = 0, `sqrt(x)[1:]` with x[0] = 0, scikit-learn's
# `v = 0/0 ...; v[mask] = finite`, or jacfwd of `sum(sqrt(x))` (its basis vectors are mostly
# zeros) get a nan derivative in torch and JAX where it is well defined.
#
# Which zeros are structural is a matter of where they come from, not of what they are: the
# positions that a select (`where`), an index scatter (getitem's VJP writes g into zeros), an
# overwrite (setitem: the old array's cotangent is zero where it was overwritten) or a
# Jacobian's basis vectors set to zero. A zero that arithmetic made (1/inf, an underflow) is a
# number, and 0 * inf = nan for it as for torch: `log(exp(800.))` has a nan derivative, not 0.
#
# The rules that make structural zeros register their result here (`structural_zeros`): a
# per-thread table keyed by the identity of the value (a raw array, a Tensor, a tracer) with a
# weak reference to it (its callback removes the entry, so an id is never looked up for another
# value) and a lazily built boolean mask (`_Mask`: True where the zero is structural; a slice's
# "all but the key" is built only if a product needs it); a tracer holds its mask in a field
# instead (the Jacobians' cotangents and tangents are tracers: no table work per product). The
# rule shapes multiply a cotangent by a local derivative in one place, `_times`: when the
# cotangent has a mask (one dict lookup, none while the table is empty) and the derivative may
# hold a value that makes a zero factor nan (inf or nan; for a divisor, also 0: `_singular`),
# the product is `where(mask, 0, g * d)`; either way the product keeps the cotangent's mask.
# Where the values are not known when the rule runs (a staged jit program, Dask, a GPU) and the
# cotangent has a mask, the select is always made: which cotangents came from a select is known
# at staging time, so `jit(grad(f))` equals `grad(f)`. The engine's accumulation `g1 + g2` keeps the
# positions structural in both (`_accum_slot`), and so does add's and subtract's JVP; the
# linear elementwise rules (negative, conj, real) keep their argument's (`keep_zeros`). Every
# other rule (reductions, the sums of unbroadcast, a matmul) makes a new value without a mask:
# its zeros are numbers again, which is conservative (a nan where a mask could have given 0,
# never a wrong number). A gradient handed to the caller loses its mask (`_handed_out`): the
# caller may change it in place, and a tangent or cotangent the caller gives is data.

cdef class _Mask:
    """Where a cotangent (or tangent) is zero by construction: a boolean array (True there), of
    a shape that broadcasts to the value's, made when first asked for (``mask()``) by ``make()``
    or as the positions structural in both ``a`` and ``b``."""
    cdef object make
    cdef _Mask a, b
    cdef object mask

    def __call__(self):
        return self.get()

    cdef object get(self):
        if self.mask is None:
            if self.make is not None:
                self.mask = self.make()
            elif self.a is not None and self.b is not None:
                self.mask = _bind(<Primitive>_op['bitwise_and'], (self.a.get(), self.b.get()), {})
            else:
                raise TypeError("arrayad: an empty mask of structural zeros (made with __new__?)")
            self.make = None
            self.a = self.b = None
        return self.mask


cdef _Mask _both(_Mask a, _Mask b):
    """The positions structural in both (None: in none, as either is None)."""
    cdef _Mask m
    if a is None or b is None:
        return None
    if a is b:
        return a
    m = _Mask.__new__(_Mask)
    m.a = a
    m.b = b
    return m


cdef class _Entry:
    """A value's entry in the table: its mask, and the weak reference to it whose callback
    (this entry) removes the entry when the value dies."""
    cdef _Mask mask
    cdef object ref
    cdef dict table
    cdef object key

    def __call__(self, ref):
        if self.table is not None and self.table.get(self.key) is self:
            del self.table[self.key]
        self.ref = None   # (the entry and its reference refer to each other)


cdef inline _Mask _mask_of(ThreadState st, object v):
    """The mask of ``v``'s structural zeros, or None."""
    if isinstance(v, Tracer):
        return <_Mask>(<Tracer>v)._zeros
    if not st.zeros or v is None:
        return None
    e = st.zeros.get(<size_t><void*>v)
    return None if e is None else (<_Entry>e).mask


cdef object _mark(ThreadState st, object v, _Mask m):
    """Register ``m`` as the mask of ``v``'s structural zeros (a value that holds no weak
    reference, a Python scalar, keeps none: its zeros are numbers); returns ``v``."""
    cdef _Entry e
    if m is None or v is None or _is_scalar(v):
        return v
    if isinstance(v, Tracer):   # (a field: no table entry, no weak reference)
        (<Tracer>v)._zeros = m
        return v
    key = <size_t><void*>v
    old = st.zeros.get(key)
    if old is not None:   # (the same value: its entry would have gone with an earlier one)
        (<_Entry>old).mask = m
        return v
    e = _Entry.__new__(_Entry)
    try:
        e.ref = PyWeakref_NewRef(v, e)
    except TypeError:
        return v
    e.mask = m
    e.table = st.zeros
    e.key = key
    st.zeros[key] = e
    return v


cdef void _unmark(ThreadState st, object v) except *:
    """Forget ``v``'s mask (its values changed in place, or it is handed out)."""
    if isinstance(v, Tracer):
        (<Tracer>v)._zeros = None
        return
    if not st.zeros or v is None:
        return
    e = st.zeros.pop(<size_t><void*>v, None)
    if e is not None:
        (<_Entry>e).ref = None


cdef inline void _carry(ThreadState st, object src, object dst) except *:
    """``dst`` has the structural zeros of ``src`` (the same values, another wrapper)."""
    if dst is not src:
        _mark(st, dst, _mask_of(st, src))


def structural_zeros(value, make):
    """Register that ``value`` (a cotangent or tangent a rule returns) is zero by construction
    where the boolean array ``make()`` is True (NOTE [strong zeros]); ``make`` is called only
    if a product needs the mask and must not refer to ``value`` itself. Returns ``value``."""
    cdef _Mask m
    if value is None:
        return value
    m = _Mask.__new__(_Mask)
    m.make = make
    return _mark(_state(), value, m)


def keep_zeros(src, dst):
    """``dst``, an elementwise linear function of ``src`` that keeps its zeros where they are
    (``-src``, ``conj(src)``, ``real(src)``), with the structural zeros of ``src``."""
    _carry(_state(), src, dst)
    return dst


def forget_zeros(value):
    """``value`` without structural zeros (it goes to user code, which may change it in place:
    a custom Function's rules). Returns ``value``."""
    _unmark(_state(), value)
    return value


def zeros_mask(value):
    """The mask of ``value``'s structural zeros as a callable (``mask()`` builds it), or None."""
    return _mask_of(_state(), value)


cdef class _BatchZeros:
    """``rows == 0`` for a BatchTracer ``rows``, made from its batch and level, not from the
    tracer itself (which the mask must not keep alive)."""
    cdef object interp, value
    cdef int bdim

    def __init__(self, BatchTracer rows not None):
        self.interp = rows._interp
        self.value = rows.value
        self.bdim = rows.bdim

    def __call__(self):
        rows = _new_batch(self.interp, self.value, self.bdim)
        return _bind(<Primitive>_op['equal'], (rows, 0), {})


def constant_zeros(value):
    """Register the zeros of a constant ``value`` (a Jacobian's basis vectors, zero tangents and
    cotangents of other arguments) as structural; returns ``value``. Under vmap, where
    ``value`` is a batch of rows, the mask is built lazily from the rows."""
    cdef _Mask m
    if value is None or _is_scalar(value):
        return value
    m = _Mask.__new__(_Mask)
    if type(value) is BatchTracer:
        m.make = _BatchZeros(<BatchTracer>value)
    else:
        m.mask = _bind(<Primitive>_op['equal'], (value, 0), {})
    return _mark(_state(), value, m)


def structural_zero_count():
    """How many values of this thread have a mask of structural zeros now (for the tests)."""
    return len(_state().zeros)


cdef int _buffer_singular(object a, bint quotient) except -2:
    """1 if the C-contiguous float buffer of ``a`` has a value that makes a zero factor nan (inf
    or nan; for a quotient, also 0), 0 if not, -1 if ``a`` has no such buffer.

    On the bits, without a branch per value, so that the compiler vectorizes the loop and it
    runs at the speed of memory: a float's exponent is all ones exactly for inf and nan, and
    adding one to an all-ones exponent carries into the sign bit; a value is zero exactly when
    its bits without the sign are 0, and subtracting one from 0 sets the sign bit."""
    cdef Py_buffer view
    cdef Py_ssize_t i, n
    cdef uint64_t* d64
    cdef uint32_t* d32
    cdef uint64_t acc64 = 0
    cdef uint32_t acc32 = 0
    cdef int found
    if not a.flags.c_contiguous:   # (NumPy raises ValueError, not BufferError, for these)
        return -1
    PyObject_GetBuffer(a, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT)
    try:
        fmt = view.format.lstrip(b"=<@") if view.format != NULL else b""
        if fmt == b"d" or fmt == b"Zd":
            d64 = <uint64_t*>view.buf
            n = view.len // 8
            if quotient:
                for i in range(n):
                    acc64 |= (((d64[i] & 0x7FF0000000000000ULL) + 0x0010000000000000ULL)
                              | ((d64[i] & 0x7FFFFFFFFFFFFFFFULL) - 1))
            else:
                for i in range(n):
                    acc64 |= (d64[i] & 0x7FF0000000000000ULL) + 0x0010000000000000ULL
            found = (acc64 >> 63) != 0
        elif fmt == b"f" or fmt == b"Zf":
            d32 = <uint32_t*>view.buf
            n = view.len // 4
            if quotient:
                for i in range(n):
                    acc32 |= (((d32[i] & 0x7F800000U) + 0x00800000U)
                              | ((d32[i] & 0x7FFFFFFFU) - 1))
            else:
                for i in range(n):
                    acc32 |= (d32[i] & 0x7F800000U) + 0x00800000U
            found = (acc32 >> 31) != 0
        else:
            found = -1
    finally:
        PyBuffer_Release(&view)
    return found


cdef bint _singular(object d, bint quotient) except -1:
    """Whether the local derivative ``d`` (a divisor with ``quotient``) may hold a value that
    turns a zero factor into nan: known to (a look at it), or not known (a staged value, Dask,
    a GPU where a look would wait for the device)."""
    cdef object t = type(d)
    if t is float:
        return (d == 0 or d != d) if quotient else not c_isfinite(<double>d)
    if t is complex:
        return (d == 0 or d != d) if quotient else not (c_isfinite(d.real) and c_isfinite(d.imag))
    if t is int or t is bool or d is None:
        return quotient and d == 0
    while t is GradTracer or t is DualTracer or t is BatchTracer:
        d = (<Tracer>d).value
        t = type(d)
    if t is Tensor:
        d = (<Tensor>d)._value
        t = type(d)
    elif isinstance(d, Array) or t is Meta:
        return True   # (a staging transform's value, or only its shape and dtype: not known)
    if t is _inplace_type:
        if d.dtype.kind not in "fc":
            return quotient and not d.all()
        found = _buffer_singular(d, quotient)
        if found >= 0:
            return found == 1
    b = backend_of(d)   # (a NumPy array not C-contiguous, or another backend's)
    if quotient:   # (a zero divisor: 1 / d is inf there; NumPy would warn, so it asks all())
        if t is _inplace_type:
            return not d.all() or not b.all_finite(d)
        finite = b.all_finite(1 / d)
    else:
        finite = b.all_finite(d)
    return finite is not True   # (None: Dask, a GPU's "not without waiting")


cdef object _times(Primitive op, object g, object d):
    """``g * d`` (``op`` multiply) or ``g / d`` (divide), into ``g`` when the engine marked it
    consumable and the result has ``g``'s shape and dtype; exactly zero where ``g`` has
    structural zeros when ``d`` may have values that would turn them into nan; the product keeps
    ``g``'s structural zeros (NOTE [strong zeros])."""
    cdef ThreadState st = _state()
    cdef _Mask m = _mask_of(st, g)
    if m is not None:
        if _singular(d, op is _div_p):
            st.strong_products += 1
            return _mark(st, _host.where(m.get(), 0, _bind(op, (g, d), {})), m)
        return _mark(st, _product(st, op, g, d), m)
    return _product(st, op, g, d)


cdef inline object _product(ThreadState st, Primitive op, object g, object d):
    if g is not None and type(g) is _inplace_type:
        if g is not st.consumable:
            return _bind(op, (g, d), {})
        st.consumable = None
        if _writable_like(g, d):
            st.consumed += 1
            if op is _mul_p:
                return PyNumber_InPlaceMultiply(g, d)
            return PyNumber_InPlaceTrueDivide(g, d)
    return _bind(op, (g, d), {})


cdef bint _writable_like(object g, object d):
    """Whether ``g op= d`` gives exactly ``g op d``: ``g`` a writeable NumPy array owning its
    data, ``d`` a real Python scalar or an array of ``g``'s shape and dtype. (Whether anything
    else refers to ``g`` is the caller's question.)"""
    if type(g) is not _inplace_type or g.base is not None or not g.flags.writeable:
        return False
    if isinstance(d, float) or isinstance(d, int):
        return g.dtype.kind in "fc"
    return type(d) is _inplace_type and d.dtype == g.dtype and d.shape == g.shape


# ---------------------------------------------------------------------------------------------
# Eager interpreter (the tape below every transform: NOTE [eager tape])

cdef object _process_eager(Primitive prim, tuple args, dict params):
    cdef list raws = []
    cdef bint record = False
    for a in args:
        if isinstance(a, Tensor):
            raws.append((<Tensor>a)._value)
            if (<Tensor>a)._node is not None:
                record = True
        else:
            raws.append(a)
    out = _call_impl(prim, tuple(raws), params)
    if not (record and prim.differentiable and _grad_enabled()):
        if prim.multiple_results:
            return tuple([_new_tensor(o, None, 0) for o in out])
        return _new_tensor(out, None, 0)
    edges = tuple([((<Tensor>a)._node, (<Tensor>a)._idx)
                   if isinstance(a, Tensor) and (<Tensor>a)._node is not None else None
                   for a in args])
    if prim.multiple_results:
        node = _new_node(prim, args, params, out, edges, len(out), True)
        return tuple([_new_tensor(o, node if _is_inexact(o) else None, i)
                      for i, o in enumerate(out)])
    node = _new_node(prim, args, params, out, edges, 1, True)
    if prim.reuses is not None:
        _share_result(prim, raws[0], out, node)
    return _new_tensor(out, node, 0)


cdef inline bint _is_inexact(object v):
    """Whether ``v`` has a floating-point or complex dtype (only those carry derivatives)."""
    return dtype_of(v).kind in ("f", "c")


cdef inline Tensor _new_tensor(object value, Node node, int idx):
    cdef Tensor t = Tensor.__new__(Tensor)
    t._value = value
    t._node = node
    t._idx = idx
    t._grad = None
    return t


# ---------------------------------------------------------------------------------------------
# The interpreters (NOTE [interpreters])

cdef class Interpreter:
    """One call of a transform: its level on the calling context's stack (NOTE [thread state]),
    and how it processes a primitive applied to its tracers. Subclasses override ``process``
    (and ``lift``)."""

    name = "transform"

    def __enter__(self):
        cdef tuple stack = _open_transforms()
        self._entered = PyContextVar_Set(_transforms, stack + (self,))
        self.level = len(stack) + 1
        self.alive = True
        self._enter(_state())
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def close(self):
        """Take this interpreter off the stack and mark it dead, closing first whatever an
        exception left open above it. Idempotent."""
        if not self.alive:
            return
        cdef tuple stack = _open_transforms()
        cdef Py_ssize_t i = len(stack) - 1
        while i >= 0 and stack[i] is not self:
            i -= 1
        # Another thread's stack lacks it; a task's stack copied from its creator's has it, but
        # the token of the push belongs to the creator's context and refuses the reset.
        if i >= 0:
            try:
                PyContextVar_Reset(_transforms, self._entered)   # (the stack the push found)
            except ValueError:
                i = -1
        if i < 0:
            raise RuntimeError(
                f"arrayad: a {self.name} transform opened in one thread or asyncio task was "
                f"closed in another (or twice). A transform must run from start to end in one "
                f"thread and task (a forward_ad dual level: exit it where it was entered).")
        cdef ThreadState st = _state()
        cdef Interpreter top
        cdef Py_ssize_t j
        for j in range(len(stack) - 1, i - 1, -1):
            top = <Interpreter>stack[j]
            top._entered = None   # (its token refers to the context: a cycle)
            top.alive = False
            top.frame = None      # (an input's value: not kept past the call)
            top._exit(st)

    cdef void _enter(self, ThreadState st) except *:
        pass

    cdef void _exit(self, ThreadState st) except *:
        pass

    cpdef object process(self, Primitive prim, tuple args, dict params):
        """Apply ``prim`` to ``args``, some of which are tracers of this interpreter."""
        raise NotImplementedError(f"{type(self).__name__}.process")

    cpdef object lift(self, object value):
        """``value`` (of a lower level) as a constant of this level."""
        return value

    def __repr__(self):
        state = "alive" if self.alive else "dead"
        return f"<{type(self).__name__} level={self.level} {state}>"


# -- reverse mode (grad, vjp, jacrev, linearize)

cdef class GradInterpreter(Interpreter):
    """Records a tape of the primitives applied to its tracers (``GradTracer``: a value and the
    node that made it). Opening it switches grad mode on; ``restore_grad_mode`` gives the caller's
    back before the backward pass, which then records on the outer levels only if they want it."""

    name = "grad"

    def __init__(self, bint keep_saved=False):
        # linearize replays the JVP rules, which read every input: its nodes keep everything
        self.keep_saved = keep_saved

    cdef void _enter(self, ThreadState st) except *:
        self.prev_grad = _grad_enabled()
        _set_grad_enabled(True)

    cdef void _exit(self, ThreadState st) except *:
        _set_grad_enabled(self.prev_grad)

    def restore_grad_mode(self):
        _set_grad_enabled(self.prev_grad)

    def new_input(self, value):
        """A differentiated input: a tracer of ``value`` with a fresh leaf node."""
        if self.frame is None:
            self.frame = value
        return _new_grad_tracer(self, value, leaf_node(None), 0)

    def output(self, x):
        """(value one level down, edge or None) of a result of the traced function."""
        if isinstance(x, GradTracer) and (<GradTracer>x)._interp is self:
            # node None: a constant of this level (zeros_like & co. keep the level): no edge
            if (<GradTracer>x)._node is None:
                return (<GradTracer>x).value, None
            return (<GradTracer>x).value, ((<GradTracer>x)._node, (<GradTracer>x)._idx)
        return x, None

    cpdef object lift(self, object value):
        return _new_grad_tracer(self, value, None, 0)

    cpdef object process(self, Primitive prim, tuple args, dict params):
        cdef list vals = []
        cdef list edges = []
        cdef bint record = False
        for a in args:
            if isinstance(a, GradTracer) and (<GradTracer>a)._interp is self:
                vals.append((<GradTracer>a).value)
                if (<GradTracer>a)._node is None:   # a constant of this level
                    edges.append(None)
                else:
                    edges.append(((<GradTracer>a)._node, (<GradTracer>a)._idx))
                    record = True
            else:
                if isinstance(a, Tensor):   # NOTE [in-place after use]: keep it as it is now
                    a = _alias(<Tensor>a)
                vals.append(a)
                edges.append(None)
        cdef tuple tvals = tuple(vals)
        out = _bind(prim, tvals, params)
        if not (record and prim.differentiable and _grad_enabled()):
            # a constant of this level (NOTE [everything inside is arrayad])
            if prim.multiple_results:
                return tuple([_new_grad_tracer(self, o, None, 0) for o in out])
            return _new_grad_tracer(self, out, None, 0)
        if prim.multiple_results:
            node = _new_node(prim, tvals, params, out, tuple(edges), len(out), False)
            return tuple([_new_grad_tracer(self, o, node if _is_inexact(o) else None, i)
                          for i, o in enumerate(out)])
        if prim.vjp_reads is not None and not self.keep_saved:   # NOTE [saved values]
            saved, ans = _saved_inputs(prim.vjp_reads, tvals, edges, out)
            node = _new_node(prim, saved, params, ans, tuple(edges), 1, False)
        else:
            node = _new_node(prim, tvals, params, out, tuple(edges), 1, False)
        if prim.reuses is not None:
            _share_result(prim, tvals[0], out, node)
        return _new_grad_tracer(self, out, node, 0)


cdef inline GradTracer _new_grad_tracer(Interpreter interp, object value, Node node, int idx):
    cdef GradTracer t = GradTracer.__new__(GradTracer)
    t._interp = interp
    t.value = value
    t._node = node
    t._idx = idx
    return t


def new_grad_tracer(GradInterpreter interp not None, value, Node node, int idx=0):
    return _new_grad_tracer(interp, value, node, idx)


# -- forward mode (jvp, jacfwd, forward_ad)

cdef class JvpInterpreter(Interpreter):
    """Pushes tangents forward with the JVP rules (``DualTracer``: a value and its tangent).
    ``dual_level``: one of ``autograd.forward_ad``'s levels, in which the eager tape keeps
    working, rather than a ``func.jvp`` call."""

    name = "jvp"

    def __init__(self, bint dual_level=False):
        self.dual_level = dual_level

    def output(self, x):
        """(value one level down, tangent or None) of a result of the traced function."""
        if isinstance(x, DualTracer) and (<DualTracer>x)._interp is self:
            return (<DualTracer>x).value, (<DualTracer>x).tangent
        return x, None

    cpdef object lift(self, object value):
        return _new_dual(self, value, None)

    cpdef object process(self, Primitive prim, tuple args, dict params):
        cdef list primals = []
        cdef list tangents = []
        cdef bint any_tangent = False
        for a in args:
            if isinstance(a, DualTracer) and (<DualTracer>a)._interp is self:
                primals.append((<DualTracer>a).value)
                tangents.append((<DualTracer>a).tangent)
                any_tangent = True
            else:
                primals.append(a)
                tangents.append(None)
        cdef tuple tprimals = tuple(primals)
        out = _bind(prim, tprimals, params)
        tout = None
        if prim.differentiable:
            for t in tangents:
                if t is not None:   # (else only constants of this level: no tangent)
                    tout = prim.jvp(tangents, out, *tprimals, **params)
                    break
        # (results without a tangent stay constants of this level: NOTE [everything inside is
        # arrayad])
        if prim.multiple_results:
            if tout is None:
                tout = (None,) * len(out)
            return tuple([_new_dual(self, o, t) for o, t in zip(out, tout)])
        return _new_dual(self, out, tout)


cdef inline DualTracer _new_dual(Interpreter interp, object primal, object tangent):
    cdef DualTracer t = DualTracer.__new__(DualTracer)
    t._interp = interp
    t.value = primal
    t.tangent = tangent
    return t


def new_dual(JvpInterpreter interp not None, primal, tangent):
    if interp.frame is None:
        interp.frame = primal
    return _new_dual(interp, primal, tangent)


# -- batching (vmap)

cdef bint _lined_up(list vals, list dims, int* out_dim):
    """Whether an elementwise primitive can run on the batched values as they are: the batched
    ones share one batch dim and one rank, and broadcasting from the right lines up the rest
    (scalars anywhere; unbatched arrays of no higher rank when the batch dim leads)."""
    cdef Py_ssize_t i
    cdef int first = -1, rank = -1, n, max_unbatched = 0
    for i in range(len(vals)):
        a = vals[i]
        d = dims[i]
        if d is None:
            if a is not None and not _is_scalar(a):
                n = len(shape_of(a))
                if n > max_unbatched:
                    max_unbatched = n
        else:
            n = len(shape_of(a)) - 1
            if first == -1:
                first, rank = <int>d, n
            elif <int>d != first or n != rank:
                return False
    if first == -1 or not (max_unbatched == 0 or (first == 0 and max_unbatched <= rank)):
        return False
    out_dim[0] = first
    return True


# The bdim of a BatchTracer whose value is not batched (NOTE [everything inside is arrayad])
DEF UNBATCHED = -1


cdef class BatchInterpreter(Interpreter):
    """Runs primitives on whole batches (``BatchTracer``: a value with a batch dimension at
    ``bdim``) with their batching rules. ``size`` is the batch size, ``randomness`` vmap's."""

    name = "vmap"

    def __init__(self, Py_ssize_t size, str randomness="error"):
        self.size = size
        self.randomness = randomness

    def new_input(self, value, int bdim):
        if self.frame is None:
            self.frame = value
        return _new_batch(self, value, bdim)

    cpdef object lift(self, object value):
        return _new_batch(self, value, UNBATCHED)

    cpdef object process(self, Primitive prim, tuple args, dict params):
        cdef int out_dim_c = 0
        cdef bint batched = False
        cdef list vals = []
        cdef list dims = []
        for a in args:
            if isinstance(a, BatchTracer) and (<BatchTracer>a)._interp is self:
                vals.append((<BatchTracer>a).value)
                # (bdim < 0: a value of this level that is not batched, NOTE [everything
                # inside is arrayad])
                if (<BatchTracer>a).bdim >= 0:
                    dims.append((<BatchTracer>a).bdim)
                    batched = True
                else:
                    dims.append(None)
            else:
                vals.append(a)
                dims.append(None)
        rule = prim.batch
        if not batched:   # only unbatched values of this level: one call for the whole batch
            out, out_dim = _bind(prim, tuple(vals), params), None
        elif prim.elementwise and _lined_up(vals, dims, &out_dim_c):
            out, out_dim = _bind(prim, tuple(vals), params), out_dim_c
        elif rule is None:
            out, out_dim = _host.batch_fallback(prim, vals, dims, params, self)
        else:
            out, out_dim = rule(vals, dims, **params)
        if prim.multiple_results:
            if not isinstance(out_dim, (tuple, list)):
                out_dim = (out_dim,) * len(out)
            return tuple([_new_batch(self, o, UNBATCHED if d is None else d)
                          for o, d in zip(out, out_dim)])
        return _new_batch(self, out, UNBATCHED if out_dim is None else out_dim)


cdef inline BatchTracer _new_batch(Interpreter interp, object value, int bdim):
    cdef BatchTracer t = BatchTracer.__new__(BatchTracer)
    t._interp = interp
    t.value = value
    t.bdim = bdim
    return t


def new_batch(BatchInterpreter interp not None, value, int bdim):
    return _new_batch(interp, value, bdim)


# ---------------------------------------------------------------------------------------------
# Rule shapes. Most elementwise rules are one of a few shapes around a derivative formula written
# in Python (arrayad._ops.elementwise): ``g * conj(d)`` for a unary VJP, ``t * d`` for its JVP, the
# same summed to the argument's shape for a binary function. They run once per node of every
# backward and forward pass; as C callables they cost one Python frame (the formula's) instead of
# three.

cdef class _UnaryShape:
    """A unary function's derivative ``d(ans, x)``, or with ``quotient`` its reciprocal (log:
    ``x``), which the rules then divide by: one pass over the data instead of two."""
    cdef readonly object d
    cdef readonly bint quotient

    def __init__(self, d, bint quotient=False):
        self.d = d
        self.quotient = quotient


cdef class UnaryVJP(_UnaryShape):
    """``g * conj(d)`` (``g / conj(d)`` with ``quotient``)."""

    def __call__(self, g, ans, x):
        return _times(_div_p if self.quotient else _mul_p, g, conj_if_complex(self.d(ans, x)))


cdef class UnaryJVP(_UnaryShape):
    """``t * d`` (``t / d`` with ``quotient``)."""

    def __call__(self, tangents, ans, x):
        t = tangents[0]
        if t is None:
            return None
        return _times(_div_p if self.quotient else _mul_p, t, self.d(ans, x))


cdef tuple _lift3(object ans, object x1, object x2):
    """Raw backend arrays as constant Tensors when arrayad arrays are among the three.

    A binary rule may see a raw array next to a Tensor or a tracer (a closed-over constant, a
    raw tangent); ``raw * tensor`` works on NumPy (it defers) but array-api-strict's operators
    refuse foreign operands, so the formulas get arrayad arrays on both sides."""
    if not (isinstance(ans, Array) or isinstance(x1, Array) or isinstance(x2, Array)):
        return (ans, x1, x2)
    return (_lift1(ans), _lift1(x1), _lift1(x2))


cdef inline object _lift1(object v):
    if v is None or isinstance(v, Array) or _is_scalar(v) or type(v) is Meta:
        return v
    return _new_tensor(v, None, 0)


cdef class PartialVJP:
    """VJP of a binary function for argument ``i`` (0 or 1), partial derivative
    ``d(ans, x1, x2)``: ``g * conj(d)`` summed to the argument's shape."""
    cdef readonly object d
    cdef readonly int i

    def __init__(self, d, int i):
        self.d = d
        self.i = i

    def __call__(self, g, ans, x1, x2):
        ans, x1, x2 = _lift3(ans, x1, x2)
        return unbroadcast(_times(_mul_p, g, conj_if_complex(self.d(ans, x1, x2))),
                           x2 if self.i else x1)


cdef class BinaryJVP:
    """JVP of a binary function with partial derivatives ``d1``, ``d2`` (None: zero):
    ``t1 * d1 + t2 * d2``, each part broadcast to the output's shape."""
    cdef readonly object d1, d2

    def __init__(self, d1, d2):
        self.d1 = d1
        self.d2 = d2

    def __call__(self, tangents, ans, x1, x2):
        t1, t2 = tangents[0], tangents[1]
        ans, x1, x2 = _lift3(ans, x1, x2)
        out = None
        if t1 is not None and self.d1 is not None:
            out = broadcast_like(_times(_mul_p, t1, self.d1(ans, x1, x2)), ans)
        if t2 is not None and self.d2 is not None:
            part = broadcast_like(_times(_mul_p, t2, self.d2(ans, x1, x2)), ans)
            out = part if out is None else _bind(_add_p, (out, part), {})
        return out


cdef class SumJVP:
    """JVP of add (``t1 + t2``) or, with ``negate``, subtract (``t1 - t2``), each tangent
    broadcast to the output's shape."""
    cdef readonly bint negate

    def __init__(self, bint negate=False):
        self.negate = negate

    def __call__(self, tangents, ans, x1, x2):
        cdef ThreadState st = _state()
        t1, t2 = tangents[0], tangents[1]
        if t2 is not None:
            if self.negate:   # (NOTE [strong zeros]: -t has the structural zeros of t)
                t2 = _mark(st, _bind(_neg_p, (t2,), {}), _mask_of(st, t2))
            t2 = broadcast_like(t2, ans)
            if t1 is None:
                return t2
        if t1 is None:
            return None
        t1 = broadcast_like(t1, ans)
        if t2 is None:
            return t1
        return _mark(st, _bind(_add_p, (t1, t2), {}), _both(_mask_of(st, t1), _mask_of(st, t2)))


cpdef object broadcast_like(object t, object ans):
    """A tangent of an input, broadcast to the shape of the output (ops that broadcast)."""
    cdef tuple shape = shape_of(ans)
    if shape_of(t) == shape:
        return t
    return _host.broadcast_to(t, shape)


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
    dt = v.dtype
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


cpdef bint is_complex(object v):
    """Whether ``v`` (an array of any kind, or a Python scalar) has a complex dtype."""
    if v is None or isinstance(v, float) or isinstance(v, int):
        return False
    if isinstance(v, complex):
        return True
    return _is_complex_dtype(dtype_of(v))


cdef object _complex64 = None, _complex128 = None


cdef inline bint _is_complex_dtype(object dt):
    return dt is _complex64 or dt is _complex128


def install_complex_dtypes(c64, c128):
    """arrayad's two complex DTypes (compared by identity: DTypes are singletons)."""
    global _complex64, _complex128
    _complex64, _complex128 = c64, c128


cpdef object conj_if_complex(object v):
    """``conj(v)`` for complex values, ``v`` itself otherwise (the common, real, case is one
    cached dtype lookup). A Python complex stays a Python scalar."""
    if isinstance(v, complex):
        return v.conjugate()
    if is_complex(v):
        return _host.conj(v)
    return v


cpdef object unbroadcast(object g, object x):
    """Sum ``g`` (shaped like a broadcast result) back down to the shape of ``x``, in ``x``'s
    dtype: the real part when ``x`` is real and ``g`` complex, float32 for a float32 ``x`` that a
    float64 operand promoted (as torch and JAX return it); None for a Python scalar ``x``. In the
    core because every binary rule calls it, and its common case (nothing to do) should cost no
    Python frame."""
    if x is None or _is_scalar(x):
        return None
    gd = dtype_of(g)
    xd = dtype_of(x)
    if gd is not xd:
        if _is_complex_dtype(gd) and not _is_complex_dtype(xd):
            g = _host.real(g)   # a real input of a complex result: its cotangent is the real part
        if xd.kind in ("f", "c") and dtype_of(g) is not xd:
            g = _host.astype(g, xd)
    cdef tuple shape = shape_of(x)
    cdef tuple gshape = shape_of(g)
    if gshape == shape:
        return g
    cdef Py_ssize_t lead = len(gshape) - len(shape)
    axes = tuple(range(lead)) + tuple([i + lead for i, s in enumerate(shape)
                                       if s == 1 and gshape[i + lead] != 1])
    if axes:
        g = _host.sum(g, axis=axes, keepdims=False)
    if shape_of(g) != shape:
        g = _host.reshape(g, shape)
    return g


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
    def __add__(self, other): return _bind(<Primitive>_op['add'], (self, other), {})
    def __radd__(self, other): return _bind(<Primitive>_op['add'], (other, self), {})
    def __sub__(self, other): return _bind(<Primitive>_op['subtract'], (self, other), {})
    def __rsub__(self, other): return _bind(<Primitive>_op['subtract'], (other, self), {})
    def __mul__(self, other): return _bind(<Primitive>_op['multiply'], (self, other), {})
    def __rmul__(self, other): return _bind(<Primitive>_op['multiply'], (other, self), {})
    def __truediv__(self, other): return _bind(<Primitive>_op['divide'], (self, other), {})
    def __rtruediv__(self, other): return _bind(<Primitive>_op['divide'], (other, self), {})
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
    def __neg__(self): return _bind(<Primitive>_op['negative'], (self,), {})
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
            return format(_concrete(self, "format").item(), spec)
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

    def __deepcopy__(self, memo):
        # a tracer of the same transform: values are never written into, so the copy is
        # independent of the original (an in-place update of one rebinds only that one)
        return self.__copy__()

    def __reduce__(self):
        raise TypeError(
            f"arrayad: cannot pickle a {type(self).__name__}: it is a value inside a running "
            f"transform. Pickle the function's inputs or results instead.")


cdef inline void _check_same_interpreter(Tracer self, Tracer other) except *:
    if other._interp is not self._interp:
        raise _host.inplace_level_error(self, other)


cdef class GradTracer(Tracer):
    def __copy__(self):
        return _new_grad_tracer(self._interp, self.value, self._node, self._idx)

    def _replace(self, GradTracer other not None):
        _check_same_interpreter(self, other)
        self.value = other.value
        self._node = other._node
        self._idx = other._idx


cdef class DualTracer(Tracer):
    def __copy__(self):
        return _new_dual(self._interp, self.value, self.tangent)

    @property
    def primal(self):
        return self.value

    def _replace(self, DualTracer other not None):
        _check_same_interpreter(self, other)
        self.value = other.value
        self.tangent = other.tangent


cdef class BatchTracer(Tracer):
    def __copy__(self):
        return _new_batch(self._interp, self.value, self.bdim)

    @property
    def shape(self):
        s = shape_of(self.value)
        if self.bdim < 0:
            return s
        return s[:self.bdim] + s[self.bdim + 1:]

    def _replace(self, BatchTracer other not None):
        _check_same_interpreter(self, other)
        self.value = other.value
        self.bdim = other.bdim
