"""Declarations (NOTE [declarations], below) and the helpers that make the common rule shapes
one line each.

A primitive's rules (see ``arrayad._core._core.Primitive``):

* ``vjp``: a tuple with one function per positional argument, ``f(g, ans, *args, **params)``
  returning that argument's cotangent (the engine calls only those an input needs), or for variadic
  primitives one function returning a tuple;
* ``jvp``: ``f(tangents, ans, *args, **params)`` returning the output tangent (None for zero);
  ``defjvp`` builds it from one function per argument, summing the parts that are not zero;
* ``batch``: ``f(args, dims, **params) -> (out, out_dim)``.

Rules are written with arrayad operations (``ops.*``, NOTE [internal namespace] in
``_namespace``), never raw backend calls, so that they can be differentiated and batched again
(hessian = jacfwd(jacrev), vmap(grad), ...). The arguments a rule sees are values of a lower
level (raw arrays, eager Tensors, tracers of outer transforms).
"""

import dis
import warnings
from inspect import CO_VARARGS, CO_VARKEYWORDS

from ._namespace import ops

from .._core._core import (Primitive, bind, broadcast_like, conj_if_complex,  # noqa: F401
                           dtype_of, forward_result, is_complex, register_primitive, shape_of,
                           structural_zeros, unbroadcast, zeros_mask)
# The Python operators of the derivative formulas, spelled as functions: ``minus(a, b)`` is
# ``a - b`` for any operands (tracers, Tensors, every backend's arrays), computed without
# NumPy's dispatch when both are small float64 NumPy arrays or one is a Python number (NOTE
# [small arithmetic]): on small arrays a formula's operators cost more than the operation it
# differentiates.
from .._core._small_arith import (add as plus, divide as divided,  # noqa: F401
                                  multiply as times, negative as negated, subtract as minus)

PY_SCALARS = (int, float, complex, bool)


# ---------------------------------------------------------------------------------------------
# NOTE [declarations]: one declaration per primitive. A module of arrayad/_ops makes one
# ``decl = Declarations(globals())``; ``decl.primitive(...)`` creates a primitive with all its
# rules and its public function, ``decl.export``/``decl.composite`` declare the other public
# functions. The module's ``__all__``, ``PRIMS`` and ``COMPOSITES``, the internal namespace
# (NOTE [internal namespace]) and docs/coverage.md are derived from these declarations. E.g.
#
#     flip_p = decl.primitive("flip", lambda xp, x, axis=None: xp.flip(x, axis=axis),
#                             vjp=(lambda g, ans, x, axis=None: bind(flip_p, g, axis=axis),),
#                             jvp=LINEAR, batch=axis_batch(), api="x, /, *, axis=None",
#                             doc="Reverse the order of elements along ``axis``.")
#
# The common shapes are one line each: ``unary``/``binary``/``linear_unary`` (elementwise.py),
# ``reduction`` (reductions.py), ``LINEAR`` (the JVP of a linear primitive), ``ELEMENTWISE`` and
# ``axis_batch`` (batching rules), ``multiple_results=True`` (tuple results); a declaration
# with no VJP is nondifferentiable. A rule that needs its own primitive refers to it by its
# module-level name (looked up when the rule runs) or is made by a ``per_primitive`` factory.

class _PerPrimitive:
    """A rule that needs its primitive (``bind(p, ...)`` inside): built once ``p`` exists."""
    __slots__ = ("make",)

    def __init__(self, make):
        self.make = make


def per_primitive(make):
    """Mark ``make(prim) -> rule`` as a rule factory for ``Declarations.primitive``."""
    return _PerPrimitive(make)


def _linear_jvp(p):
    # (linear in its first argument: the JVP is the primitive applied to the tangent, with the
    # other arguments - getitem's index arrays - as they are)
    return lambda t, ans, x, *rest, **params: bind(p, t, *rest, **params)


LINEAR = per_primitive(lambda p: (_linear_jvp(p),))


def moves_zeros(rule):
    """``rule(g, ans, *args, **params)`` of a primitive that only moves or copies elements
    (reshape, permute_dims, flip...), whose structural zeros (NOTE [strong zeros] in the core)
    move with them: the mask of the result is the same rule applied to ``g``'s mask. (A rule
    that adds elements together, a sum or ``unbroadcast``, must not be wrapped: a sum of
    booleans is not a mask.)"""
    def moved(g, *args, **params):
        out = rule(g, *args, **params)
        mask = zeros_mask(g)
        return out if mask is None else structural_zeros(
            out, lambda: rule(mask(), *args, **params))
    return moved


