"""arrayad.jit: staged programs give the un-jitted results, compose with every transform in both
orders, retrace on a new signature, refuse value-dependent Python with a clear error, and print."""

import importlib.util
import sys

import numpy as np
import pytest

import arrayad as ad
from arrayad.func import (grad, hessian, jacfwd, jacrev, jvp, make_program, vjp, vmap,
                          value_and_grad)
from arrayad.testing import check_grads

from conftest import Backend, to_numpy
from reference import chain, chain_vec

JIT_BACKENDS = ["numpy", "array_api_strict"] + (
    ["torch"] if importlib.util.find_spec("torch") is not None else [])


@pytest.fixture(autouse=True)
def checked_passes():
    """Every program the passes make is verified (arrayad._jit.check)."""
    with ad.config.jit_check(True):
        yield


@pytest.fixture(params=JIT_BACKENDS)
def be(request):
    return Backend(request.param)


def mlp(w1, w2, x):
    return ad.mean(ad.tanh(x @ w1) @ w2)


def close(a, b):
    np.testing.assert_allclose(to_numpy(a), to_numpy(b), rtol=1e-10, atol=1e-12)


X = np.random.default_rng(0).standard_normal(6)
XS = np.random.default_rng(1).standard_normal((3, 6))

# (name, transformed function, its argument): the transforms whose whole computation jit stages
STAGED = [
    ("f", chain, X),
    ("grad", grad(chain), X),
    ("value_and_grad", value_and_grad(chain), X),
    ("vmap(grad)", vmap(grad(chain)), XS),
    ("hessian", hessian(chain), X),
    ("jacrev", jacrev(chain_vec), X),
    ("jacfwd", jacfwd(chain_vec), X),
    ("vmap(jacfwd)", vmap(jacfwd(chain_vec)), XS),
    ("jvp", lambda x: jvp(chain_vec, (x,), (ad.ones_like(x),)), X),
    ("vjp", lambda x: vjp(chain_vec, x)[1](ad.cos(x)), X),
]


@pytest.mark.parametrize("name,f,arg", STAGED, ids=[s[0] for s in STAGED])
def test_jit_of_a_transform_equals_the_transform(be, name, f, arg):
    x = be(arg)
    j = ad.jit(f)
    want = f(x)
    first = j(x)    # traces
    second = j(x)   # replays
    for got in (first, second):
        for g, w in zip(ad.func.tree_flatten(got)[0], ad.func.tree_flatten(want)[0]):
            assert type(g) is type(w)
            close(g, w)
    assert j.traces == 1


def test_replay_uses_the_new_values_not_the_traced_ones(be):
    j = ad.jit(grad(chain))
    j(be(X))
    for seed in range(3):
        x = np.random.default_rng(10 + seed).standard_normal(6)
        close(j(be(x)), grad(chain)(x))
    assert j.traces == 1


def test_several_arguments_pytrees_and_kwargs():
    rng = np.random.default_rng(2)
    w1, w2 = rng.standard_normal((4, 5)), rng.standard_normal((5, 2))
    x = rng.standard_normal((3, 4))
    f = grad(mlp, argnums=(0, 1))
    j = ad.jit(f)
    for _ in range(2):
        for g, w in zip(j(w1, w2, x), f(w1, w2, x)):
            close(g, w)

    def g(params, *, scale):
        return {"out": params["a"] * scale, "pair": (params["b"], ad.sin(params["a"]))}

    jg = ad.jit(g)
    p = {"a": rng.standard_normal(3), "b": rng.standard_normal(2)}
    for _ in range(2):
        got, want = jg(p, scale=rng.standard_normal(3)), None
    want = g(p, scale=np.ones(3))
    got = jg(p, scale=np.ones(3))
    assert set(got) == {"out", "pair"} and isinstance(got["pair"], tuple)
    close(got["out"], want["out"])
    close(got["pair"][1], want["pair"][1])
    assert jg.traces == 1


