"""State is per thread: the level stack, the grad mode, the default backend and the random state of
one thread never change what another computes. (The first three are per context, which a new thread
starts afresh: tests/test_context_state.py covers asyncio tasks and ``contextvars``.)

Every threaded test computes its expected results in one thread first, then runs the same calls in
``N_THREADS`` threads at once (a ``threading.Barrier`` releases them together, and a short
``sys.setswitchinterval`` makes them interleave between operations) and requires exactly the
single-thread results. Each thread works on its own input, so a value leaking from one thread to
another shows. The last tests pin torch's grad-mode semantics (decorators, generators, the plain
call of ``set_grad_enabled``).
"""
import sys
import threading
import time
import traceback

import numpy as np
import pytest

import arrayad as ad
import arrayad.func as F
from arrayad.backends import backend_of, default_backend

N_THREADS = 4
ITERS = 300
TIMEOUT = 120   # seconds; a thread still running then is a failure (deadlock), not a hang


@pytest.fixture(autouse=True)
def interleave_and_restore():
    """Switch threads often; afterwards put back the process state a failing test may have left
    (the grad mode, leftover transform frames, the default backend, the random state), so that a
    failure here does not spill into the other test files."""
    interval = sys.getswitchinterval()
    backend, rng = default_backend().name, ad.get_rng_state()
    sys.setswitchinterval(1e-5)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)
        ad.set_grad_enabled(True)
        from arrayad._core import _core
        if _core.stack_depth():
            _core.interpreters()[0].close()   # (closes everything above it too)
        ad.set_backend(backend)
        ad.set_rng_state(rng)