# The JVP of a primitive that moves elements: LINEAR's, with the tangent's structural zeros.
MOVING = per_primitive(lambda p: (moves_zeros(_linear_jvp(p)),))


def _rule(rule, p):
    return rule.make(p) if isinstance(rule, _PerPrimitive) else rule


# ---------------------------------------------------------------------------------------------
# NOTE [primitive facts]: what the passes of ``arrayad.jit`` (``arrayad/_jit``) may assume of a
# primitive, declared with it (``decl.primitive(..., value_shaped=True)``) rather than kept by
# name in the passes. The core's ``Primitive`` has fixed slots, so the facts live here, by name
# (``facts(prim)``); an undeclared primitive (a program's, autograd.Function's) has none.
#
# * ``value_shaped``: the output's shape depends on the input's values (nonzero, unique_*):
#   a staged program cannot fix it. True, or ``f(*args, **params)`` for "in this call"
#   (getitem with a boolean mask).
# * ``shape_only``: the result depends on the argument's shape and dtype only (zeros_like):
#   a constant of a program, whose signature fixes both.
# * ``identity(ins, out, params)``: whether this application hands back its first input
#   unchanged (``ins``, ``out``: the program's typed variables).
# * ``unit``: ``(value, positions)``: with the argument at one of ``positions`` equal to
#   ``value``, the result is the other argument (x * 1, 1 * x, x ** 1), exactly.
# * ``negates``: the primitive is -x; ``absorbs_negation``: the name of ``g`` with
#   ``f(a, -b) == g(a, b)`` and ``f(-a, b) == g(b, a)`` (add: subtract); ``odd``: ``f(-a, b) ==
#   -f(a, b) == f(a, -b)`` (multiply). Exact in IEEE arithmetic and integer wrap-around.
# * ``side_effects``: never dropped or merged by dead-code or common-subexpression passes.
# * ``fusible``: elementwise on scalars (each output element from the same-index input
#   elements), so a fusion pass may join it to its neighbours; by default what is declared
#   elementwise (the ``ELEMENTWISE`` batching rule).
# * ``fresh``: the backend's result is a new array, never an argument or a view of one (a
#   reduction), so the replay may hand a buffer it read back to its pool (NOTE [buffer pool] in
#   ``_jit/passes.py``).

class Facts:
    """The facts of one primitive (NOTE [primitive facts])."""
    __slots__ = ("value_shaped", "shape_only", "identity", "unit", "negates",
                 "absorbs_negation", "odd", "side_effects", "fusible", "fresh")

    def __init__(self, value_shaped=False, shape_only=False, identity=None, unit=None,
                 negates=False, absorbs_negation=None, odd=False, side_effects=False,
                 fusible=False, fresh=False):
        self.value_shaped = value_shaped
        self.shape_only = shape_only
        self.identity = identity
        self.unit = unit
        self.negates = negates
        self.absorbs_negation = absorbs_negation
        self.odd = odd
        self.side_effects = side_effects
        self.fusible = fusible
        self.fresh = fresh


NO_FACTS = Facts()
FACTS = {}   # primitive name -> Facts


def facts(prim):
    """The declared facts of ``prim`` (NOTE [primitive facts])."""
    return FACTS.get(prim.name, NO_FACTS)


# Every declared primitive by name (the core's registry also holds those that tests and
# autograd.Function create), and every module's Declarations, in import order.
DECLARED = {}
MODULES = []


