"""Per-operation overhead: one cheap op (sin of 16 elements) through each layer of arrayad.

Read against each other: ``Eager.time_backend_sin`` is the backend's own call (the floor),
``time_raw_sin`` adds arrayad's dispatch, ``time_tensor_sin*`` the eager Tensor (and tape node),
``Traced`` one op under each transform, and ``BackwardChain`` gives the per-op cost of the
eager tape as the slope between n = 1, 10 and 100.
"""
import arrayad as ad
from arrayad import func

from . import common


class Eager:
    params = common.BACKENDS
    param_names = ["backend"]

    def setup(self, backend):
        self.xp = common.get_backend(backend).xp
        self.raw = common.data(backend, "x16")
        self.t = ad.Tensor(self.raw)
        self.t_grad = ad.Tensor(self.raw, requires_grad=True)

    def time_backend_sin(self, backend):
        self.xp.sin(self.raw)

    def time_raw_sin(self, backend):
        ad.sin(self.raw)

    def time_tensor_sin(self, backend):
        ad.sin(self.t)

    def time_tensor_sin_requires_grad(self, backend):
        # records a tape node (dropped right away: nothing calls backward)
        ad.sin(self.t_grad)


def _sum_sin(x):
    return ad.sum(ad.sin(x))


class Traced:
    params = common.BACKENDS
    param_names = ["backend"]

    def setup(self, backend):
        common.get_backend(backend)
        self.x = common.data(backend, "x16")
        self.X = common.data(backend, "vmap_X")
        self.grad = func.grad(_sum_sin)
        self.vmap = func.vmap(ad.sin)
        self.jvp_args = ((self.x,), (ad.ones_like(self.x),))

    def time_grad_sum_sin(self, backend):
        self.grad(self.x)

    def time_vmap_sin(self, backend):
        self.vmap(self.X)

    def time_jvp_sin(self, backend):
        func.jvp(ad.sin, *self.jvp_args)


class BackwardChain:
    """``y = y * 1.0001`` n times on a 16-element leaf, then ``sum(y).backward()``."""

    params = (common.BACKENDS, [1, 10, 100])
    param_names = ["backend", "n"]

    def setup(self, backend, n):
        common.get_backend(backend)
        self.x = ad.Tensor(common.data(backend, "x16"), requires_grad=True)

    def _forward(self, n):
        y = self.x
        for _ in range(n):
            y = y * 1.0001
        return ad.sum(y)

    def time_forward(self, backend, n):
        # the tape is built and dropped; subtract from time_forward_backward for backward alone
        self._forward(n)

    def time_forward_backward(self, backend, n):
        self._forward(n).backward()
        self.x.grad = None  # no accumulation add on the next call
