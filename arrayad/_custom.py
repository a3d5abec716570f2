"""``custom_vjp``, ``custom_jvp`` and ``checkpoint``: JAX's decorators for derivative rules written
by the user and for recomputing a block in the backward pass, as primitives of the core.

NOTE [rule primitives]
----------------------
Each decorated function gets one ``Primitive`` whose rules are the glue of ``autograd.Function``
(``_impl_rule``, ``_vjp_rule``, ``_jvp_rule``, ``_batch_rule``: each hands the call to the
``spec`` in the params; NOTE [Function as a primitive]). A call flattens its differentiable
arguments into leaves, binds the primitive on the array leaves with a spec that holds the rest
(the pytree structure, the non-array leaves, the nondiff/static arguments), and rebuilds the
output pytree. (Unlike autograd.Function's immutable ``_Site``, a spec here still keeps what its
first run made: the output's pytree, custom_vjp's residuals, checkpoint's kept results and random
state, which its rules need at every level, not only on the node whose output carries it.) The
three spec classes say what each decorator means:

* custom_vjp: impl runs ``fwd`` (``fun`` when nothing differentiates in reverse mode) and keeps
  the residuals for this call; vjp runs ``bwd``; jvp refuses with JAX's error.
* custom_jvp: impl runs ``fun``; jvp runs the rule; vjp is the VJP of the rule's tangent map
  (linear in the tangents) at zero tangents, which is the transpose JAX computes.
* checkpoint: impl runs ``fun`` and keeps nothing (the tape node keeps the inputs); vjp runs
  ``fun`` again under ``arrayad.func.vjp`` and pulls the cotangents back through it; jvp is
  ``jvp`` of ``fun``. A policy may keep some results of the first run (NOTE [saving policy]).

vmap is ``autograd.Function``'s ``_Batched`` (as ``generate_vmap_rule``): the spec's forward, vjp
and jvp run under ``vmap``, with the randomness of the vmap being batched: the batching rule
asks it of the interpreter, which passes itself (the primitive has ``batch_gets_interpreter``).
Every rule computes at the level of its inputs (raw arrays, or tracers of outer transforms), so
what it computes is recorded by the outer transforms: ``hessian``, ``grad(grad)``, ``jacrev``,
``vmap(grad)``, the eager tape and ``jit`` (the primitive is one instruction; its rules stage
their work into the program) all compose.

A call with nothing to differentiate runs the function inline (JAX does the same): vmap alone
batches its operations; jit alone stages them (custom_vjp/custom_jvp still bind under jit, whose
program may be differentiated later). The functions run on the primitive's inputs, so a value of
an enclosing transform that the function reads from a closure instead of an argument would be
missed: its use is detected (an output of the first run that belongs to a transform or to the
tape) and refused with the fix (pass it as an argument), as JAX refuses it for custom rules;
checkpoint instead runs such a function as it is (the derivative right, no memory saved) and warns
with the fix. Arrays made inside without an array argument (``ad.zeros(n)``) are values of the
enclosing transforms too, but constants of them (no derivative, no batch axis): the first run's
outputs and residuals made of them are taken back to their raw values (``_constant``).
"""

import functools
import inspect
import threading
import types
import warnings

from ._core import _core
from ._core._core import Array, Interpreter, Primitive, Tensor, Tracer, bind, shape_of
from ._ops import ops
from ._pytree import tree_flatten, tree_unflatten
from .backends import backend_of, get_rng_state, set_rng_state
from .backends._random import RandomReplay

__all__ = ["custom_vjp", "custom_jvp", "checkpoint", "remat", "checkpoint_policies"]

_T = object()   # a leaf bound on the primitive (an array); any other leaf is a constant


def _glue():
    """autograd.Function's rule glue (imported late: autograd imports arrayad.func, which
    imports this module)."""
    from .autograd import function
    return function


def _name(fun):
    return getattr(fun, "__name__", type(fun).__name__)


def _reverse(v):
    """Whether reverse mode differentiates ``v``: a grad tracer in its tower, or a Tensor that
    requires grad under grad mode."""
    while isinstance(v, Tracer):
        if v.derivative == "reverse":
            return True
        v = v.value
    return isinstance(v, Tensor) and v.requires_grad and _core.is_grad_enabled()


def _forward_direct(leaves):
    """Whether a forward-mode transform sees ``leaves`` with no reverse-mode transform above it
    (one at a higher level, which processes the call first)."""
    grad, dual = 0, 0
    for v in leaves:
        while isinstance(v, Tracer):
            if v.derivative == "reverse":
                grad = max(grad, v._interp.level)
            elif v.derivative == "forward":
                dual = max(dual, v._interp.level)
            v = v.value
    return dual > grad


def _differentiated(v):
    """Whether any transform but vmap sees ``v`` (grad, jvp, jit: jit's program may be
    differentiated later), or the tape records it."""
    while isinstance(v, Tracer):
        if not v.batches:
            return True
        v = v.value
    return isinstance(v, Tensor) and v.requires_grad and _core.is_grad_enabled()


def _leaked(v):
    return isinstance(v, Tracer) or (isinstance(v, Tensor) and v._node is not None)


def _constant(v):
    """The raw value of ``v`` where ``v`` is a constant of every transform it belongs to (an array
    made inside without an array argument, ``ad.zeros(n)``, ``ad.arange(n)``, and what is computed
    from such arrays and the raw inputs alone: no derivative, no batch axis); else None."""
    while isinstance(v, Tracer):
        if not v._is_constant():   # (a derivative, a batch axis, or a staged value: jit's)
            return None
        v = v.value
    return None if isinstance(v, Tensor) and v._node is not None else v


class _ReadsClosure(Exception):
    """A first run read a value of a transform from outside the function's arguments."""