class Declarations:
    """What one module of ``arrayad/_ops`` declares (NOTE [declarations])."""

    def __init__(self, module_globals, namespace=ops, *, public_module=None):
        self._globals = module_globals
        self.namespace = namespace
        # (the __module__ of generated public functions: the declaring module by default)
        self.public_module = public_module or module_globals["__name__"]
        self.all = module_globals.setdefault("__all__", [])
        self.prims = module_globals.setdefault("PRIMS", {})
        self.composites = module_globals.setdefault("COMPOSITES", set())
        self.primitive_of = {}    # public name -> the primitive it binds
        self.untraced = set()     # public names that take no array to trace
        MODULES.append(self)

    def export(self, fn=None, *, name=None, primitive=None, traced=True):
        """Declare ``fn`` a public function (decorator): in ``__all__`` and the namespace.
        ``primitive``: the primitive it binds (for docs/coverage.md), when it is not declared
        with it (``asarray``: ``copy``); ``traced=False``: it takes no array to differentiate
        or batch (shapes, dtypes, Python data, random state), so no rules are expected."""
        def declare(fn):
            n = name or fn.__name__
            if primitive is not None:
                self.primitive_of[n] = primitive
            if not traced:
                self.untraced.add(n)
            if n not in self.all:
                self.all.append(n)
            self._globals[n] = fn
            setattr(self.namespace, n, fn)
            return fn
        return declare if fn is None else declare(fn)

    def composite(self, fn=None, *, name=None, traced=True):
        """Declare ``fn`` a public function written with other arrayad functions (no rules of
        its own: its derivatives come from the primitives it calls)."""
        def declare(fn):
            self.composites.add(name or fn.__name__)
            return self.export(fn, name=name, traced=traced)
        return declare if fn is None else declare(fn)

    def glue(self, fn):
        """Declare a private function the core or the transforms call (``_getitem``...)."""
        setattr(ops, fn.__name__, fn)
        return fn

    def primitive(self, name, impl=None, *, xp_name=None, vjp=None, variadic_vjp=None,
                  reads=None, jvp=None, full_jvp=None, batch=None, multiple_results=False,
                  differentiable=None, api=None, args=None, omit_none=(),
                  public=None, key=None, doc=None, **facts_kw):
        """Create, register and return a primitive with all its rules.

        * ``impl(xp, *args, **params)``, or ``xp_name`` (default: ``name``) a backend function;
        * ``vjp``: one rule per positional argument, ``f(g, ans, *args, **params)``, and
          ``reads`` the saved values each reads (``defvjp``); ``variadic_vjp``: one rule for all
          arguments returning a tuple; with neither, the primitive is not differentiable (its
          outputs are constants: integer/bool results, or a derivative of zero almost
          everywhere);
        * ``jvp``: one rule per argument ``f(t, ans, *args, **params)`` (summed), or ``LINEAR``
          (the primitive applied to the tangent); ``full_jvp``: ``f(tangents, ans, *args,
          **params)``;
        * ``batch``: ``f(args, dims, **params) -> (out, out_dim)``, or a ``per_primitive`` factory;
        * the public function: ``api`` a signature (``"x, /, *, axis=None"``) from which a
          function calling ``bind`` directly is generated (the positional-only parameters, or
          ``args``, are the primitive's arguments, the rest its keyword parameters), or
          ``public`` a hand-written function (normalizing its arguments before ``bind``);
          ``omit_none``: keyword parameters left out of the call when None (``dtype``);
        * ``key``: the name in ``PRIMS`` when it differs from ``name``;
        * the facts the jit passes may rely on (NOTE [primitive facts]): ``value_shaped``,
          ``shape_only``, ``identity``, ``unit``, ``negates``, ``absorbs_negation``, ``odd``,
          ``side_effects``, ``fusible``, ``fresh``.
        """
        unknown = set(facts_kw) - set(Facts.__slots__)
        if unknown:
            raise TypeError(f"decl.primitive({name!r}): unknown arguments {sorted(unknown)}")
        if differentiable is None:
            differentiable = vjp is not None or variadic_vjp is not None
        p = primitive(name, impl, xp_name=xp_name, multiple_results=multiple_results,
                      differentiable=differentiable)
        if vjp is not None:
            defvjp(p, *(_rule(r, p) for r in vjp), reads=reads)
        elif variadic_vjp is not None:
            p.vjp = variadic_vjp
        jvp = _rule(jvp, p)
        if isinstance(jvp, (tuple, list)):
            defjvp(p, *(_rule(r, p) for r in jvp))
        elif full_jvp is not None:
            p.jvp = full_jvp
        if batch is not None:
            p.batch = _rule(batch, p)
        facts_kw.setdefault("fusible", p.elementwise and not multiple_results)
        FACTS[name] = Facts(**facts_kw)
        self.prims[key or name] = p
        DECLARED[name] = p
        if api is not None:
            public = _generate(name, p, api, args, omit_none, doc, self.public_module)
        if public is not None:
            self.export(public, primitive=p)
        return p