# -- composition: jit inside other transforms -------------------------------------------------

@pytest.mark.parametrize("calls", [1, 2])
def test_grad_of_jit_matches_finite_differences(be, calls):
    jf = ad.jit(chain)
    for _ in range(calls - 1):
        jf(be(X))   # the second time, grad binds the cached program's primitives
    close(grad(jf)(be(X)), grad(chain)(be(X)))
    close(hessian(jf)(be(X)), hessian(chain)(be(X)))


def test_outer_transforms_of_jit_against_finite_differences():
    jf = ad.jit(chain)
    jf(X)
    check_grads(jf, (X,), order=2, modes=("fwd", "rev"))


def test_vmap_and_jvp_of_jit(be):
    jf = ad.jit(chain_vec)
    for _ in range(2):
        close(vmap(jf)(be(XS)), vmap(chain_vec)(be(XS)))
        out, tan = jvp(jf, (be(X),), (be(np.ones(6)),))
        want_out, want_tan = jvp(chain_vec, (be(X),), (be(np.ones(6)),))
        close(out, want_out)
        close(tan, want_tan)


def test_jit_of_jit_and_jit_under_the_eager_tape():
    inner = ad.jit(chain_vec)
    outer = ad.jit(lambda x: ad.sum(inner(x) * 2))
    for _ in range(2):
        close(outer(X), 2 * chain(X))
    for _ in range(2):
        t = ad.tensor(X, requires_grad=True)
        ad.jit(chain)(t).backward()
        close(t.grad, grad(chain)(X))


def test_tensors_in_tensors_out():
    j = ad.jit(chain_vec)
    for _ in range(2):
        out = j(ad.tensor(X))
        assert isinstance(out, ad.Tensor)
        close(out, chain_vec(X))


def test_a_captured_value_of_an_outer_transform_is_not_cached():
    # the closure captures grad's tracer: right for this call, never replayed as a constant
    def f(x):
        return ad.jit(lambda y: ad.sum(x * y))(np.arange(6.0))
    close(grad(f)(X), np.arange(6.0))
    close(grad(f)(X + 1), np.arange(6.0))