class _RulePrimitive(Primitive):
    def __init__(self, name, node_name):
        g = _glue()
        super().__init__(name, g._impl_rule, multiple_results=True)
        self.node_name = node_name
        self.vjp = g._vjp_rule
        self.jvp = g._jvp_rule
        self.batch = g._batch_rule
        self.batch_gets_interpreter = True   # (the batching rule asks the vmap its randomness)

    @staticmethod
    def staged_run(params):
        """The call's run as ``jit`` may trace it into a program, or None (NOTE [staged calls]
        in ``arrayad/_jit``)."""
        spec = params.get("spec")
        return None if spec is None else spec.staged_run()


def _positions(nums, n, what, fname):
    out = []
    for i in nums:
        if not isinstance(i, int) or isinstance(i, bool):
            raise TypeError(f"{what} of {fname} must be ints, got {i!r}")
        if not -n <= i < n:
            raise ValueError(f"{what} of {fname}: {i} is out of range for a call with {n} "
                             f"positional arguments")
        out.append(i % n)
    return sorted(set(out))


def _resolve_kwargs(fun, args, kwargs, what):
    """Keyword arguments moved to their positions (JAX's custom_vjp/custom_jvp do the same: the
    rules take positional arguments)."""
    if not kwargs:
        return tuple(args)
    try:
        b = inspect.signature(fun).bind(*args, **kwargs)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{what}({_name(fun)}): {e}") from None
    b.apply_defaults()
    if b.kwargs:
        raise TypeError(f"{what}({_name(fun)}): keyword arguments could not be resolved to "
                        f"positions (keyword-only parameters: {sorted(b.kwargs)}); pass them "
                        f"positionally")
    return tuple(b.args)


def _refuse_traced(vals, what, fname, fix):
    for v in tree_flatten(list(vals))[0]:
        if isinstance(v, Tracer):
            raise TypeError(f"{what}({fname}): an argument in {fix[0]} holds a value of an "
                            f"enclosing transform; {fix[1]}")


# -- the call ----------------------------------------------------------------------------------
class _Spec:
    """One call: the layout of the leaves, their pytree, the arguments that are not leaves."""

    kind = "?"

    def __init__(self, owner, leaves, tree, fixed, n_args):
        self.owner = owner
        self.prim = owner._prim
        self.layout = [_T if _glue()._is_tensor(v) else v for v in leaves]
        self.tree = tree            # of (diff args tuple, kwargs dict)
        self.fixed = fixed          # position -> value of the nondiff/static arguments
        self.n_args = n_args
        self.out_tree = None
        # (the random state of the first run of the user's function: NOTE [random state of a
        # rule] in backends/_random.py; a later run draws what it drew)
        self.rng = RandomReplay()

    def run_user(self, fn):
        """``fn()``, a run of the user's function, fwd or rule for this call, from the random
        state of the first (NOTE [random state of a rule])."""
        return self.rng.run(fn)

    def arrays(self, leaves):
        return [v for v, e in zip(leaves, self.layout) if e is _T]

    def staged_run(self):
        """The run of this call on values of any level (jit's tracers: NOTE [staged calls] in
        ``arrayad/_jit``), or None where only the run on raw arrays will do."""
        return None

    def _traced_outputs(self, vals):
        self.rng.state = None   # (a first run: NOTE [random state of a rule])
        return self.unwrap(self.outputs(vals))

    def diff_args(self, vals):
        """The differentiable arguments (pytrees) made of ``vals``, as the user's code sees them
        (raw arrays as plain Tensors, as in autograd.Function)."""
        prep = _glue()._prep
        it = iter(vals)
        leaves = [prep(next(it)) if e is _T else e for e in self.layout]
        return tree_unflatten(leaves, self.tree)

    def full_args(self, vals):
        diff, kwargs = self.diff_args(vals)
        it = iter(diff)
        args = [self.fixed[i] if i in self.fixed else next(it) for i in range(self.n_args)]
        return args, kwargs

    def flat_out(self, out, who):
        leaves, tree = tree_flatten(out)
        for i, o in enumerate(leaves):
            if not _glue()._is_tensor(o):
                raise TypeError(
                    f"{self.kind}({_name(self.owner.fun)}): {who} must return arrays (or a pytree "
                    f"of arrays), got {type(o).__name__} at output leaf {i}")
        if self.out_tree is None:
            self.out_tree = tree
        elif tree != self.out_tree:
            raise TypeError(
                f"{self.kind}({_name(self.owner.fun)}): {who} returned the pytree structure "
                f"{tree}, but the function returns {self.out_tree}")
        return tuple(leaves)

    def check_closure(self, outs):
        """NOTE [rule primitives]: a first run on raw values that gives a tracer (or a Tensor on
        the tape) read a value of a transform from outside its arguments, unless that value is a
        constant of its transforms (made inside: ``ad.zeros(n)``), which is returned raw."""
        outs = [_constant(o) if _leaked(o) else o for o in outs]
        if any(o is None for o in outs):
            self.reads_closure()
        return outs

    def reads_closure(self):
        raise TypeError(
            f"{self.kind}({_name(self.owner.fun)}): the function uses a value that a transform "
            f"(grad, jvp, vmap, jit) or the autograd tape tracks but that is not one of its "
            f"arguments (it reads it from a closure or a global), so its derivative would be "
            f"lost. Pass that value as an argument: {self.closure_fix}")

    def unwrap(self, outs, raw=True):
        u = _glue()._unwrap
        return tuple(u(o, raw) for o in outs)

    def batch(self, args, dims, size, randomness):
        return _glue()._Batched(self, dims, size, randomness).bind(args)

    def float_positions(self, vals):
        is_float = _glue()._is_float
        return [i for i, v in enumerate(vals) if v is not None and is_float(v)]

    def jvp_of(self, run, tangents, args):
        """The output tangents of ``run(vals) -> output leaves`` by ``arrayad.func.jvp`` at
        ``args`` (None for the outputs that are not float)."""
        from . import func
        g = _glue()
        fl = self.float_positions(args)
        floats = []

        def block(*fargs):
            vals = list(args)
            for i, v in zip(fl, fargs):
                vals[i] = v
            outs = run(vals)
            floats[:] = [g._is_float(o) for o in outs]
            return tuple(o for o in outs if g._is_float(o))

        prim = tuple(args[i] for i in fl)
        tan = tuple(ops.zeros_like(args[i]) if tangents[i] is None else tangents[i] for i in fl)
        _, touts = func.jvp(block, prim, tan)
        it = iter(touts)
        return tuple(next(it) if f else None for f in floats)


