"""One parametrized test per property over (operator database sample x backend).

Derivatives are checked against central finite differences (``arrayad.testing.check_grads``) and,
for the elementwise functions and reductions on torch tensors, against ``torch.func``; vmap is
checked against a Python loop. Dask runs the first sample of each entry only (each dask call
builds and computes a graph: slow), and functions with no array input run on NumPy only.
"""
import importlib.util

import numpy as np
import pytest

import arrayad as ad
from arrayad._dtypes import is_inexact
from arrayad.func import tree_flatten, tree_unflatten, vjp, vmap
from arrayad.testing import check_grads

import opdb
from conftest import to_numpy

CASES = opdb.all_cases()
DIFF = [c for c in CASES if c.op.differentiable and c.s0.diff_indices()]
HESS = [c for c in DIFF if c.op.hessian and c.i == 0]
HAS_TORCH = importlib.util.find_spec("torch") is not None
TORCH = [c for c in DIFF if c.op.torch is not None]


# Known failures, each strict (an unexpected pass fails too, so the table is kept honest):
# (backend, function, test or "*") -> reason. Reported to the owners; remove an entry when fixed.
KNOWN_FAILURES = {}   # none at present (the dask linalg gaps are filled in backends/dask.py)


@pytest.fixture(autouse=True)
def _known_failures(request):
    params = getattr(getattr(request.node, "callspec", None), "params", {})
    case, backend = params.get("case"), params.get("backend")
    if case is not None and backend is not None:
        test = request.node.originalname
        reason = (KNOWN_FAILURES.get((backend, case.op.name, test))
                  or KNOWN_FAILURES.get((backend, case.op.name, "*")))
        if reason and not (backend == "dask" and case.i != 0):
            request.node.add_marker(pytest.mark.xfail(strict=True, reason=reason))


def _ids(cases):
    return [c.id for c in cases]


def _cast(a, dtype):
    """Floating NumPy data in the requested precision (complex follows)."""
    if isinstance(a, np.ndarray) and a.dtype.kind == "f":
        return a.astype(dtype)
    if isinstance(a, np.ndarray) and a.dtype.kind == "c":
        return a.astype(np.complex64 if dtype == np.float32 else np.complex128)
    return a


def _skip_backend(case, backend, composed=False, dask=True):
    """The runtime budget: NumPy runs everything; array-api-strict and torch run every sample
    of the first-order properties and the first two samples of the composed ones (vmap of vjp,
    jvp of vjp, .backward(), hessian); Dask (slow: a graph per call) the first sample of the
    first-order properties in float64 only (``dask=False`` skips it)."""
    if not case.s0.args and backend.name != "numpy":
        pytest.skip("no array input: the backend is not involved")
    if backend.name == "dask" and (case.i != 0 or composed or not dask):
        pytest.skip("dask runs the first sample of the first-order properties only (speed)")
    if composed and backend.name != "numpy" and case.i >= 2:
        pytest.skip("composed properties run on the first two samples off NumPy (speed)")


def _convert(backend, args, dtype=np.float64):
    return [backend(_cast(a, dtype)) if isinstance(a, np.ndarray) else a for a in args]


def _closure(case, arrays):
    """``f(*diff_arrays)`` with the sample's other arguments fixed, and the diff arrays."""
    s = case.s0
    idx = s.diff_indices()

    def f(*d):
        full = list(arrays)
        for i, v in zip(idx, d):
            full[i] = v
        return opdb.call_sample(case.op, s, full)
    f.__name__ = case.op.name
    return f, [arrays[i] for i in idx]


def _leaves(out):
    return [to_numpy(x) for x in tree_flatten(out)[0]]


def _assert_close(got, want, rtol, atol, what):
    assert len(got) == len(want), f"{what}: {len(got)} outputs, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape, f"{what}: output {i} has shape {g.shape}, expected {w.shape}"
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"{what}: output {i}")


def _random(rng, x):
    a = to_numpy(x)
    r = rng.standard_normal(a.shape)
    if a.dtype.kind == "c":
        r = r + 1j * rng.standard_normal(a.shape)
    return r.astype(a.dtype)


