"""PyTorch tensors as a backend (CPU or CUDA), through array-api-compat's torch namespace.

arrayad does the differentiation itself: the torch tensors it is given are plain data to it.
"""
import torch
from array_api_compat import torch as compat_torch

from . import Backend


class TorchBackend(Backend):
    name = "torch"
    xp = compat_torch
    array_types = (torch.Tensor,)

    def seed(self, seed):
        self._gen = torch.Generator().manual_seed(seed)

    def get_rng_state(self):
        return self._gen.get_state()

    def set_rng_state(self, state):
        self._gen.set_state(state)

    def normal(self, shape, dtype, device):
        return torch.randn(tuple(shape), generator=self._gen, dtype=dtype).to(device or "cpu")

    def uniform(self, shape, dtype, device):
        return torch.rand(tuple(shape), generator=self._gen, dtype=dtype).to(device or "cpu")

    def integers(self, low, high, shape, dtype, device):
        return torch.randint(low, high, tuple(shape), generator=self._gen,
                             dtype=dtype or torch.int64).to(device or "cpu")

    def index_add(self, base, key, v):
        # positions selected by key, then one index_add_ on the flat view (accumulates repeats)
        pos = torch.arange(base.numel(), device=base.device).reshape(base.shape)[key]
        vals = torch.broadcast_to(torch.as_tensor(v, dtype=base.dtype, device=base.device), pos.shape)
        out = base.clone().reshape(-1)
        out.index_add_(0, pos.reshape(-1), vals.reshape(-1))
        return out.reshape(base.shape)

    def to_numpy(self, x):
        return x.detach().cpu().numpy()

    def default_device(self):
        return torch.device("cpu")


def make():
    return TorchBackend()
