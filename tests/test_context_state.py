"""The modes a ``with`` block sets are per context (``contextvars``): grad mode (``no_grad``,
``enable_grad``, ``set_grad_enabled``), the default backend (``backend``, ``set_backend``) and
forward_ad's dual levels. An asyncio task, or ``contextvars.copy_context().run``, starts with the
modes of the context it was made in, and its own blocks (held across ``await``) never reach
another task; a new thread starts with the defaults.

The asyncio tests make the blocks of two tasks overlap for certain: each task waits, inside its
block, until the other is inside its own (``asyncio.Event``), and looks at its modes at every step.
Derivatives are checked against NumPy's closed forms (the derivative of sin is cos), never against
numbers the code under test produced.
"""
import asyncio
import contextvars
import sys
import threading

import numpy as np
import pytest

import arrayad as ad
from arrayad._core import _core
from arrayad.autograd import forward_ad as fwAD
from arrayad.backends import backend_of, default_backend
from conftest import BACKENDS, Backend, to_numpy

NAMES = [n for n in BACKENDS if n in ("numpy", "array_api_strict", "torch")]
X = np.array([0.1, 0.7, -1.3, 2.0])
TIMEOUT = 60   # seconds; a task or thread still waiting then is a failure, not a hang


def other(name):
    """A backend other than ``name``, for the context around the block under test."""
    return "array_api_strict" if name == "numpy" else "numpy"


@pytest.fixture(params=NAMES)
def name(request):
    return request.param


@pytest.fixture(autouse=True)
def restore_modes():
    """Put back what a failing test may have left in the test's context."""
    backend = default_backend().name
    yield
    ad.set_grad_enabled(True)
    ad.set_backend(backend)
    if _core.stack_depth():
        _core.interpreters()[0].close()   # (closes everything above it too)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, TIMEOUT))


def modes():
    """(grad mode, default backend's name, backend of a new array) here and now."""
    return ad.is_grad_enabled(), default_backend().name, backend_of(ad.zeros(2)).name


def records(name):
    """Whether an operation on a tensor that requires grad records, and if it does, that its
    derivative is right (sin' = cos)."""
    x = Backend(name).tensor(X, requires_grad=True)
    y = ad.sum(ad.sin(x))
    if not y.requires_grad:
        assert y.grad_fn is None
        return False
    y.backward()
    np.testing.assert_allclose(to_numpy(x.grad), np.cos(X), rtol=1e-12)
    return True


# -- asyncio tasks ---------------------------------------------------------------------------------
def test_two_tasks_interleaving_see_only_their_own_modes(name):
    """One task inside ``with backend(name)``, the other inside ``with no_grad()``, both open at
    once, each checking its modes after every switch to the other."""
    outer = other(name)
    seen = {"a": [], "b": []}

    async def task_a(a_in, b_in):
        with ad.backend(name):
            a_in.set()
            await b_in.wait()
            for _ in range(5):
                seen["a"].append((modes(), records(name)))
                await asyncio.sleep(0)
        seen["a_after"] = modes()

    async def task_b(a_in, b_in):
        await a_in.wait()
        with ad.no_grad():
            b_in.set()
            for _ in range(5):
                seen["b"].append((modes(), records(name)))
                await asyncio.sleep(0)
        seen["b_after"] = modes()

    async def main():
        a_in, b_in = asyncio.Event(), asyncio.Event()
        await asyncio.gather(task_a(a_in, b_in), task_b(a_in, b_in))

    with ad.backend(outer):
        run(main())
        assert modes() == (True, outer, outer)
    assert seen["a"] == [((True, name, name), True)] * 5
    assert seen["b"] == [((False, outer, outer), False)] * 5
    assert seen["a_after"] == seen["b_after"] == (True, outer, outer)


def test_set_backend_and_set_grad_enabled_in_a_task_stay_in_it(name):
    """The plain calls (no ``with``) change the calling task's modes, and those of tasks it
    creates afterwards, not its siblings' nor the caller's."""
    outer = other(name)
    seen = {}

    async def child():
        seen["child"] = modes()

    async def setter(a_set, b_looked):
        ad.set_backend(name)
        ad.set_grad_enabled(False)
        a_set.set()
        await b_looked.wait()
        seen["setter"] = modes()
        await asyncio.create_task(child())

    async def sibling(a_set, b_looked):
        await a_set.wait()
        seen["sibling"] = modes()
        seen["sibling_records"] = records(name)
        b_looked.set()

    async def main():
        a_set, b_looked = asyncio.Event(), asyncio.Event()
        await asyncio.gather(setter(a_set, b_looked), sibling(a_set, b_looked))
        seen["main"] = modes()

    with ad.backend(outer):
        run(main())
        assert modes() == (True, outer, outer)
    assert seen["setter"] == seen["child"] == (False, name, name)
    assert seen["sibling"] == seen["main"] == (True, outer, outer)
    assert seen["sibling_records"] is True