def test_autograd_function_inside_jit():
    class Cube(ad.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return 3 * g * x ** 2   # the true derivative: a wrong rule would show

    f = lambda x: ad.sum(Cube.apply(x) * 2)  # noqa: E731
    for jf in (ad.jit(f), ad.jit(grad(f))):
        ref = f(X) if jf.__wrapped__ is f else 6 * X ** 2
        for _ in range(2):
            close(jf(X), ref)
    assert "Cube" in ad.jit(f).lower(X).primitive_names()


# -- the cache --------------------------------------------------------------------------------

def test_retrace_on_changed_shape_and_dtype_only():
    j = ad.jit(chain)
    j(X)
    j(X + 1)
    assert j.traces == 1
    close(j(np.ones(4)), chain(np.ones(4)))
    assert j.traces == 2
    out = j(X.astype(np.float32))
    assert out.dtype == np.float32 and j.traces == 3
    j(ad.get_backend("array_api_strict").xp.asarray(X))
    assert j.traces == 4
    j(X)
    assert j.traces == 4


def test_the_cache_is_bounded():
    j = ad.jit(chain, cache_size=2)
    for n in (2, 3, 4):
        j(np.ones(n))
    assert j.traces == 3
    j(np.ones(2))   # evicted (least recently used): traced again
    assert j.traces == 4
    j(np.ones(4))   # still cached
    assert j.traces == 4


def test_static_arguments():
    def f(x, n, *, mode):
        for _ in range(n):        # Python control flow on static values is fine
            x = ad.sin(x) if mode == "sin" else ad.cos(x)
        return x

    j = ad.jit(f, static_argnums=1, static_argnames="mode")
    close(j(X, 2, mode="sin"), np.sin(np.sin(X)))
    close(j(X, 2, mode="sin"), np.sin(np.sin(X)))
    assert j.traces == 1
    close(j(X, 3, mode="cos"), np.cos(np.cos(np.cos(X))))
    assert j.traces == 2
    with pytest.raises(TypeError, match="static argument .* must be hashable"):
        j(X, [1], mode="sin")


def test_decorator_forms():
    @ad.jit
    def a(x):
        return x * 2

    @ad.jit(static_argnums=(1,))
    def b(x, k):
        return x * k

    close(a(X), X * 2)
    close(b(X, 3), X * 3)


def test_side_effects_run_at_tracing_only():
    seen = []

    @ad.jit
    def f(x):
        seen.append(x.shape)
        return x + 1

    f(X)
    f(X)
    f(X)
    assert seen == [(6,)]


# -- errors -----------------------------------------------------------------------------------

def test_control_flow_on_a_traced_value_names_value_line_and_fixes():
    def f(x):
        if ad.sum(x) > 0:   # the line the error must name
            return x
        return -x

    with pytest.raises(RuntimeError) as e:
        ad.jit(f)(X)
    msg = str(e.value)
    assert "jit(f)" in msg and "bool()" in msg and "result of greater" in msg
    assert "test_jit.py:" in msg and "static_argnums" in msg and "where" in msg


def test_an_error_in_a_notebook_cell_names_the_cell_not_its_temporary_file(monkeypatch):
    # IPython and Jupyter compile each cell into a temporary file; their tracebacks say
    # "Cell In[3], line 2" and so must jit's errors (the file's path means nothing to the user).
    import types
    filename = "<cell 3 stand-in>"
    shell = types.SimpleNamespace(compile=types.SimpleNamespace(
        format_code_name=lambda name: ("Cell", "In[3]") if name == filename else None))
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: shell))
    namespace = {"ad": ad}
    exec(compile("def f(x):\n    if ad.sum(x) > 0:\n        return x\n    return -x\n",
                 filename, "exec"), namespace)
    with pytest.raises(RuntimeError) as e:
        ad.jit(namespace["f"])(X)
    assert "at Cell In[3], line 2." in str(e.value) and filename not in str(e.value)


@pytest.mark.parametrize("convert", [float, int, lambda v: v.item(), np.asarray])
def test_conversions_of_traced_values_raise(convert):
    with pytest.raises(RuntimeError, match=r"jit\(.*argument x.*static_argnums"):
        ad.jit(lambda x: convert(x))(np.ones(()))


def test_control_flow_under_grad_inside_jit_raises_the_jit_error():
    def f(x):
        return ad.sum(x) if ad.sum(x) > 0 else -ad.sum(x)

    grad(f)(X)   # fine without jit (grad reads the value)
    with pytest.raises(RuntimeError, match=r"jit\(.*bool\(\).*static_argnums"):
        ad.jit(grad(f))(X)


def test_random_numbers_inside_jit_are_refused():
    with pytest.raises(RuntimeError, match="draws random numbers"):
        ad.jit(lambda x: x + ad.randn(6))(X)
    g = ad.Generator(backend="numpy") if hasattr(ad, "Generator") else None
    if g is not None:   # a generator of its own: refused the same way
        with pytest.raises(RuntimeError, match="draws random numbers"):
            ad.jit(lambda x: x + ad.randn(6, generator=g))(X)


def test_an_escaped_tracer_fails_loudly():
    box = []
    ad.jit(lambda x: box.append(x) or x * 2)(X)
    with pytest.raises(RuntimeError, match="escaped"):
        ad.sin(box[0])


def test_in_place_updates_inside_jit():
    def f(x):
        y = ad.zeros_like(x)
        y[1:] = x[:-1] * 2
        y += 1
        return y

    j = ad.jit(f)
    for _ in range(2):
        close(j(X), f(X))
    close(ad.jit(grad(lambda x: ad.sum(f(x) ** 2)))(X), grad(lambda x: ad.sum(f(x) ** 2))(X))


