"""A new transform is one more Interpreter subclass (NOTE [interpreters] in the core): here a
transform written in Python, that counts the primitives applied to its values, composes with the
built-in ones in both orders without any change to them."""

import threading

import numpy as np
import pytest

import arrayad as ad
from arrayad._core._core import Interpreter, Tracer, bind, raw_value
from arrayad.func import grad, vmap


class CountingTracer(Tracer):
    pass


class CountingInterpreter(Interpreter):
    name = "count"

    def __init__(self):
        self.names = []

    def process(self, prim, args, params):
        self.names.append(prim.name)
        lower = tuple(a.value if isinstance(a, CountingTracer) and a.interpreter is self else a
                      for a in args)
        out = bind(prim, *lower, **params)
        if prim.multiple_results:
            return tuple(CountingTracer(self, o) for o in out)
        return CountingTracer(self, out)


def count(f):
    def wrapper(x):
        with CountingInterpreter() as interp:
            out = f(CountingTracer(interp, x))
        return out.value if isinstance(out, CountingTracer) else out, interp.names
    return wrapper


def f(x):
    return ad.sum(ad.sin(x) * x)


def test_a_python_transform_sees_every_primitive():
    value, names = count(f)(np.array([1.0, 2.0]))
    np.testing.assert_allclose(value, np.sum(np.sin([1.0, 2.0]) * [1.0, 2.0]))
    assert names == ["sin", "multiply", "sum"]


def test_it_composes_with_grad_both_ways():
    x = np.array([0.5, 1.5])
    expected = np.cos(x) * x + np.sin(x)
    # grad outside: the counting transform's values are traced by grad underneath
    np.testing.assert_allclose(grad(lambda x: count(f)(x)[0])(x), expected)
    # grad inside: the counter sees the forward and the backward pass's primitives
    g, names = count(grad(f))(x)
    np.testing.assert_allclose(g, expected)
    assert names[:3] == ["sin", "multiply", "sum"] and "cos" in names


def test_it_composes_with_vmap():
    xs = np.arange(6.0).reshape(3, 2)
    out = vmap(lambda x: count(f)(x)[0])(xs)
    np.testing.assert_allclose(out, np.sum(np.sin(xs) * xs, axis=1))


def test_an_escaped_tracer_of_it_fails_loudly():
    box = []

    def keep(x):
        box.append(x)
        return ad.sum(x)

    count(keep)(np.ones(2))
    with pytest.raises(RuntimeError, match="a tracer of a count transform .* escaped"):
        ad.sin(box[0])


def test_an_interpreter_cannot_be_closed_from_another_thread():
    interp = CountingInterpreter()
    interp.__enter__()
    errors = []

    def close():
        try:
            interp.close()
        except RuntimeError as e:
            errors.append(str(e))

    t = threading.Thread(target=close)
    t.start()
    t.join()
    interp.close()
    assert errors and "closed in another" in errors[0]
    assert not interp.alive


def test_a_python_transform_decides_conversions_printing_and_random_draws():
    # (NOTE [interpreters]: the defaults read the value below and take a draw as it is)
    x = np.array([0.25, 1.5])

    def convert(t):
        assert repr(t).startswith("CountingTracer(level=1, value=array([0.25, 1.5 ])")
        assert float(ad.max(t)) == 1.5 and bool(ad.min(t) > 0)
        assert np.asarray(t).tolist() == x.tolist()
        return ad.sum(t) + ad.sum(ad.rand(2) * 0)

    value, names = count(convert)(x)
    assert value == 1.75 and "sum" in names

    class Refusing(CountingInterpreter):   # (a transform that overrides them)
        def random_per_batch_element(self):
            raise RuntimeError("refused: no random numbers here")

    class Opaque(CountingTracer):
        def _concrete_value(self, what):
            raise RuntimeError(f"opaque: no {what}()")

        def _describe(self):
            return "Opaque(...)"

    with Refusing() as interp:
        t = Opaque(interp, np.array(0.25))
        assert repr(t) == str(t) == "Opaque(...)"
        with pytest.raises(RuntimeError, match=r"opaque: no float\(\)"):
            float(t)
        with pytest.raises(RuntimeError, match=r"opaque: no bool\(\)"):
            bool(t)
        with pytest.raises(RuntimeError, match=r"opaque: no numpy\(\)"):
            np.asarray(t)
        with pytest.raises(RuntimeError, match="refused: no random numbers"):
            ad.rand(2)
        # (inside grad, a value of it is still its own to convert)
        with pytest.raises(RuntimeError, match=r"opaque: no float\(\)"):
            grad(lambda s: s * float(t))(1.0)


def test_a_python_transform_decides_where_new_arrays_are_made():
    pytest.importorskip("array_api_strict")
    from arrayad.backends import get_backend
    strict = get_backend("array_api_strict")

    class OnStrict(CountingInterpreter):
        def placement(self):
            return strict, strict.default_device()

    with OnStrict():
        made = ad.zeros(3)
    assert type(raw_value(made)).__module__.startswith("array_api_strict")

    class Lifting(CountingInterpreter):
        def lift(self, value):
            self.names.append("lift")
            return CountingTracer(self, value)

    class Eager(Lifting):   # (as forward_ad's dual levels: eager code inside)
        def owns_new_arrays(self):
            return False

    with Lifting() as interp:
        assert isinstance(ad.zeros(3), CountingTracer) and interp.names == ["lift"]
    with Eager() as interp:
        assert isinstance(ad.zeros(3), ad.Tensor) and interp.names == []


def test_a_batching_rule_that_asks_gets_the_interpreter():
    from arrayad._core._core import Primitive
    seen = []

    def rule(args, dims, interpreter):
        seen.append((interpreter.size, interpreter.randomness))
        return bind(prim, *args), dims[0]

    prim = Primitive("asks_its_vmap", lambda xp, x: x + 1)
    prim.batch = rule
    prim.batch_gets_interpreter = True
    out = vmap(lambda x: bind(prim, x), randomness="same")(np.arange(4.0).reshape(2, 2))
    np.testing.assert_array_equal(raw_value(out), [[1, 2], [3, 4]])
    assert seen == [(2, "same")]