def test_a_task_starts_with_the_modes_where_it_was_created(name):
    seen = {}

    async def look(key):
        seen[key] = modes()

    async def main():
        with ad.backend(name), ad.no_grad():
            inside = asyncio.create_task(look("inside"))
        outside = asyncio.create_task(look("outside"))
        await asyncio.gather(inside, outside)

    with ad.backend(other(name)):
        run(main())
    assert seen["inside"] == (False, name, name)
    assert seen["outside"] == (True, other(name), other(name))


def test_one_no_grad_object_entered_by_two_tasks(name):
    """A module-level ``NO_GRAD = ad.no_grad()`` used by tasks that leave it in another order
    than they entered it: each exit restores its own task's mode."""
    NO_GRAD = ad.no_grad()
    seen = {}

    async def first(entered, second_done):
        with NO_GRAD:
            entered.set()
            await second_done.wait()   # the other task enters and leaves meanwhile
            seen["first_inside"] = modes()[0]
        seen["first_after"] = modes()[0]

    async def second(entered, second_done):
        await entered.wait()
        ad.set_grad_enabled(True)      # (its own mode, before its block)
        with NO_GRAD:
            await asyncio.sleep(0)
            seen["second_inside"] = modes()[0]
        seen["second_after"] = modes()[0]
        second_done.set()

    async def main():
        entered, second_done = asyncio.Event(), asyncio.Event()
        await asyncio.gather(first(entered, second_done), second(entered, second_done))

    with ad.enable_grad():
        run(main())
    assert seen == {"first_inside": False, "first_after": True,
                    "second_inside": False, "second_after": True}
    assert records(name)


def grad_mode_trace(lib):
    """The grad modes seen around one ``set_grad_enabled(False)`` object entered twice."""
    trace = []
    mode = lib.set_grad_enabled(False)
    trace.append(lib.is_grad_enabled())
    for _ in range(2):
        with mode:
            trace.append(lib.is_grad_enabled())
        trace.append(lib.is_grad_enabled())
    return trace


def test_set_grad_enabled_object_entered_twice():
    """``set_grad_enabled(False)`` sets the mode at once; each block sets it again and restores
    the mode from before the object was made (as torch)."""
    assert grad_mode_trace(ad) == [False, False, True, False, True]
    torch = pytest.importorskip("torch")
    assert grad_mode_trace(ad) == grad_mode_trace(torch)


def test_dual_levels_are_per_task(name):
    """A task's forward_ad level, held across awaits, is not another task's: the other cannot
    make duals in it, opens and closes its own meanwhile, and both get the right tangents."""
    b = Backend(name)
    seen = {}

    def tangent(y):
        return to_numpy(fwAD.unpack_dual(y).tangent)

    async def holder(opened, other_done):
        with fwAD.dual_level() as level:
            x = fwAD.make_dual(b(X), b(np.ones(4)))
            opened.set()
            await other_done.wait()
            seen["holder_level"] = level
            seen["holder"] = tangent(ad.sin(x))

    async def other_task(opened, other_done):
        await opened.wait()
        try:
            fwAD.make_dual(b(X), b(np.ones(4)))
        except RuntimeError as e:
            seen["no_level"] = str(e)
        with fwAD.dual_level() as level:
            seen["other_level"] = level
            await asyncio.sleep(0)
            seen["other"] = tangent(ad.exp(fwAD.make_dual(b(X), b(2 * np.ones(4)))))
        other_done.set()

    async def main():
        opened, other_done = asyncio.Event(), asyncio.Event()
        await asyncio.gather(holder(opened, other_done), other_task(opened, other_done))

    run(main())
    assert "no level exists" in seen["no_level"]
    assert seen["holder_level"] == seen["other_level"] == 0
    np.testing.assert_allclose(seen["holder"], np.cos(X), rtol=1e-12)
    np.testing.assert_allclose(seen["other"], 2 * np.exp(X), rtol=1e-12)
    assert _core.stack_depth() == 0


def test_a_dual_level_exited_in_another_task_is_refused():
    async def main():
        level = fwAD.enter_dual_level()
        try:
            await asyncio.create_task(exit_elsewhere(level))
        finally:
            fwAD.exit_dual_level(level=level)

    async def exit_elsewhere(level):
        # the task sees its creator's level (its context is a copy) but cannot close it
        with pytest.raises(RuntimeError, match="closed in another"):
            fwAD.exit_dual_level(level=level)

    run(main())
    assert _core.stack_depth() == 0


def test_transforms_run_in_tasks(name):
    """``grad`` inside tasks that interleave with a ``no_grad`` task: the transform is not
    affected by the other task's mode (nor by its own: transforms ignore no_grad)."""
    b = Backend(name)
    seen = {}

    async def differentiate(key, grad_mode):
        with ad.set_grad_enabled(grad_mode):
            for _ in range(3):
                await asyncio.sleep(0)
                seen.setdefault(key, []).append(
                    to_numpy(ad.func.grad(lambda x: ad.sum(ad.sin(x)))(b(X))))
                seen.setdefault(key + "_mode", []).append(ad.is_grad_enabled())

    async def main():
        await asyncio.gather(differentiate("on", True), differentiate("off", False))

    run(main())
    for g in seen["on"] + seen["off"]:
        np.testing.assert_allclose(g, np.cos(X), rtol=1e-12)
    assert seen["on_mode"] == [True] * 3 and seen["off_mode"] == [False] * 3


