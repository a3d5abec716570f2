"""arrayad.testing.check_grads: passes on correct derivatives, and catches wrong ones at the right
order and mode (with primitives whose rules are wrong on purpose)."""
import numpy as np
import pytest

import arrayad as ad
from arrayad._core._core import bind
from arrayad._ops._rules import batch_elementwise, defjvp, defvjp, primitive
from arrayad.testing import check_grads


def _cube(name, vjp, jvp):
    """x**3 as a primitive with the given rules (the test's way to plant a bug)."""
    p = primitive(name, lambda xp, x: x * x * x)
    p.batch = batch_elementwise(p)
    defvjp(p, vjp)
    defjvp(p, jvp)
    return lambda x: bind(p, x)


good_cube = _cube("_test_good_cube", lambda g, ans, x: g * 3 * x * x,
                  lambda t, ans, x: t * 3 * x * x)
# Wrong first derivative in reverse mode only.
bad_vjp_cube = _cube("_test_bad_vjp_cube", lambda g, ans, x: g * 2 * x * x,
                     lambda t, ans, x: t * 3 * x * x)
# Wrong first derivative in forward mode only.
bad_jvp_cube = _cube("_test_bad_jvp_cube", lambda g, ans, x: g * 3 * x * x,
                     lambda t, ans, x: t * 3 * x)
# Right first derivatives, but written with stop_gradient: the second derivatives are wrong.
frozen_cube = _cube("_test_frozen_cube",
                    lambda g, ans, x: g * 3 * ad.stop_gradient(x) * ad.stop_gradient(x),
                    lambda t, ans, x: t * 3 * ad.stop_gradient(x) * ad.stop_gradient(x))

X = np.array([0.3, -1.2, 0.7])


@pytest.mark.parametrize("order", [1, 2, 3])
def test_passes_on_correct_rules(order):
    check_grads(good_cube, (X,), order=order)
    check_grads(lambda x, y: ad.sum(ad.sin(x) * y), (X, X[::-1].copy()), order=order)


def test_all_backends(backend):
    x = backend(X)
    y = backend(np.array([[0.5], [2.0]]))
    check_grads(lambda x, y: ad.exp(x) * y, (x, y), order=2)
    check_grads(good_cube, (x,), order=2)


def test_tensors_pytrees_and_complex():
    check_grads(lambda x: ad.tanh(x) * 2, (ad.tensor(X),), order=2)
    # a pytree output
    check_grads(lambda x, y: {"a": x * y, "b": (ad.sum(x),)}, (X, X + 1.0), order=2)
    # complex input and output, holomorphic and not
    z = X + 1j * X[::-1]
    check_grads(lambda z: ad.exp(z) * z, (z,), order=2)
    check_grads(lambda z: ad.abs(z) + ad.real(z) * ad.imag(z), (z + 0.5,), order=2)
    # a Python float argument
    check_grads(lambda x: ad.sin(x) * 3, (0.4,), order=2)
    # 0-d and empty arrays
    check_grads(ad.sin, (np.array(0.3),), order=2)
    check_grads(ad.sin, (np.zeros((0, 2)),), order=2)


def test_wrong_vjp_is_caught():
    with pytest.raises(AssertionError, match=r"VJP .* at _test_bad_vjp_cube|"
                                             r"VJP .* does not match at f"):
        check_grads(bad_vjp_cube, (X,), order=1, modes=("rev",))
    with pytest.raises(AssertionError, match="max abs error"):
        check_grads(bad_vjp_cube, (X,), order=1)
    # forward mode alone does not look at the VJP
    check_grads(bad_vjp_cube, (X,), order=1, modes=("fwd",))


def test_wrong_jvp_is_caught():
    with pytest.raises(AssertionError, match="JVP"):
        check_grads(bad_jvp_cube, (X,), order=1, modes=("fwd",))
    check_grads(bad_jvp_cube, (X,), order=1, modes=("rev",))


def test_wrong_second_derivative_is_caught_at_order_2():
    check_grads(frozen_cube, (X,), order=1)
    with pytest.raises(AssertionError, match=r"at (jvp|vjp)\("):
        check_grads(frozen_cube, (X,), order=2)
    # the message names the derivative function checked
    with pytest.raises(AssertionError, match=r"at vjp\("):
        check_grads(frozen_cube, (X,), order=2, modes=("rev",))


def test_message_names_order_mode_and_error():
    with pytest.raises(AssertionError) as info:
        check_grads(lambda x: bad_jvp_cube(x) * 1.0, (X,), order=2, modes=("fwd",))
    msg = str(info.value)
    assert "check_grads" in msg and "JVP" in msg and "max abs error" in msg


def test_argument_validation():
    with pytest.raises(ValueError, match="modes"):
        check_grads(ad.sin, (X,), modes=("sideways",))
    with pytest.raises(ValueError, match="order"):
        check_grads(ad.sin, (X,), order=0)
    with pytest.raises(TypeError, match="floating-point"):
        check_grads(lambda i: i * 1.0, (np.arange(3),))
    with pytest.raises(TypeError, match="non-floating output"):
        check_grads(lambda x: x > 0, (X,))


def test_single_array_and_string_mode():
    check_grads(ad.sin, X, order=1, modes="rev")


def test_docstring_example():
    import doctest
    import arrayad.testing
    failures, _ = doctest.testmod(arrayad.testing, verbose=False)
    assert failures == 0