# -- custom_vjp --------------------------------------------------------------------------------
_NO_JVP = "can't apply forward-mode autodiff (jvp) to a custom_vjp function."


class _VjpCall(_Spec):
    kind = "custom_vjp"
    closure_fix = ("JAX refuses this too; with a custom_vjp, the rule only covers the explicit "
                   "arguments.")

    def __init__(self, owner, leaves, tree, fixed, n_args):
        super().__init__(owner, leaves, tree, fixed, n_args)
        self.reverse = any(_reverse(v) for v in leaves)
        self.forward_direct = _forward_direct(leaves)
        self.last = None   # (raw inputs, residuals) of the last impl, replaced at once

    def staged_run(self):
        # (outside a derivative only: under one, impl keeps the forward's residuals for the
        # rule, which the replay of a program would not)
        return None if self.reverse else self._traced_outputs

    def outputs(self, vals):
        args, _ = self.full_args(vals)
        return self.flat_out(self.run_user(lambda: self.owner.fun(*args)), "the function")

    def run_fwd(self, vals):
        args, _ = self.full_args(vals)
        res = self.run_user(lambda: self.owner.fwd(*args))
        if not (isinstance(res, (tuple, list)) and len(res) == 2):
            raise TypeError(
                f"Custom VJP fwd rule {_name(self.owner.fwd)} for function "
                f"{_name(self.owner.fun)} must produce a pair (list or tuple of length two) where "
                f"the first element represents the primal output (equal to the output of the "
                f"custom_vjp-decorated function {_name(self.owner.fun)}) and the second element "
                f"represents residuals (i.e. values stored from the forward pass for use on the "
                f"backward pass), but instead the fwd rule output's type was "
                f"{type(res).__name__}.")
        return self.flat_out(res[0], f"the fwd rule {_name(self.owner.fwd)}"), res[1]

    def impl(self, raws):
        self.rng.state = None   # (a first run: NOTE [random state of a rule])
        if self.reverse:
            outs, res = self.run_fwd(raws)
            self.last = (raws, self.raw_residuals(res))
        else:
            outs = self.outputs(raws)
        outs = self.check_closure(outs)
        return self.unwrap(outs)

    def raw_residuals(self, res):
        """The residuals of the first run, on raw values: arrays made inside (``ad.zeros(n)``)
        are constants of the transforms, returned raw (NOTE [rule primitives])."""
        leaves, tree = tree_flatten(res)
        if not any(_leaked(v) for v in leaves):
            return res
        raw = [_constant(v) if _leaked(v) else v for v in leaves]
        if any(r is None and v is not None for r, v in zip(raw, leaves)):
            self.reads_closure()
        return tree_unflatten(raw, tree)

    def residuals(self, args):
        last = self.last
        if last is not None and len(last[0]) == len(args) and \
                all(a is b for a, b in zip(args, last[0])):
            return last[1]
        # (at the level of args: outer transforms record it; from the first run's random
        # state, NOTE [random state of a rule])
        return self.run_user(lambda: self.run_fwd(args))[1]

    def vjp(self, gs, args, ans=None):
        g = _glue()
        res = self.residuals(args)
        raw = g._no_tensor(args, gs)
        cts_in = tree_unflatten([g._wrap_raw(_core.forget_zeros(x)) for x in gs], self.out_tree)
        owner = self.owner
        nondiff = [self.fixed[i] for i in sorted(self.fixed)]
        ct = owner.bwd(*nondiff, res, cts_in)
        diff, _ = tree_unflatten(list(range(len(self.layout))), self.tree)
        if not isinstance(ct, (tuple, list)) or len(ct) != len(diff):
            got = tree_flatten(ct)[1] if isinstance(ct, (tuple, list)) else tree_flatten(ct)[1]
            raise TypeError(
                f"Custom VJP bwd rule must produce an output with the same container (pytree) "
                f"structure as the args tuple of the primal function, and in particular must "
                f"produce a tuple of length equal to the number of arguments to the primal "
                f"function, but got bwd output structure {got} for primal input structure "
                f"{tree_flatten(tuple(diff))[1]} (custom_vjp function {_name(owner.fun)}, bwd rule "
                f"{_name(owner.bwd)}).")
        per_leaf = [None] * len(self.layout)
        for k, (c, positions) in enumerate(zip(ct, diff)):
            if c is None:
                continue
            pos_leaves, pos_tree = tree_flatten(positions)
            c_leaves, c_tree = tree_flatten(c)
            if c_tree != pos_tree:
                raise TypeError(
                    f"Custom VJP bwd rule must produce an output with the same container (pytree) "
                    f"structure as the args tuple of the primal function, but at output[{k}] the "
                    f"bwd rule produced the structure {c_tree} for an argument of structure "
                    f"{pos_tree} (custom_vjp function {_name(owner.fun)}).")
            for p, v in zip(pos_leaves, c_leaves):
                per_leaf[p] = (k, v)
        out = []
        it = iter(args)
        for e, got in zip(self.layout, per_leaf):
            if e is not _T:
                continue
            a = next(it)
            if got is None or got[1] is None:
                out.append(None)
                continue
            k, v = got
            if not g._is_tensor(v):
                raise TypeError(f"Custom VJP bwd rule {_name(owner.bwd)} returned a "
                                f"{type(v).__name__} in output[{k}]; expected arrays or None")
            if tuple(shape_of(v)) != tuple(shape_of(a)):
                raise ValueError(
                    f"Custom VJP bwd rule must produce an output with the same type as the args "
                    f"tuple of the primal function, but at output[{k}] the bwd rule produced an "
                    f"output of shape {tuple(shape_of(v))} corresponding to an input of shape "
                    f"{tuple(shape_of(a))}, so the shapes do not match (custom_vjp function "
                    f"{_name(owner.fun)}).")
            if not g._is_float(a):
                out.append(None)
                continue
            if _core.dtype_of(v) != _core.dtype_of(a):
                if _core.is_complex(v) and not _core.is_complex(a):
                    # (torch refuses it too; its real part would be a silently wrong gradient)
                    raise TypeError(
                        f"Custom VJP bwd rule {_name(owner.bwd)} returned a "
                        f"{_core.dtype_of(v).name} cotangent in output[{k}] for a real input "
                        f"of dtype {_core.dtype_of(a).name} (custom_vjp function "
                        f"{_name(owner.fun)}): the gradient of a real input is real. Return "
                        f"its real part if that is what you mean (arrayad.real(ct)), or make "
                        f"the input complex.")
                v = ops.astype(v, _core.dtype_of(a))
            out.append(g._unwrap(v, raw))
        return out

    def jvp(self, tangents, ans, args):
        # Forward mode of the function itself is refused (JAX's error). Forward mode *over* a
        # reverse-mode transform (hessian = jacfwd(jacrev), jvp of grad) differentiates what
        # the reverse pass runs, fwd now and bwd later, as JAX does.
        if self.forward_direct:
            raise TypeError(
                f"{_NO_JVP} The rule of {_name(self.owner.fun)} (defvjp) serves reverse mode "
                f"only: differentiate it with grad, vjp or jacrev (jacrev(jacrev(f)) for a "
                f"Hessian; hessian is jacfwd(jacrev(f))), or define it with custom_jvp, whose "
                f"rule serves both modes.")
        return self.run_user(lambda: self.jvp_of(lambda vals: self.run_fwd(vals)[0],
                                                  tangents, args))