# -- the program and its passes ---------------------------------------------------------------

def test_the_program_prints_one_line_per_instruction():
    prog = make_program(grad(chain))(X)
    text = str(prog)
    lines = text.splitlines()
    assert lines[0].startswith("program chain(") and lines[-1] == "}"
    body = [ln for ln in lines[1:-1] if " = " in ln and "const" not in ln]
    assert len(body) == len(prog.eqns)
    names = prog.primitive_names()
    for p in ("sin", "cos", "exp", "tanh", "multiply", "divide"):   # forward and backward
        assert p in names
    # the gradient does not need the forward's log and sum: dead code
    assert "log" in prog.unoptimized.primitive_names() and "log" not in names
    assert "float64[6]" in text
    assert str(prog.unoptimized).count("\n") >= text.count("\n")
    assert ad.jit(grad(chain)).lower(X).primitive_names() == names


def test_dead_code_is_removed():
    def f(x):
        ad.exp(x)          # unused
        return ad.sin(x)

    prog = make_program(f)(X)
    assert "exp" in prog.unoptimized.primitive_names()
    assert prog.primitive_names() == ["sin"]


def test_common_subexpressions_are_merged():
    def f(x):
        return ad.sin(x) * 2 + ad.sin(x) * 2 + ad.sin(x) * 2.0

    prog = make_program(f)(X)
    assert prog.unoptimized.primitive_names().count("sin") == 3
    assert prog.primitive_names().count("sin") == 1
    # x * 2 and x * 2.0 are kept apart (on integer arrays they differ in dtype)
    assert prog.primitive_names().count("multiply") == 2
    close(ad.jit(f)(X), 6 * np.sin(X))


def test_constants_are_folded():
    def f(x):   # ones_like(x) is a constant of the program: exp of it too
        return x * (ad.exp(ad.ones_like(x)) + 1)

    prog = make_program(f)(X)
    assert "exp" in prog.unoptimized.primitive_names()
    assert prog.primitive_names() == ["multiply"]
    close(ad.jit(f)(X), X * (np.e + 1))


def test_a_loop_body_traced_inside_jit_folds_its_constants_into_arrays():
    """A while_loop's body traced while jit traces the function is optimised then; what it
    folds from arrays made inside it must be arrays, not values of the enclosing jit (its
    replay then met the jit's tracers: 'bool() of a traced value')."""
    from arrayad.func import fori_loop, while_loop

    def f(x):
        def body(c):
            inner = fori_loop(0, 2, lambda i, v: v + ad.arange(3.0) * 0.5, c)
            return inner + ad.arange(3.0) * 2.0
        return while_loop(lambda c: ad.sum(c) < 100.0, body, x)

    x = np.array([0.5, -1.0, 2.0])
    j = ad.jit(f)
    for _ in range(2):
        close(j(x), f(x))


def test_static_arguments_are_keyed_by_value_type_and_sign_on_every_call():
    """The second call of each signature takes the cached program (the fast path for
    positional NumPy arrays and static numbers): it must tell 2 from 2.0 (an integer array
    times 2 stays integer) and 0.0 from -0.0 (1 / x)."""
    j = ad.jit(lambda x, s: (x * s, x / s), static_argnums=-1)
    xi = np.arange(1, 4)
    for _ in range(3):
        for s in (2, 2.0, 0.0, -0.0):
            got = j(xi, s)
            with np.errstate(divide="ignore"):
                want = (xi * s, xi / s)
            for g, w in zip(got, want):
                close(g, w)
                assert to_numpy(g).dtype == w.dtype
    assert j.traces == 4


