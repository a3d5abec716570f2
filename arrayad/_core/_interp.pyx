# cython: language_level=3
"""The interpreters of the transforms: reverse mode (``GradInterpreter``), forward mode
(``JvpInterpreter``), batching (``BatchInterpreter``) and their tracers; the values a node of
reverse mode keeps (NOTE [saved values]).

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

What a transform decides for its values outside ``process`` is declared by its classes too, so
that no code elsewhere asks which transform a tracer belongs to:

* the tracer's ``_concrete_value(what)``: its value one level down for a Python conversion
  (``float``, ``bool``, ``np.asarray``...), or the error saying why not (grad and jvp: it would
  drop a derivative; vmap: the value differs per batch element; jit: it is being staged);
* its ``_describe()`` (what ``repr`` prints) and ``_inplace_error(target)`` (vmap's message for a
  batched value written into an unbatched array);
* its class attributes ``derivative`` ("reverse", "forward" or None) and ``batches``, and
  ``_is_constant()`` (the level adds nothing: no node, no tangent, no batch axis), which decide
  whether a value needs a derivative (``autograd.Function``, custom rules) or is a constant;
* the interpreter's ``random_per_batch_element()``: how a random draw inside it is taken (vmap's
  ``randomness``; jit refuses, as it would replay the same numbers);
* its ``owns_new_arrays()`` and ``placement()``: whether arrays made inside without an array
  argument become its constants (not in forward_ad's dual levels, which are eager code) and on
  which backend and device (those of its first input);
* a batching rule that needs to know the vmap it batches for (its size, its randomness) gets the
  interpreter itself (the primitive's ``batch_gets_interpreter``).

A new transform (a staging tracer for ``jit``, say) is one more pair of classes: a ``Tracer``
subclass with ``value`` and the properties ``shape``/``dtype``, and an ``Interpreter`` subclass
overriding ``process`` (and ``lift`` if constants must become tracers, and the methods above
where the defaults do not fit); its Python entry point opens it with ``with`` and unwraps the
outputs. ``bind`` and the other interpreters need no change: ``process`` is a virtual (cpdef)
method, so the new class may even be written in Python.

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
"""

from cpython.tuple cimport PyTuple_New

from ._base cimport (_is_scalar, _put, ThreadState, Primitive, Interpreter, Meta, _host,
                     _open_transforms, _grad_enabled, _set_grad_enabled, _share_result)
from ._arrays cimport (Node, Tensor, Tracer, raw_value, _bind, _new_node, _is_inexact,
                       dtype_of, shape_of, _alias)
from ._arrays import leaf_node


def in_transform():
    """Whether a transform of ``arrayad.func`` is open in this context (forward_ad's dual levels
    do not count: the eager tape works inside them, as in torch)."""
    for f in _open_transforms():
        if not (isinstance(f, JvpInterpreter) and (<JvpInterpreter>f).dual_level):
            return True
    return False


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

cdef object _meta(object v):
    if v is None or _is_scalar(v):
        return v
    cdef Meta m = Meta.__new__(Meta)
    m.shape = shape_of(v)
    m.dtype = dtype_of(v)
    return m


cdef long _reads_mask(tuple reads, tuple edges):
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


cdef tuple _saved_inputs(tuple reads, tuple vals, tuple edges, object out):
    """(inputs, output) a node keeps for the rules of the arguments with an edge."""
    cdef long mask = _reads_mask(reads, edges)
    cdef Py_ssize_t i, n = len(vals)
    if mask == -1:
        return vals, out
    cdef long all_inputs
    if n < 62:   # (every input is read: the tuple as it is)
        all_inputs = ((<long>1 << n) - 1) << 1
        if mask & all_inputs == all_inputs:
            return vals, (out if mask & 1 else None)
    cdef list kept = list(vals)
    for i in range(n):
        if not (mask >> (i + 1)) & 1:
            kept[i] = _meta(vals[i])
    return tuple(kept), (out if mask & 1 else None)


