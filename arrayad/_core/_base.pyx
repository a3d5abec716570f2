# cython: language_level=3
"""The core's foundation: what a caller sets and what the core is handed.

  * the per-thread state and the per-context modes (NOTE [thread state]);
  * the host interface (NOTE [host interface]) and the primitives behind Python's operators;
  * the backends of raw arrays, and ``Primitive`` with its direct call on raw arrays;
  * ``Meta`` (NOTE [saved values] in ``_interp.pyx``) and the base class of the interpreters
    (NOTE [interpreters] in ``_interp.pyx``), which ``bind`` needs to see;
  * the registry of results the tape's nodes share (NOTE [shared results]), beside its state.

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
"""

from contextvars import ContextVar

from cpython.object cimport PyObject
from cpython.pystate cimport PyThreadState, PyThreadState_Get, PyThreadState_GetDict
from cpython.contextvars cimport PyContextVar_Get, PyContextVar_Set, PyContextVar_Reset
from cpython.ref cimport Py_XDECREF
from cpython.weakref cimport PyWeakref_NewRef

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

# ---------------------------------------------------------------------------------------------
# The host interface (NOTE [host interface])

cdef class Host:
    """What the core calls in the Python layer. Every field is required."""

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
cdef Primitive _mul_p = None, _add_p = None, _sub_p = None, _div_p = None, _neg_p = None


_OPERATORS = ("add", "subtract", "multiply", "divide", "floor_divide", "remainder", "pow",
              "matmul", "negative", "positive", "abs", "bitwise_and", "bitwise_or",
              "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift", "bitwise_invert",
              "equal", "not_equal", "less", "less_equal", "greater", "greater_equal")


def install_operators(dict prims):
    """The primitives behind Python's operators (all of ``_OPERATORS``). The dunders bind them
    directly; the namespace functions of the same names are plain binds of the same primitives,
    so both spellings behave identically."""
    global _mul_p, _add_p, _sub_p, _div_p, _neg_p
    missing = [n for n in _OPERATORS if n not in prims and n not in _op]
    wrong = [n for n, p in prims.items() if not isinstance(p, Primitive)]
    if missing or wrong:
        raise TypeError(f"arrayad internal error: install_operators: missing {missing}, "
                        f"not primitives {wrong}")
    _op.update(prims)
    _mul_p = _op["multiply"]
    _add_p = _op["add"]
    _sub_p = _op["subtract"]
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
    cdef bint numpy_array = False
    # (the common case first: NumPy arrays and Python numbers only are NumPy's, whatever the
    # arrays' dimensions, and nothing needs converting)
    for a in args:
        if type(a) is _inplace_type:
            numpy_array = True
        elif not (type(a) is float or type(a) is int or a is None):
            break
    else:
        if numpy_array:
            b = _backend_of_type.get(_inplace_type)
            if b is not None:
                return b
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


cdef type _inplace_type = None   # numpy.ndarray, registered by the NumPy adapter


def register_inplace_accumulation(type t):
    global _inplace_type
    _inplace_type = t


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


cdef ThreadState _state():
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


cdef tuple _open_transforms():
    cdef PyObject *v = NULL
    PyContextVar_Get(_transforms, NULL, &v)
    value = <tuple>v
    Py_XDECREF(v)
    return value


cdef bint _grad_enabled() except -1:
    cdef PyObject *v = NULL
    PyContextVar_Get(_grad_mode, NULL, &v)
    cdef bint on = v == Py_True
    Py_XDECREF(v)
    return on


