"""A short tour of arrayad: ``python -m arrayad``."""

import numpy as np

import arrayad as ad
from arrayad.func import grad, hessian, jacfwd, jacrev, jvp, linearize, vjp, vmap


def section(title):
    print(f"\n== {title} " + "=" * max(0, 70 - len(title)))


def main():
    print(f"arrayad {ad.__version__}: array API {ad.__array_api_version__}, "
          f"default backend {ad.backends.default_backend().name}")
    print("backends available here:", ", ".join(ad.available_backends()))

    section("eager autograd, as in torch: requires_grad, backward(), .grad")
    x = ad.tensor([2.0, 3.0, 4.0], requires_grad=True)
    y = x * x
    print("x =", x)
    print("y = x * x =", y)
    y.sum().backward()
    print("after y.sum().backward(): x.grad =", x.grad)

    section("grad, and grad of grad")
    f = lambda x: ad.sin(x) * x  # noqa: E731
    print("f(x) = x sin(x);  f'(1.0) = sin(1) + cos(1)   =", grad(f)(1.0))
    print("                  f''(1.0) = 2 cos(1) - sin(1) =", grad(grad(f))(1.0))
    print("perturbation confusion: grad(lambda x: grad(lambda y: x * y)(x))(2.0) =",
          grad(lambda x: grad(lambda y: x * y)(x))(2.0))

    section("NumPy in, NumPy out")
    xs = np.linspace(-1.0, 1.0, 4)
    g = grad(lambda v: ad.sum(ad.tanh(v) ** 2))(xs)
    print("x =", xs)
    print("grad of sum(tanh(x)**2) at x:", type(g).__name__, g)

    section("vjp, jvp and linearize")
    out, vjp_fn = vjp(ad.sin, xs)
    print("vjp of sin with ones:", vjp_fn(np.ones(4))[0])
    print("jvp of sin with ones:", jvp(ad.sin, (xs,), (np.ones(4),))[1])
    out, jvp_fn = linearize(lambda v: ad.exp(v) * v, xs)
    print("linearize(exp(v) v) applied to ones:", jvp_fn(np.ones(4)))

    section("Jacobians and Hessians: jacrev, jacfwd, hessian")
    W = np.arange(6.0).reshape(2, 3) / 6
    print("jacrev of tanh(W x), W of shape (2, 3):\n", jacrev(lambda v: ad.tanh(W @ v))(xs[:3]))
    print("jacfwd agrees:", np.allclose(jacfwd(lambda v: ad.tanh(W @ v))(xs[:3]),
                                        jacrev(lambda v: ad.tanh(W @ v))(xs[:3])))
    print("hessian of sum(sin(x)), diag(-sin(x)):\n",
          hessian(lambda v: ad.sum(ad.sin(v)))(xs[:3]) + 0.0)   # + 0.0: no -0. printed

    section("vmap: per-sample gradients")
    w = np.array([0.5, -1.0, 2.0])
    batch = np.arange(12.0).reshape(4, 3) / 10
    targets = np.array([0.1, 0.2, 0.3, 0.4])
    loss = lambda w, x, t: (ad.sum(w * x) - t) ** 2  # noqa: E731
    print("gradients of (w . x - t)**2 with respect to w, one row per sample (x, t):")
    print(vmap(grad(loss), in_dims=(None, 0, 0))(w, batch, targets))

    section("array-API code inside a transform: arrays it makes, masks, in-place writes")

    def clipped_square(v):
        xp = v.__array_namespace__()
        out = xp.zeros(v.shape, dtype=v.dtype)   # made on v's backend, part of the transform
        mask = v > 0
        out[mask] = v[mask] ** 2                 # a functional update: differentiable
        return xp.sum(out)
    print("grad of sum(where(v > 0, v**2, 0)):", grad(clipped_square)(xs))

    section("arrayad.jit: trace once, replay")
    chain = lambda v: ad.sum(ad.tanh(ad.sin(v) * v) ** 2)  # noqa: E731
    fast = ad.jit(grad(chain))
    print("jit(grad(f)) equals grad(f):", np.allclose(fast(xs), grad(chain)(xs)))
    print("the program it replays (arrayad.func.make_program):")
    print(ad.func.make_program(grad(chain))(xs))

    section("the same code on other backends")
    for name in _OTHER_BACKENDS:
        try:
            b = ad.get_backend(name)
        except Exception as e:  # ImportError, or a library that imports but cannot start (no GPU)
            print(f"{name:>17}: {backend_install_hint(name, e)}")
            continue
        xb = b.xp.asarray(xs)
        gb = grad(lambda v: ad.sum(ad.tanh(v) ** 2))(xb)
        print(f"{name:>17}: {type(gb).__module__}.{type(gb).__name__} out, same gradient as "
              f"NumPy's: {np.allclose(b.to_numpy(gb), g)}")

    _function_demo()


# The backends the tour tries besides NumPy, and how to install each one's library.
_OTHER_BACKENDS = ("array_api_strict", "torch", "dask", "jax", "cupy")
_INSTALL = {
    "array_api_strict": "pip install array-api-strict",
    "torch": "pip install torch==2.13.0",
    "dask": 'pip install "dask[array]"',
    "jax": "pip install jax",
    "cupy": "pip install cupy-cuda12x  (needs an NVIDIA GPU with CUDA 12)",
}


def backend_install_hint(name, error=None):
    """The line the tour prints for a backend whose library does not import here: how to install it.

    ``error`` is what importing it raised: an ImportError means the library is missing; anything
    else (a library that imports but cannot start, such as CuPy without a GPU) is shown."""
    if error is None or isinstance(error, ImportError):
        why = "not installed here"
    else:
        why = f"cannot start here ({type(error).__name__}: {error})"
    return f"{why}; install it with: {_INSTALL[name]}"


def _function_demo():
    from arrayad.autograd import Function

    class Square(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 2

        @staticmethod
        def backward(ctx, grad_output):
            x, = ctx.saved_tensors
            return grad_output * 2 * x

        @staticmethod
        def jvp(ctx, *inputs, **kwargs):
            x, tangent_x = inputs
            return x ** 2, 2 * x * tangent_x

    section("autograd.Function: a derivative rule of your own, as in torch")
    x = ad.tensor([2.0, 3.0, 4.0], requires_grad=True)
    res = Square.apply(x)
    print("Square.apply(x) =", res)
    res.sum().backward()
    print("after .sum().backward(), by Square.backward: x.grad = 2 x =", x.grad)
    print("the transforms use its rules too: grad(sum(Square(v))) =",
          grad(lambda v: ad.sum(Square.apply(v)))(np.array([2.0, 3.0, 4.0])))
    # arrayad's addition (torch raises here): with a jvp rule, apply(x, tangent) runs forward mode
    res, tangent_res = Square.apply(ad.tensor([2.0, 3.0, 4.0]), ad.tensor([1.0, 0.5, 2.0]))
    print("with explicit tangents (arrayad only), Square.apply(x, t) = (x**2, 2 x t):")
    print("  output  =", res)
    print("  tangent =", tangent_res)


if __name__ == "__main__":
    main()
