"""The workloads of ``benchmarks/compare.py`` on arrayad alone, per backend.

Transforms are built in ``setup`` (as compare.py does), so the timed call is one application.
"""
import arrayad as ad
from arrayad import func

from . import common
from .common import chain, chain_vec, loss1, mlp_loss


class ChainGrad:
    """grad of the 13-op chain ``sum(log(1 + y*y))``; size 1000000 becomes 1000 in smoke mode."""

    params = (common.BACKENDS, [16, 1_000_000])
    param_names = ["backend", "size"]

    def setup(self, backend, size):
        common.get_backend(backend)
        self.x = common.data(backend, "x16" if size == 16 else "x_big")
        self.grad = func.grad(chain)

    def time_grad(self, backend, size):
        self.grad(self.x)


class Chain16:
    params = common.BACKENDS
    param_names = ["backend"]

    def setup(self, backend):
        common.get_backend(backend)
        self.x = common.data(backend, "x16")
        self.hessian = func.hessian(chain)

    def time_eager_backward(self, backend):
        # like torch autograd: a fresh leaf, forward, backward, read .grad
        x = ad.Tensor(self.x, requires_grad=True)
        chain(x).backward()
        return x.grad

    def time_hessian(self, backend):
        self.hessian(self.x)


class MLP:
    """2-layer tanh MLP, batch 64, 128-256-10: grad of the MSE and per-sample work."""

    params = common.BACKENDS
    param_names = ["backend"]

    def setup(self, backend):
        common.get_backend(backend)
        self.x, self.w1, self.w2, self.y = common.data(backend, "mlp_x", "mlp_w1", "mlp_w2", "mlp_y")
        self.grad = func.grad(mlp_loss, argnums=(1, 2))
        in_dims = (None, None, 0, 0)
        self.per_sample = func.vmap(func.grad(loss1, argnums=(0, 1)), in_dims=in_dims)
        self.vmap_fwd = func.vmap(loss1, in_dims=in_dims)

    def time_grad(self, backend):
        self.grad(self.x, self.w1, self.w2, self.y)

    def time_per_sample_grads(self, backend):
        self.per_sample(self.w1, self.w2, self.x, self.y)

    def time_vmap_forward(self, backend):
        self.vmap_fwd(self.w1, self.w2, self.x, self.y)


class Jacobian:
    """jacrev / jacfwd of ``tanh(W @ x + b)``, W 128x128."""

    params = common.BACKENDS
    param_names = ["backend"]

    def setup(self, backend):
        common.get_backend(backend)
        W, b, self.x = common.data(backend, "jac_W", "jac_b", "jac_x")
        layer = common.make_layer(W, b)
        self.jacrev = func.jacrev(layer)
        self.jacfwd = func.jacfwd(layer)

    def time_jacrev(self, backend):
        self.jacrev(self.x)

    def time_jacfwd(self, backend):
        self.jacfwd(self.x)


class VmapJacfwd:
    """``vmap(jacfwd(chain_vec))`` over a 64 x 16 batch (64 Jacobians of 16x16)."""

    params = common.BACKENDS
    param_names = ["backend"]

    def setup(self, backend):
        common.get_backend(backend)
        self.X = common.data(backend, "vj_X")
        self.fn = func.vmap(func.jacfwd(chain_vec))

    def time_vmap_jacfwd(self, backend):
        self.fn(self.X)