@pytest.mark.parametrize("name", JIT_BACKENDS)
def test_tables_made_inside_from_python_data_are_folded(name):
    """A polynomial fit's table t_i ** j, made from arange/linspace/asarray of Python data
    inside the function, is computed once when the program is optimised (XLA folds it too):
    only the products with the argument stay, under jit and jit(grad)."""
    be = Backend(name)
    t, powers = np.linspace(-1.0, 1.0, 6), np.arange(4.0)
    table = t[:, None] ** powers[None, :]
    target = np.array([1.0, -1, 2, 0, 3, 1])

    def loss(c):
        tt = ad.linspace(-1.0, 1.0, 6, dtype=c.dtype)
        r = tt[:, None] ** ad.arange(4, dtype=c.dtype)[None, :] @ c - ad.asarray(
            [1.0, -1, 2, 0, 3, 1], dtype=c.dtype)
        return ad.sum(r * r)

    c = np.array([0.5, -0.25, 1.0, 2.0])
    prog = make_program(loss)(be(c))
    assert set(prog.primitive_names()) == {"matmul", "subtract", "multiply", "sum"}
    want_r = table @ c - target
    close(ad.jit(loss)(be(c)), want_r @ want_r)
    close(ad.jit(grad(loss))(be(c)), 2 * table.T @ want_r)
    assert "pow" not in make_program(grad(loss))(be(c)).primitive_names()


@pytest.mark.parametrize("name", JIT_BACKENDS)
def test_the_fold_pass_takes_the_tables_the_trace_computed(name, monkeypatch):
    """NOTE [the trace's constants]: tracing computed the table of constants already; the fold
    pass takes those values instead of computing the table a second time (the first call took
    twice the eager call), in a loop's body too, and the program is the same."""
    from arrayad._jit import passes
    from arrayad.func import fori_loop

    be = Backend(name)
    bound = []
    real_bind = passes.bind
    monkeypatch.setattr(passes, "bind", lambda prim, *a, **k: (bound.append(prim.name),
                                                               real_bind(prim, *a, **k))[1])

    def fit(c):
        t = ad.linspace(-1.0, 1.0, 6, dtype=c.dtype)
        return t[:, None] ** ad.arange(4, dtype=c.dtype)[None, :] @ c

    c = np.array([0.5, -0.25, 1.0, 2.0])
    t = np.linspace(-1.0, 1.0, 6)
    want = (t[:, None] ** np.arange(4.0)[None, :]) @ c
    j = ad.jit(fit)
    close(j(be(c)), want)
    close(j(be(c)), want)   # (the replay of the program the passes made)
    prog = make_program(fit)(be(c))
    assert "pow" not in prog.primitive_names() and "pow" in prog.unoptimized.primitive_names()
    assert bound == []

    # a loop's body is traced and optimised as a program of its own
    cb = be(c)
    step = lambda i, v: v + fit(cb) + ad.exp(ad.arange(6, dtype=cb.dtype) / 6)
    close(fori_loop(0, 3, step, be(want)), 4 * want + 3 * np.exp(np.arange(6) / 6))
    assert bound == []


def test_the_backward_pass_reuses_forward_values():
    # grad of sin needs cos(x), of tanh its result: computed once each in the staged program
    prog = make_program(grad(lambda x: ad.sum(ad.sin(x) * ad.cos(x) + ad.tanh(x))))(X)
    names = prog.primitive_names()
    assert names.count("cos") == 1 and names.count("sin") == 1 and names.count("tanh") == 1


def test_large_elementwise_results_reuse_dead_buffers():
    x = np.random.default_rng(3).standard_normal(40_000)   # 320 kB: above the reuse threshold
    j = ad.jit(grad(chain))
    close(j(x), grad(chain)(x))
    close(j(x), grad(chain)(x))
    from arrayad._jit.replay import compile_replay   # (the unfused replay)
    src = compile_replay(j.lower(x)).source
    assert "out=" in src and "del " in src
    close(ad.jit(grad(chain))(X), grad(chain)(X))
    assert "out=" not in compile_replay(ad.jit(grad(chain)).lower(X)).source