class custom_vjp:
    """Give a function a reverse-mode derivative rule of your own (``jax.custom_vjp``).

    Decorate ``fun``, then call ``fun.defvjp(fwd, bwd)``:

    - ``fwd(*args)`` returns ``(output, residuals)``: the output of ``fun`` and any pytree of
      values ``bwd`` needs;
    - ``bwd(*nondiff_args, residuals, g)`` receives the cotangent ``g`` of the output (same
      pytree) and returns a tuple with one cotangent per differentiable argument, each of its
      argument's pytree structure and shapes (``None`` for a zero cotangent).

    Without a transform, ``fun`` runs as it is. Under ``grad``, ``vjp``, ``jacrev``,
    ``hessian`` (``bwd`` is differentiated again) and the autograd tape (``.backward()``),
    ``fwd`` and ``bwd`` replace its derivative; under ``vmap``, ``fun``, ``fwd`` and ``bwd``
    are batched; under ``jit`` the function is one instruction of the program. Forward mode
    (``jvp``, ``jacfwd``, ``linearize``) is refused, as in JAX: use ``custom_jvp`` for it;
    forward mode over reverse mode (``hessian``) differentiates ``fwd`` and ``bwd``, as JAX
    does. Reverse mode over reverse mode applies the rule at every level (JAX does so when
    ``fwd`` calls the function, its usual pattern; when ``fwd`` computes the output itself,
    JAX differentiates ``fwd`` at the outer level instead: the same when ``bwd`` is the true
    derivative).

    Parameters
    ----------
    fun : callable
        A function of arrays and pytrees of arrays returning an array or a pytree of arrays.
    nondiff_argnums : tuple of int, optional
        Positions of arguments that are not differentiated (Python values, functions, arrays
        treated as constants); they are passed first to ``bwd``. They must not be values of a
        transform: pass those as ordinary arguments (``bwd`` may return None for them).

    Returns
    -------
    custom_vjp
        A callable with the signature of ``fun``, and the method ``defvjp``.

    Raises
    ------
    AttributeError
        On a call before ``defvjp``: ``No VJP defined for custom_vjp function ...``.
    TypeError
        Under forward mode: ``can't apply forward-mode autodiff (jvp) to a custom_vjp
        function.``; if ``bwd`` does not return one entry per differentiable argument, with
        their pytree structures (JAX's message); if ``fwd`` does not return a pair; if ``fun``
        reads a value of a transform from a closure rather than from its arguments.
    ValueError
        If ``bwd`` returns a cotangent whose shape differs from its argument's.

    Examples
    --------
    ``log(1 + exp(x))`` with a stable derivative, the logistic function:

    >>> from arrayad.func import custom_vjp, grad
    >>> @custom_vjp
    ... def softplus(x):
    ...     return ad.log1p(ad.exp(x))
    >>> def softplus_fwd(x):
    ...     return softplus(x), x
    >>> def softplus_bwd(x, g):
    ...     return (g / (1 + ad.exp(-x)),)
    >>> softplus.defvjp(softplus_fwd, softplus_bwd)
    >>> grad(softplus)(np.array(0.0))
    array(0.5)
    """

    def __init__(self, fun, nondiff_argnums=()):
        if not callable(fun):
            raise TypeError(f"custom_vjp: expected a function, got {type(fun).__name__}")
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self.fwd = self.bwd = None
        self._prim = _RulePrimitive(f"custom_vjp[{_name(fun)}]", "CustomVjpBackward")

    def defvjp(self, fwd, bwd, symbolic_zeros=False, optimize_remat=False):
        """Set the rules: ``fwd(*args) -> (output, residuals)`` and ``bwd(*nondiff_args,
        residuals, g) -> tuple of cotangents`` (see the class). ``symbolic_zeros`` and
        ``optimize_remat`` are accepted for JAX's signature; ``symbolic_zeros=True`` is
        refused (cotangents are always arrays here)."""
        if symbolic_zeros:
            raise NotImplementedError(
                "custom_vjp.defvjp: symbolic_zeros=True is not supported; bwd receives arrays "
                "(zeros where an output has no cotangent)")
        if not callable(fwd) or not callable(bwd):
            raise TypeError("custom_vjp.defvjp: fwd and bwd must be functions")
        self.fwd, self.bwd = fwd, bwd

    def __get__(self, obj, objtype=None):
        return self if obj is None else types.MethodType(self, obj)

    def __call__(self, *args, **kwargs):
        name = _name(self.fun)
        if self.fwd is None:
            raise AttributeError(f"No VJP defined for custom_vjp function {name} using defvjp.")
        args = _resolve_kwargs(self.fun, args, kwargs, "custom_vjp")
        nd = _positions(self.nondiff_argnums, len(args), "nondiff_argnums", name)
        fixed = {i: args[i] for i in nd}
        _refuse_traced(fixed.values(), "custom_vjp", name,
                       ("nondiff_argnums", "pass arrays of a transform as ordinary arguments "
                                           "(bwd may return None for them)"))
        diff = tuple(a for i, a in enumerate(args) if i not in fixed)
        leaves, tree = tree_flatten((diff, {}))
        if not any(_differentiated(v) for v in leaves):
            return self.fun(*args)
        spec = _VjpCall(self, leaves, tree, fixed, len(args))
        outs = bind(self._prim, *spec.arrays(leaves), spec=spec)
        return tree_unflatten(list(outs), spec.out_tree)