cdef void _set_grad_enabled(bint mode) except *:
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
    batch(args, dims, **params) -> (out, out_dim); dims has None for unbatched args. With
    ``batch_gets_interpreter`` set, the batching interpreter passes itself,
    ``batch(args, dims, interpreter=..., **params)``: a rule that runs user code under a fresh
    ``vmap`` (autograd.Function's ``vmap`` staticmethod or ``generate_vmap_rule``) must hand it
    the enclosing vmap's size and ``randomness``, which only the interpreter knows.

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
        self.batch_gets_interpreter = False

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


cdef object _call_impl(Primitive prim, tuple args, dict params):
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
        if type(out) is not tuple and isinstance(out, tuple):
            # A tuple subclass is a rule-defined primitive's record of this call (its outputs,
            # final already, and what its own rules need, such as autograd.Function's ctx): it
            # stays as it is, so that the tape node keeps it as its output (``ans``) and the
            # node's VJP rule finds it there (NOTE [Function as a primitive]).
            return out
        return tuple([fix_scalar(o) for o in out])
    f = _scalar_fix.get(type(out))
    if f is not None:
        return f(out)
    return out


# ---------------------------------------------------------------------------------------------
# What a node keeps of an input it does not save (NOTE [saved values] in _interp.pyx)

cdef class Meta:
    """The shape and arrayad dtype of a value a node did not keep."""

    def __repr__(self):
        return f"<Meta shape={self.shape} dtype={self.dtype}>"

    @property
    def ndim(self):
        return len(self.shape)


# ---------------------------------------------------------------------------------------------
# The shared-result registry of the tape's nodes (its state is ThreadState.results)

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
# its entries to that thread's next sweep. A NumPy array of fewer than ``_SHARE_MIN_ELEMENTS``
# elements is not registered: there the registry's weak references cost more than the pass.


cdef tuple _live_entry(dict results, object prim, object x):
    """The registry entry of ``prim`` applied to this very ``x``, or None (an entry whose input
    died may sit under the same id as a new object)."""
    entry = results.get((prim, id(x)))
    if entry is not None and (<tuple>entry)[0]() is x:
        return <tuple>entry
    return None


# Below this many elements a NumPy array's partner result costs less to compute again than to
# share (measured on grad of sin(x) * cos(x) & co.: sharing cost 1 us more at 16 elements, and
# saved 3 us at 256 and 16 us at 1,024).
cdef Py_ssize_t _SHARE_MIN_ELEMENTS = 64


cdef void _share_result(Primitive prim, object x, object out, object node) except *:
    """Register ``out = prim(x)``, the result of the tape node ``node`` (NOTE [shared
    results]); hand the partner's result, if recorded, to both nodes."""
    if type(x) is _inplace_type and x.size < _SHARE_MIN_ELEMENTS:
        return
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
            if (partner_node.prim is prim.reuses and isinstance(prim.reuses, Primitive)
                    and (<Primitive>prim.reuses).reuses is prim):
                partner_node.partner_result = out
    if len(results) >= st.results_sweep_at:   # drop the entries whose values have died
        for k in [k for k, e in results.items() if e[0]() is None or e[1]() is None]:
            del results[k]
        # (a big graph may hold many live entries: sweep again only when it has doubled)
        st.results_sweep_at = max(64, 2 * len(results))
    results[(prim, id(x))] = entry


cdef void _forget_result(Primitive prim, object x, object node) except *:
    """Registry entries the released tape node ``node`` (of ``prim``, on the raw input ``x``)
    no longer needs (NOTE [shared results]): its partner's result, which its rule has read, and
    its own once the partner's node has run too (an entry would otherwise only wait for the next
    sweep)."""
    cdef dict results = _state().results
    partner = _live_entry(results, prim.reuses, x)
    partner_node = None
    if partner is not None:
        partner_node = partner[2]()
        del results[(prim.reuses, id(x))]
    own = _live_entry(results, prim, x)
    if (own is not None and own[2]() is node
            and (partner_node is None or partner_node.released)):
        del results[(prim, id(x))]


def shared_result_count():
    """How many entries this thread's registry holds (tests check that it stays bounded)."""
    return len(_state().results)


# ---------------------------------------------------------------------------------------------
# The base class of the interpreters (NOTE [interpreters] in _interp.pyx)

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

    def owns_new_arrays(self):
        """Whether arrays made inside without an array argument (``zeros``, ``arange``, random
        draws) are constants of this transform: True, but for forward_ad's dual levels, which
        are eager code."""
        return True

    def note_new_array(self, raw):
        """``raw`` was just made inside this transform from Python data (``zeros``, ``arange``,
        ``asarray([0, 2])``): no one outside holds it. ``jit`` stages such an array as a frozen
        constant, which its passes may fold (NOTE [captured arrays] in ``arrayad/_jit``); the
        other transforms have nothing to note."""

    def placement(self):
        """(backend, device) of the arrays made inside without an array argument: those of the
        first input this transform was given (its ``frame``, the raw array under it), or None
        while it has none."""
        if self.frame is None:
            return None
        b = backend_of(self.frame)
        return b, b.device_of(self.frame)

    def random_per_batch_element(self):
        """How a random draw inside this transform is taken: False, as it is; True, one sample
        per batch element (vmap's ``randomness="different"``); or it raises where it cannot be
        (vmap's ``"error"``, a staged function that would replay the same numbers)."""
        return False

    def __repr__(self):
        state = "alive" if self.alive else "dead"
        return f"<{type(self).__name__} level={self.level} {state}>"
