"""PyTorch tensors as a backend (CPU or CUDA), through array-api-compat's torch namespace.

arrayad does the differentiation itself: the torch tensors it is given are plain data to it.
"""
import torch
from array_api_compat import torch as compat_torch

from . import Backend, _has_negative_step, adv_contiguous, generic_getitem


class TorchBackend(Backend):
    name = "torch"
    xp = compat_torch
    array_types = (torch.Tensor,)

    def new_generator(self, seed):
        return torch.Generator().manual_seed(seed)

    def with_part(self, z, v, imag):
        v = v.to(z.real.dtype)
        return torch.complex(z.real, v) if imag else torch.complex(v, z.imag)

    def owned(self, x):
        # (an expanded tensor - broadcast_to - refuses in-place updates: clone it)
        return x.clone() if 0 in x.stride() and x.numel() > 1 else x

    def generator_state(self, gen):
        return gen.get_state()

    def set_generator_state(self, gen, state):
        gen.set_state(state)
        return gen

    def normal(self, gen, shape, dtype, device):
        return torch.randn(tuple(shape), generator=gen, dtype=dtype).to(device or "cpu")

    def uniform(self, gen, shape, dtype, device):
        return torch.rand(tuple(shape), generator=gen, dtype=dtype).to(device or "cpu")

    def integers(self, gen, low, high, shape, dtype, device):
        return torch.randint(low, high, tuple(shape), generator=gen,
                             dtype=dtype or torch.int64).to(device or "cpu")

    def getitem(self, x, key):
        # torch has NumPy's indexing except negative slice steps and the placement of
        # non-contiguous advanced indices (ints between index arrays count as basic there)
        if _has_negative_step(key) or not adv_contiguous(key):
            return generic_getitem(self.xp, x, key)
        return x[key]

    def index_set(self, x, key, v):
        if not _has_negative_step(key) and adv_contiguous(key):
            out = x.clone()
            out[key] = v
            return out
        pos = self.getitem(torch.arange(x.numel(), device=x.device).reshape(x.shape), key)
        vals = torch.broadcast_to(torch.as_tensor(v, dtype=x.dtype, device=x.device), pos.shape)
        out = x.clone().reshape(-1)
        out[pos.reshape(-1)] = vals.reshape(-1)
        return out.reshape(x.shape)

    def index_add(self, base, key, v):
        # positions selected by key, then one index_add_ on the flat view (accumulates repeats)
        pos = self.getitem(torch.arange(base.numel(), device=base.device).reshape(base.shape), key)
        vals = torch.broadcast_to(torch.as_tensor(v, dtype=base.dtype, device=base.device),
                                  pos.shape)
        out = base.clone().reshape(-1)
        out.index_add_(0, pos.reshape(-1), vals.reshape(-1))
        return out.reshape(base.shape)

    def unique_all(self, x):
        # torch.unique has no first-occurrence indices: the smallest flat position per value
        values, inverse, counts = torch.unique(x.reshape(-1), sorted=True, return_inverse=True,
                                               return_counts=True)
        n = x.numel()
        first = torch.full((values.shape[0],), n, dtype=torch.int64, device=x.device)
        first.scatter_reduce_(0, inverse, torch.arange(n, device=x.device), reduce="amin")
        return values, first, inverse.reshape(x.shape), counts

    def all_finite(self, x):
        if x.device.type != "cpu":
            return None   # (bool() of a CUDA value waits for the device: NOTE [strong zeros])
        return super().all_finite(x)

    def to_numpy(self, x):
        return x.detach().cpu().numpy()

    def default_device(self):
        return torch.device("cpu")

    def devices(self):
        # (not array-api-compat's list: it probes every device type, warning about some, and
        # includes "meta", which holds no values)
        return (torch.device("cpu"),) + tuple(
            torch.device("cuda", i) for i in range(torch.cuda.device_count()))


def make():
    return TorchBackend()