# -- every function of the operator database under jit ----------------------------------------

import opdb  # noqa: E402

FIRST = [c for c in opdb.all_cases() if c.i == 0 and c.s0.args]
FIRST_DIFF = [c for c in FIRST if c.op.differentiable and c.s0.diff_indices()]


def _closure(case, arrays):
    s = case.s0
    idx = s.diff_indices()

    def f(*d):
        full = list(arrays)
        for i, v in zip(idx, d):
            full[i] = v
        return opdb.call_sample(case.op, s, full)
    f.__name__ = case.op.name.replace(".", "_")
    return f, [arrays[i] for i in idx]


def _np_leaves(out):
    return [to_numpy(x) for x in ad.func.tree_flatten(out)[0]]


def _same(got, want, what):
    got, want = _np_leaves(got), _np_leaves(want)
    assert len(got) == len(want), what
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, what
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12, err_msg=what)


@pytest.mark.parametrize("case", FIRST, ids=[c.id for c in FIRST])
def test_every_function_forward_under_jit(case):
    s = case.s0
    args = [a for a in s.args]
    arrays = [i for i, a in enumerate(args) if isinstance(a, np.ndarray)]

    def f(*arrs):
        full = list(args)
        for i, v in zip(arrays, arrs):
            full[i] = v
        return opdb.call_sample(case.op, s, full)

    f.__name__ = case.op.name.replace(".", "_")
    inputs = [args[i] for i in arrays]
    want = f(*inputs)
    j = ad.jit(f)
    if not s.vmap:   # the output's shape depends on the values: refused by name
        with pytest.raises(RuntimeError, match=r"shape depends on the\s+values"):
            j(*inputs)
        return
    _same(j(*inputs), want, f"jit({case.op.name}) traced")
    _same(j(*inputs), want, f"jit({case.op.name}) replayed")


@pytest.mark.parametrize("backend_name", ["numpy", "array_api_strict"])
@pytest.mark.parametrize("case", FIRST_DIFF, ids=[c.id for c in FIRST_DIFF])
def test_every_function_vjp_and_jvp_under_jit(case, backend_name):
    be = Backend(backend_name)
    arrays = [be(a) if isinstance(a, np.ndarray) else a for a in case.s0.args]
    f, diff = _closure(case, arrays)
    out, vjp_fn = vjp(f, *diff)
    rng = np.random.default_rng(5)
    cts = ad.func.tree_map(lambda o: be(rng.standard_normal(to_numpy(o).shape).astype(
        to_numpy(o).dtype) if to_numpy(o).dtype.kind == "f" else to_numpy(o)), out)
    tangents = [be(rng.standard_normal(to_numpy(d).shape).astype(to_numpy(d).dtype)) for d in diff]

    n = len(diff)
    ct_leaves, ct_spec = ad.func.tree_flatten(cts)

    def pull(*xs):   # (the cotangents are arguments too: values of the program)
        return vjp(f, *xs[:n])[1](ad.func.tree_unflatten(list(xs[n:]), ct_spec))

    def push(*xs):
        return jvp(f, tuple(xs[:n]), tuple(xs[n:]))

    for g, name, extra in ((pull, "vjp", ct_leaves), (push, "jvp", tangents)):
        want = g(*diff, *extra)
        j = ad.jit(g)
        _same(j(*diff, *extra), want, f"jit({name}({case.op.name})) traced")
        _same(j(*diff, *extra), want, f"jit({name}({case.op.name})) replayed")
    # and the other way round: derivatives of the jitted function, against finite differences
    check_grads(ad.jit(f), diff, order=1, modes=("fwd", "rev"), rtol=case.op.rtol,
                atol=case.op.atol)


def test_boolean_mask_indexing_is_refused_with_the_fix():
    with pytest.raises(RuntimeError, match=r"getitem returns .* boolean mask.*where"):
        ad.jit(lambda x: x[x > 0])(X)
    close(ad.jit(lambda x: ad.where(x > 0, x, 0.0))(X), np.where(X > 0, X, 0.0))


