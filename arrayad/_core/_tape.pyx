# cython: language_level=3
"""The tape's backward engine: the topological order, the accumulation of cotangents, the call
of the nodes' VJP rules (NOTE [consumed cotangents]); the nodes themselves are in ``_arrays.pyx``.

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

from cpython.ref cimport Py_REFCNT

from ._base cimport (ThreadState, Primitive, _host, _add_p, _inplace_type, backend_of, fix_scalar,
                     _state)
from ._arrays cimport Node, Array, Tensor, _bind, _new_tensor
from ._interp cimport _reads_mask
from ._small_arith import add as _small_add
from ._zeros cimport (_Mask, _both, _mask_of, _mark, _unmark, _carry, _writable_like, UnaryVJP,
                      PartialVJP, SumVJP)


# ---------------------------------------------------------------------------------------------
# The backward engine

cdef unsigned long _epoch = 0   # one per topological sort: a node marked with it is seen


cdef void _check_not_updated(Node node) except *:
    """Raise if an array the node saved, and whose value its VJP reads, was updated in place after
    the node was made (a rule that reads only the shape - getitem, sum - does not mind)."""
    if node.inputs is None:
        return
    cdef long mask = -1
    cdef bint masked = False
    cdef Py_ssize_t i
    cdef tuple reads
    for i in range(len(node.inputs)):
        a = node.inputs[i]
        if not (isinstance(a, Array) and (<Array>a)._updated_at > node._made_at):
            continue
        if not masked:   # (what the rule reads, asked only of an updated input: seldom)
            reads = (<Primitive>node.prim).vjp_reads
            if reads is not None and node._edges is not None:
                mask = _reads_mask(reads, node._edges)
            masked = True
        if (mask >> (i + 1)) & 1:
            raise RuntimeError(
                f"one of the variables needed for gradient computation has been modified by an "
                f"inplace operation: an input of {node.name()} of shape {tuple(a.shape)} was "
                f"updated in place after {node.name()} saved it. Update a copy instead "
                f"(y = y + v, or y = y.clone() before the update), or compute the update after "
                f"the backward pass.")


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


cdef inline void _accum_slot(list slot, Py_ssize_t i, object ct):
    """slot[i] += ct. In place when that is invisible to everyone: a large writeable NumPy
    array (NOTE [consumed cotangents]: below, a fresh one costs less) that owns its data and that
    only this slot refers to (so no saved value, user array or other cotangent shares it), the
    sum having its shape and dtype; otherwise a new array."""
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
    if type(a) is _inplace_type and Py_REFCNT(a) == 2 and a.nbytes >= _CONSUME_BYTES \
            and _writable_like(a, ct):
        a += ct
        if st.zeros:
            if m is None:
                _unmark(st, a)
            else:
                _mark(st, a, m)
        return
    if type(a) is _inplace_type and type(ct) is _inplace_type and st.staging is None:
        # (the NumPy backend's addition, as bind would call it, without bind's dispatch)
        total = _small_add(a, ct)
        slot[i] = _mark(st, total if type(total) is _inplace_type else fix_scalar(total), m)
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


cdef dict _units = {}   # dtype -> a read-only NumPy 0-d 1 of it


cpdef object unit_cotangent(object raw):
    """1 shaped like the one-element output ``raw`` (a raw array), the seed of a backward pass:
    for a 0-d NumPy output a cached read-only constant (the engine never writes into a cotangent
    that anything else refers to, and a gradient handed out is copied when it is this constant,
    as for the identity); else the backend's ``ones_like``."""
    if type(raw) is not _inplace_type or raw.ndim != 0:
        return backend_of(raw).ones_like(raw)
    one = _units.get(raw.dtype)
    if one is None:
        one = backend_of(raw).ones_like(raw)
        one.flags.writeable = False
        _units[raw.dtype] = one
    return one


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
    if not isinstance(node.prim, Primitive):
        # (every operation, autograd.Function's included, is a Primitive with its rules: the
        # engine has no other kind of node to call)
        raise TypeError(f"arrayad: the tape node {node.name()} holds {type(node.prim).__name__}, "
                        f"not a Primitive; record operations with bind()")
    _check_not_updated(node)   # NOTE [in-place after use]
    if node.n_outputs > 1:
        for i in range(node.n_outputs):
            if slot[i] is None:
                slot[i] = _host.zeros_like(ans[i] if not isinstance(ans[i], Tensor) else (<Tensor>ans[i])._value)
        g = tuple(slot)
    else:
        g = slot[0]
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
            # (the rule shapes of most elementwise functions called as C methods: no
            # argument tuple)
            if params:
                out.append(f(g, ans, *args, **params))
            elif type(f) is UnaryVJP and len(args) == 1:
                out.append((<UnaryVJP>f).vjp(g, ans, args[0]))
            elif type(f) is PartialVJP and len(args) == 2:
                out.append((<PartialVJP>f).vjp(g, ans, args[0], args[1]))
            elif type(f) is SumVJP and len(args) == 2:
                out.append((<SumVJP>f).vjp(g, ans, args[0], args[1]))
            else:
                out.append(f(g, ans, *args))
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


def consumed_cotangents():
    """How many products this thread wrote into a consumed cotangent so far (for the tests)."""
    return _state().consumed
