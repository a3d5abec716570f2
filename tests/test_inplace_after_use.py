"""In-place updates after a value was saved, copies, pickles and .grad assignment: never a silently
wrong gradient (NOTE [in-place after use] in the core). Expected values are worked out by hand or
by torch."""

import copy
import pickle

import numpy as np
import pytest

import arrayad as ad
from arrayad.func import grad, jvp, vmap


def test_eager_update_of_a_saved_value_raises_like_torch():
    x = ad.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    z = y * y
    y += 100
    with pytest.raises(RuntimeError, match="modified by an inplace operation.*MultiplyBackward"):
        z.sum().backward()


def test_setitem_after_use_raises():
    x = ad.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 1.0
    s = ad.sin(y)
    y[0] = 0.0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        s.sum().backward()


def test_optimizer_step_between_forward_and_backward_raises():
    w = ad.tensor([1.0, 2.0], requires_grad=True)
    loss = (w * w).sum()
    with ad.no_grad():
        w -= 0.1 * ad.ones(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_an_update_reads_the_value_before_it():
    # y *= 3 saves the old y for its own rule: its own update must not trip the check
    x = ad.tensor([1.0, 2.0], requires_grad=True)
    y = x * x
    y *= 3.0
    y += 1.0
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [6.0, 12.0])


def test_update_after_backward_is_fine_and_aliases_see_it():
    x = ad.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    alias = y
    (y * y).sum().backward()
    y += 1
    np.testing.assert_allclose(alias.detach().numpy(), [3.0, 5.0])   # NumPy/torch aliasing
    np.testing.assert_allclose(x.grad.numpy(), [8.0, 16.0])


@pytest.mark.parametrize("transform", ["grad", "jvp", "vmap"])
def test_captured_tensor_updated_after_use_keeps_its_old_value(transform):
    c = ad.tensor([1.0, 2.0])

    def f(x):
        y = ad.sum(x * c)
        c[0] = 50.0
        return y

    x = np.ones(2)
    if transform == "grad":
        np.testing.assert_allclose(grad(f)(x), [1.0, 2.0])
    elif transform == "jvp":
        _, t = jvp(f, (x,), (np.ones(2),))
        np.testing.assert_allclose(t, 3.0)
    else:
        np.testing.assert_allclose(vmap(f)(np.ones((3, 2))), [3.0, 3.0, 3.0])
    np.testing.assert_allclose(c.numpy(), [50.0, 2.0])


def test_constant_made_inside_then_updated():
    # the shape of scipy.integrate.romb's code: h made inside, used, then h /= 2
    def f(x):
        h = ad.asarray(1.0)
        y = h * x
        h /= 2.0
        return ad.sum(y)

    np.testing.assert_allclose(grad(f)(np.ones(3)), [1.0, 1.0, 1.0])


def test_copies_of_a_leaf_are_new_leaves():
    x = ad.tensor([1.0, 2.0], requires_grad=True)
    for make in (copy.copy, copy.deepcopy, lambda t: pickle.loads(pickle.dumps(t))):
        x2 = make(x)
        assert x2 is not x and x2.requires_grad and x2.is_leaf
        (x2 * x2).sum().backward()
        np.testing.assert_allclose(x2.grad.numpy(), [2.0, 4.0])
        assert x.grad is None   # the gradient goes to the copy, not to the original


def test_deepcopy_copies_the_data_and_grad():
    x = ad.tensor([1.0, 2.0], requires_grad=True)
    (x * 3).sum().backward()
    x2 = copy.deepcopy(x)
    np.testing.assert_allclose(x2.grad.numpy(), [3.0, 3.0])
    with ad.no_grad():
        x2 += 1
    np.testing.assert_allclose(x.detach().numpy(), [1.0, 2.0])


def test_copies_of_a_computed_tensor_are_refused():
    y = ad.tensor([1.0], requires_grad=True) * 2
    for make in (copy.copy, copy.deepcopy, pickle.dumps):
        with pytest.raises(RuntimeError, match="graph leaves.*detach"):
            make(y)
    assert not pickle.loads(pickle.dumps(y.detach())).requires_grad


def test_tracer_copies_stay_tracers_and_are_independent():
    def f(x):
        a = copy.copy(x)
        b = copy.deepcopy(x)
        a += 1.0   # rebinds the copy only
        return ad.sum(a * b * x)

    x = np.array([1.0, 2.0])
    np.testing.assert_allclose(grad(f)(x), 2 * x * (x + 1) + x * x)


def test_pickling_a_tracer_is_refused():
    def f(x):
        pickle.dumps(x)
        return ad.sum(x)

    with pytest.raises(TypeError, match="cannot pickle a GradTracer"):
        grad(f)(np.ones(2))


@pytest.mark.parametrize("bad, match", [
    (np.ones((3, 1)), "different size"),
    (np.ones(2, dtype=np.float32), "different type"),
])
def test_grad_assignment_is_checked(bad, match):
    x = ad.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=match):
        x.grad = bad
    x.grad = np.ones(2)
    np.testing.assert_allclose(x.grad.numpy(), [1.0, 1.0])


def test_grad_assignment_from_another_backend_is_refused():
    sx = pytest.importorskip("array_api_strict")
    x = ad.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="array_api_strict array for a numpy tensor"):
        x.grad = sx.ones(2, dtype=sx.float64)


@pytest.mark.parametrize("bad", ["abc", None, object()])
def test_tensor_of_junk_is_refused_at_once(bad):
    with pytest.raises(TypeError):
        ad.Tensor(bad)