# ---------------------------------------------------------------------------------------------
# Forward values (float32 and float64) against NumPy

@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_forward(case, backend, dtype):
    _skip_backend(case, backend, dask=dtype == np.float64)
    if dtype == np.float32 and not case.op.float32:
        pytest.skip("float64/complex only")
    if case.op.ref is None:
        pytest.skip("no NumPy reference")
    s = case.s0
    np_args = [_cast(a, dtype) for a in s.args]
    try:
        want = s.call(case.op.ref, *np_args, **s.kwargs) if s.call else case.op.ref(*np_args, **s.kwargs)
    except TypeError:
        pytest.skip("the NumPy reference does not take these arguments")
    got = opdb.call_sample(case.op, s, _convert(backend, s.args, dtype))
    got_l, want_l = _leaves(got), [np.asarray(w) for w in tree_flatten(want)[0]]
    tol = 1e-5 if dtype == np.float32 else 1e-10
    _assert_close(got_l, want_l, tol, tol, f"{case.op.name} forward")
    for g, w in zip(got_l, want_l):
        if is_inexact(w.dtype) and dtype == np.float32:
            assert g.dtype.itemsize <= w.dtype.itemsize, \
                f"{case.op.name}: float32 input gave {g.dtype} (NumPy gives {w.dtype})"


# ---------------------------------------------------------------------------------------------
# vmap against a Python loop

def _batched_call(case, backend, dtype, layout):
    """(vmapped result, looped results) over a batch of the two draws of the sample."""
    a0 = [_cast(a, dtype) for a in case.s0.args]
    a1 = [_cast(a, dtype) for a in case.s1.args]
    arr = [i for i, a in enumerate(a0) if isinstance(a, np.ndarray)]
    if layout == "front":          # every array argument batched along axis 0
        batched = {i: 0 for i in arr}
    else:                          # the first one batched along its last axis, the rest shared
        batched = {arr[0]: a0[arr[0]].ndim}
    args, in_dims = [], []
    for i, a in enumerate(a0):
        if i in batched:
            args.append(backend(np.stack([a, a1[i]], axis=batched[i])))
            in_dims.append(batched[i])
        else:
            args.append(backend(a) if isinstance(a, np.ndarray) else a)
            in_dims.append(None)

    def f(*xs):
        return opdb.call_sample(case.op, case.s0, list(xs))
    out = vmap(f, in_dims=tuple(in_dims))(*args)
    loops = []
    for b in range(2):
        xs = [backend((a0 if b == 0 else a1)[i]) if i in batched else args[i] for i in range(len(a0))]
        loops.append(f(*xs))
    return out, loops


@pytest.mark.parametrize("variant", [("front", np.float64), ("last", np.float32)],
                         ids=["front-f64", "last-f32"])
@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_vmap(case, backend, variant):
    _skip_backend(case, backend, dask=variant[0] == "front")
    layout, dtype = variant
    if not case.s0.vmap or not any(isinstance(a, np.ndarray) for a in case.s0.args):
        pytest.skip("the output's shape depends on the data" if not case.s0.vmap else "no array")
    if dtype == np.float32 and not case.op.float32:
        dtype = np.float64
    out, loops = _batched_call(case, backend, dtype, layout)
    got = _leaves(out)
    want = [np.stack(list(ws)) for ws in zip(*[_leaves(lp) for lp in loops])]
    tol = 1e-5 if dtype == np.float32 else 1e-10
    _assert_close(got, want, tol, tol, f"vmap({case.op.name}) vs a loop")


# ---------------------------------------------------------------------------------------------
# Derivatives against finite differences (float64)

def _check(case, backend, **kw):
    _skip_backend(case, backend)
    f, diff = _closure(case, _convert(backend, case.s0.args))
    kw.setdefault("rtol", case.op.rtol)
    kw.setdefault("atol", case.op.atol)
    check_grads(f, diff, **kw)


@pytest.mark.parametrize("case", DIFF, ids=_ids(DIFF))
def test_vjp(case, backend):
    _check(case, backend, order=1, modes=("rev",))