# -- custom_jvp --------------------------------------------------------------------------------
class _JvpCall(_Spec):
    kind = "custom_jvp"
    closure_fix = "the rule then covers it (use nondiff_argnums for a value not differentiated)."

    def outputs(self, vals):
        args, _ = self.full_args(vals)
        return self.flat_out(self.run_user(lambda: self.owner.fun(*args)), "the function")

    def staged_run(self):
        return self._traced_outputs

    def impl(self, raws):
        self.rng.state = None   # (a first run: NOTE [random state of a rule])
        outs = self.outputs(raws)
        outs = self.check_closure(outs)
        return self.unwrap(outs)

    def push(self, tangents, args):
        """(primal outputs, tangent outputs) of the rule: leaves, None where a tangent is None."""
        g = _glue()
        owner = self.owner
        primals, _ = self.diff_args(args)
        it = iter(zip(tangents, args))
        t_leaves = []
        for e in self.layout:
            if e is _T:
                t, a = next(it)
                t_leaves.append(g._wrap_raw(ops.zeros_like(a) if t is None else
                                            _core.forget_zeros(t)))
            elif isinstance(e, (int, float, complex)) and not isinstance(e, bool):
                t_leaves.append(type(e)(0))
            else:
                t_leaves.append(None)
        t_args, _ = tree_unflatten(t_leaves, self.tree)
        nondiff = [self.fixed[i] for i in sorted(self.fixed)]
        # (the rule recomputes the outputs: from the first run's random state, NOTE [random
        # state of a rule])
        res = self.run_user(lambda: owner.rule(*nondiff, tuple(primals), tuple(t_args)))
        rname = _name(owner.rule)
        if not (isinstance(res, (tuple, list)) and len(res) == 2):
            raise TypeError(
                f"Custom JVP rule {rname} for function {_name(owner.fun)} must produce a pair "
                f"(list or tuple of length two) representing primal and tangent outputs, but got "
                f"{res!r}.")
        p_leaves, p_tree = tree_flatten(res[0])
        t_leaves, t_tree = tree_flatten(res[1])
        if p_tree != t_tree:
            raise TypeError(
                f"Custom JVP rule {rname} for function {_name(owner.fun)} must produce primal and "
                f"tangent outputs with equal container (pytree) structures, but got {p_tree} and "
                f"{t_tree} respectively.")
        for p, t in zip(p_leaves, t_leaves):
            if t is not None and (not g._is_tensor(t) or
                                  tuple(shape_of(t)) != tuple(shape_of(p))):
                what = (f"shape {tuple(shape_of(t))}" if g._is_tensor(t)
                        else type(t).__name__)
                raise TypeError(
                    f"Custom JVP rule must produce primal and tangent outputs with corresponding "
                    f"shapes and dtypes. Expected an array of shape {tuple(shape_of(p))} (the "
                    f"primal output's) but got {what} (rule {rname} of {_name(owner.fun)}).")
        return p_leaves, t_leaves

    def jvp(self, tangents, ans, args):
        g = _glue()
        raw = g._no_tensor(args, tangents)
        # (no value of another transform among them: a tracer in the rule's tangent is then one
        # of this level, made inside the rule)
        bare = not any(isinstance(v, Tracer) for v in (*args, *tangents))
        p_leaves, t_leaves = self.push(tangents, args)
        outs = []
        for p, t in zip(p_leaves, t_leaves):
            if t is None or not g._is_float(p):
                outs.append(None)
            else:
                if bare and _leaked(t):
                    # (on raw values, a tangent made with arrays made inside the rule,
                    # ``ad.arange(n)``: constants of this level, NOTE [rule primitives])
                    (t,) = self.check_closure([t])
                if _core.dtype_of(t) != _core.dtype_of(p):
                    if _core.is_complex(t) and not _core.is_complex(p):
                        raise TypeError(
                            f"Custom JVP rule must produce primal and tangent outputs with "
                            f"corresponding shapes and dtypes: the rule of {_name(self.owner.fun)} "
                            f"returned a {_core.dtype_of(t).name} tangent for a real primal "
                            f"output of dtype {_core.dtype_of(p).name} (its imaginary part "
                            f"would be dropped). Return a real tangent (arrayad.real(t) if that "
                            f"is what you mean), or make the output complex.")
                    t = ops.astype(t, _core.dtype_of(p))
                outs.append(g._unwrap(t, raw))
        return tuple(outs)

    def vjp(self, gs, args, ans=None):
        """The transpose of the rule's tangent map (linear in the tangents) applied to ``gs``,
        as the VJP of that map at zero tangents."""
        from . import func
        g = _glue()
        fl = self.float_positions(args)
        ko = [k for k, c in enumerate(gs) if g._is_float(c)]
        if not fl or not ko:
            return [None] * len(args)

        def tangent_map(*ts):
            tangents = [None] * len(args)
            for i, t in zip(fl, ts):
                tangents[i] = t
            p_leaves, t_leaves = self.push(tangents, args)
            return tuple(ops.zeros_like(p_leaves[k]) if t_leaves[k] is None else t_leaves[k]
                         for k in ko)

        zeros = [ops.zeros_like(args[i]) for i in fl]
        _, pull = func.vjp(tangent_map, *zeros)
        cts = pull(tuple(gs[k] for k in ko))
        out = [None] * len(args)
        for i, c in zip(fl, cts):
            out[i] = c
        return out