def run_threads(work, n_threads=N_THREADS, iters=ITERS, after=None, watch_thread_0=False):
    """Run ``work(i, k)`` for k in range(iters) in each of n_threads threads (i = thread index),
    all starting together; then, once every thread is done with its loop, ``after(i)`` in each.
    With ``watch_thread_0``, the other threads keep going (k >= iters) until thread 0 is done,
    so that they overlap all of what it does. Re-raise the first failure with its traceback."""
    barrier = threading.Barrier(n_threads)
    thread_0_done = threading.Event()
    errors = []

    def target(i):
        try:
            barrier.wait(TIMEOUT)
            k = 0
            while k < iters or (watch_thread_0 and i != 0 and not thread_0_done.is_set()
                                and not errors):
                work(i, k)
                k += 1
            if i == 0:
                thread_0_done.set()
            if after is not None:
                barrier.wait(TIMEOUT)
                after(i)
        except BaseException:
            errors.append(f"thread {i}:\n{traceback.format_exc()}")
            barrier.abort()

    threads = [threading.Thread(target=target, args=(i,), name=f"arrayad-test-{i}")
               for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
    assert not any(t.is_alive() for t in threads), "a thread did not finish (deadlock?)"
    errors.sort(key=lambda e: "BrokenBarrierError" in e)   # the cause first, not the aborts
    if errors:
        pytest.fail(f"{len(errors)} of {n_threads} threads failed; the first:\n{errors[0]}",
                    pytrace=False)


def to_np(x):
    if isinstance(x, ad.Tensor):
        return x.detach().numpy()
    if isinstance(x, (tuple, list)):
        return type(x)(to_np(v) for v in x)
    return x


def assert_same(got, expected):
    """Exactly the single-thread result, same structure and same array types."""
    if isinstance(expected, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(expected), (got, expected)
        for g, e in zip(got, expected):
            assert_same(g, e)
        return
    assert type(got) is type(expected), (type(got), type(expected))
    np.testing.assert_array_equal(got, expected)


# -- every API, in N_THREADS threads at once ---------------------------------------------------------
XS = [np.linspace(-1.0, 1.0, 5) + 0.25 * i for i in range(N_THREADS)]    # one input per thread
TS = [np.linspace(0.5, 1.5, 5) * (i + 1) for i in range(N_THREADS)]      # one tangent per thread
BATCHES = [np.stack([x, 2 * x, x ** 2]) for x in XS]


def f(x):
    return ad.sum(ad.sin(x) * x ** 2)


def g(x):
    return ad.tanh(x) * x


def _vjp(i):
    out, vjp_fn = F.vjp(g, XS[i])
    return out, vjp_fn(TS[i])


def _eager_backward(i):
    x = ad.tensor(XS[i], requires_grad=True)
    y = f(x)
    assert ad.is_grad_enabled()
    assert y.requires_grad and y.grad_fn is not None, "the forward was not recorded"
    y.backward()
    return y.detach().numpy(), x.grad.numpy()


def _autograd_grad(i):
    x = ad.tensor(XS[i], requires_grad=True)
    y = f(x)
    assert y.requires_grad and y.grad_fn is not None, "the forward was not recorded"
    (gx,) = ad.autograd.grad(y, x)
    return to_np(gx)


CASES = {
    "grad": lambda i: F.grad(f)(XS[i]),
    "vjp": _vjp,
    "jvp": lambda i: F.jvp(g, (XS[i],), (TS[i],)),
    "vmap": lambda i: F.vmap(g)(BATCHES[i]),
    "jacrev": lambda i: F.jacrev(g)(XS[i]),
    "hessian": lambda i: F.hessian(f)(XS[i]),
    "vmap_of_grad": lambda i: F.vmap(F.grad(f))(BATCHES[i]),
    "eager_backward": _eager_backward,
    "autograd_grad": _autograd_grad,
}


@pytest.mark.parametrize("api", list(CASES))
def test_threads_give_the_single_thread_results(api):
    call = CASES[api]
    expected = [call(i) for i in range(N_THREADS)]
    iters = ITERS // 3 if api == "hessian" else ITERS
    run_threads(lambda i, k: assert_same(call(i), expected[i]), iters=iters)
    assert ad.is_grad_enabled()


def test_threads_mixing_all_apis():
    """Each thread cycles through every API, so different transforms overlap."""
    names = list(CASES)
    expected = {(name, i): CASES[name](i) for name in names for i in range(N_THREADS)}

    def work(i, k):
        name = names[(i + k) % len(names)]
        assert_same(CASES[name](i), expected[name, i])

    run_threads(work, iters=ITERS // 2)


# -- grad mode ---------------------------------------------------------------------------------------
def test_no_grad_in_one_thread_does_not_stop_recording_in_the_others():
    expected = [_eager_backward(i) for i in range(N_THREADS)]

    def work(i, k):
        if i == 0:
            with ad.no_grad():
                x = ad.tensor(XS[0], requires_grad=True)
                time.sleep(0)   # let the others run inside this block (as a long op would)
                y = f(x)
                assert not ad.is_grad_enabled()
                assert not y.requires_grad and y.grad_fn is None, "recorded under no_grad"
            assert ad.is_grad_enabled()
        else:
            assert_same(_eager_backward(i), expected[i])

    run_threads(work, watch_thread_0=True)
    assert ad.is_grad_enabled()


def test_overlapping_backward_calls_leave_grad_mode_on():
    expected = [_eager_backward(i) for i in range(N_THREADS)]
    after = [None] * N_THREADS

    def record_mode(i):   # runs once every thread has finished its backward calls
        after[i] = ad.is_grad_enabled()

    run_threads(lambda i, k: assert_same(_eager_backward(i), expected[i]), after=record_mode)
    assert after == [True] * N_THREADS, f"grad mode after the backward calls, per thread: {after}"
    assert ad.is_grad_enabled(), "the backward calls of other threads left grad mode off here"


def test_a_new_thread_starts_with_grad_enabled_and_no_transform():
    seen = {}

    def child():
        try:
            seen["grad_enabled"] = ad.is_grad_enabled()
            from arrayad._core import _core
            if hasattr(_core, "stack_depth"):
                seen["stack_depth"] = _core.stack_depth()
            # an eager backward is refused inside a transform: here it must work
            seen["eager"] = _eager_backward(0)
            seen["grad"] = F.grad(f)(XS[0])
        except BaseException:
            seen["error"] = traceback.format_exc()

    def outer(x):
        with ad.no_grad():   # the parent is inside a grad transform and a no_grad block
            t = threading.Thread(target=child)
            t.start()
            t.join(TIMEOUT)
        return ad.sum(x * x)

    F.grad(outer)(XS[1])
    assert seen["grad_enabled"] is True, "a new thread started with grad disabled"
    assert seen.get("stack_depth", 0) == 0, "a new thread started inside a transform"
    assert "error" not in seen, seen.get("error")
    assert_same(seen["eager"], _eager_backward(0))
    assert_same(seen["grad"], F.grad(f)(XS[0]))


# -- default backend -----------------------------------------------------------------------------------
def test_with_backend_block_is_per_thread():
    def work(i, k):
        if i == 0:
            with ad.backend("array_api_strict"):
                time.sleep(0)   # let the others run inside this block
                assert backend_of(ad.zeros(3)).name == "array_api_strict"
            assert backend_of(ad.zeros(3)).name == "numpy"
        else:
            z = ad.zeros(3)
            assert backend_of(z).name == "numpy", f"thread {i} got a {backend_of(z).name} array"
            assert type(z.detach().numpy()) is np.ndarray

    run_threads(work, watch_thread_0=True)
    assert backend_of(ad.zeros(3)).name == "numpy"


def test_set_backend_affects_only_the_calling_thread():
    # Sequenced by a barrier: thread 0 switches, then every thread looks.
    step = threading.Barrier(N_THREADS)
    seen = [None] * N_THREADS

    def work(i, k):
        if i == 0:
            ad.set_backend("array_api_strict")
        step.wait(TIMEOUT)
        seen[i] = backend_of(ad.zeros(3)).name
        step.wait(TIMEOUT)

    run_threads(work, iters=1)
    assert seen == ["array_api_strict"] + ["numpy"] * (N_THREADS - 1), seen
    assert backend_of(ad.zeros(3)).name == "numpy", "another thread's set_backend changed this one"


# -- random numbers ----------------------------------------------------------------------------------
def test_manual_seed_and_randn_per_thread():
    seeds = [11 * (i + 1) for i in range(N_THREADS)]
    expected = []
    for s in seeds:
        ad.manual_seed(s)
        expected.append((ad.randn(5).numpy(), ad.randn(5).numpy()))

    def work(i, k):
        ad.manual_seed(seeds[i])
        got = (ad.randn(5).numpy(), ad.randn(5).numpy())
        assert_same(got, expected[i])

    run_threads(work)


# -- grad-mode semantics (as torch) ------------------------------------------------------------------
def test_set_grad_enabled_as_decorator():
    @ad.set_grad_enabled(False)
    def inside(x):
        return ad.is_grad_enabled(), f(x).requires_grad

    assert ad.is_grad_enabled(), "decorating with set_grad_enabled(False) switched grad mode off"
    x = ad.tensor(XS[0], requires_grad=True)
    assert inside(x) == (False, False)
    assert ad.is_grad_enabled()
    assert f(x).requires_grad


def test_no_grad_decorates_a_generator_function():
    @ad.no_grad()
    def gen(x):
        for _ in range(3):
            yield ad.is_grad_enabled(), f(x).requires_grad

    x = ad.tensor(XS[0], requires_grad=True)
    it = gen(x)
    assert ad.is_grad_enabled()
    for _ in range(3):
        assert next(it) == (False, False), "the generator's body ran with grad enabled"
        assert ad.is_grad_enabled(), "the caller's grad mode was not restored between next calls"
        assert f(x).requires_grad
    with pytest.raises(StopIteration):
        next(it)
    assert ad.is_grad_enabled()


def test_set_grad_enabled_called_as_a_function_switches_immediately():
    x = ad.tensor(XS[0], requires_grad=True)
    ad.set_grad_enabled(False)
    try:
        assert not ad.is_grad_enabled()
        assert not f(x).requires_grad
    finally:
        ad.set_grad_enabled(True)
    assert ad.is_grad_enabled()
    assert f(x).requires_grad
    with ad.set_grad_enabled(False):
        assert not ad.is_grad_enabled()
    assert ad.is_grad_enabled()