# -- contextvars.copy_context().run ----------------------------------------------------------------
def test_copy_context_run_sees_the_modes_and_keeps_its_changes(name):
    outer = other(name)

    def inside():
        before = modes()
        ad.set_backend(outer)
        ad.set_grad_enabled(True)
        return before, modes(), records(outer)

    with ad.backend(name), ad.no_grad():
        ctx = contextvars.copy_context()
    before, changed, recorded = ctx.run(inside)
    assert before == (False, name, name)
    assert changed == (True, outer, outer) and recorded
    assert ctx.run(modes) == (True, outer, outer)   # (the context keeps them)
    assert modes() == (True, default_backend().name, default_backend().name)
    assert contextvars.Context().run(modes)[:2] == (True, default_backend().name)


# -- threads -----------------------------------------------------------------------------------------
def run_thread(fn):
    out = {}

    def target():
        try:
            out["value"] = fn()
        except BaseException as e:   # re-raised in the test's thread
            out["error"] = e

    t = threading.Thread(target=target)
    t.start()
    t.join(TIMEOUT)
    assert not t.is_alive()
    if "error" in out:
        raise out["error"]
    return out["value"]


@pytest.mark.skipif(getattr(sys.flags, "thread_inherit_context", 0),
                    reason="this interpreter starts threads in a copy of the caller's context")
def test_a_new_thread_starts_with_the_defaults(name):
    default = default_backend().name
    with ad.backend(name), ad.no_grad():
        seen = run_thread(lambda: (modes(), records(default), _core.stack_depth()))
    assert seen == ((True, default, default), True, 0)


def test_a_block_in_one_thread_is_not_seen_by_another(name):
    outer = other(name)
    entered, looked = threading.Event(), threading.Event()
    seen = {}

    def inside_block():
        with ad.backend(name), ad.no_grad():
            entered.set()
            assert looked.wait(TIMEOUT)
            return modes()

    def look():
        assert entered.wait(TIMEOUT)
        seen["other"] = modes()
        looked.set()

    with ad.backend(outer):
        t = threading.Thread(target=look)
        t.start()
        seen["block"] = inside_block()
        t.join(TIMEOUT)
        assert modes() == (True, outer, outer)
    default = default_backend().name
    assert seen["block"] == (False, name, name)
    assert seen["other"] == (True, default, default)


# -- exceptions and nesting ------------------------------------------------------------------------
@pytest.mark.parametrize("in_task", [False, True])
def test_an_exception_inside_a_block_restores_the_mode(name, in_task):
    outer = other(name)

    def blocks():
        for enter in (lambda: ad.no_grad(), lambda: ad.set_grad_enabled(False),
                      lambda: ad.backend(name), lambda: fwAD.dual_level()):
            with pytest.raises(ValueError, match="inside"):
                with enter():
                    raise ValueError("inside")
            assert modes() == (True, outer, outer) and _core.stack_depth() == 0
        with ad.no_grad():
            with pytest.raises(ValueError, match="inside"):
                with ad.enable_grad():
                    raise ValueError("inside")
            assert not ad.is_grad_enabled()
        assert records(outer)

    async def in_a_task():
        blocks()

    with ad.backend(outer):
        run(in_a_task()) if in_task else blocks()
        assert modes() == (True, outer, outer)


def test_nested_blocks(name):
    outer = other(name)
    with ad.backend(outer):
        with ad.no_grad():
            assert modes() == (False, outer, outer)
            with ad.backend(name), ad.enable_grad():
                assert modes() == (True, name, name) and records(name)
                with ad.set_grad_enabled(False), ad.backend(outer):
                    assert modes() == (False, outer, outer) and not records(outer)
                assert modes() == (True, name, name)
            assert modes() == (False, outer, outer) and not records(outer)
        assert modes() == (True, outer, outer)


def test_nested_blocks_in_interleaving_tasks(name):
    """Each task nests blocks and switches to the other between every step."""
    outer = other(name)

    async def nest(mine, first, second):
        trace = []
        with ad.backend(first):
            await asyncio.sleep(0)
            trace.append(modes())
            with mine():
                await asyncio.sleep(0)
                trace.append(modes())
                with ad.backend(second):
                    await asyncio.sleep(0)
                    trace.append(modes())
                await asyncio.sleep(0)
                trace.append(modes())
            await asyncio.sleep(0)
            trace.append(modes())
        return trace

    async def main():
        return await asyncio.gather(nest(ad.no_grad, name, outer),
                                    nest(ad.enable_grad, outer, name))

    with ad.no_grad():
        a, b = run(main())
        assert not ad.is_grad_enabled()
    assert a == [(False, name, name), (False, name, name), (False, outer, outer),
                 (False, name, name), (False, name, name)]
    assert b == [(False, outer, outer), (True, outer, outer), (True, name, name),
                 (True, outer, outer), (False, outer, outer)]
