"""The workloads of ``transforms.py`` under ``arrayad.jit`` (replay of the staged program), and
the first call of ``jit(grad(chain))``: tracing, the passes and the compilation of the replay."""
import arrayad as ad
from arrayad import func

from . import common
from .common import chain, chain_vec, loss1, mlp_loss


def _jitted(fn, *args):
    """``jit(fn)`` after its first call (the program is traced and compiled in setup)."""
    j = ad.jit(fn)
    j(*args)
    return j


class JitChainGrad:
    """jit(grad) of the 13-op chain; size 1000000 becomes 1000 in smoke mode."""

    params = (common.BACKENDS, [16, 1_000_000])
    param_names = ["backend", "size"]

    def setup(self, backend, size):
        common.get_backend(backend)
        self.x = common.data(backend, "x16" if size == 16 else "x_big")
        self.grad = _jitted(func.grad(chain), self.x)

    def time_grad(self, backend, size):
        self.grad(self.x)


class JitChain16:
    params = common.BACKENDS
    param_names = ["backend"]

    def setup(self, backend):
        common.get_backend(backend)
        self.x = common.data(backend, "x16")
        self.hessian = _jitted(func.hessian(chain), self.x)

    def time_hessian(self, backend):
        self.hessian(self.x)

    def time_first_call(self, backend):
        # a fresh jit each time: trace, optimise and compile jit(grad(chain)), then run it
        ad.jit(func.grad(chain))(self.x)


class JitMLP:
    params = common.BACKENDS
    param_names = ["backend"]

    def setup(self, backend):
        common.get_backend(backend)
        self.x, self.w1, self.w2, self.y = common.data(backend, "mlp_x", "mlp_w1", "mlp_w2",
                                                       "mlp_y")
        args = (self.x, self.w1, self.w2, self.y)
        in_dims = (None, None, 0, 0)
        self.grad = _jitted(func.grad(mlp_loss, argnums=(1, 2)), *args)
        swapped = (self.w1, self.w2, self.x, self.y)
        self.per_sample = _jitted(func.vmap(func.grad(loss1, argnums=(0, 1)), in_dims=in_dims),
                                  *swapped)
        self.vmap_fwd = _jitted(func.vmap(loss1, in_dims=in_dims), *swapped)

    def time_grad(self, backend):
        self.grad(self.x, self.w1, self.w2, self.y)

    def time_per_sample_grads(self, backend):
        self.per_sample(self.w1, self.w2, self.x, self.y)

    def time_vmap_forward(self, backend):
        self.vmap_fwd(self.w1, self.w2, self.x, self.y)


class JitJacobian:
    params = common.BACKENDS
    param_names = ["backend"]

    def setup(self, backend):
        common.get_backend(backend)
        W, b, self.x = common.data(backend, "jac_W", "jac_b", "jac_x")
        layer = common.make_layer(W, b)
        self.jacrev = _jitted(func.jacrev(layer), self.x)
        self.jacfwd = _jitted(func.jacfwd(layer), self.x)

    def time_jacrev(self, backend):
        self.jacrev(self.x)

    def time_jacfwd(self, backend):
        self.jacfwd(self.x)


class JitVmapJacfwd:
    params = common.BACKENDS
    param_names = ["backend"]

    def setup(self, backend):
        common.get_backend(backend)
        self.X = common.data(backend, "vj_X")
        self.fn = _jitted(func.vmap(func.jacfwd(chain_vec)), self.X)

    def time_vmap_jacfwd(self, backend):
        self.fn(self.X)