def test_negations_fold_into_their_consumer():
    prog = make_program(lambda x, y: x + (-ad.sin(y)) + (-x) * 2)(X, X)
    assert "negative" in prog.unoptimized.primitive_names()
    assert "negative" not in prog.primitive_names()
    close(ad.jit(lambda x, y: x + (-ad.sin(y)) + (-x) * 2)(X, X), X - np.sin(X) - 2 * X)


def test_outputs_that_are_not_traced():
    j = ad.jit(lambda x: (x * 2, None, 3, ad.zeros_like(x)))
    for _ in range(2):
        a, none, three, z = j(X)
        close(a, 2 * X)
        assert none is None and three == 3
        close(z, np.zeros(6))
    z[0] = 5.0   # the caller may write into a result: the next call is unaffected
    close(j(X)[3], np.zeros(6))


def test_a_cached_program_is_one_primitive_to_outer_transforms():
    def f(x, k):   # an integer argument and an integer output beside the float ones
        return x * k, k + 1, ad.sum(x ** 2)

    j = ad.jit(f)
    k = np.arange(6)
    j(X, k)   # traced (the outer transforms below then use the cached program)
    t = ad.tensor(X, requires_grad=True)
    out = j(t, k)
    assert "Jit" in out[0].grad_fn.name()   # one node for the whole program
    (ad.sum(out[0]) + out[2]).backward()
    close(t.grad, k + 2 * X)
    close(grad(lambda x: ad.sum(j(x, k)[0]) + j(x, k)[2])(X), k + 2 * X)
    close(jvp(lambda x: j(x, k)[0], (X,), (np.ones(6),))[1], k.astype(float))
    close(vmap(lambda x: j(x, k)[2])(XS), np.sum(XS ** 2, axis=1))
    close(hessian(lambda x: j(x, k)[2])(X), 2 * np.eye(6))
    _, k1, _ = j(t, k)
    close(k1, k + 1)


def _in_threads(check, n=4):
    """Run ``check(rng)`` in ``n`` threads at once; re-raise what any of them raised."""
    import threading
    errors = []

    def work(seed):
        try:
            check(np.random.default_rng(seed))
        except Exception as e:   # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_threads_share_a_jitted_function():
    j = ad.jit(grad(chain), cache_size=2)

    def check(rng):
        for n in (3, 4, 5, 6) * 5:   # more signatures than the cache holds
            x = rng.standard_normal(n)
            np.testing.assert_allclose(j(x), grad(chain)(x), rtol=1e-12)

    _in_threads(check)


def test_threads_replay_a_program_with_a_function_inside():
    class Cube(ad.autograd.Function):
        @staticmethod
        def forward(x):
            return x ** 3

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x ** 2 * g

    j = ad.jit(grad(lambda x: ad.sum(Cube.apply(x))))
    j(np.ones(4))

    def check(rng):
        for _ in range(200):
            x = rng.standard_normal(4)
            np.testing.assert_allclose(j(x), 3 * x ** 2, rtol=1e-12)

    _in_threads(check)


def test_arrays_made_inside_are_constants_of_the_program(be):
    def f(x):
        out = ad.zeros(6, dtype=x.dtype)   # made on x's backend, a value of the program
        out[1:] = x[:-1] * ad.arange(5, dtype=x.dtype)
        return out

    j = ad.jit(f)
    for _ in range(2):
        close(j(be(X)), np.concatenate([[0.0], X[:-1] * np.arange(5)]))
    loss = grad(lambda x: ad.sum(f(x) ** 2))   # (under grad, zeros is made on x's backend too)
    close(ad.jit(loss)(be(X)), loss(be(X)))