def _generate(name, prim, api, args, omit_none, doc, module):
    """The public function ``name(<api>)`` that calls ``bind(prim, ...)`` directly: no wrapper
    layer between the user and the dispatcher."""
    import inspect
    params = list(inspect.signature(eval(f"lambda {api}: None")).parameters.values())
    if args is None:
        args = [q.name for q in params if q.kind is q.POSITIONAL_ONLY]

    def call(skip):
        return ", ".join(list(args) + [f"{q.name}={q.name}" for q in params
                                       if q.name not in args and q.name not in skip])

    body = "".join(f"    if {n} is None:\n        return bind(_prim, {call(omit_none)})\n"
                   for n in omit_none[:1])
    scope = {"bind": bind, "_prim": prim}
    exec(f"def {name}({api}):\n{body}    return bind(_prim, {call(())})\n", scope)
    fn = scope[name]
    fn.__doc__ = doc
    fn.__module__ = module
    return fn


def primitive(name, impl=None, *, xp_name=None, multiple_results=False, differentiable=True):
    """Create and register a primitive. With neither ``impl`` nor ``xp_name``, the backend's
    function of the same name is called."""
    if impl is None and xp_name is None:
        xp_name = name
    return register_primitive(Primitive(name, impl, xp_name=xp_name,
                                        multiple_results=multiple_results,
                                        differentiable=differentiable))


def defvjp(prim, *per_arg, reads=None):
    """VJP rules, one per argument. ``reads``, when given, names for each argument the saved
    values its rule reads as data (a string of names among ``ans`` and the argument names
    ``x``/``x1``/``x2``...); what no rule reads is not kept (NOTE [saved values] in the core)."""
    prim.vjp = tuple(per_arg)
    prim.vjp_reads = None   # (rules replaced without a declaration keep everything)
    if reads is not None:
        set_vjp_reads(prim, reads)


def set_vjp_reads(prim, reads):
    """``reads``: per argument, the names (``"ans x2"``) its VJP rule reads as data."""
    masks = []
    for names in reads:
        mask = 0
        for name in names.split():
            mask |= 1 if name == "ans" else 1 << _arg_position(name)
        masks.append(mask)
    prim.vjp_reads = tuple(masks)


def _arg_position(name):
    """``x``/``x1`` -> 1, ``x2`` -> 2...: the bit of an argument in a ``vjp_reads`` mask."""
    if name == "x":
        return 1
    if name.startswith("x") and name[1:].isdigit():
        return int(name[1:])
    raise ValueError(f"unknown saved value {name!r}: expected ans, x, x1, x2...")


def names_read(fn):
    """The parameters of a derivative formula ``fn`` that its body reads, from its bytecode,
    as a string for ``defvjp(reads=...)``. Inferred rather than declared so that it cannot drift
    from the formula; anything unusual (a parameter captured by an inner function, varargs)
    counts as reading every parameter. A derivative given by the name of the argument it is
    (exp's ``"ans"``, the rule shapes read it without a call) reads that one."""
    if isinstance(fn, str):
        return fn
    code = fn.__code__
    params = code.co_varnames[:code.co_argcount]
    if code.co_cellvars or code.co_flags & (CO_VARARGS | CO_VARKEYWORDS):
        return " ".join(params)
    used = set()
    for ins in dis.get_instructions(code):
        if ins.opname.startswith("LOAD_FAST"):
            v = ins.argval
            used.update(v if isinstance(v, tuple) else (v,))
    return " ".join(p for p in params if p in used)


def defjvp(prim, *per_arg):
    """Forward rule from one function per argument: ``f(t, ans, *args, **params)``."""
    per_arg = tuple(per_arg)

    def jvp(tangents, ans, *args, **params):
        out = None
        for i, t in enumerate(tangents):
            if t is None or i >= len(per_arg) or per_arg[i] is None:
                continue
            part = per_arg[i](t, ans, *args, **params)
            out = part if out is None else ops.add(out, part)
        return out

    prim.jvp = jvp


# ---------------------------------------------------------------------------------------------
# Shapes

def ndim_of(x):
    return 0 if x is None or isinstance(x, PY_SCALARS) else len(shape_of(x))


def normalize_axis(axis, ndim):
    if axis < -ndim or axis >= max(ndim, 1):
        # (NumPy's words, which library code and its tests match)
        raise IndexError(f"axis {axis} is out of bounds for array of dimension {ndim}")
    return axis % ndim if ndim else 0