@pytest.mark.parametrize("case", DIFF, ids=_ids(DIFF))
def test_jvp(case, backend):
    _check(case, backend, order=1, modes=("fwd",))


@pytest.mark.parametrize("case", HESS, ids=_ids(HESS))
def test_hessian(case, backend):
    """Second derivatives: forward/reverse over forward/reverse (check_grads order 2)."""
    _skip_backend(case, backend, composed=True)
    _check(case, backend, order=2, modes=("fwd", "rev"))


def _vjp_setup(case, backend):
    f, diff = _closure(case, _convert(backend, case.s0.args))
    out, vjp_fn = vjp(f, *diff)
    leaves, spec = tree_flatten(out)
    return f, diff, leaves, spec, vjp_fn


@pytest.mark.parametrize("case", DIFF, ids=_ids(DIFF))
def test_vmap_vjp(case, backend):
    """vmap over cotangents of a vjp_fn equals calling it once per cotangent."""
    _skip_backend(case, backend, composed=True)
    _, _, leaves, spec, vjp_fn = _vjp_setup(case, backend)
    rng = np.random.default_rng(1)
    us = [[_random(rng, o) for o in leaves] for _ in range(2)]
    stacked = tree_unflatten([backend(np.stack([us[0][j], us[1][j]])) for j in range(len(leaves))],
                             spec)
    got = _leaves(vmap(vjp_fn)(stacked))
    loops = [_leaves(vjp_fn(tree_unflatten([backend(u) for u in us[b]], spec))) for b in range(2)]
    want = [np.stack(list(ws)) for ws in zip(*loops)]
    _assert_close(got, want, 1e-10, 1e-10, f"vmap(vjp_fn) of {case.op.name} vs a loop")


@pytest.mark.parametrize("case", DIFF, ids=_ids(DIFF))
def test_jvp_of_vjp(case, backend):
    """Forward mode through the reverse rules: (x, u) -> vjp(f, x)(u) against finite differences."""
    _skip_backend(case, backend, composed=True)
    f, diff, leaves, spec, _ = _vjp_setup(case, backend)
    rng = np.random.default_rng(2)
    us = [backend(_random(rng, o)) for o in leaves]
    n = len(diff)

    def f_vjp(*xs):
        return vjp(f, *xs[:n])[1](tree_unflatten(list(xs[n:]), spec))
    f_vjp.__name__ = f"vjp({case.op.name})"
    check_grads(f_vjp, diff + us, order=1, modes=("fwd",), rtol=case.op.rtol, atol=case.op.atol)


# ---------------------------------------------------------------------------------------------
# Eager autograd: .backward() against a finite-difference gradient, element by element

def _scalar_loss(outs, us):
    total = None
    for o, u in zip(outs, us):
        term = ad.sum(ad.real(o * ad.conj(u))) if ad.isdtype(o.dtype, "complex floating") \
            else ad.sum(o * u)
        total = term if total is None else total + term
    return total


@pytest.mark.parametrize("case", DIFF, ids=_ids(DIFF))
def test_backward(case, backend):
    _skip_backend(case, backend, composed=True)
    s = case.s0
    idx = s.diff_indices()
    if sum(s.args[i].size for i in idx) > 40:
        pytest.skip("too many elements for an element-by-element finite difference")
    raw = _convert(backend, s.args)
    f, diff = _closure(case, raw)
    leaves = tree_flatten(f(*diff))[0]
    rng = np.random.default_rng(3)
    us = [backend(_random(rng, o)) for o in leaves]

    tensors = [ad.Tensor(d).requires_grad_() for d in diff]
    loss = _scalar_loss(tree_flatten(f(*tensors))[0], us)
    loss.backward()

    def loss_np(ds):
        return float(to_numpy(_scalar_loss(tree_flatten(f(*[backend(d) for d in ds]))[0], us)))

    eps = 1e-6
    base = [np.array(s.args[i], dtype=s.args[i].dtype) for i in idx]
    for j, (t, x) in enumerate(zip(tensors, base)):
        want = np.zeros(x.shape, dtype=x.dtype)
        steps = [1.0, 1j] if x.dtype.kind == "c" else [1.0]
        for e in np.ndindex(x.shape):
            for step in steps:
                plus = [b.copy() for b in base]
                minus = [b.copy() for b in base]
                plus[j][e] += eps * step
                minus[j][e] -= eps * step
                want[e] += step * (loss_np(plus) - loss_np(minus)) / (2 * eps)
        got = np.zeros(x.shape) if t.grad is None else to_numpy(t.grad)
        np.testing.assert_allclose(got, want, rtol=1e-5 if case.op.rtol <= 1e-5 else case.op.rtol,
                                   atol=1e-6, err_msg=f"{case.op.name}: .grad of argument {j}")


