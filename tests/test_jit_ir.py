"""The program IR of arrayad.jit: every pass returns a new, valid, runnable program and leaves its
input alone; ``check`` refuses broken programs; ``plan_memory`` reuses and frees the right
buffers. References: the un-jitted functions (NumPy evaluation of arrayad's eager mode is checked
against torch elsewhere) and NumPy's own formulas."""

import numpy as np
import pytest

import arrayad as ad
from arrayad._jit import Eqn, Lit, Program, Var, check, passes
from arrayad._jit.ir import CheckError
from arrayad._jit.passes import REUSE_BYTES, plan_memory
from arrayad._jit.replay import compile_replay, writes_into
from arrayad.func import grad, make_program

from conftest import to_numpy
from reference import chain, chain_np


@pytest.fixture(autouse=True)
def checked_passes():
    with ad.config.jit_check(True):
        yield


def chain_grad_np(x):   # (by hand, for an independent reference)
    s = np.sin(x) * np.cos(x) + np.exp(-x * x)
    y = np.tanh(s) * 2 - s / 3
    dy = 2 * y / (1 + y * y)
    ds = dy * (2 * (1 - np.tanh(s) ** 2) - 1 / 3)
    return ds * (np.cos(x) ** 2 - np.sin(x) ** 2 - 2 * x * np.exp(-x * x))


X = np.random.default_rng(0).standard_normal(7)

PASSES = [passes.fold, passes.identities, passes.cse, passes.negations, passes.dce]


def _snapshot(prog):
    return (str(prog), list(prog.eqns), dict(prog.consts), dict(prog.captured),
            list(prog.outs))


@pytest.mark.parametrize("p", PASSES, ids=lambda p: p.__name__)
def test_every_pass_gives_a_runnable_program_and_leaves_its_input(p):
    prog = make_program(grad(chain))(X)
    before = prog.unoptimized
    snap = _snapshot(before)
    out = p(before)
    assert _snapshot(before)[0] == snap[0]
    assert all(a is b for a, b in zip(_snapshot(before)[1], snap[1]))
    assert _snapshot(before)[2:] == snap[2:]
    check(out)
    np.testing.assert_allclose(out(X), chain_grad_np(X), rtol=1e-10, atol=1e-12)


def test_cse_of_the_unoptimized_program_runs():
    prog = make_program(chain)(X)
    np.testing.assert_allclose(passes.cse(prog.unoptimized)(X), chain_np(X), rtol=1e-12)


def test_dce_does_not_change_its_input():
    c = np.ones(3)
    prog = make_program(lambda x: x * 2 + 0 * ad.sum(c))(X[:3]).unoptimized
    consts = dict(prog.consts)
    passes.drop_unused_consts(prog)
    passes.dce(prog)
    assert prog.consts == consts


def _prim(name):
    from arrayad._core import _core
    return _core._primitive_by_name(name)


F64 = np.dtype(np.float64)


def _prog(in_vars, eqns, outs, consts=None):
    from arrayad.backends import default_backend
    from arrayad._pytree import tree_flatten
    return Program("f", in_vars, consts or {}, eqns, outs, None,
                   tree_flatten(tuple(outs))[1], default_backend())


def test_check_refuses_use_before_definition_and_double_definition():
    a, b, c = Var(1, (3,), F64), Var(2, (3,), F64), Var(3, (3,), F64)
    sin, add = _prim("sin"), _prim("add")
    good = _prog([a], [Eqn(sin, (a,), {}, (b,)), Eqn(add, (a, b), {}, (c,))], [c])
    check(good)
    np.testing.assert_allclose(good(X[:3]), (X[:3] + np.sin(X[:3]),))
    with pytest.raises(CheckError, match="before it is defined"):
        check(_prog([a], [Eqn(add, (a, b), {}, (c,)), Eqn(sin, (a,), {}, (b,))], [c]))
    with pytest.raises(CheckError, match="again"):
        check(_prog([a], [Eqn(sin, (a,), {}, (b,)), Eqn(sin, (a,), {}, (b,))], [b]))
    with pytest.raises(CheckError, match="output .* not defined"):
        check(_prog([a], [Eqn(sin, (a,), {}, (b,))], [c]))
    with pytest.raises(CheckError, match="defined twice"):
        check(_prog([a, a], [], [a]))


def test_check_refuses_wrong_elementwise_shapes_and_stray_captured():
    a, b = Var(1, (3,), F64), Var(2, (4,), F64)
    with pytest.raises(CheckError, match="elementwise result of shape"):
        check(_prog([a], [Eqn(_prim("sin"), (a,), {}, (b,))], [b]))
    p = _prog([a], [], [a])
    p.captured = {Var(9, (3,), F64): object()}
    with pytest.raises(CheckError, match="captured"):
        check(p)
    ok = _prog([a], [Eqn(_prim("multiply"), (a, Lit(2.0)), {}, (Var(3, (3,), F64),))],
               [Var(3, (3,), F64)])
    with pytest.raises(CheckError, match="not defined"):   # (a fresh Var: not the same variable)
        check(ok)


# -- plan_memory --------------------------------------------------------------------------------

N = REUSE_BYTES // 8 * 2   # float64 elements: above the reuse threshold


def _chain_prog(n):
    x = Var(1, (n,), F64)
    s, c, m, e = (Var(k, (n,), F64) for k in (2, 3, 4, 5))
    eqns = [Eqn(_prim("sin"), (x,), {}, (s,)), Eqn(_prim("cos"), (x,), {}, (c,)),
            Eqn(_prim("multiply"), (s, c), {}, (m,)), Eqn(_prim("exp"), (m,), {}, (e,))]
    return _prog([x], eqns, [e])


def test_plan_memory_writes_into_dead_fresh_buffers_and_frees_them():
    # sin's or cos's buffer (dead after the multiply) takes the product, whose buffer takes
    # exp's result
    prog = _chain_prog(N)
    plan = plan_memory(prog, writes_into)
    s, c, m, _ = (e.outs[0] for e in prog.eqns)
    assert plan.into[2] in (s, c) and plan.into[3] is m
    assert set(plan.free[2]) == {s, c} and plan.free[3] == [m]
    x = np.random.default_rng(1).standard_normal(N)
    np.testing.assert_allclose(compile_replay(prog, flat=True, plan=plan)(x)[0],
                               np.exp(np.sin(x) * np.cos(x)))


def test_plan_memory_keeps_inputs_outputs_small_and_viewed_values():
    prog = _chain_prog(16)   # small: fresh arrays are cheaper than out=
    assert plan_memory(prog, writes_into).into == {} and plan_memory(prog, writes_into).free == {}
    prog = _chain_prog(N)
    assert plan_memory(prog, None).into == {}   # (no call takes out=: torch, strict)
    # an input is never written into; an output never freed
    x = prog.in_vars[0]
    plan = plan_memory(prog, writes_into)
    assert x not in plan.into.values() and all(x not in v for v in plan.free.values())
    assert all(prog.outs[0] not in v for v in plan.free.values())
    # a value that something other than a ufunc reads (a reshape may view it) is not reused
    s = prog.eqns[0].outs[0]
    r = Var(9, (N,), F64)
    viewed = _prog(prog.in_vars, prog.eqns[:1] + [Eqn(_prim("reshape"), (s,), {"shape": (N,)},
                                                      (r,))] + prog.eqns[1:], prog.outs)
    assert s not in plan_memory(viewed, writes_into).into.values()
