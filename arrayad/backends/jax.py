"""JAX arrays as plain data (arrayad differentiates; JAX only computes). Arrays are immutable."""
import jax
import jax.numpy as jnp

from . import Backend


class JaxBackend(Backend):
    name = "jax"
    xp = jnp
    array_types = (jax.Array,)

    def _from_numpy(self, a, dtype, device):
        return jnp.asarray(a, dtype=dtype)

    def default_device(self):
        return jax.devices()[0]

    def with_part(self, z, v, imag):
        v = v.astype(z.real.dtype)
        return jax.lax.complex(z.real, v) if imag else jax.lax.complex(v, z.imag)

    # (JAX arrays are immutable: the functional updates are JAX's own ``.at[]``, which follow
    # NumPy's indexing; repeated indices: the last write wins, additions accumulate)
    def index_set(self, x, key, v):
        return x.at[key].set(v)

    def index_add(self, base, key, v):
        return base.at[key].add(v)


def make():
    return JaxBackend()