def normalize_axes(axis, ndim):
    """``None``/int/tuple -> a sorted tuple of non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, int):
        axis = (axis,)
    return tuple(sorted(normalize_axis(a, ndim) for a in axis))


def constant_like(x, make):
    """A constant raw array on the backend of ``x``: ``make(xp)``. Raw, so that it mixes with
    raw arrays, Tensors and tracers alike (a Tensor of the default backend would not)."""
    from ..backends import backend_of
    return make(backend_of(x).xp)


def arange_like(x, n):
    return constant_like(x, lambda xp: xp.arange(n))


def eye_like(x, n, k=0):
    from .._dtypes import to_backend
    return constant_like(x, lambda xp: xp.eye(n, n, k=k, dtype=to_backend(dtype_of(x), xp)))


# ---------------------------------------------------------------------------------------------
# Batching helpers. A batched value carries its batch dimension at ``dim``.

def move_to_front(x, dim):
    if dim is None or dim == 0:
        return x
    return ops.moveaxis(x, dim, 0)


def batch_size_of(args, dims):
    for a, d in zip(args, dims):
        if d is not None:
            return shape_of(a)[d]
    raise ValueError("arrayad internal error: no batched argument")


def materialize_batch(x, dim, size):
    """``x`` with the batch dimension in front, broadcasting an unbatched ``x``."""
    if dim is None:
        x = ops.asarray(x) if isinstance(x, PY_SCALARS) else x
        return ops.broadcast_to(ops.expand_dims(x, axis=0), (size,) + shape_of(x))
    return move_to_front(x, dim)


def batch_elementwise(prim):
    """Batching rule of an elementwise (broadcasting) primitive.

    Marks ``prim`` elementwise: the core handles the common case, batched values whose batch
    dims line up already, itself (``_lined_up``); this rule is the general case."""
    prim.elementwise = True

    def rule(args, dims, **params):
        # Batch dims to the front, each batched arg padded to the result's rank.
        out_rank = max(ndim_of(a) - (d is not None) for a, d in zip(args, dims))
        new = []
        for a, d in zip(args, dims):
            if d is None:
                new.append(a)
            else:
                a = move_to_front(a, d)
                missing = out_rank - (ndim_of(a) - 1)
                if missing:
                    a = ops.reshape(a, shape_of(a)[:1] + (1,) * missing + shape_of(a)[1:])
                new.append(a)
        return bind(prim, *new, **params), 0

    return rule


def batch_axis_params(prim, axis_params=("axis",)):
    """Batching rule of a unary op with integer axis parameters (reductions, flips, sorts...).

    The batch dim is moved to the front and every axis parameter is shifted by one. ``axis=None``
    means "all axes" and becomes all the logical axes.
    """

    def rule(args, dims, **params):
        x = move_to_front(args[0], dims[0])
        nd = ndim_of(x) - 1
        for name in axis_params:
            if name not in params:
                continue
            ax = params[name]
            if ax is None:
                params[name] = tuple(range(1, nd + 1))
            elif isinstance(ax, int):
                params[name] = normalize_axis(ax, nd) + 1
            else:
                params[name] = tuple(normalize_axis(a, nd) + 1 for a in ax)
        rest = args[1:]
        return bind(prim, x, *rest, **params), 0

    return rule


def axis_batch(*axis_params):
    """``batch_axis_params`` for a declaration (default: the ``axis`` parameter)."""
    return per_primitive(lambda p: batch_axis_params(p, axis_params or ("axis",)))


ELEMENTWISE = per_primitive(batch_elementwise)


# ---------------------------------------------------------------------------------------------
# The loop-and-stack fallback for primitives with no batching rule (warns once per primitive).

_warned = set()
fallback_counts = {}


def batch_fallback(prim, args, dims, params, frame):
    if prim.name not in _warned:
        _warned.add(prim.name)
        warnings.warn(
            f"arrayad.vmap: {prim.name} has no batching rule yet; falling back to a Python loop "
            f"over the batch (slow). See docs/coverage.md.", UserWarning, stacklevel=3)
    fallback_counts[prim.name] = fallback_counts.get(prim.name, 0) + 1
    size = batch_size_of(args, dims)
    results = []
    for i in range(size):
        sliced = [_index_along(a, d, i) for a, d in zip(args, dims)]
        results.append(bind(prim, *sliced, **params))
    if prim.multiple_results:
        return tuple(ops.stack([r[k] for r in results]) for k in range(len(results[0]))), 0
    return ops.stack(results), 0


def _index_along(a, d, i):
    if d is None:
        return a
    return ops._getitem(a, (slice(None),) * d + (i,))