# ---------------------------------------------------------------------------------------------
# The interpreters (NOTE [interpreters]); their base class is in _base.pyx

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
            self.frame = raw_value(value)
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
        cdef Py_ssize_t i, n = len(args)
        cdef tuple tvals = PyTuple_New(n)   # (the values one level down, the edges: filled
        cdef tuple edges = PyTuple_New(n)   # in place, no lists to convert)
        cdef bint record = False
        for i in range(n):
            a = args[i]
            e = None
            if isinstance(a, GradTracer) and (<GradTracer>a)._interp is self:
                v = (<GradTracer>a).value
                if (<GradTracer>a)._node is not None:   # (else a constant of this level)
                    e = ((<GradTracer>a)._node, (<GradTracer>a)._idx)
                    record = True
            elif isinstance(a, Tensor):   # NOTE [in-place after use]: keep it as it is now
                v = _alias(<Tensor>a)
            else:
                v = a
            _put(tvals, i, v)
            _put(edges, i, e)
        out = _bind(prim, tvals, params)
        if not (record and prim.differentiable and _grad_enabled()):
            # a constant of this level (NOTE [everything inside is arrayad])
            if prim.multiple_results:
                return tuple([_new_grad_tracer(self, o, None, 0) for o in out])
            return _new_grad_tracer(self, out, None, 0)
        if prim.multiple_results:
            node = _new_node(prim, tvals, params, out, edges, len(out), False)
            return tuple([_new_grad_tracer(self, o, node if _is_inexact(o) else None, i)
                          for i, o in enumerate(out)])
        if prim.vjp_reads is not None and not self.keep_saved:   # NOTE [saved values]
            saved, ans = _saved_inputs(prim.vjp_reads, tvals, edges, out)
            node = _new_node(prim, saved, params, ans, edges, 1, False)
        else:
            node = _new_node(prim, tvals, params, out, edges, 1, False)
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

    def owns_new_arrays(self):
        return not self.dual_level   # (a dual level's block is eager code)

    def output(self, x):
        """(value one level down, tangent or None) of a result of the traced function."""
        if isinstance(x, DualTracer) and (<DualTracer>x)._interp is self:
            return (<DualTracer>x).value, (<DualTracer>x).tangent
        return x, None

    cpdef object lift(self, object value):
        return _new_dual(self, value, None)

    cpdef object process(self, Primitive prim, tuple args, dict params):
        cdef Py_ssize_t i, n = len(args)
        cdef tuple tprimals = PyTuple_New(n)   # (filled in place, no lists to convert)
        cdef tuple tangents = PyTuple_New(n)
        for i in range(n):
            a = args[i]
            if isinstance(a, DualTracer) and (<DualTracer>a)._interp is self:
                v = (<DualTracer>a).value
                t = (<DualTracer>a).tangent
            else:
                v = a
                t = None
            _put(tprimals, i, v)
            _put(tangents, i, t)
        out = _bind(prim, tprimals, params)
        tout = None
        if prim.differentiable:
            for t in tangents:
                if t is not None:   # (else only constants of this level: no tangent)
                    # (no keyword dict to build for the many primitives without params)
                    tout = (prim.jvp(tangents, out, *tprimals, **params) if params
                            else prim.jvp(tangents, out, *tprimals))
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
        interp.frame = raw_value(primal)
    return _new_dual(interp, primal, tangent)


# -- batching (vmap)

cdef bint _lined_up(tuple vals, list dims, int* out_dim):
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
            self.frame = raw_value(value)
        return _new_batch(self, value, bdim)

    cpdef object lift(self, object value):
        return _new_batch(self, value, UNBATCHED)

    def random_per_batch_element(self):
        if self.randomness == "error":
            raise RuntimeError(
                "vmap: called random operation while in randomness error mode. Please either use "
                "the 'same' or 'different' randomness flags on vmap or perform the randomness "
                "operation out of vmap")
        return self.randomness == "different"

    cpdef object process(self, Primitive prim, tuple args, dict params):
        cdef int out_dim_c = 0
        cdef bint batched = False
        cdef Py_ssize_t i, n = len(args)
        cdef tuple tvals = PyTuple_New(n)   # (filled in place, no list to convert)
        cdef list dims = [None] * n
        for i in range(n):
            a = args[i]
            if isinstance(a, BatchTracer) and (<BatchTracer>a)._interp is self:
                v = (<BatchTracer>a).value
                # (bdim < 0: a value of this level that is not batched, NOTE [everything
                # inside is arrayad])
                if (<BatchTracer>a).bdim >= 0:
                    dims[i] = (<BatchTracer>a).bdim
                    batched = True
            else:
                v = a
            _put(tvals, i, v)
        rule = prim.batch
        if not batched:   # only unbatched values of this level: one call for the whole batch
            out, out_dim = _bind(prim, tvals, params), None
        elif prim.elementwise and _lined_up(tvals, dims, &out_dim_c):
            out, out_dim = _bind(prim, tvals, params), out_dim_c
        elif rule is None:
            out, out_dim = _host.batch_fallback(prim, list(tvals), dims, params, self)
        elif prim.batch_gets_interpreter:
            # (the rule runs user code under a vmap of its own: it asks this one its size and
            # randomness)
            out, out_dim = rule(list(tvals), dims, interpreter=self, **params)
        else:
            out, out_dim = (rule(list(tvals), dims, **params) if params
                            else rule(list(tvals), dims))
        if prim.multiple_results:
            if not isinstance(out_dim, (tuple, list)):
                out_dim = (out_dim,) * len(out)
            return tuple([_new_batch(self, o, UNBATCHED if d is None else d)
                          for o, d in zip(out, out_dim)])
        return _new_batch(self, out, UNBATCHED if out_dim is None else out_dim)