class custom_jvp:
    """Give a function a forward-mode derivative rule of your own (``jax.custom_jvp``); reverse
    mode follows from it.

    Decorate ``fun``, then set the rule with ``fun.defjvp(rule)`` (also as a decorator,
    ``@fun.defjvp``): ``rule(*nondiff_args, primals, tangents)`` receives two tuples (one entry
    per differentiable argument, zeros for arguments without a tangent) and returns
    ``(output, tangent_output)`` with the same pytree structure and shapes; the tangent must be
    linear in ``tangents``. ``defjvps(*rules)`` gives one rule per argument instead,
    ``rule_i(t_i, output, *args)``, summed (None: the argument contributes nothing).

    ``jvp``, ``jacfwd``, ``linearize`` and forward-mode AD use the rule; ``grad``, ``vjp``,
    ``jacrev`` and the autograd tape use its transpose (the VJP of the tangent map, so the rule
    is differentiated again for ``hessian``); ``vmap`` batches ``fun`` and the rule; ``jit``
    stages the function as one instruction.

    Parameters
    ----------
    fun : callable
        A function of arrays and pytrees of arrays returning an array or a pytree of arrays.
    nondiff_argnums : tuple of int, optional
        Positions of arguments that are not differentiated; they are passed first to the rule.

    Returns
    -------
    custom_jvp
        A callable with the signature of ``fun``, and the methods ``defjvp``/``defjvps``.

    Raises
    ------
    AttributeError
        On a call before ``defjvp``: ``No JVP defined for custom_jvp function ...``.
    TypeError
        If the rule does not return a pair, or its primal and tangent outputs differ in pytree
        structure or shape (JAX's messages); if ``fun`` reads a value of a transform from a
        closure rather than from its arguments.

    Examples
    --------
    JAX's first example, ``sin(x) * y`` with its rule written out; reverse mode uses the
    same rule:

    >>> from arrayad.func import custom_jvp, grad, jvp
    >>> @custom_jvp
    ... def f(x, y):
    ...     return ad.sin(x) * y
    >>> @f.defjvp
    ... def f_jvp(primals, tangents):
    ...     x, y = primals
    ...     tx, ty = tangents
    ...     return f(x, y), ad.cos(x) * tx * y + ad.sin(x) * ty
    >>> jvp(f, (np.array(0.0), np.array(3.0)), (np.array(1.0), np.array(0.0)))
    (array(0.), array(3.))
    >>> grad(f, argnums=(0, 1))(np.array(0.0), np.array(3.0))
    (array(3.), array(0.))
    """

    def __init__(self, fun, nondiff_argnums=()):
        if not callable(fun):
            raise TypeError(f"custom_jvp: expected a function, got {type(fun).__name__}")
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self.rule = None
        self._prim = _RulePrimitive(f"custom_jvp[{_name(fun)}]", "CustomJvpBackward")

    def defjvp(self, jvp, symbolic_zeros=False):
        """Set the rule ``jvp(*nondiff_args, primals, tangents) -> (output, tangent)``;
        returns ``jvp`` (so that it works as a decorator)."""
        if symbolic_zeros:
            raise NotImplementedError("custom_jvp.defjvp: symbolic_zeros=True is not "
                                      "supported; the rule receives arrays (zeros)")
        if not callable(jvp):
            raise TypeError("custom_jvp.defjvp: the rule must be a function")
        self.rule = jvp
        return jvp

    def defjvps(self, *jvps):
        """One rule per argument, ``jvps[i](t_i, output, *args)`` (None: no contribution),
        their tangents summed."""
        if self.nondiff_argnums:
            raise TypeError("custom_jvp.defjvps is not available with nondiff_argnums; use "
                            "defjvp")

        def rule(primals, tangents):
            out = self.fun(*primals)
            total = None
            for r, t in zip(jvps, tangents):
                if r is None:
                    continue
                term = r(t, out, *primals)
                total = term if total is None else tree_map2(lambda a, b: a + b, total, term)
            if total is None:
                total = tree_map1(ops.zeros_like, out)
            return out, total

        rule.__name__ = f"defjvps_rule_of_{_name(self.fun)}"
        self.rule = rule

    def __get__(self, obj, objtype=None):
        return self if obj is None else types.MethodType(self, obj)

    def __call__(self, *args, **kwargs):
        name = _name(self.fun)
        if self.rule is None:
            raise AttributeError(f"No JVP defined for custom_jvp function {name} using defjvp.")
        args = _resolve_kwargs(self.fun, args, kwargs, "custom_jvp")
        nd = _positions(self.nondiff_argnums, len(args), "nondiff_argnums", name)
        fixed = {i: args[i] for i in nd}
        _refuse_traced(fixed.values(), "custom_jvp", name,
                       ("nondiff_argnums", "pass arrays of a transform as ordinary arguments"))
        diff = tuple(a for i, a in enumerate(args) if i not in fixed)
        leaves, tree = tree_flatten((diff, {}))
        if not any(_differentiated(v) for v in leaves):
            return self.fun(*args)
        spec = _JvpCall(self, leaves, tree, fixed, len(args))
        outs = bind(self._prim, *spec.arrays(leaves), spec=spec)
        return tree_unflatten(list(outs), spec.out_tree)


def tree_map1(f, t):
    leaves, tree = tree_flatten(t)
    return tree_unflatten([f(v) for v in leaves], tree)


def tree_map2(f, a, b):
    la, ta = tree_flatten(a)
    lb, tb = tree_flatten(b)
    if ta != tb:
        raise TypeError(f"custom_jvp.defjvps: the rules returned tangents of different pytree "
                        f"structures: {ta} and {tb}")
    return tree_unflatten([f(x, y) for x, y in zip(la, lb)], ta)