def test_a_constant_output_of_the_first_call_is_the_callers_own(be):
    """An output that is a constant of the program (made inside, or folded from such) is the
    trace's value on the first call: it is handed out as a copy, as the replay hands out
    constants, so that a write into it does not change what later calls return."""
    def f(x):
        table = ad.arange(6, dtype=x.dtype) * 2
        return x + 1, ad.zeros(3, dtype=x.dtype), ad.asarray([1.0, 2, 3], dtype=x.dtype), table[:3]

    want = [X[:3] + 1, np.zeros(3), np.array([1.0, 2, 3]), np.array([0.0, 2, 4])]
    j = ad.jit(f)
    for _ in range(3):
        out = j(be(X[:3]))
        for got, w in zip(out, want):
            close(got, w)
        for got in out[1:]:
            got[0] = 99.0


def test_multiplications_by_one_are_dropped():
    # the gradient of sum((x - y) ** 2): 2 * (x - y) ** 1 * ones
    f = grad(lambda x, y: ad.sum((x - y) ** 2))
    prog = make_program(f)(X, XS[0])
    assert "pow" in prog.unoptimized.primitive_names() and "pow" not in prog.primitive_names()
    assert prog.primitive_names().count("multiply") == 1
    close(ad.jit(f)(X, XS[0]), 2 * (X - XS[0]))
    xi = np.arange(6)   # integer arrays: x * 1 keeps the dtype, so it goes too
    close(ad.jit(lambda x: x * 1 + x ** 1)(xi), 2 * xi)
    # a table made inside is a one only if all of it is: its first element does not decide,
    # except for one number broadcast (the pass looks at the first element before the rest)
    almost = lambda x: x * ad.asarray([1.0, 1, 1, 1, 1, 2], dtype=x.dtype)
    assert make_program(almost)(X).primitive_names() == ["multiply"]
    close(ad.jit(almost)(X), X * np.array([1.0, 1, 1, 1, 1, 2]))
    spread = lambda x: x * ad.broadcast_to(ad.asarray(1.0, dtype=x.dtype), x.shape)
    assert "multiply" not in make_program(spread)(X).primitive_names()
    close(ad.jit(spread)(X), X)


# -- the transform tests of test_func.py, again with every transform jitted --------------------------
import inspect  # noqa: E402

import test_func  # noqa: E402
import test_function  # noqa: E402

_JIT_WRAPPED = ["grad", "grad_and_value", "value_and_grad", "jacrev", "jacfwd", "hessian", "vmap"]
# Tests whose subject jit refuses by design (docs/jit.md): Python control flow on traced values,
# random numbers drawn inside.
_NOT_UNDER_JIT = {"test_control_flow": "an if on a traced value",
                  "test_vmap_chunk_size_and_randomness": "random numbers inside"}


def _transform_tests():
    for module in (test_func, test_function):
        for name, fn in inspect.getmembers(module, inspect.isfunction):
            params = list(inspect.signature(fn).parameters)
            if not name.startswith("test_") or name in _NOT_UNDER_JIT or \
                    fn.__module__ != module.__name__ or any(p != "backend" for p in params):
                continue
            for be in (["numpy", "array_api_strict"] if params else ["numpy"]):
                yield pytest.param(module, name, be, id=f"{module.__name__}.{name}-{be}")


@pytest.mark.parametrize("module, name, backend_name", list(_transform_tests()))
def test_transform_tests_under_jit(module, name, backend_name, monkeypatch):
    """Each transform test of test_func.py and test_function.py that takes only a backend, with
    ``grad(f, ...)`` & co. replaced by ``jit(grad(f, ...))``: the same assertions hold for the
    staged programs."""
    for t in _JIT_WRAPPED:
        transform = getattr(module, t, None)
        if transform is not None:
            monkeypatch.setattr(module, t, lambda f, *a, _t=transform, **k:
                                ad.jit(_t(f, *a, **k)))
    fn = getattr(module, name)
    fn(*([Backend(backend_name)] if inspect.signature(fn).parameters else []))