cdef BatchTracer _new_batch(Interpreter interp, object value, int bdim):
    cdef BatchTracer t = BatchTracer.__new__(BatchTracer)
    t._interp = interp
    t.value = value
    t.bdim = bdim
    return t


def new_batch(BatchInterpreter interp not None, value, int bdim):
    return _new_batch(interp, value, bdim)


cdef inline void _check_same_interpreter(Tracer self, Tracer other) except *:
    if other._interp is not self._interp:
        raise _host.inplace_level_error(self, other)


cdef object _differentiated_value(Tracer t, str kind, str what):
    """The value below a grad or jvp tracer ``t`` for the conversion ``what``, unless that
    would drop a derivative: a constant of the level or an integer value has none to lose
    (library code's int(n), float(scale), np.asarray(mask) work), nor has a truth value."""
    if what not in ("bool", "format") and not t._is_constant() and _is_inexact(t.value):
        raise RuntimeError(
            f"{kind}: calling {what}() on an array being differentiated would drop its "
            f"derivative (the result is a plain Python/NumPy value). Keep it an array and use "
            f"arrayad functions; if you really want a constant, call x.detach() first.")
    return t.value


cdef class GradTracer(Tracer):
    derivative = "reverse"

    def __copy__(self):
        return _new_grad_tracer(self._interp, self.value, self._node, self._idx)

    def _is_constant(self):
        return self._node is None

    def _concrete_value(self, str what):
        return _differentiated_value(self, "grad", what)

    def _replace(self, GradTracer other not None):
        _check_same_interpreter(self, other)
        self.value = other.value
        self._node = other._node
        self._idx = other._idx


cdef class DualTracer(Tracer):
    derivative = "forward"

    def __copy__(self):
        return _new_dual(self._interp, self.value, self.tangent)

    def _is_constant(self):
        return self.tangent is None

    def _concrete_value(self, str what):
        return _differentiated_value(self, "jvp", what)

    def _describe(self):
        return (f"DualTracer(level={self._interp.level}, primal={self.value!r}, "
                f"tangent={self.tangent!r})")

    @property
    def primal(self):
        return self.value

    def _replace(self, DualTracer other not None):
        _check_same_interpreter(self, other)
        self.value = other.value
        self.tangent = other.tangent


cdef class BatchTracer(Tracer):
    batches = True

    def __copy__(self):
        return _new_batch(self._interp, self.value, self.bdim)

    def _is_constant(self):
        return self.bdim == UNBATCHED

    def _concrete_value(self, str what):
        if self.bdim == UNBATCHED:   # (the same value for every batch element)
            return self.value
        if what == "bool":
            raise RuntimeError(
                "vmap: It looks like you're attempting to use a Tensor in some data-dependent "
                "control flow (if/while on an array value). The value differs per batch "
                "element: use arrayad.where(condition, a, b) to select elementwise instead.")
        raise RuntimeError(
            f"vmap: It looks like you're calling {what}() on an array inside vmap. The value "
            f"differs per batch element; keep it an array (use arrayad functions) or move the "
            f"conversion out of the vmapped function.")

    def _describe(self):
        return f"BatchTracer(level={self._interp.level}, bdim={self.bdim}, value={self.value!r})"

    def _inplace_error(self, target):
        return RuntimeError(
            "vmap: an in-place operation would write a batched value into an unbatched array "
            "(one made outside vmap, or with zeros(shape) inside it). Create the array with "
            "zeros_like(batched_input) or build the result with where()/concat instead.")

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