# -- checkpoint --------------------------------------------------------------------------------
# NOTE [saving policy]
# --------------------
# A policy ``policy(prim, *args, **params) -> bool`` (JAX's convention) names the primitives whose
# results the first run keeps (``dots_saveable``: matmul). Their results are recorded, in order,
# by an interpreter installed as the core's raw-level hook (``ThreadState.staging``: NOTE [staging
# everything]; it sees every operation on raw arrays and Tensors) while impl runs; while the
# backward pass recomputes on the same inputs, the same hook hands the kept result back for each
# such operation instead of computing it, after checking that it is the same primitive on
# operands of the same shapes (a block that runs differently the second time recomputes
# everything from there on). Kept results are copies: user code may update the originals in
# place. The tape records the recomputed operations as usual, so derivatives are unchanged.

class _Keeper(Interpreter):
    """The raw-level hook of NOTE [saving policy]: records (``replay`` False) or hands back."""

    name = "checkpoint policy"

    def __init__(self, policy, below, kept=None):
        self.policy = policy
        self.below = below
        self.replay = kept is not None
        self.kept = [] if kept is None else kept
        self.pos = 0

    def process(self, prim, args, params):
        st = _core.thread_state()
        st.staging = self.below
        try:
            if not self.policy(prim, *args, **params):
                return bind(prim, *args, **params)
            shapes = tuple(shape_of(a) if isinstance(a, Array) or hasattr(a, "shape") else None
                           for a in args)
            if self.replay:
                if self.pos < len(self.kept):
                    p, s, out = self.kept[self.pos]
                    if p is prim and s == shapes:
                        self.pos += 1
                        return out
                self.pos = len(self.kept) + 1   # (out of step: recompute from here on)
                return bind(prim, *args, **params)
            out = bind(prim, *args, **params)
            self.kept.append((prim, shapes, _copy(out)))
            return out
        finally:
            st.staging = self


def _copy(v):
    if isinstance(v, tuple):
        return tuple(_copy(x) for x in v)
    if isinstance(v, Tensor):
        return Tensor(_copy(v._value))
    return backend_of(v).xp.asarray(v, copy=True)


class _hook:
    """``with _hook(keeper):`` installs the raw-level hook for the block."""

    def __init__(self, make):
        self.make = make

    def __enter__(self):
        st = _core.thread_state()
        self.prev = st.staging
        self.keeper = self.make(self.prev)
        st.staging = self.keeper
        return self.keeper

    def __exit__(self, *exc):
        _core.thread_state().staging = self.prev
        return False


_INLINE = threading.local()   # .on: a loop's or branch's body is being traced again (see below)


class _inline_whole_checkpoint:
    """``with _inline_whole_checkpoint(on):`` while a loop's or a branch's body is traced:
    ``on`` when the body is one checkpoint call, which then runs inline (its recomputation is
    the one the body's own VJP does; ``_trace`` in the control-flow module says why). Each
    trace sets its own value, so a body nested in the block is traced with its own."""

    def __init__(self, on):
        self.on = on

    def __enter__(self):
        self.prev = getattr(_INLINE, "on", False)
        _INLINE.on = self.on

    def __exit__(self, *exc):
        _INLINE.on = self.prev
        return False


class _CkptCall(_Spec):
    kind = "checkpoint"
    closure_fix = ("checkpoint(f)(x, params) with f(x, params), rather than checkpoint(lambda x: "
                   "f(x, params))(x).")

    def __init__(self, owner, leaves, tree, fixed, n_args):
        super().__init__(owner, leaves, tree, fixed, n_args)
        self.kept = None     # (raw inputs, kept results) of the last impl (NOTE [saving policy])

    def outputs(self, vals):
        args, kwargs = self.full_args(vals)
        return self.flat_out(self.run_user(lambda: self.owner.fun(*args, **kwargs)),
                             "the function")

    def impl(self, raws):
        self.rng.state = None   # (a first run: NOTE [random state of a rule])
        policy = self.owner.policy
        if policy is None:
            outs = self.outputs(raws)
        else:
            with _hook(lambda below: _Keeper(policy, below)) as keeper:
                outs = self.outputs(raws)
            self.kept = (raws, keeper.kept)
        outs = self.check_closure(outs)
        return self.unwrap(outs)

    def reads_closure(self):
        raise _ReadsClosure   # (checkpoint then runs the function as it is: see __call__)

    def vjp(self, gs, args, ans=None):
        from . import func
        g = _glue()
        fl = self.float_positions(args)
        ko = [k for k, c in enumerate(gs) if g._is_float(c)]
        if not fl or not ko:
            return [None] * len(args)

        def block(*fargs):
            vals = list(args)
            for i, v in zip(fl, fargs):
                vals[i] = v
            outs = self.outputs(vals)
            return tuple(outs[k] for k in ko)

        kept = self.kept
        if kept is not None and len(kept[0]) == len(args) and \
                all(a is b for a, b in zip(args, kept[0])):
            policy = self.owner.policy

            def run():
                with _hook(lambda below: _Keeper(policy, below, kept[1])):
                    return func.vjp(block, *[args[i] for i in fl])
        else:
            def run():
                return func.vjp(block, *[args[i] for i in fl])
        _, pull = self.run_user(run)
        cts = pull(tuple(gs[k] for k in ko))
        out = [None] * len(args)
        for i, c in zip(fl, cts):
            out[i] = c
        return out

    def jvp(self, tangents, ans, args):
        return self.run_user(lambda: self.jvp_of(self.outputs, tangents, args))