# ---------------------------------------------------------------------------------------------
# torch.func as an independent implementation (elementwise functions and reductions)

@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
@pytest.mark.parametrize("case", TORCH, ids=_ids(TORCH))
def test_grad_vs_torch_func(case):
    import torch
    s = case.s0
    idx = s.diff_indices()
    args = [torch.from_numpy(np.array(a)) if isinstance(a, np.ndarray) else a for a in s.args]
    rng = np.random.default_rng(4)
    f_ad, diff = _closure(case, args)
    u = torch.from_numpy(_random(rng, tree_flatten(f_ad(*diff))[0][0]))

    def f_torch(*d):
        full = list(args)
        for i, v in zip(idx, d):
            full[i] = v
        out = s.call(case.op.torch, *full, **s.kwargs) if s.call else case.op.torch(*full, **s.kwargs)
        return (out * u).sum()

    argnums = tuple(range(len(diff)))
    want = torch.func.grad(f_torch, argnums=argnums)(*diff)
    got = ad.func.grad(lambda *d: ad.sum(f_ad(*d) * u), argnums=argnums)(*diff)
    for j, (g, w) in enumerate(zip(got, want)):
        assert isinstance(g, torch.Tensor), f"grad of torch tensors returned {type(g)}"
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-10, atol=1e-12,
                                   err_msg=f"{case.op.name}: argument {j}")


# ---------------------------------------------------------------------------------------------
# The rule tables and the coverage table

def _coverage_module():
    import importlib.util as iu
    import os
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools",
                        "coverage.py")
    spec = iu.spec_from_file_location("_arrayad_coverage", path)
    mod = iu.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_rule_tables():
    """Every differentiable function of the standard has a VJP rule (its primitive's) or is a
    composite (both as declared in arrayad/_ops)."""
    cov = _coverage_module()
    kinds = cov._kinds()
    public = {name: fn for _, name, fn in cov.public_functions()}
    missing, no_vjp = [], []
    for name in opdb.STANDARD_DIFFERENTIABLE:
        if name not in public:
            missing.append(name)
            continue
        kind, p = cov.classify(name, public[name], kinds)
        if kind == "composite":
            continue
        if kind != "primitive" or p.vjp is None or not p.differentiable:
            no_vjp.append(f"{name} ({kind}{'' if p is None else ': ' + p.name})")
    assert not missing, f"differentiable functions of the standard not in arrayad: {missing}"
    assert not no_vjp, ("differentiable functions with neither a VJP rule nor a composite "
                        f"definition (declare the rule, or declare the function a composite): {no_vjp}")


def test_primitives_have_rules():
    """Every differentiable primitive registered has a JVP rule and a batching rule too."""
    from arrayad._core._core import _PRIMITIVES
    bad = []
    for name, p in sorted(_PRIMITIVES.items()):
        if name.startswith("_test"):
            continue
        if p.differentiable and (p.vjp is None or p.jvp is None):
            bad.append(f"{name}: vjp={'yes' if p.vjp else 'no'}, jvp={'yes' if p.jvp else 'no'}")
    assert not bad, f"differentiable primitives missing a rule: {bad}"


def test_coverage_table_up_to_date():
    cov = _coverage_module()
    with open(cov.OUT) as f:
        committed = f.read()
    assert committed == cov.render(), \
        "docs/coverage.md is out of date: run `python tools/coverage.py` and commit the result"


