"""Views of eager tensors (NOTE [views] in the core): basic indexing and detach() share data with
their base as in NumPy and torch, and writing through a view differentiates like torch's."""

import numpy as np
import pytest

import arrayad as ad
from conftest import to_numpy

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("name", ["numpy", "array_api_strict", "torch"])
def test_writes_reach_the_base_and_the_other_views(name):
    with ad.backend(name):
        x = ad.asarray([0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    v = x[1:3]
    v[0] = 100.0
    np.testing.assert_array_equal(to_numpy(x), [0, 100, 2, 3, 4, 5])
    d = x.detach()
    d[3] = -1.0
    np.testing.assert_array_equal(to_numpy(x), [0, 100, 2, -1, 4, 5])
    x[2] = 7.0                     # the base's update is seen by its live views
    np.testing.assert_array_equal(to_numpy(v), [100, 7])
    np.testing.assert_array_equal(to_numpy(d), to_numpy(x))
    w = v[1:]                      # a view of a view
    w += 1.0
    np.testing.assert_array_equal(to_numpy(x), [0, 100, 8, -1, 4, 5])
    np.testing.assert_array_equal(to_numpy(v), [100, 8])
    e = x[4]                       # a 0-d view
    e *= 10.0
    assert float(x[4]) == 40.0
    c = x[::2]                     # advanced-free strided slice
    c[1] = 0.5
    assert float(x[2]) == 0.5
    x[[0, 1]] = 9.0                # advanced indexing writes the base; views follow
    np.testing.assert_array_equal(to_numpy(v), [9, 0.5])


def _write_through(lib, a):
    y = a * 2
    v = y[1:3]
    v *= a[0:2]
    v[0] = a[3] ** 2
    w = y[2:]
    w -= a[0] * 3
    return (y * lib.asarray([1.0, 2.0, 3.0, 4.0], dtype=a.dtype)).sum() + (v ** 2).sum()


def test_gradient_of_writes_through_views_matches_torch():
    a = ad.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    _write_through(ad, a).backward()
    at = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64, requires_grad=True)
    _write_through(torch, at).backward()
    np.testing.assert_allclose(a.grad.numpy(), at.grad.numpy())


def test_a_view_of_a_leaf_that_requires_grad():
    a = ad.tensor([1.0, 2.0, 3.0], requires_grad=True)
    v = a[0:2]
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad is "
                                           "being used in an in-place operation"):
        v[0] = 5.0
    np.testing.assert_array_equal(a.detach().numpy(), [1, 2, 3])   # nothing changed
    with ad.no_grad():             # an optimizer step through a view
        v -= 1.0
    np.testing.assert_array_equal(a.detach().numpy(), [0, 1, 3])
    assert a.is_leaf and a.requires_grad


def test_updates_after_use_are_caught_through_views_as_in_torch():
    def run(lib, tensor):
        a = tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = a * 1
        v = y[0:2]
        z = (v * v).sum()          # saves v
        y[0] = 10.0                # updates v through the base
        z.backward()

    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        run(ad, ad.tensor)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        run(torch, lambda d, requires_grad: torch.tensor(d, dtype=torch.float64,
                                                         requires_grad=requires_grad))


def test_writing_a_detached_copy_changes_the_data_and_is_caught():
    a = ad.tensor([1.0, 2.0], requires_grad=True)
    z = ad.sum(a * a)
    a.detach()[0] = 5.0            # torch: the data changes, the saved a is stale
    np.testing.assert_array_equal(a.detach().numpy(), [5, 2])
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.backward()


def test_slicing_a_tensor_and_updating_it_later_is_no_error():
    a = ad.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = a * 2
    s = ad.sum(y[0:2] * 3.0)       # the slice's node does not read y's values
    y[2] = 0.0
    s.backward()
    np.testing.assert_array_equal(a.grad.numpy(), [6, 6, 0])


def test_a_data_view_follows_its_base_into_the_graph():
    """A view of a plain tensor whose base then receives a value with a history carries that
    history, as torch's view does."""
    def run(lib, tensor, zeros):
        a = tensor([1.0, 2.0], requires_grad=True)
        x = zeros(3)
        w = x[0:2]
        x[0:2] = a * 3
        (w * w).sum().backward()
        return a.grad.numpy()

    got = run(ad, ad.tensor, lambda n: ad.zeros(n))
    expected = run(torch, lambda d, requires_grad: torch.tensor(d, dtype=torch.float64,
                                                               requires_grad=requires_grad),
                   lambda n: torch.zeros(n, dtype=torch.float64))
    np.testing.assert_allclose(got, expected)