class _Checkpointed:
    def __init__(self, fun, policy, static_argnums):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.policy = policy
        self.static_argnums = static_argnums
        self._prim = _RulePrimitive(f"checkpoint[{_name(fun)}]", "CheckpointBackward")

    def __get__(self, obj, objtype=None):
        return self if obj is None else types.MethodType(self, obj)

    def __call__(self, *args, **kwargs):
        name = _name(self.fun)
        if self.policy is checkpoint_policies.everything_saveable:
            return self.fun(*args, **kwargs)   # (everything kept: the ordinary tape)
        if getattr(_INLINE, "on", False):
            # (the whole body of a loop or a branch, which recomputes it anyway; a checkpoint
            # inside the block still counts)
            with _inline_whole_checkpoint(False):
                return self.fun(*args, **kwargs)
        st = _positions(self.static_argnums, len(args), "static_argnums", name)
        fixed = {i: args[i] for i in st}
        _refuse_traced(fixed.values(), "checkpoint", name,
                       ("static_argnums", "static arguments are Python values (shapes, flags); "
                                          "pass arrays as ordinary arguments"))
        diff = tuple(a for i, a in enumerate(args) if i not in fixed)
        leaves, tree = tree_flatten((diff, kwargs))
        if not any(_reverse(v) for v in leaves):
            return self.fun(*args, **kwargs)   # nothing kept for a backward pass: nothing to do
        spec = _CkptCall(self, leaves, tree, fixed, len(args))
        rng = get_rng_state()
        try:
            outs = bind(self._prim, *spec.arrays(leaves), spec=spec)
        except _ReadsClosure:
            # A value being differentiated comes from a closure (torch's usual
            # ``checkpoint(layer, x)``, with the layer's parameters): recomputing the function
            # from its arguments alone would lose its derivative, so the function runs as it is,
            # recorded like any other code: the right derivative without the memory saving.
            set_rng_state(rng)
            warnings.warn(
                f"checkpoint({name}): the function reads a value that is being differentiated "
                f"from a closure or a global, not from its arguments, so it ran without "
                f"recomputation (its intermediate values are kept as without checkpoint). Pass "
                f"that value as an argument to save the memory: {_CkptCall.closure_fix}",
                stacklevel=2)
            return self.fun(*args, **kwargs)
        return tree_unflatten(list(outs), spec.out_tree)


def _is_matmul(prim, *args, **params):
    return prim.name == "matmul"


def _is_flat_matmul(prim, *args, **params):
    return prim.name == "matmul" and all(len(shape_of(a)) <= 2 for a in args)


checkpoint_policies = types.SimpleNamespace(
    nothing_saveable=lambda prim, *args, **params: False,
    everything_saveable=lambda prim, *args, **params: True,
    dots_saveable=_is_matmul,
    checkpoint_dots=_is_matmul,
    dots_with_no_batch_dims_saveable=_is_flat_matmul,
    checkpoint_dots_with_no_batch_dims=_is_flat_matmul,
)
checkpoint_policies.__doc__ = (
    "The saving policies of ``checkpoint`` (``jax.checkpoint_policies``' names): "
    "``nothing_saveable`` (the default: recompute everything), ``dots_saveable`` / "
    "``checkpoint_dots`` (keep the results of matmul), ``dots_with_no_batch_dims_saveable`` "
    "(keep those of matmul on matrices and vectors), ``everything_saveable`` (keep everything: "
    "no recomputation). A policy is a function ``policy(prim, *args, **params) -> bool``.")


def checkpoint(fun, *, prevent_cse=True, policy=None, static_argnums=()):
    """Make ``fun`` recompute its forward pass in the backward pass instead of keeping its
    intermediate values (``jax.checkpoint``, also named ``remat``;
    ``torch.utils.checkpoint.checkpoint``).

    Under reverse mode (``grad``, ``vjp``, ``jacrev``, ``hessian``, the autograd tape), a call
    keeps only its inputs; the backward pass runs ``fun`` again on them and differentiates that
    run. This trades compute (one more forward pass of ``fun``) for memory: a chain of
    checkpointed blocks keeps one value per block rather than every intermediate. Values and
    derivatives are those of ``fun``, to any order; random numbers drawn in ``fun`` are drawn
    again identically. Without reverse mode, ``fun`` simply runs.

    Parameters
    ----------
    fun : callable
        A function of arrays and pytrees of arrays returning an array or a pytree of arrays.
        Values it differentiates must be arguments, not closed-over values of the transform.
    prevent_cse : bool, optional
        Accepted for JAX's signature: the block is one instruction under ``jit``, never
        merged with the recomputation.
    policy : callable, optional
        Which results of the first run to keep anyway, from ``checkpoint_policies``
        (``dots_saveable``: the results of matmul); None keeps nothing.
    static_argnums : tuple of int, optional
        Positions of arguments that are Python values rather than arrays.

    Returns
    -------
    callable
        ``fun`` with the same signature, checkpointed.

    Raises
    ------
    TypeError
        When called, if a static argument holds a value of a transform, or if ``fun`` returns
        something other than arrays.

    Warns
    -----
    UserWarning
        When called, if ``fun`` reads a value that a transform differentiates from a closure
        rather than from its arguments: it then runs without recomputation (the derivative is
        the same, the memory is not saved); pass that value as an argument.

    See Also
    --------
    arrayad.utils.checkpoint.checkpoint : torch's spelling of the same thing, one call
        ``checkpoint(function, *args)`` rather than a decorator (no ``policy``).

    Examples
    --------
    The gradient is unchanged; the block runs twice (forward, then again in the backward
    pass):

    >>> from arrayad.func import checkpoint, grad
    >>> calls = []
    >>> def block(x):
    ...     calls.append(1)
    ...     return ad.sin(ad.sin(x))
    >>> grad(lambda x: ad.sum(checkpoint(block)(x)))(np.array([0.0, 1.0]))
    array([1.        , 0.36003949])
    >>> len(calls)
    2
    """
    if not callable(fun):
        raise TypeError(f"checkpoint: expected a function, got {type(fun).__name__}")
    if policy is not None and not callable(policy):
        raise TypeError(f"checkpoint({_name(fun)}): policy must be one of "
                        f"arrayad.func.checkpoint_policies (a function), got {policy!r}")
    if policy is checkpoint_policies.nothing_saveable:
        policy = None
    if isinstance(static_argnums, int):
        static_argnums = (static_argnums,)
    return _Checkpointed(fun, policy, tuple(static_argnums))


remat = checkpoint