# Declared primitives whose rules the operator database does not reach through a public function
# of their own (NOTE [declarations] in arrayad/_ops/_rules.py), each with where they are
# exercised instead. The test below fails on a primitive missing here and on a stale entry.
RULES_EXERCISED_ELSEWHERE = {
    "with_data": "writing into a detach()ed view, eagerly and under grad, jvp and vmap: "
                 "tests/test_aliasing.py::test_writing_a_detached_view_inside_transforms",
    "with_part": "writing into z.real / z.imag under grad, jvp, vmap and the eager tape: "
                 "tests/test_aliasing.py::test_real_and_imag_of_complex_arrays_are_views",
    "with_zero_grad": "in-place updates without history on the eager tape (zero_, fill_, "
                      "floor_...): tests/test_aliasing.py::test_in_place_methods_match_torch",
    "getitem": "x[key]: the composites take, take_along_axis and sort (opdb) and every transform "
               "of tests/test_indexing.py",
    "index_add": "getitem's VJP (above) and the x[key] += v tests of tests/test_indexing.py",
    "setitem": "x[key] = v under every transform in tests/test_indexing.py",
    "to_device": "Array.to_device under grad, vjp, jvp and vmap: "
                 "tests/test_rule_paths.py::test_to_device_rules",
    "nonzero": "its batching rule raises (data-dependent shape): "
               "tests/test_namespace.py::test_dynamic_shapes_under_vmap_are_clear_errors",
    "unique_all": "as nonzero", "unique_counts": "as nonzero", "unique_inverse": "as nonzero",
    "unique_values": "as nonzero",
    "zetac": "its derivative rules refuse by name: "
             "tests/test_special.py::test_zetac_values_and_vmap_but_no_derivative",
}


def _rules_exercised_by_opdb():
    """Declared primitive name -> the rules ("vjp", "jvp", "batch") that test_ops runs through
    an opdb entry of the primitive's own public function."""
    cov = _coverage_module()
    kinds = cov._kinds()
    out = {}
    for case in CASES:
        kind, p = cov.classify(case.op.name, case.op.fn, kinds)
        if kind != "primitive":
            continue
        rules = out.setdefault(p.name, set())
        if case.op.differentiable and case.s0.diff_indices():
            rules |= {"vjp", "jvp"}                       # test_vjp, test_jvp
        if case.s0.vmap and any(isinstance(a, np.ndarray) for a in case.s0.args):
            rules.add("batch")                            # test_vmap
    return out


def test_every_declared_rule_is_exercised():
    """Each rule of each declared primitive is run by the operator database, or the primitive
    is listed in RULES_EXERCISED_ELSEWHERE with the tests that run it."""
    from arrayad._ops._rules import DECLARED
    exercised = _rules_exercised_by_opdb()
    lacking = {}
    for name, p in sorted(DECLARED.items()):
        rules = {"batch"} if p.batch is not None else set()
        if p.differentiable:
            rules |= {r for r in ("vjp", "jvp") if getattr(p, r) is not None}
        if rules - exercised.get(name, set()):
            lacking[name] = sorted(rules - exercised.get(name, set()))
    unlisted = {n: r for n, r in lacking.items() if n not in RULES_EXERCISED_ELSEWHERE}
    assert not unlisted, (f"primitives whose rules no opdb entry exercises (add samples to "
                          f"tests/opdb.py, or list them in RULES_EXERCISED_ELSEWHERE): {unlisted}")
    stale = sorted(set(RULES_EXERCISED_ELSEWHERE) - set(lacking))
    assert not stale, f"RULES_EXERCISED_ELSEWHERE lists primitives opdb covers now: {stale}"


def test_opdb_refuses_unknown_names():
    """An entry for a function arrayad does not have fails loudly instead of being skipped."""
    n = len(opdb.OPS)
    with pytest.raises(LookupError, match="no_such_function"):
        opdb.op("no_such_function", opdb.unary_samples(opdb.real))
    with pytest.raises(LookupError, match="linalg.no_such_function"):
        opdb.op("linalg.no_such_function", opdb.unary_samples(opdb.real))
    assert len(opdb.OPS) == n
    assert opdb.available() == opdb.OPS
